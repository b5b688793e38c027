"""The average pool's gradient as JAX lowers it (reduce_window summing 2x2 windows of its
cotangent padded with zeros between and around the elements) runs as one element-wise
kernel (algsimp's reduce_window_upsample after reduce_window_pad), with the interpreter's
bits: -0 becomes +0 as in the window sum, NaN and infinities stay."""

from __future__ import annotations

import numpy as np

import xlapy

TEXT = """
func.func @main(%g: tensor<4x16x16x8xf32>) -> tensor<4x32x32x8xf32> {
  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %p = stablehlo.pad %g, %z, low = [0, 1, 1, 0], high = [0, 1, 1, 0], interior = [0, 1, 1, 0]
      : (tensor<4x16x16x8xf32>, tensor<f32>) -> tensor<4x33x33x8xf32>
  %r = "stablehlo.reduce_window"(%p, %z) <{window_dimensions = array<i64: 1, 2, 2, 1>,
      window_strides = array<i64: 1, 1, 1, 1>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4x33x33x8xf32>, tensor<f32>) -> tensor<4x32x32x8xf32>
  return %r : tensor<4x32x32x8xf32>
}
"""


def test_pool_gradient_is_an_upsampling_with_the_interpreters_bits() -> None:
    g = np.random.default_rng(0).standard_normal((4, 16, 16, 8)).astype(np.float32)
    g.reshape(-1)[:4] = [-0.0, np.nan, np.inf, -np.inf]
    prog = xlapy.compile(TEXT, backend="cpu")
    assert "reduce_window" not in prog._exe.explain()  # type: ignore[attr-defined]
    got = np.asarray(prog(g))
    want = np.asarray(xlapy.compile(TEXT, backend="interpreter")(g))
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(got[:, ::2, ::2], g + np.float32(0.0))
