"""Reductions (reduce, reduce_window, sort), dot_general, convolution, gather and scatter:
random (often invalid) attribute draws are rejected with a label naming the op or evaluate to
exactly the inferred shape; valid integer cases agree with NumPy references."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tests.property.support import (
    add_region,
    check_valid_or_rejected,
    dims,
    element_types,
    random_array,
    run_op,
    scalar_region,
)
from xlapy.builder import XlaBuilder, ops
from xlapy.ops.indexing import GatherAttrs, GatherDimensionNumbers
from xlapy.ops.indexing_scatter import ScatterAttrs, ScatterDimensionNumbers
from xlapy.ops.linalg import DotGeneralAttrs
from xlapy.ops.linalg_conv import ConvDimensionNumbers, ConvolutionAttrs
from xlapy.ops.reduction import ReduceAttrs
from xlapy.ops.reduction_sort import SortAttrs
from xlapy.ops.reduction_window import ReduceWindowAttrs
from xlapy.types import ElementType, Shape

seeds = st.integers(0, 2**16)
small = st.integers(-1, 4)
# Types whose add is exact and order-independent (wrapping integers, pred or).
exact_types = st.sampled_from([ElementType.PRED, ElementType.S8, ElementType.S32,
                               ElementType.U16, ElementType.S4, ElementType.U64])
index_types = st.sampled_from([ElementType.S8, ElementType.S32, ElementType.U32,
                               ElementType.S64, ElementType.U8])


def _subset(draw: st.DrawFn, rank: int) -> tuple[int, ...]:
    return tuple(draw(st.permutations(range(rank)))[:draw(st.integers(0, rank))])


def _maybe_bad(draw: st.DrawFn, values: tuple[int, ...]) -> tuple[int, ...]:
    """Usually the values; sometimes one entry replaced or one appended."""
    k = draw(st.integers(0, 11))
    if k == 0 and values:
        out = list(values)
        out[draw(st.integers(0, len(out) - 1))] = draw(small)
        return tuple(out)
    if k == 1:
        return values + (draw(small),)
    return values


def _wrap_sum(x: np.ndarray, axes: tuple[int, ...], et: ElementType) -> np.ndarray:
    if et.is_pred:
        return np.any(x, axis=axes) if axes else x.copy()
    wide = x.astype(np.int64 if et.is_signed else np.uint64)
    total = np.sum(wide, axis=axes) if axes else wide
    from xlapy.ops.elementwise import wrap_int

    return wrap_int(np.asarray(total), et)


# ---- reduce -----------------------------------------------------------------------------------
@given(element_types, dims(), seeds, st.data())
def test_reduce(et: ElementType, shape: tuple[int, ...], seed: int, data: st.DataObject) -> None:
    x = random_array(et, shape, seed)
    init_t = et if data.draw(st.integers(0, 5)) else data.draw(element_types)
    init = random_array(init_t, () if data.draw(st.integers(0, 5)) else (1,), seed + 1)
    axes = _maybe_bad(data.draw, _subset(data.draw, len(shape)))
    got = check_valid_or_rejected("reduce", [x, init], ReduceAttrs(axes), [add_region(et)])
    if got is not None:
        assert got.dimensions == tuple(d for i, d in enumerate(shape) if i not in axes)


@given(exact_types, dims(), seeds, st.data())
def test_reduce_sum_matches_numpy(et: ElementType, shape: tuple[int, ...], seed: int,
                                  data: st.DataObject) -> None:
    x = random_array(et, shape, seed)
    zero = np.zeros((), et.dtype)
    axes = _subset(data.draw, len(shape))
    _, out = run_op("reduce", [x, zero], ReduceAttrs(axes), [add_region(et)])
    want = _wrap_sum(x, axes, et)
    assert np.array_equal(out.astype(np.float64) if not et.is_pred else out,
                          np.asarray(want).astype(np.float64) if not et.is_pred else want)


# ---- reduce_window ----------------------------------------------------------------------------
@given(element_types, dims(max_rank=3), seeds, st.data())
def test_reduce_window(et: ElementType, shape: tuple[int, ...], seed: int,
                       data: st.DataObject) -> None:
    x = random_array(et, shape, seed)
    init = random_array(et, (), seed + 1)
    rank = len(shape)
    draw = data.draw
    window = _maybe_bad(draw, tuple(draw(st.integers(1, 3)) for _ in range(rank)))
    strides = _maybe_bad(draw, tuple(draw(st.integers(1, 3)) for _ in range(rank)))
    base = _maybe_bad(draw, tuple(draw(st.integers(1, 2)) for _ in range(rank)))
    wdil = _maybe_bad(draw, tuple(draw(st.integers(1, 2)) for _ in range(rank)))
    padding = tuple((draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(rank))
    if draw(st.integers(0, 5)) == 0:
        padding = padding[:-1]
    attrs = ReduceWindowAttrs(window, strides, base, wdil, padding)
    got = check_valid_or_rejected("reduce_window", [x, init], attrs, [add_region(et)])
    if got is not None:
        want = []
        for d, w, s, b, wd, (lo, hi) in zip(shape, window, strides, base, wdil, padding):
            padded = (d - 1) * b + 1 + lo + hi if d else lo + hi
            span = (w - 1) * wd + 1
            want.append(0 if padded < span else (padded - span) // s + 1)
        assert list(got.dimensions) == want


# ---- sort -------------------------------------------------------------------------------------
def _comparator(types: list[ElementType]) -> object:
    """Orders by the first operand (total order for floats and complex)."""
    b = XlaBuilder("cmp")
    params = []
    for i, t in enumerate(types):
        params += [ops.Parameter(b, 2 * i, Shape.array(t, ())),
                   ops.Parameter(b, 2 * i + 1, Shape.array(t, ()))]
    t0 = types[0]
    ct = "TOTALORDER" if t0.is_float or t0.is_complex else None
    ops.Compare(params[0], params[1], (), "LT", ct)
    return b.build().module.entry_computation()


@given(element_types, element_types, dims(), seeds, st.integers(-5, 5), st.booleans(),
       st.booleans())
def test_sort(et: ElementType, et2: ElementType, shape: tuple[int, ...], seed: int,
              dimension: int, two: bool, stable: bool) -> None:
    values = [random_array(et, shape, seed)]
    types = [et]
    if two:
        values.append(random_array(et2, shape, seed + 1))
        types.append(et2)
    got = check_valid_or_rejected("sort", values, SortAttrs(dimension, stable),
                                  [_comparator(types)])
    rank = len(shape)
    assert (got is not None) == (-rank <= dimension < rank) or rank == 0
    if got is not None and et.is_integer and stable and rank:
        out = run_op("sort", values, SortAttrs(dimension, True), [_comparator(types)])[1]
        first = out[0] if two else out
        assert np.array_equal(first, np.sort(values[0], axis=dimension, kind="stable"))


# ---- dot_general ------------------------------------------------------------------------------
@st.composite
def dot_cases(draw: st.DrawFn) -> tuple[list[np.ndarray], DotGeneralAttrs]:
    nb, nc = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    batch = [draw(st.integers(0, 3)) for _ in range(nb)]
    contract = [draw(st.integers(0, 3)) for _ in range(nc)]
    lfree = [draw(st.integers(0, 3)) for _ in range(draw(st.integers(0, 2)))]
    rfree = [draw(st.integers(0, 3)) for _ in range(draw(st.integers(0, 2)))]
    lsizes, rsizes = batch + contract + lfree, batch + contract + rfree
    lperm = draw(st.permutations(range(len(lsizes))))
    rperm = draw(st.permutations(range(len(rsizes))))
    lpos = {k: lperm.index(k) for k in range(len(lsizes))}
    rpos = {k: rperm.index(k) for k in range(len(rsizes))}
    lshape = tuple(lsizes[k] for k in lperm)
    rshape = tuple(rsizes[k] for k in rperm)
    attrs = DotGeneralAttrs(
        _maybe_bad(draw, tuple(lpos[k] for k in range(nb))),
        _maybe_bad(draw, tuple(rpos[k] for k in range(nb))),
        _maybe_bad(draw, tuple(lpos[nb + k] for k in range(nc))),
        _maybe_bad(draw, tuple(rpos[nb + k] for k in range(nc))))
    et = draw(element_types)
    et2 = et if draw(st.integers(0, 5)) else draw(element_types)
    return [random_array(et, lshape, draw(seeds)), random_array(et2, rshape, draw(seeds))], attrs


@given(dot_cases())
def test_dot_general(case: tuple[list[np.ndarray], DotGeneralAttrs]) -> None:
    values, attrs = case
    got = check_valid_or_rejected("dot_general", values, attrs)
    lhs, rhs = values
    if got is not None and lhs.dtype == np.int32 and rhs.dtype == np.int32:
        letters = "abcdefghijklmn"
        lsub, rsub = list(letters[:lhs.ndim]), list(letters[lhs.ndim:lhs.ndim + rhs.ndim])
        for a, b in zip(attrs.lhs_batching_dimensions + attrs.lhs_contracting_dimensions,
                        attrs.rhs_batching_dimensions + attrs.rhs_contracting_dimensions):
            rsub[b] = lsub[a]
        out_sub = [lsub[d] for d in attrs.lhs_batching_dimensions]
        out_sub += [c for i, c in enumerate(lsub) if i not in attrs.lhs_batching_dimensions
                    + attrs.lhs_contracting_dimensions]
        out_sub += [c for i, c in enumerate(rsub) if i not in attrs.rhs_batching_dimensions
                    + attrs.rhs_contracting_dimensions]
        want = np.einsum(f"{''.join(lsub)},{''.join(rsub)}->{''.join(out_sub)}",
                         lhs.astype(np.int64), rhs.astype(np.int64)).astype(np.int32)
        assert np.array_equal(run_op("dot_general", values, attrs)[1], want)


# ---- convolution ------------------------------------------------------------------------------
@st.composite
def conv_cases(draw: st.DrawFn) -> tuple[list[np.ndarray], ConvolutionAttrs]:
    ns = draw(st.integers(0, 2))
    rank = ns + 2
    groups = draw(st.integers(1, 2))
    batch_groups = 1 if groups > 1 else draw(st.integers(1, 2))
    n = draw(st.integers(1, 2)) * batch_groups
    cin = draw(st.integers(1, 2)) * groups
    cout = draw(st.integers(1, 2)) * groups * batch_groups
    spatial = [draw(st.integers(1, 4)) for _ in range(ns)]
    window = [draw(st.integers(1, 3)) for _ in range(ns)]
    lperm = draw(st.permutations(range(rank)))
    kperm = draw(st.permutations(range(rank)))
    operm = draw(st.permutations(range(rank)))
    lsizes = [n, cin] + spatial
    ksizes = [cin // groups, cout] + window
    lshape = tuple(lsizes[lperm.index(k)] for k in range(rank))
    kshape = tuple(ksizes[kperm.index(k)] for k in range(rank))
    dn = ConvDimensionNumbers(lperm[0], lperm[1], tuple(lperm[2:]), kperm[0], kperm[1],
                              tuple(kperm[2:]), operm[0], operm[1], tuple(operm[2:]))
    if draw(st.integers(0, 4)) == 0:  # a broken dimension number
        field = draw(st.sampled_from(["input_batch_dimension", "kernel_output_feature_dimension",
                                      "output_feature_dimension"]))
        dn = ConvDimensionNumbers(**{**dn.__dict__, field: draw(small)})
    attrs = ConvolutionAttrs(
        dn,
        window_strides=_maybe_bad(draw, tuple(draw(st.integers(1, 2)) for _ in range(ns))),
        padding=tuple((draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(ns)),
        lhs_dilation=_maybe_bad(draw, tuple(draw(st.integers(1, 2)) for _ in range(ns))),
        rhs_dilation=_maybe_bad(draw, tuple(draw(st.integers(1, 2)) for _ in range(ns))),
        feature_group_count=groups if draw(st.integers(0, 5)) else draw(small),
        batch_group_count=batch_groups if draw(st.integers(0, 5)) else draw(small))
    et = draw(st.sampled_from([ElementType.F32, ElementType.S32, ElementType.BF16,
                               ElementType.C64, ElementType.S8, ElementType.F64,
                               ElementType.PRED]))
    return [random_array(et, lshape, draw(seeds)), random_array(et, kshape, draw(seeds))], attrs


@given(conv_cases())
def test_convolution(case: tuple[list[np.ndarray], ConvolutionAttrs]) -> None:
    values, attrs = case
    check_valid_or_rejected("convolution", values, attrs)


# ---- gather / scatter -------------------------------------------------------------------------
@st.composite
def gather_cases(draw: st.DrawFn) -> tuple[list[np.ndarray], GatherAttrs]:
    shape = draw(dims(min_rank=1, max_rank=3, min_size=1))
    rank = len(shape)
    start_map = tuple(draw(st.permutations(range(rank)))[:draw(st.integers(1, rank))])
    collapsed = tuple(sorted(d for d in start_map if draw(st.booleans())))
    sizes = tuple(1 if d in collapsed else draw(st.integers(0, shape[d])) for d in range(rank))
    batch = draw(dims(max_rank=2, max_size=3))
    ivd = draw(st.integers(0, len(batch)))
    ishape = batch[:ivd] + (len(start_map),) + batch[ivd:]
    offset_count = rank - len(collapsed)
    out_rank = len(batch) + offset_count
    offset_dims = tuple(sorted(draw(st.permutations(range(out_rank)))[:offset_count]))
    dn = GatherDimensionNumbers(_maybe_bad(draw, offset_dims), _maybe_bad(draw, collapsed),
                                _maybe_bad(draw, start_map),
                                ivd if draw(st.integers(0, 5)) else draw(small))
    attrs = GatherAttrs(dn, _maybe_bad(draw, sizes))
    x = random_array(draw(element_types), shape, draw(seeds))
    idx = random_array(draw(index_types), ishape, draw(seeds))
    return [x, idx], attrs


@given(gather_cases())
def test_gather(case: tuple[list[np.ndarray], GatherAttrs]) -> None:
    values, attrs = case
    check_valid_or_rejected("gather", values, attrs)


@st.composite
def scatter_cases(draw: st.DrawFn) -> tuple[list[np.ndarray], ScatterAttrs, ElementType]:
    shape = draw(dims(min_rank=1, max_rank=3, min_size=1))
    rank = len(shape)
    to_operand = tuple(draw(st.permutations(range(rank)))[:draw(st.integers(1, rank))])
    inserted = tuple(sorted(d for d in to_operand if draw(st.booleans())))
    window = [draw(st.integers(0, shape[d])) for d in range(rank) if d not in inserted]
    batch = draw(dims(max_rank=2, max_size=3))
    ivd = draw(st.integers(0, len(batch)))
    ishape = batch[:ivd] + (len(to_operand),) + batch[ivd:]
    urank = len(batch) + len(window)
    update_window_dims = tuple(sorted(draw(st.permutations(range(urank)))[:len(window)]))
    ushape, bi, wi = [], iter(batch), iter(window)
    for d in range(urank):
        ushape.append(next(wi) if d in update_window_dims else next(bi))
    dn = ScatterDimensionNumbers(_maybe_bad(draw, update_window_dims),
                                 _maybe_bad(draw, inserted), _maybe_bad(draw, to_operand),
                                 ivd if draw(st.integers(0, 5)) else draw(small))
    et = draw(element_types)
    x = random_array(et, shape, draw(seeds))
    idx = random_array(draw(index_types), ishape, draw(seeds))
    if draw(st.integers(0, 5)) == 0:
        ushape = [max(d, 0) for d in _maybe_bad(draw, tuple(ushape))]
    upd = random_array(et, ushape, draw(seeds))
    return [x, idx, upd], ScatterAttrs(dn), et


@given(scatter_cases())
def test_scatter(case: tuple[list[np.ndarray], ScatterAttrs, ElementType]) -> None:
    values, attrs, et = case
    region = scalar_region(et, lambda a, b: b, name="replace")
    check_valid_or_rejected("scatter", values, attrs, [region])
