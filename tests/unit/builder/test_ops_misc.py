"""Builder misc ops: tokens, feeds, channels, custom calls, dynamic sizes, ids."""

from __future__ import annotations

import pytest

from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder
from xlapy.errors import BuilderError
from xlapy.ops.attrs import ChannelHandle, ChannelType
from xlapy.types import ElementType, Shape

S32 = Shape.scalar(ElementType.S32)
V = Shape.array(ElementType.F32, (3,))
TOK = Shape.token()


def test_tokens_and_feeds() -> None:
    b = XlaBuilder("f")
    tok = ops.CreateToken(b)
    assert ops.AfterAll(b, [tok, tok]).shape() == TOK
    assert ops.Infeed(b, V).shape() == V
    assert ops.InfeedWithToken(tok, V).shape() == Shape.tuple([V, TOK])
    assert ops.Outfeed(b.parameter(0, V), V, "").shape() == TOK
    assert ops.OutfeedWithToken(b.parameter(1, S32), tok).shape() == TOK
    b.build()


def test_feed_errors() -> None:
    b = XlaBuilder("f")
    ops.Infeed(b, "f32[3]")  # type: ignore[arg-type]
    with pytest.raises(BuilderError, match="Infeed: shape must be a Shape"):
        b.build()
    b = XlaBuilder("f")
    ops.Outfeed(b.parameter(0, V), S32)
    with pytest.raises(BuilderError, match="OutfeedWithToken: shape_with_layout"):
        b.build()
    b = XlaBuilder("f")
    ops.AfterAll(b, [b.parameter(0, S32)])
    with pytest.raises(BuilderError, match="AfterAll: after_all_c1"):
        b.build()


def test_channels() -> None:
    b = XlaBuilder("c")
    tok = ops.CreateToken(b)
    x = b.parameter(0, V)
    s = ops.Send(x, 4)
    assert s.shape() == TOK and s.instr.attrs.channel_handle == ChannelHandle(4)
    assert ops.Recv(b, V, 4).shape() == V
    h = ops.SendToHost(x, tok, V, 5)
    assert h.instr.attrs.channel_handle.type is ChannelType.DEVICE_TO_HOST
    r = ops.RecvFromHost(tok, V, ChannelHandle(6, ChannelType.HOST_TO_DEVICE))
    assert r.shape() == Shape.tuple([V, TOK]) and r.instr.attrs.is_host_transfer
    b.build()
    b = XlaBuilder("c")
    ops.RecvFromHost(ops.CreateToken(b), V, ChannelHandle(6, ChannelType.DEVICE_TO_DEVICE))
    with pytest.raises(BuilderError, match="RecvFromHost: recv_c1"):
        b.build()


def test_custom_call() -> None:
    b = XlaBuilder("cc")
    x = b.parameter(0, V)
    r = ops.CustomCall(b, b"target", [x], S32, opaque=b"cfg", has_side_effect=True)
    a = r.instr.attrs
    assert r.shape() == S32 and a.call_target_name == "target" and a.backend_config == "cfg"
    assert a.has_side_effect
    ops.CustomCallWithLayout(b, "t", [x], V, [S32])
    with pytest.raises(BuilderError, match="CustomCallWithLayout: operand 0 has shape"):
        b.build()


def test_dimension_sizes_and_ids() -> None:
    b = XlaBuilder("d")
    x = b.parameter(0, V)
    d = ops.SetDimensionSize(x, b.parameter(1, S32), 0)
    assert d.shape().dynamic == (True,)
    assert ops.GetDimensionSize(d, 0).shape() == S32
    assert ops.ReplicaId(b).shape() == Shape.scalar(ElementType.U32)
    assert ops.PartitionId(b).shape() == Shape.scalar(ElementType.U32)
    ops.GetDimensionSize(x, 1)
    with pytest.raises(BuilderError, match="GetDimensionSize: get_dimension_size_c1"):
        b.build()


@pytest.mark.parametrize("channel", [-10**20, 1 << 63])
@pytest.mark.parametrize("api", ["Send", "Recv"])
def test_channel_id_outside_si64_is_an_error(channel: int, api: str) -> None:
    b = XlaBuilder("c")
    if api == "Send":
        ops.Send(b.parameter(0, V), channel)
    else:
        ops.Recv(b, V, channel)
    with pytest.raises(BuilderError, match=f"{api}WithToken: {api.lower()}_c1: channel_id "
                                           f"{channel} does not fit si64"):
        b.build()
