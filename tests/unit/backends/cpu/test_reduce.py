# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""Reductions over dimension 0 split across threads (partial outputs combined): exact for
integers, the interpreter's value; inits that are not the reducer's identity stay serial."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import executable

PROGRAM = """
func.func @main(%x: tensor<1024x512xi32>, %f: tensor<1024x512xf32>) -> (tensor<i32>, tensor<512xi32>, tensor<i32>, tensor<512xi32>, tensor<f32>, tensor<512xf32>) {
  %z = stablehlo.constant dense<0> : tensor<i32>
  %seven = stablehlo.constant dense<7> : tensor<i32>
  %lo = stablehlo.constant dense<-2147483648> : tensor<i32>
  %fz = stablehlo.constant dense<0.0> : tensor<f32>
  %f3 = stablehlo.constant dense<3.0> : tensor<f32>
  %a = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0, 1] : (tensor<1024x512xi32>, tensor<i32>) -> tensor<i32>
  %c = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0] : (tensor<1024x512xi32>, tensor<i32>) -> tensor<512xi32>
  %s = stablehlo.reduce(%x init: %seven) applies stablehlo.add across dimensions = [0, 1] : (tensor<1024x512xi32>, tensor<i32>) -> tensor<i32>
  %m = stablehlo.reduce(%x init: %lo) applies stablehlo.maximum across dimensions = [0] : (tensor<1024x512xi32>, tensor<i32>) -> tensor<512xi32>
  %g = stablehlo.reduce(%f init: %fz) applies stablehlo.add across dimensions = [0, 1] : (tensor<1024x512xf32>, tensor<f32>) -> tensor<f32>
  %h = stablehlo.reduce(%f init: %f3) applies stablehlo.add across dimensions = [0] : (tensor<1024x512xf32>, tensor<f32>) -> tensor<512xf32>
  return %a, %c, %s, %m, %g, %h : tensor<i32>, tensor<512xi32>, tensor<i32>, tensor<512xi32>, tensor<f32>, tensor<512xf32>
}
"""


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_split_reductions_match_interpreter(threads: int, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    monkeypatch.setattr(executable, "NUM_THREADS", threads)
    rng = np.random.default_rng(0)
    x = rng.integers(-2**31, 2**31 - 1, (1024, 512), dtype=np.int32)  # sums wrap
    f = rng.standard_normal((1024, 512)).astype(np.float32)
    cpu = xlapy.compile(PROGRAM, backend="cpu")
    kinds = [k.partial for k in cpu._exe.kernel_specs]
    assert kinds == ["add", "add", None, "maximum", "add", None]
    want = xlapy.compile(PROGRAM, backend="interpreter")(x, f)
    got = cpu(x, f)
    for k in range(4):
        np.testing.assert_array_equal(got[k], want[k])
    np.testing.assert_allclose(got[4], want[4], rtol=1e-4, atol=1e-2)  # reassociated
    np.testing.assert_allclose(got[5], want[5], rtol=1e-4, atol=1e-3)
