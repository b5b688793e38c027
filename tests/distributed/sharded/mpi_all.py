"""Every sharded lowering under MPI, one partition per rank (the suite runs a sample of 9):

    python -m tests.distributed.sharded.mpi_all

Uses the newest lowering directory test_sharded_jax.py made (run the suite first), groups the
lowerings by partition count, runs each group with `mpiexec -n P` through mpi_worker.py and
compares every result with jax's; prints the counts and exits 1 on any failure."""

from __future__ import annotations

import collections
import os
import pickle
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from tests.distributed.mpi_launcher import require_mpi
from tests.distributed.sharded.programs import TOLERANCE

ROOT = Path(__file__).resolve().parents[3]


def main() -> int:
    done = sorted(Path(tempfile.gettempdir()).glob("xlapy-sharded-jax-*/done"),
                  key=lambda p: p.stat().st_mtime)
    if not done:
        print("no lowerings yet: run tests/distributed/sharded/test_sharded_jax.py first")
        return 1
    lowered = done[-1].parent
    groups: dict[int, list[str]] = collections.defaultdict(list)
    for f in sorted(lowered.glob("*.npz")):
        with np.load(f) as z:
            m = re.search(r"mhlo.num_partitions = (\d+)", str(z["text"]))
        groups[int(m.group(1)) if m else 1].append(f.name[:-len(".npz")])
    ok = bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n, names in sorted(groups.items()):
            out = Path(tmp) / f"mpi_{n}.pkl"
            proc = subprocess.run([require_mpi(), "-n", str(n), sys.executable, "-m",
                                   "tests.distributed.sharded.mpi_worker", str(lowered),
                                   str(out), *names], cwd=ROOT, capture_output=True, text=True,
                                  env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=1800)
            if proc.returncode:
                print(f"{n} ranks: FAILED\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
                bad += len(names)
                continue
            with open(out, "rb") as fh:
                results = pickle.load(fh)
            for name in names:
                with np.load(lowered / f"{name}.npz") as z:
                    refs = [z[f"result{i}"] for i in range(int(z["n_results"]))]
                try:
                    for got, ref in zip(results[name], refs, strict=True):
                        np.testing.assert_allclose(np.asarray(got), ref, rtol=TOLERANCE,
                                                   atol=TOLERANCE)
                    ok += 1
                except AssertionError as e:
                    bad += 1
                    print(f"MISMATCH {name}: {str(e)[:400]}")
            print(f"{n} ranks: {len(names)} lowerings", flush=True)
    print(f"MPI: {ok} match jax, {bad} fail ({lowered})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
