"""Builder shape ops: the seed spellings, their composed forms and their error reports."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.builder import XlaBuilder, XlaOp, ops
from xlapy.errors import BuilderError
from xlapy.types import ElementType, Shape

F32, S32 = ElementType.F32, ElementType.S32

# Seed 000's 24-element example array v = f32[4x2x3].
V = np.array([[[10, 11, 12], [15, 16, 17]], [[20, 21, 22], [25, 26, 27]],
              [[30, 31, 32], [35, 36, 37]], [[40, 41, 42], [45, 46, 47]]], np.float32)


def evaluate(build: Callable[[XlaBuilder, XlaOp], XlaOp], value: np.ndarray) -> np.ndarray:
    """Build `build(b, parameter)` over `value`'s shape and run it."""
    from xlapy.types import from_dtype

    b = XlaBuilder("t")
    p = ops.Parameter(b, 0, Shape.array(from_dtype(value.dtype), value.shape))
    comp = b.build(build(b, p))
    return xlapy.Client().execute_and_transfer(comp, [value]).to_numpy()


def build_error(build: Callable[[XlaBuilder, XlaOp], Any], shape: Shape) -> str:
    b = XlaBuilder("t")
    build(b, ops.Parameter(b, 0, shape))
    with pytest.raises(BuilderError) as info:
        b.build()
    return str(info.value)


def test_broadcast_prepends_major_dimensions() -> None:
    x = np.array([1, 2, 3], np.int32)
    out = evaluate(lambda b, p: ops.Broadcast(p, [2, 4]), x)
    assert out.shape == (2, 4, 3)
    assert (out == x).all()
    scalar = evaluate(lambda b, p: ops.Broadcast(p, (2, 3)), np.array(2.0, np.float32))
    np.testing.assert_array_equal(scalar, np.full((2, 3), 2.0, np.float32))


def test_broadcast_in_dim_expands_degenerate() -> None:
    x = np.array([[1, 2]], np.int32)  # dim 0 (size 1) -> result dim 2, dim 1 -> result dim 1
    out = evaluate(lambda b, p: ops.BroadcastInDim(p, [3, 2, 4], [2, 1]), x)
    assert out.shape == (3, 2, 4)
    np.testing.assert_array_equal(out[:, :, 3], [[1, 2]] * 3)
    np.testing.assert_array_equal(out[1, 1], [2] * 4)


def test_reshape_seed_examples() -> None:
    flat = evaluate(lambda b, p: ops.Reshape(p, [0, 1, 2], [24]), V)
    np.testing.assert_array_equal(flat, V.ravel())
    np.testing.assert_array_equal(evaluate(lambda b, p: ops.Reshape(p, [8, 3]), V),
                                  V.reshape(8, 3))
    out_of_order = evaluate(lambda b, p: ops.Reshape(p, [1, 2, 0], [8, 3]), V)
    np.testing.assert_array_equal(out_of_order[:2],
                                  [[10, 20, 30], [40, 11, 21]])
    np.testing.assert_array_equal(out_of_order[-1], [27, 37, 47])


def test_reshape_scalar_round_trip() -> None:
    one = np.array([[5]], np.float32)
    assert evaluate(lambda b, p: ops.Reshape(p, [0, 1], []), one).shape == ()
    assert evaluate(lambda b, p: ops.Reshape(p, [], [1, 1]), np.array(5, np.float32)).shape \
        == (1, 1)


def test_reshape_errors() -> None:
    assert "Reshape: reshape_c2" in build_error(lambda b, p: ops.Reshape(p, [5]),
                                                Shape.array(F32, [2, 3]))
    msg = build_error(lambda b, p: ops.Reshape(p, [0, 0], [6]), Shape.array(F32, [2, 3]))
    assert msg.startswith("Reshape: ") and "permutation" in msg


def test_collapse_seed_examples() -> None:
    np.testing.assert_array_equal(evaluate(lambda b, p: ops.Collapse(p, [0, 1, 2]), V),
                                  V.ravel())
    np.testing.assert_array_equal(evaluate(lambda b, p: ops.Collapse(p, [0, 1]), V),
                                  V.reshape(8, 3))
    np.testing.assert_array_equal(evaluate(lambda b, p: ops.Collapse(p, [1, 2]), V),
                                  V.reshape(4, 6))
    np.testing.assert_array_equal(evaluate(lambda b, p: ops.Collapse(p, [1]), V), V)


@pytest.mark.parametrize("dims", [[1, 0], [0, 2], [0, 3]])
def test_collapse_rejects_unordered_or_out_of_range(dims: list[int]) -> None:
    assert build_error(lambda b, p: ops.Collapse(p, dims), Shape.array(F32, [4, 2, 3])) \
        .startswith("Collapse: ")


def test_transpose_and_trans() -> None:
    np.testing.assert_array_equal(evaluate(lambda b, p: ops.Transpose(p, [2, 0, 1]), V),
                                  np.transpose(V, (2, 0, 1)))
    m = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_array_equal(evaluate(lambda b, p: ops.Trans(p), m), m.T)
    assert build_error(lambda b, p: ops.Trans(p), Shape.array(F32, [2, 3, 4])) \
        .startswith("Trans: ")
    assert "Transpose: transpose_c2" in build_error(lambda b, p: ops.Transpose(p, [0]),
                                                    Shape.array(F32, [2, 3]))


def test_rev() -> None:
    np.testing.assert_array_equal(evaluate(lambda b, p: ops.Rev(p, [0, 2]), V), V[::-1, :, ::-1])
    assert "Rev: reverse_c3" in build_error(lambda b, p: ops.Rev(p, [3]),
                                            Shape.array(F32, [4, 2, 3]))


def test_slice_and_slice_in_dim() -> None:
    b2 = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(evaluate(lambda b, p: ops.Slice(p, [2, 1], [4, 3]), b2),
                                  [[7, 8], [10, 11]])
    np.testing.assert_array_equal(evaluate(lambda b, p: ops.Slice(p, [0, 0], [4, 3], [3, 2]),
                                           b2), b2[::3, ::2])
    np.testing.assert_array_equal(evaluate(lambda b, p: ops.SliceInDim(p, 1, 4, 2, 0), b2),
                                  b2[1:4:2])
    assert build_error(lambda b, p: ops.SliceInDim(p, 0, 1, 1, 2), Shape.array(F32, [4, 3])) \
        .startswith("SliceInDim: ")
    assert "Slice: slice_c3" in build_error(lambda b, p: ops.Slice(p, [0, 0], [5, 3]),
                                            Shape.array(F32, [4, 3]))


def test_dynamic_slice_list_and_rank1_forms() -> None:
    b2 = np.arange(12, dtype=np.float32).reshape(4, 3)

    def scalars(b: XlaBuilder, p: XlaOp) -> XlaOp:
        return ops.DynamicSlice(p, [ops.ConstantR0(b, 2), ops.ConstantR0(b, 1)], [2, 2])

    def rank1(b: XlaBuilder, p: XlaOp) -> XlaOp:
        return ops.DynamicSlice(p, ops.ConstantR1(b, [9, -4]), [2, 2])

    np.testing.assert_array_equal(evaluate(scalars, b2), [[7, 8], [10, 11]])
    np.testing.assert_array_equal(evaluate(rank1, b2), [[6, 7], [9, 10]])  # clamped to (2, 0)


def test_dynamic_update_slice() -> None:
    b2 = np.arange(12, dtype=np.float32).reshape(4, 3)
    u = np.arange(12, 18, dtype=np.float32).reshape(3, 2)

    def build(b: XlaBuilder, p: XlaOp) -> XlaOp:
        return ops.DynamicUpdateSlice(p, ops.Constant(b, u),
                                      [ops.ConstantR0(b, 1), ops.ConstantR0(b, 1)])

    expected = b2.copy()
    expected[1:, 1:] = u
    np.testing.assert_array_equal(evaluate(build, b2), expected)
    msg = build_error(lambda b, p: ops.DynamicUpdateSlice(p, p, [ops.ConstantR0(b, 0)]),
                      Shape.array(F32, [4, 3]))
    assert "DynamicUpdateSlice: dynamic_update_slice_c4" in msg


def test_concat_in_dim() -> None:
    def build(b: XlaBuilder, p: XlaOp) -> XlaOp:
        return ops.ConcatInDim(b, [p, ops.ConstantR1(b, [4, 5]), p], 0)

    x = np.array([2, 3], np.int32)
    np.testing.assert_array_equal(evaluate(build, x), [2, 3, 4, 5, 2, 3])
    b = XlaBuilder("t")
    ops.ConcatInDim(b, [], 0)
    with pytest.raises(BuilderError, match="ConcatInDim: concatenate_c3"):
        b.build()


def test_pad_with_config_forms() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    triples = [(0, 2, 1), (1, 1, 2)]
    config = ops.PaddingConfig([ops.PaddingConfigDimension(0, 2, 1),
                                ops.PaddingConfigDimension(1, 1, 2)])
    a = evaluate(lambda b, p: ops.Pad(p, ops.ConstantR0(b, 0), triples), x)
    c = evaluate(lambda b, p: ops.Pad(p, ops.ConstantR0(b, 0), config), x)
    d = evaluate(lambda b, p: ops.Pad(p, ops.ConstantR0(b, 0), ops.make_padding_config(triples)),
                 x)
    assert a.shape == (5, 9)
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(a, d)
    np.testing.assert_array_equal(a[2], [0, 4, 0, 0, 5, 0, 0, 6, 0])


def test_pad_in_dim_and_errors() -> None:
    x = np.array([[1, 2], [3, 4]], np.int32)
    out = evaluate(lambda b, p: ops.PadInDim(p, ops.ConstantR0(b, 7), 1, 1, -1), x)
    np.testing.assert_array_equal(out, [[7, 1], [7, 3]])
    msg = build_error(lambda b, p: ops.Pad(p, ops.ConstantR0(b, 0.5), [(0, 0, 0)] * 2),
                      Shape.array(S32, [2, 2]))
    assert "Pad: pad_c1" in msg
    assert build_error(lambda b, p: ops.Pad(p, ops.ConstantR0(b, 0), [(0, 0)]),
                       Shape.array(S32, [2])).startswith("Pad: ")


def test_iota_both_forms() -> None:
    b = XlaBuilder("t")
    comp = b.build(ops.Iota(b, ElementType.F32, 5))
    out = xlapy.Client().execute_and_transfer(comp, []).to_numpy()
    np.testing.assert_array_equal(out, np.arange(5, dtype=np.float32))
    assert out.dtype == np.float32
    b = XlaBuilder("t")
    comp = b.build(ops.Iota(b, Shape.array(S32, [2, 3]), 1))
    out = xlapy.Client().execute_and_transfer(comp, []).to_numpy()
    np.testing.assert_array_equal(out, [[0, 1, 2], [0, 1, 2]])
    b = XlaBuilder("t")
    ops.Iota(b, Shape.array(S32, [2, 3]), 2)
    with pytest.raises(BuilderError, match="Iota: iota_c1"):
        b.build()
    b = XlaBuilder("t")
    ops.Iota(b, np.int32, -1)
    with pytest.raises(BuilderError, match="Iota: "):
        b.build()


def test_builder_ops_are_exported() -> None:
    import inspect

    from xlapy.builder import ops_shape

    for name in ops_shape.__all__:
        # ops wraps each op function (wrong Python values -> BuilderError naming the op)
        assert inspect.unwrap(getattr(ops, name)) is getattr(ops_shape, name)
