from typing import Any

import numpy as np
import pytest

from xlapy.errors import InterpreterError
from xlapy.interpreter import Interpreter, check_value
from xlapy.ir import Computation, Instruction, Module, make_instruction
from xlapy.ops.base import OPS, OpDef, add_op
from xlapy.ops.core import ParameterAttrs
from xlapy.types import ElementType, Shape
from xlapy.types.literal import TOKEN_VALUE

F32 = Shape.array(ElementType.F32, [2])


def test_check_value_normalizes_scalars_and_rejects_mismatches() -> None:
    out = check_value(np.float32(1), Shape.scalar(ElementType.F32), "x")
    assert isinstance(out, np.ndarray) and out.shape == ()
    with pytest.raises(InterpreterError, match=r"x: expected f32\[2\], got float32\[3\]"):
        check_value(np.zeros(3, np.float32), F32, "x")
    with pytest.raises(InterpreterError, match="expected a tuple"):
        check_value(np.zeros(2, np.float32), Shape.tuple([F32]), "x")
    with pytest.raises(InterpreterError, match="expected a token"):
        check_value(np.zeros(2, np.float32), Shape.token(), "x")
    assert check_value(TOKEN_VALUE, Shape.token(), "x") is TOKEN_VALUE
    # a safe cast of a user argument is accepted; an unsafe one is not
    assert check_value(np.zeros(2, np.float16), F32, "x").dtype == np.float32
    with pytest.raises(InterpreterError):
        check_value(np.zeros(2, np.complex64), F32, "x")


class _WrongDtype(OpDef):
    """A deliberately broken op: evaluate returns f64 where f32 was inferred."""

    name = "test.wrong_dtype"
    arity = 1

    def infer(self, operands: Any, attrs: Any, regions: Any) -> Shape:
        return operands[0]

    def evaluate(self, operands: Any, attrs: Any, result: Shape, ctx: Any) -> Any:
        return operands[0].astype(np.float64)


def test_a_wrong_evaluate_fails_loudly_naming_the_instruction() -> None:
    if "test.wrong_dtype" not in OPS:
        add_op(_WrongDtype())
    c = Computation("main")
    p = c.add(Instruction("parameter", [], F32, ParameterAttrs(0, F32)))
    c.root = c.add(make_instruction("test.wrong_dtype", [p]))
    with pytest.raises(InterpreterError, match=r"internal error: test.wrong_dtype %test.wrong"):
        Interpreter().run_module(Module("m", c), [np.zeros(2, np.float32)])


def test_unknown_op_and_argument_count() -> None:
    c = Computation("main")
    p = c.add(Instruction("parameter", [], F32, ParameterAttrs(0, F32)))
    c.root = c.add(Instruction("no_such_op", [p], F32))
    with pytest.raises(InterpreterError, match="unknown op 'no_such_op'"):
        Interpreter().run(c, [np.zeros(2, np.float32)])
    with pytest.raises(InterpreterError, match="takes 1 argument"):
        Interpreter().run(c, [])


def test_values_live_until_their_last_use() -> None:
    # p is used first and last, a twice by one op: freeing must not drop either early
    c = Computation("main")
    p = c.add(Instruction("parameter", [], F32, ParameterAttrs(0, F32)))
    a = c.add(make_instruction("add", [p, p]))
    b = c.add(make_instruction("multiply", [a, a]))
    c.root = c.add(make_instruction("subtract", [b, p]))
    out = Interpreter().run(c, [np.array([1, 2], np.float32)])
    assert out.tolist() == [3, 14]
