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

def _softmax_program(shape: tuple[int, ...]) -> str:
    """Softmax over the last dimension of `shape`, as JAX lowers it (less the max guard)."""
    t = "x".join(map(str, shape)) + "xf32"
    r = "x".join(map(str, shape[:-1])) + "xf32"
    n = len(shape) - 1
    lead = ", ".join(map(str, range(n)))
    return f"""
func.func @main(%x: tensor<{t}>) -> tensor<{t}> {{
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [{n}] : (tensor<{t}>, tensor<f32>) -> tensor<{r}>
  %mb = stablehlo.broadcast_in_dim %m, dims = [{lead}] : (tensor<{r}>) -> tensor<{t}>
  %d = stablehlo.subtract %x, %mb : tensor<{t}>
  %e = stablehlo.exponential %d : tensor<{t}>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [{n}] : (tensor<{t}>, tensor<f32>) -> tensor<{r}>
  %sb = stablehlo.broadcast_in_dim %s, dims = [{lead}] : (tensor<{r}>) -> tensor<{t}>
  %r = stablehlo.divide %e, %sb : tensor<{t}>
  return %r : tensor<{t}>
}}
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


@pytest.mark.parametrize("shape", [(2, 3, 7, 70), (1, 3, 1, 70), (1, 70), (2, 1, 9)])
def test_softmax_one_kernel_bounded_and_the_same_on_any_thread_count(
        shape: tuple[int, ...]) -> None:
    program = _softmax_program(shape)
    rows = int(np.prod(shape[:-1]))
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    got = [_one_row_kernel(program, t, rows)(x) for t in (1, 2, 3)]
    for g in got[1:]:
        np.testing.assert_array_equal(g, got[0])
    exact = _softmax(x.reshape(rows, shape[-1]))
    exact.check(np.asarray(got[0]).reshape(rows, shape[-1]), "cpu")
    want = xlapy.compile(program, backend="interpreter")(x)
    exact.check(np.asarray(want).reshape(rows, shape[-1]), "interpreter")


# A rank-2 row sum %a and a rank-1 one %z reach the same rank-3 kernel: one row depth per
# kernel, so %z (later in program order) gets a buffer; %c is a row max whose result has the
# root's rank (computed per element of the root, no inner loop). Rows longer than
# short_reduce.SHORT_HEAVY: shorter ones are element-wise folds (%c's up to 16: its values
# are not spread out again).
MIXED = """
func.func @main(%x: tensor<4x5x20xi32>, %w: tensor<4x13xi32>) -> (tensor<4x5x20xi32>, tensor<4x5xi32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %lo = stablehlo.constant dense<-2147483648> : tensor<i32>
  %a = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [2] : (tensor<4x5x20xi32>, tensor<i32>) -> tensor<4x5xi32>
  %z = stablehlo.reduce(%w init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x13xi32>, tensor<i32>) -> tensor<4xi32>
  %ab = stablehlo.broadcast_in_dim %a, dims = [0, 1] : (tensor<4x5xi32>) -> tensor<4x5x20xi32>
  %zb = stablehlo.broadcast_in_dim %z, dims = [0] : (tensor<4xi32>) -> tensor<4x5x20xi32>
  %s = stablehlo.add %x, %ab : tensor<4x5x20xi32>
  %r = stablehlo.subtract %s, %zb : tensor<4x5x20xi32>
  %c = stablehlo.reduce(%x init: %lo) applies stablehlo.maximum across dimensions = [2] : (tensor<4x5x20xi32>, tensor<i32>) -> tensor<4x5xi32>
  %two = stablehlo.constant dense<2> : tensor<4x5xi32>
  %c2 = stablehlo.multiply %c, %two : tensor<4x5xi32>
  return %r, %c2 : tensor<4x5x20xi32>, tensor<4x5xi32>
}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_mixed_row_depths_one_per_kernel_and_rows_of_the_roots_rank(threads: int) -> None:
    rng = np.random.default_rng(6)
    x = rng.integers(-1000, 1000, (4, 5, 20), dtype=np.int32)
    w = rng.integers(-1000, 1000, (4, 13), dtype=np.int32)
    cpu = xlapy.compile(MIXED, backend="cpu", options={"num_threads": threads})
    inlined = {r.name for rs in cpu._exe.row_reduces.values() for r in rs}
    assert inlined == {"a", "c"}
    outer = {k.root.name: k.outer for k in cpu._exe.kernel_specs}
    assert outer["r"] == 20 and outer["c2"] == 20
    want = xlapy.compile(MIXED, backend="interpreter")(x, w)
    for g, v in zip(cpu(x, w), want):
        np.testing.assert_array_equal(g, v)
