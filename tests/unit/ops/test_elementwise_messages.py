"""Element-wise shape rules build their messages only when they fail (they run twice per op
per compile); the messages and labels are the ones `check` gave."""

from __future__ import annotations

import pytest

from xlapy.errors import ShapeInferenceError
from xlapy.ops.base import infer_shape
from xlapy.types import ElementType, Shape

F32 = Shape.array(ElementType.F32, [2, 3])


def test_ok_result() -> None:
    assert infer_shape("add", [F32, F32]) == F32
    assert infer_shape("is_finite", [F32]) == Shape.array(ElementType.PRED, [2, 3])


@pytest.mark.parametrize(("op", "operands", "label", "message"), [
    ("add", [F32, Shape.array(ElementType.S32, [2, 3])], "add_c1",
     "operands must have the same shape and element type; got f32[2,3], s32[2,3]"),
    ("add", [F32, Shape.array(ElementType.F32, [3, 2])], "add_c1",
     "operands must have the same shape and element type; got f32[2,3], f32[3,2]"),
    ("multiply", [F32, Shape.token()], "multiply_c1",
     "operand 1 is token[], not a tensor; got f32[2,3], token[]"),
    ("and", [F32, F32], "and_c1",
     "operand 0 has element type f32; expected boolean or integer; got f32[2,3], f32[2,3]"),
    ("exponential", [Shape.array(ElementType.S32, [4])], "exponential_c1",
     "operand 0 has element type s32; expected floating-point or complex; got s32[4]"),
])
def test_failures_keep_label_and_message(op: str, operands: list[Shape], label: str,
                                         message: str) -> None:
    with pytest.raises(ShapeInferenceError) as e:
        infer_shape(op, operands)
    assert e.value.label == label
    assert str(e.value) == f"{label}: {message}"
