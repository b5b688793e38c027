"""Find `mpiexec` for the MPI tests: beside the running interpreter first (pip's mpich installs it
in the virtual environment's bin/, which is not on PATH under `make test`), then on PATH.

Outside CI a missing MPI skips the MPI tests with the reason; under CI (`CI` set) it fails them,
because CI must run them with 2 and 4 ranks.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest


def find_mpiexec() -> str | None:
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        return str(beside)
    return shutil.which("mpiexec")


MPIEXEC = find_mpiexec()


def require_mpi() -> str:
    """The mpiexec path, or skip (locally) / fail (CI) with the reason."""
    missing = None
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        missing = "mpi4py is not installed (pip install mpi4py mpich)"
    if missing is None and MPIEXEC is None:
        missing = "mpiexec not found beside the interpreter or on PATH (pip install mpich)"
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the MPI tests: {missing}")
        pytest.skip(missing)
    assert MPIEXEC is not None
    return MPIEXEC
