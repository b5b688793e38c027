"""scatter: shape inference (every constraint label) and evaluation (fast combiners, the
general region path, variadic, out-of-bounds windows) against a per-element reference."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy import ElementType as ET
from xlapy import Shape, ShapeInferenceError, XlaBuilder
from xlapy.builder import ops
from xlapy.ops import infer_shape
from xlapy.ops.indexing_scatter import ScatterAttrs, ScatterDimensionNumbers
from xlapy.types import from_dtype

F32, F64, S32, S64 = ET.F32, ET.F64, ET.S32, ET.S64


def A(et: ET, *dims: int) -> Shape:
    return Shape.array(et, dims)


@dataclass
class FakeRegion:
    parameter_shapes: list[Shape]
    result_shape: Shape
    name: str = "upd"


def region(*ets: ET, result: Shape | None = None) -> FakeRegion:
    params = [Shape.scalar(e) for e in ets] * 2
    res = result if result is not None else (
        Shape.scalar(ets[0]) if len(ets) == 1 else Shape.tuple([Shape.scalar(e) for e in ets]))
    return FakeRegion(params, res)


# ---- shape inference ----------------------------------------------------------------------------
# Base: input 5x3x4x2 with batching dim 0 <-> indices dim 0; index vector dim 2 (size 2) maps
# to input dims (1, 2); dim 1 inserted; updates 5x6x2x2 (windows over input dims 2, 3).
BASE_DN = ScatterDimensionNumbers(update_window_dims=(2, 3), inserted_window_dims=(1,),
                                  scatter_dims_to_operand_dims=(1, 2), index_vector_dim=2,
                                  input_batching_dims=(0,), scatter_indices_batching_dims=(0,))


def infer(inputs: list[Shape] | None = None, indices: Shape | None = None,
          updates: list[Shape] | None = None, reg: FakeRegion | None = None,
          **dn_changes: Any) -> Shape:
    inputs = [A(F32, 5, 3, 4, 2)] if inputs is None else inputs
    indices = A(S64, 5, 6, 2) if indices is None else indices
    updates = [A(F32, 5, 6, 2, 2)] if updates is None else updates
    reg = reg or region(*(s.element_type for s in inputs))
    dn = dataclasses.replace(BASE_DN, **dn_changes)
    return infer_shape("scatter", [*inputs, indices, *updates], ScatterAttrs(dn), [reg])


def test_infer_base_with_batching() -> None:
    assert infer() == A(F32, 5, 3, 4, 2)


def test_infer_variadic_is_a_tuple() -> None:
    out = infer(inputs=[A(F32, 5, 3, 4, 2), A(S32, 5, 3, 4, 2)],
                updates=[A(F32, 5, 6, 2, 2), A(S32, 5, 6, 2, 2)])
    assert out == Shape.tuple([A(F32, 5, 3, 4, 2), A(S32, 5, 3, 4, 2)])


def test_infer_smaller_windows_and_implicit_index_vector_dim() -> None:
    dn = ScatterDimensionNumbers((1,), (0,), (0,), 1)
    assert infer_shape("scatter", [A(F32, 7, 3), A(ET.U8, 4), A(F32, 4, 2)],
                       ScatterAttrs(dn), [region(F32)]) == A(F32, 7, 3)


VIOLATIONS = [
    ("scatter_i1", dict(inputs=[Shape.tuple([])], reg=region(F32))),
    ("scatter_i2", dict(indices=A(F32, 5, 6, 2))),
    ("scatter_c1", dict(inputs=[A(F32, 5, 3, 4, 2), A(F32, 5, 3, 4, 3)],
                        updates=[A(F32, 5, 6, 2, 2)] * 2)),
    ("scatter_c2", dict(inserted_window_dims=())),
    ("scatter_c3", dict(inputs=[A(F32, 5, 3, 4, 2)] * 2,
                        updates=[A(F32, 5, 6, 2, 2), A(F32, 5, 6, 2, 1)])),
    ("scatter_c4", dict(updates=[A(F32, 5, 6, 2, 3)])),
    ("scatter_c4", dict(updates=[A(F32, 5, 7, 2, 2)])),
    ("scatter_c4", dict(updates=[A(F32, 5, 6, 2, 2, 1)])),
    ("scatter_c5", dict(updates=[])),
    ("scatter_c6", dict(updates=[A(F64, 5, 6, 2, 2)])),
    ("scatter_c7", dict(update_window_dims=(3, 2))),
    ("scatter_c8", dict(update_window_dims=(2, 4))),
    ("scatter_c9", dict(inserted_window_dims=(0,))),
    ("scatter_c10", dict(inserted_window_dims=(2, 1))),
    ("scatter_c11", dict(inserted_window_dims=(7,))),
    ("scatter_c12", dict(input_batching_dims=(3, 0), scatter_indices_batching_dims=(0, 1))),
    ("scatter_c13", dict(input_batching_dims=(9,))),
    ("scatter_c14", dict(input_batching_dims=(0, 3), scatter_indices_batching_dims=(0, 0))),
    ("scatter_c15", dict(scatter_indices_batching_dims=(5,))),
    ("scatter_c16", dict(scatter_indices_batching_dims=(2,))),
    ("scatter_c17", dict(input_batching_dims=(0, 3))),
    ("scatter_c18", dict(indices=A(S64, 4, 6, 2))),
    ("scatter_c19", dict(scatter_dims_to_operand_dims=(1,))),
    ("scatter_c20", dict(scatter_dims_to_operand_dims=(0, 2))),
    ("scatter_c21", dict(scatter_dims_to_operand_dims=(1, 7))),
    ("scatter_c22", dict(index_vector_dim=4)),
    ("scatter_c23", dict(reg=region(F64))),
    ("scatter_c23", dict(reg=FakeRegion([Shape.scalar(F32)] * 3, Shape.scalar(F32)))),
    ("scatter_c23", dict(reg=region(F32, result=A(F32, 1)))),
    ("scatter_c23", dict(inputs=[A(F32, 5, 3, 4, 2)] * 2, updates=[A(F32, 5, 6, 2, 2)] * 2,
                         reg=FakeRegion([Shape.scalar(F32)] * 4, Shape.scalar(F32)))),
]


@pytest.mark.parametrize("label,changes", VIOLATIONS,
                         ids=[f"{lab}-{i}" for i, (lab, _) in enumerate(VIOLATIONS)])
def test_infer_violations(label: str, changes: dict[str, Any]) -> None:
    with pytest.raises(ShapeInferenceError, match=f"{label}\\b"):
        infer(**changes)


# ---- evaluation through the interpreter ---------------------------------------------------
CLIENT = xlapy.Client()
Body = Callable[[XlaBuilder, list[Any]], Any]


def _region(body: Body, ets: list[ET]) -> Any:
    n = len(ets)
    b = XlaBuilder("update")
    ps = [ops.Parameter(b, i, Shape.scalar(ets[i % n])) for i in range(2 * n)]
    outs = body(b, ps)
    return b.build(outs if not isinstance(outs, list) else ops.Tuple(b, outs))


def run_scatter(inputs: list[np.ndarray], idx: np.ndarray, updates: list[np.ndarray],
                dn: ScatterDimensionNumbers, body: Body) -> Any:
    b = XlaBuilder("scatter")
    n = len(inputs)
    arrays = [*inputs, idx, *updates]
    ps = [ops.Parameter(b, i, Shape.array(from_dtype(a.dtype), a.shape))
          for i, a in enumerate(arrays)]
    upd = _region(body, [from_dtype(x.dtype) for x in inputs])
    ops.Scatter(ps[:n] if n > 1 else ps[0], ps[n], ps[n + 1:] if n > 1 else ps[n + 1], upd, dn)
    return CLIENT.execute_and_transfer(b.build(), arrays).to_value()


def ref_scatter(inputs: list[np.ndarray], idx: np.ndarray, updates: list[np.ndarray],
                dn: ScatterDimensionNumbers, fn: Callable[..., tuple[Any, ...]]) -> list[Any]:
    """The spec's per-element formula, updates in index order, whole OOB windows skipped."""
    outs = [x.copy() for x in inputs]
    rank, ivd = inputs[0].ndim, dn.index_vector_dim
    usd = [d for d in range(updates[0].ndim) if d not in dn.update_window_dims]
    window = [d for d in range(rank)
              if d not in dn.inserted_window_dims and d not in dn.input_batching_dims]
    wsize = [1] * rank
    for d, u in zip(window, dn.update_window_dims):
        wsize[d] = updates[0].shape[u]
    scatter_shape = [updates[0].shape[d] for d in usd]
    win_shape = [updates[0].shape[d] for d in dn.update_window_dims]
    for si in itertools.product(*map(range, scatter_shape)):
        if ivd < idx.ndim:
            sl: list[Any] = list(si)
            sl.insert(ivd, slice(None))
            svec = [int(v) for v in idx[tuple(sl)]]
        else:
            svec = [int(idx[si])]
        start = [0] * rank
        for k, d in enumerate(dn.scatter_dims_to_operand_dims):
            start[d] = svec[k]
        for o, s in zip(dn.input_batching_dims, dn.scatter_indices_batching_dims):
            start[o] = si[s if s < ivd else s - 1]
        if any(not 0 <= start[d] <= inputs[0].shape[d] - wsize[d] for d in range(rank)):
            continue
        for wi in itertools.product(*map(range, win_shape)):
            full = list(start)
            for d, w in zip(window, wi):
                full[d] += w
            ui: list[int] = [0] * updates[0].ndim
            for d, s in zip(usd, si):
                ui[d] = s
            for d, w in zip(dn.update_window_dims, wi):
                ui[d] = w
            res = fn(*[o[tuple(full)] for o in outs], *[u[tuple(ui)] for u in updates])
            for o, r in zip(outs, res):
                o[tuple(full)] = r
    return outs


SPEC_INPUT = np.arange(1, 25, dtype=np.int32).reshape(3, 4, 2)
SPEC_IDX = np.array([[[0, 2], [1, 0], [2, 1]], [[0, 1], [1, 0], [2, 0]]])
SPEC_DN = ScatterDimensionNumbers((2, 3), (0,), (1, 0), 2)


def test_spec_example() -> None:
    out = run_scatter([SPEC_INPUT], SPEC_IDX, [np.ones((2, 3, 2, 2), np.int32)], SPEC_DN,
                      lambda b, p: ops.Add(p[0], p[1]))
    assert out.tolist() == [[[1, 2], [5, 6], [8, 9], [8, 9]],
                            [[10, 11], [12, 13], [14, 15], [16, 17]],
                            [[18, 19], [20, 21], [21, 22], [23, 24]]]


# (builder body, python reference) per recognized combiner, and general ones.
COMBINERS: dict[str, tuple[Body, Callable[..., Any]]] = {
    "add": (lambda b, p: ops.Add(p[1], p[0]), lambda c, u: (c + u,)),
    "mul": (lambda b, p: ops.Mul(p[0], p[1]), lambda c, u: (c * u,)),
    "sub": (lambda b, p: ops.Sub(p[0], p[1]), lambda c, u: (c - u,)),
    "max": (lambda b, p: b.add_op("maximum", [p[0], p[1]]), lambda c, u: (max(c, u),)),
    "min": (lambda b, p: b.add_op("minimum", [p[1], p[0]]), lambda c, u: (min(c, u),)),
    "and": (lambda b, p: ops.And(p[0], p[1]), lambda c, u: (c & u,)),
    "or": (lambda b, p: ops.Or(p[0], p[1]), lambda c, u: (c | u,)),
    "xor": (lambda b, p: ops.Xor(p[1], p[0]), lambda c, u: (c ^ u,)),
    "replace": (lambda b, p: p[1], lambda c, u: (u,)),
    "keep": (lambda b, p: p[0], lambda c, u: (c,)),
    # general path: not a single recognized op
    "rsub": (lambda b, p: ops.Sub(p[1], p[0]), lambda c, u: (u - c,)),
    "2c+u": (lambda b, p: ops.Add(ops.Add(p[0], p[0]), p[1]), lambda c, u: (2 * c + u,)),
}


@pytest.mark.parametrize("kind", list(COMBINERS))
def test_combiners_with_duplicates_and_oob(kind: str) -> None:
    rng = np.random.default_rng(len(kind))
    x = rng.integers(-50, 50, size=(6, 4)).astype(np.int32)
    idx = np.array([[1, 0], [1, 0], [5, 3], [-1, 0], [2, 3], [1, 0], [0, 0]])  # dup, OOB
    upd = rng.integers(-50, 50, size=(7, 2)).astype(np.int32)
    dn = ScatterDimensionNumbers((1,), (0,), (0, 1), 1)  # windows of 1x2 along dim 1
    body, fn = COMBINERS[kind]
    out = run_scatter([x], idx, [upd], dn, body)
    (want,) = ref_scatter([x], idx, [upd], dn, lambda c, u: tuple(np.int32(v) for v in fn(c, u)))
    np.testing.assert_array_equal(out, want)
    assert out.dtype == np.int32


@pytest.mark.parametrize("kind", ["add", "mul", "max", "min", "and", "or", "xor", "replace"])
def test_bool_combiners(kind: str) -> None:
    rng = np.random.default_rng(3)
    x = rng.random((5,)) < 0.5
    idx = np.array([[0], [0], [3], [3], [4], [7]])
    upd = rng.random((6,)) < 0.5
    dn = ScatterDimensionNumbers((), (0,), (0,), 1)
    body = COMBINERS[kind][0]
    py = {"add": lambda c, u: c or u, "mul": lambda c, u: c and u, "max": lambda c, u: c or u,
          "min": lambda c, u: c and u, "and": lambda c, u: c and u, "or": lambda c, u: c or u,
          "xor": lambda c, u: c != u, "replace": lambda c, u: u}[kind]
    out = run_scatter([x], idx, [upd], dn, body)
    (want,) = ref_scatter([x], idx, [upd], dn, lambda c, u: (py(bool(c), bool(u)),))
    np.testing.assert_array_equal(out, want)


def test_batching_dims_and_index_vector_dim_first() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 3, 4, 2)).astype(np.float32)
    idx = np.moveaxis(rng.integers(-1, 4, size=(5, 6, 2)), -1, 0)  # index vector dim 0
    upd = rng.standard_normal((5, 6, 2, 2)).astype(np.float32)
    dn = dataclasses.replace(BASE_DN, index_vector_dim=0, scatter_indices_batching_dims=(1,))
    out = run_scatter([x], idx, [upd], dn, lambda b, p: ops.Add(p[0], p[1]))
    (want,) = ref_scatter([x], idx, [upd], dn, lambda c, u: (np.float32(c + u),))
    np.testing.assert_array_equal(out, want)


def test_variadic_fast_and_general() -> None:
    """Independent add/max run on the fast path; a coupled arg-min region on the general one."""
    rng = np.random.default_rng(6)
    v = rng.integers(0, 9, size=(4,)).astype(np.float64)
    i = np.arange(4, dtype=np.int32)
    idx = rng.integers(0, 4, size=(12, 1))
    uv = rng.integers(0, 9, size=(12,)).astype(np.float64)
    ui = np.arange(10, 22, dtype=np.int32)
    dn = ScatterDimensionNumbers((), (0,), (0,), 1)
    out = run_scatter([v, i], idx, [uv, ui], dn,
                      lambda b, p: [ops.Add(p[0], p[2]), b.add_op("maximum", [p[1], p[3]])])
    want = ref_scatter([v, i], idx, [uv, ui], dn, lambda a, b, c, d: (a + c, max(b, d)))
    assert isinstance(out, tuple) and len(out) == 2
    for o, w in zip(out, want):
        np.testing.assert_array_equal(o, w)

    def argmin(b: XlaBuilder, p: list[Any]) -> list[Any]:
        take = ops.Lt(p[2], p[0])
        return [ops.Select(take, p[2], p[0]), ops.Select(take, p[3], p[1])]

    out = run_scatter([v, i], idx, [uv, ui], dn, argmin)
    want = ref_scatter([v, i], idx, [uv, ui], dn,
                       lambda a, b, c, d: (c, d) if c < a else (a, b))
    for o, w in zip(out, want):
        np.testing.assert_array_equal(o, w)


def test_huge_unsigned_indices_are_out_of_bounds() -> None:
    x = np.zeros(4, np.int32)
    idx = np.array([[2**64 - 1], [2**63], [1]], np.uint64)
    out = run_scatter([x], idx, [np.array([5, 6, 7], np.int32)],
                      ScatterDimensionNumbers((), (0,), (0,), 1),
                      lambda b, p: ops.Add(p[0], p[1]))
    assert out.tolist() == [0, 7, 0, 0]


def test_empty_updates_and_zero_size_windows_leave_input() -> None:
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    dn = ScatterDimensionNumbers((1,), (0,), (0,), 1)
    add = lambda b, p: ops.Add(p[0], p[1])  # noqa: E731
    out = run_scatter([x], np.zeros((0, 1), np.int32), [np.zeros((0, 2), np.float32)], dn, add)
    np.testing.assert_array_equal(out, x)
    out = run_scatter([x], np.zeros((2, 1), np.int32), [np.zeros((2, 0), np.float32)], dn, add)
    np.testing.assert_array_equal(out, x)


def test_input_is_not_modified() -> None:
    x = np.zeros(3, np.int32)
    run_scatter([x], np.array([[1]]), [np.array([4], np.int32)],
                ScatterDimensionNumbers((), (0,), (0,), 1), lambda b, p: ops.Add(p[0], p[1]))
    assert x.tolist() == [0, 0, 0]


@pytest.mark.parametrize("kind", list(COMBINERS))
def test_recognized_combiners_take_the_fast_path(kind: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Recognized regions never call the region per element; others never use a ufunc."""
    from xlapy.ops import indexing_scatter

    general = kind in ("rsub", "2c+u")

    def forbidden(*args: Any) -> None:
        raise AssertionError("wrong path")

    monkeypatch.setattr(indexing_scatter, "_apply_fast" if general else "_apply_region",
                        forbidden)
    x = np.arange(4, dtype=np.int32)
    out = run_scatter([x], np.array([[1], [1]]), [np.array([3, 5], np.int32)],
                      ScatterDimensionNumbers((), (0,), (0,), 1), COMBINERS[kind][0])
    (want,) = ref_scatter([x], np.array([[1], [1]]), [np.array([3, 5], np.int32)],
                          ScatterDimensionNumbers((), (0,), (0,), 1),
                          lambda c, u: tuple(np.int32(v) for v in COMBINERS[kind][1](c, u)))
    np.testing.assert_array_equal(out, want)
