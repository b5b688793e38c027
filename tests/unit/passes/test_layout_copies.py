"""Layout assignment inserts `copy` where layouts conflict; the copy op itself."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.errors import ShapeInferenceError
from xlapy.interpreter import Interpreter
from xlapy.ir import Module
from xlapy.passes.hlo_builder import HloBuilder
from xlapy.passes.layout_assignment import LayoutAssignment
from xlapy.passes.pass_base import run_passes
from xlapy.types import Layout, Shape
from xlapy.verify import verify_module

COL = Layout.column_major(2)
ROW = Layout.row_major(2)


def _param(g: HloBuilder, text: str, layout: Layout | None) -> object:
    p = g.param(text)
    if layout is not None:
        p.shape = p.shape.with_layout(layout)
        p.attrs = type(p.attrs)(p.attrs.number, p.shape)
    return p


def _copies(m: Module) -> list[object]:
    return [i for i in m.entry.instructions if i.opcode == "copy"]


def _args(m: Module) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(tuple(p.shape.dimensions)).astype(np.float32)
            for p in m.entry.parameters]


def test_copy_op_is_identity_and_keeps_shape() -> None:
    g = HloBuilder()
    x = g.param("f32[2,3]")
    m = g.build(g.copy(x))
    verify_module(m)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = Interpreter().run_module(m, [a])
    np.testing.assert_array_equal(out, a)
    assert m.entry.root.shape == x.shape


def test_copy_op_rejects_token() -> None:
    g = HloBuilder()
    t = g.after_all()
    with pytest.raises(ShapeInferenceError, match="copy_c1"):
        g.copy(t)


def test_column_major_dot_operand_gets_a_copy() -> None:
    g = HloBuilder()
    a = _param(g, "f32[3,4]", COL)
    b = _param(g, "f32[4,5]", None)
    m = g.build(g.dot_general(a, b, lhs_contracting_dimensions=(1,),
                              rhs_contracting_dimensions=(0,)))
    args = _args(m)
    before = Interpreter().run_module(m, args)
    assert run_passes(m, [LayoutAssignment()])
    (c,) = _copies(m)
    assert c.operands[0] is a and c.shape.layout == ROW and m.entry.root.operands[0] is c
    assert m.meta["layout_copies"] == [f"{a.name} -> {m.entry.root.name}"]
    np.testing.assert_array_equal(Interpreter().run_module(m, args), before)
    # idempotent: the second run finds no conflict
    run_passes(m, [LayoutAssignment()])
    assert len(_copies(m)) == 1 and m.meta["layout_copies"] == []


def test_requested_dot_result_layout_is_produced_by_a_copy() -> None:
    g = HloBuilder()
    a = _param(g, "f32[3,4]", None)
    b = _param(g, "f32[4,5]", None)
    d = g.dot_general(a, b, lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,))
    d.shape = d.shape.with_layout(COL)
    m = g.build(d)
    args = _args(m)
    before = Interpreter().run_module(m, args)
    run_passes(m, [LayoutAssignment()])
    root = m.entry.root
    assert root.opcode == "copy" and root.shape.layout == COL
    assert root.operands[0].opcode == "dot_general" and root.operands[0].shape.layout == ROW
    np.testing.assert_array_equal(Interpreter().run_module(m, args), before)


def test_elementwise_operands_match_the_result_layout() -> None:
    g = HloBuilder()
    a = _param(g, "f32[3,4]", COL)
    b = _param(g, "f32[3,4]", None)
    m = g.build(g.add(a, b))
    args = _args(m)
    before = Interpreter().run_module(m, args)
    run_passes(m, [LayoutAssignment()])
    (c,) = _copies(m)
    assert c.operands[0] is a and c.shape.layout == m.entry.root.shape.layout == ROW
    np.testing.assert_array_equal(Interpreter().run_module(m, args), before)


def test_no_copies_when_layouts_agree() -> None:
    g = HloBuilder()
    a = _param(g, "f32[3,4]", None)
    b = _param(g, "f32[4,4]", ROW)
    d = g.dot_general(a, b, lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,))
    m = g.build(g.add(d, a))
    run_passes(m, [LayoutAssignment()])
    assert _copies(m) == [] and m.meta["layout_copies"] == []
    assert all(i.shape.layout is not None for i in m.entry.instructions
               if isinstance(i.shape, Shape) and i.shape.is_array)
