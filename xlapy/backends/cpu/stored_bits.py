"""What a move of narrow floats stores: the bits it loaded.

A bf16 or 8-bit float is computed in f32 (elementwise.from_storage widens it, to_storage
rounds it back). A gather, slice, reverse, pad, concatenate or select does no arithmetic,
so rounding its values back is the identity but for NaNs (a signaling NaN came out quiet)
and costs 14 (bf16) to 40 (f8) vector ops a vector: a bf16 reverse ran at 1.6x XLA's time,
a row gather 1.1-1.3x. So from_storage tags each widened value with the bits it came from
(`tag`), and to_storage stores those bits (`bits`) for the value itself, a select of such
and bit-exact constants (on the floats, or on their bits as elementwise.select picks), and
a pad's phi of such: as XLA's copies, a signaling NaN's payload included (XLA's fused moves
store 0x7FC0 for any bf16 NaN instead; ours keep the bits there too).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from xlapy.types import ElementType as ET

_TAG = "_xlapy_stored"


def tag(wide: ir.Value, stored: ir.Value, t: ET) -> ir.Value:
    """Record that compute value `wide` is `stored` (of type t) widened."""
    setattr(wide, _TAG, (t, stored))
    return wide


def _loaded(v: ir.Value, t: ET) -> ir.Value | None:
    src = getattr(v, _TAG, None)
    return src[1] if src is not None and src[0] is t else None


def bits(b: ir.IRBuilder, v: ir.Value, t: ET) -> ir.Value | None:
    """The stored bits of type `t` that compute value `v` moved, else None."""
    if (src := _loaded(v, t)) is not None:
        return src
    if isinstance(v, ir.Constant):
        return _constant(v, t)
    if isinstance(v, ir.Instruction) and v.opname == "bitcast" and \
            isinstance(v.operands[0], ir.Instruction) and v.operands[0].opname == "select":
        c, x, y = v.operands[0].operands  # (a select on the bits: bitcasts of the arms)
        x, y = (a.operands[0] if isinstance(a, ir.Instruction) and a.opname == "bitcast"
                else None for a in (x, y))
    elif isinstance(v, ir.Instruction) and v.opname == "select":
        c, x, y = v.operands
    elif isinstance(v, ir.PhiInstr):
        return _phi(b, v, t)
    else:
        return None
    if x is None or y is None or x.type != v.type or y.type != v.type or (
            _loaded(x, t) is None and _loaded(y, t) is None):
        return None  # (nothing loaded: rounded as any value)
    bx, by = bits(b, x, t), bits(b, y, t)
    return None if bx is None or by is None else b.select(c, bx, by)


def _phi(b: ir.IRBuilder, v: ir.PhiInstr, t: ET) -> ir.Value | None:
    """A phi of the incoming values' bits, placed first in v's block, where each is loaded
    or a bit-exact constant."""
    ins = [(_loaded(x, t), x, blk) for x, blk in v.incomings]
    if all(src is None for src, _, _ in ins):
        return None
    srcs = [src if src is not None else _constant(x, t) if isinstance(x, ir.Constant) else None
            for src, x, _ in ins]
    if any(s is None for s in srcs):
        return None
    block = v.parent
    phi = ir.PhiInstr(block, srcs[0].type, name=f"{v.name}.bits")
    block.instructions.insert(0, phi)
    if b.block is block:  # (the builder's insertion point moved down with it)
        b._anchor += 1  # type: ignore[attr-defined]
    for src, (_, _, blk) in zip(srcs, ins):
        phi.add_incoming(src, blk)
    return phi


def _constant(c: ir.Constant, t: ET) -> ir.Constant | None:
    """f32 constant `c` as stored bits of `t`, where every lane converts exactly (a NaN
    never: its bits are the rounding's to choose)."""
    vector = isinstance(c.type, ir.VectorType)
    n = c.type.count if vector else 1
    if c.constant is None or c.constant is ir.Undefined:
        lanes = [0.0] * n
    else:
        raw = c.constant if vector else [c.constant]
        lanes = [0.0 if x is None or x is ir.Undefined else
                 x.constant if isinstance(x, ir.Constant) else x for x in raw]
    if not all(isinstance(x, float) for x in lanes):
        return None
    wide = np.array(lanes, np.float32)
    narrow = wide.astype(t.dtype)
    if np.isnan(wide).any() or not (narrow.astype(np.float32) == wide).all() or \
            (np.signbit(narrow.astype(np.float32)) != np.signbit(wide)).any():
        return None
    ints = narrow.view(np.uint16 if t.dtype.itemsize == 2 else np.uint8).tolist()
    it = ir.IntType(8 * t.dtype.itemsize)
    return ir.Constant(ir.VectorType(it, n), ints) if vector else ir.Constant(it, ints[0])


__all__ = ["bits", "tag"]
