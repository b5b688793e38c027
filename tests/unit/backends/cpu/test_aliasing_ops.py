"""Ops the cpu backend runs as aliasing (no copy, no kernel): optimization_barrier is an
identity whose results are its operands (a fallback before)."""

from __future__ import annotations

import numpy as np

import xlapy

BARRIER = """
func.func @main(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %c = stablehlo.constant dense<2.0> : tensor<8xf32>
  %y = stablehlo.multiply %x, %c : tensor<8xf32>
  %z = stablehlo.add %x, %c : tensor<8xf32>
  %a, %b = stablehlo.optimization_barrier %y, %z : tensor<8xf32>, tensor<8xf32>
  %m = stablehlo.multiply %a, %b : tensor<8xf32>
  return %m, %a : tensor<8xf32>, tensor<8xf32>
}
"""


def test_optimization_barrier_is_native_aliasing() -> None:
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    exe = xlapy.compile(BARRIER, backend="cpu")
    assert not exe._exe.fallbacks()
    assert "optimization_barrier     aliasing" in exe._exe.explain()
    m, a = exe(x)
    np.testing.assert_array_equal(m, (x * 2) * (x + 2))
    np.testing.assert_array_equal(a, x * 2)
    a[...] = 77  # the caller owns it: the next call is unaffected
    m2, a2 = exe(x)
    np.testing.assert_array_equal(a2, x * 2)
    np.testing.assert_array_equal(m2, m)
