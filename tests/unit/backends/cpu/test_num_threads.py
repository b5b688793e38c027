"""The `num_threads` compile option and $XLAPY_NUM_THREADS, and bit-identical results for any
thread count (parallel.py: float sums and BLAS calls split at fixed chunks)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import cache, parallel
from xlapy.errors import XlapyError

THREADS = (1, 2, 3, 8)

SUMS = """
func.func @main(%x: tensor<2048x2048xf32>) -> (tensor<2048xf32>, tensor<f32>) {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s0 = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0]
      : (tensor<2048x2048xf32>, tensor<f32>) -> tensor<2048xf32>
  %s1 = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0, 1]
      : (tensor<2048x2048xf32>, tensor<f32>) -> tensor<f32>
  return %s0, %s1 : tensor<2048xf32>, tensor<f32>
}
"""

SOFTMAX = """
func.func @main(%x: tensor<512x1024xf32>) -> tensor<512x1024xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1]
      : (tensor<512x1024xf32>, tensor<f32>) -> tensor<512xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<512xf32>) -> tensor<512x1024xf32>
  %d = stablehlo.subtract %x, %mb : tensor<512x1024xf32>
  %e = stablehlo.exponential %d : tensor<512x1024xf32>
  %s = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [1]
      : (tensor<512x1024xf32>, tensor<f32>) -> tensor<512xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<512xf32>) -> tensor<512x1024xf32>
  %p = stablehlo.divide %e, %sb : tensor<512x1024xf32>
  return %p : tensor<512x1024xf32>
}
"""

MLP = """
func.func @main(%x: tensor<1024x256xf32>, %w1: tensor<256x512xf32>, %b1: tensor<512xf32>,
                %w2: tensor<512x128xf32>) -> tensor<1024x128xf32> {
  %h = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0]
      : (tensor<1024x256xf32>, tensor<256x512xf32>) -> tensor<1024x512xf32>
  %bb = stablehlo.broadcast_in_dim %b1, dims = [1] : (tensor<512xf32>) -> tensor<1024x512xf32>
  %a = stablehlo.add %h, %bb : tensor<1024x512xf32>
  %z = stablehlo.constant dense<0.0> : tensor<1024x512xf32>
  %r = stablehlo.maximum %a, %z : tensor<1024x512xf32>
  %o = stablehlo.dot_general %r, %w2, contracting_dims = [1] x [0]
      : (tensor<1024x512xf32>, tensor<512x128xf32>) -> tensor<1024x128xf32>
  return %o : tensor<1024x128xf32>
}
"""

WIDE = """
func.func @main(%x: tensor<64x512xf32>, %w: tensor<512x4096xf32>) -> tensor<64x4096xf32> {
  %o = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
      : (tensor<64x512xf32>, tensor<512x4096xf32>) -> tensor<64x4096xf32>
  return %o : tensor<64x4096xf32>
}
"""

CONV = """
func.func @main(%x: tensor<8x16x32x32xf32>, %w: tensor<32x16x3x3xf32>) -> tensor<8x32x30x30xf32> {
  %o = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1],
      window = {stride = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<8x16x32x32xf32>, tensor<32x16x3x3xf32>) -> tensor<8x32x30x30xf32>
  return %o : tensor<8x32x30x30xf32>
}
"""


BATCHED = """
func.func @main(%x: tensor<32x64x128xf32>, %w: tensor<32x128x96xf32>) -> tensor<32x64x96xf32> {
  %o = stablehlo.dot_general %x, %w, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      : (tensor<32x64x128xf32>, tensor<32x128x96xf32>) -> tensor<32x64x96xf32>
  return %o : tensor<32x64x96xf32>
}
"""


def _args(text: str) -> list[np.ndarray]:
    prog = xlapy.compile(text, "cpu", options={"num_threads": 1})
    rng = np.random.default_rng(7)
    return [rng.standard_normal(p.shape.dimensions).astype(np.float32)
            for p in prog._exe.comp.parameters]  # type: ignore[attr-defined]


@pytest.mark.parametrize("text", [SUMS, SOFTMAX, MLP, WIDE, CONV, BATCHED],
                         ids=["sums", "softmax", "mlp", "wide_dot", "conv", "batched_dot"])
def test_bits_do_not_depend_on_thread_count(text: str) -> None:
    args = _args(text)
    results = {}
    for t in THREADS:
        cache.clear_memory()
        prog = xlapy.compile(text, "cpu", options={"num_threads": t})
        assert prog._exe.num_threads == t  # type: ignore[attr-defined]
        out = prog(*args)
        results[t] = out if isinstance(out, tuple) else (out,)
    for t in THREADS[1:]:
        for a, b in zip(results[1], results[t]):
            assert a.tobytes() == b.tobytes(), f"{t} threads differ from 1"


@pytest.mark.parametrize("value", [0, -1, 1025, 2.0, "2", True, None.__class__])
def test_num_threads_option_invalid(value: object) -> None:
    with pytest.raises(XlapyError, match="num_threads"):
        xlapy.compile(SOFTMAX, "cpu", options={"num_threads": value})


@pytest.mark.parametrize("text", ["abc", "0", "-3", "1.5", "5000"])
def test_num_threads_env_invalid(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_NUM_THREADS", text)
    with pytest.raises(XlapyError, match="XLAPY_NUM_THREADS"):
        xlapy.compile(SOFTMAX, "cpu")


def test_num_threads_env_then_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_NUM_THREADS", "3")
    assert xlapy.compile(SOFTMAX, "cpu")._exe.num_threads == 3  # type: ignore[attr-defined]
    prog = xlapy.compile(SOFTMAX, "cpu", options={"num_threads": 2})
    assert prog._exe.num_threads == 2  # type: ignore[attr-defined]
    client = xlapy.Client("cpu", options={"num_threads": 5})
    assert client.options["num_threads"] == 5


WHILE = """
func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %n = stablehlo.constant dense<3> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %r:2 = stablehlo.while(%i = %i0, %v = %x) : tensor<i32>, tensor<64xf32>
    cond {
      %c = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %j = stablehlo.add %i, %one : tensor<i32>
      %w = stablehlo.add %v, %v : tensor<64xf32>
      stablehlo.return %j, %w : tensor<i32>, tensor<64xf32>
    }
  return %r#1 : tensor<64xf32>
}
"""


def test_nested_executables_inherit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_NUM_THREADS", "7")
    prog = xlapy.compile(WHILE, "cpu", options={"num_threads": 2})
    exe = prog._exe  # type: ignore[attr-defined]
    assert exe.subexecs and all(sub.num_threads == 2 for _, sub in exe.subexecs)
    np.testing.assert_array_equal(prog(np.ones(64, np.float32)), np.full(64, 8, np.float32))


def test_big_batched_dot_runs_on_xlapys_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 32-batch dot is one BLAS call per batch on xlapy's pool, not NumPy's matmul (whose
    own OpenBLAS threads ignore num_threads and collapsed under load: 700 ms vs 5.5 ms)."""
    args = _args(BATCHED)
    prog = xlapy.compile(BATCHED, "cpu", options={"num_threads": 2})

    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("np.matmul used for a big batched dot")

    monkeypatch.setattr(np, "matmul", refuse)
    out = prog(*args)
    monkeypatch.undo()
    want = np.einsum("bmk,bkn->bmn", args[0].astype(np.float64), args[1].astype(np.float64))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def _cgroups(root: Path, proc: str, files: dict[str, str]) -> str:
    """A fake filesystem root with /proc/self/cgroup = proc and the given cgroup files."""
    for rel, text in {"proc/self/cgroup": proc, **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return str(root)


@pytest.mark.parametrize("proc, files, want", [
    # cgroup v2, docker --cpus=1.5 (rounded up), with the namespace's own root
    ("0::/\n", {"sys/fs/cgroup/cpu.max": "150000 100000\n"}, 2),
    ("0::/kubepods/pod1\n", {"sys/fs/cgroup/kubepods/pod1/cpu.max": "100000 100000\n"}, 1),
    ("0::/\n", {"sys/fs/cgroup/cpu.max": "max 100000\n"}, None),  # no quota
    # cgroup v1: cpu,cpuacct joined or not; -1 is no quota
    ("4:memory:/x\n3:cpu,cpuacct:/docker/ab\n",
     {"sys/fs/cgroup/cpu,cpuacct/docker/ab/cpu.cfs_quota_us": "100000\n",
      "sys/fs/cgroup/cpu,cpuacct/docker/ab/cpu.cfs_period_us": "100000\n"}, 1),
    ("1:cpu:/\n", {"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n",
                   "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"}, None),
    ("1:cpu:/\n", {}, None),  # no files readable
    ("0::/\n", {"sys/fs/cgroup/cpu.max": "garbage\n"}, None),
])
def test_usable_cpus_follows_the_cgroup_quota(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             proc: str, files: dict[str, str],
                                             want: int | None) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    root = _cgroups(tmp_path, proc, files)
    assert parallel.usable_cpus(root) == (8 if want is None else want)


def test_usable_cpus_follows_the_affinity_mask(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert parallel.usable_cpus(str(tmp_path)) == 1


@pytest.mark.skipif(not shutil.which("taskset"), reason="needs taskset")
def test_default_threads_under_taskset_is_one() -> None:
    """The default thread count is the affinity mask's CPUs, not the machine's (two threads
    on one allowed CPU waited on each other's time slices)."""
    code = ("import xlapy; print(xlapy.compile(" + repr(SOFTMAX) +
            ", 'cpu')._exe.num_threads)")
    env = {k: v for k, v in os.environ.items() if k != "XLAPY_NUM_THREADS"}
    cpu = sorted(os.sched_getaffinity(0))[0]
    out = subprocess.run(["taskset", "-c", str(cpu), sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout.split()[-1] == "1"


def test_l2_bytes_reads_the_level_2_cache_of_sysfs(tmp_path: Path) -> None:
    from xlapy.backends.cpu import parallel

    base = tmp_path / "sys/devices/system/cpu/cpu0/cache"
    for idx, (level, size) in enumerate([("1", "48K"), ("1", "32K"), ("2", "2048K"),
                                         ("3", "105M")]):
        d = base / f"index{idx}"
        d.mkdir(parents=True)
        (d / "level").write_text(level + "\n")
        (d / "size").write_text(size + "\n")
    assert parallel.l2_bytes(str(tmp_path)) == 2 << 20
    assert parallel.l2_bytes(str(tmp_path / "none")) is None
