# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""The same StableHLO modules on the cpu backend and the interpreter.

Element-wise chains, broadcasts, transposes, reshapes, slices, iota, reductions (row, column,
full), dot_general and a while loop. Programs with float reductions, dots and polynomial math
give both backends' results within the error bound of their exact value (tests/tolerance.py:
sums and dots in any order, documented ulps); everything else is compared exactly.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import xlapy
from tests.differential.compare import assert_same
from tests.tolerance import Bounded


def _gelu_softmax(x: np.ndarray) -> Bounded:
    g = Bounded.exact(x).tanh() * np.float32(0.5)
    e = (g - g.max(1, keepdims=True)).exp()
    return e / e.sum(1, keepdims=True)


def _dot(a: np.ndarray, b: np.ndarray) -> Bounded:
    return Bounded.exact(a) @ Bounded.exact(b)


#: name -> (program, argument shapes, dtype, its exact value with error bounds; None: exact).
Case = tuple[str, list[tuple[int, ...]], type, Callable[..., Bounded] | None]

PROGRAMS: dict[str, Case] = {
    "gelu_softmax": ("""
func.func @main(%x: tensor<64x96xf32>) -> tensor<64x96xf32> {
  %c = stablehlo.constant dense<0.5> : tensor<64x96xf32>
  %t = stablehlo.tanh %x : tensor<64x96xf32>
  %g = stablehlo.multiply %c, %t : tensor<64x96xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%g init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<64x96xf32>, tensor<f32>) -> tensor<64xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<64xf32>) -> tensor<64x96xf32>
  %d = stablehlo.subtract %g, %mb : tensor<64x96xf32>
  %e = stablehlo.exponential %d : tensor<64x96xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [1] : (tensor<64x96xf32>, tensor<f32>) -> tensor<64xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<64xf32>) -> tensor<64x96xf32>
  %r = stablehlo.divide %e, %sb : tensor<64x96xf32>
  return %r : tensor<64x96xf32>
}""", [(64, 96)], np.float32, _gelu_softmax),
    "x_plus_xT_int": ("""
func.func @main(%x: tensor<33x33xi32>) -> (tensor<33x33xi32>, tensor<33xi32>, tensor<i32>) {
  %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<33x33xi32>) -> tensor<33x33xi32>
  %s = stablehlo.add %x, %t : tensor<33x33xi32>
  %z = stablehlo.constant dense<0> : tensor<i32>
  %c = stablehlo.reduce(%s init: %z) applies stablehlo.add across dimensions = [0] : (tensor<33x33xi32>, tensor<i32>) -> tensor<33xi32>
  %a = stablehlo.reduce(%s init: %z) applies stablehlo.add across dimensions = [0, 1] : (tensor<33x33xi32>, tensor<i32>) -> tensor<i32>
  return %s, %c, %a : tensor<33x33xi32>, tensor<33xi32>, tensor<i32>
}""", [(33, 33)], np.int32, None),
    "reshape_slice_iota": ("""
func.func @main(%x: tensor<6x20xf64>) -> tensor<4x5xf64> {
  %r = stablehlo.reshape %x : (tensor<6x20xf64>) -> tensor<12x10xf64>
  %s = stablehlo.slice %r [1:9:2, 2:7] : (tensor<12x10xf64>) -> tensor<4x5xf64>
  %i = stablehlo.iota dim = 1 : tensor<4x5xf64>
  %m = stablehlo.multiply %s, %i : tensor<4x5xf64>
  return %m : tensor<4x5xf64>
}""", [(6, 20)], np.float64, None),
    "dot": ("""
func.func @main(%a: tensor<2x8x16xf32>, %b: tensor<2x16x4xf32>) -> tensor<2x8x4xf32> {
  %d = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<2x8x16xf32>, tensor<2x16x4xf32>) -> tensor<2x8x4xf32>
  return %d : tensor<2x8x4xf32>
}""", [(2, 8, 16), (2, 16, 4)], np.float32, _dot),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program(name: str) -> None:
    src, shapes, dtype, exact = PROGRAMS[name]
    rng = np.random.default_rng(0)
    args = [(rng.standard_normal(s) * 10).astype(dtype) for s in shapes]
    ref = xlapy.compile(src, backend="interpreter")(*args)
    cpu = xlapy.compile(src, backend="cpu")
    got = cpu(*args)
    refs = ref if isinstance(ref, tuple) else (ref,)
    gots = got if isinstance(got, tuple) else (got,)
    for r, g in zip(refs, gots):
        if exact is None:
            assert_same(g, r, what=name)
        else:
            exact(*args).check(g, f"{name} cpu")
            exact(*args).check(r, f"{name} interpreter")
    assert "interpreter fallback" not in cpu._exe.explain().split("--")[0]
