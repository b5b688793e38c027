"""The native runtime of batch chains (batch_chain.py) and the step records it reads.

`chain_run(desc, lo, hi)` is compiled once per process (and cached on disk, like the other
build-once modules): a thread's descriptor holds its copy of the pointer table, the shared
batch counter, the remaps of the chain's intermediates, the step records (a GEMM's BLAS
arguments, a kernel's address, chain_widen.py's widen steps) and its own blocks of rows
(chain_schedule.py).
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import blas, cache, chain_widen, gemm_bf16
from xlapy.backends.cpu.llvm_util import (
    I8P,
    I64,
    KERNEL_TYPE,
    VOID,
    Engine,
    for_range,
    i64,
    new_module,
    on_host,
)
from xlapy.backends.cpu.once import once

if TYPE_CHECKING:
    from xlapy.backends.cpu.batch_chain import BatchGemm, Chain

#: Words of one step record: kind (0 GEMM, 1 kernel), function, then a GEMM's lhs/rhs/out
#: slots, their batch strides in bytes, the 10 Fortran argument cells (little-endian, read in
#: place by BLAS; M is set per block), the operands' byte offsets and row strides.
STEP = 22
_KIND, _FN = 0, 1
_LHS, _RHS, _OUT, _LB, _RB, _OB = 2, 3, 4, 5, 6, 7
_TA, _TB, _N, _M, _K, _ALPHA, _LDA, _LDB, _BETA, _LDC = range(8, 18)
_LOFF, _ROFF = 18, 19  # byte offsets of the lhs / rhs in their slots (dot_views.py)
_LRS, _ORS = 20, 21  # bytes from one row of the lhs / the result to the next (blocks of rows)


# ---- the runtime ---------------------------------------------------------------------------
#: Header words of a thread's descriptor: the table, the shared counter, rows per batch, the
#: scratch of whole batches, the bytes of scratch on the thread's stack, then the remap count
#: (remaps, steps and the thread's own blocks follow). A negative address -1 - x (the whole
#: batches' scratch, a block's, a widen step's buffer) is byte x of that stack buffer
#: (chain_schedule.STACK_BYTES for blocks; Chain.on_stack: all of a thread's scratch).
_TABLE, _COUNTER, _MROWS, _WHOLE, _STACK, _NREMAP = range(6)
RUN_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


@once
@on_host
def runtime(widen: bool) -> tuple[Engine, int]:
    """(engine, address of chain_run(desc, lo, hi)): batches [lo, hi) whole, each thread
    taking the next one left; then the thread's own blocks (chain_schedule.py), a block
    whose scratch address is negative in a buffer on this thread's stack. `widen`: for
    chains with widen steps (chain_widen.py), whose vector loop is compiled as kernels
    are; without, the runtime only calls BLAS and kernels, so LLVM's -O0 code generator
    builds it (2.4 ms instead of 7.6 of attention's first call). From the disk cache in a
    later process without emitting it (cache.library_engine)."""
    if widen:
        engine = cache.library_engine(("chain", True), lambda: _emit_runtime(True), "light",
                                      light=True, exports=["chain_run"])
    else:
        engine = cache.library_engine(("chain", False), lambda: _emit_runtime(False),
                                      "chain-O0", o0=True, exports=["chain_run"])
    return engine, int(engine.address("chain_run"))


def _emit_runtime(widen: bool) -> ir.Module:
    """chain_run(desc, lo, hi) and its block function (`runtime`)."""
    mod = new_module("xlapy_batch_chain")
    i64p = I64.as_pointer()
    block = _emit_block(mod, widen)
    fn = ir.Function(mod, ir.FunctionType(VOID, [i64p, I64, I64]), name="chain_run")
    d, lo, hi = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def at(base: ir.Value, k: ir.Value | int) -> ir.Value:
        return b.gep(base, [k if isinstance(k, ir.Value) else i64(k)])

    stack = b.alloca(ir.IntType(8), b.load(at(d, _STACK)), name="stack")  # once a call
    stack.align = 64
    here = b.ptrtoint(stack, I64)

    def resolve(addr: ir.Value) -> ir.Value:  # (-1 - x: byte x of the stack buffer)
        return b.select(b.icmp_signed("<", addr, i64(0)), b.sub(here, b.add(addr, i64(1))),
                        addr)

    counter = b.inttoptr(b.load(at(d, _COUNTER)), i64p)
    m, whole = b.load(at(d, _MROWS)), resolve(b.load(at(d, _WHOLE)))
    nremap = b.load(at(d, _NREMAP))
    steps = at(d, b.add(i64(_NREMAP + 1), b.mul(nremap, i64(3))))
    blocks = at(steps, b.add(i64(1), b.mul(b.load(steps), i64(STEP))))
    if widen:  # this thread's widen buffers (its own copy of the records)
        with for_range(b, i64(0), b.load(steps), name="w") as s:
            rec = at(steps, b.add(i64(1), b.mul(s, i64(STEP))))
            with b.if_then(b.icmp_signed("==", b.load(at(rec, _KIND)), i64(chain_widen.KIND))):
                buf = at(rec, chain_widen.BUF)
                b.store(resolve(b.load(buf)), buf)
    # a descheduled thread on a loaded machine holds up no one: the shared batches are
    # claimed from the counter by whichever thread is free
    claim, body, done = (fn.append_basic_block(n) for n in ("claim", "batch", "done"))
    b.branch(claim)
    b.position_at_end(claim)
    j = b.add(lo, b.atomic_rmw("add", counter, i64(1), "monotonic"), name="j")
    b.cbranch(b.icmp_signed("<", j, hi), body, done)
    b.position_at_end(body)
    b.call(block, [d, j, i64(0), m, whole])
    b.branch(claim)
    b.position_at_end(done)
    with for_range(b, i64(0), b.load(blocks), name="blk") as k:
        rec = at(blocks, b.add(i64(1), b.mul(k, i64(4))))
        addr = resolve(b.load(at(rec, 3)))
        b.call(block, [d, b.load(rec), b.load(at(rec, 1)), b.load(at(rec, 2)), addr])
    b.ret_void()
    return mod


def _emit_block(mod: ir.Module, widen: bool) -> ir.Function:
    """chain_block(desc, j, r0, rows, scratch): rows [r0, r0 + rows) of batch j, the
    intermediates at `scratch`: each remapped slot points where row (j * m + r0) lands
    there, the GEMMs run over those rows (their M argument set to `rows`), the kernel over
    them."""
    i64p = I64.as_pointer()
    fn = ir.Function(mod, ir.FunctionType(VOID, [i64p, I64, I64, I64, I64]),
                     name="chain_block")
    fn.linkage = "internal"
    d, j, r0, nrows, scratch = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def at(base: ir.Value, k: ir.Value | int) -> ir.Value:
        return b.gep(base, [k if isinstance(k, ir.Value) else i64(k)])

    table = b.inttoptr(b.load(at(d, _TABLE)), i64p)
    first = b.add(b.mul(j, b.load(at(d, _MROWS))), r0)  # the block's first flattened row
    nremap = b.load(at(d, _NREMAP))
    with for_range(b, i64(0), nremap, name="r") as r:
        rec = at(d, b.add(i64(_NREMAP + 1), b.mul(r, i64(3))))
        row_bytes = b.load(at(rec, 2))
        here = b.add(scratch, b.mul(b.load(at(rec, 1)), nrows))
        b.store(b.sub(here, b.mul(first, row_bytes)), at(table, b.load(rec)))
    steps = at(d, b.add(i64(_NREMAP + 1), b.mul(nremap, i64(3))))
    with for_range(b, i64(0), b.load(steps), name="s") as s:
        rec = at(steps, b.add(i64(1), b.mul(s, i64(STEP))))
        kind = b.load(at(rec, _KIND))
        if widen:
            with b.if_else(b.icmp_signed("==", kind, i64(chain_widen.KIND))) as (wide, other):
                with wide:
                    chain_widen.emit_step(b, table, rec, j, r0, nrows)
                with other:
                    _emit_call(b, table, rec, kind, j, r0, first, nrows)
        else:  # no widen steps among the records
            _emit_call(b, table, rec, kind, j, r0, first, nrows)
    b.ret_void()
    return fn


def _emit_call(b: ir.IRBuilder, table: ir.Value, rec: ir.Value, kind: ir.Value, j: ir.Value,
               r0: ir.Value, first: ir.Value, nrows: ir.Value) -> None:
    """A kernel step (kind 1) over the block's rows, or a GEMM step (kind 0) over them."""
    def at(base: ir.Value, k: ir.Value | int) -> ir.Value:
        return b.gep(base, [k if isinstance(k, ir.Value) else i64(k)])

    blas_t = ir.FunctionType(VOID, [I8P] * 13)
    with b.if_else(b.icmp_signed("==", kind, i64(1))) as (then, otherwise):
        with then:
            kfn = b.inttoptr(b.load(at(rec, _FN)), KERNEL_TYPE.as_pointer())
            b.call(kfn, [b.bitcast(table, I8P.as_pointer()), first, b.add(first, nrows)])
        with otherwise:
            def operand(slot_word: int, stride_word: int, off_word: int | None,
                        row_word: int | None) -> ir.Value:
                base = b.load(at(table, b.load(at(rec, slot_word))))
                if off_word is not None:
                    base = b.add(base, b.load(at(rec, off_word)))
                if row_word is not None:
                    base = b.add(base, b.mul(r0, b.load(at(rec, row_word))))
                return b.inttoptr(b.add(base, b.mul(j, b.load(at(rec, stride_word)))), I8P)

            def cell(k: int) -> ir.Value:
                return b.bitcast(at(rec, k), I8P)

            # the M argument (a 32-bit cell of this thread's own copy of the record)
            b.store(b.trunc(nrows, ir.IntType(32)),
                    b.bitcast(at(rec, _M), ir.IntType(32).as_pointer()))
            gfn = b.inttoptr(b.load(at(rec, _FN)), blas_t.as_pointer())
            # column-major out^T = rhs^T lhs^T, as blas._gemm_args calls it
            b.call(gfn, [cell(_TA), cell(_TB), cell(_N), cell(_M), cell(_K),
                         cell(_ALPHA), operand(_RHS, _RB, _ROFF, None), cell(_LDA),
                         operand(_LHS, _LB, _LOFF, _LRS), cell(_LDB), cell(_BETA),
                         operand(_OUT, _OB, None, _ORS), cell(_LDC)])


def _gemm_record(g: BatchGemm) -> np.ndarray:
    """A GEMM step: the same BLAS arguments as blas._gemm_args for one batch."""
    size = g.itemsize
    rec = np.zeros(STEP, np.int64)
    rec[_KIND] = 0
    rec[_FN] = gemm_bf16.blas_address(g.rhs_t, True) if g.bf16 else \
        blas.function_address("dgemm" if g.f64 else "sgemm")
    rec[_LHS], rec[_RHS], rec[_OUT] = g.lhs, g.rhs, g.out
    rec[_LB], rec[_RB], rec[_OB] = (g.m * g.k * size, g.k * g.n * size, g.m * g.n * size)
    # _op of the rhs [k, n] view: "N" (ld n) when stored [k, n], "T" (ld k) when [n, k]
    rec[_TA], rec[_LDA] = (ord("T"), g.k) if g.rhs_t else (ord("N"), g.n)
    rec[_TB], rec[_LDB] = (ord("T"), g.m) if g.lhs_t else (ord("N"), g.k)
    rec[_N], rec[_M], rec[_K], rec[_LDC] = g.n, g.m, g.k, g.n
    if g.lhs_at is not None:  # a view kernel's leaf, strided (dot_views.py)
        _, rec[_LHS], off, bs, flag, ld = g.lhs_at
        rec[_LOFF], rec[_LB], rec[_TB], rec[_LDB] = off * size, bs * size, ord(flag), ld
    if g.rhs_at is not None:
        _, rec[_RHS], off, bs, flag, ld = g.rhs_at
        rec[_ROFF], rec[_RB], rec[_TA], rec[_LDA] = off * size, bs * size, ord(flag), ld
    # bytes from one lhs row to the next: its leading dimension when stored by rows ("N")
    rec[_LRS] = rec[_LDB] * size if rec[_TB] == ord("N") else size
    rec[_ORS] = g.n * size
    one = np.array([1.0], np.float64 if g.f64 else np.float32)  # (the AMX step reads none)
    rec.view(np.uint8)[_ALPHA * 8:_ALPHA * 8 + one.itemsize] = one.view(np.uint8)
    return rec  # beta: 0.0 (all zero bits)


def _kernel_record(address: int) -> np.ndarray:
    rec = np.zeros(STEP, np.int64)
    rec[_KIND], rec[_FN] = 1, address
    return rec


def records(chain: Chain, kernel_address: int, tail_address: int = 0
            ) -> tuple[np.ndarray, list[int]]:
    """(the step count and records, the index of each widen step): widen the first GEMM's
    operands, the GEMM, the kernel, widen the second's, the GEMM, the tail's kernel."""
    kern = _kernel_record(kernel_address)
    m = chain.first.m
    recs: list[np.ndarray] = []
    widen: list[int] = []
    for g, gemm in ((0, chain.first), (1, chain.second)):
        for w in chain.widen:
            if w.gemm == g:
                widen.append(len(recs))
                recs.append(chain_widen.record(w, m, STEP))
        recs.append(_gemm_record(gemm))
        if g == 0:
            recs.append(kern)
    if chain.tail is not None:
        recs.append(_kernel_record(tail_address))
    return np.concatenate([[len(recs)], *recs]), widen


__all__ = ["STEP", "RUN_T", "records", "runtime"]
