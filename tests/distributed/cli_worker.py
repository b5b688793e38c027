"""Run under `mpiexec -n N python -m tests.distributed.cli_worker OUT ARGS...`: `xlapy run
--distributed mpi ARGS` on every rank; rank 0 pickles each rank's (exit status, what it
printed, which MPI grids it used)."""

from __future__ import annotations

import io
import pickle
import sys

from mpi4py import MPI

from xlapy.cli.main import main as xlapy_main
from xlapy.distributed import mpi


def main(out_path: str, argv: list[str]) -> None:
    out = io.StringIO()
    rc = xlapy_main(["run", "--distributed", "mpi", *argv], out)
    mine = (rc, out.getvalue(), sorted(mpi._GRIDS))
    every = MPI.COMM_WORLD.gather(mine, root=0)
    if MPI.COMM_WORLD.rank == 0:
        with open(out_path, "wb") as f:
            pickle.dump(every, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
