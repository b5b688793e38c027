"""Reductions: reduce (variadic) here; reduce_window and select_and_scatter in
reduction_window.py, sort in reduction_sort.py, batch norm in reduction_batch_norm.py.

Regions (reducers, comparators) run on whole arrays through `reduction_region.region_fn`,
so a reduction costs a handful of numpy calls per reduced element position, not per element.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.base import EvalContext, OpDef, Region, fail, register
from xlapy.ops.reduction_region import ArrayFn, region_fn
from xlapy.types import ElementType, Shape

#: Reductions of at most this many elements fold left to right, like XLA's loop emitter;
#: longer ones pair neighbours (same in-order traversal, fewer region calls).
SEQUENTIAL_LIMIT = 16


# ---- helpers shared by the family --------------------------------------------------------------
def check_region(region: Region, param_types: Sequence[ElementType],
                 result_types: Sequence[ElementType], label: str, what: str) -> None:
    """`region` takes scalars of `param_types` and returns scalars of `result_types`
    (a tuple of them when there are several, the bare scalar for one)."""
    params = region.parameter_shapes
    if len(params) != len(param_types):
        want = ", ".join(f"{t}[]" for t in param_types)
        fail(label,
             f"{what} takes {len(params)} parameter(s); expected {len(param_types)} ({want})")
    for i, (p, t) in enumerate(zip(params, param_types)):
        if not (p.is_array and p.rank == 0 and p.element_type is t):
            fail(label, f"{what} parameter {i} is {p}; expected {t}[]")
    res = region.result_shape
    results = list(res.tuple_shapes) if res.is_tuple else [res]
    if not (len(results) == len(result_types) and all(
            s.is_array and s.rank == 0 and s.element_type is t
            for s, t in zip(results, result_types))):
        got = [str(s) for s in results]
        fail(label, f"{what} returns {res}; expected " + ", ".join(f"{t}[]" for t in result_types)
                    + (f" (got {', '.join(got)})" if len(got) > 1 else ""))


def split_inputs_and_inits(operands: Sequence[Shape], count_label: str, inputs_label: str,
                           inits_label: str) -> tuple[Sequence[Shape], Sequence[Shape]]:
    """Check the N inputs + N scalar init values that reduce and reduce_window share (each op
    passes its own constraint labels) and return them split."""
    if not (len(operands) >= 2 and len(operands) % 2 == 0):
        fail(count_label,
             f"expects N inputs and N init values with N >= 1, got {len(operands)} operands")
    n = len(operands) // 2
    inputs, inits = operands[:n], operands[n:]
    for i, s in enumerate(inputs):
        if not s.is_array:
            fail(inputs_label, f"input {i} is {s}, not a tensor")
        if s.dimensions != inputs[0].dimensions:
            fail(inputs_label, f"input {i} has dimensions {list(s.dimensions)} but input 0 has "
                               f"{list(inputs[0].dimensions)}")
    for i, (s, init) in enumerate(zip(inputs, inits)):
        if not (init.is_array and init.rank == 0):
            fail(inits_label, f"init value {i} is {init}, not a 0-dimensional tensor")
        if init.element_type is not s.element_type:
            fail(inits_label,
                 f"init value {i} has element type {init.element_type} but input {i} has "
                 f"{s.element_type}")
    return inputs, inits


def collate(values: Sequence[np.ndarray]) -> Any:
    """One result bare, several as a tuple (the architecture's several-results rule)."""
    return values[0] if len(values) == 1 else tuple(values)


def collate_shape(shapes: Sequence[Shape]) -> Shape:
    return shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)


def fold_last_axis(fn: ArrayFn, inits: Sequence[np.ndarray],
                   xs: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """Reduce the last axis of every `xs[k]` with `fn(acc..., x...)`, `inits` on the left.

    Short axes fold left to right; long ones combine neighbours pairwise (a full binary tree
    whose in-order traversal is the elements in order, as the spec's schedule requires).
    """
    out_shape = xs[0].shape[:-1]
    length = xs[0].shape[-1]
    acc = tuple(np.broadcast_to(i, out_shape) for i in inits)
    if length == 0 or 0 in out_shape:
        return tuple(a.copy() for a in acc)
    if length <= SEQUENTIAL_LIMIT:
        for k in range(length):
            acc = fn(*acc, *(x[..., k] for x in xs))
        return acc
    cur = list(xs)
    while cur[0].shape[-1] > 1:
        n = cur[0].shape[-1]
        half = n // 2
        pairs = fn(*(c[..., 0:2 * half:2] for c in cur), *(c[..., 1:2 * half:2] for c in cur))
        if n % 2:
            pairs = tuple(np.concatenate([p, c[..., -1:]], axis=-1) for p, c in zip(pairs, cur))
        cur = list(pairs)
    return fn(*acc, *(c[..., 0] for c in cur))


# ---- reduce -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReduceAttrs:
    """`dimensions`: the input dimensions folded away (unordered, unique)."""

    dimensions: tuple[int, ...]


@register
class Reduce(OpDef):
    """stablehlo.reduce: spec §reduce; XLA Reduce (variadic: N inputs, N init values)."""

    name = "reduce"
    attrs = ReduceAttrs
    num_regions = 1
    family = "reduction"

    def infer(self, operands: Sequence[Shape], attrs: ReduceAttrs,
              regions: Sequence[Region]) -> Shape:
        inputs, inits = split_inputs_and_inits(operands, "reduce_c3", "reduce_c1", "reduce_c2")
        rank = inputs[0].rank
        for d in attrs.dimensions:
            if not 0 <= d < rank:
                fail("reduce_c4", f"dimension {d} is out of range for inputs of rank {rank}")
        if len(set(attrs.dimensions)) != len(attrs.dimensions):
            fail("reduce_c5", f"dimensions {list(attrs.dimensions)} has duplicates")
        types = [s.element_type for s in inputs]
        check_region(regions[0], types * 2, types, "reduce_c6", "body")
        dims = [d for i, d in enumerate(inputs[0].dimensions) if i not in attrs.dimensions]
        return collate_shape([Shape.array(t, dims) for t in types])

    def evaluate(self, operands: Sequence[Any], attrs: ReduceAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        n = len(operands) // 2
        inputs, inits = operands[:n], operands[n:]
        reduced = sorted(attrs.dimensions)
        kept = [d for d in range(inputs[0].ndim) if d not in reduced]
        out_dims = tuple(inputs[0].shape[d] for d in kept)
        xs = [np.transpose(x, kept + reduced).reshape(out_dims + (-1,)) if x.size
              else np.empty(out_dims + (int(np.prod([x.shape[d] for d in reduced])),), x.dtype)
              for x in inputs]
        out = fold_last_axis(region_fn(ctx, 0), inits, xs)
        return collate([np.asarray(o).astype(i.dtype, copy=False) for o, i in zip(out, inits)])


from xlapy.ops import reduction_batch_norm, reduction_sort, reduction_window  # noqa: E402,F401
