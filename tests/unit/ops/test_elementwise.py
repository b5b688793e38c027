"""Element-wise shape inference (valid case + violated constraint label per op) and the
edge semantics of evaluate that XLA's CPU backend defines (checked against jax elsewhere)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from xlapy.errors import ShapeInferenceError
from xlapy.ops.attrs import ComparisonDirection, ComparisonType
from xlapy.ops.base import OPS, infer_shape
from xlapy.ops.elementwise import CompareAttrs, ElementwiseOp, flush, has_denormal
from xlapy.ops.elementwise_convert import (
    BitcastConvertAttrs,
    ConvertAttrs,
    ReducePrecisionAttrs,
)
from xlapy.types import ElementType, Shape

E = ElementType


def A(t: ElementType, *dims: int) -> Shape:
    return Shape.array(t, dims)


_TABLE_OPS = sorted(n for n, op in OPS.items() if isinstance(op, ElementwiseOp))


def _valid_type(op: ElementwiseOp) -> ElementType:
    for t in (E.F32, E.S32, E.PRED):
        if t in op.types:
            return t
    raise AssertionError(op.name)


@pytest.mark.parametrize("name", _TABLE_OPS)
def test_table_op_valid_and_c1(name: str) -> None:
    op = OPS[name]
    assert isinstance(op, ElementwiseOp)
    t = _valid_type(op)
    shapes = [A(t, 2, 3)] * op.arity
    out = infer_shape(name, shapes)
    assert out.dimensions == (2, 3)
    # A wrong element type violates C1.
    bad = next((b for b in (E.PRED, E.C64, E.U8, E.F32) if b not in op.types), None)
    if bad is not None:
        with pytest.raises(ShapeInferenceError, match=f"{name}_c1"):
            infer_shape(name, [A(bad, 2, 3)] * op.arity)
    if op.arity == 2:
        with pytest.raises(ShapeInferenceError, match=f"{name}_c1"):
            infer_shape(name, [A(t, 2, 3), A(t, 3, 2)])


def test_result_types() -> None:
    assert infer_shape("abs", [A(E.C64, 2)]) == A(E.F32, 2)
    assert infer_shape("real", [A(E.C128, 2)]) == A(E.F64, 2)
    assert infer_shape("imag", [A(E.F32, 2)]) == A(E.F32, 2)
    assert infer_shape("is_finite", [A(E.BF16, 2)]) == A(E.PRED, 2)
    assert infer_shape("complex", [A(E.F64, 2)] * 2) == A(E.C128, 2)


def test_compare() -> None:
    lt = CompareAttrs(ComparisonDirection.LT)
    assert infer_shape("compare", [A(E.F32, 4)] * 2, lt) == A(E.PRED, 4)
    with pytest.raises(ShapeInferenceError, match="compare_c1"):
        infer_shape("compare", [A(E.F32, 4), A(E.S32, 4)], lt)
    with pytest.raises(ShapeInferenceError, match="compare_c3"):
        infer_shape("compare", [A(E.S32, 4)] * 2,
                    CompareAttrs(ComparisonDirection.LT, ComparisonType.FLOAT))


def test_select_and_clamp() -> None:
    assert infer_shape("select", [A(E.PRED), A(E.F32, 3), A(E.F32, 3)]) == A(E.F32, 3)
    with pytest.raises(ShapeInferenceError, match="select_c1"):
        infer_shape("select", [A(E.PRED, 2), A(E.F32, 3), A(E.F32, 3)])
    with pytest.raises(ShapeInferenceError, match="select_c2"):
        infer_shape("select", [A(E.PRED), A(E.F32, 3), A(E.S32, 3)])
    assert infer_shape("clamp", [A(E.S8), A(E.S8, 5), A(E.S8)]) == A(E.S8, 5)
    with pytest.raises(ShapeInferenceError, match="clamp_c1"):
        infer_shape("clamp", [A(E.S8, 4), A(E.S8, 5), A(E.S8)])
    with pytest.raises(ShapeInferenceError, match="clamp_c2"):
        infer_shape("clamp", [A(E.S8), A(E.S8, 5), A(E.S8, 2)])
    with pytest.raises(ShapeInferenceError, match="clamp_c3"):
        infer_shape("clamp", [A(E.S8), A(E.S8, 5), A(E.S16)])


def test_conversions_infer() -> None:
    assert infer_shape("convert", [A(E.F32, 2)], ConvertAttrs(E.S4)) == A(E.S4, 2)
    bc = BitcastConvertAttrs
    assert infer_shape("bitcast_convert", [A(E.F32, 2)], bc(E.U8)) == A(E.U8, 2, 4)
    assert infer_shape("bitcast_convert", [A(E.U8, 2, 4)], bc(E.F32)) == A(E.F32, 2)
    assert infer_shape("bitcast_convert", [A(E.S8, 3, 2)], bc(E.S4)) == A(E.S4, 3, 2, 2)
    with pytest.raises(ShapeInferenceError, match="bitcast_convert_c1"):
        infer_shape("bitcast_convert", [A(E.U8, 2, 3)], bc(E.F32))
    with pytest.raises(ShapeInferenceError, match="bitcast_convert_c2"):
        infer_shape("bitcast_convert", [A(E.C64, 2)], bc(E.F64))
    rp = ReducePrecisionAttrs
    assert infer_shape("reduce_precision", [A(E.F32, 2)], rp(5, 10)) == A(E.F32, 2)
    with pytest.raises(ShapeInferenceError, match="reduce_precision_c1"):
        infer_shape("reduce_precision", [A(E.S32, 2)], rp(5, 10))
    with pytest.raises(ShapeInferenceError, match="reduce_precision_c2"):
        infer_shape("reduce_precision", [A(E.F32, 2)], rp(0, 10))
    with pytest.raises(ShapeInferenceError, match="reduce_precision_c3"):
        infer_shape("reduce_precision", [A(E.F32, 2)], rp(5, -1))


# ---- evaluation edge semantics ----------------------------------------------------------------
def ev(name: str, *args: np.ndarray, attrs: object = None) -> np.ndarray:
    op = OPS[name]
    shapes = [Shape.array(_et(a), a.shape) for a in args]
    from xlapy.ops.base import NO_ATTRS

    at = NO_ATTRS if attrs is None else attrs
    return op.evaluate(list(args), at, infer_shape(name, shapes, at), None)  # type: ignore


def _et(a: np.ndarray) -> ElementType:
    from xlapy.types import from_dtype

    return from_dtype(a.dtype)


def test_integer_division_edges() -> None:
    a = np.array([7, -7, -128, 5], np.int8)
    b = np.array([2, 2, -1, 0], np.int8)
    assert ev("divide", a, b).tolist() == [3, -3, -128, -1]
    assert ev("remainder", a, b).tolist() == [1, -1, 0, 5]


def test_shifts_and_pow() -> None:
    x = np.array([1, -1, -8, 5], np.int8)
    s = np.array([8, 8, 9, -1], np.int8)
    assert ev("shift_left", x, s).tolist() == [0, 0, 0, 0]
    assert ev("shift_right_arithmetic", x, s).tolist() == [0, -1, -1, 0]
    b = np.array([2, -1, -1, 0, 3], np.int32)
    e = np.array([-1, -1, -2, -1, 2], np.int32)
    assert ev("power", b, e).tolist() == [0, -1, 1, 0, 9]


def test_integer_power_big_exponents() -> None:
    """XLA CPU (jaxlib >= 0.12): unsigned exponents are never negative (u8 3**135 was 0), an
    even base to an exponent >= 64 is 0 (s32 (-2)**75 was -2048); odd bases use exponent bits
    0..5 only (3**65 is 3)."""
    b = np.array([3, 2, 1, 255, 4, 3], np.uint8)
    e = np.array([135, 200, 255, 129, 63, 64], np.uint8)
    assert ev("power", b, e).tolist() == [139, 0, 1, 255, 0, 1]
    b32 = np.array([-2, 3, -3, 2, 6, -1, 5], np.int32)
    e32 = np.array([75, 65, 64, 31, 64, -7, -2], np.int32)
    assert ev("power", b32, e32).tolist() == [0, 3, 1, -2**31, 0, -1, 0]
    b64 = np.array([2, 7], np.uint64)
    e64 = np.array([2**63 + 2, 2**63 + 1], np.uint64)
    assert ev("power", b64, e64).tolist() == [0, 7]


def test_float_edges() -> None:
    z = np.array([0.0, -0.0, 1e-40, np.nan], np.float32)
    w = np.array([-0.0, 0.0, 0.0, 1.0], np.float32)
    mx = ev("maximum", z, w)
    assert not np.signbit(mx[:3]).any() and np.isnan(mx[3])
    assert ev("add", np.array([1e-40], np.float32), np.array([0.0], np.float32))[0] == 0
    r = ev("round_nearest_afz", np.array([0.5, -2.5, 0.49999997], np.float32))
    assert r.tolist() == [1.0, -3.0, 0.0]


def test_convert_saturates() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -2.7], np.float32)
    assert ev("convert", x, attrs=ConvertAttrs(E.S32)).tolist() == \
        [0, 2**31 - 1, -2**31, 2**31 - 1, -2]
    assert ev("convert", x, attrs=ConvertAttrs(E.U8)).tolist() == [0, 255, 0, 255, 0]


def test_bitcast_roundtrip() -> None:
    x = np.array([1.0, -2.5], np.float32)
    u = ev("bitcast_convert", x, attrs=BitcastConvertAttrs(E.U8))
    assert u.shape == (2, 4) and u[0].tolist() == [0, 0, 128, 63]
    back = ev("bitcast_convert", u, attrs=BitcastConvertAttrs(E.F32))
    assert back.tolist() == [1.0, -2.5]


def test_bitcast_pred_and_complex_widths() -> None:
    """The spec's num_bits(i1) = 1, little-endian; complex types reinterpret memory."""
    bits = np.array([True, False] * 4 + [False] * 8)
    assert ev("bitcast_convert", bits, attrs=BitcastConvertAttrs(E.U16)).tolist() == 0x55
    back = ev("bitcast_convert", np.array(0x0F, np.uint8), attrs=BitcastConvertAttrs(E.PRED))
    assert back.tolist() == [True] * 4 + [False] * 4
    c = np.array([1 + 2j, -3 - 4j], np.complex128)
    halves = ev("bitcast_convert", c, attrs=BitcastConvertAttrs(E.C64))
    assert halves.shape == (2, 2)
    assert halves.tobytes() == c.tobytes()
    whole = ev("bitcast_convert", halves, attrs=BitcastConvertAttrs(E.C128))
    assert whole.tolist() == c.tolist()


def test_complex_cbrt_is_principal_root() -> None:
    z = np.array([3 + 4j, -8 + 0j, 0j], np.complex128)
    r = ev("cbrt", z)
    np.testing.assert_allclose(r[0], 1.6289371459221759 + 0.5201745023045458j, rtol=1e-15)
    np.testing.assert_allclose(r[1], 1 + np.sqrt(3) * 1j, rtol=1e-15)
    assert r[2] == 0


def test_convert_complex_and_pred_flushing() -> None:
    """complex -> its component type extracts without a flush; complex -> pred tests the
    flushed real part; bf16 -> pred tests the bits (denormals are true), as XLA CPU does."""
    c = np.array([1e-40 + 0j, 1j, 2 + 0j], np.complex64)
    assert ev("convert", c, attrs=ConvertAttrs(E.F32)).tolist() == \
        [np.float32(1e-40), 0.0, 2.0]
    assert ev("convert", c, attrs=ConvertAttrs(E.PRED)).tolist() == [False, False, True]
    b = np.array([1e-39, 0.0], ml_dtypes.bfloat16)
    assert ev("convert", b, attrs=ConvertAttrs(E.PRED)).tolist() == [True, False]
    f = np.array([1e-39, 0.0], np.float32)
    assert ev("convert", f, attrs=ConvertAttrs(E.PRED)).tolist() == [False, False]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_has_denormal_and_flush(dt: type) -> None:
    """The reduction-based check agrees with the definition, zeros and NaN included, in
    slices of a large array too; flush copies only when it changes something."""
    tiny = np.finfo(dt).tiny
    rng = np.random.default_rng(1)
    pool = np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, tiny, -tiny, tiny / 3,
                     -tiny / 3, tiny * (1 - 2 ** -20), 1e-30])
    for n in [1, 2, 5, 300_000]:
        for _ in range(30):
            x = rng.choice(pool, n).astype(dt)
            if n > 5:
                x[:] = rng.choice(pool[[2, 3, 4, 0]], n)
                x[rng.integers(0, n)] = rng.choice(pool)
            want = bool(np.any((np.abs(x) < tiny) & (x != 0)))
            assert has_denormal(x) == want
            f = flush(x)
            assert (f is x) == (not want)
            with np.errstate(invalid="ignore"):
                ref = np.where(np.abs(x) < tiny, x * 0, x)
            assert f.tobytes() == ref.tobytes()
    assert not has_denormal(np.array(-0.0, dt))
    c = np.array([tiny / 2 - 1j * tiny / 4, 1 + 1j], np.complex64 if dt == np.float32
                 else np.complex128)
    fc = flush(c)
    assert fc[0] == 0 and np.signbit(fc[0].imag) and fc[1] == c[1]


def test_flush_does_not_touch_operands() -> None:
    x = np.array([1e-40, 2.0], np.float32)
    out = ev("multiply", x, np.array([1.0, 1.0], np.float32))
    assert out.tolist() == [0.0, 2.0] and x[0] == np.float32(1e-40)
    y = np.array([4.0, 9.0], np.float32)
    assert ev("sqrt", y) is not y and y.tolist() == [4.0, 9.0]
