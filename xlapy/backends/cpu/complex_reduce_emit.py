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


class ComplexReduceEmitter:
    """Complex sum and product nests for ReductionEmitter."""

    b: ir.IRBuilder
    _phase: Any  # HoistEmitter's
    _nest_from: Any  # ReductionEmitter's
    _combine: Any  # ReductionEmitter's

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


__all__ = ["PRODUCT_CHAINS", "SCALAR_SUM_BLOCK", "SCALAR_SUM_BLOCKS", "ComplexReduceEmitter"]
