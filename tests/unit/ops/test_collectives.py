"""Collectives: shape inference labels, 1x1-grid evaluation, and the spec's 2-process examples
through a small threaded `ProcessGroupHandle`."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp
from xlapy.errors import CollectiveError, ShapeInferenceError
from xlapy.interpreter import Interpreter
from xlapy.ops import HLO_NAMES, infer_shape
from xlapy.ops.collectives import (
    AllGatherAttrs,
    AllReduceAttrs,
    AllToAllAttrs,
    CollectiveBroadcastAttrs,
    CollectivePermuteAttrs,
    ReduceScatterAttrs,
    process_groups,
)
from xlapy.types import ElementType, Shape

F32 = Shape.scalar(ElementType.F32)
S32 = Shape.scalar(ElementType.S32)
M = Shape.array(ElementType.F32, (2, 4))


@dataclass
class R:
    parameter_shapes: list[Shape]
    result_shape: Shape
    multi_result: bool = False
    name: str = field(default="region")


ADD = R([F32, F32], F32)


# ---- shape inference ----------------------------------------------------------------------
def test_all_gather_infer() -> None:
    attrs = AllGatherAttrs(1, ((0, 1),))
    assert infer_shape("all_gather", [M], attrs) == Shape.array(ElementType.F32, (2, 8))
    assert infer_shape("all_gather", [M, M], attrs) == Shape.tuple(
        [Shape.array(ElementType.F32, (2, 8))] * 2)
    assert infer_shape("all_gather", [M], AllGatherAttrs(0, shard_count=3)).dimensions == (6, 4)
    with pytest.raises(ShapeInferenceError, match="all_gather_c1"):
        infer_shape("all_gather", [M], AllGatherAttrs(2))
    with pytest.raises(ShapeInferenceError, match="all_gather_c2"):
        infer_shape("all_gather", [M], AllGatherAttrs(0, ((0, 0),)))
    with pytest.raises(ShapeInferenceError, match="all_gather_c4"):
        infer_shape("all_gather", [M], AllGatherAttrs(0, ((0, 2),)))
    with pytest.raises(ShapeInferenceError, match="all_gather_c5"):
        infer_shape("all_gather", [M], AllGatherAttrs(0, use_global_device_ids=True))
    with pytest.raises(ShapeInferenceError, match="all_gather_replica_groups"):
        infer_shape("all_gather", [M], AllGatherAttrs(0, ((0, 1), (2,))))


def test_all_reduce_infer() -> None:
    assert infer_shape("all_reduce", [M], AllReduceAttrs(), [ADD]) == M
    assert infer_shape("all_reduce", [M, F32], AllReduceAttrs(), [ADD]) == Shape.tuple([M, F32])
    with pytest.raises(ShapeInferenceError, match="all_reduce_c1"):
        infer_shape("all_reduce", [M], AllReduceAttrs(((1, 1),)), [ADD])
    with pytest.raises(ShapeInferenceError, match="all_reduce_c3"):
        infer_shape("all_reduce", [M], AllReduceAttrs(((0, 5),)), [ADD])
    with pytest.raises(ShapeInferenceError, match="all_reduce_c4"):
        infer_shape("all_reduce", [M], AllReduceAttrs((), 0, True), [ADD])
    with pytest.raises(ShapeInferenceError, match="all_reduce_c5"):
        infer_shape("all_reduce", [M], AllReduceAttrs(), [R([S32, S32], S32)])
    with pytest.raises(ShapeInferenceError, match="all_reduce_c5"):
        infer_shape("all_reduce", [M, S32], AllReduceAttrs(), [ADD])
    with pytest.raises(ShapeInferenceError, match="all_reduce_c6"):
        infer_shape("all_reduce", [Shape.token()], AllReduceAttrs(), [ADD])
    assert HLO_NAMES["cross-replica-sum"] == "all_reduce"


def test_reduce_scatter_infer() -> None:
    attrs = ReduceScatterAttrs(1, ((0, 1),))
    assert infer_shape("reduce_scatter", [M], attrs, [ADD]).dimensions == (2, 2)
    with pytest.raises(ShapeInferenceError, match="reduce_scatter_c1"):
        infer_shape("reduce_scatter", [M], ReduceScatterAttrs(0, ((0, 1, 2),)), [ADD])
    with pytest.raises(ShapeInferenceError, match="reduce_scatter_c2"):
        infer_shape("reduce_scatter", [M], ReduceScatterAttrs(3), [ADD])
    with pytest.raises(ShapeInferenceError, match="reduce_scatter_c3"):
        infer_shape("reduce_scatter", [M], ReduceScatterAttrs(1, ((0, 0),)), [ADD])
    with pytest.raises(ShapeInferenceError, match="reduce_scatter_c5"):
        infer_shape("reduce_scatter", [M], ReduceScatterAttrs(1, ((0, 3),)), [ADD])
    with pytest.raises(ShapeInferenceError, match="reduce_scatter_c6"):
        infer_shape("reduce_scatter", [M], ReduceScatterAttrs(1, (), -1, True), [ADD])
    with pytest.raises(ShapeInferenceError, match="reduce_scatter_c7"):
        infer_shape("reduce_scatter", [M], ReduceScatterAttrs(1), [R([F32], F32)])


def test_all_to_all_infer() -> None:
    attrs = AllToAllAttrs(1, 0, 2, ((0, 1),))
    assert infer_shape("all_to_all", [M], attrs).dimensions == (4, 2)
    with pytest.raises(ShapeInferenceError, match="all_to_all_c1"):
        infer_shape("all_to_all", [M], AllToAllAttrs(2, 0, 2))
    with pytest.raises(ShapeInferenceError, match="all_to_all_c2"):
        infer_shape("all_to_all", [M], AllToAllAttrs(1, 0, 3))
    with pytest.raises(ShapeInferenceError, match="all_to_all_c3"):
        infer_shape("all_to_all", [M], AllToAllAttrs(1, -1, 2))
    with pytest.raises(ShapeInferenceError, match="all_to_all_c4"):
        infer_shape("all_to_all", [M], AllToAllAttrs(1, 0, 0))
    with pytest.raises(ShapeInferenceError, match="all_to_all_c5"):
        infer_shape("all_to_all", [M], AllToAllAttrs(1, 0, 2, ((1, 1),)))
    with pytest.raises(ShapeInferenceError, match="all_to_all_c6"):
        infer_shape("all_to_all", [M], AllToAllAttrs(1, 0, 2, ((0, 1, 2, 3),)))
    with pytest.raises(ShapeInferenceError, match="all_to_all_c7"):
        infer_shape("all_to_all", [M], AllToAllAttrs(1, 0, 2, ((0, 7),)))


def test_collective_permute_and_broadcast_infer() -> None:
    assert infer_shape("collective_permute", [M], CollectivePermuteAttrs(((0, 1),))) == M
    with pytest.raises(ShapeInferenceError, match="collective_permute_c1"):
        infer_shape("collective_permute", [M], CollectivePermuteAttrs(((0, 1, 2),)))  # type: ignore[arg-type]
    with pytest.raises(ShapeInferenceError, match="collective_permute_c2"):
        infer_shape("collective_permute", [M], CollectivePermuteAttrs(((0, 1), (0, 2))))
    with pytest.raises(ShapeInferenceError, match="collective_permute_c3"):
        infer_shape("collective_permute", [M], CollectivePermuteAttrs(((0, 1), (2, 1))))
    with pytest.raises(ShapeInferenceError, match="collective_permute_c4"):
        infer_shape("collective_permute", [M], CollectivePermuteAttrs(((-1, 1),)))
    with pytest.raises(ShapeInferenceError, match="collective_permute_c5"):
        infer_shape("collective_permute", [Shape.token()], CollectivePermuteAttrs(()))
    assert infer_shape("collective_broadcast", [M], CollectiveBroadcastAttrs(((0, 1),))) == M
    with pytest.raises(ShapeInferenceError, match="collective_broadcast_c1"):
        infer_shape("collective_broadcast", [M], CollectiveBroadcastAttrs(((0, 0),)))
    with pytest.raises(ShapeInferenceError, match="collective_broadcast_c2"):
        infer_shape("collective_broadcast", [M], CollectiveBroadcastAttrs(((-1,),)))
    with pytest.raises(ShapeInferenceError, match="collective_broadcast_c3"):
        infer_shape("collective_broadcast", [Shape.token()], CollectiveBroadcastAttrs())


# ---- process groups (spec §Collective ops examples) -----------------------------------------
@dataclass
class Grid:
    num_replicas: int
    num_partitions: int


def test_process_group_strategies() -> None:
    g = Grid(4, 2)
    assert process_groups("op", "cross_replica", ((0, 1), (2, 3)), g) == [
        [(0, 0), (1, 0)], [(0, 1), (1, 1)], [(2, 0), (3, 0)], [(2, 1), (3, 1)]]
    assert process_groups("op", "cross_partition", ((0, 1),), g) == [
        [(0, 0), (0, 1)], [(1, 0), (1, 1)], [(2, 0), (2, 1)], [(3, 0), (3, 1)]]
    assert process_groups("op", "cross_replica_and_partition", ((0, 1), (2, 3)), g) == [
        [(0, 0), (1, 0), (0, 1), (1, 1)], [(2, 0), (3, 0), (2, 1), (3, 1)]]
    assert process_groups("op", "flattened_ids", ((0, 1, 2, 3), (4, 5, 6, 7)), g) == [
        [(0, 0), (0, 1), (1, 0), (1, 1)], [(2, 0), (2, 1), (3, 0), (3, 1)]]
    with pytest.raises(CollectiveError, match="cover ids 0..3"):
        process_groups("op", "cross_replica", ((0, 1),), g)


# ---- evaluation -----------------------------------------------------------------------------
def add_comp() -> XlaComputation:
    b = XlaBuilder("add")
    ops.Add(b.parameter(0, F32), b.parameter(1, F32))
    return b.build()


def build(fn) -> XlaComputation:
    b = XlaBuilder("coll")
    x = b.parameter(0, M)
    fn(x)
    return b.build()


def collectives(x: XlaOp) -> XlaOp:
    b = x.builder
    return ops.Tuple(b, [
        ops.AllGather(x, 1, 1, [[0]]),
        ops.AllReduce(x, add_comp()),
        ops.CrossReplicaSum(x),
        ops.ReduceScatter(x, add_comp(), 0),
        ops.AllToAll(x, 1, 0, 1),
        ops.CollectivePermute(x, [(0, 0)]),
        ops.CollectiveBroadcast(x, [[0]]),
    ])


X = np.arange(8, dtype=np.float32).reshape(2, 4)


def test_one_by_one_grid_is_identity() -> None:
    out = Interpreter().run_module(build(collectives).module, [X])
    for v in out:
        np.testing.assert_array_equal(v, X)


def test_permute_without_source_gives_zeros() -> None:
    comp = build(lambda x: ops.CollectivePermute(x, []))
    np.testing.assert_array_equal(Interpreter().run_module(comp.module, [X]), np.zeros_like(X))


@pytest.mark.parametrize("make", [
    lambda x: ops.AllGather(x, 0, 2, [[0, 1]]),
    lambda x: ops.AllReduce(x, add_comp(), [[0, 1]]),
    lambda x: ops.CollectivePermute(x, [(0, 1)]),
])
def test_one_by_one_grid_rejects_other_processes(make) -> None:
    with pytest.raises(CollectiveError, match="1x1|grid"):
        Interpreter().run_module(build(make).module, [X])


def test_tuple_operand_all_reduce() -> None:
    b = XlaBuilder("t")
    t = ops.Tuple(b, [b.parameter(0, M)])
    r = ops.AllReduce(t, add_comp())
    assert r.shape() == Shape.tuple([M])


class ThreadGrid:
    """An in-memory process grid: each process runs in its own thread."""

    def __init__(self, num_replicas: int, num_partitions: int = 1) -> None:
        self.num_replicas, self.num_partitions = num_replicas, num_partitions
        self.cv = threading.Condition()
        self.posted: dict[tuple[Any, ...], dict[tuple[int, int], Any]] = {}

    def handle(self, replica: int, partition: int) -> Any:
        grid = self
        calls: dict[tuple[Any, ...], int] = {}

        class Handle:
            replica_id, partition_id = replica, partition
            num_replicas, num_partitions = grid.num_replicas, grid.num_partitions

            def exchange(self, key: str, group: Sequence[tuple[int, int]], value: Any
                         ) -> list[Any]:
                k0 = (key, tuple(group))
                calls[k0] = calls.get(k0, 0) + 1
                k = (*k0, calls[k0])
                with grid.cv:
                    grid.posted.setdefault(k, {})[(replica, partition)] = value
                    grid.cv.notify_all()
                    ok = grid.cv.wait_for(lambda: len(grid.posted[k]) == len(group), timeout=10)
                    assert ok, "a process never joined the collective"
                    return [grid.posted[k][p] for p in group]

        return Handle()

    def run(self, comp: XlaComputation, args: dict[tuple[int, int], list[Any]]) -> dict:
        out: dict[tuple[int, int], Any] = {}

        def work(pid: tuple[int, int]) -> None:
            out[pid] = Interpreter(process=self.handle(*pid)).run_module(comp.module, args[pid])

        threads = [threading.Thread(target=work, args=(pid,)) for pid in args]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out


def _two(a: np.ndarray, b: np.ndarray) -> dict[tuple[int, int], list[Any]]:
    return {(0, 0): [a], (1, 0): [b]}


A = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.float32)
B = np.array([[9, 10, 11, 12], [13, 14, 15, 16]], np.float32)


def test_spec_examples_on_two_replicas() -> None:
    comp = build(lambda x: ops.Tuple(x.builder, [
        ops.AllGather(x, 1, 2, [[0, 1]]),
        ops.AllReduce(x, add_comp(), [[0, 1]]),
        ops.AllToAll(x, 1, 0, 2, [[0, 1]]),
        ops.CollectivePermute(x, [(0, 1)]),
        ops.ReduceScatter(x, add_comp(), 1, 2, [[0, 1]]),
        ops.CollectiveBroadcast(x, [[1, 0]]),
    ]))
    out = ThreadGrid(2).run(comp, _two(A, B))
    for pid in ((0, 0), (1, 0)):
        np.testing.assert_array_equal(out[pid][0], np.concatenate([A, B], 1))
        np.testing.assert_array_equal(out[pid][1], A + B)
        np.testing.assert_array_equal(out[pid][5], B)
    np.testing.assert_array_equal(out[(0, 0)][2], [[1, 2], [5, 6], [9, 10], [13, 14]])
    np.testing.assert_array_equal(out[(1, 0)][2], [[3, 4], [7, 8], [11, 12], [15, 16]])
    np.testing.assert_array_equal(out[(0, 0)][3], np.zeros_like(A))
    np.testing.assert_array_equal(out[(1, 0)][3], A)
    np.testing.assert_array_equal(out[(0, 0)][4], [[10, 12], [18, 20]])
    np.testing.assert_array_equal(out[(1, 0)][4], [[14, 16], [22, 24]])


def _while_reducer() -> XlaComputation:
    """(a, b) -> while(a < 0: a += 1) * b: not element-wise, so evaluated per element."""
    cb = XlaBuilder("c")
    ops.Lt(cb.parameter(0, F32), ops.ConstantR0(cb, 0.0))
    bb = XlaBuilder("d")
    ops.Add(bb.parameter(0, F32), ops.ConstantR0(bb, 1.0))
    rb = XlaBuilder("r")
    loop = ops.While(cb.build(), bb.build(), rb.parameter(0, F32))
    ops.Mul(loop, rb.parameter(1, F32))
    return rb.build()


def test_all_reduce_non_elementwise_reducer_two_replicas() -> None:
    comp = build(lambda x: ops.AllReduce(x, _while_reducer(), [[0, 1]]))
    out = ThreadGrid(2).run(comp, _two(A - 3, B))
    expected = np.maximum(A - 3, 0) * B
    np.testing.assert_array_equal(out[(0, 0)], expected)
    np.testing.assert_array_equal(out[(1, 0)], expected)
