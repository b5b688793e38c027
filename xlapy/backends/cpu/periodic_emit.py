"""A flat kernel's per-channel and per-row values (kernel_flat.py's PERIODIC and ROWWISE
ops): element i of a [c] array broadcast along a last dimension of c, read as x[i mod c],
and of an array of the rows broadcast across it, read as x[i // c].

Why: image normalization ((x / 255 - mean) / std with [3] mean and std over NHWC) was the
one element-wise kernel a short last dimension kept scalar (4.7-6x XLA's time). In lanes,
the c values repeat with period c along the flat index: a table of c + W of them (x[j mod
c] at j, built once per call on the stack) holds every vector of them, the one at flat
base b starting at b mod c: one unaligned load. A mixin of KernelEmitter (its `b`, `fn`,
`width`, `ptr`, `leaves`), answering through TileEmitter's `staged` hook.

Per row: x[:, None] ** e[None, :] (jnp.vander: 6 columns) and points scaled per point
([N, 3] * s[:, None]) ran a masked vector per row, 6 (3) of 16 lanes live, one row per
iteration (vander of 4096: 1.6x XLA's time, the points 1.75x). In lanes, the vector at flat
base b reads x[b // c + ((b mod c) + k) // c] for lane k: the c offset patterns are a
constant table, and the vector is the rows' values b // c + j (j < (c + W - 2) // c + 1)
broadcast and selected by lane (a gather, vgatherdps, took twice the masked rows' time
on Zen 4).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.lanes import Lane
from xlapy.backends.cpu.llvm_util import I32, broadcast, i64
from xlapy.ir import Instruction

#: The flat copy's opcodes for x[i mod c] and x[i // c] (kernel_flat.py).
PERIODIC = "xlapy.periodic"
ROWWISE = "xlapy.rowwise"


class PeriodicEmitter:
    """PERIODIC values for KernelEmitter."""

    b: ir.IRBuilder
    fn: ir.Function
    width: int
    leaves: dict[int, int]
    ptr: Any

    def staged(self, instr: Instruction, idx: Sequence[Any]) -> ir.Value | None:
        if instr.opcode == ROWWISE:
            return self._rowwise(instr, idx[0])
        if instr.opcode != PERIODIC:
            return super().staged(instr, idx)  # type: ignore[misc]
        b = self.b
        x = instr.operands[0]
        t = x.shape.element_type
        c = x.shape.num_elements  # (a leaf [c], or [1, ..., 1, c])
        src = self.ptr(self.leaves[id(x)], t)
        i = idx[0]
        if not isinstance(i, Lane):
            return ew.from_storage(b, b.load(b.gep(src, [b.urem(i, i64(c))])), t)
        table = self._periodic_table(x, src, c)
        at = b.urem(b.add(i.base, i64(i.off)) if i.off else i.base, i64(c))
        vt = ir.VectorType(src.type.pointee, self.width)
        p = b.bitcast(b.gep(table, [i64(0), at]), vt.as_pointer())
        return ew.from_storage(b, b.load(p, align=1), t)

    def _rowwise(self, instr: Instruction, i: Any) -> ir.Value:
        """x[i // c] (x: the rows' values, c: the flat length over x's)."""
        b = self.b
        x = instr.operands[0]
        t = x.shape.element_type
        c = instr.shape.num_elements // x.shape.num_elements
        src = self.ptr(self.leaves[id(x)], t)
        if not isinstance(i, Lane):
            return ew.from_storage(b, b.load(b.gep(src, [b.udiv(i, i64(c))])), t)
        w = self.width
        at = b.add(i.base, i64(i.off)) if i.off else i.base
        q = b.udiv(at, i64(c))
        offs = b.load(b.gep(self._row_patterns(c, w), [i64(0), b.urem(at, i64(c))]), align=4)
        last = i64(x.shape.num_elements - 1)
        v = None
        for j in range((c + w - 2) // c + 1):  # the rows the lanes span, at most
            r = b.add(q, i64(j)) if j else q
            if j:  # (past the last row only for lanes past the end)
                r = b.select(b.icmp_unsigned("<", r, last), r, last)
            row = broadcast(b, b.load(b.gep(src, [r], inbounds=True)), w)
            v = row if v is None else b.select(
                b.icmp_unsigned(">=", offs, ir.Constant(offs.type, [j] * w)), row, v)
        return ew.from_storage(b, v, t)

    def _row_patterns(self, c: int, w: int) -> ir.GlobalVariable:
        """The constant [c] x <w x i32> table of ((r + k) // c for lane k) by phase r."""
        mod = self.fn.module
        name = f"rowwise.{c}.{w}"
        g = mod.globals.get(name)
        if g is None:
            vt = ir.VectorType(I32, w)
            g = ir.GlobalVariable(mod, ir.ArrayType(vt, c), name)
            g.initializer = ir.Constant(g.type.pointee, [
                ir.Constant(vt, [(r + k) // c for k in range(w)]) for r in range(c)])
            g.global_constant = True
            g.linkage = "private"
        return g

    def _periodic_table(self, x: Instruction, src: ir.Value, c: int) -> ir.Value:
        """x's values at j mod c for j < c + width, on the stack (filled once a call)."""
        tables = self.__dict__.setdefault("_periodic", {})
        key = (id(x), self.width)
        if key not in tables:
            b = self.b
            n = c + self.width
            with b.goto_entry_block():
                table = b.alloca(ir.ArrayType(src.type.pointee, n), name="periodic")
                for j in range(n):
                    b.store(b.load(b.gep(src, [i64(j % c)])), b.gep(table, [i64(0), i64(j)]))
            tables[key] = table
        return tables[key]


__all__ = ["PERIODIC", "ROWWISE", "PeriodicEmitter"]
