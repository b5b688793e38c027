"""Run under `mpiexec -n N python -m tests.distributed.mpi_fault_worker OUT`: grid faults on
the MPI grid with a 1 s timeout (a rank looping forever, blocked outside the grid,
mismatching a collective); rank 0 pickles every rank's errors and timings."""

from __future__ import annotations

import pickle
import sys
import time

import numpy as np
from mpi4py import MPI

from tests.distributed.test_faults import (
    BLOCK_SECONDS,
    all_reduce_prog,
    blocking_prog,
    entries,
    forever_prog,
    identity_prog,
    mismatched_op_prog,
    recv_prog,
    send_prog,
)
from xlapy.distributed.grid import ProcessGridError
from xlapy.distributed.mpi import MpiGrid


def main(out_path: str) -> None:
    world = MPI.COMM_WORLD
    n = world.size
    grid = MpiGrid(n, 1, timeout=1)
    ones = [[np.ones(4, np.float32)] for _ in range(n)]
    last = n - 1
    scenarios = {
        "forever": entries(*[identity_prog()] * last, forever_prog()),
        "forever_vs_collective": entries(*[all_reduce_prog()] * last, forever_prog()),
        "blocked": entries(*[identity_prog()] * last, blocking_prog()),
        "mismatched_op": entries(all_reduce_prog(), *[mismatched_op_prog()] * last),
        "recv_alone": entries(*[identity_prog()] * last, recv_prog(7)),
    }
    report: dict[str, object] = {}
    for name, progs in scenarios.items():
        world.Barrier()  # a rank blocked in the previous scenario catches up here
        start = time.monotonic()
        try:
            grid.run_programs(progs, ones)
            errors: dict[object, str] = {}
        except ProcessGridError as e:
            errors = {pid: str(err) for pid, err in e.errors.items()}
        report[name] = (errors, time.monotonic() - start)
    world.Barrier()
    report["after"] = grid.run_programs(entries(*[all_reduce_prog()] * n), ones)[0]
    for channel in (-5, 1 << 40):  # any 64-bit id: below 0 and above MPI's tag limit
        progs = entries(send_prog(channel), *[identity_prog()] * (last - 1), recv_prog(channel))
        report[f"channel {channel}"] = grid.run_programs(progs, ones)[last]
    gathered = world.gather(pickle.dumps(report), root=0)
    if world.rank == 0:
        with open(out_path, "wb") as f:
            pickle.dump([pickle.loads(g) for g in gathered], f)


if __name__ == "__main__":
    assert BLOCK_SECONDS > 2  # longer than the ranks' 1 s timeout plus 1 s drain
    main(sys.argv[1])
