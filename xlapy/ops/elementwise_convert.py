"""Conversions: convert, bitcast_convert, reduce_precision (spec §convert ...), exact to XLA CPU.

XLA CPU's convert saturates float -> integer (NaN -> 0), rounds to nearest even between
floats, takes the real part of complex -> real, and flushes f32/f64 denormals (DAZ/FTZ)
except on the bit-level f32 <-> bf16 paths.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from xlapy.ops.base import EvalContext, OpDef, Region, fail, register
from xlapy.ops.elementwise import (
    SATURATING,
    etype,
    flush,
    from_bits,
    to_bits,
    to_saturating,
    wrap_int,
)
from xlapy.types import ElementType, Shape

_F32, _F64, _BF16 = ElementType.F32, ElementType.F64, ElementType.BF16


@dataclass(frozen=True)
class ConvertAttrs:
    """`new_element_type`: the result's element type (the result type in StableHLO)."""

    new_element_type: ElementType


def _float_to_int(x: np.ndarray, t: ElementType) -> np.ndarray:
    """Truncate toward zero, saturate to t's range, NaN -> 0 (XLA CPU's fptosi semantics)."""
    lo, hi = (-(2 ** (t.bits - 1)), 2 ** (t.bits - 1) - 1) if t.is_signed else \
        (0, 2 ** t.bits - 1)
    if t.bits >= 8 and x.size and float(x.min()) > lo - 1.0 and float(x.max()) < hi + 1.0:
        return x.astype(t.dtype)  # all in range (no NaN): a plain truncating cast
    v = x.astype(np.float64)
    big = v >= float(hi) + 1.0 if t.bits < 64 else v >= float(2 ** (t.bits if t.is_unsigned
                                                                     else t.bits - 1))
    small = v <= float(lo)
    safe = np.where(np.isnan(v) | big | small, 0.0, np.trunc(v))
    if t.bits >= 8:
        out = safe.astype(t.dtype)
        out = np.where(big, np.array(hi).astype(t.dtype), out)
        return np.where(small, np.array(lo).astype(t.dtype), out).astype(t.dtype)
    i = np.where(big, hi, np.where(small, lo, safe.astype(np.int64)))
    return wrap_int(i, t)


def convert_array(x: np.ndarray, t: ElementType) -> np.ndarray:
    """`x` converted to element type `t` the way XLA's CPU backend converts."""
    s = etype(x)
    if s == t:
        return x.copy()
    if s.is_complex:
        if t.is_complex:
            return flush(flush(x).astype(t.dtype), inplace=True)
        if t == s.component_type:
            return x.real.copy()  # a plain extraction: no flush
        # Other targets (pred included) convert the real part as a real value.
        x, s = np.asarray(x.real, order="C"), s.component_type  # keeps 0-d arrays 0-d
    if t.is_pred:
        if s in (_F32, _F64):
            x = flush(x)  # bf16 -> pred tests the bits: bf16 denormals are true
        return np.asarray(x != 0)
    if s.is_pred:
        return np.asarray(x).astype(np.uint8).astype(t.dtype)
    if t.is_complex:
        return convert_array(x, t.component_type).astype(t.dtype)
    if s.is_integer:
        if t.is_integer:
            return wrap_int(x.astype(np.int64) if s.is_signed else x.astype(np.uint64)
                            .view(np.int64), t)
        # Integers convert to normal floats or zero: nothing to flush.
        wide = x if s.bits >= 8 else x.astype(np.int64 if s.is_signed else np.uint64)
        if t.bits <= 16 and t != ElementType.F16:
            # bf16/f8 go through f32, as XLA does; the double rounding is XLA's.
            return wide.astype(np.float32).astype(t.dtype)
        return wide.astype(t.dtype)
    # s is a real float.
    if s == _F32 and t == _BF16 or s == _BF16 and t == _F32:
        return x.astype(t.dtype)  # bit-level paths: no flush
    v = x.astype(np.float32) if s.bits < 32 else x
    if t.is_integer:
        return _float_to_int(v, t)  # denormals truncate to 0 with or without DAZ
    if t.is_float and t.bits < 16 or t == ElementType.F16:
        # f32 denormals round to signed zero in f16/f8 anyway: no flush needed.
        v = v.astype(np.float32) if s == _F64 else v
        return to_saturating(v, t) if t in SATURATING else v.astype(t.dtype)
    if s in (_F32, _F64, _BF16):
        v = flush(v, inplace=v is not x)
    if s == _F64 and t.bits < 32:
        v = flush(v.astype(np.float32), inplace=True)
    out = v.astype(t.dtype)
    # Only f64 -> f32 can make new denormals; widening keeps values normal.
    return flush(out, inplace=True) if s == _F64 and t == _F32 else out


@register
class Convert(OpDef):
    """stablehlo.convert: spec §convert; XLA ConvertElementType (HLO convert)."""

    name = "convert"
    arity = 1
    attrs = ConvertAttrs
    family = "elementwise"

    def infer(self, operands: Sequence[Shape], attrs: ConvertAttrs,
              regions: Sequence[Region]) -> Shape:
        (x,) = operands
        t = attrs.new_element_type
        if not x.is_array:
            fail("convert_c1", f"operand {x} is not a tensor")
        if not (isinstance(t, ElementType) and t.is_array):
            fail("convert_c1", f"new_element_type {t} is not an array element type")
        return Shape.array(t, x.dimensions)

    def evaluate(self, operands: Sequence[Any], attrs: ConvertAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        with np.errstate(all="ignore"):
            return convert_array(operands[0], attrs.new_element_type)


# ---- bitcast_convert ----------------------------------------------------------------------------
@dataclass(frozen=True)
class BitcastConvertAttrs:
    """`new_element_type`: the result's element type (the result type in StableHLO)."""

    new_element_type: ElementType


@register
class BitcastConvert(OpDef):
    """stablehlo.bitcast_convert: spec §bitcast_convert; XLA BitcastConvertType.

    A narrower result gains a minor dimension of size bits(E)/bits(E'); a wider result
    consumes one. Sub-elements are little-endian (element 0 holds the low bits). As the
    spec says, pred is 1 bit wide (`num_bits(i1)`) and complex types of different widths
    reinterpret each other's memory; XLA rejects both (it counts pred as 8 bits).
    """

    name = "bitcast_convert"
    hlo_name = "bitcast-convert"
    arity = 1
    attrs = BitcastConvertAttrs
    family = "elementwise"

    def infer(self, operands: Sequence[Shape], attrs: BitcastConvertAttrs,
              regions: Sequence[Region]) -> Shape:
        (x,) = operands
        t = attrs.new_element_type
        if not x.is_array:
            fail("bitcast_convert_c1", f"operand {x} is not a tensor")
        if not (isinstance(t, ElementType) and t.is_array):
            fail("bitcast_convert_c1", f"new_element_type {t} is not an array element type")
        s = x.element_type
        if s.is_complex != t.is_complex:
            fail("bitcast_convert_c2",
                 f"cannot bitcast between complex and non-complex types ({s} -> {t})")
        if t.bits == s.bits:
            return Shape.array(t, x.dimensions)
        if t.bits < s.bits:
            if s.bits % t.bits != 0:
                fail("bitcast_convert_c1", f"{s.bits} bits do not split into {t.bits}-bit elements")
            return Shape.array(t, (*x.dimensions, s.bits // t.bits))
        if t.bits % s.bits != 0:
            fail("bitcast_convert_c1", f"{s.bits}-bit elements do not combine into {t.bits} bits")
        if not (x.rank >= 1 and x.dimensions[-1] == t.bits // s.bits):
            fail("bitcast_convert_c1",
                 f"the operand's last dimension must be {t.bits // s.bits} to bitcast {s} to {t}")
        return Shape.array(t, x.dimensions[:-1])

    def evaluate(self, operands: Sequence[Any], attrs: BitcastConvertAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        (x,) = operands
        s, t = etype(x), attrs.new_element_type
        if s.is_complex:
            flat = np.ascontiguousarray(x).reshape(-1)
            return flat.view(t.dtype).reshape(result.dimensions).copy()
        u = to_bits(x, s)
        if t.bits < s.bits:
            k = s.bits // t.bits
            shifts = np.arange(k, dtype=np.uint64) * np.uint64(t.bits)
            u = u[..., None] >> shifts
        elif t.bits > s.bits:
            k = t.bits // s.bits
            shifts = np.arange(k, dtype=np.uint64) * np.uint64(s.bits)
            u = np.bitwise_or.reduce(u << shifts, axis=-1) if k > 1 else u[..., 0]
        return from_bits(np.asarray(u, np.uint64), t).reshape(result.dimensions)


# ---- reduce_precision ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ReducePrecisionAttrs:
    exponent_bits: int
    mantissa_bits: int


_IEEE = {ElementType.F16: (5, 10), _BF16: (8, 7), _F32: (8, 23), _F64: (11, 52)}


def reduce_precision_bits(x: np.ndarray, t: ElementType, exponent_bits: int,
                          mantissa_bits: int) -> np.ndarray:
    """XLA's bit-level ReducePrecision (round to nearest even, overflow to inf, underflow
    to signed zero, NaN kept) on an IEEE type `t`. With no mantissa bits a NaN becomes an
    infinity of its sign, as the spec's truncation gives (and its conformance test
    reduce_precision.mlir:10 checks); XLA CPU keeps the NaN there, and the spec wins."""
    src_e, src_m = _IEEE[t]
    n = t.bits
    u = to_bits(x, t)
    one = np.uint64(1)
    if mantissa_bits < src_m:
        shift = np.uint64(src_m - mantissa_bits)
        last = one << shift
        bias = (last >> one) - one
        rounding = ((u & last) >> shift) + bias
        u = (u + rounding) & ~(last - one)
    if exponent_bits < src_e:
        sign_mask = one << np.uint64(n - 1)
        exp_mask = np.uint64(((1 << src_e) - 1) << src_m)
        bias_src = (1 << (src_e - 1)) - 1
        bias_red = (1 << (exponent_bits - 1)) - 1
        max_e, min_e = bias_src + bias_red, bias_src - bias_red
        e = u & exp_mask
        over = e > np.uint64(max_e << src_m)
        under = e <= np.uint64(min_e << src_m)
        signed_zero = u & sign_mask
        u = np.where(over, signed_zero | exp_mask, np.where(under, signed_zero, u))
    out = from_bits(u, t)
    # NaN inputs stay NaN (rounding could otherwise carry them into infinity), unless the
    # reduced type has no mantissa to hold one.
    if mantissa_bits == 0:
        keep = np.copysign(np.asarray(np.inf, x.dtype), x)
    else:
        keep = x
    return np.where(np.isnan(x), keep, out).astype(t.dtype)


@register
class ReducePrecision(OpDef):
    """stablehlo.reduce_precision: spec §reduce_precision; XLA ReducePrecision."""

    name = "reduce_precision"
    hlo_name = "reduce-precision"
    arity = 1
    attrs = ReducePrecisionAttrs
    family = "elementwise"

    def infer(self, operands: Sequence[Shape], attrs: ReducePrecisionAttrs,
              regions: Sequence[Region]) -> Shape:
        (x,) = operands
        if not (x.is_array and x.element_type.is_float):
            fail("reduce_precision_c1", f"operand {x} is not a floating-point tensor")
        if not attrs.exponent_bits >= 1:
            fail("reduce_precision_c2", f"exponent_bits must be >= 1, got {attrs.exponent_bits}")
        if not attrs.mantissa_bits >= 0:
            fail("reduce_precision_c3", f"mantissa_bits must be >= 0, got {attrs.mantissa_bits}")
        return x

    def evaluate(self, operands: Sequence[Any], attrs: ReducePrecisionAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        (x,) = operands
        t = etype(x)
        if t in _IEEE:
            return reduce_precision_bits(x, t, attrs.exponent_bits, attrs.mantissa_bits)
        # Other floats (f8, f4): XLA upcasts them (to f16 when f16 holds every value
        # exactly, so that e.g. f8e5m2 denormals survive exponent_bits = 5), reduces
        # there and converts back.
        wide = _upcast_type(t)
        f = reduce_precision_bits(x.astype(wide.dtype), wide, attrs.exponent_bits,
                                  attrs.mantissa_bits)
        return f.astype(t.dtype)


def _upcast_type(t: ElementType) -> ElementType:
    """f16 if it represents every value of the small float type `t` exactly, else f32."""
    info = ml_dtypes.finfo(t.dtype)
    fits = float(info.max) <= 65504.0 and float(info.smallest_subnormal) >= 2.0 ** -24 \
        and info.nmant <= 10
    return ElementType.F16 if fits else _F32
