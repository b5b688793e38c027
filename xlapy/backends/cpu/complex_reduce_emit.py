"""Complex reductions inside kernels, whose steps are scalar (no lanes: LLVM's vectorizer
widens a sum's two reassociated float parts): sums in blocks, products in independent
chains. A mixin of ReductionEmitter (reduce_emit.py), which defines the attributes used here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import elementwise_complex as ewc
from xlapy.backends.cpu.llvm_util import for_range, i64, smin
from xlapy.types import ElementType as ET

#: Elements a complex sum (scalar steps: LLVM's vectorizer makes the lanes) adds into a
#: block sum before adding the block into the running sum (_nest_scalar_blocked).
SCALAR_SUM_BLOCK = 4096
#: ...and blocks a superblock sum takes before it is added into the running sum.
SCALAR_SUM_BLOCKS = 64
#: Independent accumulators of a row's complex product (_complex_product_chains).
PRODUCT_CHAINS = 4
#: Most floats (two a complex element) of a complex column sum's output kept in registers
#: (_complex_columns).
COLUMN_FLOATS = 48


class ComplexReduceEmitter:
    """Complex sum and product nests for ReductionEmitter."""

    b: ir.IRBuilder
    _phase: Any  # HoistEmitter's
    _nest_from: Any  # ReductionEmitter's
    _combine: Any  # ReductionEmitter's
    memo: dict[Any, ir.Value]
    gen: Any  # KernelEmitter's
    linear: Any  # KernelEmitter's

    def _complex_columns(self, dims: Sequence[int], lead: int, red: int,
                         rng: tuple[ir.Value, ir.Value], out: ir.Value, x: Any,
                         et: ET) -> None:
        """out[l, k] += x[l, i, k] for a complex sum over dimensions [lead, red) (rows i)
        keeping the `lead` ones before (l) and those after (k, at most COLUMN_FLOATS
        floats); `rng` bounds the first dimension. One accumulator per k (unrolled, so in
        registers, which LLVM's SLP vectorizer packs into vectors; the row loop is not
        vectorized along), rows added in blocks of ~SCALAR_SUM_BLOCK elements. Added into
        the output per element, each row's k loop loaded, added and stored its outputs
        back, a store-to-load chain per row (c64[65536, 8].sum(0): 1.7x XLA's time)."""
        b = self.b
        kdims = dims[red:]
        cols = [np.unravel_index(k, kdims) for k in range(int(np.prod(kdims)))]
        bounds = [rng] + [(i64(0), i64(n)) for n in dims[1:red]]
        if lead:  # one column sum per leading index
            def outer(idx: list[ir.Value]) -> None:
                if len(idx) < lead:
                    with for_range(b, *bounds[len(idx)], name=f"cl{len(idx)}") as i:
                        outer(idx + [i])
                    return
                at = b.mul(self.linear(idx, dims[:lead]), i64(len(cols)))
                self._column_sums(idx, bounds[lead:], cols, b.gep(out, [at], inbounds=True),
                                  x, et)
            outer([])
        else:
            self._column_sums([], bounds, cols, out, x, et)

    def _column_sums(self, lead: list[ir.Value], rows: list[tuple[ir.Value, ir.Value]],
                     cols: list[Any], out: ir.Value, x: Any, et: ET) -> None:
        """_complex_columns' sums at leading index `lead`: rows over `rows`' ranges."""
        b = self.b
        with b.goto_entry_block():
            accs = [b.alloca(ew.compute_type(et), name="col") for _ in cols]
            blks = [b.alloca(ew.compute_type(et), name="colblock") for _ in cols]
        at = [b.gep(out, [i64(k)], inbounds=True) for k in range(len(cols))]
        for acc, p in zip(accs, at):
            b.store(ew.from_storage(b, b.load(p), et), acc)
        inner = int(np.prod([r[1].constant for r in rows[1:]]))
        step = max(1, SCALAR_SUM_BLOCK // (len(cols) * inner))
        lo, hi = rows[0]
        with for_range(b, lo, hi, name="cb", step=step) as j:
            for blk in blks:
                b.store(ir.Constant(blk.type.pointee, None), blk)
            end = smin(b, b.add(j, i64(step), flags=["nsw"]), hi)

            def nest(idx: list[ir.Value]) -> None:
                if len(idx) < len(rows):
                    lo_d, hi_d = (j, end) if not idx else rows[len(idx)]
                    with for_range(b, lo_d, hi_d, name=f"c{len(idx)}",
                                   vectorize=len(idx) < len(rows) - 1) as i:
                        nest(idx + [i])
                    return
                self.memo.clear()
                for blk, k in zip(blks, cols):
                    v = self.gen(x, lead + idx + [i64(int(c)) for c in k])
                    b.store(self._combine("add", et, b.load(blk), v), blk)

            nest([])
            for acc, blk in zip(accs, blks):
                b.store(self._combine("add", et, b.load(acc), b.load(blk)), acc)
        for acc, p in zip(accs, at):
            b.store(ew.to_storage(b, b.load(acc), et), p)

    def _complex_product_chains(self, cols: int, idx: list[ir.Value], body: Any,
                                accp: ir.Value, et: ET) -> None:
        """A row's complex product in PRODUCT_CHAINS independent accumulators, column c into
        chain c mod PRODUCT_CHAINS, then multiplied together (reassociated, as XLA's vectorized
        reduction does): one serial chain waited a complex multiply's latency a column
        (jnp.prod of 256 x 1024 c64 rows: 3.2x XLA's time)."""
        b = self.b
        with b.goto_entry_block():
            slots = [b.alloca(ew.compute_type(et), name="chain") for _ in range(PRODUCT_CHAINS - 1)]
        for slot in slots:
            b.store(ewc.constant(1, et), slot)
        whole = cols // PRODUCT_CHAINS * PRODUCT_CHAINS
        with for_range(b, i64(0), i64(whole), name="rc", step=PRODUCT_CHAINS) as c:
            for j, slot in enumerate([accp, *slots]):
                body(idx + [c if j == 0 else b.add(c, i64(j), flags=["nsw"])], slot)
        if whole < cols:
            with for_range(b, i64(whole), i64(cols), name="rcr") as c:
                body(idx + [c])
        for slot in slots:
            b.store(self._combine("multiply", et, b.load(accp), b.load(slot)), accp)

    def _nest_scalar_blocked(self, dims: Sequence[int], idx: list[ir.Value], body: Any,
                             rng: tuple[ir.Value, ir.Value] | None, accp: ir.Value,
                             et: ET) -> None:
        """_nest_from for a complex sum (scalar steps, which LLVM's vectorizer widens): about
        SCALAR_SUM_BLOCK elements (whole rows of the dimensions after the one blocked) are
        added into a block sum (body(idx, slot)), blocks into a superblock sum,
        SCALAR_SUM_BLOCKS at a time, and that into *accp: a lane's chain of roundings is a
        block's share plus the blocks, not the whole extent's share (a sum of 4M c64 was
        4.6e-6 off, XLA's 4e-8; of 65536 x 64, 2.1e-5, XLA's 5e-8)."""
        b = self.b
        d = len(idx)
        lo, hi = rng if rng is not None else (i64(0), i64(dims[d]))
        unit = int(np.prod(dims[d + 1:]))
        if unit > SCALAR_SUM_BLOCK:  # (a block within one index of this dimension)
            with for_range(b, lo, hi, name=f"r{d}") as i, self._phase(idx + [i], True):
                self._nest_scalar_blocked(dims, idx + [i], body, None, accp, et)
            return
        with b.goto_entry_block():
            blk = b.alloca(ew.compute_type(et), name="block")
            sup = b.alloca(ew.compute_type(et), name="superblock")
        step = max(1, SCALAR_SUM_BLOCK // max(unit, 1))
        span = step * SCALAR_SUM_BLOCKS
        with for_range(b, lo, hi, name=f"r{d}s", step=span) as sj:
            send = smin(b, b.add(sj, i64(span), flags=["nsw"]), hi)
            b.store(ir.Constant(sup.type.pointee, None), sup)
            with for_range(b, sj, send, name=f"r{d}b", step=step) as j:
                end = smin(b, b.add(j, i64(step), flags=["nsw"]), send)
                b.store(ir.Constant(blk.type.pointee, None), blk)
                with for_range(b, j, end, name=f"r{d}") as i:
                    if d == len(dims) - 1:
                        body(idx + [i], blk)
                    else:
                        with self._phase(idx + [i], True):
                            self._nest_from(dims, idx + [i], lambda full: body(full, blk))
                b.store(self._combine("add", et, b.load(sup), b.load(blk)), sup)
            b.store(self._combine("add", et, b.load(accp), b.load(sup)), accp)


__all__ = ["COLUMN_FLOATS", "PRODUCT_CHAINS", "SCALAR_SUM_BLOCK", "SCALAR_SUM_BLOCKS",
           "ComplexReduceEmitter"]
