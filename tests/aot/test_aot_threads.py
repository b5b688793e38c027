# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""NAME_run_threaded (xlapy/aot/threads.py): large kernels split over pthreads give the
one-thread call's results bit for bit, for any thread count (more threads than ranges,
uneven ranges, kernels inside a loop body), and match the interpreter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import xlapy
from tests.aot.compare import mismatch
from xlapy.aot import compile as aot_compile
from xlapy.aot import driver, threads

gcc = pytest.mark.skipif(driver.tool("gcc") is None, reason="gcc is not installed: the AOT "
                         "tests link objects with it (Debian package gcc)")

BIG = """
func.func @main(%x: tensor<301x257xf32>, %n: tensor<i32>) -> (tensor<301x257xf32>, tensor<301xf32>, tensor<301x257xf32>) {
  %t = stablehlo.tanh %x : tensor<301x257xf32>
  %e = stablehlo.exponential %t : tensor<301x257xf32>
  %s = stablehlo.multiply %e, %x : tensor<301x257xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%s init: %z) applies stablehlo.add across dimensions = [1] : (tensor<301x257xf32>, tensor<f32>) -> tensor<301xf32>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %w:2 = stablehlo.while(%i = %c0, %acc = %x) : tensor<i32>, tensor<301x257xf32>
    cond {
      %lt = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %i1 = stablehlo.add %i, %c1 : tensor<i32>
      %sn = stablehlo.sine %acc : tensor<301x257xf32>
      %a = stablehlo.add %sn, %acc : tensor<301x257xf32>
      stablehlo.return %i1, %a : tensor<i32>, tensor<301x257xf32>
    }
  return %s, %r, %w#1 : tensor<301x257xf32>, tensor<301xf32>, tensor<301x257xf32>
}
"""


@gcc
def test_run_threaded_matches_one_thread(tmp_path: Path) -> None:
    obj = aot_compile(BIG, name="big")
    assert "big_run_threaded" in obj.header and set(threads.PTHREAD) <= set(obj.undefined)
    rng = np.random.default_rng(5)
    inputs = {"big": [rng.standard_normal((301, 257)).astype(np.float32), np.int32(3)]}
    exe = driver.build([obj], tmp_path)
    one = driver.run([obj], inputs, tmp_path, exe)["big"]
    want = xlapy.compile(BIG, backend="interpreter")(*inputs["big"])
    for g, r in zip(one, want):
        assert mismatch(g, r) is None
    for n in (1, 2, 3, 7, 1000):
        got = driver.run([obj], inputs, tmp_path, exe, threads=n)["big"]
        assert not isinstance(got, int)
        for g, r in zip(got, one):
            assert g.tobytes() == r.tobytes(), n


@gcc
def test_small_programs_call_no_pthreads(tmp_path: Path) -> None:
    """Kernels under PARALLEL_ELEMENTS stay on the calling thread: nothing to link."""
    text = "func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {\n  %0 = stablehlo.tanh %x : tensor<64xf32>\n  return %0 : tensor<64xf32>\n}\n"
    obj = aot_compile(text, name="small")
    assert not set(threads.PTHREAD) & set(obj.undefined)
    x = np.linspace(-2, 2, 64, dtype=np.float32)
    got = driver.run([obj], {"small": [x]}, tmp_path, driver.build([obj], tmp_path),
                     threads=4)["small"]
    assert mismatch(got[0], np.tanh(x)) is None


@pytest.mark.skipif(any(driver.tool(t) is None for t in ("aarch64-linux-gnu-gcc", "qemu-aarch64")),
                    reason="aarch64-linux-gnu-gcc / qemu-aarch64 missing: `make aot-tools`")
def test_run_threaded_on_aarch64_under_qemu(tmp_path: Path) -> None:
    obj = aot_compile(BIG, name="big_arm", target="aarch64-linux-gnu")
    assert set(threads.PTHREAD) <= set(obj.undefined)
    rng = np.random.default_rng(6)
    inputs = {"big_arm": [rng.standard_normal((301, 257)).astype(np.float32), np.int32(2)]}
    exe = driver.build([obj], tmp_path, cc="aarch64-linux-gnu-gcc")
    qemu = ("qemu-aarch64", "-L", "/usr/aarch64-linux-gnu")
    one = driver.run([obj], inputs, tmp_path, exe, runner=qemu)["big_arm"]
    three = driver.run([obj], inputs, tmp_path, exe, runner=qemu, threads=3)["big_arm"]
    want = xlapy.compile(BIG, backend="interpreter")(*inputs["big_arm"])
    for g, t, r in zip(one, three, want):
        assert g.tobytes() == t.tobytes() and mismatch(g, r) is None


COLUMN_SUM = """
func.func @main(%x: tensor<4096x64xf32>) -> tensor<64xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %e = stablehlo.exponential %x : tensor<4096x64xf32>
  %r = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [0] : (tensor<4096x64xf32>, tensor<f32>) -> tensor<64xf32>
  return %r : tensor<64xf32>
}
"""


@gcc
def test_kernels_the_backend_does_not_split_stay_whole(tmp_path: Path) -> None:
    """A column sum is one partial-reduction kernel over the rows (not splittable: its
    ranges would add into one output); split anyway it gave sums off by thousands."""
    obj = aot_compile(COLUMN_SUM, name="colsum")
    x = np.random.default_rng(0).standard_normal((4096, 64)).astype(np.float32)
    exe = driver.build([obj], tmp_path)
    one = driver.run([obj], {"colsum": [x]}, tmp_path, exe)["colsum"][0]
    assert mismatch(one, xlapy.compile(COLUMN_SUM, backend="interpreter")(x)) is None
    for n in (2, 4):
        got = driver.run([obj], {"colsum": [x]}, tmp_path, exe, threads=n)["colsum"][0]
        assert got.tobytes() == one.tobytes(), n


ARGMAX = """
func.func @main(%x: tensor<512x768xf32>) -> (tensor<512xf32>, tensor<512xi32>) {
  %i = stablehlo.iota dim = 1 : tensor<512x768xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %z = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.reduce(%x init: %ninf), (%i init: %z) across dimensions = [1] : (tensor<512x768xf32>, tensor<512x768xi32>, tensor<f32>, tensor<i32>) -> (tensor<512xf32>, tensor<512xi32>)
    reducer(%a: tensor<f32>, %c: tensor<f32>) (%b: tensor<i32>, %d: tensor<i32>) {
      %gt = stablehlo.compare GT, %a, %c : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %v = stablehlo.select %gt, %a, %c : tensor<i1>, tensor<f32>
      %j = stablehlo.select %gt, %b, %d : tensor<i1>, tensor<i32>
      stablehlo.return %v, %j : tensor<f32>, tensor<i32>
    }
  return %r#0, %r#1 : tensor<512xf32>, tensor<512xi32>
}
"""


@gcc
def test_variadic_reduce_kernel_split(tmp_path: Path) -> None:
    """A two-result reduce (a tuple kernel writing through its result cells) split over
    threads: the one-thread values and indices."""
    obj = aot_compile(ARGMAX, name="argmax")
    assert set(threads.PTHREAD) <= set(obj.undefined)
    x = np.random.default_rng(2).standard_normal((512, 768)).astype(np.float32)
    exe = driver.build([obj], tmp_path)
    one = driver.run([obj], {"argmax": [x]}, tmp_path, exe)["argmax"]
    np.testing.assert_array_equal(one[1], np.argmax(x, axis=1))
    got = driver.run([obj], {"argmax": [x]}, tmp_path, exe, threads=3)["argmax"]
    assert all(a.tobytes() == b.tobytes() for a, b in zip(one, got))
