"""sort: N operands sorted together along one dimension by a comparator region.

A comparator that is one `compare(p0, p1)` (LT/GT on the first operand; TOTALORDER, or FLOAT
on NaN-free data, or integers) sorts with numpy's stable argsort. Any other comparator runs a
bottom-up merge sort whose merges rank every element in the opposite run by binary search:
each step calls the comparator once on whole arrays. Both are stable, which is a valid
outcome of an unstable sort too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.attrs import ComparisonDirection, ComparisonType
from xlapy.ops.base import EvalContext, OpDef, Region, check, register
from xlapy.ops.elementwise import total_order_key
from xlapy.ops.reduction import check_region, collate, collate_shape
from xlapy.ops.reduction_region import ArrayFn, region_fn
from xlapy.types import ElementType, Shape


@dataclass(frozen=True)
class SortAttrs:
    """`dimension` may be negative (counted from the end), as the spec allows."""

    dimension: int = -1
    is_stable: bool = False


@register
class Sort(OpDef):
    """stablehlo.sort: spec §sort; XLA Sort (variadic, comparator with 2N scalars)."""

    name = "sort"
    attrs = SortAttrs
    num_regions = 1
    family = "reduction"

    def infer(self, operands: Sequence[Shape], attrs: SortAttrs,
              regions: Sequence[Region]) -> Shape:
        check(len(operands) >= 1, "sort_c1", "expects at least one input")
        for i, s in enumerate(operands):
            check(s.is_array, "sort_c3", f"input {i} is {s}, not a tensor")
            check(s.dimensions == operands[0].dimensions, "sort_c3",
                  f"input {i} has dimensions {list(s.dimensions)} but input 0 has "
                  f"{list(operands[0].dimensions)}")
        rank = operands[0].rank
        check(-rank <= attrs.dimension < rank, "sort_c4",
              f"dimension {attrs.dimension} is out of range for rank {rank}")
        types = [t for s in operands for t in (s.element_type, s.element_type)]
        check_region(regions[0], types, [ElementType.PRED], "sort_c5", "comparator")
        return collate_shape(list(operands))

    def evaluate(self, operands: Sequence[Any], attrs: SortAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        rank = operands[0].ndim
        if rank == 0:
            return collate([x.copy() for x in operands])
        axis = attrs.dimension % rank
        moved = [np.moveaxis(x, axis, -1) for x in operands]
        perm = _simple_permutation(ctx, moved)
        if perm is None:
            perm = _merge_sort(region_fn(ctx, 0), moved)
        out = [np.moveaxis(np.take_along_axis(x, perm, axis=-1), -1, axis) for x in moved]
        return collate([np.ascontiguousarray(o) for o in out])


# ---- fast path: one compare of the first operand's pair -----------------------------------------
def simple_order(region: Any) -> tuple[bool, ComparisonType | None] | None:
    """(descending, compare type) when the comparator is one LT/GT compare of operand 0's
    pair of parameters, else None (the cpu backend's library sort asks the same)."""
    root = region.root
    if root is None or root.opcode != "compare" or any(
            i.opcode != "parameter" for i in region.instructions if i is not root):
        return None
    lhs, rhs = root.operands
    if lhs.opcode != "parameter" or rhs.opcode != "parameter":
        return None
    pair = (lhs.attrs.number, rhs.attrs.number)
    direction = root.attrs.comparison_direction
    if pair not in ((0, 1), (1, 0)) or direction not in (ComparisonDirection.LT,
                                                         ComparisonDirection.GT):
        return None
    return (direction is ComparisonDirection.GT) == (pair == (0, 1)), root.attrs.compare_type


def _simple_permutation(ctx: EvalContext, xs: list[np.ndarray]) -> np.ndarray | None:
    instr = getattr(ctx, "instruction", None)
    order = simple_order(instr.called[0]) if instr is not None else None
    if order is None:
        return None
    descending, compare_type = order
    key = _sort_key(xs[0], compare_type)
    if key is None:
        return None
    if descending:
        key = ~key  # order-reversing without overflow for two's complement keys
    return np.argsort(key, axis=-1, kind="stable")


def _sort_key(x: np.ndarray, compare_type: ComparisonType | None) -> np.ndarray | None:
    """An integer or bool array ordered as the comparison orders `x`, or None if none fits."""
    if x.dtype == np.bool_:
        return x.astype(np.int8)
    kind = x.dtype.kind
    if kind in "iu":
        if compare_type is ComparisonType.UNSIGNED and kind == "i":
            return x.view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.int64)
        if compare_type is ComparisonType.SIGNED and kind == "u":
            return x.view(np.dtype(f"i{x.dtype.itemsize}")).astype(np.int64)
        return x.astype(np.int64) if kind == "i" or x.dtype.itemsize < 8 else x
    if kind == "c":
        return None
    if compare_type is ComparisonType.TOTALORDER:
        return total_order_key(x).astype(np.int64)
    as_f64 = x.astype(np.float64)
    if np.isnan(as_f64).any():
        return None  # FLOAT compare with NaNs is no strict weak order: run the comparator
    return total_order_key(as_f64 + 0.0)  # + 0.0 folds -0 onto +0, which FLOAT calls equal


# ---- general path: vectorized stable merge sort ---------------------------------------------
def _merge_sort(less: ArrayFn, xs: list[np.ndarray]) -> np.ndarray:
    """Indices (along the last axis) that sort `xs` stably under `less`'s strict order."""
    n = xs[0].shape[-1]
    batch = xs[0].shape[:-1]
    perm = np.broadcast_to(np.arange(n), batch + (n,)).copy()
    if n <= 1 or 0 in batch:
        return perm
    pos = np.arange(n)
    width = 1
    while width < n:
        block = (pos // (2 * width)) * (2 * width)
        in_first = pos < block + width
        # The other run of each element: [lo_run, hi_run).
        lo_run = np.where(in_first, np.minimum(block + width, n), block)
        hi_run = np.where(in_first, np.minimum(block + 2 * width, n), block + width)
        own_start = np.where(in_first, block, block + width)
        cur = [np.take_along_axis(x, perm, axis=-1) for x in xs]
        lo = np.broadcast_to(lo_run, perm.shape).copy()
        hi = np.broadcast_to(hi_run, perm.shape).copy()
        # A first-run element goes after the other run's elements strictly less than it; a
        # second-run element after those not greater than it (so ties keep their order).
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = np.where(active, (lo + hi) // 2, np.minimum(lo, n - 1))
            other = [np.take_along_axis(c, mid, axis=-1) for c in cur]
            # First-run elements ask less(other, own); second-run ones ask less(own, other).
            args = [a for c, o in zip(cur, other)
                    for a in (np.where(in_first, o, c), np.where(in_first, c, o))]
            answer = less(*args)[0].astype(bool)
            go_right = np.where(in_first, answer, ~answer)
            lo = np.where(active & go_right, mid + 1, lo)
            hi = np.where(active & ~go_right, mid, hi)
        new_pos = block + (pos - own_start) + (lo - lo_run)
        nxt = np.full_like(perm, -1)
        np.put_along_axis(nxt, new_pos, perm, axis=-1)
        holes = (nxt < 0).any(axis=-1)
        if holes.any():
            # A comparator that is no strict weak order (FLOAT LT over NaNs, say) can send two
            # elements to one place: those rows order by the computed places, ties by the
            # current order, so the result is still a permutation (the order is unspecified).
            order = np.argsort(new_pos[holes], axis=-1, kind="stable")
            nxt[holes] = np.take_along_axis(perm[holes], order, axis=-1)
        perm = nxt
        width *= 2
    return perm

