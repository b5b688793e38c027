"""Element-wise ops with their own classes: compare (with TOTALORDER), select and clamp.

Split out of `elementwise` (the table rows and the compute/flush machinery live there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.attrs import ComparisonDirection, ComparisonType
from xlapy.ops.base import EvalContext, OpDef, Region, check, fail, register
from xlapy.ops.elementwise import (
    ANY,
    _complex_gt,
    etype,
    from_compute,
    max_flushed,
    min_flushed,
    to_bits,
    to_compute,
)
from xlapy.types import ElementType, Shape


# ---- compare ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class CompareAttrs:
    comparison_direction: ComparisonDirection
    compare_type: ComparisonType | None = None


_CMP = {
    ComparisonDirection.EQ: np.equal, ComparisonDirection.NE: np.not_equal,
    ComparisonDirection.GE: np.greater_equal, ComparisonDirection.GT: np.greater,
    ComparisonDirection.LE: np.less_equal, ComparisonDirection.LT: np.less,
}


def total_order_key(x: np.ndarray) -> np.ndarray:
    """Signed integers ordered as IEEE totalOrder orders the floats in `x` (-NaN < -inf < ...)."""
    t = etype(x)
    n = t.bits
    u = to_bits(x, t)
    sign = np.uint64(1 << (n - 1))
    neg = (u & sign) != 0
    # Sign-magnitude to a monotone signed key: negatives flip all magnitude bits.
    mag = (u & (sign - np.uint64(1))).astype(np.int64) if n < 64 else \
        (u & (sign - np.uint64(1))).view(np.int64)
    return np.where(neg, -mag - 1, mag)


@register
class Compare(OpDef):
    """stablehlo.compare: spec §compare; XLA Eq/Ne/Ge/Gt/Le/Lt and Compare."""

    name = "compare"
    arity = 2
    attrs = CompareAttrs
    family = "elementwise"

    def infer(self, operands: Sequence[Shape], attrs: CompareAttrs,
              regions: Sequence[Region]) -> Shape:
        lhs, rhs = operands
        check(lhs.is_array and rhs.is_array, "compare_c1", "operands must be tensors")
        check(lhs == rhs, "compare_c1", "operands must have the same shape and element type")
        et = lhs.element_type
        ct = attrs.compare_type
        if ct is not None:
            ok = {ComparisonType.FLOAT: et.is_float or et.is_complex,
                  ComparisonType.TOTALORDER: et.is_float or et.is_complex,
                  ComparisonType.SIGNED: et.is_signed or et.is_pred,
                  ComparisonType.UNSIGNED: et.is_unsigned or et.is_pred}[ct]
            if not ok:
                fail("compare_c3", f"compare_type {ct.value} does not fit element type {et}")
        if et.is_complex:
            if not (attrs.comparison_direction in (ComparisonDirection.EQ, ComparisonDirection.NE)
                    or ct is not None):
                fail("compare_c4",
                     f"comparison_direction {attrs.comparison_direction.value} needs a "
                     "compare_type for complex operands")
        return Shape.array(ElementType.PRED, lhs.dimensions)

    def evaluate(self, operands: Sequence[Any], attrs: CompareAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        lhs, rhs = operands
        fn = _CMP[attrs.comparison_direction]
        et = etype(lhs)
        if attrs.compare_type is ComparisonType.TOTALORDER and et.is_float:
            return fn(total_order_key(lhs), total_order_key(rhs))
        lhs, rhs = to_compute(lhs, et), to_compute(rhs, et)
        if et.is_complex and attrs.comparison_direction not in (ComparisonDirection.EQ,
                                                                ComparisonDirection.NE):
            # Lexicographic (real, imag), as XLA orders complex values.
            lt = (lhs.real < rhs.real) | ((lhs.real == rhs.real) & (lhs.imag < rhs.imag))
            gt = _complex_gt(lhs, rhs)
            return {ComparisonDirection.LT: lt, ComparisonDirection.LE: ~gt,
                    ComparisonDirection.GT: gt, ComparisonDirection.GE: ~lt}[
                        attrs.comparison_direction]
        with np.errstate(all="ignore"):
            return fn(lhs, rhs)


# ---- select and clamp -------------------------------------------------------------------------
@register
class Select(OpDef):
    """stablehlo.select: spec §select; XLA Select (pred may be a scalar)."""

    name = "select"
    arity = 3
    family = "elementwise"

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        pred, on_true, on_false = operands
        if not (pred.is_array and pred.element_type is ElementType.PRED):
            fail("select_c1", f"pred must be a tensor of i1, got {pred}")
        check(pred.rank == 0 or (on_true.is_array and pred.dimensions == on_true.dimensions),
              "select_c1", "pred must be a scalar or have the shape of on_true")
        check(on_true == on_false, "select_c2", "on_true and on_false must have the same type")
        return on_true

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        pred, on_true, on_false = operands
        if isinstance(on_true, tuple):
            return on_true if bool(pred) else on_false
        return np.where(pred, on_true, on_false).astype(on_true.dtype, copy=False)


@register
class Clamp(OpDef):
    """stablehlo.clamp: spec §clamp; XLA Clamp(min, operand, max) = min(max(x, lo), hi)."""

    name = "clamp"
    arity = 3
    family = "elementwise"

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        lo, x, hi = operands
        for s in operands:
            if not s.is_array:
                fail("clamp_c1", f"operand {s} is not a tensor")
        check(lo.rank == 0 or lo.dimensions == x.dimensions, "clamp_c1",
              "min must be a scalar or have the shape of operand")
        check(hi.rank == 0 or hi.dimensions == x.dimensions, "clamp_c2",
              "max must be a scalar or have the shape of operand")
        check(lo.element_type == x.element_type == hi.element_type, "clamp_c3",
              "min, operand and max must have the same element type")
        if x.element_type not in ANY:
            fail("clamp_c3", f"element type {x.element_type} is not numeric")
        return Shape.array(x.element_type, x.dimensions)

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        lo, x, hi = operands
        t = etype(x)
        with np.errstate(all="ignore"):
            # Flushed once here; min/max of flushed values need no further flush.
            lo_c, x_c, hi_c = (to_compute(v, t) for v in (lo, x, hi))
            out = min_flushed(max_flushed(x_c, lo_c), hi_c)
            return from_compute(out, t, ftz=False)
