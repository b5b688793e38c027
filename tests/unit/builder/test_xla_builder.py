import numpy as np
import pytest

import xlapy
from xlapy.builder import XlaBuilder, XlaComputation, ops
from xlapy.errors import BuilderError
from xlapy.types import ElementType, Shape

F32, S32 = ElementType.F32, ElementType.S32


def test_build_uses_last_op_as_root_and_program_shape() -> None:
    b = XlaBuilder("f")
    x = ops.Parameter(b, 0, Shape.array(F32, [3]), "x")
    ops.Mul(x, x)
    comp = b.build()
    assert isinstance(comp, XlaComputation)
    ps = comp.program_shape()
    assert ps.parameters == (Shape.array(F32, [3]),) and ps.result == Shape.array(F32, [3])
    assert "multiply" in comp.as_hlo_text()


def test_explicit_root() -> None:
    b = XlaBuilder("f")
    x = ops.Parameter(b, 0, Shape.array(F32, [3]))
    y = ops.Add(x, x)
    ops.Mul(x, x)
    out = xlapy.Client().execute_and_transfer(b.build(y), [np.array([1, 2, 3], np.float32)])
    assert out.to_numpy().tolist() == [2, 4, 6]


def test_errors_are_deferred_to_build_and_name_the_first_op() -> None:
    b = XlaBuilder("f")
    x = ops.Parameter(b, 0, Shape.array(F32, [3]))
    y = ops.Parameter(b, 1, Shape.array(S32, [3]))
    bad = ops.Add(x, y)  # no exception yet
    ops.Mul(bad, x)  # depends on the failed op: no second error
    ops.Sub(x, ops.Parameter(b, 2, Shape.array(F32, [4])))
    with pytest.raises(BuilderError, match=r"^Add: add_c1: .*got f32\[3\], s32\[3\]"):
        b.build()


def test_die_immediately_on_error() -> None:
    b = XlaBuilder("f")
    b.set_die_immediately_on_error(True)
    x = ops.Parameter(b, 0, Shape.array(F32, [3]))
    with pytest.raises(BuilderError, match="Add"):
        ops.Add(x, ops.ConstantR1(b, [1, 2, 3]))


def test_operands_from_another_builder_are_rejected() -> None:
    a, b = XlaBuilder("a"), XlaBuilder("b")
    x = ops.Parameter(a, 0, Shape.scalar(F32))
    y = ops.Parameter(b, 0, Shape.scalar(F32))
    ops.Add(y, x)
    with pytest.raises(BuilderError, match="different builders"):
        b.build()


def test_parameter_numbers_must_be_dense_and_unique() -> None:
    b = XlaBuilder("f")
    ops.Parameter(b, 0, Shape.scalar(F32))
    ops.Parameter(b, 0, Shape.scalar(F32))
    with pytest.raises(BuilderError, match="parameter 0 already declared"):
        b.build()
    b = XlaBuilder("g")
    ops.Parameter(b, 1, Shape.scalar(F32))
    with pytest.raises(BuilderError, match=r"parameter numbers \[1\]"):
        b.build()


def test_empty_builder_and_double_build() -> None:
    with pytest.raises(BuilderError, match="no operations"):
        XlaBuilder("e").build()
    b = XlaBuilder("f")
    ops.ConstantR0(b, 1.0)
    b.build()
    with pytest.raises(BuilderError, match="already built"):
        b.build()


def test_constants_follow_seed_native_types() -> None:
    b = XlaBuilder("c")
    assert ops.ConstantR0(b, 1.5).shape() == Shape.scalar(F32)
    assert ops.ConstantR0(b, 3).shape() == Shape.scalar(S32)
    assert ops.ConstantR0(b, True).shape() == Shape.scalar(ElementType.PRED)
    assert ops.ConstantR0(b, np.float64(1)).shape() == Shape.scalar(ElementType.F64)
    assert ops.ConstantR1(b, 4, 2.0).shape() == Shape.array(F32, [4])
    assert ops.ConstantR1(b, [1, 2]).shape() == Shape.array(S32, [2])
    assert ops.ConstantR2(b, [[1.0, 2.0]]).shape() == Shape.array(F32, [1, 2])
    assert ops.Constant(b, np.zeros((2, 2), np.int8)).shape() == Shape.array(ElementType.S8, [2, 2])
    assert ops.Constant(b, [1, 2], ElementType.BF16).shape() == Shape.array(ElementType.BF16, [2])
    ops.ConstantR2(b, [1.0, 2.0])
    with pytest.raises(BuilderError, match="ConstantR2: expects a rank-2 value"):
        b.build()


def test_tuples() -> None:
    b = XlaBuilder("t")
    x = ops.Parameter(b, 0, Shape.array(F32, [2]))
    t = ops.Tuple(b, [x, ops.ConstantR0(b, 7)])
    ops.GetTupleElement(t, 1)
    assert xlapy.Client().execute_and_transfer(b.build(), [np.zeros(2, np.float32)]).to_py() == 7
    b = XlaBuilder("t")
    t = ops.Tuple(b, [ops.ConstantR0(b, 7)])
    ops.GetTupleElement(t, 3)
    with pytest.raises(BuilderError, match="get_tuple_element_c1"):
        b.build()


def test_called_computations_built_per_call_keep_their_own_bodies() -> None:
    """Regression: the builder keyed embedded computations by id() without keeping them
    alive, so a reducer built for one call and dropped could hand its id, and with it its
    body, to the next one (examples/demo.py's softmax divided by a max on Python 3.13)."""
    import gc
    import weakref

    import numpy as np

    def scalar(combine: str) -> XlaComputation:
        sb = XlaBuilder(combine)
        x = ops.Parameter(sb, 0, Shape.scalar(ElementType.F32))
        y = ops.Parameter(sb, 1, Shape.scalar(ElementType.F32))
        getattr(ops, combine)(x, y)
        return sb.build()

    b = XlaBuilder("two_reducers")
    x = ops.Parameter(b, 0, Shape.array(ElementType.F32, [3, 4]), "x")
    first = scalar("Max")
    alive = weakref.ref(first)
    mx = ops.Reduce(b, [x], [ops.ConstantR0(b, -np.inf)], first, [1])
    del first
    gc.collect()
    assert alive() is not None  # its id cannot be reused while the builder knows it
    sm = ops.Reduce(b, [x], [ops.ConstantR0(b, 0.0)], scalar("Add"), [1])
    ops.Tuple(b, [mx, sm])
    text = b.build().as_hlo_text()
    assert text.count("to_apply=Max") == 1 and text.count("to_apply=Add") == 1, text
