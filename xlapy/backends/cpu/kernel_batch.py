"""Consecutive unsplit kernels of an executable run in one native call.

Each kernel thunk cost ~1.2-1.7 us of Python (the closure, the table's address, a ctypes
call converting its arguments) around a kernel whose work on a few elements takes
nanoseconds: jax.random.randint of 50 values ran 17 kernel thunks, ~30 us of its 100 (XLA:
9 us). A run of two or more of them (split_thunk's `native` attribute: one chunk, no
aliasing) becomes one thunk that allocates the members' fresh results, then calls each
kernel in order through claim_run (threads.py) over a job table made once per pointer table
(per call for a private one). The same functions on the same arguments in the same order:
the same bits.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from xlapy.backends.cpu import recycle, threads
from xlapy.backends.cpu.thunks import Fresh, Thunk, ptr

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


def _batched(members: list[tuple[int, int, list[Fresh]]], keep: dict[int, Any],
             shared_table: Callable[[], Any]) -> Thunk:
    fresh = [f for _, _, fs in members for f in fs]
    shared: list[Any] = [None, None, 0]  # the shared table, its job table and address
    claim: list[Any] = []  # claim_run's ctypes function, fetched on the first run

    def jobs(t: Any) -> Any:
        addr = ctypes.addressof(t)
        return threads.job_table([(fa, (addr, 0, extent)) for fa, extent, _ in members])

    def run(t: Any, v: list[Any], rt: Any, pr: Any) -> None:
        for s, dims, dtype in fresh:
            arr = recycle.output(keep, s, dims, dtype)
            v[s] = arr
            t[s] = ptr(arr)
        if t is shared[0]:
            shared[1][0] = 0  # claim_run's next job
            claim[0](shared[2])
            return
        table = jobs(t)
        if t is shared_table():
            shared[:] = [t, table, table.ctypes.data]
        if not claim:
            claim.append(threads.claim_here())
        claim[0](table.ctypes.data)

    run.batched = len(members)  # type: ignore[attr-defined]
    return run


__all__ = ["MIN_KERNELS", "batch"]
