"""Reductions down the rows of a narrow last dimension, accumulated in registers.

A reduce of [..., R, C] over its rows (C a few vectors, kept) ran as one loop over R that
loaded the output's C values, combined one row into them and stored them back: each row's
step waited on the last one's store (a float max: llvm.maximum's ~7-cycle chain plus the
store-to-load forward). f32[524288, 16].max(0) took 1.96 ms against XLA's 0.70 (f32[1M, 8]
folds to that shape: narrow_columns.py). Here the rows go round CHAINS accumulators of a
row each, in registers (SSA values through allocas that mem2reg promotes), combined and
stored once. A run of reduced dimensions before the last (a global pool's rows and
columns of pixels) keeps the accumulators across the whole run, the chains round its last
dimension. Only reducers whose order is the backend's: integer ops, float max/min (exact in
any order; flushed once at the end, as reduce_emit's `late` steps) and f32/f64 sums and
products (reassociated, as the kernels' other chains; column_sums.py has split a long sum
into blocks first). Same process, Zen 4, 2 threads: f32[524288, 16] max 2.0 -> 0.85 ms,
sum 1.2 -> 0.6, f32[65536, 16].prod(0) 0.60 -> 0.057, a global max pool of [32, 28, 28,
64] 0.14 -> 0.084.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
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
#: Types whose wider rows reduce a block of MAX_VECTORS vectors at a time, down all the
#: rows: each step in the output buffer rounds a 2-byte float back (bf16: ~8 vector ops) and
#: flushes it, where the registers take neither (bf16[4096, 1024].max(0) 0.54 -> 0.28 ms, XLA
#: 0.23-0.26). f32 rows lose so (0.36 -> 0.46: the blocks stride the rows; the row loop's
#: steps are independent along the row).
BLOCKED = frozenset({ET.BF16, ET.F16})
#: Fewest rows worth it (fewer: the plain loop's code is smaller). column_sums.py's blocks
#: of a long sum are ~sqrt(rows): [64, 1000, 16] summed over 1000 is [64, 40, 25, 16] over 25
#: rows, then over the 40 blocks.
MIN_ROWS = 16


def orderless(op: str, et: ET) -> bool:
    """Whether a reduce by `op` of `et` may take its elements in any order: integer ops,
    float max/min (exact), f32/f64 sums and products (reassociated)."""
    if et.is_complex or et is ET.PRED:
        return False
    if et.is_float:  # (f32/f64 sums and products reassociate, as the kernels' other chains)
        return op in ("maximum", "minimum") or op in ("add", "multiply") and \
            et in (ET.F32, ET.F64)
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
    _cheap: Any

    def _column_registers(self, op: str, et: ET, x: Instruction, dims: Sequence[int],
                          red: set[int], begin: ir.Value, end: ir.Value,
                          out: ir.Value) -> bool:
        """Emits the reduce (its output initialized) if its rows go to registers; False
        (nothing emitted) where they do not."""
        n, w = len(dims), self.width
        a = n - 2  # the run of reduced dimensions before the last: dims[a:n - 1]
        while a > 0 and (a - 1) in red:
            a -= 1
        wide = bool(w) and dims[-1] // w > MAX_VECTORS
        if n < 2 or (n - 2) not in red or (n - 1) in red or not w or dims[-1] % w or \
                (wide and (et not in BLOCKED or dims[-1] % (MAX_VECTORS * w))) or \
                prod(dims[a:n - 1]) < MIN_ROWS or \
                not orderless(op, et) or self.rows or self.segmented or \
                self.row_depth > 1 or self.residues > 1:
            return False
        vecs = min(dims[-1] // w, MAX_VECTORS)
        # (an expression past a few ops, or a transcendental, is bound by its own
        # throughput, and each chain is a copy of it to compile: reduce_emit.SUM_CHAIN_OPS)
        chains = max(1, min(CHAINS, ACCUMULATORS // vecs)) if self._cheap(x) else 1
        kept = [d for d in range(n) if d not in red]
        out_dims = [dims[d] for d in kept]
        b = self.b
        with b.goto_entry_block():
            slots = [[b.alloca(accumulator_start(op, et, w).type, name="col")
                      for _ in range(vecs)] for _ in range(chains)]
        span = vecs * w

        def bounds(d: int) -> tuple[ir.Value, ir.Value]:
            return (begin, end) if d == 0 else (i64(0), i64(dims[d]))

        def step(idx: list[Any], row: list[ir.Value], lanes: list[Lane]) -> None:
            for ln, slot in zip(lanes, row):
                self.memo.clear()
                v = self.gen(x, idx + [ln])
                v = v if isinstance(v.type, ir.VectorType) else self.splat(v)
                b.store(self._combine(op, et, b.load(slot), v, late=True), slot)

        def rows(idx: list[Any], lanes: list[Lane]) -> None:
            """The run's loops, the last one's rows round the chains."""
            lo, hi = bounds(len(idx))
            if len(idx) < n - 2:
                with for_range(b, lo, hi, name=f"cq{len(idx)}") as i:
                    rows(idx + [i], lanes)
                return
            whole = b.add(lo, b.and_(b.sub(hi, lo), i64(-chains)), flags=["nsw"])
            with self._phase(idx):
                with for_range(b, lo, whole, name="cr", step=chains) as r:
                    for c, row in enumerate(slots):
                        step(idx + [r if c == 0 else b.add(r, i64(c), flags=["nsw"])], row,
                             lanes)
                with for_range(b, whole, hi, name="crs") as r:
                    step(idx + [r], slots[0], lanes)

        def run(idx: list[Any], base: ir.Value) -> None:
            """Accumulators from the output row's columns from `base`, the run's rows into
            them, stored back."""
            lanes = [Lane(base, v * w) for v in range(vecs)]
            ptrs = [b.gep(out, [self.linear([(idx + [i64(0)] * (n - 1 - a) + [ln])[d]
                                             for d in kept], out_dims)], inbounds=True)
                    for ln in lanes]
            for c, row in enumerate(slots):
                for v, slot in enumerate(row):
                    b.store(ew.from_storage(b, self._access(ptrs[v], [lanes[v]]), et)
                            if c == 0 else accumulator_start(op, et, w), slot)
            rows(idx, lanes)
            for v, p in enumerate(ptrs):
                vals = [b.load(row[v]) for row in slots]
                while len(vals) > 1:  # a tree: ((c0 op c1) op (c2 op c3))
                    vals = [self._combine(op, et, vals[t], vals[t + 1], late=True)
                            if t + 1 < len(vals) else vals[t] for t in range(0, len(vals), 2)]
                done = ew.to_storage(b, self._late_flush(op, vals[0]), et)
                self._access(p, [lanes[v]], done)

        def outer(idx: list[Any]) -> None:
            if len(idx) == a:
                if span == dims[-1]:
                    run(idx, i64(0))
                    return
                with for_range(b, i64(0), i64(dims[-1]), name="cb", step=span) as cb:
                    run(idx, cb)
                return
            lo, hi = bounds(len(idx))
            with for_range(b, lo, hi, name=f"c{len(idx)}") as i:
                outer(idx + [i])

        outer([])
        return True


__all__ = ["ColumnRegisterEmitter", "orderless"]
