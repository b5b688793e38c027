"""Builder ops: tokens, feeds, channels, custom calls, dynamic sizes, process ids (seed 000
§AfterAll, §Infeed, §Send, §Recv, §CustomCall, §GetDimensionSize, §SetDimensionSize,
§ReplicaId; jax xla_client spellings). Custom calls are in ops_custom_call.py."""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.builder.xla_builder import XlaBuilder, XlaOp, get_tuple_element
from xlapy.ops.attrs import ChannelHandle, ChannelType
from xlapy.ops.misc import (
    DimensionAttrs,
    InfeedAttrs,
    OutfeedAttrs,
    SendRecvAttrs,
)
from xlapy.types import Shape

__all__ = [
    "AfterAll", "CreateToken", "Infeed", "InfeedWithToken", "Outfeed", "OutfeedWithToken",
    "Send", "SendWithToken", "Recv", "RecvWithToken", "SendToHost", "RecvFromHost",
    "GetDimensionSize", "SetDimensionSize", "ReplicaId",
    "PartitionId",
]


def AfterAll(builder: XlaBuilder, tokens: Sequence[XlaOp]) -> XlaOp:
    """A token that depends on every token in `tokens`."""
    return builder.add_op("after_all", list(tokens), api_name="AfterAll")


def CreateToken(builder: XlaBuilder) -> XlaOp:
    """A fresh token (HLO after-all with no operands)."""
    return builder.add_op("after_all", [], api_name="CreateToken")


def _shape_arg(builder: XlaBuilder, api: str, shape: object) -> Shape | None:
    if not isinstance(shape, Shape):
        builder.report_error(api, f"shape must be a Shape, got {shape!r}")
        return None
    return shape


def InfeedWithToken(token: XlaOp, shape: Shape, config: str = "") -> XlaOp:
    """Read one value of `shape` from the infeed; returns the tuple (data, token)."""
    b = token.builder
    if _shape_arg(b, "InfeedWithToken", shape) is None:
        return XlaOp(b, None)
    return b.add_op("infeed", [token], InfeedAttrs((shape, Shape.token()), config),
                    api_name="InfeedWithToken")


def Infeed(builder: XlaBuilder, shape: Shape, config: str = "") -> XlaOp:
    """Read one value of `shape` from the infeed (token created implicitly); returns the data."""
    if _shape_arg(builder, "Infeed", shape) is None:
        return XlaOp(builder, None)
    token = CreateToken(builder)
    op = builder.add_op("infeed", [token], InfeedAttrs((shape, Shape.token()), config),
                        api_name="Infeed")
    return get_tuple_element(op, 0) if op.ok else op


def OutfeedWithToken(operand: XlaOp, token: XlaOp, shape_with_layout: Shape | None = None,
                     outfeed_config: str = "") -> XlaOp:
    """Write `operand` to the outfeed after `token`; returns a token."""
    b = operand.builder
    if shape_with_layout is not None and operand.ok and shape_with_layout != operand.shape():
        return b.report_error("OutfeedWithToken", f"shape_with_layout {shape_with_layout} "
                              f"differs from the operand shape {operand.shape()}")
    return b.add_op("outfeed", [operand, token], OutfeedAttrs(outfeed_config),
                    api_name="OutfeedWithToken")


def Outfeed(operand: XlaOp, shape_with_layout: Shape | None = None,
            outfeed_config: str = "") -> XlaOp:
    """Write `operand` to the outfeed (token created implicitly); returns a token."""
    token = CreateToken(operand.builder)
    return OutfeedWithToken(operand, token, shape_with_layout, outfeed_config)


def _handle(handle: ChannelHandle | int, kind: ChannelType) -> ChannelHandle:
    if isinstance(handle, ChannelHandle):
        return handle
    return ChannelHandle(int(handle), kind)


def SendWithToken(operand: XlaOp, token: XlaOp, handle: ChannelHandle | int) -> XlaOp:
    """Send `operand` on a device-to-device channel; returns a token."""
    h = _handle(handle, ChannelType.DEVICE_TO_DEVICE)
    return operand.builder.add_op("send", [operand, token], SendRecvAttrs(h, False),
                                  api_name="SendWithToken")


def Send(operand: XlaOp, handle: ChannelHandle | int) -> XlaOp:
    return SendWithToken(operand, CreateToken(operand.builder), handle)


def RecvWithToken(token: XlaOp, shape: Shape, handle: ChannelHandle | int) -> XlaOp:
    """Receive a value of `shape` on a device-to-device channel; returns (data, token)."""
    b = token.builder
    if _shape_arg(b, "RecvWithToken", shape) is None:
        return XlaOp(b, None)
    h = _handle(handle, ChannelType.DEVICE_TO_DEVICE)
    return b.add_op("recv", [token], SendRecvAttrs(h, False, (shape, Shape.token())),
                    api_name="RecvWithToken")


def Recv(builder: XlaBuilder, shape: Shape, handle: ChannelHandle | int) -> XlaOp:
    op = RecvWithToken(CreateToken(builder), shape, handle)
    return get_tuple_element(op, 0) if op.ok else op


def SendToHost(operand: XlaOp, token: XlaOp, shape_with_layout: Shape,
               handle: ChannelHandle | int) -> XlaOp:
    """Send `operand` to the host (RuntimeState.host_sends[channel]); returns a token."""
    b = operand.builder
    if operand.ok and shape_with_layout != operand.shape():
        return b.report_error("SendToHost", f"shape_with_layout {shape_with_layout} differs "
                              f"from the operand shape {operand.shape()}")
    h = _handle(handle, ChannelType.DEVICE_TO_HOST)
    return b.add_op("send", [operand, token], SendRecvAttrs(h, True), api_name="SendToHost")


def RecvFromHost(token: XlaOp, shape: Shape, handle: ChannelHandle | int) -> XlaOp:
    """Receive a value from the host (RuntimeState.host_recvs[channel]); returns (data, token)."""
    b = token.builder
    if _shape_arg(b, "RecvFromHost", shape) is None:
        return XlaOp(b, None)
    h = _handle(handle, ChannelType.HOST_TO_DEVICE)
    return b.add_op("recv", [token], SendRecvAttrs(h, True, (shape, Shape.token())),
                    api_name="RecvFromHost")


def GetDimensionSize(operand: XlaOp, dimension: int) -> XlaOp:
    """The (dynamic) size of `dimension` as an s32 scalar."""
    return operand.builder.add_op("get_dimension_size", [operand],
                                  DimensionAttrs(int(dimension)), api_name="GetDimensionSize")


def SetDimensionSize(operand: XlaOp, val: XlaOp, dimension: int) -> XlaOp:
    """Mark `dimension` dynamic with run-time size `val` (s32[]); the bound stays static."""
    return operand.builder.add_op("set_dimension_size", [operand, val],
                                  DimensionAttrs(int(dimension)), api_name="SetDimensionSize")


def ReplicaId(builder: XlaBuilder) -> XlaOp:
    """This replica's id (u32 scalar); 0 without a process grid."""
    return builder.add_op("replica_id", [], api_name="ReplicaId")


def PartitionId(builder: XlaBuilder) -> XlaOp:
    """This partition's id (u32 scalar); 0 without a process grid."""
    return builder.add_op("partition_id", [], api_name="PartitionId")
