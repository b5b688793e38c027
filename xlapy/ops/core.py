"""Ops every program has: parameter, constant, tuple, get_tuple_element."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xlapy.ops.base import VARIADIC, EvalContext, OpDef, Region, check, fail, register
from xlapy.types import Literal, Shape


@dataclass(frozen=True)
class ParameterAttrs:
    number: int
    shape: Shape


@dataclass(frozen=True)
class ConstantAttrs:
    """`literal` compares by identity of value bytes through Literal.__eq__."""

    literal: Literal

    def __hash__(self) -> int:
        lit = self.literal
        return hash((str(lit.shape), lit.to_numpy().tobytes() if lit.shape.is_array else 0))


@dataclass(frozen=True)
class GetTupleElementAttrs:
    index: int


@register
class Parameter(OpDef):
    """An entry or region argument (HLO `parameter`; StableHLO block arguments)."""

    name = "parameter"
    arity = 0
    attrs = ParameterAttrs
    family = "core"

    def infer(self, operands: Sequence[Shape], attrs: ParameterAttrs,
              regions: Sequence[Region]) -> Shape:
        check(attrs.number >= 0, "parameter_c1", f"parameter number {attrs.number} is negative")
        return attrs.shape

    def evaluate(self, operands: Sequence[Any], attrs: ParameterAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        raise AssertionError("parameters are bound by the interpreter, not evaluated")


@register
class Constant(OpDef):
    """stablehlo.constant: spec §constant; XLA ConstantLiteral/ConstantR0..."""

    name = "constant"
    arity = 0
    attrs = ConstantAttrs
    family = "core"

    def infer(self, operands: Sequence[Shape], attrs: ConstantAttrs,
              regions: Sequence[Region]) -> Shape:
        return attrs.literal.shape

    def evaluate(self, operands: Sequence[Any], attrs: ConstantAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        return attrs.literal.to_value()


@register
class Tuple(OpDef):
    """stablehlo.tuple: spec §tuple; XLA Tuple."""

    name = "tuple"
    arity = VARIADIC
    family = "core"

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        return Shape.tuple(operands)

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        return tuple(operands)


@register
class GetTupleElement(OpDef):
    """stablehlo.get_tuple_element: spec §get_tuple_element; XLA GetTupleElement."""

    name = "get_tuple_element"
    arity = 1
    attrs = GetTupleElementAttrs
    family = "core"

    def infer(self, operands: Sequence[Shape], attrs: GetTupleElementAttrs,
              regions: Sequence[Region]) -> Shape:
        (operand,) = operands
        if not operand.is_tuple:  # (`fail`, not `check`: a tuple of 120 printed per call)
            fail("get_tuple_element_c0", f"operand {operand} is not a tuple")
        n = len(operand.tuple_shapes)
        check(0 <= attrs.index < n, "get_tuple_element_c1",
              f"index {attrs.index} is out of range for a tuple of {n} elements")
        return operand.tuple_shapes[attrs.index]

    def evaluate(self, operands: Sequence[Any], attrs: GetTupleElementAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        return operands[0][attrs.index]
from xlapy.ops import copy as _copy_op  # noqa: E402,F401  (registers the HLO copy op)
