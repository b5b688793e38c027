"""What `xlapy run` needs from the process grid (xlapy/cli/main.py calls in here).

- `run_on_grid`: a module whose own entry declares `mhlo.num_replicas` /
  `mhlo.num_partitions` > 1 runs its entry on every process of that grid (SPMD): the
  threaded grid by default, the MPI ranks under `--distributed mpi`. A module with
  shardings (GSPMD / Shardy) is a global program: it is partitioned (passes/spmd), each
  process runs its partition on its shards, and the global results come back once.
- `cmd_run_mpi`: `mpiexec -n N python -m xlapy run --distributed mpi FILE...`: every rank
  runs every chunk (so each reaches the same grids in the same order); a grid with N
  processes puts process i on rank i, other grids run in threads inside each rank. Only rank 0
  prints; the exit status is the worst of all ranks, the same on every rank; a rank whose
  output differs from rank 0's is shown under rank 0's.
"""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from xlapy.errors import CollectiveError, XlapyError
from xlapy.interpreter import RuntimeState
from xlapy.ir import Computation, Module
from xlapy.ops.collectives import new_process_grid


def grid_shape(module: Module) -> tuple[int, int]:
    return int(getattr(module, "num_replicas", 1)), int(getattr(module, "num_partitions", 1))


def run_on_grid(module: Module, comp: Computation, args: Sequence[Any],
                runtime: RuntimeState | None = None, backend: str = "interpreter") -> list[Any]:
    """Run `comp` on the module's `num_replicas x num_partitions` grid; returns one value per
    process (row-major, replica-major). `args` is either one argument list every process
    gets, or one list per process concatenated in that order."""
    nr, np_ = grid_shape(module)
    from xlapy.passes.spmd import has_shardings

    if comp is module.entry and has_shardings(module):  # global program: partitioned first
        return [run_sharded(module, args, backend)]
    size = nr * np_
    k = len(comp.parameters)
    if len(args) == k:
        per = [list(args)] * size
    elif k and len(args) == k * size:
        per = [list(args[i * k:(i + 1) * k]) for i in range(size)]
    else:
        raise XlapyError(f"{comp.name} runs on a {nr}x{np_} process grid and takes {k} "
                         f"argument(s): give {k} (every process) or {k * size} (one list per "
                         f"process, process-major), got {len(args)}")
    grid = new_process_grid(nr, np_)
    return list(grid.run_programs([comp] * size, per, runtime=runtime, backend=backend))


def run_sharded(module: Module, args: Sequence[Any], backend: str) -> Any:
    """A sharded module's global results from global arguments: each process (an MPI rank
    under `--distributed mpi`) runs its partition on its shards."""
    from xlapy.distributed.sharded import ShardedProgram

    prog = ShardedProgram(module, backend)
    return prog(*args)


def cmd_run_mpi(args: argparse.Namespace, out: TextIO,
                cmd_run: Callable[[argparse.Namespace, TextIO], int]) -> int:
    """`xlapy run --distributed mpi`: see the module docstring."""
    try:
        from xlapy.distributed.mpi import _require_mpi, use_mpi

        mpi = _require_mpi()
        use_mpi()
    except CollectiveError as e:
        out.write(f"error: {e}\n")
        return 2
    world = mpi.COMM_WORLD
    buf = io.StringIO()
    try:
        rc = cmd_run(args, buf)
    except Exception as e:  # noqa: BLE001 - every rank must reach the exit-status vote
        buf.write(f"error on rank {world.rank}: {type(e).__name__}: {e}\n")
        rc = 2
    texts = world.gather((rc, buf.getvalue()), root=0)
    worst = world.allreduce(rc, op=mpi.MAX)
    if world.rank == 0:
        assert texts is not None
        mine = texts[0][1]
        out.write(mine)
        for rank, (code, text) in enumerate(texts[1:], start=1):
            if text != mine or code != texts[0][0]:
                out.write(f"rank {rank} (exit status {code}) printed differently:\n")
                out.write("".join("  " + line + "\n" for line in text.splitlines()))
        out.flush()
    return int(worst)


__all__ = ["cmd_run_mpi", "grid_shape", "run_on_grid", "run_sharded"]
