"""Row-split while loops: a native loop whose body computes its carried arrays row by row
runs as independent loops, one per thread, each over its own rows, with no hand-off per
iteration.

An RNN cell h = tanh(h @ W + x_t) is such a body: row r of the next h needs row r of h (the
GEMM reads lhs rows; W and xs are loop invariants read whole) and the counter. Splitting each
iteration's region over two threads (loop_split.py) waits for the slower thread every step,
and on a loaded machine that thread is often off its core (scan_rnn, 2 cores at load 4-5
from other processes: split per step median 15-18 ms against 9-13 ms on one thread). Split
per loop, each thread runs the whole loop on its rows and the call ends when the slower one
does: there is one hand-off per call instead of one per step (scan_rnn best 4.2 ms against
XLA's 7.4-8.0 in the same runs; medians at that load 12-13 ms against XLA's 12-18).

A loop qualifies (`plan`) when the body has one row-parallel region (regions.py) and:
* every carried array the region writes is a swapped result (its two buffers shared by the
  threads, each writing only its rows; every thread swaps its own table's entries in step);
* the region reads those arrays only at its own rows (no member's `other_reads`), and its
  GEMMs are gemm_small's (their bits do not depend on the rows a call gets);
* every other step of the body, and the condition, reads neither those arrays nor the
  region's values: they compute the private state (the counter), which every thread keeps
  in its own tables and buffers, and so do their own arenas.
Each thread's share is `NativeWhile._prepare(rows)`: a table set whose region runs its rows
only. Slices (SLICE_SECONDS) run on every thread at once (the caller's share here, the others
posted to the pool; one not started yet is taken back by the caller), so iteration limits,
Ctrl-C and grid polls work as for any native loop. The bits are the one-thread loop's.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.backends.cpu import parallel, regions
from xlapy.backends.cpu.op_emit import TupleKernel
from xlapy.backends.cpu.threads import fn_address
from xlapy.backends.cpu.thunks import bounds

if TYPE_CHECKING:
    from xlapy.backends.cpu.native_loop import NativeWhile, _Prepared

#: Region work (cost) from which a loop runs row-split: below it one thread is as fast.
MIN_COST = 1 << 18
#: Region work a state buffer's binding costs in each share after the first (its address
#: taken and stored from Python, ~0.5-1 us): a loop splits only where half its work is more.
#: An Adam update of 40 parameters of 37 x 19 (281 state buffers, 121 swapped) ran
#: row-split 0.67 ms a call against 0.30 on one thread (XLA 0.34).
BIND_COST = 1 << 12
#: Rows per thread at least.
MIN_ROWS = 8
#: Independent loops per thread (NativePool.share hands them out) and their rows at least.
SHARES_PER_THREAD = 2
MIN_SHARE_ROWS = 16


@dataclass(frozen=True)
class RowPlan:
    """The body's region, its rows and the state elements carried in its rows."""

    region: regions.Region
    rows: int
    carried: frozenset[int]


def plan(nw: NativeWhile) -> RowPlan | None:
    """A RowPlan when the loop can run as independent loops over row ranges (module
    docstring), else None."""
    from xlapy.backends.cpu.loop_steps import steps

    body, cond = nw.body, nw.cond
    todo = steps(body)
    regs = [s for s in todo if isinstance(s, regions.Region)]
    if len(regs) != 1 or any(not isinstance(s, (int, regions.Region)) for s in todo) or any(
            isinstance(body.kernel_specs[s], TupleKernel) for s in todo if isinstance(s, int)):
        return None
    region = regs[0]
    if any(m.gemm is not None and m.gemm.small is None for m in region.members):
        return None
    if any(not isinstance(s, int) for s in steps(cond)):
        return None
    made = {m.slot for m in region.members}
    carried = {k for k, r in enumerate(nw.results) if r in made}
    if not carried or any((k, nw.results[k]) not in nw.swapped for k in carried):
        return None
    body_rows = {s for s, k in nw.state_slots[1] if k in carried}
    cond_rows = {s for s, k in nw.state_slots[0] if k in carried}
    if any(m.other_reads & body_rows for m in region.members):
        return None
    members = {id(m.kernel) for m in region.members if m.kernel is not None}
    for exe, banned in ((body, body_rows | made), (cond, cond_rows)):
        for spec in exe.kernel_specs:
            if id(spec) not in members and set(spec.inputs) & banned:
                return None
    return RowPlan(region, region.rows, frozenset(carried))


def threads_for(nw: NativeWhile, rp: RowPlan) -> int:
    """Threads a call uses: the body's count, when the region is worth it."""
    cost = sum(m.cost for m in rp.region.members)
    if cost < MIN_COST or cost < 2 * BIND_COST * (len(nw.results) + len(nw.swapped)):
        return 1
    return max(1, min(nw.body.num_threads, rp.rows // MIN_ROWS))


def shares(rows: int, threads: int, align: int) -> list[int]:
    """Row cuts of the independent loops: SHARES_PER_THREAD per thread of at least
    MIN_SHARE_ROWS rows, at multiples of `align` (a thread off its core then holds up one
    share, not half the work)."""
    n = max(threads, min(SHARES_PER_THREAD * threads, rows // MIN_SHARE_ROWS))
    return sorted(set(bounds(rows, n, align)))


def prepare(nw: NativeWhile, rp: RowPlan, threads: int) -> list[_Prepared]:
    """One prepared table set per share, each region over its rows."""
    cuts = shares(rp.rows, threads, rp.region.align)
    return [nw._prepare((lo, hi)) for lo, hi in zip(cuts, cuts[1:])]


def run(nw: NativeWhile, rp: RowPlan, preps: list[_Prepared], threads: int,
        state: tuple[Any, ...]) -> tuple[Any, ...]:
    """The loop over every share's rows: carried and pass-through elements shared, the
    private ones copied per share; share 0's buffers are the result."""
    from xlapy.backends.cpu.while_driver import driver

    shared = [np.ascontiguousarray(v) if k in nw.unread else np.array(v, order="C", copy=True)
              for k, v in enumerate(state)]
    swapped = {k for k, _ in nw.swapped}
    others_shared = {k: np.empty_like(shared[k]) for k in rp.carried}
    private = [k for k, r in enumerate(nw.results) if r is not None and k not in rp.carried]
    held: list[tuple[list[np.ndarray], dict[int, np.ndarray]]] = []  # alive until the end
    for p in preps:
        bufs = list(shared)
        if held:
            for k in private:
                bufs[k] = shared[k].copy()
        others = {k: others_shared[k] if k in rp.carried else np.empty_like(bufs[k])
                  for k in swapped}
        nw._bind(p, bufs, others)
        held.append((bufs, others))

    fa = fn_address(driver()[1])
    jobs = [(fa, (ctypes.addressof(p.desc),)) for p in preps]
    pool = parallel.pool(threads)

    def step(n: int) -> int:
        """n iterations (fewer when the loop ends: desc[10]) of every share."""
        for p in preps:
            p.desc[9] = n
            p.desc[10] = 0
        pool.share(jobs, threads)
        return n

    nw._drive(preps[0], step)
    return nw._results(preps[0], *held[0])


__all__ = ["RowPlan", "plan", "prepare", "run", "shares", "threads_for", "MIN_COST"]
