"""Element-wise ops: every table row over every element type is either accepted (and then
evaluates to exactly the inferred dtype and shape) or rejected with `<op>_c1`; compare,
select, clamp, convert, bitcast_convert and reduce_precision likewise, with value properties
(bitcast round trips, convert to the same type is the identity)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.property.support import (
    check_valid_or_rejected,
    dims,
    element_types,
    infer_or_label,
    random_array,
    run_op,
)
from xlapy.ops import OPS
from xlapy.ops.attrs import ComparisonDirection, ComparisonType
from xlapy.ops.elementwise import CompareAttrs, ElementwiseOp
from xlapy.ops.elementwise_convert import (
    BitcastConvertAttrs,
    ConvertAttrs,
    ReducePrecisionAttrs,
)
from xlapy.types import ARRAY_TYPES, ElementType, Shape

ROWS = sorted(name for name, op in OPS.items() if isinstance(op, ElementwiseOp))
seeds = st.integers(0, 2**16)

def _bits(x: np.ndarray) -> bytes:
    return np.array(x, order="C").tobytes()


@pytest.mark.parametrize("name", ROWS)
def test_row_accepts_exactly_its_types_and_evaluates_them(name: str) -> None:
    """Every array type: accepted iff the row lists it; accepted ones evaluate (edge values
    included: NaN, inf, the integer extremes) to the inferred shape."""
    op = OPS[name]
    assert isinstance(op, ElementwiseOp)
    for i, et in enumerate(ARRAY_TYPES):
        values = [random_array(et, (2, 3), 7 * i + k) for k in range(op.arity)]
        got = check_valid_or_rejected(name, values, None)
        assert (got is not None) == (et in op.types), (name, et)
        if got is not None:
            want = op.result_type(et) if op.result_type else et
            assert got == Shape.array(want, (2, 3))


@st.composite
def row_cases(draw: st.DrawFn) -> tuple[str, list[np.ndarray], bool]:
    name = draw(st.sampled_from(ROWS))
    op = OPS[name]
    et = draw(element_types)
    shape = draw(dims())
    values = [random_array(et, shape, draw(seeds)) for _ in range(op.arity)]
    same = True
    if op.arity == 2 and draw(st.integers(0, 3)) == 0:
        same = False
        if draw(st.booleans()):
            values[1] = random_array(draw(element_types), shape, 1)
        else:
            values[1] = random_array(et, draw(dims()), 1)
    return name, values, same


@given(row_cases())
def test_row_shapes(case: tuple[str, list[np.ndarray], bool]) -> None:
    """Any shape (empty and 0-d included); operands differing in shape or type are c1."""
    name, values, same = case
    got = check_valid_or_rejected(name, values, None)
    equal = all(v.shape == values[0].shape and v.dtype == values[0].dtype for v in values)
    if got is not None:
        assert equal
        assert got.dimensions == values[0].shape
    if equal and values[0].dtype in {t.dtype for t in OPS[name].types}:  # type: ignore[attr-defined]
        assert got is not None


# ---- compare ----------------------------------------------------------------------------------
@given(element_types, dims(), seeds, st.sampled_from(list(ComparisonDirection)),
       st.sampled_from([None, *ComparisonType]))
def test_compare(et: ElementType, shape: tuple[int, ...], seed: int,
                 direction: ComparisonDirection, ct: ComparisonType | None) -> None:
    x, y = random_array(et, shape, seed), random_array(et, shape, seed + 1)
    if seed % 4 == 0:
        y = x.copy()  # equal elements exercise EQ/LE/GE
    got = check_valid_or_rejected("compare", [x, y], CompareAttrs(direction, ct))
    fits = ct is None or {
        ComparisonType.FLOAT: et.is_float or et.is_complex,
        ComparisonType.TOTALORDER: et.is_float or et.is_complex,
        ComparisonType.SIGNED: et.is_signed or et.is_pred,
        ComparisonType.UNSIGNED: et.is_unsigned or et.is_pred}[ct]
    if fits and not et.is_complex:
        assert got == Shape.array(ElementType.PRED, shape)
    if got is not None and not et.is_complex and et.is_integer:
        want = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
                "GT": np.greater, "GE": np.greater_equal}[direction.value](
                    x.astype(np.int64) if et.is_signed else x.astype(np.uint64),
                    y.astype(np.int64) if et.is_signed else y.astype(np.uint64))
        np.testing.assert_array_equal(run_op("compare", [x, y], CompareAttrs(direction, ct))[1],
                                      want)


# ---- select and clamp -------------------------------------------------------------------------
@given(element_types, dims(), seeds, st.sampled_from(["same", "scalar", "bad_shape",
                                                      "bad_pred", "bad_branch"]))
def test_select(et: ElementType, shape: tuple[int, ...], seed: int, how: str) -> None:
    on_true, on_false = random_array(et, shape, seed), random_array(et, shape, seed + 1)
    pshape = () if how == "scalar" else shape
    pred_t = ElementType.S8 if how == "bad_pred" else ElementType.PRED
    if how == "bad_shape":
        pshape = shape + (2,)
    pred = random_array(pred_t, pshape, seed + 2)
    if how == "bad_branch":
        on_false = random_array(ElementType.S8 if et != ElementType.S8 else ElementType.U8,
                                shape, seed)
    got = check_valid_or_rejected("select", [pred, on_true, on_false], None)
    assert (got is not None) == (how in ("same", "scalar") or (how == "bad_shape" and False))
    if got is not None:
        out = run_op("select", [pred, on_true, on_false])[1]
        assert _bits(out) == _bits(np.where(pred, on_true, on_false).astype(et.dtype))


@given(element_types, dims(), seeds, st.booleans(), st.booleans(), st.booleans())
def test_clamp(et: ElementType, shape: tuple[int, ...], seed: int, lo_scalar: bool,
               hi_scalar: bool, mismatch: bool) -> None:
    lo = random_array(et, () if lo_scalar else shape, seed)
    hi = random_array(et, () if hi_scalar else shape, seed + 1)
    x = random_array(et, shape, seed + 2)
    if mismatch:
        hi = random_array(et, shape + (3,), seed)
    got = check_valid_or_rejected("clamp", [lo, x, hi], None)
    if not mismatch:
        assert got == Shape.array(et, shape)
    else:
        assert got is None


# ---- convert ----------------------------------------------------------------------------------
@pytest.mark.parametrize("source", ARRAY_TYPES, ids=str)
def test_convert_every_pair(source: ElementType) -> None:
    """Every (source, target) pair converts edge-rich values to exactly the target dtype;
    converting to the source type is the identity."""
    x = random_array(source, (4, 5), 11)
    for target in ARRAY_TYPES:
        shape, out = run_op("convert", [x], ConvertAttrs(target))
        assert shape == Shape.array(target, (4, 5))
        if target == source:
            assert _bits(out) == _bits(x)


@given(element_types, element_types, dims(), seeds)
def test_convert_shapes(src: ElementType, dst: ElementType, shape: tuple[int, ...],
                        seed: int) -> None:
    got = check_valid_or_rejected("convert", [random_array(src, shape, seed)],
                                  ConvertAttrs(dst))
    assert got == Shape.array(dst, shape)


def test_convert_rejects_non_array_types() -> None:
    for bad in (ElementType.TOKEN, ElementType.TUPLE):
        assert infer_or_label("convert", [Shape.array(ElementType.F32, (2,))],
                              ConvertAttrs(bad)) is None


# ---- bitcast_convert --------------------------------------------------------------------------
def _bitcast_shape(src: ElementType, dst: ElementType,
                   shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The spec's result shape (C1, with num_bits(i1) = 1), or None where C1/C2 reject."""
    if src.is_complex != dst.is_complex:
        return None
    if src.bits == dst.bits:
        return shape
    if src.bits > dst.bits:
        return shape + (src.bits // dst.bits,) if src.bits % dst.bits == 0 else None
    ratio = dst.bits // src.bits
    if dst.bits % src.bits or not shape or shape[-1] != ratio:
        return None
    return shape[:-1]


@pytest.mark.parametrize("source", ARRAY_TYPES, ids=str)
def test_bitcast_every_pair_round_trips(source: ElementType) -> None:
    """Accepted pairs have the spec's shape and bitcasting back restores every bit."""
    for target in ARRAY_TYPES:
        base = (3,)
        if target.bits > source.bits and target.bits % source.bits == 0:
            base = (3, target.bits // source.bits)
        x = random_array(source, base, 5)
        want = _bitcast_shape(source, target, base)
        got = check_valid_or_rejected("bitcast_convert", [x], BitcastConvertAttrs(target))
        assert (got is None) == (want is None), (source, target)
        if got is None:
            continue
        assert got.dimensions == want
        _, out = run_op("bitcast_convert", [x], BitcastConvertAttrs(target))
        _, back = run_op("bitcast_convert", [out], BitcastConvertAttrs(source))
        if source.bits >= 8 and not source.is_pred:
            assert _bits(back) == _bits(x), (source, target)
        else:  # sub-byte values are stored one per byte: compare the values' bits
            assert np.array_equal(back.view(np.uint8) & ((1 << source.bits) - 1),
                                  x.view(np.uint8) & ((1 << source.bits) - 1))


@given(element_types, element_types, dims(), seeds)
def test_bitcast_shapes(src: ElementType, dst: ElementType, shape: tuple[int, ...],
                        seed: int) -> None:
    got = check_valid_or_rejected("bitcast_convert", [random_array(src, shape, seed)],
                                  BitcastConvertAttrs(dst))
    want = _bitcast_shape(src, dst, shape)
    assert (got is None) == (want is None)
    if got is not None:
        assert got.dimensions == want


# ---- reduce_precision -------------------------------------------------------------------------
@given(element_types, dims(), seeds, st.integers(-1, 12), st.integers(-1, 60))
def test_reduce_precision(et: ElementType, shape: tuple[int, ...], seed: int,
                          exponent_bits: int, mantissa_bits: int) -> None:
    x = random_array(et, shape, seed)
    attrs = ReducePrecisionAttrs(exponent_bits, mantissa_bits)
    got = check_valid_or_rejected("reduce_precision", [x], attrs)
    if et.is_float and exponent_bits >= 1 and mantissa_bits >= 0:
        assert got == Shape.array(et, shape)
    if not et.is_float:
        assert got is None


# ---- regressions: bugs these properties found (0-d operands, complex cbrt) -------------------
@pytest.mark.parametrize("et", [ElementType.C64, ElementType.C128], ids=str)
def test_regression_cbrt_complex(et: ElementType) -> None:
    run_op("cbrt", [random_array(et, (3,), 0)])


@pytest.mark.parametrize("name", ["logistic", "rsqrt", "round_nearest_afz"])
def test_regression_scalar_float_rows(name: str) -> None:
    run_op(name, [random_array(ElementType.F32, (), 0)])


@pytest.mark.parametrize("name", ["maximum", "minimum", "clamp"])
def test_regression_scalar_signed_zeros(name: str) -> None:
    zero, neg = np.asarray(np.float32(0.0)), np.asarray(np.float32(-0.0))
    _, out = run_op(name, [zero, neg] if name != "clamp" else [neg, zero, neg])
    # XLA: +0 beats -0 in max, -0 beats +0 in min; clamp(-0, +0, -0) = min(max(+0, -0), -0)
    assert out.shape == () and out == 0
    assert bool(np.signbit(out)) == (name != "maximum")


@pytest.mark.parametrize("target", [ElementType.PRED, ElementType.S32, ElementType.U8], ids=str)
def test_regression_convert_complex_scalar(target: ElementType) -> None:
    run_op("convert", [random_array(ElementType.C64, (), 0)], ConvertAttrs(target))
