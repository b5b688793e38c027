"""Issue 17's suite: every program of programs.py, lowered by jax in Shardy and in GSPMD form
over meshes of 2, 4 and 8 host devices, compiled by `xlapy.compile` (partitioned, run on the
threaded grid on the cpu backend with no interpreter fallback) matches jax's results; where
XLA's partitioned program is known, xlapy inserts the same collectives.

The lowerings are made once per session in a subprocess (generate.py): jax must see
--xla_force_host_platform_device_count=8 before its backend starts, and other tests start it
in this process."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import xlapy
from tests.distributed.sharded.programs import PROGRAMS, TOLERANCE

ROOT = Path(__file__).resolve().parents[3]
MODES = ("shardy", "gspmd")

#: programs whose collectives equal XLA's own partitioner's (op and result shape, as a set)
SAME_AS_XLA = ("dot_2d_mesh", "dot_contracting_x8", "reduce_sum_sharded_dim",
               "reduce_max_other_dim", "int_sum", "constraint_all_gather",
               "mlp_data_tensor_parallel", "megatron_layer", "conv_net", "uneven_rows_sum",
               "cumsum_sharded_axis", "conv_spatial_halo", "dot_reduce_scatter",
               "embedding_lookup", "embedding_vocab_sharded", "scan_rnn", "argmax_rows")


@pytest.fixture(scope="session")
def lowered() -> Path:
    """The lowerings, made once per content of programs.py / generate.py and jax version and
    shared by every pytest worker (a lock file; a finished directory is never rewritten)."""
    import fcntl
    import hashlib
    import importlib.metadata
    import tempfile

    here = Path(__file__).parent
    key = hashlib.sha256(b"".join((here / f).read_bytes() for f in ("programs.py",
                                                                     "generate.py")))
    key.update(importlib.metadata.version("jax").encode())
    out = Path(tempfile.gettempdir()) / f"xlapy-sharded-jax-{key.hexdigest()[:16]}"
    with open(f"{out}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "done").exists():
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            for mode in MODES:
                proc = subprocess.run([sys.executable, "-m",
                                       "tests.distributed.sharded.generate", str(out), mode],
                                      cwd=ROOT, env=env, capture_output=True, text=True,
                                      timeout=600)
                assert proc.returncode == 0, proc.stderr[-4000:]
            (out / "done").write_text("")
    return out


def load(lowered: Path, name: str, mode: str) -> dict[str, np.ndarray]:
    with np.load(lowered / f"{name}.{mode}.npz") as d:
        return {k: d[k] for k in d.files}


def run(d: dict[str, np.ndarray]) -> tuple[object, tuple[np.ndarray, ...]]:
    prog = xlapy.compile(str(d["text"]), backend="cpu")
    got = prog(*[d[f"arg{i}"] for i in range(int(d["n_args"]))])
    return prog, got if isinstance(got, tuple) else (got,)


def test_suite_is_large() -> None:
    assert len(PROGRAMS) * len(MODES) >= 40


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_matches_jax_on_threaded_grid(lowered: Path, name: str, mode: str) -> None:
    d = load(lowered, name, mode)
    prog, got = run(d)
    assert prog.num_partitions > 1
    assert prog.fallbacks() == []
    refs = [d[f"result{i}"] for i in range(int(d["n_results"]))]
    assert len(got) == len(refs)
    for r, g in zip(refs, got):
        assert r.shape == np.shape(g) and r.dtype == np.asarray(g).dtype
        if r.dtype.kind in "iub":
            np.testing.assert_array_equal(g, r)
        else:
            np.testing.assert_allclose(g, r, rtol=TOLERANCE, atol=TOLERANCE)


#: programs whose collectives are XLA's kinds (XLA splits its all-to-all into a tuple)
SAME_KINDS_AS_XLA = ("constraint_all_to_all", "out_sharding_differs")


@pytest.mark.parametrize("name", SAME_AS_XLA + SAME_KINDS_AS_XLA)
def test_collectives_match_xla(lowered: Path, name: str) -> None:
    d = load(lowered, name, "shardy")
    prog = xlapy.compile(str(d["text"]), backend="cpu")
    mine = Counter(f"{op.replace('_', '-')} {shape}" for op, shape, _ in prog.spmd.collectives)
    xla = Counter(c for c in str(d["collectives"]).split("\n") if c)
    if name in SAME_KINDS_AS_XLA:
        mine, xla = (Counter(c.split()[0] for c in x.elements()) for x in (mine, xla))
    assert set(mine) == set(xla), prog.cost_report()


#: 4-partition programs run under MPI (one partition per rank), both forms of a few
MPI_SAMPLE = ("dot_2d_mesh.shardy", "dot_2d_mesh.gspmd", "megatron_layer.shardy",
              "conv_net.gspmd", "shard_map_psum.shardy", "shard_map_all_to_all.gspmd",
              "uneven_rows_sum.shardy", "int_sum.gspmd", "constraint_all_gather.shardy")


def test_matches_jax_under_mpi(lowered: Path, tmp_path: Path) -> None:
    from tests.distributed.mpi_launcher import require_mpi

    out = tmp_path / "mpi.pkl"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([require_mpi(), "-n", "4", sys.executable, "-m",
                           "tests.distributed.sharded.mpi_worker", str(lowered), str(out),
                           *MPI_SAMPLE], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out, "rb") as f:
        results = pickle.load(f)
    for key in MPI_SAMPLE:
        name, mode = key.split(".")
        d = load(lowered, name, mode)
        for i, g in enumerate(results[key]):
            np.testing.assert_allclose(g, d[f"result{i}"], rtol=TOLERANCE, atol=TOLERANCE)


@pytest.mark.parametrize(("name", "ways"), [("mlp_memory_1x8", 8), ("mlp_memory_2x4", 4)])
def test_mlp_memory_per_partition(lowered: Path, name: str, ways: int) -> None:
    """Per-partition memory (arguments, arena, results on the cpu backend) of the sharded MLP
    is about 1/ways of the unsharded program's (the weights split `ways` ways dominate)."""
    from xlapy.api import CompiledProgram
    from xlapy.distributed.sharded import executable_memory
    from xlapy.stablehlo import parse_module

    d = load(lowered, name, "shardy")
    prog = xlapy.compile(str(d["text"]), backend="cpu")
    whole = CompiledProgram(parse_module(str(d["text"])), "cpu")
    full = executable_memory(whole._exe, whole.module.entry_computation())["total"]
    ratio = prog.memory()["total"] / full
    assert 0.75 / ways <= ratio < 1.25 / ways, (prog.memory(), full)


def test_cli_under_mpi(lowered: Path, tmp_path: Path) -> None:
    """`mpiexec -n 4 python -m xlapy run --distributed mpi FILE`: one partition per rank,
    the global result printed once."""
    from tests.distributed.mpi_launcher import require_mpi

    d = load(lowered, "dot_2d_mesh", "shardy")
    (tmp_path / "m.mlir").write_text(str(d["text"]))
    inputs = []
    for i in range(int(d["n_args"])):
        np.save(tmp_path / f"a{i}.npy", d[f"arg{i}"])
        inputs += ["--input", str(tmp_path / f"a{i}.npy")]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([require_mpi(), "-n", "4", sys.executable, "-m", "xlapy", "run",
                           "--distributed", "mpi", "--backend", "cpu", str(tmp_path / "m.mlir"),
                           *inputs], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("tensor<6xf32>") == 1, proc.stdout
    values = [float(v) for v in proc.stdout.split("[")[1].split("]")[0].split(",")]
    np.testing.assert_allclose(values, d["result0"], rtol=1e-5)
