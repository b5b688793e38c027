"""Reductions down the rows of a narrow last dimension, accumulated in registers.

A reduce of [..., R, C] over its rows (C a few vectors, kept) ran as one loop over R that
loaded the output's C values, combined one row into them and stored them back: each row's
step waited on the last one's store (a float max: llvm.maximum's ~7-cycle chain plus the
store-to-load forward). f32[524288, 16].max(0) took 1.96 ms against XLA's 0.70 (f32[1M, 8]
folds to that shape: narrow_columns.py). Here the rows go round CHAINS accumulators of a
row each, in registers (SSA values through allocas that mem2reg promotes), combined and
stored once. Only reducers whose order is the backend's: integer ops and float max/min
(exact in any order; flushed once at the end, as reduce_emit's `late` steps). Float sums
keep column_sums.py's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.lanes import Lane, accumulator_start
from xlapy.backends.cpu.llvm_util import for_range, i64
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: Most vectors of a row kept in registers; the accumulators (vectors x chains) stay within
#: ACCUMULATORS, half of AVX2's 16 registers.
MAX_VECTORS, ACCUMULATORS = 4, 8
#: Independent accumulators of each vector: a max step is ~7 cycles of latency, so 4 in
#: flight read a vector every ~2 cycles, past what L3 delivers to a core.
CHAINS = 4
#: Fewest rows worth it (fewer: the plain loop's code is smaller).
MIN_ROWS = 64


def _orderless(op: str, et: ET) -> bool:
    if et.is_complex or et is ET.PRED:
        return False
    if et.is_float:
        return op in ("maximum", "minimum")
    return True


class ColumnRegisterEmitter:
    """For ReductionEmitter (its kernel emitter defines b, width, rows, memo, gen, ...)."""

    b: ir.IRBuilder
    width: int
    rows: list[Instruction]
    segmented: Any
    row_depth: int
    residues: int
    memo: dict[Any, ir.Value]
    gen: Any
    linear: Any
    splat: Any
    _access: Any
    _combine: Any
    _late_flush: Any
    _phase: Any

    def _column_registers(self, op: str, et: ET, x: Instruction, dims: Sequence[int],
                          red: set[int], begin: ir.Value, end: ir.Value,
                          out: ir.Value) -> bool:
        """Emits the reduce (its output initialized) if its rows go to registers; False
        (nothing emitted) where they do not."""
        n, w = len(dims), self.width
        if n < 2 or (n - 2) not in red or (n - 1) in red or not w or dims[-1] % w or \
                dims[-1] // w > MAX_VECTORS or dims[n - 2] < MIN_ROWS or \
                not _orderless(op, et) or self.rows or self.segmented or \
                self.row_depth > 1 or self.residues > 1:
            return False
        vecs = dims[-1] // w
        chains = max(1, min(CHAINS, ACCUMULATORS // vecs))
        kept = [d for d in range(n) if d not in red]
        out_dims = [dims[d] for d in kept]
        b = self.b
        with b.goto_entry_block():
            slots = [[b.alloca(accumulator_start(op, et, w).type, name="col")
                      for _ in range(vecs)] for _ in range(chains)]

        def rows(idx: list[Any], lo: ir.Value, hi: ir.Value) -> None:
            lanes = [Lane(i64(0), v * w) for v in range(vecs)]
            ptrs = [b.gep(out, [self.linear([(idx + [i64(0), ln])[d] for d in kept],
                                            out_dims)], inbounds=True) for ln in lanes]
            for c, row in enumerate(slots):
                for v, slot in enumerate(row):
                    b.store(ew.from_storage(b, self._access(ptrs[v], [lanes[v]]), et)
                            if c == 0 else accumulator_start(op, et, w), slot)

            def step(r: ir.Value, row: list[ir.Value]) -> None:
                for ln, slot in zip(lanes, row):
                    self.memo.clear()
                    v = self.gen(x, idx + [r, ln])
                    v = v if isinstance(v.type, ir.VectorType) else self.splat(v)
                    b.store(self._combine(op, et, b.load(slot), v, late=True), slot)

            whole = b.add(lo, b.and_(b.sub(hi, lo), i64(-chains)), flags=["nsw"])
            with self._phase(idx):
                with for_range(b, lo, whole, name="cr", step=chains) as r:
                    for c, row in enumerate(slots):
                        step(r if c == 0 else b.add(r, i64(c), flags=["nsw"]), row)
                with for_range(b, whole, hi, name="crs") as r:
                    step(r, slots[0])
            for v, p in enumerate(ptrs):
                vals = [b.load(row[v]) for row in slots]
                while len(vals) > 1:  # a tree: ((c0 op c1) op (c2 op c3))
                    vals = [self._combine(op, et, vals[t], vals[t + 1], late=True)
                            if t + 1 < len(vals) else vals[t] for t in range(0, len(vals), 2)]
                done = ew.to_storage(b, self._late_flush(op, vals[0]), et)
                self._access(p, [lanes[v]], done)

        def outer(idx: list[Any]) -> None:
            d = len(idx)
            if d == n - 2:
                rows(idx, *((begin, end) if d == 0 else (i64(0), i64(dims[d]))))
                return
            lo, hi = (begin, end) if d == 0 else (i64(0), i64(dims[d]))
            with for_range(b, lo, hi, name=f"c{d}") as i:
                outer(idx + [i])

        outer([])
        return True


__all__ = ["ColumnRegisterEmitter"]
