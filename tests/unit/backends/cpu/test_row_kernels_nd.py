# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""Row reductions over the last dimension of rank > 2 values (issue 14): softmax over the
last axis of [B, H, L, L] attention scores runs as one row kernel (the max, the exp-sum and
the divide in one pass per row, the outer loop over the leading dimensions flattened), equal
to the interpreter and bit-identical across thread counts."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_reduce import _softmax

# max -> (x - max)^2 -> sum -> scale over the last dimension of [3, 1, 5, 40] (an extent-1
# dimension among the leading ones; the sum read back through a reshape to [3, 1, 5, 1], as
# JAX's keepdims writes it), integers: exact in any order.
ROWS = """
func.func @main(%x: tensor<3x1x5x40xi32>) -> tensor<3x1x5x40xi32> {
  %z = stablehlo.constant dense<0> : tensor<i32>
  %lo = stablehlo.constant dense<-2147483648> : tensor<i32>
  %m = stablehlo.reduce(%x init: %lo) applies stablehlo.maximum across dimensions = [3] : (tensor<3x1x5x40xi32>, tensor<i32>) -> tensor<3x1x5xi32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<3x1x5xi32>) -> tensor<3x1x5x40xi32>
  %d = stablehlo.subtract %x, %mb : tensor<3x1x5x40xi32>
  %dd = stablehlo.multiply %d, %d : tensor<3x1x5x40xi32>
  %s = stablehlo.reduce(%dd init: %z) applies stablehlo.add across dimensions = [3] : (tensor<3x1x5x40xi32>, tensor<i32>) -> tensor<3x1x5xi32>
  %two = stablehlo.constant dense<2> : tensor<3x1x5xi32>
  %s2 = stablehlo.multiply %s, %two : tensor<3x1x5xi32>
  %s4 = stablehlo.reshape %s2 : (tensor<3x1x5xi32>) -> tensor<3x1x5x1xi32>
  %sb = stablehlo.broadcast_in_dim %s4, dims = [0, 1, 2, 3] : (tensor<3x1x5x1xi32>) -> tensor<3x1x5x40xi32>
  %r = stablehlo.add %dd, %sb : tensor<3x1x5x40xi32>
  return %r : tensor<3x1x5x40xi32>
}
"""

SOFTMAX = """
func.func @main(%x: tensor<2x3x7x70xf32>) -> tensor<2x3x7x70xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [3] : (tensor<2x3x7x70xf32>, tensor<f32>) -> tensor<2x3x7xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<2x3x7xf32>) -> tensor<2x3x7x70xf32>
  %d = stablehlo.subtract %x, %mb : tensor<2x3x7x70xf32>
  %e = stablehlo.exponential %d : tensor<2x3x7x70xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [3] : (tensor<2x3x7x70xf32>, tensor<f32>) -> tensor<2x3x7xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0, 1, 2] : (tensor<2x3x7xf32>) -> tensor<2x3x7x70xf32>
  %r = stablehlo.divide %e, %sb : tensor<2x3x7x70xf32>
  return %r : tensor<2x3x7x70xf32>
}
"""


def _one_row_kernel(program: str, threads: int, rows: int) -> xlapy.CompiledProgram:
    cpu = xlapy.compile(program, backend="cpu", options={"num_threads": threads})
    exe = cpu._exe
    assert len(exe.kernel_specs) == 1
    assert len({r.name for rs in exe.row_reduces.values() for r in rs}) == 2
    assert exe.kernel_specs[0].outer == rows  # the leading dimensions, flattened
    return cpu


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_4d_integer_rows_one_kernel_equal_interpreter(threads: int) -> None:
    x = np.random.default_rng(4).integers(-1000, 1000, (3, 1, 5, 40), dtype=np.int32)
    got = _one_row_kernel(ROWS, threads, 15)(x)
    np.testing.assert_array_equal(got, xlapy.compile(ROWS, backend="interpreter")(x))


def test_4d_softmax_one_kernel_bounded_and_the_same_on_any_thread_count() -> None:
    x = np.random.default_rng(5).standard_normal((2, 3, 7, 70)).astype(np.float32)
    got = [_one_row_kernel(SOFTMAX, t, 42)(x) for t in (1, 2, 3)]
    for g in got[1:]:
        np.testing.assert_array_equal(g, got[0])
    _softmax(x.reshape(42, 70)).check(got[0].reshape(42, 70), "cpu")
    want = xlapy.compile(SOFTMAX, backend="interpreter")(x)
    _softmax(x.reshape(42, 70)).check(np.asarray(want).reshape(42, 70), "interpreter")
