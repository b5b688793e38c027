"""dynamic_slice and dynamic_update_slice: slices at run-time start indices, clamped in range.

Imported by `xlapy.ops.shape` (the shape family); split out to keep that module short.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.base import VARIADIC, EvalContext, OpDef, Region, check, register
from xlapy.types import Shape


def _check_start_indices(op: str, operand: Shape, indices: Sequence[Shape], c_count: str,
                         c_same: str) -> None:
    """Start indices: one integer scalar per operand dimension, all of one type."""
    check(len(indices) == operand.rank, c_count,
          f"got {len(indices)} start indices for an operand of rank {operand.rank}")
    for i, s in enumerate(indices):
        check(s.is_array and s.rank == 0 and s.element_type.is_integer, f"{op}_i_start_indices",
              f"start index {i} is {s}; expected a 0-dimensional integer tensor")
        check(s.element_type == indices[0].element_type, c_same,
              f"start index {i} has type {s.element_type} but start index 0 has "
              f"{indices[0].element_type}")


def _clamped_starts(indices: Sequence[Any], operand_dims: Sequence[int],
                    sizes: Sequence[int]) -> list[int]:
    """clamp(0, start, dim - size) per dimension, on the mathematical index value."""
    return [min(max(int(i), 0), d - s) for i, d, s in zip(indices, operand_dims, sizes)]


@dataclass(frozen=True)
class DynamicSliceAttrs:
    slice_sizes: tuple[int, ...]


@register
class DynamicSlice(OpDef):
    """stablehlo.dynamic_slice: spec §dynamic_slice; XLA DynamicSlice.

    Operands: the operand, then one scalar start index per dimension.
    """

    name = "dynamic_slice"
    hlo_name = "dynamic-slice"
    arity = VARIADIC
    attrs = DynamicSliceAttrs
    family = "shape"

    def infer(self, operands: Sequence[Shape], attrs: DynamicSliceAttrs,
              regions: Sequence[Region]) -> Shape:
        check(len(operands) >= 1, "dynamic_slice_c2", "expects an operand")
        operand, *indices = operands
        check(operand.is_array, "dynamic_slice_c1", f"operand {operand} is not a tensor")
        sizes = [int(s) for s in attrs.slice_sizes]
        check(len(sizes) == operand.rank, "dynamic_slice_c2",
              f"slice_sizes {sizes} has {len(sizes)} entries but the operand has rank "
              f"{operand.rank}")
        _check_start_indices("dynamic_slice", operand, indices, "dynamic_slice_c2",
                             "dynamic_slice_c3")
        for k, (s, d) in enumerate(zip(sizes, operand.dimensions)):
            check(0 <= s <= d, "dynamic_slice_c4",
                  f"slice_sizes[{k}] = {s} is not in [0, {d}]")
        return Shape.array(operand.element_type, sizes)

    def evaluate(self, operands: Sequence[Any], attrs: DynamicSliceAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        operand, *indices = operands
        starts = _clamped_starts(indices, operand.shape, attrs.slice_sizes)
        index = tuple(slice(s, s + n) for s, n in zip(starts, attrs.slice_sizes))
        return np.array(operand[index], order="C")


@register
class DynamicUpdateSlice(OpDef):
    """stablehlo.dynamic_update_slice: spec §dynamic_update_slice; XLA DynamicUpdateSlice.

    Operands: the operand, the update, then one scalar start index per dimension.
    """

    name = "dynamic_update_slice"
    hlo_name = "dynamic-update-slice"
    arity = VARIADIC
    family = "shape"

    def infer(self, operands: Sequence[Shape], attrs: Any,
              regions: Sequence[Region]) -> Shape:
        check(len(operands) >= 2, "dynamic_update_slice_c4",
              f"expects an operand and an update, got {len(operands)} operand(s)")
        operand, update, *indices = operands
        check(operand.is_array, "dynamic_update_slice_c1", f"operand {operand} is not a tensor")
        check(update.is_array, "dynamic_update_slice_c2", f"update {update} is not a tensor")
        check(update.element_type == operand.element_type, "dynamic_update_slice_c2",
              f"update has element type {update.element_type} but the operand has "
              f"{operand.element_type}")
        check(update.rank == operand.rank, "dynamic_update_slice_c3",
              f"update has rank {update.rank} but the operand has rank {operand.rank}")
        _check_start_indices("dynamic_update_slice", operand, indices,
                             "dynamic_update_slice_c4", "dynamic_update_slice_c5")
        for k, (u, d) in enumerate(zip(update.dimensions, operand.dimensions)):
            check(u <= d, "dynamic_update_slice_c6",
                  f"update dimension {k} has size {u}, larger than the operand's {d}")
        return operand

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        operand, update, *indices = operands
        starts = _clamped_starts(indices, operand.shape, update.shape)
        out = operand.copy()
        out[tuple(slice(s, s + n) for s, n in zip(starts, update.shape))] = update
        return out

