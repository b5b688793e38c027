"""gemm_small's products of one column, [m, k] @ [k, 1] (a matrix times a vector in a loop
body: power iteration, an iterative solver's step), as dot products along k.

gemm_small's loop broadcasts lhs elements against rhs rows; with one column that is one
scalar multiply-add chain per output row, eight rows at a time: a fori_loop of a 1024 x 1024
f32 matrix times its vector took 336 us a step (XLA 43), 512 x 512 22.7 (10.7). Here R rows
at a time each keep one vector accumulator along k (R independent chains, the rhs vector
loaded once for all R), the lanes of each summed as a fixed tree once the whole vectors are done,
then the k % lanes rest added as scalars in k order: every element's order depends on the
shape alone (rows split over threads compute the same sums).
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from xlapy.backends.cpu.llvm_util import F64, for_range, i64

#: Rows sharing each loaded rhs vector (their accumulators: independent FMA chains).
ROWS = 8


def _halves(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """The lanes of v summed as a fixed tree, halves added until one is left (log2 lanes
    dependent adds: an in-order sum of 16 lanes was 15, 8 us a step of a 256 x 256 loop)."""
    n = v.type.count
    while n > 1:
        n //= 2
        idx = ir.VectorType(ir.IntType(32), n)
        lo = b.shuffle_vector(v, v, ir.Constant(idx, list(range(n))))
        hi = b.shuffle_vector(v, v, ir.Constant(idx, list(range(n, 2 * n))))
        v = b.fadd(lo, hi)
    return b.extract_element(v, ir.Constant(ir.IntType(32), 0))


def emit(b: ir.IRBuilder, a: ir.Value, w: ir.Value, out: ir.Value, kk: ir.Value,
         lo: ir.Value, hi: ir.Value, lanes: int,
         fma: Callable[[ir.Value, ir.Value, ir.Value, int], ir.Value]) -> None:
    """out[lo:hi] = lhs[lo:hi, :] @ rhs (row-major lhs at `a` with kk columns, rhs at `w`)
    for vectors of `lanes` elements; `fma(x, y, acc, width)` gemm_small's multiply-add."""
    t = a.type.pointee
    vt = ir.VectorType(t, lanes)
    size = 8 if t == F64 else 4
    whole = b.mul(b.sdiv(kk, i64(lanes)), i64(lanes))
    with b.goto_entry_block():
        accs = [b.alloca(vt, name=f"dot.acc{r}") for r in range(ROWS)]
        sums = [b.alloca(t, name=f"dot.sum{r}") for r in range(ROWS)]

    def rows_at(r0: ir.Value, count: int) -> None:
        for acc in accs[:count]:
            b.store(ir.Constant(vt, None), acc)
        # (each row's start once: codegen runs without loop strength reduction)
        rows = [b.gep(a, [b.mul(b.add(r0, i64(r)), kk)]) for r in range(count)]
        with for_range(b, i64(0), whole, name="dk", step=lanes) as k:
            x = b.load(b.bitcast(b.gep(w, [k]), vt.as_pointer()))
            x.align = size
            for row, acc in zip(rows, accs):
                y = b.load(b.bitcast(b.gep(row, [k]), vt.as_pointer()))
                y.align = size
                b.store(fma(y, x, b.load(acc), lanes), acc)
        for acc, s in zip(accs[:count], sums):
            b.store(_halves(b, b.load(acc)), s)
        with for_range(b, whole, kk, name="dt") as k:  # the rest, in k order
            x = b.load(b.gep(w, [k]))
            for row, s in zip(rows, sums):
                y = b.load(b.gep(row, [k]))
                b.store(fma(y, x, b.load(s), 1), s)
        for r, s in enumerate(sums[:count]):
            b.store(b.load(s), b.gep(out, [b.add(r0, i64(r))]))

    blocks = b.sdiv(b.sub(hi, lo), i64(ROWS))
    with for_range(b, i64(0), blocks, name="dr") as rb:
        rows_at(b.add(lo, b.mul(rb, i64(ROWS))), ROWS)
    with for_range(b, b.add(lo, b.mul(blocks, i64(ROWS))), hi, name="dr1") as r:
        rows_at(r, 1)


__all__ = ["emit", "ROWS"]
