"""Element-wise ops as table rows: `unary(...)`, `binary(...)`, plus compare, select, clamp.

Each row names the op, the element types it accepts and its numpy evaluation. Evaluation of
bf16/f16/f8 computes in f32 and rounds once, as XLA's CPU backend does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.attrs import ComparisonDirection, ComparisonType
from xlapy.ops.base import EvalContext, OpDef, Region, add_op, check, register
from xlapy.types import ElementType, Shape

# ---- type classes ---------------------------------------------------------------------------
BOOL = frozenset({ElementType.PRED})
SINT = frozenset(t for t in ElementType if t.is_signed)
UINT = frozenset(t for t in ElementType if t.is_unsigned)
INT = SINT | UINT
FLOAT = frozenset(t for t in ElementType if t.is_float)
COMPLEX = frozenset(t for t in ElementType if t.is_complex)
NUMERIC = INT | FLOAT | COMPLEX
ANY = BOOL | NUMERIC

_TYPE_CLASS_NAMES = {BOOL: "boolean", INT: "integer", FLOAT: "floating-point",
                     COMPLEX: "complex"}


def _describe(types: frozenset[ElementType]) -> str:
    parts = [n for cls, n in _TYPE_CLASS_NAMES.items() if cls <= types]
    return " or ".join(parts) if parts else ", ".join(sorted(t.value for t in types))


def compute_dtype(t: ElementType) -> np.dtype:
    """The dtype arithmetic runs in: f32 for sub-32-bit floats, the type itself otherwise."""
    if t.is_float and t.bits < 32:
        return np.dtype(np.float32)
    return t.dtype


def to_compute(x: np.ndarray, t: ElementType) -> np.ndarray:
    dt = compute_dtype(t)
    return x if x.dtype == dt else x.astype(dt)


def from_compute(x: Any, t: ElementType) -> np.ndarray:
    return np.asarray(x).astype(t.dtype, copy=False)


# ---- unary and binary table rows -------------------------------------------------------------
class ElementwiseOp(OpDef):
    """An element-wise op given by a table row."""

    family = "elementwise"

    def __init__(self, name: str, arity: int, types: frozenset[ElementType],
                 fn: Callable[..., Any], result_type: Callable[[ElementType], ElementType] | None,
                 raw: bool, hlo_name: str | None) -> None:
        self.name = name  # type: ignore[misc]
        self.arity = arity  # type: ignore[misc]
        self.types = types
        self.fn = fn
        self.result_type = result_type
        self.raw = raw
        self.hlo_name = hlo_name  # type: ignore[misc]

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        first = operands[0]
        for i, s in enumerate(operands):
            check(s.is_array, f"{self.name}_c1", f"operand {i} is {s}, not a tensor")
            check(s.element_type in self.types, f"{self.name}_c1",
                  f"operand {i} has element type {s.element_type}; expected "
                  f"{_describe(self.types)}")
            check(s == first.with_element_type(s.element_type) and
                  s.element_type == first.element_type, f"{self.name}_c1",
                  "operands must have the same shape and element type")
        et = self.result_type(first.element_type) if self.result_type else first.element_type
        return Shape.array(et, first.dimensions)

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        t = _etype(operands[0])
        if self.raw:
            out = self.fn(*operands)
        else:
            with np.errstate(all="ignore"):
                out = self.fn(*(to_compute(x, t) for x in operands))
        return from_compute(out, result.element_type)


_DTYPE_TO_ET = {t.dtype: t for t in ElementType if t.is_array}


def _etype(x: np.ndarray) -> ElementType:
    return _DTYPE_TO_ET[x.dtype]


def unary(name: str, types: frozenset[ElementType], fn: Callable[..., Any], *,
          result_type: Callable[[ElementType], ElementType] | None = None, raw: bool = False,
          hlo_name: str | None = None) -> OpDef:
    """Table row for a unary op; `raw` evaluates on the storage dtype instead of f32 compute."""
    return add_op(ElementwiseOp(name, 1, types, fn, result_type, raw, hlo_name))


def binary(name: str, types: frozenset[ElementType], fn: Callable[..., Any], *,
           result_type: Callable[[ElementType], ElementType] | None = None, raw: bool = False,
           hlo_name: str | None = None) -> OpDef:
    return add_op(ElementwiseOp(name, 2, types, fn, result_type, raw, hlo_name))


# ---- rows -------------------------------------------------------------------------------------
binary("add", ANY, lambda a, b: (a | b) if a.dtype == np.bool_ else a + b)
binary("subtract", NUMERIC, np.subtract)
binary("multiply", ANY, lambda a, b: (a & b) if a.dtype == np.bool_ else a * b)
binary("and", BOOL | INT, np.bitwise_and, raw=True)
binary("or", BOOL | INT, np.bitwise_or, raw=True)
binary("xor", BOOL | INT, np.bitwise_xor, raw=True)


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
    it = np.dtype(f"int{x.dtype.itemsize * 8}")
    i = x.view(it)
    return np.where(i < 0, i ^ np.iinfo(it).max, i)


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
            check(ok, "compare_c3", f"compare_type {ct.value} does not fit element type {et}")
        if et.is_complex:
            check(attrs.comparison_direction in (ComparisonDirection.EQ, ComparisonDirection.NE)
                  or ct is not None, "compare_c4",
                  f"comparison_direction {attrs.comparison_direction.value} needs a "
                  "compare_type for complex operands")
        return Shape.array(ElementType.PRED, lhs.dimensions)

    def evaluate(self, operands: Sequence[Any], attrs: CompareAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        lhs, rhs = operands
        fn = _CMP[attrs.comparison_direction]
        et = _etype(lhs)
        if attrs.compare_type is ComparisonType.TOTALORDER and et.is_float:
            return fn(total_order_key(lhs), total_order_key(rhs))
        if et.is_complex and attrs.comparison_direction not in (ComparisonDirection.EQ,
                                                                ComparisonDirection.NE):
            # Lexicographic (real, imag), as XLA orders complex values.
            lt = (lhs.real < rhs.real) | ((lhs.real == rhs.real) & (lhs.imag < rhs.imag))
            eq = lhs == rhs
            return {ComparisonDirection.LT: lt, ComparisonDirection.LE: lt | eq,
                    ComparisonDirection.GT: ~(lt | eq), ComparisonDirection.GE: ~lt}[
                        attrs.comparison_direction]
        with np.errstate(all="ignore"):
            return fn(to_compute(lhs, et), to_compute(rhs, et))


# ---- select -----------------------------------------------------------------------------------
@register
class Select(OpDef):
    """stablehlo.select: spec §select; XLA Select (pred may be a scalar)."""

    name = "select"
    arity = 3
    family = "elementwise"

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        pred, on_true, on_false = operands
        check(pred.is_array and pred.element_type is ElementType.PRED, "select_c0",
              f"pred must be a tensor of i1, got {pred}")
        check(pred.rank == 0 or pred.dimensions == on_true.dimensions, "select_c1",
              "pred must be a scalar or have the shape of on_true")
        check(on_true == on_false, "select_c2", "on_true and on_false must have the same type")
        return on_true

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        pred, on_true, on_false = operands
        if isinstance(on_true, tuple):
            return on_true if bool(pred) else on_false
        return np.where(pred, on_true, on_false)
