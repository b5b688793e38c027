"""Builder ops: shape family (seed 000 Broadcast .. Transpose, seed 001 Trans/Collapse).

Builder spellings that XLA defines through other ops (Broadcast, Collapse, the two-list
Reshape, Trans, SliceInDim, PadInDim) are composed here from the IR ops, as XlaBuilder does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from xlapy.builder.overloads import bind_overload, names_of
from xlapy.builder.xla_builder import XlaBuilder, XlaOp, as_element_type
from xlapy.errors import XlapyError
from xlapy.ops.shape import (
    BroadcastInDimAttrs,
    ConcatenateAttrs,
    DynamicSliceAttrs,
    IotaAttrs,
    PadAttrs,
    ReshapeAttrs,
    ReverseAttrs,
    SliceAttrs,
    TransposeAttrs,
)
from xlapy.types import Shape

__all__ = [
    "Broadcast", "BroadcastInDim", "Reshape", "Collapse", "Transpose", "Trans", "Rev",
    "Slice", "SliceInDim", "DynamicSlice", "DynamicUpdateSlice", "ConcatInDim", "Pad",
    "PadInDim", "PaddingConfig", "PaddingConfigDimension", "make_padding_config", "Iota",
]


def _ints(values: Iterable[Any]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def _int_list(builder: XlaBuilder, api: str, values: Any, what: str) -> tuple[int, ...] | None:
    """A tuple of ints, or None after reporting `what` is not a sequence of integers."""
    try:
        return _ints(values)
    except (TypeError, ValueError):
        builder.report_error(api, f"{what} must be a sequence of integers, got {values!r}")
        return None


def _shape_of(op: XlaOp) -> Shape | None:
    return op.shape() if isinstance(op, XlaOp) and op.ok else None


# ---- broadcast --------------------------------------------------------------------------------
def Broadcast(operand: XlaOp, sizes: Sequence[int]) -> XlaOp:
    """New major dimensions of `sizes` prepended to the operand's (seed 000)."""
    b = operand.builder
    sizes = _int_list(b, "Broadcast", sizes, "sizes")  # type: ignore[assignment]
    shape = _shape_of(operand)
    if sizes is None or shape is None:
        return XlaOp(b, None)
    if not shape.is_array:
        return b.report_error("Broadcast", f"operand {shape} is not an array")
    dims = tuple(range(len(sizes), len(sizes) + shape.rank))
    return b.add_op("broadcast_in_dim", [operand],
                    BroadcastInDimAttrs(sizes + shape.dimensions, dims), api_name="Broadcast")


def BroadcastInDim(operand: XlaOp, shape: Sequence[int],
                   broadcast_dimensions: Sequence[int]) -> XlaOp:
    """Operand dimension i goes to result dimension broadcast_dimensions[i] (seed 000)."""
    b = operand.builder
    out = _int_list(b, "BroadcastInDim", shape, "shape")
    dims = _int_list(b, "BroadcastInDim", broadcast_dimensions, "broadcast_dimensions")
    if out is None or dims is None:
        return XlaOp(b, None)
    return b.add_op("broadcast_in_dim", [operand], BroadcastInDimAttrs(out, dims),
                    api_name="BroadcastInDim")


# ---- reshape, collapse, transpose, rev --------------------------------------------------------
_RESHAPE = ((("operand", "dimensions", "new_sizes"), {}), (("operand", "new_sizes"), {}))


def Reshape(*args: Any, **kwargs: Any) -> XlaOp:
    """`Reshape(operand, new_sizes)` or `Reshape(operand, dimensions, new_sizes)`.

    The three-argument form first transposes by `dimensions` (the order in which the operand
    is flattened, most major first), as XLA's builder does.
    """
    form, a = bind_overload("Reshape", args, kwargs, _RESHAPE)
    return _reshape(a["operand"], a.get("dimensions"), a["new_sizes"])


Reshape.overloads = names_of(_RESHAPE)  # type: ignore[attr-defined]


def _reshape(operand: XlaOp, dimensions: Sequence[int] | None,
             new_sizes: Sequence[int]) -> XlaOp:
    b = operand.builder
    if dimensions is None:
        sizes = _int_list(b, "Reshape", new_sizes, "new_sizes")
        if sizes is None:
            return XlaOp(b, None)
        return b.add_op("reshape", [operand], ReshapeAttrs(sizes), api_name="Reshape")
    dims = _int_list(b, "Reshape", dimensions, "dimensions")
    sizes = _int_list(b, "Reshape", new_sizes, "new_sizes")
    shape = _shape_of(operand)
    if dims is None or sizes is None or shape is None:
        return XlaOp(b, None)
    if sorted(dims) != list(range(shape.rank)):
        return b.report_error("Reshape", f"dimensions {list(dims)} is not a permutation of the "
                              f"operand's dimensions [0, {shape.rank}); got {shape}")
    if dims != tuple(range(shape.rank)):
        operand = b.add_op("transpose", [operand], TransposeAttrs(dims), api_name="Reshape")
    return b.add_op("reshape", [operand], ReshapeAttrs(sizes), api_name="Reshape")


def Collapse(operand: XlaOp, dimensions: Sequence[int]) -> XlaOp:
    """Merge consecutive, in-order `dimensions` into one (seed 000); fewer than two: no-op."""
    b = operand.builder
    dims = _int_list(b, "Collapse", dimensions, "dimensions")
    shape = _shape_of(operand)
    if dims is None or shape is None:
        return XlaOp(b, None)
    if not shape.is_array:
        return b.report_error("Collapse", f"operand {shape} is not an array")
    for d in dims:
        if not 0 <= d < shape.rank:
            return b.report_error("Collapse", f"dimension {d} is out of range for {shape}")
    if any(y != x + 1 for x, y in zip(dims, dims[1:])):
        return b.report_error("Collapse", f"dimensions {list(dims)} are not consecutive and in "
                              "order")
    if len(dims) <= 1:
        return operand
    old = shape.dimensions
    merged = 1
    for d in dims:
        merged *= old[d]
    sizes = old[:dims[0]] + (merged,) + old[dims[-1] + 1:]
    return b.add_op("reshape", [operand], ReshapeAttrs(sizes), api_name="Collapse")


def Transpose(operand: XlaOp, permutation: Sequence[int]) -> XlaOp:
    """Result dimension i is operand dimension permutation[i] (seed 000)."""
    b = operand.builder
    perm = _int_list(b, "Transpose", permutation, "permutation")
    if perm is None:
        return XlaOp(b, None)
    return b.add_op("transpose", [operand], TransposeAttrs(perm), api_name="Transpose")


def Trans(operand: XlaOp) -> XlaOp:
    """Seed 001's matrix transpose: the operand must have rank 2."""
    b = operand.builder
    shape = _shape_of(operand)
    if shape is None:
        return XlaOp(b, None)
    if not shape.is_array or shape.rank != 2:
        return b.report_error("Trans", f"operand must have rank 2; got {shape}")
    return b.add_op("transpose", [operand], TransposeAttrs((1, 0)), api_name="Trans")


def Rev(operand: XlaOp, dimensions: Sequence[int]) -> XlaOp:
    """Reverse the element order along `dimensions` (seed 000 Rev; stablehlo.reverse)."""
    b = operand.builder
    dims = _int_list(b, "Rev", dimensions, "dimensions")
    if dims is None:
        return XlaOp(b, None)
    return b.add_op("reverse", [operand], ReverseAttrs(dims), api_name="Rev")


# ---- slices -----------------------------------------------------------------------------------
def Slice(operand: XlaOp, start_indices: Sequence[int], limit_indices: Sequence[int],
          strides: Sequence[int] | None = None) -> XlaOp:
    """Static slice [start, limit) with `strides` (default 1 per dimension, seed 001)."""
    b = operand.builder
    start = _int_list(b, "Slice", start_indices, "start_indices")
    limit = _int_list(b, "Slice", limit_indices, "limit_indices")
    if start is None or limit is None:
        return XlaOp(b, None)
    steps = (1,) * len(start) if strides is None else _int_list(b, "Slice", strides, "strides")
    if steps is None:
        return XlaOp(b, None)
    return b.add_op("slice", [operand], SliceAttrs(start, limit, steps), api_name="Slice")


def SliceInDim(operand: XlaOp, start_index: int, limit_index: int, stride: int,
               dimno: int) -> XlaOp:
    """Slice dimension `dimno` only; every other dimension is kept whole."""
    b = operand.builder
    shape = _shape_of(operand)
    if shape is None:
        return XlaOp(b, None)
    if not shape.is_array or not 0 <= int(dimno) < shape.rank:
        return b.report_error("SliceInDim", f"dimno {dimno} is out of range for {shape}")
    start = [0] * shape.rank
    limit = list(shape.dimensions)
    strides = [1] * shape.rank
    start[dimno], limit[dimno], strides[dimno] = int(start_index), int(limit_index), int(stride)
    return b.add_op("slice", [operand], SliceAttrs(tuple(start), tuple(limit), tuple(strides)),
                    api_name="SliceInDim")


def _start_index_ops(builder: XlaBuilder, api: str, start_indices: Any) -> list[XlaOp] | None:
    """Scalar start-index ops; a single rank-1 op (XLA's old form) is split into scalars."""
    if isinstance(start_indices, XlaOp):
        shape = _shape_of(start_indices)
        if shape is None:
            return None
        if not shape.is_array or shape.rank != 1:
            builder.report_error(api, f"start_indices must be a list of scalars or one rank-1 "
                                 f"array; got {shape}")
            return None
        out = []
        for i in range(shape.dimensions[0]):
            one = builder.add_op("slice", [start_indices], SliceAttrs((i,), (i + 1,), (1,)),
                                 api_name=api)
            out.append(builder.add_op("reshape", [one], ReshapeAttrs(()), api_name=api))
        return out
    try:
        return list(start_indices)
    except TypeError:
        builder.report_error(api, f"start_indices must be a list of XlaOps, got "
                             f"{start_indices!r}")
        return None


def DynamicSlice(operand: XlaOp, start_indices: Sequence[XlaOp] | XlaOp,
                 slice_sizes: Sequence[int]) -> XlaOp:
    """Slice of `slice_sizes` at run-time starts, clamped into range (seed 000)."""
    b = operand.builder
    starts = _start_index_ops(b, "DynamicSlice", start_indices)
    sizes = _int_list(b, "DynamicSlice", slice_sizes, "slice_sizes")
    if starts is None or sizes is None:
        return XlaOp(b, None)
    return b.add_op("dynamic_slice", [operand, *starts], DynamicSliceAttrs(sizes),
                    api_name="DynamicSlice")


def DynamicUpdateSlice(operand: XlaOp, update: XlaOp,
                       start_indices: Sequence[XlaOp] | XlaOp) -> XlaOp:
    """`operand` with `update` written at run-time starts, clamped into range (seed 000)."""
    b = operand.builder
    starts = _start_index_ops(b, "DynamicUpdateSlice", start_indices)
    if starts is None:
        return XlaOp(b, None)
    return b.add_op("dynamic_update_slice", [operand, update, *starts],
                    api_name="DynamicUpdateSlice")


# ---- concatenate ------------------------------------------------------------------------------
def ConcatInDim(builder: XlaBuilder, operands: Sequence[XlaOp], dimension: int) -> XlaOp:
    """Concatenate `operands` along `dimension` (seed 000 Concatenate)."""
    try:
        ops = list(operands)
        dim = int(dimension)
    except (TypeError, ValueError):
        return builder.report_error("ConcatInDim", f"bad operands {operands!r} or dimension "
                                    f"{dimension!r}")
    return builder.add_op("concatenate", ops, ConcatenateAttrs(dim), api_name="ConcatInDim")


# ---- pad --------------------------------------------------------------------------------------
@dataclass
class PaddingConfigDimension:
    """One dimension's padding: edges (negative crops) and interior (xla_client style)."""

    edge_padding_low: int = 0
    edge_padding_high: int = 0
    interior_padding: int = 0


@dataclass
class PaddingConfig:
    """XLA's PaddingConfig: one PaddingConfigDimension per operand dimension."""

    dimensions: list[PaddingConfigDimension] = field(default_factory=list)


def make_padding_config(padding_config: Any) -> PaddingConfig:
    """A PaddingConfig from (low, high, interior) triples or a PaddingConfig (xla_client)."""
    if isinstance(padding_config, PaddingConfig):
        return padding_config
    dims = []
    for entry in padding_config:
        if isinstance(entry, PaddingConfigDimension):
            dims.append(entry)
            continue
        lo, hi, interior = entry
        dims.append(PaddingConfigDimension(int(lo), int(hi), int(interior)))
    return PaddingConfig(dims)


def _pad_attrs(config: PaddingConfig) -> PadAttrs:
    dims = config.dimensions
    return PadAttrs(_ints(d.edge_padding_low for d in dims),
                    _ints(d.edge_padding_high for d in dims),
                    _ints(d.interior_padding for d in dims))


def Pad(operand: XlaOp, padding_value: XlaOp, padding_config: Any) -> XlaOp:
    """Pad with the scalar `padding_value`: edges (negative crops) and interior (seed 000)."""
    b = operand.builder
    try:
        attrs = _pad_attrs(make_padding_config(padding_config))
    except (TypeError, ValueError, AttributeError) as e:
        return b.report_error("Pad", f"bad padding_config {padding_config!r}: {e}")
    return b.add_op("pad", [operand, padding_value], attrs, api_name="Pad")


def PadInDim(operand: XlaOp, padding_value: XlaOp, dimno: int, pad_lo: int,
             pad_hi: int) -> XlaOp:
    """Edge-pad dimension `dimno` only (XlaBuilder's PadInDim)."""
    b = operand.builder
    shape = _shape_of(operand)
    if shape is None:
        return XlaOp(b, None)
    if not shape.is_array or not 0 <= int(dimno) < shape.rank:
        return b.report_error("PadInDim", f"dimno {dimno} is out of range for {shape}")
    config = PaddingConfig([PaddingConfigDimension() for _ in range(shape.rank)])
    config.dimensions[dimno] = PaddingConfigDimension(int(pad_lo), int(pad_hi), 0)
    return b.add_op("pad", [operand, padding_value], _pad_attrs(config), api_name="PadInDim")


# ---- iota -------------------------------------------------------------------------------------
_IOTA = ((("builder", "shape", "iota_dimension"), {}), (("builder", "type", "size"), {}))


def Iota(*args: Any, **kwargs: Any) -> XlaOp:
    """`Iota(builder, type, size)`: a rank-1 0..size-1; `Iota(builder, shape,
    iota_dimension)`: counts along one dimension of `shape` (both xla_client forms)."""
    form, a = bind_overload("Iota", args, kwargs, _IOTA,
                            lambda i, a: i == 1 or isinstance(a["shape"], Shape))
    if form == 0:
        return _iota(a["builder"], a["shape"], a["iota_dimension"])
    return _iota(a["builder"], a["type"], a["size"])


Iota.overloads = names_of(_IOTA)  # type: ignore[attr-defined]


def _iota(builder: XlaBuilder, shape_or_type: Shape | Any, size_or_dimension: int) -> XlaOp:
    if isinstance(shape_or_type, Shape):
        shape, dim = shape_or_type, int(size_or_dimension)
    else:
        try:
            et = as_element_type(shape_or_type)
            size = int(size_or_dimension)
            if size < 0:
                return builder.report_error("Iota", f"size {size} is negative")
            shape = Shape.array(et, (size,))
        except (XlapyError, TypeError, ValueError) as e:
            return builder.report_error("Iota", f"bad element type {shape_or_type!r} or size "
                                        f"{size_or_dimension!r}: {e}")
        dim = 0
    return builder.add_op("iota", [], IotaAttrs(shape, dim), api_name="Iota")
