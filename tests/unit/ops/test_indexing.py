"""gather: shape inference (every constraint label) and evaluation against a per-element
reference written straight from the spec's formulas."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import pytest

from xlapy import ElementType as ET
from xlapy import Shape, ShapeInferenceError
from xlapy.ops import get_op, infer_shape
from xlapy.ops.indexing import GatherAttrs, GatherDimensionNumbers

F32, S32, S64 = ET.F32, ET.S32, ET.S64


def A(et: ET, *dims: int) -> Shape:
    return Shape.array(et, dims)


# ---- shape inference ----------------------------------------------------------------------------
# Base: operand 5x3x4x2 with batching dim 0 <-> start_indices dim 0; index vector dim 2 (size 2)
# maps to operand dims (1, 2); dim 1 collapsed; result 5x6x2x2.
BASE_DN = GatherDimensionNumbers(offset_dims=(2, 3), collapsed_slice_dims=(1,),
                                 start_index_map=(1, 2), index_vector_dim=2,
                                 operand_batching_dims=(0,), start_indices_batching_dims=(0,))
BASE = dict(operand=A(F32, 5, 3, 4, 2), start=A(S64, 5, 6, 2), dn=BASE_DN, sizes=(1, 1, 2, 2))


def infer(**changes: Any) -> Shape:
    cfg = dict(BASE)
    dn_changes = {k: v for k, v in changes.items() if k in BASE_DN.__dataclass_fields__}
    cfg.update({k: v for k, v in changes.items() if k not in dn_changes})
    dn = dataclasses.replace(cfg["dn"], **dn_changes)
    return infer_shape("gather", [cfg["operand"], cfg["start"]],
                       GatherAttrs(dn, tuple(cfg["sizes"])))


def test_infer_base_with_batching() -> None:
    assert infer() == A(F32, 5, 6, 2, 2)


def test_infer_offset_dims_interleave_with_batch_dims() -> None:
    assert infer(offset_dims=(0, 2)) == A(F32, 2, 5, 2, 6)


def test_infer_spec_example() -> None:
    dn = GatherDimensionNumbers((2, 3), (0,), (1, 0), 2)
    assert infer_shape("gather", [A(S32, 3, 4, 2), A(S64, 2, 3, 2)],
                       GatherAttrs(dn, (1, 2, 2))) == A(S32, 2, 3, 2, 2)


def test_infer_implicit_index_vector_dim() -> None:
    dn = GatherDimensionNumbers((1,), (0,), (0,), 2)
    assert infer_shape("gather", [A(F32, 7, 3), A(ET.U8, 4, 5)],
                       GatherAttrs(dn, (1, 3))) == A(F32, 4, 3, 5)


def test_infer_index_vector_dim_first() -> None:
    assert infer(start=A(S64, 2, 5, 6), index_vector_dim=0,
                 start_indices_batching_dims=(1,)) == A(F32, 5, 6, 2, 2)


VIOLATIONS = [
    ("gather_i1", dict(operand=Shape.tuple([A(F32, 5)]))),
    ("gather_i2", dict(start=A(F32, 5, 6, 2))),
    ("gather_c1", dict(collapsed_slice_dims=())),
    ("gather_c2", dict(index_vector_dim=4)),
    ("gather_c2", dict(index_vector_dim=-1)),
    ("gather_c3", dict(start_index_map=(1,))),
    ("gather_c4", dict(offset_dims=(3, 2))),
    ("gather_c4", dict(offset_dims=(2, 2))),
    ("gather_c5", dict(offset_dims=(2, 4))),
    ("gather_c6", dict(collapsed_slice_dims=(0,))),
    ("gather_c7", dict(collapsed_slice_dims=(3, 1))),
    ("gather_c8", dict(collapsed_slice_dims=(7,))),
    ("gather_c9", dict(sizes=(1, 2, 2, 2))),
    ("gather_c10", dict(operand_batching_dims=(3, 0), start_indices_batching_dims=(0, 1))),
    ("gather_c11", dict(operand_batching_dims=(9,))),
    ("gather_c12", dict(sizes=(2, 1, 2, 2))),
    ("gather_c13", dict(operand_batching_dims=(0, 3), start_indices_batching_dims=(0, 0))),
    ("gather_c14", dict(start_indices_batching_dims=(5,))),
    ("gather_c15", dict(start_indices_batching_dims=(2,))),
    ("gather_c16", dict(operand_batching_dims=(0, 3))),
    ("gather_c17", dict(start=A(S64, 4, 6, 2))),
    ("gather_c18", dict(start_index_map=(0, 2))),
    ("gather_c19", dict(start_index_map=(1, 7))),
    ("gather_c20", dict(sizes=(1, 1, 2))),
    ("gather_c21", dict(sizes=(1, 1, 5, 2))),
    ("gather_c21", dict(sizes=(1, 1, -1, 2))),
]


@pytest.mark.parametrize("label,changes", VIOLATIONS,
                         ids=[f"{lab}-{i}" for i, (lab, _) in enumerate(VIOLATIONS)])
def test_infer_violations(label: str, changes: dict[str, Any]) -> None:
    with pytest.raises(ShapeInferenceError, match=f"{label}\\b"):
        infer(**changes)


def test_error_lists_operand_shapes() -> None:
    with pytest.raises(ShapeInferenceError, match=r"got f32\[5,3,4,2\]"):
        infer(index_vector_dim=9)


# ---- evaluation ----------------------------------------------------------------------------------
def ref_gather(operand: np.ndarray, start: np.ndarray, dn: GatherDimensionNumbers,
               sizes: tuple[int, ...], result: Shape) -> np.ndarray:
    """The spec's per-element formula, with XLA's clamping of the start index."""
    out = np.zeros(result.dimensions, operand.dtype)
    batch_dims = [d for d in range(result.rank) if d not in dn.offset_dims]
    ivd = dn.index_vector_dim
    for ri in itertools.product(*map(range, result.dimensions)):
        bi = [ri[d] for d in batch_dims]
        if ivd < start.ndim:
            sl: list[Any] = list(bi)
            sl.insert(ivd, slice(None))
            svec = start[tuple(sl)].astype(np.int64)
        else:
            svec = np.array([start[tuple(bi)]], np.int64)
        full = [0] * operand.ndim
        for k, d in enumerate(dn.start_index_map):
            full[d] = int(np.clip(svec[k], 0, operand.shape[d] - sizes[d]))
        for o, s in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
            full[o] = bi[s if s < ivd else s - 1]
        offs = iter(ri[d] for d in dn.offset_dims)
        for d in range(operand.ndim):
            if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims:
                full[d] += next(offs)
        out[ri] = operand[tuple(full)]
    return out


def run_gather(operand: np.ndarray, start: np.ndarray, dn: GatherDimensionNumbers,
               sizes: tuple[int, ...]) -> tuple[np.ndarray, Shape]:
    op = get_op("gather")
    attrs = GatherAttrs(dn, sizes)
    shape = infer_shape("gather", [Shape.array(ET.S32 if operand.dtype == np.int32 else F32,
                                               operand.shape),
                                   Shape.array(S64, start.shape)], attrs)
    return op.evaluate([operand, start.astype(np.int64)], attrs, shape, None), shape


def test_evaluate_spec_example() -> None:
    operand = np.arange(1, 25, dtype=np.int32).reshape(3, 4, 2)
    start = np.array([[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 2]]])
    out, _ = run_gather(operand, start, GatherDimensionNumbers((2, 3), (0,), (1, 0), 2),
                        (1, 2, 2))
    assert out.tolist() == [[[[1, 2], [3, 4]], [[3, 4], [5, 6]], [[13, 14], [15, 16]]],
                            [[[9, 10], [11, 12]], [[11, 12], [13, 14]], [[17, 18], [19, 20]]]]


CASES = [
    (BASE_DN, (1, 1, 2, 2), (5, 6, 2)),
    (dataclasses.replace(BASE_DN, offset_dims=(0, 3)), (1, 1, 3, 1), (5, 6, 2)),
    (GatherDimensionNumbers((1,), (0,), (0,), 2), (1, 3), (4, 5)),
    (GatherDimensionNumbers((0, 1, 2, 4), (), (3, 1), 0), (2, 2, 3, 1), (2, 3)),
    (GatherDimensionNumbers((), (1, 2, 3), (3, 1, 2), 1, (0,), (0,)), (1, 1, 1, 1), (5, 3)),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_evaluate_matches_reference(case: int) -> None:
    dn, sizes, start_shape = CASES[case]
    rng = np.random.default_rng(case)
    operand = rng.standard_normal((5, 3, 4, 2)).astype(np.float32)
    if len(sizes) == 2:
        operand = operand[:, :, 0, 0].copy()  # rank-2 case
    start = rng.integers(-3, 7, size=start_shape)
    out, shape = run_gather(operand, start, dn, sizes)
    np.testing.assert_array_equal(out, ref_gather(operand, start, dn, sizes, shape))
    assert out.dtype == operand.dtype and out.shape == shape.dimensions


def test_clamps_huge_unsigned_indices_to_the_end() -> None:
    op = get_op("gather")
    attrs = GatherAttrs(GatherDimensionNumbers((1,), (0,), (0,), 1), (1, 2))
    shape = infer_shape("gather", [A(F32, 4, 2), A(ET.U64, 2, 1)], attrs)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    idx = np.array([[2**64 - 1], [1]], dtype=np.uint64)
    assert op.evaluate([x, idx], attrs, shape, None).tolist() == [[6, 7], [2, 3]]


def test_zero_size_slices_and_empty_indices() -> None:
    op = get_op("gather")
    attrs = GatherAttrs(GatherDimensionNumbers((1,), (0,), (0,), 1), (1, 0))
    shape = infer_shape("gather", [A(F32, 4, 2), A(S32, 3, 1)], attrs)
    out = op.evaluate([np.ones((4, 2), np.float32), np.zeros((3, 1), np.int32)], attrs, shape,
                      None)
    assert out.shape == (3, 0) and out.dtype == np.float32
    attrs = GatherAttrs(GatherDimensionNumbers((1,), (0,), (0,), 1), (1, 2))
    shape = infer_shape("gather", [A(F32, 4, 2), A(S32, 0, 1)], attrs)
    out = op.evaluate([np.ones((4, 2), np.float32), np.zeros((0, 1), np.int32)], attrs, shape,
                      None)
    assert out.shape == (0, 2)


def test_scalar_result_is_zero_dimensional() -> None:
    op = get_op("gather")
    attrs = GatherAttrs(GatherDimensionNumbers((), (0, 1), (1, 0), 0), (1, 1))
    shape = infer_shape("gather", [A(S32, 3, 4), A(S32, 2)], attrs)
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = op.evaluate([x, np.array([3, 2], np.int32)], attrs, shape, None)
    assert out.shape == () and int(out) == 11
