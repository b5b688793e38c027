"""Run under `mpiexec -n N python -m tests.distributed.mpi_worker OUT`: every case of
cases.py on the MPI grids with N processes, plus fault scenarios; rank 0 pickles the results
(every rank checks it got the same)."""

from __future__ import annotations

import pickle
import sys
import time

import numpy as np
from mpi4py import MPI

from tests.distributed.cases import cases
from tests.distributed.test_faults import all_reduce_prog, entries, identity_prog
from xlapy.distributed.grid import ProcessGridError
from xlapy.distributed.mpi import MpiGrid


def main(out_path: str) -> None:
    world = MPI.COMM_WORLD
    n = world.size
    results: dict[str, object] = {}
    for nr, np_ in [(n, 1), (1, n)] + ([(2, 2)] if n == 4 else []):
        grid = MpiGrid(nr, np_, timeout=20)
        for name, (comp, args) in cases(nr, np_).items():
            results[f"{nr}x{np_}/{name}"] = grid.run_computation(comp, args)
            results[f"cpu/{nr}x{np_}/{name}"] = grid.run_computation(comp, args, backend="cpu")
    grid = MpiGrid(n, 1, timeout=20)
    ones = [[np.ones(4, np.float32)] for _ in range(n)]
    faults: dict[str, object] = {}
    start = time.monotonic()
    progs = entries(all_reduce_prog(), *[identity_prog()] * (n - 1))
    try:
        grid.run_programs(progs, ones)
    except ProcessGridError as e:
        faults["missing"] = {pid: str(err) for pid, err in e.errors.items()}
    bad = ones[:-1] + [[np.ones(5, np.float32)]]
    try:
        grid.run_programs(entries(*[all_reduce_prog()] * n), bad)
    except ProcessGridError as e:
        faults["raising"] = {pid: str(err) for pid, err in e.errors.items()}
    faults["seconds"] = time.monotonic() - start
    # after faults the grid still works
    results["after_faults"] = grid.run_programs(entries(*[all_reduce_prog()] * n), ones)
    # all_reduce reduces into pooled buffers: a result still held is never overwritten
    progs = entries(*[all_reduce_prog()] * n)
    first = grid.run_programs(progs, [[np.full(4, 1, np.float32)] for _ in range(n)])
    view = first[world.rank][1:]
    del first
    second = grid.run_programs(progs, [[np.full(4, 2, np.float32)] for _ in range(n)])
    third = grid.run_programs(progs, [[np.full(4, 3, np.float32)] for _ in range(n)])
    results["pooled"] = (view.copy(), second[world.rank], third[world.rank])
    gathered = world.gather(pickle.dumps((results, faults)), root=0)
    if world.rank == 0:
        with open(out_path, "wb") as f:
            pickle.dump([pickle.loads(g) for g in gathered], f)


if __name__ == "__main__":
    main(sys.argv[1])
