"""Computation.post_order's fast path (`_in_order`, a list already in order) gives exactly
what the depth-first walk (`_walk`) gives, and the walk still runs when the list is not in
order (passes append new instructions after their users, then sort)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.ir import Computation, Instruction, make_instruction
from xlapy.ops.core import ConstantAttrs, ParameterAttrs
from xlapy.types import ElementType, Literal, Shape

F32 = Shape.array(ElementType.F32, [2])


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


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fast_path_matches_the_walk(data: st.DataObject) -> None:
    c = _random_graph(data)
    fast = c._in_order()
    assert fast is not None
    assert [id(i) for i in fast] == [id(i) for i in c._walk()]
    assert [id(i) for i in c.post_order()] == [id(i) for i in c._walk()]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_shuffled_lists_walk_and_match(data: st.DataObject) -> None:
    """Any list order: post_order is the walk's order (the fast path declines or agrees)."""
    c = _random_graph(data)
    c.instructions = data.draw(st.permutations(c.instructions))
    walked = [id(i) for i in c._walk()]
    assert [id(i) for i in c.post_order()] == walked
    fast = c._in_order()
    if fast is not None:
        assert [id(i) for i in fast] == walked
    pos = {iid: n for n, iid in enumerate(walked)}
    for instr in c.instructions:
        for o in instr.operands:
            assert pos[id(o)] < pos[id(instr)]


def test_an_operand_after_its_user_takes_the_walk() -> None:
    c = Computation("g")
    p = c.add(Instruction("parameter", [], F32, ParameterAttrs(0, F32), name="x"))
    a = c.add(make_instruction("negate", [p]))
    b = c.add(make_instruction("add", [a, a]))
    c.instructions = [p, b, a]  # as a pass leaves it before sort_instructions
    c.root = b
    assert c._in_order() is None
    assert c.post_order() == [p, a, b]


def test_a_parameter_listed_late_still_comes_first() -> None:
    c = Computation("g")
    k = c.add(make_instruction("constant", [], ConstantAttrs(
        Literal.from_numpy(np.ones(2, np.float32)))))
    p1 = c.add(Instruction("parameter", [], F32, ParameterAttrs(1, F32), name="y"))
    p0 = c.add(Instruction("parameter", [], F32, ParameterAttrs(0, F32), name="x"))
    s = c.add(make_instruction("add", [p0, k]))
    c.root = s
    assert c.post_order() == [p0, p1, k, s] == c._walk()
