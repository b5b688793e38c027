"""Shape-manipulating ops: broadcast_in_dim, reshape, transpose, slice, concatenate, pad, ..."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.base import EvalContext, OpDef, Region, check, register
from xlapy.types import Shape


@dataclass(frozen=True)
class BroadcastInDimAttrs:
    """`shape`: the result's dimensions; `broadcast_dimensions`: operand dim i -> result dim."""

    shape: tuple[int, ...]
    broadcast_dimensions: tuple[int, ...]


@register
class BroadcastInDim(OpDef):
    """stablehlo.broadcast_in_dim: spec §broadcast_in_dim; XLA BroadcastInDim (HLO broadcast)."""

    name = "broadcast_in_dim"
    hlo_name = "broadcast"
    arity = 1
    attrs = BroadcastInDimAttrs
    family = "shape"

    def infer(self, operands: Sequence[Shape], attrs: BroadcastInDimAttrs,
              regions: Sequence[Region]) -> Shape:
        (operand,) = operands
        check(operand.is_array, "broadcast_in_dim_c1", f"operand {operand} is not an array")
        dims, shape = attrs.broadcast_dimensions, attrs.shape
        check(len(dims) == operand.rank, "broadcast_in_dim_c2",
              f"broadcast_dimensions {list(dims)} has {len(dims)} entries but the operand has "
              f"rank {operand.rank}")
        for i, d in enumerate(dims):
            check(0 <= d < len(shape), "broadcast_in_dim_c3",
                  f"broadcast_dimensions[{i}] = {d} is out of range for result rank {len(shape)}")
        check(len(set(dims)) == len(dims), "broadcast_in_dim_c4",
              f"broadcast_dimensions {list(dims)} has duplicates")
        for i, d in enumerate(dims):
            check(operand.dimensions[i] in (1, shape[d]), "broadcast_in_dim_c5",
                  f"operand dimension {i} has size {operand.dimensions[i]} but result dimension "
                  f"{d} has size {shape[d]}")
        check(all(s >= 0 for s in shape), "broadcast_in_dim_c6",
              f"result shape {list(shape)} has a negative size")
        return Shape.array(operand.element_type, shape)

    def evaluate(self, operands: Sequence[Any], attrs: BroadcastInDimAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        (operand,) = operands
        rank = len(attrs.shape)
        expanded = [1] * rank
        for i, d in enumerate(attrs.broadcast_dimensions):
            expanded[d] = operand.shape[i]
        order = np.argsort(attrs.broadcast_dimensions, kind="stable")
        arr = np.transpose(operand, order) if operand.ndim else operand
        return np.broadcast_to(arr.reshape(expanded), attrs.shape).copy()
