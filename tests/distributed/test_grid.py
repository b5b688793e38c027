"""The threaded process grid: every collective and every group strategy on 1x4, 2x2 and 4x2
grids, checked against process groups and results computed here in numpy from the spec's
definitions (not from xlapy.ops.collectives)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp
from xlapy.distributed import ProcessGrid, execute_replicated
from xlapy.types import ElementType, Shape

GRIDS = [(1, 4), (2, 2), (4, 2)]
F32 = Shape.scalar(ElementType.F32)
S32 = Shape.scalar(ElementType.S32)
X = Shape.array(ElementType.F32, (8, 8))
Pid = tuple[int, int]


def inputs(nr: int, np_: int, seed: int = 0) -> dict[Pid, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {(r, p): rng.integers(-50, 50, (8, 8)).astype(np.float32)
            for r in range(nr) for p in range(np_)}


def make_groups(n: int) -> list[list[int]]:
    """Two groups in scrambled order (one group for n <= 2) covering 0..n-1."""
    if n == 1:
        return [[0]]
    if n == 2:
        return [[1, 0]]
    return [list(range(n - 1, -1, -2)), list(range(0, n, 2))]


def spec_groups(strategy: str, groups: list[list[int]], nr: int, np_: int) -> list[list[Pid]]:
    """Spec §Collective ops: the four ways replica_groups name processes."""
    if strategy == "cross_replica":
        return [[(r, p) for r in g] for g in groups for p in range(np_)]
    if strategy == "cross_partition":
        return [[(r, p) for p in g] for g in groups for r in range(nr)]
    if strategy == "cross_replica_and_partition":
        return [[(r, p) for p in range(np_) for r in g] for g in groups]
    assert strategy == "flattened_ids"
    return [[divmod(i, np_) for i in g] for g in groups]


def group_of(pid: Pid, groups: list[list[Pid]]) -> list[Pid]:
    (g,) = [g for g in groups if pid in g]
    return g


def add() -> XlaComputation:
    b = XlaBuilder("add")
    ops.Add(b.parameter(0, F32), b.parameter(1, F32))
    return b.build()


def build(fn: Callable[[XlaOp], XlaOp]) -> XlaComputation:
    b = XlaBuilder("spmd")
    fn(b.parameter(0, X))
    return b.build()


def run(comp: XlaComputation, nr: int, np_: int, xs: dict[Pid, np.ndarray]) -> dict[Pid, Any]:
    grid = ProcessGrid(nr, np_, timeout=10)
    out = grid.run_computation(comp, [[xs[pid]] for pid in grid.pids])
    return dict(zip(grid.pids, out))


# strategy -> (channel_id, use_global_device_ids, id space size)
REDUCING = {
    "cross_replica": (0, False, lambda nr, np_: nr),
    "cross_replica_and_partition": (1, False, lambda nr, np_: nr),
    "flattened_ids": (1, True, lambda nr, np_: nr * np_),
}


@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
@pytest.mark.parametrize("strategy", list(REDUCING))
@pytest.mark.parametrize("op", ["all_gather", "all_reduce", "reduce_scatter"])
def test_group_collectives(grid: tuple[int, int], strategy: str, op: str) -> None:
    nr, np_ = grid
    channel, glob, size = REDUCING[strategy]
    ids = make_groups(size(nr, np_))
    groups = spec_groups(strategy, ids, nr, np_)
    n = len(groups[0])
    kw = {"channel_id": channel or None, "use_global_device_ids": glob or None}
    if op == "all_gather":
        comp = build(lambda x: ops.AllGather(x, 1, n, ids, **kw))
    elif op == "all_reduce":
        comp = build(lambda x: ops.AllReduce(x, add(), ids, **kw))
    else:
        comp = build(lambda x: ops.ReduceScatter(x, add(), 0, n, ids, **kw))
    xs = inputs(nr, np_)
    out = run(comp, nr, np_, xs)
    for pid, got in out.items():
        g = group_of(pid, groups)
        if op == "all_gather":
            want = np.concatenate([xs[q] for q in g], axis=1)
        elif op == "all_reduce":
            want = sum(xs[q] for q in g)
        else:
            want = np.split(sum(xs[q] for q in g), n, axis=0)[g.index(pid)]
        np.testing.assert_array_equal(got, want, err_msg=f"{op} {strategy} {pid}")


# all_to_all / collective_permute / collective_broadcast: channel 0 groups replicas, channel > 0
# groups partitions (spec: cross_replica / cross_partition).
PAIRWISE = {"cross_replica": 0, "cross_partition": 1}


def _space(strategy: str, nr: int, np_: int) -> int:
    return nr if strategy == "cross_replica" else np_


@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
@pytest.mark.parametrize("strategy", list(PAIRWISE))
def test_all_to_all(grid: tuple[int, int], strategy: str) -> None:
    nr, np_ = grid
    ids = make_groups(_space(strategy, nr, np_))
    groups = spec_groups(strategy, ids, nr, np_)
    n = len(groups[0])
    comp = build(lambda x: ops.AllToAll(x, 1, 0, n, ids, channel_id=PAIRWISE[strategy] or None))
    xs = inputs(nr, np_, 1)
    for pid, got in run(comp, nr, np_, xs).items():
        g = group_of(pid, groups)
        want = np.concatenate([np.split(xs[q], n, axis=1)[g.index(pid)] for q in g], axis=0)
        np.testing.assert_array_equal(got, want, err_msg=f"{strategy} {pid}")


def _with_id(pid: Pid, i: int, strategy: str) -> Pid:
    return (i, pid[1]) if strategy == "cross_replica" else (pid[0], i)


def _id(pid: Pid, strategy: str) -> int:
    return pid[0] if strategy == "cross_replica" else pid[1]


@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
@pytest.mark.parametrize("strategy", list(PAIRWISE))
def test_collective_permute(grid: tuple[int, int], strategy: str) -> None:
    nr, np_ = grid
    n = _space(strategy, nr, np_)
    # a cyclic shift with one pair dropped (when n > 2), so one target receives nothing
    pairs = [(i, (i + 1) % n) for i in range(n)][: n - 1 if n > 2 else n]
    comp = build(lambda x: ops.CollectivePermute(x, pairs, PAIRWISE[strategy] or None))
    xs = inputs(nr, np_, 2)
    for pid, got in run(comp, nr, np_, xs).items():
        src = [s for s, t in pairs if t == _id(pid, strategy)]
        want = xs[_with_id(pid, src[0], strategy)] if src else np.zeros((8, 8), np.float32)
        np.testing.assert_array_equal(got, want, err_msg=f"{strategy} {pid}")


@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
@pytest.mark.parametrize("strategy", list(PAIRWISE))
def test_collective_broadcast(grid: tuple[int, int], strategy: str) -> None:
    nr, np_ = grid
    n = _space(strategy, nr, np_)
    ids = [[n - 1, 0]] if n > 2 else [list(range(n))[::-1]]  # id 1..n-2 in no group
    comp = build(lambda x: ops.CollectiveBroadcast(x, ids, PAIRWISE[strategy] or None))
    xs = inputs(nr, np_, 3)
    for pid, got in run(comp, nr, np_, xs).items():
        g = [g for g in ids if _id(pid, strategy) in g]
        want = xs[_with_id(pid, g[0][0], strategy)] if g else np.zeros((8, 8), np.float32)
        np.testing.assert_array_equal(got, want, err_msg=f"{strategy} {pid}")


@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
def test_cross_replica_sum_and_ids(grid: tuple[int, int]) -> None:
    nr, np_ = grid

    def fn(x: XlaOp) -> XlaOp:
        b = x.builder
        rid = ops.ConvertElementType(ops.ReplicaId(b), ElementType.F32)
        pid = ops.ConvertElementType(ops.PartitionId(b), ElementType.F32)
        return ops.Tuple(b, [ops.CrossReplicaSum(x), ops.Add(ops.Mul(rid, ops.ConstantR0(
            b, np.float32(10))), pid)])

    xs = inputs(nr, np_, 4)
    for (r, p), (total, ident) in run(build(fn), nr, np_, xs).items():
        np.testing.assert_array_equal(total, sum(xs[(q, p)] for q in range(nr)))
        assert ident == 10 * r + p


def _max_s32() -> XlaComputation:
    b = XlaBuilder("max")
    ops.Max(b.parameter(0, S32), b.parameter(1, S32))
    return b.build()


def test_variadic_all_reduce_any_reducer() -> None:
    b = XlaBuilder("v")
    a = b.parameter(0, Shape.array(ElementType.S32, (3,)))
    c = b.parameter(1, Shape.array(ElementType.S32, (2, 2)))
    ops.AllReduce(ops.Tuple(b, [a, c]), _max_s32(), [[0, 1, 2, 3]])
    rng = np.random.default_rng(5)
    args = [[rng.integers(-9, 9, 3, dtype=np.int32), rng.integers(-9, 9, (2, 2), dtype=np.int32)]
            for _ in range(4)]
    out = execute_replicated(b.build(), args, num_replicas=4)
    for res in out:
        np.testing.assert_array_equal(res[0], np.max([a[0] for a in args], axis=0))
        np.testing.assert_array_equal(res[1], np.max([a[1] for a in args], axis=0))


def test_execute_replicated_spmd_2x2() -> None:
    b = XlaBuilder("ids")
    x = b.parameter(0, Shape.array(ElementType.S32, (2,)))
    rid = ops.ConvertElementType(ops.ReplicaId(b), ElementType.S32)
    ops.Add(ops.AllReduce(x, _max_s32(), [[0, 1], [2, 3]], channel_id=1,
                          use_global_device_ids=True),
            rid)
    args = [[np.array([i, -i], np.int32)] for i in range(4)]
    out = execute_replicated(b.build(), args, num_partitions=2)
    # flattened ids {0, 1} = replica 0 (both partitions), {2, 3} = replica 1
    assert [o[0].tolist() for o in out] == [[1, 0], [1, 0], [4, -1], [4, -1]]
