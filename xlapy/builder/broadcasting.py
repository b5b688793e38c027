"""Seed 001's "Broadcasting semantics" for binary builder ops: InDim and degenerate dims.

The IR's element-wise ops take same-shaped operands (StableHLO); the builder inserts the
explicit broadcast_in_dim ops, as XLA's builder does.
"""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.builder.xla_builder import XlaBuilder, XlaOp
from xlapy.ops.shape import BroadcastInDimAttrs
from xlapy.types import Shape


class BroadcastError(ValueError):
    pass


def broadcast_shapes(lhs: Shape, rhs: Shape, broadcast_dimensions: Sequence[int]
                     ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(lhs intermediate dims, rhs intermediate dims, result dims) or BroadcastError.

    A lower-rank operand is first raised to the higher rank through `broadcast_dimensions`
    (InDim broadcasting; a scalar needs none); then same-rank dims broadcast where one is 1.
    """
    bdims = tuple(int(d) for d in broadcast_dimensions)
    lo, hi = (lhs, rhs) if lhs.rank <= rhs.rank else (rhs, lhs)
    lo_dims, hi_dims = lo.dimensions, hi.dimensions
    if lo.rank != hi.rank:
        if not bdims:
            if lo.rank != 0:
                raise BroadcastError(
                    f"shapes {lhs} and {rhs} have different ranks; broadcast_dimensions must "
                    "map the lower-rank operand's dimensions"
                )
            lo_dims = (1,) * hi.rank
        else:
            if len(bdims) != lo.rank:
                raise BroadcastError(
                    f"broadcast_dimensions {list(bdims)} must have one entry per dimension of the "
                    f"lower-rank operand {lo}"
                )
            if any(b <= a for a, b in zip(bdims, bdims[1:])):
                raise BroadcastError(f"broadcast_dimensions {list(bdims)} must be strictly "
                                     "increasing")
            raised = list(hi_dims)
            for i, d in enumerate(bdims):
                if not 0 <= d < hi.rank:
                    raise BroadcastError(
                        f"broadcast dimension {d} is out of range for {hi} (rank {hi.rank})"
                    )
                if lo_dims[i] != hi_dims[d] and 1 not in (lo_dims[i], hi_dims[d]):
                    raise BroadcastError(
                        f"dimension {i} of {lo} (size {lo_dims[i]}) does not match dimension {d} "
                        f"of {hi} (size {hi_dims[d]})"
                    )
                raised[d] = lo_dims[i]
            lo_dims = tuple(raised)
    elif bdims and bdims != tuple(range(lhs.rank)):
        raise BroadcastError(
            f"broadcast_dimensions {list(bdims)} given for operands {lhs} and {rhs} of the same "
            "rank (only the identity is allowed)"
        )
    result = []
    for i, (a, b) in enumerate(zip(lo_dims, hi_dims)):
        if a != b and 1 not in (a, b):
            raise BroadcastError(f"shapes {lhs} and {rhs} are incompatible: dimension {i} has "
                                 f"sizes {a} and {b}")
        result.append(b if a == 1 else a)
    if lhs.rank <= rhs.rank:
        return lo_dims, hi_dims, tuple(result)
    return hi_dims, lo_dims, tuple(result)


def _raise_to(op: XlaOp, result: tuple[int, ...], bdims: Sequence[int], api_name: str) -> XlaOp:
    shape = op.shape()
    if shape.dimensions == result:
        return op
    b = op.builder
    if shape.rank == 0:
        return b.add_op("broadcast_in_dim", [op], BroadcastInDimAttrs(result, ()),
                        api_name=api_name)
    if shape.rank != len(result):
        # InDim: operand dim i goes to bdims[i]; degenerate sizes broadcast in the same op.
        dims = tuple(int(d) for d in bdims)
    else:
        dims = tuple(range(shape.rank))
    return b.add_op("broadcast_in_dim", [op], BroadcastInDimAttrs(result, dims),
                    api_name=api_name)


def binary(builder_name: str, opcode: str, lhs: XlaOp, rhs: XlaOp,
           broadcast_dimensions: Sequence[int] = (), attrs: object = None) -> XlaOp:
    """Emit `opcode(lhs, rhs)` after seed-001 broadcasting; errors name `builder_name`."""
    b: XlaBuilder = lhs.builder
    if not isinstance(rhs, XlaOp) or rhs.builder is not b:
        return b.report_error(builder_name, "operands come from different builders")
    if not (lhs.ok and rhs.ok):
        return XlaOp(b, None)
    ls, rs = lhs.shape(), rhs.shape()
    if ls.is_array and rs.is_array:
        try:
            _, _, result = broadcast_shapes(ls, rs, broadcast_dimensions)
        except BroadcastError as e:
            return b.report_error(builder_name, f"broadcasting: {e}")
        lhs = _raise_to(lhs, result, broadcast_dimensions, builder_name)
        rhs = _raise_to(rhs, result, broadcast_dimensions, builder_name)
    if attrs is None:
        return b.add_op(opcode, [lhs, rhs], api_name=builder_name)
    return b.add_op(opcode, [lhs, rhs], attrs, api_name=builder_name)
