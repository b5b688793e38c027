
import pytest

from xlapy.errors import VerificationError
from xlapy.ir import Computation, Instruction, Module, make_instruction
from xlapy.ops.core import ParameterAttrs
from xlapy.types import ElementType, Shape
from xlapy.verify import verify_module

F32 = Shape.array(ElementType.F32, [2])


def _module() -> tuple[Module, Computation, Instruction, Instruction]:
    c = Computation("main")
    p = c.add(Instruction("parameter", [], F32, ParameterAttrs(0, F32)))
    a = c.add(make_instruction("add", [p, p]))
    c.root = a
    return Module("m", c), c, p, a


def test_valid_module_passes() -> None:
    verify_module(_module()[0])


def test_wrong_result_shape_is_caught() -> None:
    m, c, p, a = _module()
    a.shape = Shape.array(ElementType.F32, [3])
    msg = r"has shape f32\[3\] but its operands give f32\[2\]"
    with pytest.raises(VerificationError, match=msg):
        verify_module(m)


def test_shape_inference_failure_carries_the_label() -> None:
    m, c, p, a = _module()
    q = c.add(Instruction("parameter", [], Shape.array(ElementType.S32, [2]),
                          ParameterAttrs(1, Shape.array(ElementType.S32, [2]))))
    c.instructions.remove(q)
    c.instructions.insert(1, q)
    a.replace_operand(1, q)
    with pytest.raises(VerificationError, match="add_c1") as e:
        verify_module(m)
    assert e.value.constraint == "add_c1"


def test_use_before_definition() -> None:
    m, c, p, a = _module()
    c.instructions.reverse()
    with pytest.raises(VerificationError, match="before it is defined"):
        verify_module(m)


def test_missing_root_and_parameter_gaps() -> None:
    m, c, p, a = _module()
    c.root = None
    with pytest.raises(VerificationError, match="has no root"):
        verify_module(m)
    m, c, p, a = _module()
    p.attrs = ParameterAttrs(3, F32)
    with pytest.raises(VerificationError, match=r"parameter numbers \[3\]"):
        verify_module(m)

