"""The hot shape rules (broadcast, reshape, transpose, slice, concatenate, dot_general,
compare, select, reduce regions) build their messages only when they fail (`if not ok:
fail(...)`, not `check(ok, ..., f"...")`, which formatted them on every call): the labels and
messages are the ones they gave before, word for word."""

from __future__ import annotations

from typing import Any

import pytest

from xlapy.errors import ShapeInferenceError
from xlapy.ops.attrs import ComparisonDirection, ComparisonType
from xlapy.ops.base import NO_ATTRS, infer_shape
from xlapy.ops.elementwise_compare import CompareAttrs
from xlapy.ops.linalg import DotGeneralAttrs
from xlapy.ops.shape import (
    BroadcastInDimAttrs,
    ConcatenateAttrs,
    ReshapeAttrs,
    SliceAttrs,
    TransposeAttrs,
)
from xlapy.types import ElementType as E
from xlapy.types import Shape

F = E.F32


def a(et: E, *d: int) -> Shape:
    return Shape.array(et, d)


CASES: list[tuple[str, list[Shape], Any, str]] = [
    ("broadcast_in_dim", [a(F, 3)], BroadcastInDimAttrs(shape=(2, 3), broadcast_dimensions=(0, 1)),
     'broadcast_in_dim_c2: broadcast_dimensions [0, 1] has 2 entries but the operand has '
     'rank 1; got f32[3]'),
    ("broadcast_in_dim", [a(F, 3)], BroadcastInDimAttrs(shape=(2, 3), broadcast_dimensions=(5,)),
     'broadcast_in_dim_c3: broadcast_dimensions[0] = 5 is out of range for result rank 2; '
     'got f32[3]'),
    ("broadcast_in_dim", [a(F, 3)], BroadcastInDimAttrs(shape=(2, 3), broadcast_dimensions=(0,)),
     'broadcast_in_dim_c5: operand dimension 0 has size 3 but result dimension 0 has size 2; '
     'got f32[3]'),
    ("broadcast_in_dim", [Shape.token()],
     BroadcastInDimAttrs(shape=(2, 3), broadcast_dimensions=(0,)),
     'broadcast_in_dim_c1: operand token[] is not an array; got token[]'),
    ("reshape", [a(F, 3)], ReshapeAttrs((2, 2)),
     'reshape_c2: result shape [2, 2] has 4 elements but the operand has 3; got f32[3]'),
    ("transpose", [a(F, 3, 2)], TransposeAttrs((0, 0)),
     'transpose_c2: permutation [0, 0] is not a permutation of [0, 2); got f32[3,2]'),
    ("slice", [a(F, 3, 4)], SliceAttrs((0, 0), (3, 5), (1, 1)),
     'slice_c3: dimension 1: need 0 <= start 0 <= limit 5 <= size 4; got f32[3,4]'),
    ("slice", [a(F, 3, 4)], SliceAttrs((0,), (3,), (1,)),
     "slice_c2: start_indices [0], limit_indices [3] and strides [1] must each have 2 "
     "entries (the operand's rank); got f32[3,4]"),
    ("concatenate", [a(F, 3), a(E.S32, 3)], ConcatenateAttrs(0),
     'concatenate_c1: operand 1 has element type s32 but operand 0 has f32; got f32[3], s32[3]'),
    ("dot_general", [a(F, 2, 3), a(F, 4, 5)],
     DotGeneralAttrs(lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,)),
     'dot_general_c11: lhs contracting dimension 1 has size 3 but rhs contracting dimension '
     '0 has size 4; got f32[2,3], f32[4,5]'),
    ("dot_general", [a(F, 2, 3), a(F, 3, 5)],
     DotGeneralAttrs(lhs_contracting_dimensions=(1, 0), rhs_contracting_dimensions=(0,)),
     'dot_general_c3: lhs_contracting_dimensions [1, 0] and rhs_contracting_dimensions [0] '
     'differ in size; got f32[2,3], f32[3,5]'),
    ("dot_general", [a(F, 2, 3), a(E.S32, 3, 5)],
     DotGeneralAttrs(lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,),
                     result_element_type=E.S32),
     'dot_general_c1: lhs element type f32 and rhs element type s32 are of different kinds '
     'and the result type s32 holds neither; got f32[2,3], s32[3,5]'),
    ("compare", [a(F, 2), a(F, 2)], CompareAttrs(ComparisonDirection.LT, ComparisonType.SIGNED),
     'compare_c3: compare_type SIGNED does not fit element type f32; got f32[2], f32[2]'),
    ("select", [a(F, 2), a(F, 2), a(F, 2)], None,
     'select_c1: pred must be a tensor of i1, got f32[2]; got f32[2], f32[2], f32[2]'),
]


@pytest.mark.parametrize(("name", "operands", "attrs", "message"), CASES)
def test_messages_word_for_word(name: str, operands: list[Shape], attrs: Any,
                                message: str) -> None:
    with pytest.raises(ShapeInferenceError) as e:
        infer_shape(name, operands, NO_ATTRS if attrs is None else attrs)
    assert str(e.value) == message


def test_arity_and_region_count_messages() -> None:
    with pytest.raises(ShapeInferenceError) as e:
        infer_shape("negate", [a(F, 2), a(F, 2)])
    assert str(e.value) == "negate_arity: expects 1 operand(s), got 2; got f32[2], f32[2]"
    with pytest.raises(ShapeInferenceError) as e:
        infer_shape("negate", [a(F, 2)], NO_ATTRS, [object()])  # type: ignore[list-item]
    assert str(e.value) == ("negate_regions: expects 0 called computation(s), got 1; "
                            "got f32[2]")
