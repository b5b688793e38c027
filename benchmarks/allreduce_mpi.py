"""all_reduce of 64 MB f32 over MPI ranks: xlapy (an XlaBuilder AllReduce run by the MPI grid)
vs raw mpi4py `Allreduce`, interleaved in the same run. Not a test.

    mpiexec -n 2 python benchmarks/allreduce_mpi.py [--repeats 20] [--mbytes 64]

Four variants, each timed between barriers, rounds interleaved so load drifts hit all alike:
  raw reused   `Allreduce(x, out)` into one preallocated (already paged-in) buffer
  raw fresh    `Allreduce(x, np.empty_like(x))`: a new result buffer per call
  xlapy        the program run on this rank's process of the MPI grid; the grid reduces into
               a pooled buffer, reused once the previous result is dropped (the caller keeps
               the latest result, as a program would)
  xlapy fresh  the same with the pool off: a new result buffer per call
Prints the median (and min) of each and the ratios raw/xlapy (target >= 0.9 against raw
reused). The machine's load matters: run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import env  # noqa: E402

env.prepare()  # first, before OpenBLAS loads: drops forced kernels (re-exec), benchmarks/env.py

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

from xlapy.builder import ops  # noqa: E402
from xlapy.builder.xla_builder import XlaBuilder  # noqa: E402
from xlapy.distributed.mpi import MpiGrid  # noqa: E402
from xlapy.interpreter import Interpreter  # noqa: E402
from xlapy.types import ElementType, Shape  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--mbytes", type=int, default=64)
    opts = parser.parse_args()
    world = MPI.COMM_WORLD
    if world.rank == 0:
        print(env.header(), flush=True)
    n = opts.mbytes * 1024 * 1024 // 4
    x = np.random.default_rng(world.rank).standard_normal(n).astype(np.float32)

    add = XlaBuilder("add")
    f32 = Shape.scalar(ElementType.F32)
    ops.Add(add.parameter(0, f32), add.parameter(1, f32))
    b = XlaBuilder("allreduce")
    ops.AllReduce(b.parameter(0, Shape.array(ElementType.F32, (n,))), add.build())
    comp = b.build().module.entry_computation()

    grid = MpiGrid(world.size, 1, timeout=120)
    proc = grid.process
    raw_out = np.empty_like(x)
    kept: dict[str, object] = {}

    def raw_reused() -> None:
        world.Allreduce(x, raw_out, op=MPI.SUM)

    def raw_fresh() -> None:
        kept["raw"] = out = np.empty_like(x)
        world.Allreduce(x, out, op=MPI.SUM)

    def xlapy_pooled() -> None:
        # The program on this rank alone (results stay local, as on a device).
        proc.buffers.enabled = True
        kept["x"] = Interpreter(process=proc).run(comp, [x])

    def xlapy_fresh() -> None:
        proc.buffers.enabled = False
        kept["xf"] = Interpreter(process=proc).run(comp, [x])

    variants: dict[str, Callable[[], None]] = {
        "raw reused": raw_reused, "raw fresh": raw_fresh,
        "xlapy": xlapy_pooled, "xlapy fresh": xlapy_fresh}
    times: dict[str, list[float]] = {k: [] for k in variants}
    for i in range(opts.repeats + 2):
        for name, fn in variants.items():
            world.Barrier()
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            if i >= 2:  # two warm-up rounds
                times[name].append(world.allreduce(dt, op=MPI.MAX))
    if world.size <= 2:  # two-rank float sums are order-free, so MPI matches exactly
        assert np.array_equal(kept["x"], raw_out), "xlapy all_reduce differs from MPI Allreduce"
        assert np.array_equal(kept["xf"], raw_out)
    if world.rank == 0:
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"all_reduce {opts.mbytes} MB f32 over {world.size} ranks, {opts.repeats} "
              f"rounds (slowest rank per call; median, min)")
        for k, v in times.items():
            print(f"  {k:12s}: {med[k] * 1e3:8.2f} ms  {min(v) * 1e3:8.2f} ms")
        print(f"  pooled buffers allocated by xlapy: {proc.buffers.allocated}")
        print(f"  ratio raw reused / xlapy      : {med['raw reused'] / med['xlapy']:6.3f}"
              "  (target >= 0.9)")
        print(f"  ratio raw fresh / xlapy fresh : {med['raw fresh'] / med['xlapy fresh']:6.3f}"
              "  (both allocate each result)")
        print(f"  ratio raw fresh / xlapy       : {med['raw fresh'] / med['xlapy']:6.3f}")


if __name__ == "__main__":
    main()
