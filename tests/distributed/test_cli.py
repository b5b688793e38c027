"""`xlapy run` on process grids: modules declaring mhlo.num_replicas/num_partitions run on
the threaded grid; `mpiexec -n 2 python -m xlapy run --distributed mpi` prints what the
threaded run prints (rank 0 only) and every rank exits with the same status."""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
from pathlib import Path

from tests.distributed.mpi_launcher import require_mpi
from xlapy.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
CONFORMANCE = ROOT.parent / "shared" / "conformance" / "stablehlo-interpret"


def threaded(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    rc = main(["run", *argv], out)
    return rc, out.getvalue()


def test_module_declaring_a_grid_runs_on_it() -> None:
    rc, text = threaded(str(DATA / "grid_2x1.mlir"), "--input", "4xf32=[1 2 3 4]")
    assert rc == 0
    # all_reduce over both replicas, plus each replica's id: one result per process
    assert text.split("}\n")[0].split("{")[1].split() == ["[2.0,", "4.0,", "6.0,", "8.0]"]
    assert "[3.0, 5.0, 7.0, 9.0]" in text
    rc, text = threaded(str(DATA / "grid_2x1.mlir"), "--input", "4xf32=[1 2 3 4]",
                        "--input", "4xf32=[10 20 30 40]")  # one argument list per process
    assert rc == 0 and "[11.0, 22.0, 33.0, 44.0]" in text and "[12.0, 23.0, 34.0, 45.0]" in text
    rc, text = threaded(str(DATA / "grid_2x1.mlir"))
    assert rc == 1 and "process grid" in text


def test_failing_process_fails_the_chunk() -> None:
    rc, text = threaded(str(DATA / "grid_fail.mlir"))
    assert rc == 1
    assert "FAIL" in text and "process (1, 0): CheckFailure" in text
    assert text.endswith("1 passed, 1 failed\n")


def _mpi_files() -> list[str]:
    files = [str(DATA / "grid_fail.mlir")]
    files += [str(CONFORMANCE / f) for f in ("all_reduce.mlir", "collective_broadcast.mlir",
                                             "send_recv.mlir", "all_gather.mlir")
              if (CONFORMANCE / f).exists()]
    return files


def _mpiexec(n: int, *argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([require_mpi(), "-n", str(n), sys.executable, *argv],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)


def test_mpiexec_xlapy_run_matches_threads() -> None:
    files = _mpi_files()
    want_rc, want = threaded(*files)
    assert want_rc == 1  # grid_fail.mlir's first chunk fails
    proc = _mpiexec(2, "-m", "xlapy", "run", "--distributed", "mpi", *files)
    assert proc.returncode == want_rc, proc.stderr
    assert proc.stdout == want
    want_rc, want = threaded(str(DATA / "grid_2x1.mlir"), "--input", "4xf32=[1 2 3 4]")
    proc = _mpiexec(2, "-m", "xlapy", "run", "--distributed", "mpi",
                    str(DATA / "grid_2x1.mlir"), "--input", "4xf32=[1 2 3 4]")
    assert (proc.returncode, proc.stdout) == (want_rc, want), proc.stderr


def test_mpi_ranks_agree_and_only_rank_0_prints(tmp_path: Path) -> None:
    out = tmp_path / "cli.pkl"
    proc = _mpiexec(2, "-m", "tests.distributed.cli_worker", str(out),
                    str(DATA / "grid_fail.mlir"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out, "rb") as f:
        ranks = pickle.load(f)
    assert [rc for rc, _, _ in ranks] == [1, 1]  # the same exit status on every rank
    assert ranks[0][1] == threaded(str(DATA / "grid_fail.mlir"))[1]
    assert ranks[1][1] == ""
    assert all(grids == [(2, 1)] for _, _, grids in ranks)  # the 2-program grids used MPI
