"""Loops inside native loops: a native `while` in the body (or condition) of another is one
step of the outer loop's driver (`xlapy_while_step`, while_driver.py), so the outer loop stays
native instead of running through Python at ~30 us an outer iteration (a 100-step fori_loop
around a 100-step one: 2.6 ms against XLA's 0.25; a scan of 64 steps in a 100-step
fori_loop: 2.9 ms against 0.16).

The step runs the inner loop to its end: it binds the inner loop's tables to the inner
state buffers again (a swapped element may have ended in its other buffer last time), copies
the operands in from wherever the outer tables point now, runs the inner driver, and copies
the results into buffers of the outer loop's own (what its get_tuple_elements read). Inner
state elements the inner loop never writes and nobody reads after it (a scan's xs) are bound
to the operand in place, as at the top level.

An inner run gets a budget of iterations (BUDGET, or the `XLAPY_MAX_WHILE_ITERATIONS` limit
when lower): a native step cannot be interrupted, and a loop whose end depends on its values
might never end. When the budget runs out the outer driver stops before that iteration's
state updates (so the state is the one it began with) and either the limit's error names the
inner loop, as on the Python path, or the outer loop goes on from that state through Python
(native_loop.NativeWhile._python), where each inner run is sliced and Ctrl-C reaches it.
An inner run that long (>= BUDGET iterations) makes the Python path's ~30 us an outer
iteration negligible.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.backends.cpu.thunks import ptr

if TYPE_CHECKING:
    from xlapy.backends.cpu.executable import CpuExecutable
    from xlapy.backends.cpu.native_loop import NativeWhile, _Prepared
    from xlapy.ir import Instruction

#: Most iterations of one inner run in native code (module docstring).
BUDGET = 1 << 16
#: The suffix of the condition's name of a loop that runs at most once (branch_loop's case
#: chains: a branch, not one of the program's loops): its budget is at least 1 under any
#: `XLAPY_MAX_WHILE_ITERATIONS` (a limit of 0 would fail the branch's one trip).
PICKED = ".picked"


@dataclass
class Nested:
    """A native inner loop of a cond/body: its plan, instruction and operand element slots."""

    nw: NativeWhile
    instr: Instruction
    ins: list[int]


@dataclass
class Step:
    """One prepared nested step: its descriptor words, the inner loop's prepared tables."""

    words: Any
    nested: Nested
    inner: _Prepared


def plan(exe: CpuExecutable, instr: Instruction, nw: NativeWhile, ins: list[int]
         ) -> Nested | None:
    """A Nested when `instr` (planned as `nw` in `exe`) may run as a step of an outer
    native loop: its operands arrays (a tuple op's elements when XLA-style), its results
    read by get_tuple_elements only (or the array itself)."""
    if nw.tupled:
        t = instr.operands[0]
        if t.opcode != "tuple" or any(id(o) not in exe.slot for o in t.operands):
            return None
        ins = [exe.slot[id(o)] for o in t.operands]
    if instr.shape.is_tuple and any(u.opcode != "get_tuple_element" for u in instr.users):
        return None
    return Nested(nw, instr, ins)


def _outs(exe: CpuExecutable, n: Nested) -> list[list[int]] | None:
    """The outer slots that hold each inner result element (None: one has no slot)."""
    instr = n.instr
    if not instr.shape.is_tuple:
        return [[exe.slot[id(instr)]]]
    outs: list[list[int]] = [[] for _ in instr.shape.tuple_shapes]
    for u in instr.users:
        if id(u) not in exe.slot:
            return None
        outs[u.attrs.index].append(exe.slot[id(u)])
    return outs


def valid(exe: CpuExecutable, n: Nested | None) -> bool:
    return n is not None and _outs(exe, n) is not None


def in_place(outer: NativeWhile) -> dict[str, dict[int, int]]:
    """The outer loop's state elements an inner loop of its body updates in place: by inner
    loop name, {inner element m: the body slot of the inner result m the outer loop takes
    as state element k}. The inner loop then runs on the outer state buffer itself (no copy
    in, none out: an edit distance's row loop copied its whole table in and out for each
    row, O(n^3)), and the outer loop passes k through, its result slot bound to the state
    buffer (as loop_inplace.py). When:

    - outer result k is inner result m, whose operand is outer state k (read by no later
      step of the body, nor by another operand of the inner loop);
    - the inner loop writes m every iteration where the state buffer is (a window, an
      in-place carry or a copy; not swapped, moved or unread);
    - the inner loop and every inner loop after it have a known trip count within BUDGET:
      an inner run never stops the outer loop half way (which then goes on through Python
      from the iteration's start: a state already changed), unless the iteration limit
      is lower, whose error ends the run anyway."""
    from xlapy.backends.cpu.loop_steps import steps
    from xlapy.passes.while_loop_simplifier import trip_count

    body = outer.body
    if outer.moves or outer.windows is not None or (
            outer.row_plan is not None and outer.row_threads > 1):
        return {}
    nested = [s for s in steps(body) if isinstance(s, Nested)]
    if not nested:
        return {}
    instrs = body._thunk_instrs
    at = {id(i): q for q, i in enumerate(instrs)}
    reads = body._thunk_reads()
    slots: dict[int, list[int]] = {}
    for s, k in outer.state_slots[1]:
        slots.setdefault(k, []).append(s)
    trips = [(t := trip_count(n.instr)) is not None and t <= BUDGET for n in nested]
    found: dict[str, dict[int, int]] = {}
    for j, n in enumerate(nested):
        if not all(trips[j:]) or id(n.instr) not in at:
            continue
        inner, pos = n.nw, at[id(n.instr)]
        outs = _outs(body, n)
        assert outs is not None
        fixed = {k for k, _ in inner.swapped} | {x for kj in inner.moves for x in kj} | \
            set(inner.unread)
        for k, r in enumerate(outer.results):
            m = next((m for m, ss in enumerate(outs) if r in ss), None) \
                if r is not None else None
            if m is None or m in fixed or n.ins[m] not in slots.get(k, ()) or \
                    sum(s in slots[k] for s in n.ins) != 1:
                continue
            if any(s in rd for q, rd in enumerate(reads) if q > pos for s in slots[k]):
                continue
            found.setdefault(n.instr.name, {})[m] = r
            outer.results[k] = None
            outer.state_slots[1].append((r, k))
    return found


def entry(p: _Prepared, exe: CpuExecutable, n: Nested, table: int, bail: int,
          here: dict[int, int] | None = None) -> list[int]:
    """The driver's (function, argument, outer) words of nested step `n` in `exe`'s table at
    address `table`; `bail`: the address of the outer descriptor's d[11]; `here`: the inner
    elements updated in the outer state buffer (`in_place`: element -> its result slot)."""
    from xlapy.backends.cpu.while_driver import driver

    here = here or {}
    nw = n.nw
    inner = nw._prepare()
    shapes = [exe.shapes[s] for s in n.ins]
    bufs = [np.empty(sh.dimensions, sh.dtype) for sh in shapes]
    others = {k: np.empty_like(bufs[k]) for k, _ in nw.swapped}
    nw._bind(inner, bufs, others)
    # words holding the fixed pointers the tables are reset to: bufs[k], then others[j]
    fixed = (ctypes.c_int64 * (len(bufs) + len(nw.swapped)))(
        *[ptr(b) for b in bufs], *[ptr(others[k]) for k, _ in nw.swapped])
    base = ctypes.addressof(fixed)
    buf_at = [base + 8 * k for k in range(len(bufs))]
    resets: list[tuple[int, int]] = []  # (dst address, src address)
    for tab, sslots in zip(inner.tables, nw.state_slots):
        for s, k in sslots:
            src = table + 8 * n.ins[k] if k in nw.unread or k in here else buf_at[k]
            resets.append((ctypes.addressof(tab) + 8 * s, src))
    b: Any = inner.binder
    for m in here:  # the outer state buffer: the fused loop's and the copies' destination
        resets.append((ctypes.addressof(inner.statep) + 8 * m, table + 8 * n.ins[m]))
        pos, ks = b.from_state
        resets += [(ctypes.addressof(inner.copies) + 8 * int(q), table + 8 * n.ins[m])
                   for q, k in zip(pos, ks) if int(k) == m]
    for j, (k, r) in enumerate(nw.swapped):
        resets.append((ctypes.addressof(inner.tables[1]) + 8 * r,
                       base + 8 * (len(bufs) + j)))
        resets.append((ctypes.addressof(inner.cells) + 8 * j, buf_at[k]))
    outs = _outs(exe, n)
    assert outs is not None
    final = {k: ctypes.addressof(inner.cells) + 8 * j for j, (k, _) in enumerate(nw.swapped)}
    final.update((m, table + 8 * n.ins[m]) for m in here)
    copy_in = [(buf_at[k], table + 8 * s, x.nbytes) for k, (s, x) in enumerate(zip(n.ins, bufs))
               if k not in nw.unread and k not in here and x.nbytes]
    keep: list[Any] = [inner, bufs, others, fixed]
    copy_out = []
    for k, slots in enumerate(outs):
        for s in slots:
            if here.get(k) == s:  # (bound to the outer state buffer: the result is there)
                continue
            out = np.empty_like(bufs[k])
            keep.append(out)
            ctypes.c_int64.from_address(table + 8 * s).value = ptr(out)
            if out.nbytes:
                copy_out.append((table + 8 * s, final.get(k, buf_at[k]), out.nbytes))
    arrays = [np.array([w for pair in resets for w in pair] or [0], np.int64),
              np.array([w for t in copy_in for w in t] or [0], np.int64),
              np.array([w for t in copy_out for w in t] or [0], np.int64)]
    words = np.array([len(resets), arrays[0].ctypes.data, len(copy_in), arrays[1].ctypes.data,
                      ctypes.addressof(inner.desc), len(copy_out), arrays[2].ctypes.data,
                      BUDGET, bail], np.int64)
    p.keep += [*keep, *arrays, words]
    p.splits += inner.splits
    p.nested.append(Step(words, n, inner))
    return [driver()[0].address("xlapy_while_step"), int(words.ctypes.data), 0]


def set_budgets(p: _Prepared, budget: int) -> None:
    """Every nested step's iteration budget (w[7]), at every depth."""
    for st in p.nested:
        st.words[7] = max(budget, 1) if st.nested.instr.called[0].name.endswith(PICKED) \
            else budget
        set_budgets(st.inner, budget)


def exhausted(p: _Prepared) -> Instruction | None:
    """The inner loop that ran out of its budget (the deepest unfinished one), if any."""
    for st in p.nested:
        if not st.inner.desc[10]:
            deeper = exhausted(st.inner) if st.inner.desc[11] else None
            return deeper if deeper is not None else st.nested.instr
    return None


__all__ = ["Nested", "plan", "valid", "entry", "set_budgets", "exhausted", "BUDGET", "PICKED"]
