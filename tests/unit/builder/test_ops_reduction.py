"""Builder spellings of the reduction family: argument forms, padding helpers, error reports."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.builder import XlaBuilder, XlaComputation, ops
from xlapy.errors import BuilderError
from xlapy.types import ElementType, Shape, from_dtype

F32, S32 = ElementType.F32, ElementType.S32
CLIENT = xlapy.Client()


def _add(et: ElementType = F32) -> XlaComputation:
    b = XlaBuilder("add")
    ops.Add(b.parameter(0, Shape.scalar(et)), b.parameter(1, Shape.scalar(et)))
    return b.build()


def _run(b: XlaBuilder, *args: np.ndarray) -> Any:
    return CLIENT.execute_and_transfer(b.build(), list(args)).to_value()


def _param(b: XlaBuilder, i: int, a: np.ndarray) -> Any:
    return ops.Parameter(b, i, Shape.array(from_dtype(a.dtype), a.shape))


def test_reduce_xla_client_and_seed_forms_agree() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    b1 = XlaBuilder("xla_client")
    ops.Reduce(b1, [_param(b1, 0, x)], [ops.ConstantR0(b1, 0.0)], _add(), [0])
    b2 = XlaBuilder("seed")
    p = _param(b2, 0, x)
    ops.Reduce(p, ops.ConstantR0(b2, 0.0), _add(), [0])
    np.testing.assert_array_equal(_run(b1, x), [3, 5, 7])
    np.testing.assert_array_equal(_run(b2, x), [3, 5, 7])


def test_reduce_all() -> None:
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    b = XlaBuilder("all")
    op = ops.ReduceAll(_param(b, 0, x), ops.ConstantR0(b, 0), _add(S32))
    assert op.shape() == Shape.scalar(S32)
    assert int(_run(b, x)) == int(x.sum())


def test_reduce_error_is_reported_at_build() -> None:
    b = XlaBuilder("bad")
    p = ops.Parameter(b, 0, Shape.array(F32, [2, 3]))
    op = ops.Reduce(b, [p], [ops.ConstantR0(b, 0.0)], _add(), [2])
    assert not op.ok
    with pytest.raises(BuilderError, match="Reduce: reduce_c4"):
        b.build()


def test_reduce_bad_dimensions_argument_is_reported() -> None:
    b = XlaBuilder("bad")
    p = ops.Parameter(b, 0, Shape.array(F32, [2]))
    ops.Reduce(b, [p], [ops.ConstantR0(b, 0.0)], _add(), ["x"])
    with pytest.raises(BuilderError, match="Reduce: dimensions_to_reduce"):
        b.build()


@pytest.mark.parametrize("size,window,stride,want", [
    (5, 3, 1, (1, 1)), (5, 3, 2, (1, 1)), (4, 2, 2, (0, 0)), (4, 3, 2, (0, 1)), (1, 4, 1, (1, 2)),
])
def test_make_padding_same(size: int, window: int, stride: int, want: tuple[int, int]) -> None:
    assert ops.MakePadding([size], [window], [stride], ops.Padding.SAME) == [want]
    assert ops.MakePadding([size], [window], [stride], "valid") == [(0, 0)]


def test_reduce_window_same_keeps_shape_and_matches_seed_example() -> None:
    # Seed 000: min over windows of 3, stride 2: VALID -> [100, 1], SAME -> [1000, 10, 1].
    x = np.array([10000, 1000, 100, 10, 1], np.float32)
    big = np.float32(np.finfo(np.float32).max)
    min_comp = XlaBuilder("min")
    min_comp.add_op("minimum", [min_comp.parameter(0, Shape.scalar(F32)),
                                min_comp.parameter(1, Shape.scalar(F32))])
    comp = min_comp.build()
    for padding, want in [(ops.Padding.VALID, [100, 1]), (ops.Padding.SAME, [1000, 10, 1])]:
        b = XlaBuilder("rw")
        ops.ReduceWindow(_param(b, 0, x), ops.ConstantR0(b, big), comp, [3], [2], padding)
        np.testing.assert_array_equal(_run(b, x), np.array(want, np.float32))


def test_reduce_window_variadic_builder_returns_tuple() -> None:
    b = XlaBuilder("pair")
    p = [b.parameter(i, Shape.scalar(t)) for i, t in enumerate([F32, S32, F32, S32])]
    ops.Tuple(b, [ops.Add(p[0], p[2]), ops.Add(p[1], p[3])])
    comp = b.build()
    x, y = np.ones((4,), np.float32), np.arange(4, dtype=np.int32)
    bb = XlaBuilder("rw")
    op = ops.ReduceWindowWithGeneralPadding(
        [_param(bb, 0, x), _param(bb, 1, y)], [ops.ConstantR0(bb, 0.0), ops.ConstantR0(bb, 0)],
        comp, [2], [2], None, None, [(0, 0)])
    assert op.shape() == Shape.tuple([Shape.array(F32, [2]), Shape.array(S32, [2])])
    out = _run(bb, x, y)
    np.testing.assert_array_equal(out[0], [2, 2])
    np.testing.assert_array_equal(out[1], [1, 5])


def test_select_and_scatter_same_padding() -> None:
    ge = XlaBuilder("ge")
    ops.Ge(ge.parameter(0, Shape.scalar(F32)), ge.parameter(1, Shape.scalar(F32)))
    select = ge.build()
    x = np.array([[1, 9, 2], [3, 4, 8]], np.float32)
    src = np.array([[10, 20]], np.float32)
    b = XlaBuilder("sas")
    # SAME over a (2, 2) window with stride 2 pads one column on the right.
    ops.SelectAndScatter(_param(b, 0, x), select, [2, 2], [2, 2], ops.Padding.SAME,
                         _param(b, 1, src), ops.ConstantR0(b, 0.0), _add())
    np.testing.assert_array_equal(_run(b, x, src), [[0, 10, 0], [0, 0, 20]])


def test_select_and_scatter_rejects_wrong_source_shape() -> None:
    ge = XlaBuilder("ge")
    ops.Ge(ge.parameter(0, Shape.scalar(F32)), ge.parameter(1, Shape.scalar(F32)))
    b = XlaBuilder("sas")
    p = ops.Parameter(b, 0, Shape.array(F32, [4]))
    s = ops.Parameter(b, 1, Shape.array(F32, [3]))
    ops.SelectAndScatterWithGeneralPadding(p, ge.build(), [2], [2], [(0, 0)], s,
                                           ops.ConstantR0(b, 0.0), _add())
    with pytest.raises(BuilderError, match="select_and_scatter_c3"):
        b.build()


def test_sort_default_comparator_and_forms() -> None:
    x = np.array([[3, 1, 2], [0, 5, -1]], np.int32)
    y = np.array([[30, 10, 20], [0, 50, -10]], np.int32)
    b = XlaBuilder("sort")
    op = ops.Sort(b, [_param(b, 0, x), _param(b, 1, y)])
    assert op.shape().is_tuple
    out = _run(b, x, y)
    np.testing.assert_array_equal(out[0], np.sort(x, 1))
    np.testing.assert_array_equal(out[1], np.sort(y, 1))
    b2 = XlaBuilder("sort_dim0")
    ops.Sort(b2, _param(b2, 0, x), dimension=0)
    np.testing.assert_array_equal(_run(b2, x), np.sort(x, 0))
    b3 = XlaBuilder("sort_no_builder")
    ops.Sort([_param(b3, 0, x)], None, 0, True)
    np.testing.assert_array_equal(_run(b3, x), np.sort(x, 0))


def test_sort_bad_dimension_is_reported() -> None:
    b = XlaBuilder("sort")
    ops.Sort(b, [ops.Parameter(b, 0, Shape.array(F32, [3]))], dimension=1)
    with pytest.raises(BuilderError, match="Sort: sort_c4"):
        b.build()


def test_batch_norm_builders_shapes() -> None:
    b = XlaBuilder("bn")
    x = ops.Parameter(b, 0, Shape.array(F32, [2, 3]))
    v = ops.Parameter(b, 1, Shape.array(F32, [3]))
    t = ops.BatchNormTraining(x, v, v, 1e-3, 1)
    assert t.shape() == Shape.tuple([Shape.array(F32, [2, 3]), Shape.array(F32, [3]),
                                     Shape.array(F32, [3])])
    assert ops.BatchNormInference(x, v, v, v, v, 1e-3, 1).shape() == Shape.array(F32, [2, 3])
    g = ops.BatchNormGrad(x, v, v, v, x, 1e-3, 1)
    assert ops.GetTupleElement(g, 2).shape() == Shape.array(F32, [3])
    ops.BatchNormTraining(x, v, v, 1e-3, 0)
    with pytest.raises(BuilderError, match="BatchNormTraining: batch_norm_training_c3"):
        b.build()
