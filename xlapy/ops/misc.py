"""Side-effecting and miscellaneous ops: tokens, feeds, channels, custom calls, dynamic sizes,
process ids.

Run-time state lives in `ctx.runtime` (the interpreter's `RuntimeState`): infeed/outfeed
queues, host channels, custom-call targets, dynamic sizes. Device-to-device channels go
through `ctx.process` (see `collectives.ProcessGroupHandle`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.errors import InterpreterError, Unimplemented
from xlapy.ops.attrs import ChannelHandle, ChannelType
from xlapy.ops.base import VARIADIC, EvalContext, OpDef, Region, check, register
from xlapy.ops.control_flow import results_shape
from xlapy.types import ElementType, Shape
from xlapy.types.literal import TOKEN_VALUE

#: Process-wide custom-call targets; `ctx.runtime.custom_calls` entries take precedence.
CUSTOM_CALL_TARGETS: dict[str, Callable[..., Any]] = {}


def register_custom_call(name: str, fn: Callable[..., Any]) -> None:
    """Register `fn(operands, result_shape, attrs) -> value` as custom-call target `name`.

    `operands` is the list of operand values, `result_shape` the call's declared shape and
    `attrs` its `CustomCallAttrs`; the return value must match `result_shape` (numpy arrays,
    tuples for tuple shapes; same-kind dtypes are converted).
    """
    CUSTOM_CALL_TARGETS[name] = fn


def unregister_custom_call(name: str) -> None:
    CUSTOM_CALL_TARGETS.pop(name, None)


def _runtime_attr(ctx: EvalContext, name: str, op: str) -> Any:
    runtime = ctx.runtime
    if runtime is None or not hasattr(runtime, name):
        raise InterpreterError(f"{op}: the runtime has no '{name}' state")
    return getattr(runtime, name)


def _conform(value: Any, shape: Shape) -> Any:
    """Convert a host-provided value to `shape` (dtype cast within the same kind)."""
    if shape.is_tuple:
        if not isinstance(value, (tuple, list)) or len(value) != len(shape.tuple_shapes):
            raise InterpreterError(f"expected a tuple value of shape {shape}, got "
                                   f"{type(value).__name__}")
        return tuple(_conform(v, s) for v, s in zip(value, shape.tuple_shapes))
    if shape.is_token:
        return TOKEN_VALUE
    arr = np.asarray(value)
    if arr.dtype != shape.dtype:
        if not np.can_cast(arr.dtype, shape.dtype, "same_kind"):
            raise InterpreterError(f"expected {shape}, got {arr.dtype}{list(arr.shape)}")
        arr = arr.astype(shape.dtype)
    if arr.shape != shape.dimensions:
        raise InterpreterError(f"expected {shape}, got {arr.dtype}{list(arr.shape)}")
    return arr


# ---- after_all --------------------------------------------------------------------------------
@register
class AfterAll(OpDef):
    """stablehlo.after_all: spec §after_all; XLA AfterAll / CreateToken (no operands)."""

    name = "after_all"
    hlo_name = "after-all"
    arity = VARIADIC
    family = "misc"

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        for i, s in enumerate(operands):
            check(s.is_token, "after_all_c1", f"operand {i} is {s}, not a token")
        return Shape.token()

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        return TOKEN_VALUE


# ---- infeed / outfeed -------------------------------------------------------------------------
@dataclass(frozen=True)
class InfeedAttrs:
    """`result_shapes`: every result, payload first and the token last (spec infeed C1, C2)."""

    result_shapes: tuple[Shape, ...]
    infeed_config: str = ""
    #: One minor-to-major layout per payload result (StableHLO's optional `layout`).
    layout: tuple[tuple[int, ...], ...] | None = None


def _check_payload_then_token(op: str, results: Sequence[Shape]) -> None:
    check(len(results) >= 1, f"{op}_c{1 if op == 'infeed' else 2}",
          "needs at least one result (the token)")
    check(results[-1].is_token, f"{op}_c{2 if op == 'infeed' else 3}",
          f"the last result must be a token, got {results[-1]}")


def _check_infeed_layout(layout: Sequence[Sequence[int]], payload: Sequence[Shape]) -> None:
    """StableHLO's infeed verifier (no spec number): one layout per payload result, each a
    minor-to-major permutation of that result's dimensions (an empty one for a token)."""
    check(len(layout) == len(payload), "infeed_layout",
          f"layout has {len(layout)} entries for {len(payload)} payload result(s)")
    for i, (lay, s) in enumerate(zip(layout, payload)):
        rank = s.rank if s.is_array else 0
        check(sorted(lay) == list(range(rank)), "infeed_layout",
              f"layout {list(lay)} of result {i} is not a permutation of its {rank} "
              "dimension(s)")


def _payload_value(values: Sequence[Any]) -> Any:
    return values[0] if len(values) == 1 else tuple(values)


@register
class Infeed(OpDef):
    """stablehlo.infeed: spec §infeed; XLA Infeed/InfeedWithToken. Pops ctx.runtime.infeed.

    One queue entry is the payload: the value itself for one payload result, a tuple of the
    payload values for several.
    """

    name = "infeed"
    arity = 1
    attrs = InfeedAttrs
    side_effecting = True
    family = "misc"

    def infer(self, operands: Sequence[Shape], attrs: InfeedAttrs,
              regions: Sequence[Region]) -> Shape:
        check(operands[0].is_token, "infeed_c2", f"operand must be a token, got {operands[0]}")
        _check_payload_then_token("infeed", attrs.result_shapes)
        if attrs.layout is not None:
            _check_infeed_layout(attrs.layout, attrs.result_shapes[:-1])
        return results_shape(attrs.result_shapes)

    def evaluate(self, operands: Sequence[Any], attrs: InfeedAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        payload = attrs.result_shapes[:-1]
        if not payload:
            return TOKEN_VALUE
        queue = _runtime_attr(ctx, "infeed", "infeed")
        if not queue:
            raise InterpreterError("infeed: the infeed queue is empty (put values in "
                                   "RuntimeState.infeed)")
        value = queue.pop(0)
        if len(payload) == 1:
            return (_conform(value, payload[0]), TOKEN_VALUE)
        return (*_conform(value, Shape.tuple(payload)), TOKEN_VALUE)


@dataclass(frozen=True)
class OutfeedAttrs:
    outfeed_config: str = ""


@register
class Outfeed(OpDef):
    """stablehlo.outfeed: spec §outfeed; XLA Outfeed/OutfeedWithToken. Operands: inputs...,
    token; appends one entry (the input, or a tuple of inputs) to ctx.runtime.outfeed."""

    name = "outfeed"
    arity = VARIADIC
    attrs = OutfeedAttrs
    side_effecting = True
    family = "misc"

    def infer(self, operands: Sequence[Shape], attrs: OutfeedAttrs,
              regions: Sequence[Region]) -> Shape:
        check(len(operands) >= 1 and operands[-1].is_token, "outfeed_c1",
              "the last operand must be a token")
        for i, s in enumerate(operands[:-1]):
            check(not s.is_token, "outfeed_c1", f"input {i} is a token")
        return Shape.token()

    def evaluate(self, operands: Sequence[Any], attrs: OutfeedAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        inputs = list(operands[:-1])
        if inputs:
            _runtime_attr(ctx, "outfeed", "outfeed").append(_payload_value(inputs))
        return TOKEN_VALUE


# ---- send / recv ------------------------------------------------------------------------------
@dataclass(frozen=True)
class SendRecvAttrs:
    """`channel_handle` carries channel_id and channel_type; recv also lists its results."""

    channel_handle: ChannelHandle
    is_host_transfer: bool = False
    result_shapes: tuple[Shape, ...] = ()


def _check_channel_id(op: str, attrs: SendRecvAttrs) -> None:
    """channel_id is si64 in the spec: a wider Python int would fail later, on the grid."""
    h = attrs.channel_handle.handle
    check(-(1 << 63) <= h < (1 << 63), f"{op}_c1", f"channel_id {h} does not fit si64")


def _host_queue(ctx: EvalContext, field_name: str, channel: int, op: str) -> list[Any]:
    queues = _runtime_attr(ctx, field_name, op)
    return queues.setdefault(channel, [])


@register
class Send(OpDef):
    """stablehlo.send: spec §send; XLA Send/SendToHost. Operands: inputs..., token.

    Host transfers append to `ctx.runtime.host_sends[channel_id]`; device transfers call
    `ctx.process.send(channel_id, value)`.
    """

    name = "send"
    arity = VARIADIC
    attrs = SendRecvAttrs
    side_effecting = True
    family = "misc"

    def infer(self, operands: Sequence[Shape], attrs: SendRecvAttrs,
              regions: Sequence[Region]) -> Shape:
        check(len(operands) >= 1 and operands[-1].is_token, "send_c0",
              "the last operand must be a token")
        _check_channel_id("send", attrs)
        want = ChannelType.DEVICE_TO_HOST if attrs.is_host_transfer \
            else ChannelType.DEVICE_TO_DEVICE
        check(attrs.channel_handle.type is want, "send_c1",
              f"channel_type {attrs.channel_handle.type.name} with is_host_transfer="
              f"{attrs.is_host_transfer}; expected {want.name}")
        return Shape.token()

    def evaluate(self, operands: Sequence[Any], attrs: SendRecvAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        value = _payload_value(list(operands[:-1])) if len(operands) > 1 else ()
        channel = attrs.channel_handle.handle
        if attrs.is_host_transfer:
            _host_queue(ctx, "host_sends", channel, "send").append(value)
        elif ctx.process is None or not hasattr(ctx.process, "send"):
            raise Unimplemented(f"send: device-to-device channel {channel} needs a process grid "
                                "(ctx.process); this run has none")
        else:
            ctx.process.send(channel, value)
        return TOKEN_VALUE


@register
class Recv(OpDef):
    """stablehlo.recv: spec §recv; XLA Recv/RecvFromHost. Results: payload..., token.

    Host transfers pop `ctx.runtime.host_recvs[channel_id]`; device transfers call
    `ctx.process.recv(channel_id)`.
    """

    name = "recv"
    arity = 1
    attrs = SendRecvAttrs
    side_effecting = True
    family = "misc"

    def infer(self, operands: Sequence[Shape], attrs: SendRecvAttrs,
              regions: Sequence[Region]) -> Shape:
        check(operands[0].is_token, "recv_c3", f"operand must be a token, got {operands[0]}")
        _check_channel_id("recv", attrs)
        want = ChannelType.HOST_TO_DEVICE if attrs.is_host_transfer \
            else ChannelType.DEVICE_TO_DEVICE
        check(attrs.channel_handle.type is want, "recv_c1",
              f"channel_type {attrs.channel_handle.type.name} with is_host_transfer="
              f"{attrs.is_host_transfer}; expected {want.name}")
        _check_payload_then_token("recv", attrs.result_shapes)
        return results_shape(attrs.result_shapes)

    def evaluate(self, operands: Sequence[Any], attrs: SendRecvAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        payload = attrs.result_shapes[:-1]
        channel = attrs.channel_handle.handle
        if attrs.is_host_transfer:
            queue = _host_queue(ctx, "host_recvs", channel, "recv")
            if not queue:
                raise InterpreterError(f"recv: host channel {channel} has no value (put one in "
                                       f"RuntimeState.host_recvs[{channel}])")
            value = queue.pop(0)
        elif ctx.process is None or not hasattr(ctx.process, "recv"):
            raise Unimplemented(f"recv: device-to-device channel {channel} needs a process grid "
                                "(ctx.process); this run has none")
        else:
            value = ctx.process.recv(channel)
        if not payload:
            return TOKEN_VALUE
        if len(payload) == 1:
            return (_conform(value, payload[0]), TOKEN_VALUE)
        return (*_conform(value, Shape.tuple(payload)), TOKEN_VALUE)


# ---- custom_call ------------------------------------------------------------------------------
@dataclass(frozen=True)
class OutputOperandAlias:
    """`#stablehlo.output_operand_alias<...>`: the result (part) at `output_tuple_indices`
    reuses operand `operand_index`'s buffer (part at `operand_tuple_indices`)."""

    output_tuple_indices: tuple[int, ...] = ()
    operand_index: int = 0
    operand_tuple_indices: tuple[int, ...] = ()


def _tuple_part(shape: Shape, path: Sequence[int], what: str) -> Shape:
    for i in path:
        check(shape.is_tuple and 0 <= i < len(shape.tuple_shapes), "custom_call_alias",
              f"{what} tuple index {i} is out of bounds for {shape}")
        shape = shape.tuple_shapes[i]
    return shape


def _check_aliases(aliases: Sequence[OutputOperandAlias], operands: Sequence[Shape],
                   result: Shape) -> None:
    """StableHLO's custom_call verifier (no spec number): each alias names an existing
    operand and result part, and both have the same type."""
    for a in aliases:
        check(0 <= a.operand_index < len(operands), "custom_call_alias",
              f"operand_index {a.operand_index} is out of range for {len(operands)} operand(s)")
        src = _tuple_part(operands[a.operand_index], a.operand_tuple_indices, "operand")
        dst = _tuple_part(result, a.output_tuple_indices, "output")
        check(src == dst, "custom_call_alias",
              f"output {list(a.output_tuple_indices)} ({dst}) aliases operand "
              f"{a.operand_index} {list(a.operand_tuple_indices)} ({src}) of another type")


@dataclass(frozen=True)
class CustomCallAttrs:
    """`shape` is the declared result shape (a tuple for several results)."""

    call_target_name: str
    shape: Shape
    has_side_effect: bool = False
    backend_config: str = ""
    api_version: int = 1
    operand_layouts: tuple[tuple[int, ...], ...] | None = None
    result_layouts: tuple[tuple[int, ...], ...] | None = None
    #: jaxlib FFI attributes (`mhlo.backend_config = {uplo = 76 : ui8}`), sorted pairs.
    mhlo_backend_config: tuple[tuple[str, Any], ...] = ()
    #: Results that reuse operand buffers (None: no aliases given).
    output_operand_aliases: tuple[OutputOperandAlias, ...] | None = None


@register
class CustomCall(OpDef):
    """stablehlo.custom_call: spec §custom_call; XLA CustomCall (seed 000 §CustomCall).

    Targets come from `ctx.runtime.custom_calls`, then `register_custom_call`'s registry.
    """

    name = "custom_call"
    hlo_name = "custom-call"
    arity = VARIADIC
    attrs = CustomCallAttrs
    num_regions = VARIADIC
    side_effecting = True
    family = "misc"

    def infer(self, operands: Sequence[Shape], attrs: CustomCallAttrs,
              regions: Sequence[Region]) -> Shape:
        check(bool(attrs.call_target_name), "custom_call_c1", "call_target_name is empty")
        check(attrs.api_version in (0, 1, 2, 3, 4), "custom_call_c2",
              f"api_version {attrs.api_version} is not one of 0..4")
        if attrs.operand_layouts is not None:
            check(len(attrs.operand_layouts) == len(operands), "custom_call_c3",
                  f"{len(attrs.operand_layouts)} operand layouts for {len(operands)} operands")
            for i, (lay, s) in enumerate(zip(attrs.operand_layouts, operands)):
                check(s.is_array and sorted(lay) == list(range(s.rank)), "custom_call_c3",
                      f"operand layout {i} {list(lay)} is not a permutation for {s}")
        if attrs.result_layouts is not None:
            leaves = attrs.shape.tuple_shapes if attrs.shape.is_tuple else (attrs.shape,)
            check(len(attrs.result_layouts) == len(leaves), "custom_call_c4",
                  f"{len(attrs.result_layouts)} result layouts for {len(leaves)} results")
            for i, (lay, s) in enumerate(zip(attrs.result_layouts, leaves)):
                check(s.is_array and sorted(lay) == list(range(s.rank)), "custom_call_c4",
                      f"result layout {i} {list(lay)} is not a permutation for {s}")
        if attrs.output_operand_aliases:
            _check_aliases(attrs.output_operand_aliases, operands, attrs.shape)
        return attrs.shape

    def evaluate(self, operands: Sequence[Any], attrs: CustomCallAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        name = attrs.call_target_name
        runtime_targets = getattr(ctx.runtime, "custom_calls", None) or {}
        fn = runtime_targets.get(name) or CUSTOM_CALL_TARGETS.get(name)
        if fn is None:
            raise InterpreterError(
                f"custom_call: no target named '{name}' is registered (use "
                "xlapy.ops.misc.register_custom_call or RuntimeState.custom_calls)")
        value = fn(list(operands), result, attrs)
        try:
            return _conform(value, result)
        except InterpreterError as e:
            raise InterpreterError(f"custom_call target '{name}' returned a wrong value: {e}"
                                   ) from None


# ---- dynamic sizes ----------------------------------------------------------------------------
@dataclass(frozen=True)
class DimensionAttrs:
    dimension: int


def _dynamic_sizes(ctx: EvalContext) -> dict[int, Any] | None:
    return getattr(ctx.runtime, "dynamic_sizes", None)


@register
class GetDimensionSize(OpDef):
    """stablehlo.get_dimension_size: spec §get_dimension_size; XLA GetDimensionSize.

    Returns the dynamic size set_dimension_size attached to this very value, else the static
    size (architecture.md, "Control flow": dynamic sizes).
    """

    name = "get_dimension_size"
    hlo_name = "get-dimension-size"
    arity = 1
    attrs = DimensionAttrs
    family = "misc"

    def infer(self, operands: Sequence[Shape], attrs: DimensionAttrs,
              regions: Sequence[Region]) -> Shape:
        (operand,) = operands
        check(operand.is_array, "get_dimension_size_c1", f"operand {operand} is not a tensor")
        check(0 <= attrs.dimension < operand.rank, "get_dimension_size_c1",
              f"dimension {attrs.dimension} is out of range for rank {operand.rank}")
        return Shape.scalar(ElementType.S32)

    def evaluate(self, operands: Sequence[Any], attrs: DimensionAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        (operand,) = operands
        size = operand.shape[attrs.dimension]
        table = _dynamic_sizes(ctx)
        if table is not None:
            entry = table.get(id(operand))
            if entry is not None and entry[0]() is operand:
                size = entry[1].get(attrs.dimension, size)
        return np.asarray(size, np.int32)


@register
class SetDimensionSize(OpDef):
    """XLA SetDimensionSize (seed 000 §SetDimensionSize; HLO set-dimension-size).

    Operands: operand, size (s32[]). The result shape keeps the static bound and marks the
    dimension dynamic; the value is the operand, with the size recorded for
    get_dimension_size.
    """

    name = "set_dimension_size"
    hlo_name = "set-dimension-size"
    arity = 2
    attrs = DimensionAttrs
    family = "misc"

    def infer(self, operands: Sequence[Shape], attrs: DimensionAttrs,
              regions: Sequence[Region]) -> Shape:
        operand, size = operands
        check(operand.is_array, "set_dimension_size_c1", f"operand {operand} is not a tensor")
        check(0 <= attrs.dimension < operand.rank, "set_dimension_size_c1",
              f"dimension {attrs.dimension} is out of range for rank {operand.rank}")
        check(size.is_array and size.rank == 0 and size.element_type is ElementType.S32,
              "set_dimension_size_c2", f"size must be s32[], got {size}")
        dyn = list(operand.dynamic) or [False] * operand.rank
        dyn[attrs.dimension] = True
        return Shape(operand.element_type, operand.dimensions, (), operand.layout, tuple(dyn))

    def evaluate(self, operands: Sequence[Any], attrs: DimensionAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        operand, size = operands
        bound = operand.shape[attrs.dimension]
        n = int(size)
        if not 0 <= n <= bound:
            raise InterpreterError(f"set_dimension_size: size {n} is outside [0, {bound}] for "
                                   f"dimension {attrs.dimension}")
        out = operand.copy()
        table = _dynamic_sizes(ctx)
        if table is not None:
            prior = table.get(id(operand))
            sizes = dict(prior[1]) if prior is not None and prior[0]() is operand else {}
            sizes[attrs.dimension] = n
            table[id(out)] = (weakref.ref(out), sizes)
        return out


# ---- process ids ------------------------------------------------------------------------------
def _process_index(ctx: EvalContext, which: str) -> Any:
    process = ctx.process
    return np.asarray(0 if process is None else int(getattr(process, which)), np.uint32)


@register
class ReplicaId(OpDef):
    """stablehlo.replica_id: spec §replica_id; XLA ReplicaId. 0 without a process grid."""

    name = "replica_id"
    hlo_name = "replica-id"
    arity = 0
    family = "misc"

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        return Shape.scalar(ElementType.U32)

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        return _process_index(ctx, "replica_id")


@register
class PartitionId(OpDef):
    """stablehlo.partition_id: spec §partition_id; XLA PartitionId. 0 without a grid."""

    name = "partition_id"
    hlo_name = "partition-id"
    arity = 0
    family = "misc"

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        return Shape.scalar(ElementType.U32)

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        return _process_index(ctx, "partition_id")


from xlapy.ops import (  # noqa: E402,F401
    custom_call_factorizations,
    custom_call_targets,
    dynamic,
)
