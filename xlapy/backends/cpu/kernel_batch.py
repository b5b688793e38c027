"""Consecutive unsplit kernels of an executable run in one native call.

Each kernel thunk cost ~1.2-1.7 us of Python (the closure, the table's address, a ctypes
call converting its arguments) around a kernel whose work on a few elements takes
nanoseconds: jax.random.randint of 50 values ran 17 kernel thunks, ~30 us of its 100 (XLA:
9 us). A run of two or more of them (split_thunk's `native` attribute: one chunk, no
aliasing) becomes one thunk that allocates the members' fresh results, then calls each
kernel in order through claim_run (threads.py) over a job table made once per pointer table
(per call for a private one). The same functions on the same arguments in the same order:
the same bits.

A small dot_general that gemm_small computes whole on one thread (`gemm_member`) is a member
too: its rows function over a descriptor naming the table's slots (regions.gemm_descriptor,
as a native loop's GEMM step), the same loop nest as its thunk's direct call: expm's
top level alternates six 16 x 16 products with kernels, ~5 us of Python each.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from xlapy.backends.cpu import recycle, threads
from xlapy.backends.cpu.conv import SPLIT_MACS
from xlapy.backends.cpu.thunks import Thunk, ptr

if TYPE_CHECKING:
    from xlapy.ir import Instruction

#: Fewest consecutive kernels worth a batch (one is its own ctypes call either way).
MIN_KERNELS = 2


def batch(thunks: list[Thunk], keep: dict[int, Any], shared_table: Callable[[], Any]
          ) -> list[Thunk]:
    """`thunks` with each run of at least MIN_KERNELS native kernel thunks as one thunk;
    `shared_table()`: the executable's table, whose job table is kept."""
    out: list[Thunk] = []
    run: list[Thunk] = []

    def close() -> None:
        if len(run) >= MIN_KERNELS:
            out.append(_batched([th.native for th in run], keep, shared_table))  # type: ignore[attr-defined]
        else:
            out.extend(run)
        run.clear()

    for th in thunks:
        if getattr(th, "native", None) is not None:
            run.append(th)
        else:
            close()
            out.append(th)
    close()
    return out


def gemm_member(run: Thunk, instr: Instruction, slot: dict[int, int], fresh: int | None
                ) -> None:
    """Make a dot's thunk a batch member when gemm_small computes it whole on one thread
    (under conv.SPLIT_MACS its thunk never splits): its member's function is the rows
    function, its argument a descriptor of the table (made with the job table). `fresh`:
    the slot of its result when that is a fresh array per call (None: an arena slot)."""
    from xlapy.backends.cpu import gemm_small, library, regions

    small = library._small(instr)  # (the shape its thunk runs: library.dot_plan's)
    g = regions.gemm_of(instr, slot, flat=True) if small is not None else None
    if g is None or g.small != gemm_small.later(small) or g.m * g.n * g.k >= SPLIT_MACS:
        return
    sh = instr.shape
    outs = [] if fresh is None else [(fresh, sh.dimensions, sh.dtype)]
    run.native = (g.small, g.m, outs,  # type: ignore[attr-defined]
                  lambda table: regions.gemm_descriptor(g, table))


def _batched(members: list[tuple[Any, ...]], keep: dict[int, Any],
             shared_table: Callable[[], Any]) -> Thunk:
    fresh = [f for m in members for f in m[2]]
    shared: list[Any] = [None, None, 0]  # the shared table, its job table and address
    claim: list[Any] = []  # claim_run's ctypes function, fetched on the first run

    def jobs(t: Any) -> Any:
        """The job table for pointer table t (holding the members' descriptors: `.descs`)."""
        addr = ctypes.addressof(t)
        descs = [m[3](addr) if len(m) > 3 else None for m in members]
        table = threads.job_table([
            (m[0] if d is None else m[0].rows_address, (addr if d is None else d.ctypes.data,
                                                         0, m[1]))
            for m, d in zip(members, descs)])
        return _Jobs(table, descs)

    def run(t: Any, v: list[Any], rt: Any, pr: Any) -> None:
        for s, dims, dtype in fresh:
            arr = recycle.output(keep, s, dims, dtype)
            v[s] = arr
            t[s] = ptr(arr)
        if t is shared[0]:
            shared[1].table[0] = 0  # claim_run's next job
            claim[0](shared[2])
            return
        table = jobs(t)
        if t is shared_table():
            shared[:] = [t, table, table.table.ctypes.data]
        if not claim:
            claim.append(threads.claim_here())
        claim[0](table.table.ctypes.data)

    run.batched = len(members)  # type: ignore[attr-defined]
    return run


class _Jobs(NamedTuple):
    table: np.ndarray
    descs: list[np.ndarray | None]  # (kept alive with the table that points at them)


__all__ = ["MIN_KERNELS", "batch", "gemm_member"]
