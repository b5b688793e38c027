"""reduce_window with a window along the last dimension only (a moving average, a 1-D max
pool over time): the output columns whose every window position lies inside the operand
fold in registers, UNROLL vectors of columns at a time, every window position before one
store.

The generic fold (window_emit._generic) walks the window positions outermost and folds each
into the whole output row in memory: a moving sum of 16 over rows of 16K floats read and
wrote its output row 16 times (64 x 16384: 1.37 ms, XLA 0.41). Each column folds the same
values in the same order (the init value, then the window positions in order): the same
bits. The columns that read padding (and a rest shorter than UNROLL vectors) keep the
generic fold.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import flush_ftz
from xlapy.backends.cpu.lanes import vector_width
from xlapy.backends.cpu.llvm_util import broadcast, for_range, i64
from xlapy.types import ElementType as ET

#: Vectors of output columns folded together (independent chains: a fold's latency hidden).
UNROLL = 4


class SlideEmitter:
    """ReduceWindowEmitter's register fold of the last dimension's windows (a mixin)."""

    b: ir.IRBuilder
    n: int
    ets: list[ET]
    dims: list[int]
    odims: list[int]
    win: list[int]
    st: list[int]
    bd: list[int]
    wd: list[int]
    pad: list[tuple[int, int]]
    xp: list[ir.Value]
    op: list[ir.Value]
    init: list[ir.Value]

    def slides(self) -> bool:
        """One f32/f64 operand, windows of one element (no padding, no dilation) but along
        the last dimension, there unit-stride and undilated in the base."""
        r = len(self.dims)
        return self.n == 1 and self.ets[0] in (ET.F32, ET.F64) and r >= 1 and \
            self._lanes() >= 2 and self.win[r - 1] > 1 and self.st[r - 1] == 1 and \
            self.bd[r - 1] == 1 and all(self.win[d] == 1 and self.pad[d] == (0, 0) and
                                        self.bd[d] == 1 for d in range(r - 1))

    def _lanes(self) -> int:
        return vector_width() // (2 if self.ets[0] is ET.F64 else 1)

    def interior(self) -> tuple[int, int]:
        """[j0, j1): the output columns whose every window position is inside the operand
        (j + w * wdil - low in [0, n) for every w)."""
        d = len(self.dims) - 1
        lo, last = self.pad[d][0], self.odims[-1]
        j0 = min(max(lo, 0), last)
        j1 = min(max(self.dims[d] - (self.win[d] - 1) * self.wd[d] + lo, j0), last)
        return j0, j1

    def slide(self, base: ir.Value, xbase: ir.Value, j0: ir.Value, j1: ir.Value) -> ir.Value:
        """Output columns [j0, j0 + k * UNROLL * lanes) of the row at `base` (its operand
        row at `xbase`; j0 <= j1, both interior) folded in registers; returns the first
        column left to the generic fold."""
        b = self.b
        d = len(self.dims) - 1
        lanes = self._lanes()
        step = lanes * UNROLL
        blocks = b.sdiv(b.sub(j1, j0), i64(step))
        t = ew.compute_type(self.ets[0])
        vt = ir.VectorType(t, lanes)
        size = self.ets[0].bits // 8
        with b.goto_entry_block():
            slots = [b.alloca(vt, name=f"slide{u}") for u in range(UNROLL)]
        init = ew.flush(b, broadcast(b, self.init[0], lanes))
        off = -self.pad[d][0]
        with flush_ftz.in_kernel(), \
                for_range(b, i64(0), blocks, name="sv") as k:  # (FTZ set: op_emit)
            j = b.add(j0, b.mul(k, i64(step)))
            for s in slots:
                b.store(init, s)
            src = b.add(xbase, b.add(j, i64(off)))
            with for_range(b, i64(0), i64(self.win[d]), name="sw") as w:
                at = b.add(src, b.mul(w, i64(self.wd[d])))
                for u, s in enumerate(slots):
                    p = b.gep(self.xp[0], [b.add(at, i64(u * lanes))], inbounds=True)
                    v: Any = b.load(b.bitcast(p, vt.as_pointer()), align=size)
                    b.store(self._red_vector(ew.mark_flushed(b.load(s)), v), s)
            for u, s in enumerate(slots):
                p = b.gep(self.op[0], [b.add(base, b.add(j, i64(u * lanes)))], inbounds=True)
                b.store(b.load(s), b.bitcast(p, vt.as_pointer()), align=size)
        return b.add(j0, b.mul(blocks, i64(step)))

    def _red_vector(self, acc: ir.Value, v: ir.Value) -> ir.Value:
        """The fold's next value, flushed (a no-op after arithmetic, which FTZ flushes): the
        accumulators hold no denormal, so the next fold need not flush them again."""
        return ew.flush(self.b, self.red([acc], [v])[0])  # type: ignore[attr-defined]


__all__ = ["SlideEmitter", "UNROLL"]
