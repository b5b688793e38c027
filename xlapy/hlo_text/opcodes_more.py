"""More HLO opcode readers: `topk` and the `TopK` custom call, `send`/`recv` pairs.

Registered into `opcodes.READERS` when `opcodes` is imported.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xlapy.hlo_text import attrs as A
from xlapy.hlo_text.importer import InstrContext
from xlapy.hlo_text.opcodes import make, reads
from xlapy.ir import Computation, Instruction
from xlapy.ops.attrs import ChannelHandle, ChannelType, ComparisonDirection, ComparisonType
from xlapy.ops.base import OPS
from xlapy.ops.misc import SendRecvAttrs
from xlapy.types import ElementType, Shape


# ---- topk ----------------------------------------------------------------------------------------
@reads("topk")
def _topk(c: InstrContext) -> Any:
    """XLA's TopK: the k largest (or smallest) along the last dimension, sorted, with s32
    indices; ties by lower index (chlo.top_k)."""
    _ensure_chlo()
    return "chlo.top_k", c.operands, make("chlo.top_k", k=c.req("k", A.read_int),
                                          largest=c.get("largest", A.read_bool, True)), []


def _ensure_chlo() -> None:
    if "chlo.top_k" not in OPS:
        import xlapy.stablehlo.chlo_ops  # noqa: F401  (registers chlo.top_k)


def custom_top_k(c: InstrContext, called: list[Any]) -> Any:
    """custom_call_target="TopK" (what XLA compiles top_k to): a stable sort of (x, iota)
    along the last dimension by the called comparator, then the first k of each."""
    c.arity(1)
    (x,) = c.operands
    out = c.shape
    if len(called) != 1 or not x.shape.is_array or x.shape.rank < 1 or not out.is_tuple \
            or len(out.tuple_shapes) != 2 or not out.tuple_shapes[0].is_array:
        raise c.error("TopK takes one array operand and a comparator, and gives a "
                      "(values, indices) tuple")
    d = x.shape.rank - 1
    k = out.tuple_shapes[0].dimensions[-1] if out.tuple_shapes[0].rank else 0
    idx_t = out.tuple_shapes[1].element_type
    largest = top_k_order(called[0])
    if largest is not None and idx_t is ElementType.S32:
        _ensure_chlo()  # XLA's own comparator: chlo.top_k (a partial selection, no full sort)
        return c.finish(c.add("chlo.top_k", [x], make("chlo.top_k", k=k, largest=largest)))
    iota = c.add("iota", [], make("iota", shape=Shape.array(idx_t, x.shape.dimensions),
                                  iota_dimension=d))
    srt = c.add("sort", [x, iota], make("sort", dimension=d, is_stable=True), called)
    parts = []
    for n in range(2):
        e = c.add("get_tuple_element", [srt], make("get_tuple_element", index=n))
        lim = tuple(e.shape.dimensions[:-1]) + (k,)
        parts.append(c.add("slice", [e], make("slice", start_indices=(0,) * e.shape.rank,
                                              limit_indices=lim, strides=(1,) * e.shape.rank)))
    return c.finish(c.add("tuple", parts))


def top_k_order(comp: Computation) -> bool | None:
    """Whether a TopK comparator is XLA's own: its first operands compared GT (True: the
    largest first) or LT (False) in total order, ties left to the stable sort's index order
    (the index operands unused) -- chlo.top_k's order. Total order as XLA prints it: a
    TOTALORDER compare, integers compared as they are, or floats' bits made a signed key
    (`select(bits < 0, bits ^ INT_MAX, bits)`, what XLA's optimized HLO holds). Else None."""
    params = {p.parameter_number: p for p in comp.parameters}
    root = comp.root
    if len(params) != 4 or root is None or root.opcode != "compare":
        return None
    direction = root.attrs.comparison_direction
    if direction not in (ComparisonDirection.GT, ComparisonDirection.LT):
        return None
    total = root.attrs.compare_type is ComparisonType.TOTALORDER
    if not all(_total_key(o, params[n], total) for o, n in zip(root.operands, (0, 1))):
        return None
    return direction is ComparisonDirection.GT


def _total_key(v: Instruction, p: Instruction, total: bool) -> bool:
    """`v` orders the values of parameter `p` in total order (see top_k_order)."""
    et = p.shape.element_type
    if v is p:
        return total or et.is_integer
    if v.opcode != "select" or not et.is_float:
        return False
    cond, flipped, bits = v.operands
    if bits.opcode != "bitcast_convert" or bits.operands[0] is not p \
            or not bits.shape.element_type.is_signed or bits.shape.element_type.bits != et.bits:
        return False
    imax = np.iinfo(bits.shape.dtype).max
    return (cond.opcode == "compare" and cond.operands[0] is bits
            and cond.attrs.comparison_direction is ComparisonDirection.LT
            and _constant(cond.operands[1]) == 0 and flipped.opcode == "xor"
            and bits in flipped.operands
            and any(_constant(o) == imax for o in flipped.operands if o is not bits))


def _constant(v: Instruction) -> int | None:
    if v.opcode != "constant" or v.shape.rank != 0:
        return None
    return int(v.attrs.literal.to_numpy())


# ---- send / recv ---------------------------------------------------------------------------------
def _channel(c: InstrContext, host_kind: ChannelType) -> SendRecvAttrs:
    host = c.get("is_host_transfer", A.read_bool, False)
    cid = c.get("channel_id", A.read_int, 0)
    return SendRecvAttrs(ChannelHandle(cid, host_kind if host else ChannelType.DEVICE_TO_DEVICE),
                         host)


def _named(c: InstrContext, instr: Instruction) -> Instruction:
    """An instruction standing for the node under the node's name (its shape is the op's,
    not the declared `(payload, u32[], token[])` of the send/recv start)."""
    c.comp._names.discard(instr.name)
    instr.name = c.comp.unique_name(c.node.name)
    return instr


def _start_shape(c: InstrContext) -> Shape:
    s = c.shape
    if not (s.is_tuple and len(s.tuple_shapes) == 3 and s.tuple_shapes[2].is_token):
        raise c.error(f"expects a (payload, u32[], token[]) result, declared {s}")
    if not s.tuple_shapes[0].is_array:
        raise c.error("a tuple payload is not supported (send/recv one array)")
    return s.tuple_shapes[0]


@reads("send")
def _send(c: InstrContext) -> Any:
    """send + send-done: the IR's send (payload, token) -> token; send-done is its token."""
    c.arity(2)
    payload = _start_shape(c)
    if c.operands[0].shape != payload or not c.operands[1].shape.is_token:
        raise c.error(f"send takes ({payload}, token[]) operands")
    return _named(c, c.add("send", c.operands, _channel(c, ChannelType.DEVICE_TO_HOST)))


@reads("recv")
def _recv(c: InstrContext) -> Any:
    """recv + recv-done: the IR's recv token -> (payload, token); recv-done is that tuple."""
    c.arity(1)
    payload = _start_shape(c)
    a = _channel(c, ChannelType.HOST_TO_DEVICE)
    attrs = SendRecvAttrs(a.channel_handle, a.is_host_transfer, (payload, Shape.token()))
    return _named(c, c.add("recv", c.operands, attrs))


@reads("send-done", "recv-done")
def _done(c: InstrContext) -> Any:
    c.arity(1)
    (start,) = c.operands
    want = "send" if c.node.opcode == "send-done" else "recv"
    if start.opcode != want:
        raise c.error(f"the operand of {c.node.opcode} must be a {want}")
    c.attr("channel_id")
    c.attr("is_host_transfer")
    if start.shape != c.shape:
        raise c.error(f"declared {c.shape}, the {want} gives {start.shape}")
    # The pair is one IR instruction: it takes the done's name and keeps the start's.
    start.meta["hlo_start_name"] = start.name
    return _named(c, start)
