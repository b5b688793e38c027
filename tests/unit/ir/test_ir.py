import numpy as np
import pytest

from xlapy.errors import XlapyError
from xlapy.ir import Computation, Instruction, Module, make_instruction
from xlapy.ops.core import ConstantAttrs, ParameterAttrs
from xlapy.types import ElementType, Literal, Shape

F32 = Shape.array(ElementType.F32, [2])


def _graph() -> tuple[Computation, Instruction, Instruction, Instruction]:
    c = Computation("g")
    p = c.add(Instruction("parameter", [], F32, ParameterAttrs(0, F32), name="x"))
    k = c.add(make_instruction("constant", [], ConstantAttrs(
        Literal.from_numpy(np.ones(2, np.float32)))))
    a = c.add(make_instruction("add", [p, k]))
    m = c.add(make_instruction("multiply", [a, a]))
    c.root = m
    return c, p, a, m


def test_users_are_maintained() -> None:
    c, p, a, m = _graph()
    assert p.users == [a]
    assert a.users == [m]  # listed once even though m uses a twice
    assert m.operands == [a, a]


def test_replace_all_uses_and_remove() -> None:
    c, p, a, m = _graph()
    s = c.add(make_instruction("subtract", [p, p]))
    a.replace_all_uses_with(s)
    assert m.operands == [s, s] and a.users == [] and m in s.users
    c.remove(a)
    assert a not in c.instructions and a not in p.users
    with pytest.raises(XlapyError, match="still has users"):
        c.remove(s)


def test_replacing_the_root_moves_the_root() -> None:
    c, p, a, m = _graph()
    n = c.add(make_instruction("add", [p, p]))
    c.replace_instruction(m, n)
    assert c.root is n and m not in c.instructions


def test_post_order_puts_operands_first() -> None:
    c, p, a, m = _graph()
    order = c.post_order()
    pos = {id(i): n for n, i in enumerate(order)}
    for instr in order:
        for o in instr.operands:
            assert pos[id(o)] < pos[id(instr)]
    assert order[-1] is m


def test_clone_is_deep_and_equivalent() -> None:
    c, p, a, m = _graph()
    d = c.clone("h")
    assert d.name == "h" and len(d.instructions) == len(c.instructions)
    assert not set(map(id, d.instructions)) & set(map(id, c.instructions))
    assert d.root is not None and d.root.opcode == "multiply"
    assert d.root.operands[0].operands[0] is d.parameters[0]


def test_unique_names() -> None:
    c, p, a, m = _graph()
    b = c.add(make_instruction("add", [p, p]))
    assert b.name != a.name and b.name.startswith("add")


def test_module_post_order_and_printer_is_stable() -> None:
    c, *_ = _graph()
    mod = Module("m", c)
    text = mod.to_text()
    assert text == mod.to_text() == mod.clone().to_text()
    assert text.splitlines()[0] == "HloModule m"
    assert "ROOT %multiply = f32[2] multiply(%add, %add)" in text
    assert "%x = f32[2] parameter(0)" in text


def test_operand_from_another_computation_is_rejected() -> None:
    c, p, *_ = _graph()
    d = Computation("other")
    with pytest.raises(XlapyError, match="another computation"):
        d.add(make_instruction("add", [p, p]))


def test_remove_unreachable_computations() -> None:
    c, *_ = _graph()
    mod = Module("m", c)
    mod.add_computation(Computation("dead"))
    assert mod.remove_unreachable()
    assert [x.name for x in mod.computations] == ["g"]
