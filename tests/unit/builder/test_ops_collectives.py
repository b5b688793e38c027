"""Builder collective ops: attributes, tuple operands, reported errors."""

from __future__ import annotations

import pytest

from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder
from xlapy.errors import BuilderError
from xlapy.ops.attrs import ChannelHandle
from xlapy.types import ElementType, Shape

F32 = Shape.scalar(ElementType.F32)
M = Shape.array(ElementType.F32, (2, 4))
I = Shape.array(ElementType.S32, (4,))


def add_comp(shape: Shape = F32):
    b = XlaBuilder("add")
    ops.Add(b.parameter(0, shape), b.parameter(1, shape))
    return b.build()


class Group:
    def __init__(self, ids: list[int]) -> None:
        self.replica_ids = ids


def test_all_gather_attrs() -> None:
    b = XlaBuilder("c")
    r = ops.AllGather(b.parameter(0, M), 0, 2, [Group([0, 1])], channel_id=ChannelHandle(3),
                      use_global_device_ids=True)
    a = r.instr.attrs
    assert r.shape().dimensions == (4, 4)
    assert a.replica_groups == ((0, 1),) and a.channel_id == 3 and a.use_global_device_ids
    assert ops.AllGather(b.parameter(1, M), 1, 3).shape().dimensions == (2, 12)


def test_all_reduce_tuple_operand() -> None:
    b = XlaBuilder("c")
    t = ops.Tuple(b, [b.parameter(0, M), b.parameter(1, M)])
    r = ops.AllReduce(t, add_comp())
    assert r.instr.opcode == "all_reduce" and len(r.instr.operands) == 2
    assert r.shape() == Shape.tuple([M, M])
    assert ops.CrossReplicaSum(b.parameter(2, I)).shape() == I


def test_cross_replica_sum_errors() -> None:
    b = XlaBuilder("c")
    ops.CrossReplicaSum(ops.CreateToken(b))
    with pytest.raises(BuilderError, match="CrossReplicaSum: operand token"):
        b.build()
    b = XlaBuilder("c")
    ops.AllReduce(b.parameter(0, I), add_comp())
    with pytest.raises(BuilderError, match="AllReduce: all_reduce_c5"):
        b.build()


def test_reduce_scatter_all_to_all_permute_broadcast() -> None:
    b = XlaBuilder("c")
    x = b.parameter(0, M)
    assert ops.ReduceScatter(x, add_comp(), 1, 2).shape().dimensions == (2, 2)
    assert ops.AllToAll(x, 1, 0, 2).shape().dimensions == (4, 2)
    p = ops.CollectivePermute(x, [(0, 1), (1, 0)])
    assert p.instr.attrs.source_target_pairs == ((0, 1), (1, 0))
    assert ops.CollectiveBroadcast(x, [[0, 1]]).shape() == M
    b.build()
    b = XlaBuilder("c")
    ops.AllToAll(b.parameter(0, M), 1, 0, 3)
    with pytest.raises(BuilderError, match="AllToAll: all_to_all_c2"):
        b.build()
