"""Builder control-flow ops: the op each spelling builds, shapes, and reported errors."""

from __future__ import annotations

import pytest

from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation
from xlapy.errors import BuilderError
from xlapy.types import ElementType, Shape

S32 = Shape.scalar(ElementType.S32)
F32 = Shape.scalar(ElementType.F32)
PRED = Shape.scalar(ElementType.PRED)
V = Shape.array(ElementType.F32, (3,))


def comp(name: str, params: list[Shape], body) -> XlaComputation:
    b = XlaBuilder(name)
    return b.build(body(b, *[b.parameter(i, s) for i, s in enumerate(params)]))


def identity(shape: Shape) -> XlaComputation:
    return comp("id", [shape], lambda b, x: x)


def test_while_shape_and_error() -> None:
    b = XlaBuilder("w")
    cond = comp("c", [V], lambda b, x: ops.ConstantR0(b, False))
    w = ops.While(cond, identity(V), b.parameter(0, V))
    assert w.shape() == V and w.instr.opcode == "while"
    b2 = XlaBuilder("w2")
    ops.While(cond, identity(F32), b2.parameter(0, V))
    with pytest.raises(BuilderError, match="While: while_c2"):
        b2.build()


def test_conditional_spellings() -> None:
    b = XlaBuilder("c")
    x = b.parameter(0, V)
    r = ops.Conditional(b.parameter(1, PRED), x, identity(V), x, identity(V))
    assert r.instr.opcode == "if" and r.shape() == V
    r = ops.Conditional(b.parameter(2, S32), [identity(V)] * 3, [x] * 3)
    assert r.instr.opcode == "case" and len(r.instr.called) == 3


def test_conditional_errors() -> None:
    b = XlaBuilder("c")
    x = b.parameter(0, V)
    ops.Conditional(b.parameter(1, S32), [identity(V)] * 2, [x])
    with pytest.raises(BuilderError, match="Conditional: 2 branch computations but 1"):
        b.build()
    b = XlaBuilder("c")
    x = b.parameter(0, V)
    ops.Conditional(b.parameter(1, PRED), [identity(V)] * 3, [x] * 3)
    with pytest.raises(BuilderError, match="exactly 2 branches"):
        b.build()
    b = XlaBuilder("c")
    ops.Conditional(b.parameter(0, F32), [identity(V)], [b.parameter(1, V)])
    with pytest.raises(BuilderError, match="Conditional: case_c0"):
        b.build()
    with pytest.raises(TypeError, match="Conditional takes"):
        ops.Conditional(b.parameter(2, PRED), 1)


def test_call_and_map() -> None:
    b = XlaBuilder("cm")
    x = b.parameter(0, V)
    add = comp("add", [F32, F32], lambda b, p, q: ops.Add(p, q))
    assert ops.Map(b, [x, x], add, [0]).shape() == V
    assert ops.Call(b, identity(V), [x]).shape() == V
    b.build()
    b = XlaBuilder("cm")
    ops.Map(b, [b.parameter(0, V)], identity(F32), [0], static_operands=[b.parameter(1, F32)])
    with pytest.raises(BuilderError, match="Map: static_operands"):
        b.build()
    b = XlaBuilder("cm")
    ops.Call(b, identity(V), [b.parameter(0, F32)])
    with pytest.raises(BuilderError, match="Call: call_c1"):
        b.build()


def test_optimization_barrier_and_composite() -> None:
    b = XlaBuilder("ob")
    t = ops.Tuple(b, [b.parameter(0, V), b.parameter(1, S32)])
    assert ops.OptimizationBarrier(t).shape() == t.shape()
    c = ops.Composite(b, [b.parameter(2, V)], "ns.op", identity(V), {"b": 2, "a": 1})
    assert c.instr.attrs.composite_attributes == (("a", 1), ("b", 2))
    assert c.instr.attrs.decomposition == "id"
