"""Shape inference (every constraint label) and spec examples for the reduction family."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.builder import XlaBuilder, XlaComputation, ops
from xlapy.errors import ShapeInferenceError
from xlapy.ops.attrs import ComparisonDirection
from xlapy.ops.base import infer_shape
from xlapy.ops.elementwise import CompareAttrs
from xlapy.ops.reduction import ReduceAttrs
from xlapy.ops.reduction_batch_norm import BatchNormAttrs
from xlapy.ops.reduction_region import is_elementwise_region
from xlapy.ops.reduction_sort import SortAttrs
from xlapy.ops.reduction_window import ReduceWindowAttrs, SelectAndScatterAttrs, num_windows
from xlapy.ops.shape import BroadcastInDimAttrs
from xlapy.types import ElementType, Shape

F32, S32, PRED = ElementType.F32, ElementType.S32, ElementType.PRED


def arr(et: ElementType, *dims: int) -> Shape:
    return Shape.array(et, dims)


@dataclass
class FakeRegion:
    """What shape inference sees of a region: parameter shapes and a result shape."""

    params: Sequence[Shape]
    result: Shape
    name: str = "region"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def parameter_shapes(self) -> list[Shape]:
        return list(self.params)

    @property
    def result_shape(self) -> Shape:
        return self.result


def binary_region(et: ElementType, out: ElementType | None = None) -> FakeRegion:
    return FakeRegion([arr(et), arr(et)], arr(out or et))


# ---- reduce ------------------------------------------------------------------------------------
def test_reduce_infers_single_and_variadic() -> None:
    s = infer_shape("reduce", [arr(F32, 2, 3, 4), arr(F32)], ReduceAttrs((0, 2)),
                    [binary_region(F32)])
    assert s == arr(F32, 3)
    region = FakeRegion([arr(F32), arr(S32), arr(F32), arr(S32)],
                        Shape.tuple([arr(F32), arr(S32)]))
    s = infer_shape("reduce", [arr(F32, 2, 3), arr(S32, 2, 3), arr(F32), arr(S32)],
                    ReduceAttrs((1,)), [region])
    assert s == Shape.tuple([arr(F32, 2), arr(S32, 2)])


@pytest.mark.parametrize("operands,dims,region,label", [
    ([arr(F32, 2)], (0,), binary_region(F32), "reduce_c3"),
    ([arr(F32, 2), arr(F32, 3), arr(F32), arr(F32)], (0,),
     FakeRegion([arr(F32)] * 4, Shape.tuple([arr(F32)] * 2)), "reduce_c1"),
    ([arr(F32, 2), arr(S32)], (0,), binary_region(F32), "reduce_c2"),
    ([arr(F32, 2), arr(F32, 1)], (0,), binary_region(F32), "reduce_c2"),
    ([arr(F32, 2), arr(F32)], (1,), binary_region(F32), "reduce_c4"),
    ([arr(F32, 2, 2), arr(F32)], (0, 0), binary_region(F32), "reduce_c5"),
    ([arr(F32, 2), arr(F32)], (0,), binary_region(S32), "reduce_c6"),
    ([arr(F32, 2), arr(F32)], (0,), FakeRegion([arr(F32)], arr(F32)), "reduce_c6"),
    ([arr(F32, 2), arr(F32)], (0,), FakeRegion([arr(F32, 1)] * 2, arr(F32)), "reduce_c6"),
])
def test_reduce_constraints(operands: list[Shape], dims: tuple[int, ...], region: FakeRegion,
                            label: str) -> None:
    with pytest.raises(ShapeInferenceError, match=label):
        infer_shape("reduce", operands, ReduceAttrs(dims), [region])


# ---- reduce_window -------------------------------------------------------------------------------
def test_reduce_window_infers_spec_example_shape() -> None:
    attrs = ReduceWindowAttrs((2, 1), (4, 1), (2, 1), (3, 1), ((2, 1), (0, 0)))
    s = infer_shape("reduce_window", [arr(S32, 3, 2), arr(S32)], attrs, [binary_region(S32)])
    assert s == arr(S32, 2, 2)
    assert num_windows(0, 1, 1, 1, 1, 0, 0) == 0
    assert num_windows(5, 3, 2, 1, 1, 0, 0) == 2


@pytest.mark.parametrize("operands,attrs,label", [
    ([arr(F32, 4)], ReduceWindowAttrs((2,)), "reduce_window_c1"),
    ([arr(F32, 4), arr(F32, 5), arr(F32), arr(F32)], ReduceWindowAttrs((2,)),
     "reduce_window_c2"),
    ([arr(F32, 4), arr(S32)], ReduceWindowAttrs((2,)), "reduce_window_c3"),
    ([arr(F32, 4), arr(F32)], ReduceWindowAttrs((2, 2)), "reduce_window_c4"),
    ([arr(F32, 4), arr(F32)], ReduceWindowAttrs((0,)), "reduce_window_c5"),
    ([arr(F32, 4), arr(F32)], ReduceWindowAttrs((2,), (1, 1)), "reduce_window_c6"),
    ([arr(F32, 4), arr(F32)], ReduceWindowAttrs((2,), (0,)), "reduce_window_c7"),
    ([arr(F32, 4), arr(F32)], ReduceWindowAttrs((2,), None, ()), "reduce_window_c8"),
    ([arr(F32, 4), arr(F32)], ReduceWindowAttrs((2,), None, (0,)), "reduce_window_c9"),
    ([arr(F32, 4), arr(F32)], ReduceWindowAttrs((2,), None, None, (1, 1)),
     "reduce_window_c10"),
    ([arr(F32, 4), arr(F32)], ReduceWindowAttrs((2,), None, None, (-1,)),
     "reduce_window_c11"),
    ([arr(F32, 4), arr(F32)], ReduceWindowAttrs((2,), padding=((0, 0), (0, 0))),
     "reduce_window_c12"),
])
def test_reduce_window_constraints(operands: list[Shape], attrs: ReduceWindowAttrs,
                                   label: str) -> None:
    n = len(operands) // 2 or 1
    region = FakeRegion([arr(F32)] * (2 * n),
                        arr(F32) if n == 1 else Shape.tuple([arr(F32)] * n))
    with pytest.raises(ShapeInferenceError, match=label):
        infer_shape("reduce_window", operands, attrs, [region])


def test_reduce_window_body_constraint() -> None:
    with pytest.raises(ShapeInferenceError, match="reduce_window_c13"):
        infer_shape("reduce_window", [arr(F32, 4), arr(F32)], ReduceWindowAttrs((2,)),
                    [binary_region(F32, PRED)])


# ---- select_and_scatter --------------------------------------------------------------------------
def _sas(operand: Shape, source: Shape, init: Shape, attrs: SelectAndScatterAttrs,
         select: FakeRegion | None = None, scatter: FakeRegion | None = None) -> Shape:
    et = operand.element_type
    return infer_shape("select_and_scatter", [operand, source, init], attrs,
                       [select or binary_region(et, PRED), scatter or binary_region(et)])


def test_select_and_scatter_infers_operand_shape() -> None:
    attrs = SelectAndScatterAttrs((3, 1), (2, 1), ((0, 1), (0, 0)))
    assert _sas(arr(S32, 4, 2), arr(S32, 2, 2), arr(S32), attrs) == arr(S32, 4, 2)


@pytest.mark.parametrize("args,label", [
    ((arr(S32, 4, 2), arr(S32, 2, 2), arr(S32), SelectAndScatterAttrs((3,))),
     "select_and_scatter_c1"),
    ((arr(S32, 4), arr(F32, 2), arr(S32), SelectAndScatterAttrs((3,), (1,))),
     "select_and_scatter_c2"),
    ((arr(S32, 4), arr(S32, 3), arr(S32), SelectAndScatterAttrs((3,), (1,))),
     "select_and_scatter_c3"),
    ((arr(S32, 4), arr(S32, 2), arr(F32), SelectAndScatterAttrs((3,), (1,))),
     "select_and_scatter_c4"),
    ((arr(S32, 4), arr(S32, 2), arr(S32), SelectAndScatterAttrs((0,), (1,))),
     "select_and_scatter_c6"),
    ((arr(S32, 4), arr(S32, 2), arr(S32), SelectAndScatterAttrs((3,), (1, 1))),
     "select_and_scatter_c7"),
    ((arr(S32, 4), arr(S32, 2), arr(S32), SelectAndScatterAttrs((3,), (0,))),
     "select_and_scatter_c8"),
    ((arr(S32, 4), arr(S32, 2), arr(S32), SelectAndScatterAttrs((3,), (1,), ((0, 0),) * 2)),
     "select_and_scatter_c9"),
])
def test_select_and_scatter_constraints(args: tuple[Any, ...], label: str) -> None:
    with pytest.raises(ShapeInferenceError, match=label):
        _sas(*args)


def test_select_and_scatter_region_constraints() -> None:
    attrs = SelectAndScatterAttrs((3,), (1,))
    with pytest.raises(ShapeInferenceError, match="select_and_scatter_c10"):
        _sas(arr(S32, 4), arr(S32, 2), arr(S32), attrs, select=binary_region(S32))
    with pytest.raises(ShapeInferenceError, match="select_and_scatter_c11"):
        _sas(arr(S32, 4), arr(S32, 2), arr(S32), attrs, scatter=binary_region(S32, PRED))


# ---- sort ----------------------------------------------------------------------------------------
def test_sort_infers_bare_and_tuple() -> None:
    comp = FakeRegion([arr(F32)] * 2, arr(PRED))
    assert infer_shape("sort", [arr(F32, 3)], SortAttrs(0), [comp]) == arr(F32, 3)
    comp2 = FakeRegion([arr(F32), arr(F32), arr(S32), arr(S32)], arr(PRED))
    assert infer_shape("sort", [arr(F32, 3, 2), arr(S32, 3, 2)], SortAttrs(-2), [comp2]) == \
        Shape.tuple([arr(F32, 3, 2), arr(S32, 3, 2)])


@pytest.mark.parametrize("operands,attrs,region,label", [
    ([], SortAttrs(0), FakeRegion([], arr(PRED)), "sort_c1"),
    ([arr(F32, 3), arr(S32, 4)], SortAttrs(0),
     FakeRegion([arr(F32), arr(F32), arr(S32), arr(S32)], arr(PRED)), "sort_c3"),
    ([arr(F32, 3)], SortAttrs(1), FakeRegion([arr(F32)] * 2, arr(PRED)), "sort_c4"),
    ([arr(F32, 3)], SortAttrs(-2), FakeRegion([arr(F32)] * 2, arr(PRED)), "sort_c4"),
    ([arr(F32, 3)], SortAttrs(0), FakeRegion([arr(F32)] * 2, arr(F32)), "sort_c5"),
    ([arr(F32, 3)], SortAttrs(0), FakeRegion([arr(S32)] * 2, arr(PRED)), "sort_c5"),
])
def test_sort_constraints(operands: list[Shape], attrs: SortAttrs, region: FakeRegion,
                          label: str) -> None:
    with pytest.raises(ShapeInferenceError, match=label):
        infer_shape("sort", operands, attrs, [region])


# ---- batch norm ----------------------------------------------------------------------------------
def test_batch_norm_infers() -> None:
    x, v = arr(F32, 2, 3, 4), arr(F32, 4)
    attrs = BatchNormAttrs(1e-3, 2)
    assert infer_shape("batch_norm_training", [x, v, v], attrs) == Shape.tuple([x, v, v])
    assert infer_shape("batch_norm_inference", [x, v, v, v, v], attrs) == x
    assert infer_shape("batch_norm_grad", [x, v, v, v, x], attrs) == Shape.tuple([x, v, v])


@pytest.mark.parametrize("name,operands,fi,label", [
    ("batch_norm_training", [arr(F32, 2, 4), arr(F32, 4), arr(F32, 4)], 2,
     "batch_norm_training_c1"),
    ("batch_norm_training", [arr(S32, 2, 4), arr(S32, 4), arr(S32, 4)], 1,
     "batch_norm_training_c2"),
    ("batch_norm_training", [arr(F32, 2, 4), arr(ElementType.F64, 4), arr(F32, 4)], 1,
     "batch_norm_training_c2"),
    ("batch_norm_training", [arr(F32, 2, 4), arr(F32, 3), arr(F32, 4)], 1,
     "batch_norm_training_c3"),
    ("batch_norm_training", [arr(F32, 2, 4), arr(F32, 4), arr(F32, 2)], 1,
     "batch_norm_training_c4"),
    ("batch_norm_inference", [arr(F32, 2, 4)] + [arr(F32, 4)] * 4, -1,
     "batch_norm_inference_c1"),
    ("batch_norm_inference", [arr(F32, 2, 4), arr(F32, 2)] + [arr(F32, 4)] * 3, 1,
     "batch_norm_inference_c3"),
    ("batch_norm_inference", [arr(F32, 2, 4), arr(F32, 4), arr(F32, 2), arr(F32, 4),
                              arr(F32, 4)], 1, "batch_norm_inference_c4"),
    ("batch_norm_inference", [arr(F32, 2, 4), arr(F32, 4), arr(F32, 4), arr(F32, 4, 1),
                              arr(F32, 4)], 1, "batch_norm_inference_c5"),
    ("batch_norm_inference", [arr(F32, 2, 4)] + [arr(F32, 4)] * 3 + [arr(F32, 5)], 1,
     "batch_norm_inference_c6"),
    ("batch_norm_grad", [arr(F32, 2, 4)] + [arr(F32, 4)] * 3 + [arr(F32, 2, 4)], 5,
     "batch_norm_grad_c1"),
    ("batch_norm_grad", [arr(F32, 2, 4)] + [arr(F32, 4)] * 3 + [arr(ElementType.F16, 2, 4)],
     1, "batch_norm_grad_c2"),
    ("batch_norm_grad", [arr(F32, 2, 4)] + [arr(F32, 4)] * 3 + [arr(F32, 4, 2)], 1,
     "batch_norm_grad_c3"),
    ("batch_norm_grad", [arr(F32, 2, 4), arr(F32, 4), arr(F32, 3), arr(F32, 4),
                         arr(F32, 2, 4)], 1, "batch_norm_grad_c4"),
    ("batch_norm_grad", [arr(F32, 2, 4), arr(F32, 2), arr(F32, 4), arr(F32, 4),
                         arr(F32, 2, 4)], 1, "batch_norm_grad_c5"),
])
def test_batch_norm_constraints(name: str, operands: list[Shape], fi: int, label: str) -> None:
    with pytest.raises(ShapeInferenceError, match=label):
        infer_shape(name, operands, BatchNormAttrs(0.0, fi))


# ---- evaluation: the spec's examples -------------------------------------------------------------
CLIENT = xlapy.Client()


def _region(opcode: str, et: ElementType, attrs: Any = None) -> XlaComputation:
    b = XlaBuilder(opcode)
    x, y = b.parameter(0, Shape.scalar(et)), b.parameter(1, Shape.scalar(et))
    if attrs is None:
        b.add_op(opcode, [x, y])
    else:
        b.add_op(opcode, [x, y], attrs)
    return b.build()


def _run(build: Any, *args: np.ndarray) -> Any:
    b = XlaBuilder("t")
    params = [b.parameter(i, Shape.array(xlapy.types.from_dtype(a.dtype), a.shape))
              for i, a in enumerate(args)]
    build(b, *params)
    return CLIENT.execute_and_transfer(b.build(), list(args)).to_value()


def test_reduce_spec_example() -> None:
    out = _run(lambda b, x: ops.Reduce(b, [x], [ops.ConstantR0(b, 0)], _region("add", S32),
                                       [1]), np.array([[0, 1, 2, 3, 4, 5]], np.int32))
    np.testing.assert_array_equal(out, np.array([15], np.int32))


def test_reduce_empty_dimension_gives_init() -> None:
    out = _run(lambda b, x: ops.Reduce(b, [x], [ops.ConstantR0(b, 7)], _region("add", S32),
                                       [0]), np.zeros((0, 3), np.int32))
    np.testing.assert_array_equal(out, np.array([7, 7, 7], np.int32))


def test_reduce_window_spec_example() -> None:
    x = np.array([[1, 2], [3, 4], [5, 6]], np.int32)
    out = _run(lambda b, p: ops.ReduceWindowWithGeneralPadding(
        p, ops.ConstantR0(b, 0), _region("add", S32), (2, 1), (4, 1), (2, 1), (3, 1),
        ((2, 1), (0, 0))), x)
    np.testing.assert_array_equal(out, np.array([[0, 0], [3, 4]], np.int32))


def test_reduce_window_negative_padding_crops() -> None:
    x = np.arange(6, dtype=np.int32)
    out = _run(lambda b, p: ops.ReduceWindowWithGeneralPadding(
        p, ops.ConstantR0(b, 0), _region("add", S32), (2,), (1,), None, None,
        ((-1, -2),)), x)
    np.testing.assert_array_equal(out, np.array([3, 5], np.int32))


def test_select_and_scatter_spec_example() -> None:
    operand = np.array([[1, 5], [2, 5], [3, 6], [4, 4]], np.int32)
    source = np.array([[5, 6], [7, 8]], np.int32)
    ge = _region("compare", S32, CompareAttrs(ComparisonDirection.GE))
    out = _run(lambda b, o, s: ops.SelectAndScatterWithGeneralPadding(
        o, ge, (3, 1), (2, 1), ((0, 1), (0, 0)), s, ops.ConstantR0(b, 0),
        _region("add", S32)), operand, source)
    np.testing.assert_array_equal(out, np.array([[0, 0], [0, 0], [5, 14], [7, 0]], np.int32))


def _gt_comparator() -> XlaComputation:
    b = XlaBuilder("gt")
    p = [b.parameter(i, Shape.scalar(S32)) for i in range(4)]
    b.add_op("compare", [p[0], p[1]], CompareAttrs(ComparisonDirection.GT))
    return b.build()


@pytest.mark.parametrize("dim,want0,want1", [
    (0, [[3, 2, 3], [1, 2, 1]], [[1, 2, 1], [3, 2, 3]]),
    (1, [[3, 2, 1], [3, 2, 1]], [[1, 2, 3], [1, 2, 3]]),
])
def test_sort_spec_examples(dim: int, want0: list[list[int]], want1: list[list[int]]) -> None:
    x0 = np.array([[1, 2, 3], [3, 2, 1]], np.int32)
    x1 = np.array([[3, 2, 1], [1, 2, 3]], np.int32)
    out = _run(lambda b, p, q: ops.Sort(b, [p, q], _gt_comparator(), dim, True), x0, x1)
    np.testing.assert_array_equal(out[0], np.array(want0, np.int32))
    np.testing.assert_array_equal(out[1], np.array(want1, np.int32))


def test_batch_norm_spec_examples() -> None:
    x = np.array([[[1, 2], [3, 4]], [[3, 4], [1, 2]]], np.float32)
    one = np.ones(2, np.float32)
    mean, var = np.array([2, 3], np.float32), one
    out, bm, bv = _run(lambda b, p, s, o: ops.BatchNormTraining(p, s, o, 0.0, 2), x, one, one)
    want = np.array([[[0, 0], [2, 2]], [[2, 2], [0, 0]]], np.float32)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(bm, mean)
    np.testing.assert_array_equal(bv, var)
    inf = _run(lambda b, *p: ops.BatchNormInference(*p, 0.0, 2), x, one, one, mean, var)
    np.testing.assert_array_equal(inf, want)
    dy = np.full(x.shape, 0.1, np.float32)
    go, gs, gb = _run(lambda b, *p: ops.BatchNormGrad(*p, 0.0, 2), x, one, mean, var, dy)
    np.testing.assert_allclose(go, np.zeros_like(x), atol=1e-7)
    np.testing.assert_allclose(gs, np.zeros(2, np.float32), atol=1e-7)
    np.testing.assert_allclose(gb, np.full(2, 0.4, np.float32), rtol=1e-6)


# ---- regions that are not element-wise fall back to scalar calls ---------------------------------
def _non_elementwise_add() -> XlaComputation:
    b = XlaBuilder("add_via_broadcast")
    x, y = b.parameter(0, Shape.scalar(S32)), b.parameter(1, Shape.scalar(S32))
    s = b.add_op("add", [x, y])
    b.add_op("broadcast_in_dim", [s], BroadcastInDimAttrs((), ()))
    return b.build()


def test_non_elementwise_region_uses_scalar_calls() -> None:
    comp = _non_elementwise_add()
    assert not is_elementwise_region(comp.module.entry_computation())
    assert is_elementwise_region(_region("add", S32).module.entry_computation())
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = _run(lambda b, p: ops.Reduce(b, [p], [ops.ConstantR0(b, 1)], comp, [1]), x)
    np.testing.assert_array_equal(out, x.sum(1) + 1)
    out = _run(lambda b, p: ops.ReduceWindowWithGeneralPadding(
        p, ops.ConstantR0(b, 0), comp, (2, 2), (1, 1)), x)
    np.testing.assert_array_equal(out, x[:-1, :-1] + x[1:, :-1] + x[:-1, 1:] + x[1:, 1:])


def test_general_sort_handles_long_rows_and_ties() -> None:
    """A comparator on the second operand's pair forces the merge-sort path."""
    b = XlaBuilder("lt_second")
    p = [b.parameter(i, Shape.scalar(S32)) for i in range(4)]
    b.add_op("compare", [p[2], p[3]], CompareAttrs(ComparisonDirection.LT))
    comp = b.build()
    rng = np.random.default_rng(0)
    vals = rng.integers(0, 1000, size=(2, 333)).astype(np.int32)
    keys = rng.integers(0, 9, size=(2, 333)).astype(np.int32)
    out = _run(lambda bb, v, k: ops.Sort(bb, [v, k], comp, 1, True), vals, keys)
    order = np.argsort(keys, axis=1, kind="stable")
    np.testing.assert_array_equal(out[1], np.take_along_axis(keys, order, 1))
    np.testing.assert_array_equal(out[0], np.take_along_axis(vals, order, 1))


def test_sort_comparator_with_bitcast_runs_on_whole_arrays() -> None:
    """Regression: a comparator region that bitcasts f32 to s32 (XLA's optimized sort) was
    ran on arrays with the scalar result shape, so bitcast_convert reshaped to a scalar."""
    bops = ops
    cb = XlaBuilder("cmp")
    a = bops.Parameter(cb, 0, Shape.scalar(ElementType.F32))
    b = bops.Parameter(cb, 1, Shape.scalar(ElementType.F32))
    ia = bops.BitcastConvertType(a, ElementType.S32)
    ib = bops.BitcastConvertType(b, ElementType.S32)
    bops.Compare(ia, ib, direction=ComparisonDirection.LT)
    bb = XlaBuilder("sort")
    x = bops.Parameter(bb, 0, Shape.array(ElementType.F32, [6]))
    bops.Sort(bb, [x], cb.build(), 0)
    data = np.array([3.0, 1.0, 2.0, 0.5, 4.0, 0.25], np.float32)
    out = xlapy.Client().execute_and_transfer(bb.build(), [data]).to_numpy()
    np.testing.assert_array_equal(out, np.sort(data))


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_sort_with_a_comparator_that_is_no_strict_weak_order(backend: str) -> None:
    """FLOAT LT over data with NaNs is no strict weak order: the merge placed two elements at
    one position and left garbage indices (an IndexError, or wrong values); the result must
    still be a permutation of the operand."""
    text = '''func.func @main(%a: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xi32>) {
  %i = stablehlo.iota dim = 1 : tensor<8x64xi32>
  %r:2 = "stablehlo.sort"(%a, %i) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>, %p: tensor<i32>, %q: tensor<i32>):
    %c = stablehlo.compare LT, %x, %y, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) {dimension = 1 : i64, is_stable = true}
    : (tensor<8x64xf32>, tensor<8x64xi32>) -> (tensor<8x64xf32>, tensor<8x64xi32>)
  return %r#0, %r#1 : tensor<8x64xf32>, tensor<8x64xi32>
}'''
    prog = xlapy.compile(text, backend=backend)
    rng = np.random.default_rng(1)
    for _ in range(10):
        x = rng.standard_normal((8, 64)).astype(np.float32)
        x[rng.random((8, 64)) < 0.2] = np.nan
        values, idx = (np.asarray(r) for r in prog(x))
        assert (np.sort(idx, axis=1) == np.arange(64)).all()
        assert np.array_equal(np.take_along_axis(x, idx.astype(np.int64), 1), values,
                              equal_nan=True)
