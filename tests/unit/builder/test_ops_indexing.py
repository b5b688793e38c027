"""Builder Gather/Scatter: dimension-number spellings, variadic scatter, error reporting."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy import BuilderError, Shape, XlaBuilder
from xlapy import ElementType as ET
from xlapy.builder import ops

CLIENT = xlapy.Client()


def adder(*ets: ET) -> Any:
    b = XlaBuilder("add")
    n = len(ets)
    ps = [ops.Parameter(b, i, Shape.scalar(ets[i % n])) for i in range(2 * n)]
    outs = [ops.Add(ps[k], ps[n + k]) for k in range(n)]
    return b.build(outs[0] if n == 1 else ops.Tuple(b, outs))


def test_gather_with_our_dimension_numbers() -> None:
    b = XlaBuilder("g")
    x = ops.Parameter(b, 0, Shape.array(ET.F32, (5, 3)))
    i = ops.Parameter(b, 1, Shape.array(ET.S32, (4,)))
    g = ops.Gather(x, i, ops.GatherDimensionNumbers((1,), (0,), (0,), 1), (1, 3))
    assert g.shape() == Shape.array(ET.F32, (4, 3))
    xv = np.arange(15, dtype=np.float32).reshape(5, 3)
    out = CLIENT.execute_and_transfer(b.build(), [xv, np.array([4, 0, 9, -3], np.int32)])
    np.testing.assert_array_equal(out.to_numpy(), xv[[4, 0, 4, 0]])


def test_gather_with_jax_style_dimension_numbers() -> None:
    """jax.lax.GatherDimensionNumbers has no index_vector_dim: it is the last index dim."""
    jax_dn = SimpleNamespace(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
                             operand_batching_dims=(), start_indices_batching_dims=())
    b = XlaBuilder("g")
    x = ops.Parameter(b, 0, Shape.array(ET.F32, (5, 3)))
    i = ops.Parameter(b, 1, Shape.array(ET.S64, (2, 1)))
    g = ops.Gather(x, i, jax_dn, [1, 2])
    assert g.shape() == Shape.array(ET.F32, (2, 2))
    attrs = g.instr.attrs
    assert attrs.dimension_numbers.index_vector_dim == 1
    assert isinstance(attrs.slice_sizes, tuple)


def test_gather_with_xla_client_style_lists() -> None:
    dn = SimpleNamespace(offset_dims=[0], collapsed_slice_dims=[1], start_index_map=[1],
                         index_vector_dim=1)
    b = XlaBuilder("g")
    x = ops.Parameter(b, 0, Shape.array(ET.S32, (5, 3)))
    i = ops.Parameter(b, 1, Shape.array(ET.S32, (4,)))
    g = ops.Gather(x, i, dn, [5, 1], indices_are_sorted=True)
    assert g.shape() == Shape.array(ET.S32, (5, 4))
    assert g.instr.attrs.dimension_numbers.offset_dims == (0,)
    assert g.instr.attrs.indices_are_sorted is True


def test_gather_errors_are_deferred_and_name_the_op() -> None:
    b = XlaBuilder("g")
    x = ops.Parameter(b, 0, Shape.array(ET.F32, (5, 3)))
    i = ops.Parameter(b, 1, Shape.array(ET.S32, (4,)))
    ops.Gather(x, i, ops.GatherDimensionNumbers((1,), (0,), (0,), 1), (2, 3))
    with pytest.raises(BuilderError, match=r"Gather: .*gather_c9"):
        b.build()


def test_gather_bad_dimension_numbers_object() -> None:
    b = XlaBuilder("g")
    x = ops.Parameter(b, 0, Shape.array(ET.F32, (5, 3)))
    i = ops.Parameter(b, 1, Shape.array(ET.S32, (4,)))
    ops.Gather(x, i, object(), (1, 3))
    with pytest.raises(BuilderError, match="Gather: bad dimension numbers"):
        b.build()


def test_scatter_single_and_die_immediately() -> None:
    b = XlaBuilder("s")
    x = ops.Parameter(b, 0, Shape.array(ET.F32, (5, 3)))
    i = ops.Parameter(b, 1, Shape.array(ET.S32, (2, 1)))
    u = ops.Parameter(b, 2, Shape.array(ET.F32, (2, 3)))
    dn = ops.ScatterDimensionNumbers((1,), (0,), (0,), 1)
    s = ops.Scatter(x, i, u, adder(ET.F32), dn, unique_indices=True)
    assert s.shape() == Shape.array(ET.F32, (5, 3))
    assert s.instr.attrs.unique_indices is True
    b.set_die_immediately_on_error(True)
    with pytest.raises(BuilderError, match="Scatter: .*scatter_c23"):
        ops.Scatter(x, i, u, adder(ET.F64), dn)


def test_scatter_variadic_lists_give_a_tuple() -> None:
    b = XlaBuilder("s")
    x = ops.Parameter(b, 0, Shape.array(ET.F32, (5,)))
    y = ops.Parameter(b, 1, Shape.array(ET.S32, (5,)))
    i = ops.Parameter(b, 2, Shape.array(ET.S32, (3, 1)))
    ux = ops.Parameter(b, 3, Shape.array(ET.F32, (3,)))
    uy = ops.Parameter(b, 4, Shape.array(ET.S32, (3,)))
    jax_dn = SimpleNamespace(update_window_dims=(), inserted_window_dims=(0,),
                             scatter_dims_to_operand_dims=(0,), operand_batching_dims=(),
                             scatter_indices_batching_dims=())
    s = ops.Scatter([x, y], i, [ux, uy], adder(ET.F32, ET.S32), jax_dn)
    assert s.shape() == Shape.tuple([Shape.array(ET.F32, (5,)), Shape.array(ET.S32, (5,))])
    args = [np.zeros(5, np.float32), np.ones(5, np.int32), np.array([[0], [4], [0]], np.int32),
            np.array([1, 2, 3], np.float32), np.array([5, 6, 7], np.int32)]
    fx, fy = CLIENT.execute_and_transfer(b.build(), args).to_value()
    assert fx.tolist() == [4, 0, 0, 0, 2] and fy.tolist() == [13, 1, 1, 1, 7]


def test_scatter_count_mismatch_is_reported() -> None:
    b = XlaBuilder("s")
    x = ops.Parameter(b, 0, Shape.array(ET.F32, (5,)))
    i = ops.Parameter(b, 1, Shape.array(ET.S32, (3, 1)))
    u = ops.Parameter(b, 2, Shape.array(ET.F32, (3,)))
    ops.Scatter([x, x], i, [u], adder(ET.F32, ET.F32),
                ops.ScatterDimensionNumbers((), (0,), (0,), 1))
    with pytest.raises(BuilderError, match="Scatter: expects as many updates"):
        b.build()


def test_scatter_after_an_earlier_error_keeps_the_first() -> None:
    b = XlaBuilder("s")
    x = ops.Parameter(b, 0, Shape.array(ET.F32, (5,)))
    bad = ops.Gather(x, x, ops.GatherDimensionNumbers((), (0,), (0,), 1), (1,))
    i = ops.Parameter(b, 1, Shape.array(ET.S32, (3, 1)))
    ops.Scatter(bad, i, x, adder(ET.F32), ops.ScatterDimensionNumbers((), (0,), (0,), 1))
    with pytest.raises(BuilderError, match=r"Gather: .*gather_i2"):
        b.build()


def test_numpy_arrays_as_attributes_and_non_op_operands() -> None:
    b = XlaBuilder("g")
    x = ops.Parameter(b, 0, Shape.array(ET.F32, (5, 3)))
    i = ops.Parameter(b, 1, Shape.array(ET.S32, (4, 1)))
    dn = SimpleNamespace(offset_dims=np.array([1]), collapsed_slice_dims=np.array([0]),
                         start_index_map=np.array([0]), index_vector_dim=np.int64(1))
    assert ops.Gather(x, i, dn, np.array([1, 3])).shape() == Shape.array(ET.F32, (4, 3))
    ops.Scatter(x, i, "not an op", adder(ET.F32),
                ops.ScatterDimensionNumbers((1,), (0,), (0,), 1))
    with pytest.raises(BuilderError, match="Scatter: operand 'not an op' is not an XlaOp"):
        b.build()
