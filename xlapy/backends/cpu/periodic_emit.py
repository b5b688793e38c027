"""A flat kernel's per-channel values (kernel_flat.py's PERIODIC op): element i of a [c]
array broadcast along a last dimension of c, read as x[i mod c].

Why: image normalization ((x / 255 - mean) / std with [3] mean and std over NHWC) was the
one element-wise kernel a short last dimension kept scalar (4.7-6x XLA's time). In lanes,
the c values repeat with period c along the flat index: a table of c + W of them (x[j mod
c] at j, built once per call on the stack) holds every vector of them, the one at flat
base b starting at b mod c: one unaligned load. A mixin of KernelEmitter (its `b`, `fn`,
`width`, `ptr`, `leaves`), answering through TileEmitter's `staged` hook.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.lanes import Lane
from xlapy.backends.cpu.llvm_util import i64
from xlapy.ir import Instruction

#: The flat copy's opcode for x[i mod c] (kernel_flat.py).
PERIODIC = "xlapy.periodic"


class PeriodicEmitter:
    """PERIODIC values for KernelEmitter."""

    b: ir.IRBuilder
    fn: ir.Function
    width: int
    leaves: dict[int, int]
    ptr: Any

    def staged(self, instr: Instruction, idx: Sequence[Any]) -> ir.Value | None:
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


__all__ = ["PERIODIC", "PeriodicEmitter"]
