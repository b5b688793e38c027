"""Windowed reductions: reduce_window (variadic) and select_and_scatter.

Both loop over the positions inside one window (a small count) and handle every window of
the operand at once with strided slices, calling their regions on whole arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.base import EvalContext, OpDef, Region, check, register
from xlapy.ops.reduction import check_region, collate, collate_shape, split_inputs_and_inits
from xlapy.ops.reduction_region import region_fn
from xlapy.types import ElementType, Shape


@dataclass(frozen=True)
class ReduceWindowAttrs:
    """Spec attributes; `None` means the spec default (all ones, or no padding)."""

    window_dimensions: tuple[int, ...]
    window_strides: tuple[int, ...] | None = None
    base_dilations: tuple[int, ...] | None = None
    window_dilations: tuple[int, ...] | None = None
    padding: tuple[tuple[int, int], ...] | None = None


@dataclass(frozen=True)
class SelectAndScatterAttrs:
    """Spec attributes; `None` means the spec default (unit strides, no padding)."""

    window_dimensions: tuple[int, ...]
    window_strides: tuple[int, ...] | None = None
    padding: tuple[tuple[int, int], ...] | None = None


def _ones(v: tuple[int, ...] | None, rank: int) -> tuple[int, ...]:
    return (1,) * rank if v is None else tuple(v)


def _pads(v: tuple[tuple[int, int], ...] | None, rank: int) -> tuple[tuple[int, int], ...]:
    return ((0, 0),) * rank if v is None else tuple(tuple(p) for p in v)  # type: ignore[misc]


def num_windows(size: int, window: int, stride: int, base_dilation: int,
                window_dilation: int, low: int, high: int) -> int:
    """The spec's C15 formula for one dimension."""
    dilated = 0 if size == 0 else (size - 1) * base_dilation + 1
    padded = low + dilated + high
    dilated_window = 0 if window == 0 else (window - 1) * window_dilation + 1
    if padded <= 0 or dilated_window > padded:
        return 0
    return (padded - dilated_window) // stride + 1


def _check_vector(label_size: str, label_pos: str, name: str, v: tuple[int, ...],
                  rank: int, minimum: int = 1) -> None:
    check(len(v) == rank, label_size, f"{name} has {len(v)} entries but the rank is {rank}")
    for i, x in enumerate(v):
        check(x >= minimum, label_pos, f"{name}[{i}] = {x} must be >= {minimum}")


def _check_padding(label: str, padding: tuple[tuple[int, int], ...], rank: int) -> None:
    check(len(padding) == rank and all(len(p) == 2 for p in padding), label,
          f"padding {[list(p) for p in padding]} must have shape [{rank}, 2]")


def dilate_and_pad(x: np.ndarray, fill: Any, base_dilations: Sequence[int],
                   padding: Sequence[tuple[int, int]]) -> np.ndarray:
    """pad(x, fill, low, high, interior = base_dilations - 1); negative padding crops."""
    shape = tuple(0 if s == 0 else (s - 1) * b + 1 for s, b in zip(x.shape, base_dilations))
    grown = tuple(max(lo, 0) + s + max(hi, 0) for s, (lo, hi) in zip(shape, padding))
    out = np.full(grown, fill, dtype=x.dtype)
    if x.size:
        out[tuple(slice(max(lo, 0), max(lo, 0) + s, b) for s, (lo, _), b
                  in zip(shape, padding, base_dilations))] = x
    crop = tuple(slice(-min(lo, 0), g + min(hi, 0)) for g, (lo, hi) in zip(grown, padding))
    return out[crop]


def window_slice(start: Sequence[int], counts: Sequence[int],
                 strides: Sequence[int]) -> tuple[slice, ...]:
    """The elements at `start + i * stride` for i < count in each dimension."""
    return tuple(slice(s, s + (c - 1) * st + 1 if c else s, st)
                 for s, c, st in zip(start, counts, strides))


# ---- reduce_window ------------------------------------------------------------------------------
@register
class ReduceWindow(OpDef):
    """stablehlo.reduce_window: spec §reduce_window; XLA ReduceWindow (variadic)."""

    name = "reduce_window"
    attrs = ReduceWindowAttrs
    num_regions = 1
    family = "reduction"

    def infer(self, operands: Sequence[Shape], attrs: ReduceWindowAttrs,
              regions: Sequence[Region]) -> Shape:
        inputs, inits = split_inputs_and_inits(operands, "reduce_window_c1", "reduce_window_c2",
                                               "reduce_window_c3")
        rank = inputs[0].rank
        wd = tuple(attrs.window_dimensions)
        ws = _ones(attrs.window_strides, rank)
        bd = _ones(attrs.base_dilations, rank)
        wdl = _ones(attrs.window_dilations, rank)
        pad = _pads(attrs.padding, rank)
        _check_vector("reduce_window_c4", "reduce_window_c5", "window_dimensions", wd, rank)
        _check_vector("reduce_window_c6", "reduce_window_c7", "window_strides", ws, rank)
        _check_vector("reduce_window_c8", "reduce_window_c9", "base_dilations", bd, rank)
        _check_vector("reduce_window_c10", "reduce_window_c11", "window_dilations", wdl, rank)
        _check_padding("reduce_window_c12", pad, rank)
        types = [s.element_type for s in inputs]
        check_region(regions[0], types * 2, types, "reduce_window_c13", "body")
        dims = [num_windows(s, w, st, b, d, lo, hi) for s, w, st, b, d, (lo, hi)
                in zip(inputs[0].dimensions, wd, ws, bd, wdl, pad)]
        return collate_shape([Shape.array(t, dims) for t in types])

    def evaluate(self, operands: Sequence[Any], attrs: ReduceWindowAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        n = len(operands) // 2
        inputs, inits = operands[:n], operands[n:]
        rank = inputs[0].ndim
        ws = _ones(attrs.window_strides, rank)
        bd = _ones(attrs.base_dilations, rank)
        wdl = _ones(attrs.window_dilations, rank)
        pad = _pads(attrs.padding, rank)
        out_shape = (result.tuple_shapes[0] if result.is_tuple else result).dimensions
        padded = [dilate_and_pad(x, i, bd, pad) for x, i in zip(inputs, inits)]
        acc = tuple(np.broadcast_to(i, out_shape) for i in inits)
        if 0 not in out_shape:
            fn = region_fn(ctx, 0)
            for offset in np.ndindex(*attrs.window_dimensions):
                start = [o * d for o, d in zip(offset, wdl)]
                sl = window_slice(start, out_shape, ws)
                acc = fn(*acc, *(p[sl] for p in padded))
        return collate([np.array(a, dtype=i.dtype) for a, i in zip(acc, inits)])


# ---- select_and_scatter -------------------------------------------------------------------------
@register
class SelectAndScatter(OpDef):
    """stablehlo.select_and_scatter: spec §select_and_scatter; XLA SelectAndScatter.

    Operands are (operand, source, init_value); regions are (select, scatter).
    """

    name = "select_and_scatter"
    arity = 3
    attrs = SelectAndScatterAttrs
    num_regions = 2
    family = "reduction"

    def infer(self, operands: Sequence[Shape], attrs: SelectAndScatterAttrs,
              regions: Sequence[Region]) -> Shape:
        operand, source, init = operands
        check(operand.is_array, "select_and_scatter_c1", f"operand {operand} is not a tensor")
        rank = operand.rank
        wd = tuple(attrs.window_dimensions)
        ws = _ones(attrs.window_strides, rank)
        pad = _pads(attrs.padding, rank)
        check(len(wd) == rank, "select_and_scatter_c1",
              f"window_dimensions has {len(wd)} entries but the operand has rank {rank}")
        _check_vector("select_and_scatter_c5", "select_and_scatter_c6", "window_dimensions",
                      wd, rank)
        _check_vector("select_and_scatter_c7", "select_and_scatter_c8", "window_strides",
                      ws, rank)
        _check_padding("select_and_scatter_c9", pad, rank)
        et = operand.element_type
        check(source.is_array and source.element_type is et, "select_and_scatter_c2",
              f"source {source} must have the operand's element type {et}")
        windows = [num_windows(s, w, st, 1, 1, lo, hi) for s, w, st, (lo, hi)
                   in zip(operand.dimensions, wd, ws, pad)]
        check(list(source.dimensions) == windows, "select_and_scatter_c3",
              f"source has dimensions {list(source.dimensions)} but there are {windows} "
              "windows")
        check(init.is_array and init.rank == 0 and init.element_type is et,
              "select_and_scatter_c4", f"init_value {init} must be a {et}[] scalar")
        check_region(regions[0], [et, et], [ElementType.PRED], "select_and_scatter_c10",
                     "select")
        check_region(regions[1], [et, et], [et], "select_and_scatter_c11", "scatter")
        return operand

    def evaluate(self, operands: Sequence[Any], attrs: SelectAndScatterAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        operand, source, init = operands
        rank = operand.ndim
        ws = _ones(attrs.window_strides, rank)
        pad = _pads(attrs.padding, rank)
        out = np.full(operand.shape, init, dtype=operand.dtype)
        if source.size == 0 or operand.size == 0:
            return out
        ones = (1,) * rank
        values = dilate_and_pad(operand, np.zeros((), operand.dtype), ones, pad)
        where = dilate_and_pad(np.arange(operand.size).reshape(operand.shape), -1, ones, pad)
        select = region_fn(ctx, 0)
        chosen = np.full(source.shape, -1, dtype=np.int64)
        best = np.zeros(source.shape, dtype=operand.dtype)
        # Window elements in lexicographic order: the running choice is always the earlier.
        for offset in np.ndindex(*attrs.window_dimensions):
            sl = window_slice(offset, source.shape, ws)
            cand, cand_at = values[sl], where[sl]
            valid = cand_at >= 0
            if not valid.any():
                continue
            have = chosen >= 0
            keep = select(best, cand)[0].astype(bool)
            take = valid & ~(have & keep)
            best = np.where(take, cand, best)
            chosen = np.where(take, cand_at, chosen)
        # Scatter in source order; sources hitting the same element are applied in rounds.
        targets, vals = chosen.ravel(), source.ravel()
        live = targets >= 0
        targets, vals = targets[live], vals[live]
        order = np.argsort(targets, kind="stable")
        sorted_t = targets[order]
        first = np.searchsorted(sorted_t, sorted_t, side="left")
        occurrence = np.empty_like(order)
        occurrence[order] = np.arange(len(order)) - first
        flat = out.reshape(-1)
        scatter = region_fn(ctx, 1)
        for r in range(int(occurrence.max()) + 1 if len(occurrence) else 0):
            pick = occurrence == r
            t = targets[pick]
            flat[t] = scatter(flat[t], vals[pick])[0]
        return flat.reshape(operand.shape)
