"""The native while driver (native_loop.py): `xlapy_while` walks a loop's descriptor (its
layout is in native_loop's docstring), running the condition and body steps until the
predicate is false or the slice's iteration budget is spent; `xlapy_while_step` runs a loop
inside a loop's body as one step (nested_loop.py); `xlapy_patch_call` points a descriptor at
the loop's current buffers and calls its function (loop_gemv.py); `xlapy_gemm_call` runs a
BLAS row step with MXCSR's FTZ/DAZ cleared, as the Python path runs it."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import cache, guarded_dots, loop_split, target
from xlapy.backends.cpu.fp_env import restore_mxcsr, set_ftz_daz
from xlapy.backends.cpu.llvm_util import (
    I8,
    I8P,
    I64,
    KERNEL_TYPE,
    Engine,
    for_range,
    i64,
    new_module,
    on_host,
)
from xlapy.backends.cpu.once import once

_DRIVER = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)


def descriptor_function(mod: ir.Module, name: str
                        ) -> tuple[ir.Function, ir.Function, ir.IRBuilder,
                                   Callable[[int], ir.Value]]:
    """`i64 name(i64 *d)` in `mod` (a loop over a descriptor: this driver, a fused loop's
    function), the llvm.memcpy it copies with, a builder at its entry and d[k]'s load."""
    fn = ir.Function(mod, ir.FunctionType(I64, [I64.as_pointer()]), name=name)
    memcpy = ir.Function(mod, ir.FunctionType(ir.VoidType(), [I8P, I8P, I64, ir.IntType(1)]),
                         name="llvm.memcpy.p0.p0.i64")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d = fn.args[0]
    return fn, memcpy, b, lambda k: b.load(b.gep(d, [i64(k)]))


def _emit_driver() -> ir.Module:
    mod = new_module("xlapy_while_driver")
    i64p = I64.as_pointer()
    fn, memcpy, b, field = descriptor_function(mod, "xlapy_while")
    d = fn.args[0]

    n_cond, cond = field(0), b.inttoptr(field(1), i64p)
    pred = b.inttoptr(field(2), I8P)
    n_body, body = field(3), b.inttoptr(field(4), i64p)
    n_copy, copies = field(5), b.inttoptr(field(6), i64p)
    n_swap, swaps = field(7), b.inttoptr(field(8), i64p)
    kty = KERNEL_TYPE.as_pointer()
    mxcsr = set_ftz_daz(b)

    def run_kernels(n: ir.Value, table: ir.Value, tag: str) -> None:
        pre = b.block
        head = fn.append_basic_block(f"{tag}.head")
        bod = fn.append_basic_block(f"{tag}.body")
        done = fn.append_basic_block(f"{tag}.done")
        b.branch(head)
        b.position_at_end(head)
        k = b.phi(I64)
        k.add_incoming(i64(0), pre)
        b.cbranch(b.icmp_signed("<", k, n), bod, done)
        b.position_at_end(bod)
        base = b.mul(k, i64(3))
        f = b.inttoptr(b.load(b.gep(table, [base])), kty)
        tab = b.inttoptr(b.load(b.gep(table, [b.add(base, i64(1))])), I8P.as_pointer())
        outer = b.load(b.gep(table, [b.add(base, i64(2))]))
        b.call(f, [tab, i64(0), outer])
        k.add_incoming(b.add(k, i64(1)), b.block)
        b.branch(head)
        b.position_at_end(done)

    entry = b.block
    loop = fn.append_basic_block("loop")
    exit_ = fn.append_basic_block("exit")
    b.branch(loop)
    b.position_at_end(loop)
    it = b.phi(I64, name="iterations")
    it.add_incoming(i64(0), entry)
    run_kernels(n_cond, cond, "cond")
    go = b.icmp_unsigned("!=", b.load(pred), ir.Constant(I8, 0))
    finished = fn.append_basic_block("finished")
    more = fn.append_basic_block("more")
    cont = fn.append_basic_block("continue")
    b.cbranch(go, more, finished)
    b.position_at_end(finished)
    b.store(i64(1), b.gep(d, [i64(10)]))
    b.branch(exit_)
    # at most d[9] iterations per call: Python gets control back (Ctrl-C, limits, grid polls)
    b.position_at_end(more)
    b.cbranch(b.icmp_signed("<", it, field(9)), cont, exit_)
    b.position_at_end(cont)
    run_kernels(n_body, body, "body")
    # a nested loop ran out of its iteration budget: stop before this iteration's updates
    # (Python raises the limit's error or goes on through Python, native_loop._drive)
    copy_block = fn.append_basic_block("copies")
    b.cbranch(b.icmp_unsigned("!=", field(11), i64(0)), exit_, copy_block)
    b.position_at_end(copy_block)
    # copies
    with for_range(b, i64(0), n_copy, name="copy") as c:
        base = b.mul(c, i64(3))
        dst = b.inttoptr(b.load(b.gep(copies, [base])), I8P)
        src = b.inttoptr(b.load(b.gep(copies, [b.add(base, i64(1))])), I8P)
        nbytes = b.load(b.gep(copies, [b.add(base, i64(2))]))
        b.call(memcpy, [dst, src, nbytes, ir.Constant(ir.IntType(1), 0)])
    # swaps: new = *res; *res = *cell; for e in [cell, entries...]: *e = new
    with for_range(b, i64(0), n_swap, name="swap") as w:
        base = b.mul(w, i64(3))
        res = b.inttoptr(b.load(b.gep(swaps, [base])), i64p)
        lst = b.inttoptr(b.load(b.gep(swaps, [b.add(base, i64(1))])), i64p)
        n_lst = b.load(b.gep(swaps, [b.add(base, i64(2))]))
        cell = b.inttoptr(b.load(lst), i64p)
        new = b.load(res)
        b.store(b.load(cell), res)
        with for_range(b, i64(0), n_lst, name="e") as e:
            b.store(new, b.inttoptr(b.load(b.gep(lst, [e])), i64p))
    nxt = b.add(it, i64(1))
    it.add_incoming(nxt, b.block)
    b.branch(loop)
    b.position_at_end(exit_)
    restore_mxcsr(b, mxcsr)
    b.ret(it)
    if target.current().is_x86:
        _emit_gemm_call(mod)
    _emit_while_step(mod, fn)
    _emit_patch_call(mod)
    loop_split.emit(mod)
    guarded_dots.emit(mod)
    return mod


def _emit_word_copies(b: ir.IRBuilder, n: ir.Value, pairs: ir.Value) -> None:
    """*pairs[2j] = *pairs[2j + 1] for j < n: pointer words from one place to another (an
    inner loop's table bindings, a descriptor's buffers from a loop's tables)."""
    i64p = I64.as_pointer()
    with for_range(b, i64(0), n, name="word") as j:
        at = b.mul(j, i64(2))
        src = b.load(b.inttoptr(b.load(b.gep(pairs, [b.add(at, i64(1))])), i64p))
        b.store(src, b.inttoptr(b.load(b.gep(pairs, [at])), i64p))


def _emit_patch_call(mod: ir.Module) -> None:
    """void xlapy_patch_call(i64 *w, lo, hi): *w[3 + 2j] = *w[4 + 2j] for j < w[2] (a
    descriptor's pointers from the loop's tables), then w[0](w[1]) (loop_gemv.py: gemv's
    drive)."""
    i64p = I64.as_pointer()
    fn = ir.Function(mod, KERNEL_TYPE, name="xlapy_patch_call")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    w = b.bitcast(fn.args[0], i64p)

    def word(k: int) -> ir.Value:
        return b.load(b.gep(w, [i64(k)]))

    _emit_word_copies(b, word(2), b.gep(w, [i64(3)]))
    call_t = ir.FunctionType(ir.VoidType(), [i64p])
    b.call(b.inttoptr(word(0), call_t.as_pointer()), [b.inttoptr(word(1), i64p)])
    b.ret_void()


def _emit_while_step(mod: ir.Module, driver_fn: ir.Function) -> None:
    """void xlapy_while_step(i64 *w, lo, hi): a nested loop's whole run (nested_loop.py):

        w[0] n_reset  w[1] -> [(dst, src)]: *dst = *src (pointer words: its tables' bindings)
        w[2] n_in     w[3] -> [(dst, src, nbytes)]: memcpy(*dst, *src, nbytes) (its state in)
        w[4] its descriptor: d[10] = d[11] = 0, d[9] = w[7]; d[12](d) if set (loop_fused.py),
              else xlapy_while(d)
        if d[10] == 0 (its budget ran out): *w[8] = 1 (the outer loop's d[11]) and return
        w[5] n_out    w[6] -> [(dst, src, nbytes)]: the same copies, its results out"""
    i64p = I64.as_pointer()
    fn = ir.Function(mod, KERNEL_TYPE, name="xlapy_while_step")
    memcpy = mod.get_global("llvm.memcpy.p0.p0.i64")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    w = b.bitcast(fn.args[0], i64p)

    def word(base: ir.Value, k: ir.Value | int) -> ir.Value:
        return b.load(b.gep(base, [i64(k) if isinstance(k, int) else k]))

    def deref(addr: ir.Value) -> ir.Value:
        return b.load(b.inttoptr(addr, i64p))

    _emit_word_copies(b, word(w, 0), b.inttoptr(word(w, 1), i64p))

    def copies(n: int, at: int, tag: str) -> None:
        with for_range(b, i64(0), word(w, n), name=tag) as c:
            triples = b.inttoptr(word(w, at), i64p)
            base = b.mul(c, i64(3))
            dst = b.inttoptr(deref(word(triples, base)), I8P)
            src = b.inttoptr(deref(word(triples, b.add(base, i64(1)))), I8P)
            b.call(memcpy, [dst, src, word(triples, b.add(base, i64(2))),
                            ir.Constant(ir.IntType(1), 0)])

    copies(2, 3, "in")
    d = b.inttoptr(word(w, 4), i64p)
    b.store(i64(0), b.gep(d, [i64(10)]))
    b.store(i64(0), b.gep(d, [i64(11)]))
    b.store(word(w, 7), b.gep(d, [i64(9)]))
    own = word(d, 12)  # (a fused loop's function: loop_fused.py)
    ftype = driver_fn.function_type.as_pointer()
    b.call(b.select(b.icmp_unsigned("!=", own, i64(0)), b.inttoptr(own, ftype), driver_fn),
           [d])
    out = fn.append_basic_block("out")
    bail = fn.append_basic_block("bail")
    b.cbranch(b.icmp_unsigned("!=", word(d, 10), i64(0)), out, bail)
    b.position_at_end(bail)
    b.store(i64(1), b.inttoptr(word(w, 8), i64p))
    b.ret_void()
    b.position_at_end(out)
    copies(5, 6, "out")
    b.ret_void()


def _emit_gemm_call(mod: ir.Module) -> None:
    """void xlapy_gemm_call(i64 *w, lo, hi): w[0](w[1], lo, hi) (regions.gemm_rows and a
    GEMM descriptor) with MXCSR FTZ/DAZ clear, restored after."""
    i64p = I64.as_pointer()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [i64p, I64, I64]),
                     name="xlapy_gemm_call")
    w, lo, hi = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    i32 = ir.IntType(32)
    stm, ldm = (mod.globals.get(n) or ir.Function(mod, ir.FunctionType(ir.VoidType(), [I8P]),
                                                  name=n)
                for n in ("llvm.x86.sse.stmxcsr", "llvm.x86.sse.ldmxcsr"))
    saved, clear = b.alloca(i32), b.alloca(i32)
    b.call(stm, [b.bitcast(saved, I8P)])
    b.store(b.and_(b.load(saved), ir.Constant(i32, ~0x8040)), clear)
    b.call(ldm, [b.bitcast(clear, I8P)])
    step_t = ir.FunctionType(ir.VoidType(), [I64, I64, I64])
    gemm = b.inttoptr(b.load(w), step_t.as_pointer())
    b.call(gemm, [b.load(b.gep(w, [i64(1)])), lo, hi])
    b.call(ldm, [b.bitcast(saved, I8P)])
    b.ret_void()


def driver() -> tuple[Engine, Any]:
    """The driver of the denormal mode in force: each sets its mode's floating-point
    environment once per call, and its kernel steps trust it (fp_env.ENV_SET), so a driver
    built for one mode must never run another's loops."""
    return driver_for(denormal.current())


@once
@on_host
def driver_for(mode: str) -> tuple[Engine, Any]:
    """Built on a program's first run (once per process and denormal mode; then from the disk
    cache), in the background while the compile returns (once.ahead). The light pipeline and
    the normal code generator: ~23 ms to build where LLVM's -O0 code generator took ~9, but
    -O0 kept every value of the iteration loop in stack slots, and a loop whose body is a few
    tiny kernels is all driver: 8 state arrays of 2 floats 63 -> 35 ns an iteration, 1 array
    18 -> 11.5, with kernel_sequence.py (O3, ~50 ms to build: 32 and 11, within noise)."""
    with denormal.use(mode):
        eng = cache.library_engine(("while-driver",), _emit_driver, "while-driver-light",
                                   vectorize=False, light=True,
                                   exports=["xlapy_while", "xlapy_while_step",
                                            "xlapy_patch_call", "xlapy_gemm_call",
                                            guarded_dots.GUARD_NAME, loop_split.SPLIT_NAME])
    return eng, _DRIVER(eng.address("xlapy_while"))
