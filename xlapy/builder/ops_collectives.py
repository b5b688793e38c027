"""Builder ops: collectives (seed 000 §AllGather, §AllReduce, §AllToAll, §CollectivePermute,
§CrossReplicaSum; jax xla_client spellings)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp, get_tuple_element
from xlapy.ops.attrs import ChannelHandle
from xlapy.ops.collectives import (
    AllGatherAttrs,
    AllReduceAttrs,
    AllToAllAttrs,
    CollectiveBroadcastAttrs,
    CollectivePermuteAttrs,
    ReduceScatterAttrs,
)

__all__ = [
    "AllGather", "AllReduce", "AllToAll", "CollectivePermute", "CollectiveBroadcast",
    "CrossReplicaSum", "ReduceScatter",
]


def _groups(replica_groups: Any) -> tuple[tuple[int, ...], ...]:
    """Accept [[0, 1], [2, 3]] or objects with `replica_ids` (xla_client.ReplicaGroup)."""
    out = []
    for g in replica_groups or ():
        ids = getattr(g, "replica_ids", g)
        out.append(tuple(int(i) for i in ids))
    return tuple(out)


def _channel(channel_id: ChannelHandle | int | None) -> int:
    if channel_id is None:
        return 0
    if isinstance(channel_id, ChannelHandle):
        return channel_id.handle
    return int(channel_id)


def _operands(operand: XlaOp) -> tuple[list[XlaOp], bool]:
    """A tuple operand's elements (XLA reduces each), else the operand itself."""
    if operand.ok and operand.shape().is_tuple:
        n = len(operand.shape().tuple_shapes)
        return [get_tuple_element(operand, i) for i in range(n)], True
    return [operand], False


def _repack(builder: XlaBuilder, op: XlaOp, n: int, was_tuple: bool) -> XlaOp:
    if was_tuple and n == 1 and op.ok:
        return builder.add_op("tuple", [op], api_name="Tuple")
    return op


def AllGather(operand: XlaOp, all_gather_dimension: int, shard_count: int = 1,
              replica_groups: Any = (), channel_id: ChannelHandle | int | None = None,
              shape_with_layout: Any = None, use_global_device_ids: bool | None = None
              ) -> XlaOp:
    """Concatenate the group's operands along `all_gather_dimension` (`shape_with_layout`
    is a physical layout hint, without effect on values)."""
    del shape_with_layout
    b = operand.builder
    ops, was_tuple = _operands(operand)
    attrs = AllGatherAttrs(int(all_gather_dimension), _groups(replica_groups),
                           _channel(channel_id), bool(use_global_device_ids), int(shard_count))
    return _repack(b, b.add_op("all_gather", ops, attrs, api_name="AllGather"), len(ops),
                   was_tuple)


def AllReduce(operand: XlaOp, computation: XlaComputation, replica_groups: Any = (),
              channel_id: ChannelHandle | int | None = None, shape_with_layout: Any = None,
              use_global_device_ids: bool | None = None) -> XlaOp:
    """Reduce the group's operands element-wise with `computation`; tuples reduce per element.
    """
    del shape_with_layout
    b = operand.builder
    ops, was_tuple = _operands(operand)
    attrs = AllReduceAttrs(_groups(replica_groups), _channel(channel_id),
                           bool(use_global_device_ids))
    return _repack(b, b.add_op("all_reduce", ops, attrs, [computation], api_name="AllReduce"),
                   len(ops), was_tuple)


def _add_computation(operand: XlaOp) -> XlaComputation | None:
    from xlapy.builder.ops_elementwise import Add
    from xlapy.types import Shape

    shape = operand.shape()
    leaf = shape.tuple_shapes[0] if shape.is_tuple and shape.tuple_shapes else shape
    if not leaf.is_array:
        return None
    sub = XlaBuilder(f"{operand.builder.name}.add")
    scalar = Shape.scalar(leaf.element_type)
    Add(sub.parameter(0, scalar), sub.parameter(1, scalar))
    return sub.build()


def CrossReplicaSum(operand: XlaOp, replica_groups: Any = ()) -> XlaOp:
    """AllReduce with a summation (seed 000 §CrossReplicaSum)."""
    if not operand.ok:
        return operand
    comp = _add_computation(operand)
    if comp is None:
        return operand.builder.report_error("CrossReplicaSum",
                                            f"operand {operand.shape()} is not an array")
    return AllReduce(operand, comp, replica_groups)


def ReduceScatter(operand: XlaOp, computation: XlaComputation, scatter_dimension: int,
                  shard_count: int = 1, replica_groups: Any = (),
                  channel_id: ChannelHandle | int | None = None, layout: Any = None,
                  use_global_device_ids: bool | None = None) -> XlaOp:
    """All-reduce, then keep this process's part along `scatter_dimension`."""
    del layout
    b = operand.builder
    ops, was_tuple = _operands(operand)
    attrs = ReduceScatterAttrs(int(scatter_dimension), _groups(replica_groups),
                               _channel(channel_id), bool(use_global_device_ids),
                               int(shard_count))
    return _repack(b, b.add_op("reduce_scatter", ops, attrs, [computation],
                               api_name="ReduceScatter"), len(ops), was_tuple)


def AllToAll(operand: XlaOp, split_dimension: int, concat_dimension: int, split_count: int,
             replica_groups: Any = (), layout: Any = None,
             channel_id: ChannelHandle | int | None = None) -> XlaOp:
    """Split along `split_dimension`, scatter the parts, concatenate along
    `concat_dimension`."""
    del layout
    attrs = AllToAllAttrs(int(split_dimension), int(concat_dimension), int(split_count),
                          _groups(replica_groups), _channel(channel_id))
    return operand.builder.add_op("all_to_all", [operand], attrs, api_name="AllToAll")


def CollectivePermute(operand: XlaOp, source_target_pairs: Sequence[tuple[int, int]],
                      channel_id: ChannelHandle | int | None = None) -> XlaOp:
    """Send the operand from each source to its target; non-targets get zeros."""
    pairs = tuple(tuple(int(i) for i in p) for p in source_target_pairs)
    attrs = CollectivePermuteAttrs(pairs, _channel(channel_id))  # type: ignore[arg-type]
    return operand.builder.add_op("collective_permute", [operand], attrs,
                                  api_name="CollectivePermute")


def CollectiveBroadcast(operand: XlaOp, replica_groups: Any = (),
                        channel_id: ChannelHandle | int | None = None) -> XlaOp:
    """Each group's first process broadcasts its operand to the group."""
    attrs = CollectiveBroadcastAttrs(_groups(replica_groups), _channel(channel_id))
    return operand.builder.add_op("collective_broadcast", [operand], attrs,
                                  api_name="CollectiveBroadcast")
