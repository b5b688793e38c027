"""CSE keys an instruction by its shape itself (a plain array shape) instead of its printed
form; layouts still keep two otherwise equal instructions apart, as the printed form did."""

from __future__ import annotations

from xlapy.passes.cse import CommonSubexpressionElimination, _shape_key, cse_key
from xlapy.passes.dce import DeadCodeElimination
from xlapy.passes.hlo_builder import HloBuilder
from xlapy.passes.pass_base import run_passes
from xlapy.types import ElementType, Shape


def test_equal_arrays_merge() -> None:
    g = HloBuilder()
    x = g.param("f32[4,2]")
    a, b = g.negate(x), g.negate(x)
    m = g.build(g.tuple(a, b))
    assert run_passes(m, [CommonSubexpressionElimination(), DeadCodeElimination()])
    root = m.entry.root
    assert root.operands[0] is root.operands[1]


def test_layouts_keep_instructions_apart() -> None:
    g = HloBuilder()
    x = g.param("f32[4,2]")
    a, b = g.negate(x), g.negate(x)
    b.shape = b.shape.with_layout((0, 1))
    assert cse_key(a) != cse_key(b)
    m = g.build(g.tuple(a, b))
    run_passes(m, [CommonSubexpressionElimination()], verify=False)
    root = m.entry.root
    assert root.operands[0] is not root.operands[1]


def test_shape_keys() -> None:
    s = Shape.array(ElementType.F32, [4, 2])
    assert _shape_key(s) is s
    assert _shape_key(s.with_layout((1, 0))) == "f32[4,2]{1,0}"
    t = Shape.tuple([s, s.with_layout((0, 1))])
    assert _shape_key(t) == "(f32[4,2], f32[4,2]{0,1})"
    assert _shape_key(t) != _shape_key(Shape.tuple([s, s]))
