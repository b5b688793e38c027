"""Builder ops: TopK and ApproxTopK (xla/hlo/builder/lib/approx_topk.h).

TopK is chlo.top_k (the k largest along the last dimension, sorted, with s32 indices).
ApproxTopK is built as XLA builds it for a non-TPU backend (ApproxTopKFallback): sort the
operands along `reduction_dim` with `comparator` and keep the first output-size entries of
each. With aggregate_to_topk the output size is top_k; without it, the size a TPU's
partial reduction would produce (ApproxTopKReductionOutputSize, XLA's approx_topk.cc:
windows of the TPU tile, 1024 for rank 1 and 128 otherwise, enough of them for the recall
target), so programs see the shapes they see under XLA.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp, tuple_op
from xlapy.ops.reduction_sort import SortAttrs
from xlapy.ops.shape import SliceAttrs
from xlapy.stablehlo.chlo_ops import TopKAttrs

__all__ = ["TopK", "ApproxTopK", "ApproxTopKFallback", "ApproxTopKReductionOutputSize"]


def TopK(input: XlaOp, k: int) -> XlaOp:  # noqa: A002 (xla_client's name)
    """(values, s32 indices): the k largest entries along the last dimension, sorted."""
    return input.builder.add_op("chlo.top_k", [input], TopKAttrs(int(k)), api_name="TopK")


def _tile(rank: int) -> int:
    return 1024 if rank == 1 else 128


def _log2_floor(n: int) -> int:
    return n.bit_length() - 1


def _log2_ceiling(n: int) -> int:
    return _log2_floor(n) + (0 if n & (n - 1) == 0 else 1)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def ApproxTopKReductionOutputSize(input_size: int, rank: int, top_k: int,
                                  recall_target: float, aggregate_to_topk: bool = True,
                                  input_size_override: int = -1) -> tuple[int, int]:
    """(output size, log2 of the reduction) of ApproxTopK along a dimension of `input_size`
    (XLA's ApproxTopKReductionOutputSize; -1 for aggregate_to_topk, 0 for no reduction).
    An override below the size or a recall target outside (0, 1] is an error (a ValueError
    here, a BuilderError naming the function through `ops`)."""
    n, k, override = int(input_size), int(top_k), int(input_size_override)
    if aggregate_to_topk:
        return k, -1
    tile = _tile(int(rank))
    if n <= tile:
        return n, 0
    if 0 <= override < n:
        raise ValueError(f"reduction_input_size_override {override} should be at least the "
                         f"reduction dimension's size {n}")
    logical = override if override >= 0 else n
    if k == 1:
        return tile, _log2_ceiling(_ceil_div(logical, tile))
    recall = float(recall_target)
    if not 0.0 < recall <= 1.0:
        raise ValueError(f"recall_target {recall_target} should be in (0, 1]")
    if recall == 1.0:
        return n, 0
    # Expected recall of K top elements in M windows: ((M-1)/M)^(K-1) >= recall.
    m = min(max(int((1.0 - k) / float(np.log(recall))), tile), logical)
    log2_reduction = _log2_floor(logical // m)
    if log2_reduction == 0:
        return n, 0
    log2_reduction = min(log2_reduction, _log2_ceiling(n // tile))
    return _ceil_div(_ceil_div(n, tile), 1 << log2_reduction) * tile, log2_reduction


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
    try:
        size, _ = ApproxTopKReductionOutputSize(n, s.rank, k, recall_target,
                                                bool(aggregate_to_topk), override)
    except ValueError as e:
        return builder.report_error(api, str(e))
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
