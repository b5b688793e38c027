"""The verifier checks that every operand lists its user: searched in a short users list,
through a set built once for a long one (a value with many users stays linear)."""

from __future__ import annotations

import pytest

from xlapy.errors import VerificationError
from xlapy.ir import Computation, Instruction, Module, make_instruction
from xlapy.ops.core import ParameterAttrs
from xlapy.types import ElementType, Shape
from xlapy.verify import verify_module

F32 = Shape.array(ElementType.F32, [2])


def _module(users: int) -> tuple[Module, Instruction, list[Instruction]]:
    c = Computation("main")
    p = c.add(Instruction("parameter", [], F32, ParameterAttrs(0, F32), name="x"))
    negs = [c.add(make_instruction("negate", [p])) for _ in range(users)]
    c.root = c.add(make_instruction("tuple", negs))
    m = Module("m")
    m.add_computation(c)
    m.entry = c
    return m, p, negs


@pytest.mark.parametrize("users", [1, 3, 16, 17, 200])
def test_every_user_listed_passes(users: int) -> None:
    m, _, _ = _module(users)
    verify_module(m)


@pytest.mark.parametrize("users", [1, 3, 16, 17, 200])
def test_a_missing_user_is_caught(users: int) -> None:
    m, p, negs = _module(users)
    p.users.remove(negs[-1])
    with pytest.raises(VerificationError, match="does not list its user"):
        verify_module(m)
