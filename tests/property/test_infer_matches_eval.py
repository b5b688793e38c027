"""Shape ops: inferred shape == evaluated shape over every element type, values agree with a
NumPy reference, and invalid attribute draws raise ShapeInferenceError labelled with the op.

Each strategy draws either a valid case (built to satisfy the spec's constraints: it must be
accepted) or a mutated one (any outcome allowed, but only through a labelled error)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tests.property.support import (
    check_valid_or_rejected,
    dims,
    element_types,
    random_array,
    run_op,
)
from xlapy.ops.shape import (
    BroadcastInDimAttrs,
    ConcatenateAttrs,
    IotaAttrs,
    PadAttrs,
    ReshapeAttrs,
    ReverseAttrs,
    SliceAttrs,
    TransposeAttrs,
)
from xlapy.ops.shape_dynamic import DynamicSliceAttrs
from xlapy.types import ARRAY_TYPES, ElementType, Shape

seeds = st.integers(0, 2**16)
loose_int = st.integers(-2, 6)


def same_bits(a: np.ndarray, b: np.ndarray) -> None:
    """Exact equality, NaNs and signed zeros included."""
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    assert np.array(a, order="C").tobytes() == np.array(b, order="C").tobytes()


def _mutate(draw: st.DrawFn, values: tuple[int, ...]) -> tuple[int, ...]:
    """One random change: an entry replaced, one dropped, or one added."""
    how = draw(st.sampled_from(["replace", "drop", "add"]))
    out = list(values)
    if how == "replace" and out:
        out[draw(st.integers(0, len(out) - 1))] = draw(loose_int)
    elif how == "drop" and out:
        out.pop(draw(st.integers(0, len(out) - 1)))
    else:
        out.insert(draw(st.integers(0, len(out))), draw(loose_int))
    return tuple(out)


# ---- reshape ----------------------------------------------------------------------------------
@st.composite
def reshape_cases(draw: st.DrawFn) -> tuple[np.ndarray, Any, bool]:
    shape = draw(dims())
    x = random_array(draw(element_types), shape, draw(seeds))
    # A valid result: the operand's dims shuffled, adjacent ones merged, ones inserted.
    parts = list(draw(st.permutations(shape)))
    while len(parts) >= 2 and draw(st.booleans()):
        i = draw(st.integers(0, len(parts) - 2))
        parts[i:i + 2] = [parts[i] * parts[i + 1]]
    if draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), 1)
    new = tuple(parts)
    valid = draw(st.integers(0, 3)) > 0
    if not valid:
        new = _mutate(draw, new)
    return x, ReshapeAttrs(new), valid


@given(reshape_cases())
def test_reshape(case: tuple[np.ndarray, Any, bool]) -> None:
    x, attrs, valid = case
    got = check_valid_or_rejected("reshape", [x], attrs)
    if valid:
        assert got is not None
        same_bits(run_op("reshape", [x], attrs)[1], x.reshape(attrs.shape))


# ---- transpose --------------------------------------------------------------------------------
@st.composite
def transpose_cases(draw: st.DrawFn) -> tuple[np.ndarray, Any, bool]:
    shape = draw(dims())
    x = random_array(draw(element_types), shape, draw(seeds))
    perm = tuple(draw(st.permutations(range(len(shape)))))
    valid = draw(st.integers(0, 3)) > 0
    if not valid:
        perm = _mutate(draw, perm)
    return x, TransposeAttrs(perm), valid


@given(transpose_cases())
def test_transpose(case: tuple[np.ndarray, Any, bool]) -> None:
    x, attrs, valid = case
    got = check_valid_or_rejected("transpose", [x], attrs)
    if valid:
        assert got is not None
        same_bits(run_op("transpose", [x], attrs)[1],
                  np.array(np.transpose(x, attrs.permutation)))


# ---- slice ------------------------------------------------------------------------------------
@st.composite
def slice_cases(draw: st.DrawFn) -> tuple[np.ndarray, Any, bool]:
    shape = draw(dims())
    x = random_array(draw(element_types), shape, draw(seeds))
    start, limit, strides = [], [], []
    for d in shape:
        a = draw(st.integers(0, d))
        start.append(a)
        limit.append(draw(st.integers(a, d)))
        strides.append(draw(st.integers(1, 3)))
    fields = [tuple(start), tuple(limit), tuple(strides)]
    valid = draw(st.integers(0, 3)) > 0
    if not valid:
        k = draw(st.integers(0, 2))
        fields[k] = _mutate(draw, fields[k])
    return x, SliceAttrs(*fields), valid


@given(slice_cases())
def test_slice(case: tuple[np.ndarray, Any, bool]) -> None:
    x, attrs, valid = case
    got = check_valid_or_rejected("slice", [x], attrs)
    if valid:
        assert got is not None
        index = tuple(slice(*t) for t in zip(attrs.start_indices, attrs.limit_indices,
                                              attrs.strides))
        same_bits(run_op("slice", [x], attrs)[1], np.array(x[index]))


# ---- dynamic_slice / dynamic_update_slice -----------------------------------------------------
index_types = st.sampled_from([t for t in ARRAY_TYPES if t.is_integer])


def _indices(draw: st.DrawFn, rank: int, valid: bool) -> list[np.ndarray]:
    et = draw(index_types)
    out = [random_array(et, (), draw(seeds)) for _ in range(rank)]
    if not valid and draw(st.booleans()):
        how = draw(st.sampled_from(["count", "type", "rank", "mixed"]))
        if how == "count":
            out = out[:-1] if out and draw(st.booleans()) else out + [out[0] if out else
                                                                     np.zeros((), et.dtype)]
        elif how == "type" and out:
            out[0] = random_array(draw(element_types), (), 0)
        elif how == "rank" and out:
            out[0] = np.zeros((1,), out[0].dtype)
        elif out:
            out[-1] = random_array(draw(index_types), (), 1)
    return out


def _clamped(indices: list[np.ndarray], shape: tuple[int, ...],
             sizes: tuple[int, ...]) -> list[int]:
    return [min(max(int(i), 0), d - s) for i, d, s in zip(indices, shape, sizes)]


@st.composite
def dynamic_slice_cases(draw: st.DrawFn) -> tuple[list[np.ndarray], Any, bool]:
    shape = draw(dims())
    x = random_array(draw(element_types), shape, draw(seeds))
    sizes = tuple(draw(st.integers(0, d)) for d in shape)
    valid = draw(st.integers(0, 3)) > 0
    if not valid and draw(st.booleans()):
        sizes = _mutate(draw, sizes)
    return [x, *_indices(draw, len(shape), valid)], DynamicSliceAttrs(sizes), valid


@given(dynamic_slice_cases())
def test_dynamic_slice(case: tuple[list[np.ndarray], Any, bool]) -> None:
    values, attrs, valid = case
    got = check_valid_or_rejected("dynamic_slice", values, attrs)
    if valid:
        assert got is not None
        x, *idx = values
        starts = _clamped(idx, x.shape, attrs.slice_sizes)
        want = x[tuple(slice(s, s + n) for s, n in zip(starts, attrs.slice_sizes))]
        same_bits(run_op("dynamic_slice", values, attrs)[1], np.array(want))


@st.composite
def dynamic_update_slice_cases(draw: st.DrawFn) -> tuple[list[np.ndarray], bool]:
    shape = draw(dims())
    et = draw(element_types)
    x = random_array(et, shape, draw(seeds))
    ushape = tuple(draw(st.integers(0, d)) for d in shape)
    valid = draw(st.integers(0, 3)) > 0
    uet = et
    if not valid and draw(st.booleans()):
        if draw(st.booleans()):
            ushape = _mutate(draw, ushape)
            ushape = tuple(max(d, 0) for d in ushape)
        else:
            uet = draw(element_types)
    update = random_array(uet, ushape, draw(seeds))
    return [x, update, *_indices(draw, len(shape), valid)], valid


@given(dynamic_update_slice_cases())
def test_dynamic_update_slice(case: tuple[list[np.ndarray], bool]) -> None:
    values, valid = case
    got = check_valid_or_rejected("dynamic_update_slice", values, None)
    if valid:
        assert got is not None
        x, update, *idx = values
        starts = _clamped(idx, x.shape, update.shape)
        want = x.copy()
        want[tuple(slice(s, s + n) for s, n in zip(starts, update.shape))] = update
        same_bits(run_op("dynamic_update_slice", values)[1], want)


# ---- concatenate ------------------------------------------------------------------------------
@st.composite
def concatenate_cases(draw: st.DrawFn) -> tuple[list[np.ndarray], Any, bool]:
    shape = draw(dims(min_rank=1))
    et = draw(element_types)
    dim = draw(st.integers(0, len(shape) - 1))
    n = draw(st.integers(1, 3))
    valid = draw(st.integers(0, 3)) > 0
    values = []
    for _ in range(n):
        s = list(shape)
        s[dim] = draw(st.integers(0, 3))
        t = et
        if not valid and draw(st.booleans()):
            if draw(st.booleans()):
                s = list(_mutate(draw, tuple(s)))
                s = [max(d, 0) for d in s]
            else:
                t = draw(element_types)
        values.append(random_array(t, s, draw(seeds)))
    if not valid and draw(st.booleans()):
        dim = draw(loose_int)
    return values, ConcatenateAttrs(dim), valid


@given(concatenate_cases())
def test_concatenate(case: tuple[list[np.ndarray], Any, bool]) -> None:
    values, attrs, valid = case
    got = check_valid_or_rejected("concatenate", values, attrs)
    if valid:
        assert got is not None
        same_bits(run_op("concatenate", values, attrs)[1],
                  np.concatenate(values, axis=attrs.dimension))


# ---- pad --------------------------------------------------------------------------------------
def _pad_reference(x: np.ndarray, value: np.ndarray, attrs: PadAttrs) -> np.ndarray:
    """Interior padding by scattering into a strided view, then edges with crops."""
    inner = [d + max(d - 1, 0) * n for d, n in zip(x.shape, attrs.interior_padding)]
    out = np.full(inner, value, x.dtype)
    out[tuple(slice(None, None, n + 1) for n in attrs.interior_padding)] = x
    for axis, (lo, hi) in enumerate(zip(attrs.edge_padding_low, attrs.edge_padding_high)):
        if lo < 0:
            out = np.take(out, range(-lo, out.shape[axis]), axis=axis)
        if hi < 0:
            out = np.take(out, range(0, out.shape[axis] + hi), axis=axis)
        shape_lo = list(out.shape)
        shape_lo[axis] = max(lo, 0)
        shape_hi = list(out.shape)
        shape_hi[axis] = max(hi, 0)
        out = np.concatenate([np.full(shape_lo, value, x.dtype), out,
                              np.full(shape_hi, value, x.dtype)], axis=axis)
    return out


@st.composite
def pad_cases(draw: st.DrawFn) -> tuple[list[np.ndarray], Any, bool]:
    shape = draw(dims(max_rank=3))
    et = draw(element_types)
    x = random_array(et, shape, draw(seeds))
    value = random_array(et, (), draw(seeds))
    interior = tuple(draw(st.integers(0, 2)) for _ in shape)
    lo, hi = [], []
    for d, n in zip(shape, interior):
        full = d + max(d - 1, 0) * n
        a = draw(st.integers(-full, 3))
        lo.append(a)
        hi.append(draw(st.integers(-(full + a) if a < 0 else -full, 3)))
    fields = [tuple(lo), tuple(hi), interior]
    valid = draw(st.integers(0, 3)) > 0
    if not valid:
        how = draw(st.integers(0, 4))
        if how < 3:
            fields[how] = _mutate(draw, fields[how])
        elif how == 3:
            value = random_array(draw(element_types), draw(dims(max_rank=1)), 0)
    return [x, value], PadAttrs(*fields), valid


@given(pad_cases())
def test_pad(case: tuple[list[np.ndarray], Any, bool]) -> None:
    values, attrs, valid = case
    got = check_valid_or_rejected("pad", values, attrs)
    if valid:
        assert got is not None
        same_bits(run_op("pad", values, attrs)[1], _pad_reference(values[0], values[1], attrs))


# ---- reverse ----------------------------------------------------------------------------------
@st.composite
def reverse_cases(draw: st.DrawFn) -> tuple[np.ndarray, Any, bool]:
    shape = draw(dims())
    x = random_array(draw(element_types), shape, draw(seeds))
    chosen = tuple(draw(st.permutations(range(len(shape))))[:draw(st.integers(0, len(shape)))])
    valid = draw(st.integers(0, 3)) > 0
    if not valid:
        chosen = _mutate(draw, chosen)
    return x, ReverseAttrs(chosen), valid


@given(reverse_cases())
def test_reverse(case: tuple[np.ndarray, Any, bool]) -> None:
    x, attrs, valid = case
    got = check_valid_or_rejected("reverse", [x], attrs)
    if valid:
        assert got is not None
        want = np.flip(x, axis=attrs.dimensions) if attrs.dimensions else x
        same_bits(run_op("reverse", [x], attrs)[1], np.array(want))


# ---- iota -------------------------------------------------------------------------------------
@given(element_types, dims(max_size=6), st.integers(-1, 4))
def test_iota(et: ElementType, shape: tuple[int, ...], dimension: int) -> None:
    attrs = IotaAttrs(Shape.array(et, shape), dimension)
    got = check_valid_or_rejected("iota", [], attrs)
    accepted = not et.is_pred and 0 <= dimension < len(shape)
    assert (got is not None) == accepted, (et, shape, dimension)
    if accepted:
        expanded = [1] * len(shape)
        expanded[dimension] = shape[dimension]
        line = np.arange(shape[dimension]).astype(np.float32 if et.is_float and et.bits < 64
                                                  else np.int64)
        want = np.broadcast_to(line.astype(et.dtype).reshape(expanded), shape)
        same_bits(run_op("iota", [], attrs)[1], np.array(want))


# ---- broadcast_in_dim -------------------------------------------------------------------------
@st.composite
def broadcast_in_dim_cases(draw: st.DrawFn) -> tuple[np.ndarray, Any, bool]:
    result = draw(dims(max_rank=4))
    rank = draw(st.integers(0, len(result)))
    mapping = tuple(sorted(draw(st.permutations(range(len(result))))[:rank]))
    if draw(st.booleans()):
        mapping = tuple(draw(st.permutations(mapping)))
    shape = tuple(draw(st.sampled_from([result[d], 1])) for d in mapping)
    x = random_array(draw(element_types), shape, draw(seeds))
    valid = draw(st.integers(0, 3)) > 0
    if not valid:
        if draw(st.booleans()):
            mapping = _mutate(draw, mapping)
        else:
            result = _mutate(draw, result)
    return x, BroadcastInDimAttrs(result, mapping), valid


@given(broadcast_in_dim_cases())
def test_broadcast_in_dim(case: tuple[np.ndarray, Any, bool]) -> None:
    x, attrs, valid = case
    got = check_valid_or_rejected("broadcast_in_dim", [x], attrs)
    if valid:
        assert got is not None
        # Reference: move each operand dim to its result position, then numpy-broadcast.
        order = np.argsort(attrs.broadcast_dimensions, kind="stable")
        expanded = [1] * len(attrs.shape)
        for i, d in enumerate(attrs.broadcast_dimensions):
            expanded[d] = x.shape[i]
        want = np.broadcast_to(np.transpose(x, order).reshape(expanded), attrs.shape)
        same_bits(run_op("broadcast_in_dim", [x], attrs)[1], np.array(want))
        assert math.prod(attrs.shape) == want.size
