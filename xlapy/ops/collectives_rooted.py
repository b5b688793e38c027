"""Rooted collectives (newer StableHLO, not in the spec snapshot): collective_broadcast
(one member's operand to the whole group, the root fixed at group index 0 or given by a
`root` operand) and collective_reduce (the group's reduction delivered to the root only).

Imported by xlapy/ops/collectives.py (which re-exports these names).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.errors import CollectiveError
from xlapy.ops.base import VARIADIC, EvalContext, OpDef, Region, check, register
from xlapy.ops.collectives import (
    ProcessId,
    ReplicaGroups,
    _check_groups,
    _check_reducer,
    _check_tensors,
    _reduce_across,
    _result,
    my_group,
    process_of,
    strategy_of,
    unpadded,
)
from xlapy.ops.control_flow import results_shape
from xlapy.types import Shape


def _grid_size(process: Any, channel_id: int) -> int:
    return int(process.num_partitions if channel_id > 0 else process.num_replicas)


def _as_process(i: int, process: Any, channel_id: int) -> ProcessId:
    if channel_id > 0:
        return (int(process.replica_id), i)
    return (i, int(process.partition_id))


# ---- collective_broadcast ---------------------------------------------------------------------
@dataclass(frozen=True)
class CollectiveBroadcastAttrs:
    """`has_dynamic_root`: the last operand is a 1-D integer tensor, one entry per data
    operand, giving the group index whose value that operand takes (else index 0)."""

    replica_groups: ReplicaGroups = ()
    channel_id: int = 0
    has_dynamic_root: bool = False


@register
class CollectiveBroadcast(OpDef):
    """stablehlo.collective_broadcast (newer StableHLO, not in the spec snapshot): the root of
    each replica group (group index 0, or `root[k]` for data operand k when
    has_dynamic_root) sends its operand to the group; processes in no group get zeros."""

    name = "collective_broadcast"
    hlo_name = "collective-broadcast"
    arity = VARIADIC
    attrs = CollectiveBroadcastAttrs
    side_effecting = True
    family = "collectives"

    def infer(self, operands: Sequence[Shape], attrs: CollectiveBroadcastAttrs,
              regions: Sequence[Region]) -> Shape:
        data = list(operands)
        if attrs.has_dynamic_root:
            check(len(data) >= 2, "collective_broadcast_root",
                  "has_dynamic_root needs the data operand(s) and a root operand")
            root = data.pop()
            check(root.is_array and root.rank == 1 and root.element_type.is_integer
                  and root.dimensions[0] == len(data), "collective_broadcast_root",
                  f"root operand {root} must be a 1-D integer tensor of {len(data)} element(s)")
        else:
            check(len(data) == 1, "collective_broadcast_arity",
                  f"expects 1 operand without has_dynamic_root, got {len(data)}")
        for i, s in enumerate(data):
            check(s.is_array, "collective_broadcast_c3", f"operand {i} {s} is not a tensor")
        ids = [i for g in attrs.replica_groups for i in g]
        check(len(set(ids)) == len(ids), "collective_broadcast_c1",
              f"replica_groups {[list(g) for g in attrs.replica_groups]} has repeated ids")
        for i in ids:
            check(i >= 0, "collective_broadcast_c2", f"replica_groups id {i} is negative")
        return results_shape(data)

    def evaluate(self, operands: Sequence[Any], attrs: CollectiveBroadcastAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        process = process_of(ctx)
        data = list(operands)
        roots = [int(r) for r in np.asarray(data.pop())] if attrs.has_dynamic_root else \
            [0] * len(data)
        n = _grid_size(process, attrs.channel_id)
        me = int(process.partition_id if attrs.channel_id > 0 else process.replica_id)
        if any(i >= n for g in attrs.replica_groups for i in g):
            raise CollectiveError(f"{self.name}: replica_groups "
                                  f"{[list(g) for g in attrs.replica_groups]} name ids >= {n}")
        shapes = result.tuple_shapes if result.is_tuple else (result,)
        for g in attrs.replica_groups:
            if me in g:
                bad = [r for r in roots if not 0 <= r < len(g)]
                if bad:
                    raise CollectiveError(f"{self.name}: root {bad[0]} is outside the process "
                                          f"group {list(g)}")
                group = [_as_process(i, process, attrs.channel_id) for i in g]
                values = process.exchange(self.name, group, tuple(data))
                return _result([np.asarray(values[r][k]).copy() for k, r in enumerate(roots)])
        return _result([np.zeros(s.dimensions, s.dtype) for s in shapes])


# ---- collective_reduce ------------------------------------------------------------------------
@dataclass(frozen=True)
class CollectiveReduceAttrs:
    replica_groups: ReplicaGroups = ()
    channel_id: int = 0
    use_global_device_ids: bool = False


@register
class CollectiveReduce(OpDef):
    """stablehlo.collective_reduce (newer StableHLO, not in the spec snapshot; semantics from
    its interpreter test): all_reduce's groups and reducer (spec §all_reduce), but only the
    root (group index 0) receives the reduction; the other members get zeros."""

    name = "collective_reduce"
    hlo_name = "collective-reduce"
    arity = VARIADIC
    attrs = CollectiveReduceAttrs
    num_regions = 1
    side_effecting = True
    family = "collectives"

    def infer(self, operands: Sequence[Shape], attrs: CollectiveReduceAttrs,
              regions: Sequence[Region]) -> Shape:
        _check_tensors(self.name, operands, "collective_reduce_c6")
        _check_groups(self.name, attrs.replica_groups, "collective_reduce_c1",
                      "collective_reduce_c3", ragged=True)
        check(not attrs.use_global_device_ids or attrs.channel_id > 0, "collective_reduce_c4",
              "use_global_device_ids requires channel_id > 0")
        _check_reducer(regions[0], operands, "collective_reduce_c5")
        return results_shape(list(operands))

    def evaluate(self, operands: Sequence[Any], attrs: CollectiveReduceAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        process = process_of(ctx)
        group = my_group(self.name, strategy_of(attrs.channel_id, attrs.use_global_device_ids),
                         unpadded(attrs.replica_groups), process)
        parts = process.exchange(self.name, group, tuple(operands))
        if group[0] != (int(process.replica_id), int(process.partition_id)):
            return _result([np.zeros_like(np.asarray(x)) for x in operands])
        return _result(_reduce_across(parts, ctx))
