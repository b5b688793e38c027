"""Shape inference and evaluation of tokens, feeds, channels, custom calls, dynamic sizes and
process ids."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation
from xlapy.errors import InterpreterError, ShapeInferenceError, Unimplemented
from xlapy.interpreter import Interpreter, RuntimeState
from xlapy.ops import infer_shape
from xlapy.ops.attrs import ChannelHandle, ChannelType
from xlapy.ops.misc import (
    CustomCallAttrs,
    DimensionAttrs,
    InfeedAttrs,
    OutfeedAttrs,
    SendRecvAttrs,
    register_custom_call,
    unregister_custom_call,
)
from xlapy.types import ElementType, Shape

TOK = Shape.token()
S32 = Shape.scalar(ElementType.S32)
U32 = Shape.scalar(ElementType.U32)
M = Shape.array(ElementType.F32, (2, 3))
D2D = ChannelHandle(1, ChannelType.DEVICE_TO_DEVICE)
D2H = ChannelHandle(2, ChannelType.DEVICE_TO_HOST)
H2D = ChannelHandle(3, ChannelType.HOST_TO_DEVICE)


def run(comp: XlaComputation, args: list[Any], runtime: RuntimeState | None = None,
        process: Any = None) -> Any:
    return Interpreter(runtime, process).run_module(comp.module, args)


# ---- shape inference ----------------------------------------------------------------------
def test_after_all() -> None:
    assert infer_shape("after_all", [TOK, TOK]) == TOK
    assert infer_shape("after_all", []) == TOK
    with pytest.raises(ShapeInferenceError, match="after_all_c1"):
        infer_shape("after_all", [TOK, S32])


def test_infeed() -> None:
    assert infer_shape("infeed", [TOK], InfeedAttrs((M, TOK))) == Shape.tuple([M, TOK])
    assert infer_shape("infeed", [TOK], InfeedAttrs((TOK,))) == TOK
    with pytest.raises(ShapeInferenceError, match="infeed_c1"):
        infer_shape("infeed", [TOK], InfeedAttrs(()))
    with pytest.raises(ShapeInferenceError, match="infeed_c2"):
        infer_shape("infeed", [TOK], InfeedAttrs((TOK, M)))
    with pytest.raises(ShapeInferenceError, match="infeed_c2"):
        infer_shape("infeed", [S32], InfeedAttrs((M, TOK)))


def test_outfeed() -> None:
    assert infer_shape("outfeed", [M, S32, TOK], OutfeedAttrs()) == TOK
    with pytest.raises(ShapeInferenceError, match="outfeed_c1"):
        infer_shape("outfeed", [M, S32], OutfeedAttrs())


def test_send_recv() -> None:
    assert infer_shape("send", [M, TOK], SendRecvAttrs(D2D)) == TOK
    assert infer_shape("send", [M, TOK], SendRecvAttrs(D2H, True)) == TOK
    with pytest.raises(ShapeInferenceError, match="send_c1"):
        infer_shape("send", [M, TOK], SendRecvAttrs(D2D, True))
    with pytest.raises(ShapeInferenceError, match="send_c0"):
        infer_shape("send", [M], SendRecvAttrs(D2D))
    assert infer_shape("recv", [TOK], SendRecvAttrs(H2D, True, (M, TOK))) == Shape.tuple([M, TOK])
    with pytest.raises(ShapeInferenceError, match="recv_c1"):
        infer_shape("recv", [TOK], SendRecvAttrs(D2H, True, (M, TOK)))
    with pytest.raises(ShapeInferenceError, match="recv_c2"):
        infer_shape("recv", [TOK], SendRecvAttrs(D2D, False, ()))
    with pytest.raises(ShapeInferenceError, match="recv_c3"):
        infer_shape("recv", [TOK], SendRecvAttrs(D2D, False, (M,)))
    with pytest.raises(ShapeInferenceError, match="recv_c3"):
        infer_shape("recv", [S32], SendRecvAttrs(D2D, False, (M, TOK)))


def test_custom_call() -> None:
    t = Shape.tuple([M, S32])
    assert infer_shape("custom_call", [M], CustomCallAttrs("f", t)) == t
    with pytest.raises(ShapeInferenceError, match="custom_call_c1"):
        infer_shape("custom_call", [M], CustomCallAttrs("", M))
    with pytest.raises(ShapeInferenceError, match="custom_call_c2"):
        infer_shape("custom_call", [M], CustomCallAttrs("f", M, api_version=9))
    with pytest.raises(ShapeInferenceError, match="custom_call_c3"):
        infer_shape("custom_call", [M], CustomCallAttrs("f", M, operand_layouts=((0, 0),)))
    with pytest.raises(ShapeInferenceError, match="custom_call_c4"):
        infer_shape("custom_call", [M], CustomCallAttrs("f", M, result_layouts=()))


def test_dimension_sizes() -> None:
    assert infer_shape("get_dimension_size", [M], DimensionAttrs(1)) == S32
    with pytest.raises(ShapeInferenceError, match="get_dimension_size_c1"):
        infer_shape("get_dimension_size", [M], DimensionAttrs(2))
    out = infer_shape("set_dimension_size", [M, S32], DimensionAttrs(1))
    assert out == M and out.dynamic == (False, True)
    with pytest.raises(ShapeInferenceError, match="set_dimension_size_c1"):
        infer_shape("set_dimension_size", [M, S32], DimensionAttrs(-1))
    with pytest.raises(ShapeInferenceError, match="set_dimension_size_c2"):
        infer_shape("set_dimension_size", [M, U32], DimensionAttrs(0))


def test_process_ids() -> None:
    assert infer_shape("replica_id", []) == U32
    assert infer_shape("partition_id", []) == U32
    with pytest.raises(ShapeInferenceError, match="replica_id_arity"):
        infer_shape("replica_id", [S32])


# ---- evaluation ---------------------------------------------------------------------------
def test_infeed_outfeed_round_trip() -> None:
    b = XlaBuilder("feeds")
    tok = ops.CreateToken(b)
    got = ops.InfeedWithToken(tok, M)
    data, tok2 = ops.GetTupleElement(got, 0), ops.GetTupleElement(got, 1)
    tok3 = ops.OutfeedWithToken(ops.Add(data, data), tok2)
    second = ops.InfeedWithToken(tok3, S32)
    ops.OutfeedWithToken(ops.GetTupleElement(second, 0), ops.GetTupleElement(second, 1))
    comp = b.build(data)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    rt = RuntimeState(infeed=[x, 7])
    np.testing.assert_array_equal(run(comp, [], rt), x)
    assert rt.infeed == []
    assert len(rt.outfeed) == 2
    np.testing.assert_array_equal(rt.outfeed[0], 2 * x)
    assert rt.outfeed[1] == 7 and rt.outfeed[1].dtype == np.int32


def test_infeed_empty_queue_and_wrong_value() -> None:
    b = XlaBuilder("feeds")
    ops.Infeed(b, M)
    comp = b.build()
    with pytest.raises(InterpreterError, match="infeed queue is empty"):
        run(comp, [], RuntimeState())
    with pytest.raises(InterpreterError, match="expected f32\\[2,3\\]"):
        run(comp, [], RuntimeState(infeed=[np.zeros(3, np.float32)]))


def test_host_send_recv() -> None:
    b = XlaBuilder("host")
    tok = ops.CreateToken(b)
    r = ops.RecvFromHost(tok, M, H2D)
    data = ops.GetTupleElement(r, 0)
    ops.SendToHost(ops.Mul(data, data), ops.GetTupleElement(r, 1), M, D2H)
    comp = b.build(data)
    x = np.full((2, 3), 3, np.float32)
    rt = RuntimeState(host_recvs={3: [x]})
    run(comp, [], rt)
    np.testing.assert_array_equal(rt.host_sends[2][0], x * x)
    with pytest.raises(InterpreterError, match="host channel 3 has no value"):
        run(comp, [], RuntimeState())


def test_device_send_without_process_grid() -> None:
    b = XlaBuilder("d2d")
    ops.Send(b.parameter(0, M), 1)
    with pytest.raises(Unimplemented, match="send: device-to-device channel 1"):
        run(b.build(), [np.zeros((2, 3), np.float32)])
    b = XlaBuilder("d2d")
    ops.Recv(b, M, 1)
    with pytest.raises(Unimplemented, match="recv: device-to-device channel 1"):
        run(b.build(), [])


class _Channels:
    """A minimal process handle with channel queues."""

    replica_id = 2
    partition_id = 1

    def __init__(self) -> None:
        self.queues: dict[int, list[Any]] = {}

    def send(self, channel: int, value: Any) -> None:
        self.queues.setdefault(channel, []).append(value)

    def recv(self, channel: int) -> Any:
        return self.queues[channel].pop(0)


def test_device_send_recv_through_process() -> None:
    b = XlaBuilder("d2d")
    tok = ops.SendWithToken(b.parameter(0, M), ops.CreateToken(b), 5)
    ops.GetTupleElement(ops.RecvWithToken(tok, M, 5), 0)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run(b.build(), [x], process=_Channels()), x)


def test_replica_and_partition_id() -> None:
    b = XlaBuilder("ids")
    ops.Tuple(b, [ops.ReplicaId(b), ops.PartitionId(b)])
    comp = b.build()
    r = run(comp, [])
    assert (int(r[0]), int(r[1])) == (0, 0) and r[0].dtype == np.uint32
    r = run(comp, [], process=_Channels())
    assert (int(r[0]), int(r[1])) == (2, 1)


def test_custom_call_registry() -> None:
    def target(operands: list[Any], shape: Shape, attrs: CustomCallAttrs) -> Any:
        x, y = operands
        return (x + y[0].sum(), int(attrs.backend_config))

    register_custom_call("test.add_sum", target)
    try:
        b = XlaBuilder("cc")
        x = b.parameter(0, Shape.array(ElementType.F32, (2,)))
        y = b.parameter(1, M)
        ops.CustomCall(b, b"test.add_sum", [x, y], Shape.tuple([x.shape(), S32]), opaque="42")
        r = run(b.build(), [np.ones(2, np.float32), np.ones((2, 3), np.float32)])
        assert list(r[0]) == [4.0, 4.0] and int(r[1]) == 42 and r[1].dtype == np.int32
    finally:
        unregister_custom_call("test.add_sum")


def test_custom_call_runtime_targets_and_errors() -> None:
    b = XlaBuilder("cc")
    ops.CustomCall(b, "test.missing", [b.parameter(0, M)], M, has_side_effect=True)
    comp = b.build()
    x = np.ones((2, 3), np.float32)
    with pytest.raises(InterpreterError, match="no target named 'test.missing'"):
        run(comp, [x])
    rt = RuntimeState(custom_calls={"test.missing": lambda ops_, s, a: ops_[0] * 2})
    np.testing.assert_array_equal(run(comp, [x], rt), 2 * x)
    rt = RuntimeState(custom_calls={"test.missing": lambda ops_, s, a: np.zeros(3)})
    with pytest.raises(InterpreterError, match="'test.missing' returned a wrong value"):
        run(comp, [x], rt)


def test_custom_call_with_layout() -> None:
    b = XlaBuilder("cc")
    x = b.parameter(0, M)
    r = ops.CustomCallWithLayout(b, "t", [x], M.with_layout((0, 1)), [M.with_layout((1, 0))])
    assert r.instr.attrs.operand_layouts == ((1, 0),)
    assert r.instr.attrs.result_layouts == ((0, 1),)


def test_set_get_dimension_size() -> None:
    """The dynamic size rides on the value set_dimension_size made; others report the bound."""
    b = XlaBuilder("dyn")
    x = b.parameter(0, M)
    d = ops.SetDimensionSize(x, b.parameter(1, S32), 1)
    assert d.shape().dynamic == (False, True)
    ops.Tuple(b, [ops.GetDimensionSize(d, 1), ops.GetDimensionSize(d, 0),
                  ops.GetDimensionSize(x, 1), ops.GetDimensionSize(ops.Add(d, d), 1), d])
    comp = b.build()
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    r = run(comp, [v, np.int32(2)])
    assert [int(a) for a in r[:4]] == [2, 2, 3, 3]
    np.testing.assert_array_equal(r[4], v)
    with pytest.raises(InterpreterError, match="size 4 is outside"):
        run(comp, [v, np.int32(4)])


def test_after_all_evaluates_to_token() -> None:
    b = XlaBuilder("tok")
    ops.AfterAll(b, [ops.CreateToken(b), ops.CreateToken(b)])
    assert repr(run(b.build(), [])) == "token"
