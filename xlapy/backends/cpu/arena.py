"""The executable's arena of temporaries: live ranges over the thunk schedule, packed best-fit
by buffer assignment's heap (`passes.buffer_assignment.pack`), so temporaries that are never
live at once share memory (and stay in cache).

A step is one thunk; the members of a row-parallel region share one step, since threads run
them at once on different rows. A thunk that is not native code (tuple, get_tuple_element,
control flow, interpreter kernels) may return views of its operands, so its result and
operands form one alias group, live as long as any member is; a group holding a result of
the computation is live to the end.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from xlapy.passes.buffer_assignment import ALIGN, Allocation, pack


@dataclass
class Step:
    """One thunk instruction: its step, the slot it writes, the slots it reads, and whether
    it writes fresh memory of its own (kernels, BLAS) rather than possibly a view."""

    step: int
    out: int
    ins: list[int]
    fresh_memory: bool


def schedule(outs: list[int], ins: list[list[int]], group: dict[int, str],
             native: set[int]) -> list[Step]:
    """Steps of the thunk instructions in program order (their slots `outs`, read slots `ins`);
    consecutive slots of one region `group` share a step; `native` slots are written by
    native code into memory of their own."""
    steps: list[Step] = []
    step, prev = -1, None
    for s, reads in zip(outs, ins):
        g = group.get(s)
        if g is None or g != prev:
            step += 1
        prev = g
        steps.append(Step(step, s, list(reads), s in native))
    return steps


def offsets(steps: list[Step], sizes: dict[int, int], results: Iterable[int],
            share: Mapping[int, int] | None = None) -> tuple[dict[int, int], int]:
    """(slot -> byte offset, arena bytes) for the temporaries `sizes` (slot -> bytes).
    `share`: slot -> the slot whose memory it is written over (inplace.py); both get one
    allocation, live from the first's start to the last's end."""
    parent: dict[int, int] = {}

    def find(s: int) -> int:
        while parent.get(s, s) != s:
            parent[s] = parent.get(parent[s], parent[s])
            s = parent[s]
        return s

    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for st in steps:
        first.setdefault(st.out, st.step)
        last[st.out] = max(last.get(st.out, st.step), st.step)
        for i in st.ins:
            last[i] = max(last.get(i, st.step), st.step)
            if not st.fresh_memory:
                parent[find(i)] = find(st.out)
    end = max((st.step for st in steps), default=0) + 1
    lo: dict[int, int] = {}
    hi: dict[int, int] = {}
    for s in set(first) | set(last):
        g = find(s)
        lo[g] = min(lo.get(g, end), first.get(s, 0))
        hi[g] = max(hi.get(g, 0), last.get(s, 0))
    for s in results:
        hi[find(s)] = end
    share = share or {}

    def home(s: int) -> int:
        while s in share:
            s = share[s]
        return s

    span: dict[int, tuple[int, int, int]] = {}  # home -> (bytes, first step, last step)
    for s, n in sizes.items():
        h = home(s)
        b0, l0, h0 = span.get(h, (0, end, 0))
        span[h] = (max(b0, n), min(l0, lo.get(find(s), 0)), max(h0, hi.get(find(s), end)))
    allocs = {h: Allocation(-(-n // ALIGN) * ALIGN, a, z) for h, (n, a, z) in span.items()}
    total = pack(list(allocs.values()))
    return {s: allocs[home(s)].offset for s in sizes}, total


__all__ = ["Step", "schedule", "offsets"]
