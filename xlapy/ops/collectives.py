"""Collective ops: all_gather, all_reduce, all_to_all, collective_permute,
collective_broadcast, reduce_scatter (spec §Collective ops and each op's section).

Evaluation goes through a `ProcessGroupHandle` (`ctx.process`). Without one, the program runs
on a 1x1 process grid (`LocalProcess`): every process group is `[(0, 0)]`, so all_reduce and
all_gather return their operand, and replica_groups naming any other process are an error.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from xlapy.errors import CollectiveError
from xlapy.ops.base import HLO_NAMES, VARIADIC, EvalContext, OpDef, Region, check, register
from xlapy.ops.control_flow import (
    called,
    check_region_signature,
    map_whole_arrays,
    region_results,
    results_shape,
)
from xlapy.types import Shape, from_dtype

ProcessId = tuple[int, int]  # (replica_id, partition_id)
ReplicaGroups = tuple[tuple[int, ...], ...]


class ProcessGroupHandle(Protocol):
    """What a process of the grid offers collectives and channels.

    `exchange(key, group, value)` is the one collective primitive: every process of `group`
    (process ids in group order, this process among them) calls it with the same `key` and its
    own value, and each gets the list of all members' values in group order. `send`/`recv`
    move values through device-to-device channels.
    """

    @property
    def replica_id(self) -> int: ...

    @property
    def partition_id(self) -> int: ...

    @property
    def num_replicas(self) -> int: ...

    @property
    def num_partitions(self) -> int: ...

    def exchange(self, key: str, group: Sequence[ProcessId], value: Any) -> list[Any]: ...

    def send(self, channel_id: int, value: Any) -> None: ...

    def recv(self, channel_id: int) -> Any: ...


class LocalProcess:
    """The single process of a 1x1 grid: collectives exchange with itself only."""

    replica_id = 0
    partition_id = 0
    num_replicas = 1
    num_partitions = 1

    def exchange(self, key: str, group: Sequence[ProcessId], value: Any) -> list[Any]:
        if list(group) != [(0, 0)]:
            raise CollectiveError(f"{key}: process group {list(group)} names processes other "
                                  "than (0, 0), but there is no process grid (1x1)")
        return [value]

    def send(self, channel_id: int, value: Any) -> None:
        raise CollectiveError(f"send: channel {channel_id} has no receiver on a 1x1 grid")

    def recv(self, channel_id: int) -> Any:
        raise CollectiveError(f"recv: channel {channel_id} has no sender on a 1x1 grid")


LOCAL_PROCESS = LocalProcess()


def process_of(ctx: EvalContext) -> Any:
    return ctx.process if ctx.process is not None else LOCAL_PROCESS


# ---- process groups (spec §Collective ops) ----------------------------------------------------
def process_groups(op: str, strategy: str, groups: ReplicaGroups, process: Any
                   ) -> list[list[ProcessId]]:
    """Split the grid by `strategy` (cross_replica, cross_partition,
    cross_replica_and_partition, flattened_ids); empty `groups` means one group of all."""
    nr, np_ = int(process.num_replicas), int(process.num_partitions)
    size = {"cross_partition": np_, "flattened_ids": nr * np_}.get(strategy, nr)
    groups = unpadded(groups)
    if not groups:
        groups = (tuple(range(size)),)
    ids = [i for g in groups for i in g]
    if sorted(ids) != list(range(size)):
        raise CollectiveError(
            f"{op}: replica_groups {[list(g) for g in groups]} must cover ids 0..{size - 1} "
            f"exactly once ({strategy} on a {nr}x{np_} process grid)")
    if strategy == "cross_replica":
        return [[(r, p) for r in g] for g in groups for p in range(np_)]
    if strategy == "cross_partition":
        return [[(r, p) for p in g] for g in groups for r in range(nr)]
    if strategy == "cross_replica_and_partition":
        return [[(r, p) for p in range(np_) for r in g] for g in groups]
    return [[(f // np_, f % np_) for f in g] for g in groups]


def strategy_of(channel_id: int, use_global_device_ids: bool, partition_kind: bool = False
                ) -> str:
    """The grouping strategy the spec picks from channel_id / use_global_device_ids."""
    if channel_id <= 0:
        return "cross_replica"
    if partition_kind:
        return "cross_partition"
    return "flattened_ids" if use_global_device_ids else "cross_replica_and_partition"


def my_group(op: str, strategy: str, groups: ReplicaGroups, process: Any) -> list[ProcessId]:
    me = (int(process.replica_id), int(process.partition_id))
    for g in process_groups(op, strategy, groups, process):
        if me in g:
            return g
    raise CollectiveError(f"{op}: process {me} is in no process group")


def unpadded(groups: ReplicaGroups) -> ReplicaGroups:
    """Ragged replica_groups come as a rectangle padded with -1 (all_reduce's non-uniform
    groups, as StableHLO's verifier allows): drop the padding."""
    return tuple(tuple(int(i) for i in g if i != -1) for g in groups)


# ---- shared attribute checks ------------------------------------------------------------------
def _check_groups(op: str, groups: ReplicaGroups, unique: str, in_range: str,
                  ragged: bool = False) -> None:
    """`ragged`: groups may differ in size, padded with -1 (all_reduce)."""
    if ragged:
        groups = unpadded(groups)
    ids = [i for g in groups for i in g]
    check(len(set(ids)) == len(ids), unique,
          f"replica_groups {[list(g) for g in groups]} has repeated ids")
    for i in ids:
        check(0 <= i < len(ids), in_range,
              f"replica_groups id {i} is outside [0, {len(ids)})")
    check(ragged or len({len(g) for g in groups}) <= 1, f"{op}_replica_groups",
          f"replica_groups {[list(g) for g in groups]} must all have the same size")


def _group_size(groups: ReplicaGroups, fallback: int) -> int:
    return len(groups[0]) if groups else fallback


def _replica_and_partition_size(attrs: Any, n: int, operands: Sequence[Shape], dim: int,
                                gather: bool) -> int:
    """cross_replica_and_partition groups hold len(group) * num_partitions processes, which
    replica_groups alone cannot tell: a shard_count, or the declared result type (StableHLO
    text carries no shard_count), that is a multiple of it gives the size."""
    if not (attrs.channel_id > 0 and not attrs.use_global_device_ids and attrs.replica_groups):
        return n
    count = int(attrs.shard_count)
    declared = attrs.result_shapes
    if count <= n and declared and len(declared) == len(operands):
        s, r = operands[0], declared[0]
        if (s.is_array and r.is_array and s.rank == r.rank and 0 <= dim < s.rank
                and min(s.dimensions[dim], r.dimensions[dim]) > 0):
            a, b = ((r.dimensions[dim], s.dimensions[dim]) if gather else
                    (s.dimensions[dim], r.dimensions[dim]))
            count = a // b if a % b == 0 else count
    return count if count > n and count % n == 0 else n


def _check_tensors(op: str, operands: Sequence[Shape], label: str) -> None:
    check(len(operands) >= 1, label, "needs at least one operand")
    for i, s in enumerate(operands):
        check(s.is_array, label, f"operand {i} is {s}, not a tensor")


def _check_reducer(region: Region, operands: Sequence[Shape], label: str) -> None:
    """One binary scalar computation `(E, E) -> E` reduces every operand (all of type E)."""
    et = operands[0].element_type
    for i, s in enumerate(operands):
        check(s.element_type == et, label,
              f"operand {i} has element type {s.element_type}, operand 0 has {et}")
    scalar = Shape.scalar(et)
    check_region_signature(region, [scalar, scalar], label, "computation")
    res = region_results(region)
    check(res == [scalar], label, f"computation {region.name} returns "
          f"({', '.join(map(str, res))}), expected {scalar}")


def _result(values: Sequence[Any]) -> Any:
    return values[0] if len(values) == 1 else tuple(values)


def _reduce_across(parts: Sequence[Sequence[np.ndarray]], ctx: EvalContext) -> list[Any]:
    """reduce_without_init over the group's values (group order), per operand."""
    return [functools.reduce(lambda a, b: _combine(ctx, a, b), [p[k] for p in parts])
            for k in range(len(parts[0]))]


def _combine(ctx: EvalContext, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    shape = Shape.array(from_dtype(lhs.dtype), lhs.shape)
    comp = called(ctx, 0)
    if comp is not None:
        out = map_whole_arrays(comp, [lhs, rhs], shape, ctx)
        if out is not None:
            return out
    out = np.empty(lhs.shape, lhs.dtype)
    for idx in np.ndindex(*lhs.shape):
        out[idx] = ctx.call(0, lhs[idx], rhs[idx])
    return out


# ---- all_gather -------------------------------------------------------------------------------
@dataclass(frozen=True)
class AllGatherAttrs:
    """`shard_count` sizes the result when replica_groups is empty (XLA's AllGather)."""

    all_gather_dim: int
    replica_groups: ReplicaGroups = ()
    channel_id: int = 0
    use_global_device_ids: bool = False
    shard_count: int = 1
    result_shapes: tuple[Shape, ...] = ()  # the declared result types (StableHLO text)


@register
class AllGather(OpDef):
    """stablehlo.all_gather: spec §all_gather; XLA AllGather (variadic in newer StableHLO)."""

    name = "all_gather"
    hlo_name = "all-gather"
    arity = VARIADIC
    attrs = AllGatherAttrs
    side_effecting = True
    family = "collectives"

    def infer(self, operands: Sequence[Shape], attrs: AllGatherAttrs,
              regions: Sequence[Region]) -> Shape:
        _check_tensors(self.name, operands, "all_gather_c1")
        _check_groups(self.name, attrs.replica_groups, "all_gather_c2", "all_gather_c4")
        check(not attrs.use_global_device_ids or attrs.channel_id > 0, "all_gather_c5",
              "use_global_device_ids requires channel_id > 0")
        n = _replica_and_partition_size(attrs, _group_size(attrs.replica_groups,
                                                           attrs.shard_count),
                                        operands, attrs.all_gather_dim, gather=True)
        check(n >= 1, "all_gather_c6", f"shard_count {attrs.shard_count} must be positive")
        out = []
        for s in operands:
            d = attrs.all_gather_dim
            check(0 <= d < s.rank, "all_gather_c1",
                  f"all_gather_dim {d} is out of range for rank {s.rank}")
            dims = list(s.dimensions)
            dims[d] *= n
            out.append(s.with_dimensions(dims))
        return results_shape(out)

    def evaluate(self, operands: Sequence[Any], attrs: AllGatherAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        process = process_of(ctx)
        group = my_group(self.name, strategy_of(attrs.channel_id, attrs.use_global_device_ids),
                         attrs.replica_groups, process)
        parts = process.exchange(self.name, group, tuple(operands))
        out = [np.concatenate([p[k] for p in parts], axis=attrs.all_gather_dim)
               for k in range(len(operands))]
        return _checked(self.name, out, result)


def _checked(op: str, out: list[np.ndarray], result: Shape) -> Any:
    shapes = result.tuple_shapes if result.is_tuple else (result,)
    for o, s in zip(out, shapes):
        if o.shape != s.dimensions:
            raise CollectiveError(f"{op}: the process group gives shape {list(o.shape)} but the "
                                  f"op was typed {s} (group size differs from replica_groups)")
    return _result(out)


# ---- all_reduce / cross-replica-sum ------------------------------------------------------------
@dataclass(frozen=True)
class AllReduceAttrs:
    replica_groups: ReplicaGroups = ()
    channel_id: int = 0
    use_global_device_ids: bool = False


@register
class AllReduce(OpDef):
    """stablehlo.all_reduce: spec §all_reduce; XLA AllReduce / CrossReplicaSum (variadic)."""

    name = "all_reduce"
    hlo_name = "all-reduce"
    arity = VARIADIC
    attrs = AllReduceAttrs
    num_regions = 1
    side_effecting = True
    family = "collectives"

    def infer(self, operands: Sequence[Shape], attrs: AllReduceAttrs,
              regions: Sequence[Region]) -> Shape:
        _check_tensors(self.name, operands, "all_reduce_c6")
        _check_groups(self.name, attrs.replica_groups, "all_reduce_c1", "all_reduce_c3",
                      ragged=True)
        check(not attrs.use_global_device_ids or attrs.channel_id > 0, "all_reduce_c4",
              "use_global_device_ids requires channel_id > 0")
        _check_reducer(regions[0], operands, "all_reduce_c5")
        return results_shape(list(operands))

    def evaluate(self, operands: Sequence[Any], attrs: AllReduceAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        process = process_of(ctx)
        group = my_group(self.name, strategy_of(attrs.channel_id, attrs.use_global_device_ids),
                         attrs.replica_groups, process)
        fast = getattr(process, "all_reduce", None)
        kind = _simple_reducer(ctx) if fast is not None else None
        if kind is not None:
            out = fast(self.name, group, tuple(operands), kind)
            if out is not None:
                return _result(out)
        parts = process.exchange(self.name, group, tuple(operands))
        return _result(_reduce_across(parts, ctx))


def _simple_reducer(ctx: EvalContext) -> str | None:
    """'add' / 'multiply' / 'maximum' / 'minimum' when the reducer is just that op on its two
    parameters (a process may then reduce natively, e.g. MPI's Allreduce), else None."""
    comp = called(ctx, 0)
    instrs = getattr(comp, "instructions", None)
    if not instrs or len(instrs) != 3:
        return None
    root = comp.root
    params = [i for i in instrs if i.opcode == "parameter"]
    if (root is None or root.opcode not in ("add", "multiply", "maximum", "minimum")
            or len(params) != 2 or {id(o) for o in root.operands} != {id(p) for p in params}):
        return None
    return str(root.opcode)


HLO_NAMES["cross-replica-sum"] = "all_reduce"


# ---- reduce_scatter ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ReduceScatterAttrs:
    scatter_dimension: int
    replica_groups: ReplicaGroups = ()
    channel_id: int = 0
    use_global_device_ids: bool = False
    shard_count: int = 1
    result_shapes: tuple[Shape, ...] = ()  # the declared result types (StableHLO text)


@register
class ReduceScatter(OpDef):
    """stablehlo.reduce_scatter: spec §reduce_scatter; XLA ReduceScatter."""

    name = "reduce_scatter"
    hlo_name = "reduce-scatter"
    arity = VARIADIC
    attrs = ReduceScatterAttrs
    num_regions = 1
    side_effecting = True
    family = "collectives"

    def infer(self, operands: Sequence[Shape], attrs: ReduceScatterAttrs,
              regions: Sequence[Region]) -> Shape:
        _check_tensors(self.name, operands, "reduce_scatter_c8")
        _check_groups(self.name, attrs.replica_groups, "reduce_scatter_c3", "reduce_scatter_c5")
        check(not attrs.use_global_device_ids or attrs.channel_id > 0, "reduce_scatter_c6",
              "use_global_device_ids requires channel_id > 0")
        _check_reducer(regions[0], operands, "reduce_scatter_c7")
        n = _replica_and_partition_size(attrs, _group_size(attrs.replica_groups,
                                                           attrs.shard_count),
                                        operands, attrs.scatter_dimension, gather=False)
        out = []
        for s in operands:
            d = attrs.scatter_dimension
            check(0 <= d < s.rank, "reduce_scatter_c2",
                  f"scatter_dimension {d} is out of range for rank {s.rank}")
            check(n >= 1 and s.dimensions[d] % n == 0, "reduce_scatter_c1",
                  f"dimension {d} of size {s.dimensions[d]} does not split into {n} parts")
            dims = list(s.dimensions)
            dims[d] //= n
            out.append(s.with_dimensions(dims))
        return results_shape(out)

    def evaluate(self, operands: Sequence[Any], attrs: ReduceScatterAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        process = process_of(ctx)
        group = my_group(self.name, strategy_of(attrs.channel_id, attrs.use_global_device_ids),
                         attrs.replica_groups, process)
        parts = process.exchange(self.name, group, tuple(operands))
        reduced = _reduce_across(parts, ctx)
        me = group.index((int(process.replica_id), int(process.partition_id)))
        out = [np.split(r, len(group), axis=attrs.scatter_dimension)[me] for r in reduced]
        return _checked(self.name, out, result)


# ---- all_to_all -------------------------------------------------------------------------------
@dataclass(frozen=True)
class AllToAllAttrs:
    split_dimension: int
    concat_dimension: int
    split_count: int
    replica_groups: ReplicaGroups = ()
    channel_id: int = 0


@register
class AllToAll(OpDef):
    """stablehlo.all_to_all: spec §all_to_all; XLA AllToAll (variadic in newer StableHLO)."""

    name = "all_to_all"
    hlo_name = "all-to-all"
    arity = VARIADIC
    attrs = AllToAllAttrs
    side_effecting = True
    family = "collectives"

    def infer(self, operands: Sequence[Shape], attrs: AllToAllAttrs,
              regions: Sequence[Region]) -> Shape:
        _check_tensors(self.name, operands, "all_to_all_c1")
        check(attrs.split_count > 0, "all_to_all_c4",
              f"split_count {attrs.split_count} must be positive")
        _check_groups(self.name, attrs.replica_groups, "all_to_all_c5", "all_to_all_c7")
        if attrs.replica_groups:
            check(len(attrs.replica_groups[0]) == attrs.split_count, "all_to_all_c6",
                  f"split_count {attrs.split_count} differs from the replica group size "
                  f"{len(attrs.replica_groups[0])}")
        out = []
        sd, cd, n = attrs.split_dimension, attrs.concat_dimension, attrs.split_count
        for s in operands:
            check(0 <= sd < s.rank, "all_to_all_c1",
                  f"split_dimension {sd} is out of range for rank {s.rank}")
            check(0 <= cd < s.rank, "all_to_all_c3",
                  f"concat_dimension {cd} is out of range for rank {s.rank}")
            check(s.dimensions[sd] % n == 0, "all_to_all_c2",
                  f"dimension {sd} of size {s.dimensions[sd]} does not split into {n} parts")
            dims = list(s.dimensions)
            dims[sd] //= n
            dims[cd] *= n
            out.append(s.with_dimensions(dims))
        return results_shape(out)

    def evaluate(self, operands: Sequence[Any], attrs: AllToAllAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        process = process_of(ctx)
        strategy = strategy_of(attrs.channel_id, False, partition_kind=True)
        group = my_group(self.name, strategy, attrs.replica_groups, process)
        if len(group) != attrs.split_count:
            raise CollectiveError(f"{self.name}: process group of size {len(group)} but "
                                  f"split_count is {attrs.split_count}")
        splits = tuple(np.split(x, attrs.split_count, axis=attrs.split_dimension)
                       for x in operands)
        parts = process.exchange(self.name, group, splits)
        me = group.index((int(process.replica_id), int(process.partition_id)))
        out = [np.concatenate([p[k][me] for p in parts], axis=attrs.concat_dimension)
               for k in range(len(operands))]
        return _checked(self.name, out, result)


# ---- collective_permute ------------------------------------------------------------------------
@dataclass(frozen=True)
class CollectivePermuteAttrs:
    source_target_pairs: tuple[tuple[int, int], ...]
    channel_id: int = 0


def _grid_size(process: Any, channel_id: int) -> int:
    return int(process.num_partitions if channel_id > 0 else process.num_replicas)


def _as_process(i: int, process: Any, channel_id: int) -> ProcessId:
    if channel_id > 0:
        return (int(process.replica_id), i)
    return (i, int(process.partition_id))


@register
class CollectivePermute(OpDef):
    """stablehlo.collective_permute: spec §collective_permute; XLA CollectivePermute."""

    name = "collective_permute"
    hlo_name = "collective-permute"
    arity = 1
    attrs = CollectivePermuteAttrs
    side_effecting = True
    family = "collectives"

    def infer(self, operands: Sequence[Shape], attrs: CollectivePermuteAttrs,
              regions: Sequence[Region]) -> Shape:
        (operand,) = operands
        check(operand.is_array, "collective_permute_c5", f"operand {operand} is not a tensor")
        pairs = attrs.source_target_pairs
        for p in pairs:
            check(len(p) == 2, "collective_permute_c1", f"pair {list(p)} is not (source, target)")
        srcs, tgts = [p[0] for p in pairs], [p[1] for p in pairs]
        check(len(set(srcs)) == len(srcs), "collective_permute_c2",
              f"sources {srcs} are not unique")
        check(len(set(tgts)) == len(tgts), "collective_permute_c3",
              f"targets {tgts} are not unique")
        for i in srcs + tgts:
            check(i >= 0, "collective_permute_c4", f"process id {i} is negative")
        return operand

    def evaluate(self, operands: Sequence[Any], attrs: CollectivePermuteAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        process = process_of(ctx)
        n = _grid_size(process, attrs.channel_id)
        ids = [i for p in attrs.source_target_pairs for i in p]
        if any(i >= n for i in ids):
            raise CollectiveError(f"{self.name}: source_target_pairs "
                                  f"{[list(p) for p in attrs.source_target_pairs]} name ids "
                                  f">= {n} (process grid {process.num_replicas}x"
                                  f"{process.num_partitions})")
        # Everyone sharing this replica (or partition) exchanges; each keeps its source's value.
        group = [_as_process(i, process, attrs.channel_id) for i in range(n)]
        values = process.exchange(self.name, group, operands[0])
        me = int(process.partition_id if attrs.channel_id > 0 else process.replica_id)
        for src, tgt in attrs.source_target_pairs:
            if tgt == me:
                return np.asarray(values[src]).copy()
        return np.zeros(result.dimensions, result.dtype)


# ---- the process grid provider ----------------------------------------------------------------
#: Makes the grid multi-process runs use (`interpreter.run_parallel`, `execute_replicated`):
#: `factory(num_replicas, num_partitions, **options)` returns an object with
#: `run_programs(programs, args, runtime=None, infeed=()) -> [value per process, row-major]`.
#: `xlapy.distributed` registers the threaded grid on import; the MPI launcher swaps in its own.
_GRID_FACTORY: list[Any] = []


def register_grid_factory(factory: Any) -> Any:
    """Make `factory` the one `new_process_grid` uses; returns the previous one (or None)."""
    previous = _GRID_FACTORY[0] if _GRID_FACTORY else None
    _GRID_FACTORY[:] = [factory]
    return previous


def new_process_grid(num_replicas: int, num_partitions: int = 1, **options: Any) -> Any:
    if not _GRID_FACTORY:
        raise CollectiveError(f"no process grid is registered for a {num_replicas}x"
                              f"{num_partitions} run (import xlapy.distributed)")
    return _GRID_FACTORY[0](num_replicas, num_partitions, **options)


# collective_broadcast / collective_reduce (rooted forms) live in a sub-module (600-line cap).
from xlapy.ops.collectives_rooted import (  # noqa: E402,F401
    CollectiveBroadcast,
    CollectiveBroadcastAttrs,
    CollectiveReduce,
    CollectiveReduceAttrs,
)
