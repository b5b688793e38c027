# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""The last columns of a row (fewer than a vector) as one masked vector (masked_emit.py):
dead lanes read and store nothing, row reductions see the reducer's identity there, and
what they compute (a division by zero included) is never seen. The interpreter's bits
wherever the order of a reduction cannot show (max, integers, element-wise), else within
float rounding; the masked loads in the IR where the target has them."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import target

from .test_row_kernels_nd import _softmax_program

F32_MASKED = target.current().has("avx2")
#: Masked stores (AVX-512); AVX2 code stores power-of-two pieces (vmaskmov is slow on AMD).
STORE = "llvm.masked.store" if target.current().has("avx512f") else "llvm.masked.load"


def _shift_by_max(rows: int, c: int, op: str = "maximum", t: str = "f32",
                  init: str = "0xFF800000") -> str:
    return f"""
func.func @main(%x: tensor<{rows}x{c}x{t}>) -> tensor<{rows}x{c}x{t}> {{
  %i = stablehlo.constant dense<{init}> : tensor<{t}>
  %m = stablehlo.reduce(%x init: %i) applies stablehlo.{op} across dimensions = [1] : (tensor<{rows}x{c}x{t}>, tensor<{t}>) -> tensor<{rows}x{t}>
  %b = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<{rows}x{t}>) -> tensor<{rows}x{c}x{t}>
  %r = stablehlo.subtract %x, %b : tensor<{rows}x{c}x{t}>
  return %r : tensor<{rows}x{c}x{t}>
}}
"""


def _both(text: str, *args: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
    cpu = xlapy.compile(text, backend="cpu")
    want = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    return np.asarray(cpu(*args)), want, cpu._exe.kernel_ir


def _special_rows(rows: int, c: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((rows, c)).astype(np.float32)
    x[1, c // 2] = np.nan
    x[2, :] = -0.0
    x[3, :] = -1.0
    x[3, c - 1] = 0.0
    x[4, :] = -np.inf
    x[5, 0] = np.inf
    x[6, c - 1] = -np.nan
    x[7, :] = 0.0
    x[7, 0] = -0.0
    return x


@pytest.mark.parametrize("c", [3, 5, 7, 10, 13, 16, 20, 33])
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_row_max_of_a_masked_tail_is_exact(c: int, op: str) -> None:
    x = _special_rows(64, c, c)
    init = "0xFF800000" if op == "maximum" else "0x7F800000"
    got, want, ir_text = _both(_shift_by_max(64, c, op, init=init), x)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    if F32_MASKED and c % 4:
        assert "llvm.masked.load" in ir_text


@pytest.mark.parametrize("c", [3, 6, 10, 12, 15, 19, 40])
def test_softmax_rows_with_a_masked_tail(c: int) -> None:
    x = _special_rows(200, c, c + 1)
    x[1:8] = np.random.default_rng(0).standard_normal((7, c))  # finite rows here
    got, want, ir_text = _both(_softmax_program((200, c)), x)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    if F32_MASKED and c % 4:
        assert STORE in ir_text


def test_integer_row_sums_and_bf16_rows_with_a_tail() -> None:
    x = np.random.default_rng(1).integers(-1000, 1000, (50, 13)).astype(np.int32)
    got, want, _ = _both(_shift_by_max(50, 13, "add", "i32", "0"), x)
    np.testing.assert_array_equal(got, want)
    import ml_dtypes
    y = np.random.default_rng(2).standard_normal((50, 11)).astype(ml_dtypes.bfloat16)
    got, want, _ = _both(_shift_by_max(50, 11, "maximum", "bf16", "0xFF80"), y)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("c", [12, 21])
def test_reduce_kernel_max_of_short_rows(c: int) -> None:
    x = _special_rows(64, c, 7)
    text = f"""
func.func @main(%x: tensor<64x{c}xf32>) -> tensor<64xf32> {{
  %i = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %i) applies stablehlo.maximum across dimensions = [1] : (tensor<64x{c}xf32>, tensor<f32>) -> tensor<64xf32>
  return %m : tensor<64xf32>
}}
"""
    got, want, _ = _both(text, x)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_element_wise_tail_and_division_in_dead_lanes() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-100, 100, (37, 21)).astype(np.int32)
    y = rng.integers(-3, 4, (37, 21)).astype(np.int32)
    text = """
func.func @main(%x: tensor<37x21xi32>, %y: tensor<37x21xi32>) -> tensor<37x21xi32> {
  %q = stablehlo.divide %x, %y : tensor<37x21xi32>
  %r = stablehlo.remainder %x, %y : tensor<37x21xi32>
  %s = stablehlo.add %q, %r : tensor<37x21xi32>
  return %s : tensor<37x21xi32>
}
"""
    got, want, ir_text = _both(text, x, y)
    np.testing.assert_array_equal(got, want)
    if F32_MASKED:
        assert "llvm.masked.load" in ir_text
