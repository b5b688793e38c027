# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""passes/native_forms.py on cpu: chlo.scan as a native while loop, dynamic-shape ops with
constant sizes as their static ops; bit-exact against the interpreter and not in
`fallbacks()`. Sizes known only at run time stay the (listed) fallback."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.fallbacks import fallback_ops

SCAN_2D = """
func.func @main(%x: tensor<3x4xi32>, %y: tensor<3x4xi32>, %c: tensor<3xi32>) -> (tensor<3x4xi32>, tensor<3x4xi32>, tensor<3xi32>) {
  %0:3 = chlo.scan(%x, %y) inits(%c) dimension=1 is_reverse=REVERSE {
  ^bb0(%a: tensor<3xi32>, %b: tensor<3xi32>, %s: tensor<3xi32>):
    %m = stablehlo.multiply %a, %b : tensor<3xi32>
    %t = stablehlo.add %s, %m : tensor<3xi32>
    %u = stablehlo.subtract %t, %a : tensor<3xi32>
    stablehlo.return %t, %u, %t : tensor<3xi32>, tensor<3xi32>, tensor<3xi32>
  } : (tensor<3x4xi32>, tensor<3x4xi32>, tensor<3xi32>) -> (tensor<3x4xi32>, tensor<3x4xi32>, tensor<3xi32>)
  return %0#0, %0#1, %0#2 : tensor<3x4xi32>, tensor<3x4xi32>, tensor<3xi32>
}
"""

SCAN_F32 = """
func.func @main(%x: tensor<5x2xf32>, %c: tensor<2xf32>) -> (tensor<5x2xf32>, tensor<2xf32>) {
  %0:2 = chlo.scan(%x) inits(%c) dimension=0 {
  ^bb0(%a: tensor<2xf32>, %s: tensor<2xf32>):
    %e = stablehlo.tanh %a : tensor<2xf32>
    %t = stablehlo.add %s, %e : tensor<2xf32>
    stablehlo.return %t, %t : tensor<2xf32>, tensor<2xf32>
  } : (tensor<5x2xf32>, tensor<2xf32>) -> (tensor<5x2xf32>, tensor<2xf32>)
  return %0#0, %0#1 : tensor<5x2xf32>, tensor<2xf32>
}
"""


def _both(text: str, *args: np.ndarray) -> tuple[object, object, object]:
    cpu = xlapy.compile(text, backend="cpu")
    return xlapy.compile(text, backend="interpreter")(*args), cpu(*args), cpu


def _same(got: object, want: object) -> None:
    got_t = got if isinstance(got, tuple) else (got,)
    want_t = want if isinstance(want, tuple) else (want,)
    assert len(got_t) == len(want_t)
    for g, w in zip(got_t, want_t):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def _ops(cpu: object) -> set[str]:
    return {key.split(":")[0] for _, key in fallback_ops(cpu)}


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_is_a_native_while_loop(reverse: bool) -> None:
    text = SCAN_2D.replace(" is_reverse=REVERSE", " is_reverse=true" if reverse else "")
    rng = np.random.default_rng(1)
    x, y = (rng.integers(-1000, 1000, (3, 4)).astype(np.int32) for _ in range(2))
    c = np.array([7, -3, 2**31 - 5], np.int32)  # wraps
    want, got, cpu = _both(text, x, y, c)
    _same(got, want)
    assert not fallback_ops(cpu)
    assert "native while loop" in cpu._exe.explain()


def test_scan_float_body() -> None:
    x = np.linspace(-2, 2, 10, dtype=np.float32).reshape(5, 2)
    c = np.array([0.25, -1.0], np.float32)
    want, got, cpu = _both(SCAN_F32, x, c)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)
    assert "chlo.scan" not in _ops(cpu)


DYNAMIC = """
func.func @main(%x: tensor<3x1xi64>, %v: tensor<i64>, %g: tensor<3x4x2xi64>, %idx: tensor<2x2xi64>) -> (tensor<3x2x2xi64>, tensor<3xi64>, tensor<2x3xi64>, tensor<5x3xi64>, tensor<2x2x2xi64>, tensor<i32>, tensor<2x1xi64>) {
  %dims = stablehlo.constant dense<[3, 2, 2]> : tensor<3xi64>
  %b = "stablehlo.dynamic_broadcast_in_dim"(%x, %dims) {broadcast_dimensions = array<i64: 0, 2>} : (tensor<3x1xi64>, tensor<3xi64>) -> tensor<3x2x2xi64>
  %s1 = stablehlo.constant dense<[3]> : tensor<1xi64>
  %r = stablehlo.dynamic_reshape %x, %s1 : (tensor<3x1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %s2 = stablehlo.constant dense<[2, 3]> : tensor<2xi64>
  %i = stablehlo.dynamic_iota %s2, dim = 1 : (tensor<2xi64>) -> tensor<2x3xi64>
  %lo = stablehlo.constant dense<[1, 1]> : tensor<2xi64>
  %hi = stablehlo.constant dense<[1, 1]> : tensor<2xi64>
  %in = stablehlo.constant dense<[0, 1]> : tensor<2xi64>
  %p = stablehlo.dynamic_pad %x, %v, %lo, %hi, %in : (tensor<3x1xi64>, tensor<i64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<5x3xi64>
  %ss = stablehlo.constant dense<[1, 2, 2]> : tensor<3xi64>
  %ga = "stablehlo.dynamic_gather"(%g, %idx, %ss) {dimension_numbers = #stablehlo.gather<offset_dims = [1, 2], collapsed_slice_dims = [0], start_index_map = [1, 0], index_vector_dim = 1>, indices_are_sorted = false} : (tensor<3x4x2xi64>, tensor<2x2xi64>, tensor<3xi64>) -> tensor<2x2x2xi64>
  %n = stablehlo.get_dimension_size %g, dim = 1 : (tensor<3x4x2xi64>) -> tensor<i32>
  %n64 = stablehlo.convert %n : (tensor<i32>) -> tensor<i64>
  %four = stablehlo.constant dense<4> : tensor<i64>
  %z = stablehlo.subtract %n64, %four : tensor<i64>
  %z1 = stablehlo.reshape %z : (tensor<i64>) -> tensor<1xi64>
  %st = stablehlo.concatenate %z1, %z1, dim = 0 : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %lim = stablehlo.constant dense<[2, 1]> : tensor<2xi64>
  %one = stablehlo.constant dense<1> : tensor<2xi64>
  %sl = stablehlo.real_dynamic_slice %x, %st, %lim, %one : (tensor<3x1xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<2x1xi64>
  return %b, %r, %i, %p, %ga, %n, %sl : tensor<3x2x2xi64>, tensor<3xi64>, tensor<2x3xi64>, tensor<5x3xi64>, tensor<2x2x2xi64>, tensor<i32>, tensor<2x1xi64>
}
"""


def test_dynamic_ops_with_constant_sizes_are_static() -> None:
    x = np.array([[5], [-6], [7]], np.int64)
    g = np.arange(24, dtype=np.int64).reshape(3, 4, 2)
    idx = np.array([[0, 0], [3, 2]], np.int64)  # the second start is clamped
    want, got, cpu = _both(DYNAMIC, x, np.int64(-1), g, idx)
    _same(got, want)
    assert not fallback_ops(cpu)


def test_dynamic_conv_with_constant_padding() -> None:
    text = """
func.func @main(%l: tensor<1x4x4x1xf32>, %r: tensor<3x3x1x1xf32>) -> tensor<1x2x2x1xf32> {
  %pad = stablehlo.constant dense<1> : tensor<2x2xi64>
  %0 = "stablehlo.dynamic_conv"(%l, %r, %pad) {window_strides = array<i64: 4, 4>, lhs_dilation = array<i64: 2, 2>, rhs_dilation = array<i64: 1, 1>, window_reversal = array<i1: false, false>, dimension_numbers = #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>, batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x4x1xf32>, tensor<3x3x1x1xf32>, tensor<2x2xi64>) -> tensor<1x2x2x1xf32>
  return %0 : tensor<1x2x2x1xf32>
}
"""
    lhs = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    rhs = np.ones((3, 3, 1, 1), np.float32)
    want, got, cpu = _both(text, lhs, rhs)
    _same(got, want)
    assert not fallback_ops(cpu)


def test_run_time_sizes_stay_on_the_interpreter() -> None:
    """A size operand that is a parameter: the op keeps its run-time check (a wrong size is
    the interpreter's loud error, never a wrong answer)."""
    text = """
func.func @main(%x: tensor<2x3xi32>, %s: tensor<2xi64>) -> tensor<3x2xi32> {
  %0 = stablehlo.dynamic_reshape %x, %s : (tensor<2x3xi32>, tensor<2xi64>) -> tensor<3x2xi32>
  return %0 : tensor<3x2xi32>
}
"""
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    want, got, cpu = _both(text, x, np.array([3, 2], np.int64))
    _same(got, want)
    assert _ops(cpu) == {"dynamic_reshape"}
    with pytest.raises(Exception, match="dynamic shape"):
        cpu(x, np.array([6, 1], np.int64))


BITCAST = """
func.func @main(%w: tensor<3xcomplex<f64>>, %n: tensor<3x2xcomplex<f32>>) -> (tensor<3x2xcomplex<f32>>, tensor<3xcomplex<f64>>, tensor<3x2xcomplex<f32>>) {
  %a = stablehlo.bitcast_convert %w : (tensor<3xcomplex<f64>>) -> tensor<3x2xcomplex<f32>>
  %b = stablehlo.bitcast_convert %n : (tensor<3x2xcomplex<f32>>) -> tensor<3xcomplex<f64>>
  %c = stablehlo.bitcast_convert %n : (tensor<3x2xcomplex<f32>>) -> tensor<3x2xcomplex<f32>>
  return %a, %b, %c : tensor<3x2xcomplex<f32>>, tensor<3xcomplex<f64>>, tensor<3x2xcomplex<f32>>
}
"""


def test_complex_bitcasts_are_part_bitcasts() -> None:
    """Bit for bit, NaN payloads and denormal halves included (no part is flushed)."""
    rng = np.random.default_rng(3)
    wide = rng.integers(0, 2**63, 6, dtype=np.uint64)
    wide[:3] = [0x0123456789ABCDEF, 0x7FF8000000000001, 0x0000000000000001]
    narrow = rng.integers(0, 2**32, 12, dtype=np.uint64).astype(np.uint32)
    narrow[:3] = [0x7FC00001, 0x00000001, 0xFF800000]
    w, n = wide.view(np.complex128), narrow.view(np.complex64).reshape(3, 2)
    want, got, cpu = _both(BITCAST, w, n)
    for g, x in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint32), np.asarray(x).view(np.uint32))
    assert not fallback_ops(cpu)


QUANT = """
func.func @main(%x: tensor<4x3xEXP>, %q: tensor<4x3xSTO>) -> (tensor<4x3xSTO>, tensor<4x3xSTO>, tensor<4x3xEXP>, tensor<4x3xSTO>) {
  %a = stablehlo.uniform_quantize %x : (tensor<4x3xEXP>) -> tensor<4x3x!quant.uniform<QSTO:EXP, 0.37:ZA>>
  %a_bits = stablehlo.bitcast_convert %a : (tensor<4x3x!quant.uniform<QSTO:EXP, 0.37:ZA>>) -> tensor<4x3xSTO>
  %b = stablehlo.uniform_quantize %x : (tensor<4x3xEXP>) -> tensor<4x3x!quant.uniform<QSTO:EXP:1, {0.5:2, 1.25:ZB, 3.0:0}>>
  %b_bits = stablehlo.bitcast_convert %b : (tensor<4x3x!quant.uniform<QSTO:EXP:1, {0.5:2, 1.25:ZB, 3.0:0}>>) -> tensor<4x3xSTO>
  %qq = stablehlo.bitcast_convert %q : (tensor<4x3xSTO>) -> tensor<4x3x!quant.uniform<QSTO:EXP:1, {0.5:2, 1.25:ZB, 3.0:0}>>
  %c = stablehlo.uniform_dequantize %qq : (tensor<4x3x!quant.uniform<QSTO:EXP:1, {0.5:2, 1.25:ZB, 3.0:0}>>) -> tensor<4x3xEXP>
  %d = stablehlo.uniform_quantize %qq : (tensor<4x3x!quant.uniform<QSTO:EXP:1, {0.5:2, 1.25:ZB, 3.0:0}>>) -> tensor<4x3x!quant.uniform<QSTO:EXP, 0.37:ZA>>
  %d_bits = stablehlo.bitcast_convert %d : (tensor<4x3x!quant.uniform<QSTO:EXP, 0.37:ZA>>) -> tensor<4x3xSTO>
  return %a_bits, %b_bits, %c, %d_bits : tensor<4x3xSTO>, tensor<4x3xSTO>, tensor<4x3xEXP>, tensor<4x3xSTO>
}
"""
_STORAGE = {"i8": np.int8, "ui8": np.uint8, "i16": np.int16, "i32": np.int32}
_EXPRESSED = {"f32": np.float32, "f64": np.float64, "f16": np.float16}


@pytest.mark.parametrize(("sto", "exp"), [("i8", "f32"), ("ui8", "f32"), ("i16", "f64"),
                                          ("i32", "f32"), ("i8", "f16")])
def test_quantization_is_integer_arithmetic(sto: str, exp: str) -> None:
    """Per-tensor and per-axis quantize, dequantize and requantize: bit-exact."""
    qsto = "u8" if sto == "ui8" else sto  # MLIR's quant syntax spells unsigned `u8`
    za, zb = ("3", "1") if sto == "ui8" else ("-3", "-1")
    text = QUANT.replace("QSTO", qsto).replace("STO", sto).replace("EXP", exp) \
        .replace("ZA", za).replace("ZB", zb)
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((4, 3)) * 60).astype(_EXPRESSED[exp])
    if sto != "i32":  # (i32:f32: the bound 2^31 - 1 rounds to 2^31 in f32, which convert
        # saturates to 2^31 - 1 as XLA does; numpy's cast in the interpreter gives -2^31)
        x[0, :] = [np.inf, -np.inf, 1e30 if exp != "f16" else 6e4]
    x[1, :] = [0.185, -0.555, 2.5]  # ties of x / scale
    info = np.iinfo(_STORAGE[sto])
    lo, hi = (-(2**20), 2**20) if sto == "i32" else (int(info.min), int(info.max))  # (same)
    q = rng.integers(lo, hi, (4, 3), endpoint=True).astype(_STORAGE[sto])
    want, got, cpu = _both(text, x, q)
    _same(got, want)
    assert not fallback_ops(cpu)
