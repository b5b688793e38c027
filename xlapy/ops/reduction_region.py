"""Calling reducer/comparator regions on whole arrays instead of one scalar at a time.

Reduce, reduce_window, select_and_scatter and sort call their region once per element pair.
A region built only from element-wise ops on scalars computes the same thing when its
parameters are arrays, so we walk its instructions with numpy arrays (constants broadcast).
A region holding anything else (a nested call, a reduce, a non-scalar value) falls back to
the interpreter's `ctx.call`, one scalar tuple at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlapy.ops.base import OPS, EvalContext
from xlapy.types import Shape

#: Ops that are element-wise but not in the "elementwise" family.
_ALSO_ELEMENTWISE = frozenset({"parameter", "constant", "tuple", "get_tuple_element"})

#: An array-valued region: arrays (broadcast-compatible) in, a tuple of arrays out.
ArrayFn = Callable[..., tuple[np.ndarray, ...]]


def _scalar_shaped(shape: Any) -> bool:
    if shape.is_tuple:
        return all(_scalar_shaped(s) for s in shape.tuple_shapes)
    return bool(shape.is_array and shape.rank == 0)


def is_elementwise_region(region: Any) -> bool:
    """True when every instruction is an element-wise op on scalars (so arrays may flow)."""
    for instr in getattr(region, "instructions", None) or ():
        op = OPS.get(instr.opcode)
        if op is None or instr.called:
            return False
        if instr.opcode not in _ALSO_ELEMENTWISE and op.family != "elementwise":
            return False
        if not _scalar_shaped(instr.shape):
            return False
    return getattr(region, "root", None) is not None


def _as_tuple(value: Any) -> tuple[np.ndarray, ...]:
    return tuple(value) if isinstance(value, tuple) else (value,)


def _walk(region: Any, ctx: EvalContext, args: Sequence[np.ndarray]) -> Any:
    env: dict[int, Any] = {}
    for param, value in zip(region.parameters, args):
        env[id(param)] = value
    for instr in region.instructions:
        if instr.opcode == "parameter":
            continue
        operands = [env[id(o)] for o in instr.operands]
        shape = instr.shape
        if operands and shape.is_array:
            # The region is declared on scalars but runs on whole arrays: ops that read their
            # result shape (bitcast_convert, convert...) must see the arrays' shape.
            dims = np.broadcast_shapes(*(np.shape(v) for v in operands))
            shape = Shape.array(shape.element_type, dims)
        env[id(instr)] = OPS[instr.opcode].evaluate(operands, instr.attrs, shape, ctx)
    return env[id(region.root)]


def region_fn(ctx: EvalContext, index: int) -> ArrayFn:
    """The `index`-th region of the current instruction as an array function.

    Arguments are arrays of one common shape (or broadcastable to it; 0-d allowed); the result
    is always a tuple of arrays of that shape with the region's result element types.
    """
    instr = getattr(ctx, "instruction", None)
    region = instr.called[index] if instr is not None else None
    fast = region is not None and is_elementwise_region(region)

    def scalar_loop(*args: np.ndarray) -> tuple[np.ndarray, ...]:
        arrays = np.broadcast_arrays(*args)
        shape = arrays[0].shape if arrays else ()
        outs: list[list[np.ndarray]] = []
        for idx in np.ndindex(*shape):
            res = _as_tuple(ctx.call(index, *(np.asarray(a[idx]) for a in arrays)))
            if not outs:
                outs = [[] for _ in res]
            for acc, r in zip(outs, res):
                acc.append(np.asarray(r))
        if not outs:  # no elements: only the result types matter
            return tuple(np.empty(shape, s.dtype)
                         for s in _result_shapes(region, ctx, index, arrays))
        return tuple(np.stack(acc).reshape(shape) for acc in outs)

    def call(*args: np.ndarray) -> tuple[np.ndarray, ...]:
        arrays = [np.asarray(a) for a in args]
        shape = np.broadcast_shapes(*(a.shape for a in arrays)) if arrays else ()
        if fast:
            with np.errstate(all="ignore"):
                out = _as_tuple(_walk(region, ctx, arrays))
            return tuple(o if o.shape == shape else np.broadcast_to(o, shape).copy()
                         for o in (np.asarray(v) for v in out))
        return scalar_loop(*arrays)

    return call


def _result_shapes(region: Any, ctx: EvalContext, index: int,
                   arrays: Sequence[np.ndarray]) -> list[Any]:
    if region is not None:
        shape = region.result_shape
        return list(shape.tuple_shapes) if shape.is_tuple else [shape]
    # No region object: run it once on zeros to learn its result types.
    res = _as_tuple(ctx.call(index, *(np.zeros((), a.dtype) for a in arrays)))
    return [np.asarray(r) for r in res]
