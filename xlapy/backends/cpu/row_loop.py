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

A loop qualifies (`plan`) when the body has one row-parallel region (regions.py), or no
region and kernels that compute rows (a vector's elements count as rows: z <- z w over a
vector, whose share then stays in its core's L2 for the whole loop), and:
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
import math
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
#: A step's work from which kernels alone (no region) may split a loop (`_kernels_worth`),
#: and the work over all its trips from which they do.
MIN_KERNEL_STEP_COST = 1 << 13
KERNEL_MIN_WORK = 1 << 23
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
    """What runs on a share's rows (a region's members, or kernels alone: `kernels`, their
    body steps), those rows, the split points they all accept and the state elements carried
    in their rows."""

    members: tuple[regions.Member, ...]
    rows: int
    align: int
    carried: frozenset[int]
    kernels: frozenset[int] = frozenset()


def plan(nw: NativeWhile) -> RowPlan | None:
    """A RowPlan when the loop can run as independent loops over row ranges (module
    docstring), else None."""
    from xlapy.backends.cpu.loop_steps import steps

    body, cond = nw.body, nw.cond
    todo = steps(body)
    regs = [s for s in todo if isinstance(s, regions.Region)]
    if len(regs) > 1 or any(not isinstance(s, (int, regions.Region)) for s in todo) or any(
            isinstance(body.kernel_specs[s], TupleKernel) for s in todo if isinstance(s, int)):
        return None
    if regs:
        members, kernels, align = regs[0].members, [], regs[0].align
        if any(m.gemm is not None and m.gemm.small is None for m in members):
            return None
    else:  # kernels alone (a vector's elements are its rows: regions.kernel_member)
        got = _kernel_members(body, [s for s in todo if isinstance(s, int)])
        if got is None:
            return None
        members, kernels = got
        align = math.lcm(*(m.kernel.align for m in members if m.kernel is not None))
    if any(not isinstance(s, int) for s in steps(cond)):
        return None
    made = {m.slot for m in members}
    carried = {k for k, r in enumerate(nw.results) if r in made}
    if not carried or any((k, nw.results[k]) not in nw.swapped for k in carried):
        return None
    body_rows = {s for s, k in nw.state_slots[1] if k in carried}
    cond_rows = {s for s, k in nw.state_slots[0] if k in carried}
    if any(m.other_reads & body_rows for m in members):
        return None
    inside = {id(m.kernel) for m in members if m.kernel is not None}
    for exe, banned in ((body, body_rows | made), (cond, cond_rows)):
        for spec in exe.kernel_specs:
            if id(spec) not in inside and set(spec.inputs) & banned:
                return None
    return RowPlan(tuple(members), members[0].rows, align, frozenset(carried),
                   frozenset(kernels))


def _kernel_members(body: Any, todo: list[int]
                    ) -> tuple[list[regions.Member], list[int]] | None:
    """The body's kernels computing rows of one row count (regions.kernel_member), none
    reading another's result but at its own rows, and their steps; None if there are none.
    A loop whose state is a vector updated element-wise (z <- z w in a fori_loop) split per
    step handed each step's halves across cores and read its 1.5 MB from L3 every trip; each
    share of a row-split loop keeps its rows in its core's L2 for the whole loop."""
    by_slot = {m.slot: m for m in body.row_members if m is not None}
    steps = [s for s in todo if body.kernel_specs[s].output in by_slot]
    members = [by_slot[body.kernel_specs[s].output] for s in steps]
    made: set[int] = set()
    for m in members:
        if m.rows != members[0].rows or m.other_reads & made:
            return None
        made.add(m.slot)
    return (members, steps) if members else None


def threads_for(nw: NativeWhile, rp: RowPlan) -> int:
    """Threads a call uses: the body's count, when the region is worth it, or the kernels
    alone (`_kernels_worth`)."""
    cost = sum(m.cost for m in rp.members)
    worth = _kernels_worth(nw, rp, cost) if rp.kernels else cost >= MIN_COST
    if not worth or cost < 2 * BIND_COST * (len(nw.results) + len(nw.swapped)):
        return 1
    return max(1, min(nw.body.num_threads, rp.rows // MIN_ROWS))


def _kernels_worth(nw: NativeWhile, rp: RowPlan, cost: int) -> bool:
    """Kernels alone split a loop whose steps a one-thread loop runs (NATIVE_SPLIT_COST: a
    bigger step splits per step, in place) and whose known trips add up to KERNEL_MIN_WORK
    (complex elements' ops counted 4 each), the ~70 us a split call costs more (its state
    copied and bound per share, the workers woken): z <- z w over 64K c64, 100 trips, 4.3 ->
    2.4 ms on 2 threads (each share's rows stay in its core's L2); x <- 0.99 x + y over 16K
    f32, 100 trips (0.19 ms) ran 0.24 ms split."""
    from xlapy.backends.cpu.native_loop import NATIVE_SPLIT_COST
    from xlapy.passes.while_loop_simplifier import trip_count

    trips = trip_count(nw.instruction) or 1
    weight = 4 if any(m.instr.shape.element_type.is_complex for m in rp.members) else 1
    return MIN_KERNEL_STEP_COST <= cost < NATIVE_SPLIT_COST and \
        cost * weight * trips >= KERNEL_MIN_WORK


def shares(rows: int, threads: int, align: int) -> list[int]:
    """Row cuts of the independent loops: SHARES_PER_THREAD per thread of at least
    MIN_SHARE_ROWS rows, at multiples of `align` (a thread off its core then holds up one
    share, not half the work)."""
    n = max(threads, min(SHARES_PER_THREAD * threads, rows // MIN_SHARE_ROWS))
    return sorted(set(bounds(rows, n, align)))


def prepare(nw: NativeWhile, rp: RowPlan, threads: int) -> list[_Prepared]:
    """One prepared table set per share, each region over its rows."""
    cuts = shares(rp.rows, threads, rp.align)
    return [nw._prepare((lo, hi)) for lo, hi in zip(cuts, cuts[1:])]


def run(nw: NativeWhile, rp: RowPlan, preps: list[_Prepared], threads: int,
        state: tuple[Any, ...]) -> tuple[Any, ...]:
    """The loop over every share's rows: carried and pass-through elements shared, the
    private ones copied per share; share 0's buffers are the result."""
    from xlapy.backends.cpu.while_driver import driver

    shared = [np.asarray(v, order="C") if k in nw.unread else np.array(v, order="C", copy=True)
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
