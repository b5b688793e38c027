"""Shape-manipulating ops: broadcast_in_dim, reshape, transpose, slice, concatenate, pad, ..."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.base import VARIADIC, EvalContext, OpDef, Region, check, fail, register
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
        if not operand.is_array:
            fail("broadcast_in_dim_c1", f"operand {operand} is not an array")
        dims, shape = attrs.broadcast_dimensions, attrs.shape
        if len(dims) != operand.rank:
            fail("broadcast_in_dim_c2",
                 f"broadcast_dimensions {list(dims)} has {len(dims)} entries but the operand has "
                 f"rank {operand.rank}")
        for i, d in enumerate(dims):
            if not 0 <= d < len(shape):
                fail("broadcast_in_dim_c3", f"broadcast_dimensions[{i}] = {d} is out of range "
                                            f"for result rank {len(shape)}")
        if len(set(dims)) != len(dims):
            fail("broadcast_in_dim_c4", f"broadcast_dimensions {list(dims)} has duplicates")
        for i, d in enumerate(dims):
            if operand.dimensions[i] not in (1, shape[d]):
                fail("broadcast_in_dim_c5",
                     f"operand dimension {i} has size {operand.dimensions[i]} but result dimension "
                     f"{d} has size {shape[d]}")
        if not all(s >= 0 for s in shape):
            fail("broadcast_in_dim_c6", f"result shape {list(shape)} has a negative size")
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


def _array_operand(shape: Shape, label: str, what: str = "operand") -> None:
    if not shape.is_array:
        fail(label, f"{what} {shape} is not a tensor")


def _ints(values: Sequence[int]) -> list[int]:
    return [int(v) for v in values]


# ---- reshape ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReshapeAttrs:
    """`shape`: the result's dimensions (row-major order of elements is kept)."""

    shape: tuple[int, ...]


@register
class Reshape(OpDef):
    """stablehlo.reshape: spec §reshape; XLA Reshape (the single-argument form)."""

    name = "reshape"
    arity = 1
    attrs = ReshapeAttrs
    family = "shape"

    def infer(self, operands: Sequence[Shape], attrs: ReshapeAttrs,
              regions: Sequence[Region]) -> Shape:
        (operand,) = operands
        _array_operand(operand, "reshape_c1")
        if not all(d >= 0 for d in attrs.shape):
            fail("reshape_c2", f"result shape {_ints(attrs.shape)} has a negative size")
        n = int(np.prod(attrs.shape, dtype=np.int64))
        if n != operand.num_elements:
            fail("reshape_c2",
                 f"result shape {_ints(attrs.shape)} has {n} elements but the operand has "
                 f"{operand.num_elements}")
        return Shape.array(operand.element_type, attrs.shape)

    def evaluate(self, operands: Sequence[Any], attrs: ReshapeAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        return np.reshape(operands[0], attrs.shape)


# ---- transpose --------------------------------------------------------------------------------
@dataclass(frozen=True)
class TransposeAttrs:
    """`permutation`: result dimension d is operand dimension permutation[d]."""

    permutation: tuple[int, ...]


@register
class Transpose(OpDef):
    """stablehlo.transpose: spec §transpose; XLA Transpose."""

    name = "transpose"
    arity = 1
    attrs = TransposeAttrs
    family = "shape"

    def infer(self, operands: Sequence[Shape], attrs: TransposeAttrs,
              regions: Sequence[Region]) -> Shape:
        (operand,) = operands
        _array_operand(operand, "transpose_c1")
        perm = _ints(attrs.permutation)
        if sorted(perm) != list(range(operand.rank)):
            fail("transpose_c2", f"permutation {perm} is not a permutation of [0, {operand.rank})")
        return Shape.array(operand.element_type, [operand.dimensions[p] for p in perm])

    def evaluate(self, operands: Sequence[Any], attrs: TransposeAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        return np.array(np.transpose(operands[0], attrs.permutation), order="C")


# ---- slice ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SliceAttrs:
    """Per dimension: elements start, start + stride, ... below limit."""

    start_indices: tuple[int, ...]
    limit_indices: tuple[int, ...]
    strides: tuple[int, ...]


@register
class Slice(OpDef):
    """stablehlo.slice: spec §slice; XLA Slice / SliceInDim."""

    name = "slice"
    arity = 1
    attrs = SliceAttrs
    family = "shape"

    def infer(self, operands: Sequence[Shape], attrs: SliceAttrs,
              regions: Sequence[Region]) -> Shape:
        (operand,) = operands
        _array_operand(operand, "slice_c1")
        start, limit, strides = (_ints(attrs.start_indices), _ints(attrs.limit_indices),
                                 _ints(attrs.strides))
        if not len(start) == len(limit) == len(strides) == operand.rank:
            fail("slice_c2",
                 f"start_indices {start}, limit_indices {limit} and strides {strides} must each "
                 f"have {operand.rank} entries (the operand's rank)")
        dims = []
        for d, (s, lim, st, size) in enumerate(zip(start, limit, strides, operand.dimensions)):
            if not 0 <= s <= lim <= size:
                fail("slice_c3",
                     f"dimension {d}: need 0 <= start {s} <= limit {lim} <= size {size}")
            if not st > 0:
                fail("slice_c4", f"dimension {d}: stride {st} is not positive")
            dims.append(-(-(lim - s) // st))
        return Shape.array(operand.element_type, dims)

    def evaluate(self, operands: Sequence[Any], attrs: SliceAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        index = tuple(slice(s, lim, st) for s, lim, st in
                      zip(attrs.start_indices, attrs.limit_indices, attrs.strides))
        return np.array(operands[0][index], order="C")


# ---- concatenate ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConcatenateAttrs:
    dimension: int


@register
class Concatenate(OpDef):
    """stablehlo.concatenate: spec §concatenate; XLA ConcatInDim."""

    name = "concatenate"
    arity = VARIADIC
    attrs = ConcatenateAttrs
    family = "shape"

    def infer(self, operands: Sequence[Shape], attrs: ConcatenateAttrs,
              regions: Sequence[Region]) -> Shape:
        check(len(operands) >= 1, "concatenate_c3", "expects at least one operand")
        for i, s in enumerate(operands):
            _array_operand(s, "concatenate_c1", f"operand {i}")
        first = operands[0]
        dim = int(attrs.dimension)
        if not 0 <= dim < first.rank:
            fail("concatenate_c4", f"dimension {dim} is out of range for rank {first.rank}")
        total = 0
        for i, s in enumerate(operands):
            if s.element_type != first.element_type:
                fail("concatenate_c1",
                     f"operand {i} has element type {s.element_type} but operand 0 has "
                     f"{first.element_type}")
            same = s.rank == first.rank and all(
                a == b for k, (a, b) in enumerate(zip(s.dimensions, first.dimensions))
                if k != dim)
            if not same:
                fail("concatenate_c2", f"operand {i} differs from operand 0 in a dimension "
                                       f"other than {dim}")
            total += s.dimensions[dim]
        dims = list(first.dimensions)
        dims[dim] = total
        return Shape.array(first.element_type, dims)

    def evaluate(self, operands: Sequence[Any], attrs: ConcatenateAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        return np.concatenate(list(operands), axis=attrs.dimension)


# ---- reverse ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReverseAttrs:
    dimensions: tuple[int, ...]


@register
class Reverse(OpDef):
    """stablehlo.reverse: spec §reverse; XLA Rev."""

    name = "reverse"
    arity = 1
    attrs = ReverseAttrs
    family = "shape"

    def infer(self, operands: Sequence[Shape], attrs: ReverseAttrs,
              regions: Sequence[Region]) -> Shape:
        (operand,) = operands
        _array_operand(operand, "reverse_c1")
        dims = _ints(attrs.dimensions)
        if len(set(dims)) != len(dims):
            fail("reverse_c2", f"dimensions {dims} has duplicates")
        for d in dims:
            if not 0 <= d < operand.rank:
                fail("reverse_c3", f"dimension {d} is out of range for rank {operand.rank}")
        return operand

    def evaluate(self, operands: Sequence[Any], attrs: ReverseAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        if not attrs.dimensions:
            return operands[0]
        return np.array(np.flip(operands[0], axis=tuple(attrs.dimensions)), order="C")


# ---- pad --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PadAttrs:
    """Per dimension: low/high edge padding (negative crops) and interior padding (>= 0)."""

    edge_padding_low: tuple[int, ...]
    edge_padding_high: tuple[int, ...]
    interior_padding: tuple[int, ...]


@register
class Pad(OpDef):
    """stablehlo.pad: spec §pad; XLA Pad (operands: operand, scalar padding_value)."""

    name = "pad"
    arity = 2
    attrs = PadAttrs
    family = "shape"

    def infer(self, operands: Sequence[Shape], attrs: PadAttrs,
              regions: Sequence[Region]) -> Shape:
        operand, value = operands
        _array_operand(operand, "pad_c1")
        _array_operand(value, "pad_c1", "padding_value")
        if value.rank != 0:
            fail("pad_i2", f"padding_value {value} is not 0-dimensional")
        if value.element_type != operand.element_type:
            fail("pad_c1",
                 f"padding_value has element type {value.element_type} but the operand has "
                 f"{operand.element_type}")
        lo, hi, interior = (_ints(attrs.edge_padding_low), _ints(attrs.edge_padding_high),
                            _ints(attrs.interior_padding))
        if not len(lo) == len(hi) == len(interior) == operand.rank:
            fail("pad_c2",
                 f"edge_padding_low {lo}, edge_padding_high {hi} and interior_padding {interior} "
                 f"must each have {operand.rank} entries (the operand's rank)")
        dims = []
        for i, (d, a, b, n) in enumerate(zip(operand.dimensions, lo, hi, interior)):
            if not n >= 0:
                fail("pad_c3", f"interior_padding[{i}] = {n} is negative")
            size = d + max(d - 1, 0) * n + a + b
            if not size >= 0:
                fail("pad_c4", f"dimension {i} of the result would have size {size}")
            dims.append(size)
        return Shape.array(operand.element_type, dims)

    def evaluate(self, operands: Sequence[Any], attrs: PadAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        operand, value = operands
        lo, hi, interior = attrs.edge_padding_low, attrs.edge_padding_high, attrs.interior_padding
        # Pad with the non-negative parts first, then crop the negative ones.
        full = [d + max(d - 1, 0) * n + max(a, 0) + max(b, 0)
                for d, a, b, n in zip(operand.shape, lo, hi, interior)]
        out = np.full(full, value, dtype=operand.dtype)
        place = tuple(slice(max(a, 0), max(a, 0) + (d - 1) * (n + 1) + 1 if d else 0, n + 1)
                      for d, a, n in zip(operand.shape, lo, interior))
        out[place] = operand
        crop = tuple(slice(max(-a, 0), f - max(-b, 0)) for a, b, f in zip(lo, hi, full))
        return np.array(out[crop], order="C")


# ---- iota -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class IotaAttrs:
    """`shape`: the result shape (element type and dimensions); values count along one dim."""

    shape: Shape
    iota_dimension: int


@register
class Iota(OpDef):
    """stablehlo.iota: spec §iota; XLA Iota (float iota is convert(integer iota))."""

    name = "iota"
    arity = 0
    attrs = IotaAttrs
    family = "shape"

    def infer(self, operands: Sequence[Shape], attrs: IotaAttrs,
              regions: Sequence[Region]) -> Shape:
        shape = attrs.shape
        if not (isinstance(shape, Shape) and shape.is_array):
            fail("iota_o1", f"result {shape} is not a tensor")
        et = shape.element_type
        if not (et.is_integer or et.is_float or et.is_complex):
            fail("iota_o1",
                 f"result element type {et} is not an integer, floating-point or complex type")
        if not 0 <= attrs.iota_dimension < shape.rank:
            fail("iota_c1",
                 f"iota_dimension {attrs.iota_dimension} is out of range for rank {shape.rank}")
        return shape

    def evaluate(self, operands: Sequence[Any], attrs: IotaAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        et = result.element_type
        d = attrs.iota_dimension
        n = result.dimensions[d]
        line = np.arange(n, dtype=np.int64)
        if et.is_float and et.bits < 64:
            line = line.astype(np.float32)  # exact for any realistic size, then one rounding
        values = line.astype(et.dtype)
        expanded = [1] * result.rank
        expanded[d] = n
        return np.broadcast_to(values.reshape(expanded), result.dimensions).copy()


# Dynamic slicing lives in a sub-module (this file stays under 600 lines).
from xlapy.ops.shape_dynamic import DynamicSliceAttrs  # noqa: E402,F401
