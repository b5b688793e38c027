"""The IR helpers of gemv.py's loops: one element type's vector type on the current target
and the loads, stores, fmas, splats and fixed-tree sums its loops take; a loop in whole
groups then singles."""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from xlapy.backends.cpu import target
from xlapy.backends.cpu.llvm_util import F32, F64, I32, for_range, i64, intrinsic


class Vec:
    """The vector type of one element type on the current target, and the IR it takes."""

    def __init__(self, f64: bool) -> None:
        self.t = F64 if f64 else F32
        self.size = 8 if f64 else 4
        self.lanes = target.current().vector_bits // (8 * self.size)
        self.vt = ir.VectorType(self.t, self.lanes)
        self.tp = self.t.as_pointer()
        self.zero_v = ir.Constant(self.vt, None)
        self.zero = ir.Constant(self.t, 0.0)
        self.name = "f64" if f64 else "f32"

    def fma(self, b: ir.IRBuilder, x: ir.Value, y: ir.Value, acc: ir.Value) -> ir.Value:
        suffix = f"v{self.lanes}{self.name}" if isinstance(x.type, ir.VectorType) \
            else self.name
        return intrinsic(b, f"llvm.fmuladd.{suffix}", x.type, [x, y, acc])

    def splat(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        undef = ir.Constant(self.vt, ir.Undefined)
        one = b.insert_element(undef, x, ir.Constant(I32, 0))
        return b.shuffle_vector(one, undef,
                                ir.Constant(ir.VectorType(I32, self.lanes), [0] * self.lanes))

    def load(self, b: ir.IRBuilder, base: ir.Value, at: ir.Value) -> ir.Value:
        ld = b.load(b.bitcast(b.gep(base, [at]), self.vt.as_pointer()))
        ld.align = self.size
        return ld

    def store(self, b: ir.IRBuilder, v: ir.Value, base: ir.Value, at: ir.Value) -> None:
        st = b.store(v, b.bitcast(b.gep(base, [at]), self.vt.as_pointer()))
        st.align = self.size

    def whole(self, b: ir.IRBuilder, n: ir.Value) -> ir.Value:
        """n rounded down to whole vectors."""
        return b.mul(b.sdiv(n, i64(self.lanes)), i64(self.lanes))

    def hsum(self, b: ir.IRBuilder, v: ir.Value) -> ir.Value:
        """The lanes of v summed as a fixed tree (halves added until one lane is left)."""
        width = self.lanes
        while width > 1:
            half = width // 2
            lo, hi = (b.shuffle_vector(v, v, ir.Constant(ir.VectorType(I32, half),
                                                         list(range(at, at + half))))
                      for at in (0, half))
            v, width = b.fadd(lo, hi), half
        return b.extract_element(v, ir.Constant(I32, 0))


def in_groups(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value, size: int,
              body: Callable[[ir.Value, int], None], name: str) -> None:
    """body(start, size) over [lo, hi) in whole groups of `size`, then body(start, 1) for
    each one left."""
    groups = b.sdiv(b.sub(hi, lo), i64(size))
    with for_range(b, i64(0), groups, name) as g:
        body(b.add(lo, b.mul(g, i64(size))), size)
    with for_range(b, b.add(lo, b.mul(groups, i64(size))), hi, name + "1") as k:
        body(k, 1)


__all__ = ["Vec", "in_groups"]
