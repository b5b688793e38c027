"""Builder ops: TopK and ApproxTopK (xla/hlo/builder/lib/approx_topk.h).

TopK is chlo.top_k (the k largest along the last dimension, sorted, with s32 indices).
ApproxTopK is built as XLA builds it for a non-TPU backend (ApproxTopKFallback): sort the
operands along `reduction_dim` with `comparator` and keep the first output-size entries of
each. With aggregate_to_topk the output size is top_k; without it XLA's
ApproxTopKReductionOutputSize decides, which for a reduction dimension up to the TPU tile
(1024 for rank 1, 128 otherwise) is the whole dimension; larger ones are reported as not
built (that size rule's TPU window arithmetic is not written here yet).
"""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp, tuple_op
from xlapy.ops.reduction_sort import SortAttrs
from xlapy.ops.shape import SliceAttrs
from xlapy.stablehlo.chlo_ops import TopKAttrs

__all__ = ["TopK", "ApproxTopK", "ApproxTopKFallback"]


def TopK(input: XlaOp, k: int) -> XlaOp:  # noqa: A002 (xla_client's name)
    """(values, s32 indices): the k largest entries along the last dimension, sorted."""
    return input.builder.add_op("chlo.top_k", [input], TopKAttrs(int(k)), api_name="TopK")


def _tile(rank: int) -> int:
    return 1024 if rank == 1 else 128


def _approx(api: str, builder: XlaBuilder, operands: Sequence[XlaOp],
            init_values: Sequence[XlaOp], top_k: int, reduction_dim: int,
            comparator: XlaComputation, recall_target: float, aggregate_to_topk: bool,
            reduction_input_size_override: int) -> XlaOp:
    ops, inits = list(operands), list(init_values)
    if not ops or len(ops) != len(inits):
        return builder.report_error(api, f"{len(ops)} operands and {len(inits)} init_values: "
                                    "need one init value per operand, at least one")
    if any(not isinstance(o, XlaOp) for o in ops + inits):
        return builder.report_error(api, "operands and init_values must be XlaOps")
    if any(not o.ok for o in ops + inits):
        return XlaOp(builder, None)
    s = ops[0].shape()
    if not s.is_array or s.rank == 0:
        return builder.report_error(api, f"operand {s} must be an array of rank >= 1")
    dim = int(reduction_dim)
    if not -s.rank <= dim < s.rank:
        return builder.report_error(api, f"reduction_dim {dim} is out of range for {s}")
    dim %= s.rank
    n = s.dimensions[dim]
    k = int(top_k)
    if not 0 <= k <= n:
        return builder.report_error(api, f"top_k {k} is outside [0, {n}]")
    if not 0.0 < float(recall_target) <= 1.0:
        return builder.report_error(api, f"recall_target {recall_target} is not in (0, 1]")
    override = int(reduction_input_size_override)
    if override >= 0 and override < n:
        return builder.report_error(api, f"reduction_input_size_override {override} is "
                                    f"below the reduction dimension's size {n}")
    if aggregate_to_topk:
        size = k
    elif n <= _tile(s.rank):
        size = n
    else:
        return builder.report_error(
            api, f"not implemented in xlapy: aggregate_to_topk=False over a reduction "
            f"dimension of {n} > {_tile(s.rank)} (XLA's approximate output size rule)")
    sorted_ = builder.add_op("sort", ops, SortAttrs(dim, False), [comparator], api_name=api)
    outs = []
    for i, o in enumerate(ops):
        v = sorted_ if len(ops) == 1 else builder.add_op(
            "get_tuple_element", [sorted_], _gte(i), api_name=api)
        limit = list(o.shape().dimensions)
        limit[dim] = size
        outs.append(builder.add_op("slice", [v], SliceAttrs(
            (0,) * s.rank, tuple(limit), (1,) * s.rank), api_name=api))
    return tuple_op(builder, outs)


def _gte(i: int) -> object:
    from xlapy.ops.core import GetTupleElementAttrs

    return GetTupleElementAttrs(i)


def ApproxTopK(builder: XlaBuilder, operands: Sequence[XlaOp], init_values: Sequence[XlaOp],
               top_k: int, reduction_dim: int, comparator: XlaComputation,
               recall_target: float = 0.9, aggregate_to_topk: bool = True,
               reduction_input_size_override: int = -1) -> XlaOp:
    """A tuple of the operands' first entries along `reduction_dim` in `comparator` order
    (exact on this backend, as XLA's CPU fallback; see the module docstring)."""
    return _approx("ApproxTopK", builder, operands, init_values, top_k, reduction_dim,
                   comparator, recall_target, aggregate_to_topk, reduction_input_size_override)


def ApproxTopKFallback(builder: XlaBuilder, operands: Sequence[XlaOp],
                       init_values: Sequence[XlaOp], top_k: int, reduction_dim: int,
                       comparator: XlaComputation, recall_target: float = 0.9,
                       aggregate_to_topk: bool = True,
                       reduction_input_size_override: int = -1) -> XlaOp:
    """XLA's sort-and-slice ApproxTopK, what ApproxTopK builds here too."""
    return _approx("ApproxTopKFallback", builder, operands, init_values, top_k,
                   reduction_dim, comparator, recall_target, aggregate_to_topk,
                   reduction_input_size_override)
