"""dot_general as an LLVM loop nest in the object: the JIT runs float products through
OpenBLAS (a Python library call), which an object file cannot carry.

`void dot(i8* lhs, i8* rhs, i8* out, i8* acc)` over dense row-major operands of any
batch / contracting / free dimension layout. Per block of ROWS output rows (a batch index
and a flattened lhs free index each), the rows accumulate in `acc` (ROWS * N elements of the
accumulation type, in the caller's scratch): for each K_STEPS contracting indices, each
row's lhs elements times the rhs rows, added along the rhs free dimensions in one pass
(the innermost loop: LLVM vectorizes it when the rhs free dimension is contiguous; the ROWS
rows share each rhs load, the K_STEPS products each accumulator load and store). Then
the rows are converted to the result type. Accumulation types are the interpreter's and
the JIT's (library.dot_accumulator, gemm_int.accumulator): floats in f32 (bf16/f16
operands) or their own width, summed in contracting-index order; integers wrap in the
result's width (exact, order-free); pred results count in 64 bits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod

import numpy as np
from llvmlite import ir

from xlapy.aot.errors import Unimplemented
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import elementwise_complex as ewc
from xlapy.backends.cpu import elementwise_convert as ewconv
from xlapy.backends.cpu.llvm_util import I8P, VOID, for_range, i64
from xlapy.backends.cpu.ragged_emit import flat_offset
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET
from xlapy.types.element_type import from_dtype

#: Output rows sharing one pass over the rhs.
ROWS = 4
#: Contracting steps per pass over the accumulator rows (a quarter of their loads and
#: stores; gemm_int.py does the same).
K_STEPS = 4
DOT_TYPE = ir.FunctionType(VOID, [I8P, I8P, I8P, I8P])


def loop_function(mod: ir.Module, name: str, lt: ET, rt: ET, ot: ET, scratch: ir.Type,
                  noalias: bool = True
                  ) -> tuple[ir.Function, ir.IRBuilder, list[ir.Value]]:
    """An internal `void name(i8* lhs, i8* rhs, i8* out, i8* scratch)`, its builder at the
    entry, and its arguments as pointers to lhs / rhs / out storage elements and to
    `scratch` values."""
    fn = ir.Function(mod, DOT_TYPE, name=name)
    fn.linkage = "internal"
    if noalias:
        for arg in fn.args:
            arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ptrs = [b.bitcast(a, t.as_pointer()) for a, t in zip(
        fn.args, (ew.storage_type(lt), ew.storage_type(rt), ew.storage_type(ot), scratch))]
    return fn, b, ptrs


def strides(dims: Sequence[int]) -> list[int]:
    out = [1] * len(dims)
    for d in range(len(dims) - 2, -1, -1):
        out[d] = out[d + 1] * dims[d + 1]
    return out


def accumulator(instr: Instruction) -> ET:
    """The element type the product sums in (see the module docstring)."""
    from xlapy.backends.cpu import gemm_int, library

    et = instr.shape.element_type
    acc = library.dot_accumulator(instr)
    if acc is None:
        raise Unimplemented(instr.opcode, f"no accumulator for {et}")
    if acc.kind in "iu":
        iacc = gemm_int.accumulator(et)
        if iacc is None:
            raise Unimplemented(instr.opcode, f"integer product into {et}")
        return from_dtype(iacc)
    return from_dtype(np.dtype(acc))


def widen(b: ir.IRBuilder, v: ir.Value, src: ET, acc: ET) -> ir.Value:
    """An operand element (compute value of `src`) in the accumulation type."""
    return ewconv.convert(b, v, src, acc)


def mac(b: ir.IRBuilder, acc_t: ET, s: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
    """s + x * y in the accumulation type (floats: fused where the target has FMA, as
    the JIT's BLAS and convolution loops)."""
    if acc_t.is_complex:
        return ewc.binary(b, "add", [s, ewc.binary(b, "multiply", [x, y])])
    if acc_t.is_float:
        return b.fadd(s, b.fmul(x, y, flags=["contract"]), flags=["contract"])
    return b.add(s, b.mul(x, y))


def narrow(b: ir.IRBuilder, v: ir.Value, acc: ET, out: ET) -> ir.Value:
    """An accumulated value as a storage element of the result type (integers wrap, pred
    is nonzero, floats round once)."""
    return ew.to_storage(b, ewconv.convert(b, v, acc, out), out)


def emit_dot(mod: ir.Module, name: str, instr: Instruction) -> tuple[ir.Function, int]:
    """The product's function and the bytes of accumulator scratch it needs."""
    a = instr.attrs
    lhs, rhs = (o.shape for o in instr.operands)
    lt, rt, ot = lhs.element_type, rhs.element_type, instr.shape.element_type
    acc_t = accumulator(instr)
    lb, rb = list(a.lhs_batching_dimensions), list(a.rhs_batching_dimensions)
    lc, rc = list(a.lhs_contracting_dimensions), list(a.rhs_contracting_dimensions)
    lf = [d for d in range(lhs.rank) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.rank) if d not in rb and d not in rc]
    ls, rs = strides(lhs.dimensions), strides(rhs.dimensions)
    ld, rd = lhs.dimensions, rhs.dimensions
    nb = prod(ld[d] for d in lb)
    m = prod(ld[d] for d in lf)
    k = prod(ld[d] for d in lc)
    n = prod(rd[d] for d in rf)
    at = ew.compute_type(acc_t)
    acc_bytes = ROWS * n * np.dtype(acc_t.dtype).itemsize
    fn, b, (pl, pr, po, pa) = loop_function(mod, name, lt, rt, ot, at)
    if nb * m * n == 0:
        b.ret_void()
        return fn, 0

    def rhs_free(base: ir.Value, body: Callable[[ir.Value, ir.Value], None]) -> None:
        """body(rhs offset, linear n) over the rhs free dimensions, nested loops."""
        dims = [rd[d] for d in rf]
        sts = [rs[d] for d in rf]
        nst = strides(dims)

        def rec(j: int, off: ir.Value, lin: ir.Value) -> None:
            if j == len(dims):
                body(off, lin)
                return
            with for_range(b, i64(0), i64(dims[j]), name=f"n{j}") as i:
                rec(j + 1, b.add(off, b.mul(i, i64(sts[j]))),
                    b.add(lin, b.mul(i, i64(nst[j]))))
        rec(0, base, i64(0))

    lbd, lfd, lcd = [ld[d] for d in lb], [ld[d] for d in lf], [ld[d] for d in lc]
    lbs, lfs, lcs = [ls[d] for d in lb], [ls[d] for d in lf], [ls[d] for d in lc]
    rbs, rcs = [rs[d] for d in rb], [rs[d] for d in rc]
    zero = ew.constant(0, acc_t)

    def block(bi: ir.Value, m0: ir.Value, rows: int) -> None:
        """Output rows m0 .. m0 + rows of batch bi."""
        lrow = [b.add(flat_offset(b, bi, lbd, lbs), flat_offset(b, b.add(m0, i64(r)), lfd, lfs))
                for r in range(rows)]
        rbase = flat_offset(b, bi, lbd, rbs)
        with for_range(b, i64(0), i64(rows * n), name="zero") as i:
            b.store(zero, b.gep(pa, [i]))
        def steps(kk: ir.Value, ku: int) -> None:
            """Contracting indices kk .. kk + ku in one pass over the accumulator rows
            (each row's sum still in increasing k)."""
            ks = [b.add(kk, i64(j)) for j in range(ku)]
            xs = [[widen(b, ew.from_storage(b, b.load(b.gep(pl, [b.add(
                lr, flat_offset(b, kj, lcd, lcs))])), lt), lt, acc_t) for kj in ks] for lr in lrow]
            rks = [b.add(rbase, flat_offset(b, kj, lcd, rcs)) for kj in ks]
            deltas = [b.sub(rk, rks[0]) for rk in rks]

            def inner(off: ir.Value, lin: ir.Value) -> None:
                ys = [widen(b, ew.from_storage(b, b.load(b.gep(pr, [b.add(off, dk)])), rt),
                            rt, acc_t) for dk in deltas]
                for r, xr in enumerate(xs):
                    p = b.gep(pa, [b.add(lin, i64(r * n))])
                    v = b.load(p)
                    for x, y in zip(xr, ys):
                        v = mac(b, acc_t, v, x, y)
                    b.store(v, p)

            rhs_free(rks[0], inner)

        kfull = k // K_STEPS * K_STEPS
        if kfull:
            with for_range(b, i64(0), i64(kfull), name="k", step=K_STEPS) as kk:
                steps(kk, K_STEPS)
        if k > kfull:
            with for_range(b, i64(kfull), i64(k), name="kr") as kk:
                steps(kk, 1)
        obase = b.mul(b.add(b.mul(bi, i64(m)), m0), i64(n))
        with for_range(b, i64(0), i64(rows * n), name="store") as i:
            v = narrow(b, b.load(b.gep(pa, [i])), acc_t, ot)
            b.store(v, b.gep(po, [b.add(obase, i)]))

    full = m // ROWS * ROWS
    with for_range(b, i64(0), i64(nb), name="batch") as bi:
        if full:
            with for_range(b, i64(0), i64(full), name="mb", step=ROWS) as m0:
                block(bi, m0, ROWS)
        if m > full:
            with for_range(b, i64(full), i64(m), name="mr") as m0:
                block(bi, m0, 1)
    b.ret_void()
    return fn, acc_bytes


__all__ = ["emit_dot", "accumulator", "widen", "mac", "narrow", "strides", "DOT_TYPE"]
