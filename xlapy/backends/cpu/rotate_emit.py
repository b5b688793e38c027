"""A rotate spelled as shifts, emitted as one: or(shift_left(x, n), shift_right_logical(x,
bits - n)) is rotl(x, n) for n <= bits (HLO's shifts give 0 from `bits` on: n = bits is x,
larger n is 0), so `n <= bits ? fshl(x, x, n) : 0` - AVX-512's vprolvd where the shifts
took ten operations (each shift guards its amount). jax.random's threefry rotates each word
four times per round with amounts from a table passed through its loop state.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu.llvm_util import intrinsic, sfx, splat
from xlapy.ir import Instruction


def _scalar(v: Instruction) -> Instruction:
    """v without broadcasts of a rank-0 value (JAX broadcasts its shift amounts)."""
    while v.opcode == "broadcast_in_dim" and v.operands[0].shape.rank == 0:
        v = v.operands[0]
    return v


def _is_splat(v: Instruction, value: int) -> bool:
    v = _scalar(v)
    if v.opcode != "constant":
        return False
    arr = np.asarray(v.attrs.literal.to_numpy())
    return arr.size > 0 and bool(np.all(arr.astype(np.int64) == value))


def match(instr: Instruction) -> tuple[Instruction, Instruction] | None:
    """(x, n) when `instr` is or(shift_left(x, n), shift_right_logical(x, bits - n)), the
    shifts in either order, else None."""
    et = instr.shape.element_type
    if instr.opcode != "or" or not et.is_integer:
        return None
    a, b = instr.operands
    if a.opcode == "shift_right_logical":
        a, b = b, a
    if a.opcode != "shift_left" or b.opcode != "shift_right_logical" or \
            a.operands[0] is not b.operands[0]:
        return None
    n, m = a.operands[1], _scalar(b.operands[1])
    if m.opcode != "subtract" or not _is_splat(m.operands[0], et.bits) or \
            _scalar(m.operands[1]) is not _scalar(n):
        return None
    return a.operands[0], n


def emit(k: Any, x: Instruction, n: Instruction, idx: list[Any]) -> ir.Value:
    """rotl(x, n) at idx for KernelEmitter `k` (n's values above the width give 0)."""
    b = k.b
    xv = k.gen(x, idx)
    nv = k.gen(n, idx if n.shape.rank else [])
    bits = x.shape.element_type.bits
    inside = b.icmp_unsigned("<=", nv, splat(nv.type, bits))
    xv, nw = k._unify([xv, nv])
    rot = intrinsic(b, f"llvm.fshl.{sfx(xv.type)}", xv.type, [xv, xv, nw])
    return b.select(inside, rot, splat(rot.type, 0))  # (a scalar test: a uniform amount)


__all__ = ["match", "emit"]
