"""Builder ops: element-wise family (seed 000 element-wise sections, seed 001 binary ops)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xlapy.builder.broadcasting import binary
from xlapy.builder.xla_builder import XlaOp
from xlapy.ops.attrs import ComparisonDirection, ComparisonType
from xlapy.ops.elementwise import CompareAttrs

__all__ = [
    "Add", "Sub", "Mul", "And", "Or", "Xor", "Eq", "Ne", "Ge", "Gt", "Le", "Lt", "Compare",
    "Select",
]


def _binary(api_name: str, opcode: str) -> Callable[..., XlaOp]:
    def op(lhs: XlaOp, rhs: XlaOp, broadcast_dimensions: Sequence[int] = ()) -> XlaOp:
        return binary(api_name, opcode, lhs, rhs, broadcast_dimensions)

    op.__name__ = op.__qualname__ = api_name
    op.__doc__ = f"Element-wise `{opcode}` with seed 001 broadcasting."
    return op


Add = _binary("Add", "add")
Sub = _binary("Sub", "subtract")
Mul = _binary("Mul", "multiply")
And = _binary("And", "and")
Or = _binary("Or", "or")
Xor = _binary("Xor", "xor")


def Compare(lhs: XlaOp, rhs: XlaOp, broadcast_dimensions: Sequence[int] = (),
            direction: ComparisonDirection | str = ComparisonDirection.EQ,
            compare_type: ComparisonType | str | None = None) -> XlaOp:
    d = ComparisonDirection(direction) if isinstance(direction, str) else direction
    ct = ComparisonType(compare_type) if isinstance(compare_type, str) else compare_type
    return binary("Compare", "compare", lhs, rhs, broadcast_dimensions, CompareAttrs(d, ct))


def _compare(api_name: str, direction: ComparisonDirection) -> Callable[..., XlaOp]:
    def op(lhs: XlaOp, rhs: XlaOp, broadcast_dimensions: Sequence[int] = ()) -> XlaOp:
        return binary(api_name, "compare", lhs, rhs, broadcast_dimensions,
                      CompareAttrs(direction))

    op.__name__ = op.__qualname__ = api_name
    return op


Eq = _compare("Eq", ComparisonDirection.EQ)
Ne = _compare("Ne", ComparisonDirection.NE)
Ge = _compare("Ge", ComparisonDirection.GE)
Gt = _compare("Gt", ComparisonDirection.GT)
Le = _compare("Le", ComparisonDirection.LE)
Lt = _compare("Lt", ComparisonDirection.LT)


def Select(pred: XlaOp, on_true: XlaOp, on_false: XlaOp) -> XlaOp:
    return pred.builder.add_op("select", [pred, on_true, on_false], api_name="Select")
