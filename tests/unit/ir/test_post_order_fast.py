"""Computation.post_order places an instruction whose operands are all placed as it comes
and walks depth-first only from the others: the order must be exactly the plain depth-first
walk's (from each parameter, then each instruction in list order), in order or not (passes
append new instructions after their users, then sort)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.ir import Computation, Instruction, make_instruction
from xlapy.ops.core import ConstantAttrs, ParameterAttrs
from xlapy.types import ElementType, Literal, Shape

F32 = Shape.array(ElementType.F32, [2])


def _reference(comp: Computation) -> list[Instruction]:
    """The walk post_order was before (a stack of (node, next operand) from every node)."""
    seen: set[int] = set()
    order: list[Instruction] = []

    def visit(start: Instruction) -> None:
        stack: list[tuple[Instruction, int]] = [(start, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0 and id(node) in seen:
                continue
            if i < len(node.operands):
                stack.append((node, i + 1))
                child = node.operands[i]
                if id(child) not in seen:
                    stack.append((child, 0))
            elif id(node) not in seen:
                seen.add(id(node))
                order.append(node)

    for p in comp.parameters:
        visit(p)
    for instr in comp.instructions:
        visit(instr)
    return order


def _random_graph(data: st.DataObject) -> Computation:
    """Parameters (added in a shuffled order), constants and adds over earlier values."""
    c = Computation("g")
    n_params = data.draw(st.integers(0, 3))
    for number in data.draw(st.permutations(range(n_params))):
        c.add(Instruction("parameter", [], F32, ParameterAttrs(number, F32), name=f"p{number}"))
    values = list(c.instructions)
    for _ in range(data.draw(st.integers(1, 12))):
        if len(values) < 1 or data.draw(st.booleans()):
            v = c.add(make_instruction("constant", [], ConstantAttrs(
                Literal.from_numpy(np.ones(2, np.float32)))))
        else:
            a = data.draw(st.sampled_from(values))
            b = data.draw(st.sampled_from(values))
            v = c.add(make_instruction("add", [a, b]))
        values.append(v)
    c.root = values[-1]
    return c


def _ids(instrs: list[Instruction]) -> list[int]:
    return [id(i) for i in instrs]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_lists_in_order(data: st.DataObject) -> None:
    c = _random_graph(data)
    assert _ids(c.post_order()) == _ids(_reference(c))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_shuffled_lists(data: st.DataObject) -> None:
    c = _random_graph(data)
    c.instructions = data.draw(st.permutations(c.instructions))
    order = c.post_order()
    assert _ids(order) == _ids(_reference(c))
    pos = {id(i): n for n, i in enumerate(order)}
    for instr in c.instructions:
        for o in instr.operands:
            assert pos[id(o)] < pos[id(instr)]


def test_an_operand_after_its_user() -> None:
    c = Computation("g")
    p = c.add(Instruction("parameter", [], F32, ParameterAttrs(0, F32), name="x"))
    a = c.add(make_instruction("negate", [p]))
    b = c.add(make_instruction("add", [a, a]))
    c.instructions = [p, b, a]  # as a pass leaves it before sort_instructions
    c.root = b
    assert c.post_order() == [p, a, b]


def test_a_parameter_listed_late_still_comes_first() -> None:
    c = Computation("g")
    k = c.add(make_instruction("constant", [], ConstantAttrs(
        Literal.from_numpy(np.ones(2, np.float32)))))
    p1 = c.add(Instruction("parameter", [], F32, ParameterAttrs(1, F32), name="y"))
    p0 = c.add(Instruction("parameter", [], F32, ParameterAttrs(0, F32), name="x"))
    s = c.add(make_instruction("add", [p0, k]))
    c.root = s
    assert c.post_order() == [p0, p1, k, s] == _reference(c)


def test_an_operand_outside_the_list_is_walked_in() -> None:
    """An operand missing from the list (a pass mid-rewrite) is placed, as the walk did."""
    c = Computation("g")
    p = c.add(Instruction("parameter", [], F32, ParameterAttrs(0, F32), name="x"))
    a = c.add(make_instruction("negate", [p]))
    b = c.add(make_instruction("add", [a, p]))
    c.instructions = [p, b]
    c.root = b
    assert c.post_order() == [p, a, b] == _reference(c)
