"""Builder ops: element-wise family (seed 000 element-wise sections, seed 001 binary ops).

Binary ops take seed 001's `broadcast_dimensions` (see `broadcasting.py`); unary ops and
conversions go straight to `add_op`, whose shape inference reports bad operands.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlapy.builder.broadcasting import binary
from xlapy.builder.xla_builder import XlaOp, as_element_type
from xlapy.errors import XlapyError
from xlapy.ops.attrs import ComparisonDirection, ComparisonType
from xlapy.ops.elementwise import CompareAttrs
from xlapy.ops.elementwise_convert import BitcastConvertAttrs, ConvertAttrs, ReducePrecisionAttrs
from xlapy.types import Literal, Shape

__all__ = [
    "Add", "Sub", "Mul", "Div", "Rem", "Max", "Min", "Pow", "Atan2", "Complex", "And", "Or",
    "Xor", "Not", "ShiftLeft", "ShiftRightArithmetic", "ShiftRightLogical",
    "Eq", "Ne", "Ge", "Gt", "Le", "Lt", "EqTotalOrder", "NeTotalOrder", "GeTotalOrder",
    "GtTotalOrder", "LeTotalOrder", "LtTotalOrder", "Compare",
    "Abs", "Ceil", "Floor", "Exp", "Expm1", "Log", "Log1p", "Logistic", "Neg", "Sign", "Sqrt",
    "Rsqrt", "Cbrt", "Tanh", "Tan", "Sin", "Cos", "Erf", "Real", "Imag", "Conj", "IsFinite",
    "PopulationCount", "Clz", "RoundNearestAfz", "RoundNearestEven", "Round",
    "ConvertElementType", "BitcastConvertType", "ReducePrecision", "Select", "Clamp",
    "SquareF32", "ReciprocalF32", "SqrtF32", "LogicalNot", "LogicalAnd", "LogicalOr",
]


# ---- binary ------------------------------------------------------------------------------------
def _binary(api_name: str, opcode: str) -> Callable[..., XlaOp]:
    def op(lhs: XlaOp, rhs: XlaOp, broadcast_dimensions: Sequence[int] = ()) -> XlaOp:
        return binary(api_name, opcode, lhs, rhs, broadcast_dimensions)

    op.__name__ = op.__qualname__ = api_name
    op.__doc__ = f"Element-wise `{opcode}` with seed 001 broadcasting."
    return op


Add = _binary("Add", "add")
Sub = _binary("Sub", "subtract")
Mul = _binary("Mul", "multiply")
Div = _binary("Div", "divide")
Rem = _binary("Rem", "remainder")
Max = _binary("Max", "maximum")
Min = _binary("Min", "minimum")
Pow = _binary("Pow", "power")
Atan2 = _binary("Atan2", "atan2")
Complex = _binary("Complex", "complex")
And = _binary("And", "and")
Or = _binary("Or", "or")
Xor = _binary("Xor", "xor")
ShiftLeft = _binary("ShiftLeft", "shift_left")
ShiftRightArithmetic = _binary("ShiftRightArithmetic", "shift_right_arithmetic")
ShiftRightLogical = _binary("ShiftRightLogical", "shift_right_logical")
LogicalAnd = _binary("LogicalAnd", "and")
LogicalOr = _binary("LogicalOr", "or")


# ---- compare -------------------------------------------------------------------------------------
def Compare(lhs: XlaOp, rhs: XlaOp, broadcast_dimensions: Sequence[int] = (),
            direction: ComparisonDirection | str = ComparisonDirection.EQ,
            compare_type: ComparisonType | str | None = None) -> XlaOp:
    """Compare in `direction` (EQ..LT) with an optional `compare_type` (FLOAT, TOTALORDER...)."""
    try:
        d = ComparisonDirection(direction) if isinstance(direction, str) else direction
        ct = ComparisonType(compare_type) if isinstance(compare_type, str) else compare_type
    except ValueError as e:
        return lhs.builder.report_error("Compare", str(e))
    return binary("Compare", "compare", lhs, rhs, broadcast_dimensions, CompareAttrs(d, ct))


def _compare(api_name: str, direction: ComparisonDirection,
             total_order: bool = False) -> Callable[..., XlaOp]:
    def op(lhs: XlaOp, rhs: XlaOp, broadcast_dimensions: Sequence[int] = ()) -> XlaOp:
        ct = None
        if total_order:
            if lhs.ok and not (lhs.shape().is_array and lhs.shape().element_type.is_float):
                return lhs.builder.report_error(
                    api_name, f"total-order comparison needs floating-point operands, got "
                    f"{lhs.shape()}")
            ct = ComparisonType.TOTALORDER
        return binary(api_name, "compare", lhs, rhs, broadcast_dimensions,
                      CompareAttrs(direction, ct))

    op.__name__ = op.__qualname__ = api_name
    op.__doc__ = f"Element-wise comparison {direction.value}" + \
        (" under IEEE totalOrder." if total_order else ".")
    return op


_D = ComparisonDirection
Eq, Ne, Ge = _compare("Eq", _D.EQ), _compare("Ne", _D.NE), _compare("Ge", _D.GE)
Gt, Le, Lt = _compare("Gt", _D.GT), _compare("Le", _D.LE), _compare("Lt", _D.LT)
EqTotalOrder = _compare("EqTotalOrder", _D.EQ, True)
NeTotalOrder = _compare("NeTotalOrder", _D.NE, True)
GeTotalOrder = _compare("GeTotalOrder", _D.GE, True)
GtTotalOrder = _compare("GtTotalOrder", _D.GT, True)
LeTotalOrder = _compare("LeTotalOrder", _D.LE, True)
LtTotalOrder = _compare("LtTotalOrder", _D.LT, True)


# ---- unary ---------------------------------------------------------------------------------------
def _unary(api_name: str, opcode: str) -> Callable[[XlaOp], XlaOp]:
    def op(operand: XlaOp) -> XlaOp:
        return operand.builder.add_op(opcode, [operand], api_name=api_name)

    op.__name__ = op.__qualname__ = api_name
    op.__doc__ = f"Element-wise `{opcode}`."
    return op


Abs = _unary("Abs", "abs")
Ceil = _unary("Ceil", "ceil")
Floor = _unary("Floor", "floor")
Exp = _unary("Exp", "exponential")
Expm1 = _unary("Expm1", "exponential_minus_one")
Log = _unary("Log", "log")
Log1p = _unary("Log1p", "log_plus_one")
Logistic = _unary("Logistic", "logistic")
Neg = _unary("Neg", "negate")
Sign = _unary("Sign", "sign")
Sqrt = _unary("Sqrt", "sqrt")
Rsqrt = _unary("Rsqrt", "rsqrt")
Cbrt = _unary("Cbrt", "cbrt")
Tanh = _unary("Tanh", "tanh")
Tan = _unary("Tan", "tan")
Sin = _unary("Sin", "sine")
Cos = _unary("Cos", "cosine")
Erf = _unary("Erf", "erf")
Real = _unary("Real", "real")
Imag = _unary("Imag", "imag")
IsFinite = _unary("IsFinite", "is_finite")
PopulationCount = _unary("PopulationCount", "popcnt")
Clz = _unary("Clz", "count_leading_zeros")
RoundNearestAfz = _unary("RoundNearestAfz", "round_nearest_afz")
Round = _unary("Round", "round_nearest_afz")
RoundNearestEven = _unary("RoundNearestEven", "round_nearest_even")
Not = _unary("Not", "not")
LogicalNot = _unary("LogicalNot", "not")


def Conj(operand: XlaOp) -> XlaOp:
    """Complex conjugate: Complex(Real(x), Neg(Imag(x))) as XLA's builder expands it;
    the identity on real operands."""
    if not operand.ok:
        return operand
    s = operand.shape()
    if not (s.is_array and s.element_type.is_complex):
        return operand
    b = operand.builder
    re = b.add_op("real", [operand], api_name="Conj")
    im = b.add_op("negate", [b.add_op("imag", [operand], api_name="Conj")], api_name="Conj")
    return b.add_op("complex", [re, im], api_name="Conj")


# ---- conversions ---------------------------------------------------------------------------
def _type_arg(operand: XlaOp, api_name: str, new_element_type: Any) -> Any:
    try:
        return as_element_type(new_element_type)
    except XlapyError as e:
        operand.builder.report_error(api_name, str(e))
        return None


def ConvertElementType(operand: XlaOp, new_element_type: Any) -> XlaOp:
    """Convert each element to `new_element_type` (C++-style conversion, XLA CPU rules)."""
    t = _type_arg(operand, "ConvertElementType", new_element_type)
    if t is None:
        return XlaOp(operand.builder, None)
    return operand.builder.add_op("convert", [operand], ConvertAttrs(t),
                                  api_name="ConvertElementType")


def BitcastConvertType(operand: XlaOp, new_element_type: Any) -> XlaOp:
    """Reinterpret the bits as `new_element_type` (gains/loses a minor dim across widths)."""
    t = _type_arg(operand, "BitcastConvertType", new_element_type)
    if t is None:
        return XlaOp(operand.builder, None)
    return operand.builder.add_op("bitcast_convert", [operand], BitcastConvertAttrs(t),
                                  api_name="BitcastConvertType")


def ReducePrecision(operand: XlaOp, exponent_bits: int, mantissa_bits: int) -> XlaOp:
    """Round to a float format with the given exponent/mantissa widths (jax argument order)."""
    return operand.builder.add_op(
        "reduce_precision", [operand],
        ReducePrecisionAttrs(int(exponent_bits), int(mantissa_bits)),
        api_name="ReducePrecision")


# ---- select and clamp --------------------------------------------------------------------------
def Select(pred: XlaOp, on_true: XlaOp, on_false: XlaOp) -> XlaOp:
    return pred.builder.add_op("select", [pred, on_true, on_false], api_name="Select")


def Clamp(min: XlaOp, operand: XlaOp, max: XlaOp) -> XlaOp:  # noqa: A002
    """Clamp(min, operand, max); min and max may be scalars."""
    return operand.builder.add_op("clamp", [min, operand, max], api_name="Clamp")


# ---- seed 001 conveniences ---------------------------------------------------------------------
def _f32_const(operand: XlaOp, value: float) -> XlaOp:
    b = operand.builder
    s: Shape = operand.shape()
    lit = Literal.from_numpy(np.asarray(value, s.element_type.dtype))
    return b.constant(lit, api_name="ConstantR0")


def SquareF32(operand: XlaOp) -> XlaOp:
    """operand ** 2 (seed 001: Pow with an implicit 2.0 exponent)."""
    if not operand.ok:
        return operand
    return Pow(operand, _f32_const(operand, 2.0))


def ReciprocalF32(operand: XlaOp) -> XlaOp:
    """operand ** -1 (seed 001: Pow with an implicit -1.0 exponent)."""
    if not operand.ok:
        return operand
    return Pow(operand, _f32_const(operand, -1.0))


def SqrtF32(operand: XlaOp) -> XlaOp:
    """operand ** 0.5 (seed 001: Pow with an implicit 0.5 exponent)."""
    if not operand.ok:
        return operand
    return Pow(operand, _f32_const(operand, 0.5))
