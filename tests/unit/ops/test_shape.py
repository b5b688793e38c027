"""Shape family: shape inference (valid cases and each spec constraint's label) and evaluate
on the spec's examples."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlapy  # noqa: F401  (fills the op registry)
from xlapy.errors import ShapeInferenceError
from xlapy.ops.base import NO_ATTRS, get_op, infer_shape
from xlapy.ops.shape import (
    BroadcastInDimAttrs,
    ConcatenateAttrs,
    DynamicSliceAttrs,
    IotaAttrs,
    PadAttrs,
    ReshapeAttrs,
    ReverseAttrs,
    SliceAttrs,
    TransposeAttrs,
)
from xlapy.types import ElementType, Shape

ET = ElementType


def arr(et: ElementType, *dims: int) -> Shape:
    return Shape.array(et, dims)


F32 = ET.F32
S32 = ET.S32


def run(name: str, operands: list[np.ndarray], attrs: Any = NO_ATTRS) -> np.ndarray:
    """Infer then evaluate one op on numpy values (checks the value matches the shape)."""
    from xlapy.types import from_dtype

    shapes = [Shape.array(from_dtype(o.dtype), o.shape) for o in operands]
    result = infer_shape(name, shapes, attrs)
    out = get_op(name).evaluate(operands, attrs, result, None)  # type: ignore[arg-type]
    assert out.dtype == result.dtype and out.shape == result.dimensions
    return out


# ---- shape inference: valid -------------------------------------------------------------------
VALID = [
    ("broadcast_in_dim", [arr(F32, 1, 3)], BroadcastInDimAttrs((2, 4, 3), (0, 2)),
     arr(F32, 2, 4, 3)),
    ("reshape", [arr(S32, 2, 3)], ReshapeAttrs((3, 2)), arr(S32, 3, 2)),
    ("reshape", [arr(S32, 1, 1)], ReshapeAttrs(()), arr(S32)),
    ("reshape", [arr(S32, 0, 3)], ReshapeAttrs((3, 0, 5)), arr(S32, 3, 0, 5)),
    ("transpose", [arr(F32, 2, 3, 4)], TransposeAttrs((2, 0, 1)), arr(F32, 4, 2, 3)),
    ("slice", [arr(F32, 3, 4)], SliceAttrs((1, 2), (3, 4), (1, 1)), arr(F32, 2, 2)),
    ("slice", [arr(F32, 10)], SliceAttrs((1,), (8,), (3,)), arr(F32, 3)),
    ("slice", [arr(F32, 10)], SliceAttrs((4,), (4,), (2,)), arr(F32, 0)),
    ("dynamic_slice", [arr(F32, 4, 4), arr(S32), arr(S32)], DynamicSliceAttrs((2, 2)),
     arr(F32, 2, 2)),
    ("dynamic_slice", [arr(F32, 4), arr(ET.U8)], DynamicSliceAttrs((0,)), arr(F32, 0)),
    ("dynamic_update_slice", [arr(F32, 4, 4), arr(F32, 2, 4), arr(ET.S64), arr(ET.S64)],
     NO_ATTRS, arr(F32, 4, 4)),
    ("concatenate", [arr(S32, 3, 2), arr(S32, 1, 2)], ConcatenateAttrs(0), arr(S32, 4, 2)),
    ("concatenate", [arr(S32, 3, 2)], ConcatenateAttrs(1), arr(S32, 3, 2)),
    ("pad", [arr(S32, 2, 3), arr(S32)], PadAttrs((0, 1), (2, 1), (1, 2)), arr(S32, 5, 9)),
    ("pad", [arr(S32, 4), arr(S32)], PadAttrs((-2,), (-1,), (0,)), arr(S32, 1)),
    ("pad", [arr(S32, 0), arr(S32)], PadAttrs((1,), (2,), (5,)), arr(S32, 3)),
    ("reverse", [arr(F32, 3, 2)], ReverseAttrs((1,)), arr(F32, 3, 2)),
    ("reverse", [arr(F32, 3, 2)], ReverseAttrs(()), arr(F32, 3, 2)),
    ("iota", [], IotaAttrs(arr(ET.C64, 4, 5), 1), arr(ET.C64, 4, 5)),
]


@pytest.mark.parametrize("name,operands,attrs,expected", VALID,
                         ids=[f"{v[0]}-{i}" for i, v in enumerate(VALID)])
def test_infer_valid(name: str, operands: list[Shape], attrs: Any, expected: Shape) -> None:
    assert infer_shape(name, operands, attrs) == expected


# ---- shape inference: each violated constraint names its label ---------------------------------
INVALID = [
    ("reshape", [arr(S32, 2, 3)], ReshapeAttrs((4, 2)), "reshape_c2"),
    ("reshape", [arr(S32, 2, 3)], ReshapeAttrs((-2, -3)), "reshape_c2"),
    ("reshape", [Shape.tuple([arr(S32, 2)])], ReshapeAttrs((2,)), "reshape_c1"),
    ("transpose", [arr(F32, 2, 3)], TransposeAttrs((0, 0)), "transpose_c2"),
    ("transpose", [arr(F32, 2, 3)], TransposeAttrs((1, 0, 2)), "transpose_c2"),
    ("slice", [arr(F32, 3, 4)], SliceAttrs((1,), (3, 4), (1, 1)), "slice_c2"),
    ("slice", [arr(F32, 3, 4)], SliceAttrs((2, 0), (1, 4), (1, 1)), "slice_c3"),
    ("slice", [arr(F32, 3, 4)], SliceAttrs((0, 0), (3, 5), (1, 1)), "slice_c3"),
    ("slice", [arr(F32, 3, 4)], SliceAttrs((-1, 0), (3, 4), (1, 1)), "slice_c3"),
    ("slice", [arr(F32, 3, 4)], SliceAttrs((0, 0), (3, 4), (1, 0)), "slice_c4"),
    ("dynamic_slice", [arr(F32, 4, 4), arr(S32)], DynamicSliceAttrs((2, 2)),
     "dynamic_slice_c2"),
    ("dynamic_slice", [arr(F32, 4, 4), arr(S32), arr(S32)], DynamicSliceAttrs((2,)),
     "dynamic_slice_c2"),
    ("dynamic_slice", [arr(F32, 4, 4), arr(S32), arr(ET.S64)], DynamicSliceAttrs((2, 2)),
     "dynamic_slice_c3"),
    ("dynamic_slice", [arr(F32, 4, 4), arr(S32), arr(S32)], DynamicSliceAttrs((2, 5)),
     "dynamic_slice_c4"),
    ("dynamic_slice", [arr(F32, 4, 4), arr(S32), arr(S32)], DynamicSliceAttrs((-1, 2)),
     "dynamic_slice_c4"),
    ("dynamic_slice", [arr(F32, 4), arr(F32)], DynamicSliceAttrs((2,)),
     "dynamic_slice_i_start_indices"),
    ("dynamic_slice", [arr(F32, 4), arr(S32, 1)], DynamicSliceAttrs((2,)),
     "dynamic_slice_i_start_indices"),
    ("dynamic_update_slice", [arr(F32, 4, 4), arr(ET.F64, 2, 2), arr(S32), arr(S32)],
     NO_ATTRS, "dynamic_update_slice_c2"),
    ("dynamic_update_slice", [arr(F32, 4, 4), arr(F32, 2), arr(S32), arr(S32)],
     NO_ATTRS, "dynamic_update_slice_c3"),
    ("dynamic_update_slice", [arr(F32, 4, 4), arr(F32, 2, 2), arr(S32)],
     NO_ATTRS, "dynamic_update_slice_c4"),
    ("dynamic_update_slice", [arr(F32, 4, 4), arr(F32, 2, 2), arr(S32), arr(ET.U32)],
     NO_ATTRS, "dynamic_update_slice_c5"),
    ("dynamic_update_slice", [arr(F32, 4, 4), arr(F32, 2, 5), arr(S32), arr(S32)],
     NO_ATTRS, "dynamic_update_slice_c6"),
    ("concatenate", [arr(S32, 3, 2), arr(F32, 1, 2)], ConcatenateAttrs(0), "concatenate_c1"),
    ("concatenate", [arr(S32, 3, 2), arr(S32, 1, 3)], ConcatenateAttrs(0), "concatenate_c2"),
    ("concatenate", [arr(S32, 3, 2), arr(S32, 3)], ConcatenateAttrs(0), "concatenate_c2"),
    ("concatenate", [], ConcatenateAttrs(0), "concatenate_c3"),
    ("concatenate", [arr(S32, 3, 2)], ConcatenateAttrs(2), "concatenate_c4"),
    ("concatenate", [arr(S32)], ConcatenateAttrs(0), "concatenate_c4"),
    ("pad", [arr(S32, 2, 3), arr(F32)], PadAttrs((0, 0), (0, 0), (0, 0)), "pad_c1"),
    ("pad", [arr(S32, 2, 3), arr(S32, 1)], PadAttrs((0, 0), (0, 0), (0, 0)), "pad_i2"),
    ("pad", [arr(S32, 2, 3), arr(S32)], PadAttrs((0,), (0, 0), (0, 0)), "pad_c2"),
    ("pad", [arr(S32, 2, 3), arr(S32)], PadAttrs((0, 0), (0, 0), (0, -1)), "pad_c3"),
    ("pad", [arr(S32, 2, 3), arr(S32)], PadAttrs((0, -2), (0, -2), (0, 0)), "pad_c4"),
    ("reverse", [arr(F32, 3, 2)], ReverseAttrs((1, 1)), "reverse_c2"),
    ("reverse", [arr(F32, 3, 2)], ReverseAttrs((2,)), "reverse_c3"),
    ("reverse", [arr(F32, 3, 2)], ReverseAttrs((-1,)), "reverse_c3"),
    ("iota", [], IotaAttrs(arr(F32, 4, 5), 2), "iota_c1"),
    ("iota", [], IotaAttrs(arr(F32), 0), "iota_c1"),
    ("iota", [], IotaAttrs(arr(ET.PRED, 4), 0), "iota_o1"),
    ("broadcast_in_dim", [arr(F32, 2, 3)], BroadcastInDimAttrs((2, 4), (0, 1)),
     "broadcast_in_dim_c5"),
]


@pytest.mark.parametrize("name,operands,attrs,label", INVALID,
                         ids=[f"{v[3]}-{i}" for i, v in enumerate(INVALID)])
def test_infer_violation(name: str, operands: list[Shape], attrs: Any, label: str) -> None:
    with pytest.raises(ShapeInferenceError, match=label):
        infer_shape(name, operands, attrs)


def test_error_lists_operand_shapes() -> None:
    with pytest.raises(ShapeInferenceError, match=r"f32\[3,2\]"):
        infer_shape("reverse", [arr(F32, 3, 2)], ReverseAttrs((5,)))


# ---- evaluate: spec examples -------------------------------------------------------------------
def test_reshape_row_major() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    np.testing.assert_array_equal(run("reshape", [x], ReshapeAttrs((3, 2))),
                                  [[1, 2], [3, 4], [5, 6]])


def test_transpose_spec_example() -> None:
    x = np.arange(1, 13, dtype=np.int32).reshape(2, 3, 2)
    out = run("transpose", [x], TransposeAttrs((2, 1, 0)))
    np.testing.assert_array_equal(out, [[[1, 7], [3, 9], [5, 11]], [[2, 8], [4, 10], [6, 12]]])


def test_transpose_nonsquare_dims() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = run("transpose", [x], TransposeAttrs((1, 2, 0)))
    assert out.shape == (3, 4, 2)
    assert out[2, 3, 1] == x[1, 2, 3]


def test_slice_strided() -> None:
    x = np.arange(10, dtype=np.int64)
    np.testing.assert_array_equal(run("slice", [x], SliceAttrs((1,), (8,), (3,))), [1, 4, 7])


def test_dynamic_slice_spec_example_clamps() -> None:
    x = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0]], np.int32)
    out = run("dynamic_slice", [x, np.array(-1, np.int64), np.array(3, np.int64)],
              DynamicSliceAttrs((2, 2)))
    np.testing.assert_array_equal(out, [[1, 1], [1, 1]])


def test_dynamic_slice_unsigned_index_not_wrapped() -> None:
    x = np.arange(300, dtype=np.int32)
    out = run("dynamic_slice", [x, np.array(250, np.uint8)], DynamicSliceAttrs((2,)))
    np.testing.assert_array_equal(out, [250, 251])
    big = run("dynamic_slice", [x, np.array(2**64 - 1, np.uint64)], DynamicSliceAttrs((2,)))
    np.testing.assert_array_equal(big, [298, 299])


def test_dynamic_update_slice_spec_example() -> None:
    x = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]], np.int32)
    u = np.ones((2, 2), np.int32)
    out = run("dynamic_update_slice", [x, u, np.array(-1, np.int64), np.array(3, np.int64)])
    np.testing.assert_array_equal(out, np.ones((4, 4)))
    assert x[0, 2] == 0  # the operand is not mutated


def test_concatenate_spec_example() -> None:
    a = np.array([[1, 2], [3, 4], [5, 6]], np.int64)
    b = np.array([[7, 8]], np.int64)
    out = run("concatenate", [a, b], ConcatenateAttrs(0))
    np.testing.assert_array_equal(out, [[1, 2], [3, 4], [5, 6], [7, 8]])


def test_pad_spec_example() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    out = run("pad", [x, np.array(0, np.int32)], PadAttrs((0, 1), (2, 1), (1, 2)))
    np.testing.assert_array_equal(out, [[0, 1, 0, 0, 2, 0, 0, 3, 0],
                                        [0, 0, 0, 0, 0, 0, 0, 0, 0],
                                        [0, 4, 0, 0, 5, 0, 0, 6, 0],
                                        [0, 0, 0, 0, 0, 0, 0, 0, 0],
                                        [0, 0, 0, 0, 0, 0, 0, 0, 0]])


def test_pad_negative_edges_crop_interior_padded() -> None:
    x = np.array([1, 2, 3], np.int32)
    # interior 1: [1 9 2 9 3]; low -2 drops [1 9]; high 1 adds one 9.
    out = run("pad", [x, np.array(9, np.int32)], PadAttrs((-2,), (1,), (1,)))
    np.testing.assert_array_equal(out, [2, 9, 3, 9])
    out = run("pad", [x, np.array(9, np.int32)], PadAttrs((1,), (-3,), (1,)))
    np.testing.assert_array_equal(out, [9, 1, 9])


def test_pad_empty_operand() -> None:
    x = np.zeros((0, 2), np.float32)
    out = run("pad", [x, np.array(7, np.float32)], PadAttrs((1, 0), (1, 0), (3, 0)))
    np.testing.assert_array_equal(out, np.full((2, 2), 7, np.float32))


def test_reverse_spec_example() -> None:
    x = np.array([[1, 2], [3, 4], [5, 6]], np.int32)
    np.testing.assert_array_equal(run("reverse", [x], ReverseAttrs((1,))),
                                  [[2, 1], [4, 3], [6, 5]])


def test_iota_spec_examples() -> None:
    out0 = get_op("iota").evaluate([], IotaAttrs(arr(S32, 4, 5), 0), arr(S32, 4, 5), None)
    np.testing.assert_array_equal(out0, np.repeat(np.arange(4)[:, None], 5, axis=1))
    out1 = get_op("iota").evaluate([], IotaAttrs(arr(S32, 4, 5), 1), arr(S32, 4, 5), None)
    np.testing.assert_array_equal(out1, np.repeat(np.arange(5)[None, :], 4, axis=0))


@pytest.mark.parametrize("et,expected", [
    (ET.BF16, [290, 292, 292, 292, 294, 296, 296, 296, 298]),  # rounded to nearest even
    (ET.U8, [34, 35, 36, 37, 38, 39, 40, 41, 42]),  # 290.. wraps modulo 256
])
def test_iota_conversion(et: ElementType, expected: list[int]) -> None:
    shape = arr(et, 299)
    out = get_op("iota").evaluate([], IotaAttrs(shape, 0), shape, None)
    assert out.dtype == et.dtype
    np.testing.assert_array_equal(out[290:].astype(np.float64), expected)


def test_iota_int4_wraps() -> None:
    shape = arr(ET.S4, 10)
    out = get_op("iota").evaluate([], IotaAttrs(shape, 0), shape, None)
    assert out.dtype == ml_dtypes.int4
    np.testing.assert_array_equal(out.astype(np.int8), [0, 1, 2, 3, 4, 5, 6, 7, -8, -7])
