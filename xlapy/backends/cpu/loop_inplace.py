"""State elements a native loop's body kernel writes over their own buffer (native_loop.py).

A swapped element (a result some body kernel writes every iteration) had a second buffer the
kernel wrote while reading the first, the two exchanged after the body: `c = c + x[i]` over a
64 KB carry read the carry, read a line of the other buffer for every line it wrote (the
store's read for ownership) and wrote it: three streams of L2 traffic where an in-place
update has two (a fori_loop accumulating a 64 x 256 dynamic slice: 1.8 us an iteration, XLA
1.2). When the kernel reads the element only at the element (row) it writes (inplace.py's
test, the one the arena uses to write a kernel over a dying temporary) and no step of the
body reads it later, the kernel's result slot is bound to the state buffer itself: the
element is then passed through (the buffer holds the new value after the body), no swap.
Not for row-split loops (row_loop.py: each share swaps its rows), window updates
(dus_window.py) or loops with moves, whose bookkeeping assumes swapped results, nor in a body
with a nested loop or branch: one that runs out of its budget hands the outer loop to the
Python path (nested_loop.py), which runs the body with result buffers of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xlapy.backends.cpu.native_loop import NativeWhile


def plan(nw: NativeWhile) -> list[tuple[int, int]]:
    """The (state element, result slot) pairs of nw.swapped the body can update in place."""
    body = nw.body
    if nw.windows is not None or nw.moves or body.chains or not nw.swapped or \
            (nw.row_plan is not None and nw.row_threads > 1) or \
            any(i.opcode in ("while", "case", "if") for i in body._thunk_instrs):
        return []
    eligible = body._in_place_operands()
    outs = [body.slot[id(i)] for i in body._thunk_instrs]
    ins = body._thunk_reads()
    fresh = body._native | set(body._kernel_inputs())
    whole = body._region_whole_reads()
    pos = {s: p for p, s in enumerate(outs)}
    slots: dict[int, list[int]] = {}
    for s, k in nw.state_slots[1]:
        slots.setdefault(k, []).append(s)
    found = []
    for k, r in nw.swapped:
        at = pos.get(r)
        if at is None or not slots.get(k):
            continue
        ok = True
        for s in slots[k]:
            readers = [p for p, reads in enumerate(ins) if s in reads]
            ok = ok and all(p < at or (p == at and s in eligible.get(r, ())) for p in readers) \
                and all(outs[p] in fresh for p in readers) and s not in whole.get(r, ())
        if ok:
            found.append((k, r))
    return found


def apply(nw: NativeWhile) -> frozenset[int]:
    """Make plan(nw)'s elements pass-through ones whose result slot is bound to their state
    buffer (a body state slot: every binding of the loop points it there); their result
    slots (which `_prepare` then leaves unallocated)."""
    pairs = plan(nw)
    for k, r in pairs:
        nw.swapped.remove((k, r))
        nw.results[k] = None
        nw.state_slots[1].append((r, k))
    if pairs:
        nw.row_plan = None  # (a single-thread plan: unused)
    return frozenset(r for _, r in pairs)


__all__ = ["plan", "apply"]
