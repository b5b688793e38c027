"""Run under `mpiexec -n 4 python -m tests.distributed.sharded.mpi_worker DIR OUT NAME...`:
each named lowering of DIR (generate.py's files) compiled by xlapy and run with one partition
per MPI rank (use_mpi: the grid is the ranks); rank 0 pickles the global results."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

import xlapy
from xlapy.distributed.mpi import use_mpi


def main(lowered: Path, out_path: str, names: list[str]) -> None:
    use_mpi()
    results = {}
    for name in names:
        with np.load(lowered / f"{name}.npz") as d:
            prog = xlapy.compile(str(d["text"]), backend="cpu")
            got = prog(*[d[f"arg{i}"] for i in range(int(d["n_args"]))])
        results[name] = got if isinstance(got, tuple) else (got,)
    if MPI.COMM_WORLD.rank == 0:
        with open(out_path, "wb") as f:
            pickle.dump(results, f)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3:])
