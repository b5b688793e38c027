"""bf16 operands of a batch chain's f32 GEMMs widened block by block inside the chain, not
into whole f32 copies.

Why: where bf16 dots do not run on the AMX tiles (AVX2/SSE targets, the `ieee` denormal
mode) they are f32 BLAS products of widened operands (widen_dots.py): attention_bf16's q, k
and v became three 2 MB f32 arrays, written and read back around the chain (x86-64-v3: 9 MB
of peak against XLA's 1). A convert kernel whose f32 result only a chain GEMM reads is
dropped; the chain widens what the GEMM reads of it right before the GEMM into a buffer of
the thread's own: an lhs the block's rows, an rhs the batch (once per batch and thread).
bf16 -> f32 is exact: the bits shifted up 16, as the convert kernel computes it
(elementwise.from_storage), so the GEMMs read the same values.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu.llvm_util import for_range, i64
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: Record words of a widen step (kind 2), after kind and function: the bf16 source slot,
#: the f32 operand slot (pointed at the buffer), the source's batch stride in bytes, the
#: operand's batch and row strides in bytes, f32 elements per row (lhs) or per batch (rhs),
#: lhs (1) or rhs (0), the thread's buffer, the batch last widened there (rhs).
SRC, DST, SRC_B, DST_B, DST_R, ELEMS, LHS, BUF, LAST = range(2, 11)
KIND = 2
#: Buffers start at multiples of this (BLAS reads them).
ALIGN = 64


@dataclass(frozen=True)
class Widen:
    """The operand `slot` of GEMM `gemm` (0: the first, 1: the second), the convert of bf16
    `leaf`: its lhs (`lhs`, rows of `elems` elements) or its rhs (`elems` per batch)."""

    slot: int
    leaf: int
    gemm: int
    lhs: bool
    elems: int

    def buffer_bytes(self, m: int) -> int:
        """Bytes of its buffer: an lhs's whole batch (m rows), or an rhs's batch."""
        n = self.elems * (m if self.lhs else 1) * 4
        return -(-n // ALIGN) * ALIGN


def find(instrs: list[Instruction], gemms: tuple[Any, Any], pos: tuple[int, int],
         slot: Mapping[int, int], kernels: Mapping[int, Any],
         readers: Mapping[int, list[int]], results: AbstractSet[int],
         taken: AbstractSet[int]) -> list[Widen]:
    """The widened operands of a chain (`instrs`: its two dots' instructions at `pos`,
    `gemms`: their BatchGemms): f32 operands, other than the probabilities, computed by a
    kernel that only converts a bf16 array of the same shape, read by that GEMM alone, not
    a result; an lhs stored by rows. `taken`: slots already read otherwise (views)."""
    out: list[Widen] = []
    for g, (dot, gemm, p) in enumerate(zip(instrs, gemms, pos)):
        if gemm.f64 or gemm.bf16:
            continue
        for k, o in enumerate(dot.operands):
            if g == 1 and k == 0:  # the probabilities: the chain's own
                continue
            spec = kernels.get(id(o))
            s = slot.get(id(o))
            if spec is None or s is None or s in results or s in taken \
                    or readers.get(s, []) != [p] or not _widens(o):
                continue
            leaf = slot.get(id(o.operands[0]))
            if leaf is None or list(spec.inputs) != [leaf]:
                continue
            if k == 0 and (gemm.lhs_t or gemm.lhs_at is not None):
                continue
            if k == 1 and gemm.rhs_at is not None:
                continue
            elems = gemm.k if k == 0 else gemm.k * gemm.n
            out.append(Widen(s, leaf, g, k == 0, elems))
    return out


def _widens(o: Instruction) -> bool:
    """o = convert(x): bf16 x to an f32 of the same shape."""
    return o.opcode == "convert" and o.shape.element_type == ET.F32 and \
        o.operands[0].shape.element_type == ET.BF16 and \
        tuple(o.operands[0].shape.dimensions) == tuple(o.shape.dimensions)


def record(w: Widen, m: int, step: int) -> np.ndarray:
    """Its step record (the buffer is set per thread and call: BUF, LAST)."""
    rec = np.zeros(step, np.int64)
    rec[0] = KIND
    batch = w.elems * (m if w.lhs else 1)
    rec[SRC], rec[DST], rec[SRC_B], rec[DST_B] = w.leaf, w.slot, batch * 2, batch * 4
    rec[DST_R] = w.elems * 4 if w.lhs else 0
    rec[ELEMS], rec[LHS], rec[LAST] = w.elems, int(w.lhs), -1
    return rec


def emit_step(b: ir.IRBuilder, table: ir.Value, rec: ir.Value, j: ir.Value, r0: ir.Value,
              nrows: ir.Value) -> None:
    """The IR of a widen step for rows [r0, r0 + nrows) of batch j: the operand's slot
    pointed where the GEMM reads the buffer, and the bf16 values widened into it (an rhs
    only when the thread's buffer holds another batch)."""
    def word(k: int) -> ir.Value:
        return b.load(b.gep(rec, [i64(k)]))

    lhs = b.icmp_signed("!=", word(LHS), i64(0))
    buf = word(BUF)
    row0 = b.select(lhs, r0, i64(0))
    dst = b.sub(buf, b.add(b.mul(j, word(DST_B)), b.mul(row0, word(DST_R))))
    b.store(dst, b.gep(table, [word(DST)]))
    last = b.gep(rec, [i64(LAST)])
    fresh = b.or_(lhs, b.icmp_signed("!=", b.load(last), j))
    with b.if_then(fresh):
        b.store(j, last)
        elems = word(ELEMS)
        n = b.select(lhs, b.mul(nrows, elems), elems)
        src = b.add(b.load(b.gep(table, [word(SRC)])),
                    b.add(b.mul(j, word(SRC_B)), b.mul(b.mul(row0, elems), i64(2))))
        _widen(b, b.inttoptr(src, ir.IntType(16).as_pointer()),
               b.inttoptr(buf, ir.IntType(32).as_pointer()), n)


def _widen(b: ir.IRBuilder, src: ir.Value, dst: ir.Value, n: ir.Value) -> None:
    """dst[i] = src[i] << 16 for i < n (bf16 bits to f32 bits), 16 lanes at a time."""
    i16, i32 = ir.IntType(16), ir.IntType(32)
    v16, v32 = ir.VectorType(i16, 16), ir.VectorType(i32, 16)
    full = b.mul(b.udiv(n, i64(16)), i64(16))
    with for_range(b, i64(0), full, name="wv", step=16) as i:
        x = b.load(b.bitcast(b.gep(src, [i]), v16.as_pointer()), align=2)
        y = b.shl(b.zext(x, v32), ir.Constant(v32, [16] * 16))
        b.store(y, b.bitcast(b.gep(dst, [i]), v32.as_pointer()), align=4)
    with for_range(b, full, n, name="ws") as i:
        x = b.load(b.gep(src, [i]))
        b.store(b.shl(b.zext(x, i32), ir.Constant(i32, 16)), b.gep(dst, [i]))


__all__ = ["ALIGN", "KIND", "Widen", "emit_step", "find", "record"]
