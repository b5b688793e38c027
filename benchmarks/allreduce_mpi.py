"""all_reduce of 64 MB f32 over MPI ranks: xlapy (an XlaBuilder AllReduce run by the MPI grid)
vs raw mpi4py `Allreduce`, interleaved in the same run. Not a test.

    mpiexec -n 2 python benchmarks/allreduce_mpi.py [--repeats 10]

Prints the median time of each and the ratio raw/xlapy (>= 0.9 is the target), for raw
Allreduce into a reused (already paged-in) buffer and into a fresh one per call as xlapy's
result is.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder
from xlapy.distributed.mpi import MpiGrid
from xlapy.types import ElementType, Shape


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--mbytes", type=int, default=64)
    opts = parser.parse_args()
    world = MPI.COMM_WORLD
    n = opts.mbytes * 1024 * 1024 // 4
    x = np.random.default_rng(world.rank).standard_normal(n).astype(np.float32)

    add = XlaBuilder("add")
    f32 = Shape.scalar(ElementType.F32)
    ops.Add(add.parameter(0, f32), add.parameter(1, f32))
    b = XlaBuilder("allreduce")
    ops.AllReduce(b.parameter(0, Shape.array(ElementType.F32, (n,))), add.build())
    comp = b.build().module.entry_computation()

    from xlapy.interpreter import Interpreter

    grid = MpiGrid(world.size, 1, timeout=120)
    proc = grid.process

    def xlapy_once() -> np.ndarray:
        # The program on this rank alone (results stay local, as on a device).
        return Interpreter(process=proc).run(comp, [x])

    raw_out = np.empty_like(x)
    t_raw, t_fresh, t_x = [], [], []
    for i in range(opts.repeats + 1):
        world.Barrier()
        t0 = time.perf_counter()
        world.Allreduce(x, raw_out, op=MPI.SUM)
        t1 = time.perf_counter()
        world.Barrier()
        t4 = time.perf_counter()
        fresh = np.empty_like(x)  # a new result buffer per call, as xlapy returns
        world.Allreduce(x, fresh, op=MPI.SUM)
        t5 = time.perf_counter()
        del fresh
        world.Barrier()
        t2 = time.perf_counter()
        got = xlapy_once()
        t3 = time.perf_counter()
        if i:  # the first round warms up
            t_raw.append(t1 - t0)
            t_fresh.append(t5 - t4)
            t_x.append(t3 - t2)
    if world.size <= 2:
        assert np.array_equal(got, raw_out), "xlapy all_reduce differs from MPI Allreduce"
    if world.rank == 0:
        raw, ours = statistics.median(t_raw), statistics.median(t_x)
        fresh = statistics.median(t_fresh)
        print(f"all_reduce {opts.mbytes} MB f32 over {world.size} ranks, {opts.repeats} repeats")
        print(f"  raw mpi4py Allreduce: {raw * 1e3:8.2f} ms")
        print(f"  raw, fresh output   : {fresh * 1e3:8.2f} ms")
        print(f"  xlapy AllReduce     : {ours * 1e3:8.2f} ms")
        print(f"  ratio raw/xlapy     : {raw / ours:8.3f}  (reused output buffer)")
        print(f"  ratio fresh/xlapy   : {fresh / ours:8.3f}  (both allocate the result)")


if __name__ == "__main__":
    main()
