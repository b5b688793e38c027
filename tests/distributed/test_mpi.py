"""The MPI grid (2 and 4 ranks, launched with mpiexec) gives exactly the threaded grid's
results for every case in cases.py, and fails loudly (missing participant, raising rank)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.distributed.cases import cases
from tests.distributed.mpi_launcher import require_mpi
from xlapy.distributed import ProcessGrid

ROOT = Path(__file__).resolve().parents[2]


def _launch(n: int, tmp_path: Path) -> list:
    out = tmp_path / f"mpi{n}.pkl"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([require_mpi(), "-n", str(n), sys.executable, "-m",
                           "tests.distributed.mpi_worker", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out, "rb") as f:
        return pickle.load(f)


@pytest.mark.parametrize("n", [2, 4])
def test_mpi_matches_threads(n: int, tmp_path: Path) -> None:
    per_rank = _launch(n, tmp_path)
    assert len(per_rank) == n
    results, faults = per_rank[0]
    grids = [(n, 1), (1, n)] + ([(2, 2)] if n == 4 else [])
    checked = 0
    for nr, np_ in grids:
        for name, (comp, args) in cases(nr, np_).items():
            want = ProcessGrid(nr, np_).run_computation(comp, args)
            for rank in range(n):  # every rank holds every process's result
                for key in (f"{nr}x{np_}/{name}", f"cpu/{nr}x{np_}/{name}"):  # both backends
                    got = per_rank[rank][0][key]
                    for w, g in zip(want, got):
                        np.testing.assert_array_equal(g, w, err_msg=key)
            checked += 1
    assert checked >= 13 * len(grids)
    for rank in range(n):
        np.testing.assert_array_equal(per_rank[rank][0]["after_faults"][0], np.full(4, n))
        view, second, third = per_rank[rank][0]["pooled"]
        np.testing.assert_array_equal(view, np.full(3, n))
        np.testing.assert_array_equal(second, np.full(4, 2 * n))
        np.testing.assert_array_equal(third, np.full(4, 3 * n))
    # a missing participant: rank 0 names the op, the group and who is missing, at once
    missing = faults["missing"][(0, 0)]
    assert "all_reduce" in missing and "finished without reaching it" in missing
    assert f"missing {[(r, 0) for r in range(1, n)]}" in missing or "missing [(" in missing
    # a raising rank stops every other rank with its error
    raising = faults["raising"]
    assert set(raising) == {(r, 0) for r in range(n)}
    assert "argument 0" in raising[(n - 1, 0)]
    for r in range(n - 1):
        assert f"stopped because process ({n - 1}, 0) failed" in raising[(r, 0)]
    assert faults["seconds"] < 10


def test_mpi_grid_faults_end_with_errors_naming_the_process(tmp_path: Path) -> None:
    """2 ranks, 1 s timeout: a rank looping forever (peers finished, or waiting in a
    collective), a rank blocked outside the grid, mismatched collective ops."""
    out = tmp_path / "faults.pkl"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([require_mpi(), "-n", "2", sys.executable, "-m",
                           "tests.distributed.mpi_fault_worker", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out, "rb") as f:
        ranks = pickle.load(f)
    for rank, report in enumerate(ranks):
        for name in ("forever", "forever_vs_collective", "blocked", "mismatched_op",
                     "recv_alone"):
            errors, seconds = report[name]
            assert errors, f"rank {rank}: {name} did not fail"
            assert seconds < 5, f"rank {rank}: {name} took {seconds:.1f}s"
        np.testing.assert_array_equal(report["after"], np.full(4, 2))
        if rank == 0:  # every rank returns every result; rank 0's copy is checked
            for channel in (-5, 1 << 40):
                np.testing.assert_array_equal(report[f"channel {channel}"], np.full(4, 2))
    errors, _ = ranks[1]["recv_alone"]
    assert "recv on channel 7 (process (1, 0))" in errors[(1, 0)]  # what it was doing
    assert "missing []" not in repr(ranks)
    errors, _ = ranks[0]["forever"]
    assert "no word from [(1, 0)]" in errors[(0, 0)]
    assert "while %" in errors[(1, 0)] and "gave up waiting for it" in errors[(1, 0)]
    errors, _ = ranks[0]["forever_vs_collective"]
    assert "all_reduce" in errors[(0, 0)] and "missing [(1, 0)]" in errors[(0, 0)]
    assert "while %" in errors[(1, 0)] and "stopped because process (0, 0) failed" in \
        errors[(1, 0)]
    assert "no word from [(1, 0)]" in ranks[0]["blocked"][0][(0, 0)]
    assert "gave up waiting for it" in ranks[1]["blocked"][0][(1, 0)]
    errors, _ = ranks[1]["mismatched_op"]
    # rank 1 sees the mismatch itself ("... reached all_reduce") or, when rank 0 saw it
    # first, stops with rank 0's error ("stopped because process (0, 0) failed: ...
    # reached all_gather ... in %all_reduce"): which one is a race (it failed so under a
    # loaded CI); both name the two ops.
    assert "all_gather" in errors[(1, 0)] and "all_reduce" in errors[(1, 0)]
    assert "reached all_reduce" in errors[(1, 0)] or \
        "stopped because process (0, 0) failed" in errors[(1, 0)]
