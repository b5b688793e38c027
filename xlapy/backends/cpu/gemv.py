"""Batch-1 vector-matrix products y[1, N] = x[1, K] @ W[K, N] as JIT-compiled loops of our own.

A batch-1 layer is bound by reading W once (the 1 x 4096 x 4096 f32 layer: 64 MB). OpenBLAS's
?gemv, one ctypes call per chunk of rows, took 1.72 ms on it on 2 threads and 0.50 ms on the
4096 x 1024 layer; these loops take 1.27-1.31 and 0.37 ms (~50 GB/s from L3, the read bandwidth
of this machine's 2 cores; ~25 GB/s on one), on AVX-512, AVX2 and SSE alike.

Two loop forms, by how W lies in memory:

* row-major W (unit stride along N), the axpy form `rows`: y += x[k] * W[k, :], R rows of W
  per pass over y (R = 8: the partial row, in L1, is loaded and stored once per 8 rows), each
  element one multiply-add chain in k order. The K sum is cut into chunks fixed by the shape
  (`plan`); each chunk writes its own partial row and `finish` sums them in chunk order. A
  chunk is a contiguous block of W, streamed in address order.
* a transposed view (unit stride along K), the dot form `cols`: y[n] = dot(x, W[:, n]), four
  columns at a time, one vector accumulator each, lanes summed in a fixed tree; the output
  columns are cut into chunks, each element computed whole by one chunk.

Either way the bits depend on the shape alone, never on the thread count: the caller and the
pool's workers it reserved take the next chunk left (an atomic counter), so a busy second core
costs at most its chunk in flight. A product is one native call (`drive`: post to the workers,
claim chunks, wait, sum the partial rows): through NativePool.share, a Python job list per call
cost ~15 us more per layer (0.385 -> 0.35 ms on the MLP's 16 MB layers).

MXCSR FTZ/DAZ are cleared around the loops (IEEE, like BLAS on the Python path and gemm_small).
One module per loop form, element type and target, built once per process on first use and
cached on disk like any kernel (shape-independent: n, k, strides are arguments).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import cache, parallel, target
from xlapy.backends.cpu.fp_env import restore_mxcsr, set_ftz_daz
from xlapy.backends.cpu.gemv_ir import Vec, in_groups
from xlapy.backends.cpu.llvm_util import (
    I32,
    I64,
    VOID,
    Engine,
    for_range,
    i64,
    new_module,
)
from xlapy.backends.cpu.once import ahead, once, started
from xlapy.backends.cpu.threads import natives, slot_words
from xlapy.backends.cpu.thunks import ptr
from xlapy.backends.cpu.transpose_lib import c_order

#: Rows of W per pass over the partial row (axpy form); 4, 8 and 16 ran alike (within 3%).
ROWS = 8
#: Columns of a transposed W per pass over x (dot form): eight streams of W in flight per
#: thread. On Zen 4 a 4096 x 4096 f32 matrix @ vector, min of 40 bursts against XLA's in the
#: same process, ran 1.03-1.10 of XLA's time with 4, 0.94-1.03 with 8, 1.18-1.21 with 16
#: (1.05 -> 1.01 in AVX2 code); each column's sum is the same either way.
COLS = 8
#: Bytes of W per chunk at least: enough work per hand-off that a chunk costs far more than
#: taking it (~1 us), small enough that a late or busy thread holds up little of the call
#: (0.5, 1, 2 and 4 MB ran alike). Software prefetch of the next rows did not help.
CHUNK_BYTES = 1 << 20
#: Bytes of W from which a call is cut into CHUNK_BYTES chunks.
SPLIT_BYTES = 1 << 21
#: Bytes of W from which (to SPLIT_BYTES) a call is cut in two halves, below which it runs
#: on the calling thread alone: a loop's products then keep each half of W in one core's
#: L2 (claim's first chunks) instead of reading all of it from L3 on one core. RNN-like
#: fori_loop of tanh(tanh(h @ A) @ B), A, B 1 MB (Zen 4, 2 threads, against XLA): 2.8-3.2
#: -> 1.7-1.8 ms, 1.06 -> 0.61-0.65. A call outside a loop runs both halves itself.
PAIR_BYTES = 1 << 18

_DRIVE_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# Descriptor words of drive(d): the claim counter, the chunk count, the pool's post and wait,
# the number of workers; the loop's x, w, out (partial rows or y), extent (n for rows, k for
# cols), ldw, x's or y's stride, beta*, the partial rows' stride (elements); finish or not,
# y and its stride; the workers' slots; the chunks' cuts.
(_D_NEXT, _D_CHUNKS, _D_POST, _D_WAIT, _D_WORKERS, _D_X, _D_W, _D_OUT, _D_EXT, _D_LDW, _D_INC,
 _D_BETA, _D_OUT_STEP, _D_FINISH, _D_Y, _D_INCY) = range(16)
_D_SLOTS = 16
_D_CUTS = _D_SLOTS + parallel.MAX_CHUNKS


def _emit_rows(mod: ir.Module, name: str, v: Vec) -> None:
    """rows(x, w, y, n, ldw, klo, khi, incx): y[:n] = the sum over k in [klo, khi) of
    x[k * incx] * w[k * ldw : + n], each element one multiply-add chain in k order."""
    tp = v.tp
    fn = ir.Function(mod, ir.FunctionType(VOID, [tp, tp, tp, I64, I64, I64, I64, I64]),
                     name=f"{name}_rows")
    x, w, y, n, ldw, klo, khi, incx = fn.args
    for p in (x, w, y):
        p.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    saved = set_ftz_daz(b)
    nv = v.whole(b, n)
    with for_range(b, i64(0), nv, "z", step=v.lanes) as c:
        v.store(b, v.zero_v, y, c)
    with for_range(b, nv, n, "zt") as c:
        b.store(v.zero, b.gep(y, [c]))

    def pass_rows(k0: ir.Value, r: int) -> None:
        """y += x[k0 .. k0+r) @ w[k0 .. k0+r, :]: one load and store of y per r rows."""
        xs = [b.load(b.gep(x, [b.mul(b.add(k0, i64(j)), incx)])) for j in range(r)]
        xv = [v.splat(b, s) for s in xs]
        ws = [b.gep(w, [b.mul(b.add(k0, i64(j)), ldw)]) for j in range(r)]
        with for_range(b, i64(0), nv, "c", step=v.lanes) as c:
            acc = v.load(b, y, c)
            for j in range(r):
                acc = v.fma(b, xv[j], v.load(b, ws[j], c), acc)
            v.store(b, acc, y, c)
        with for_range(b, nv, n, "ct") as c:
            acc = b.load(b.gep(y, [c]))
            for j in range(r):
                acc = v.fma(b, xs[j], b.load(b.gep(ws[j], [c])), acc)
            b.store(acc, b.gep(y, [c]))

    in_groups(b, klo, khi, ROWS, pass_rows, "g")
    restore_mxcsr(b, saved)
    b.ret_void()


def _emit_finish(mod: ir.Module, name: str, v: Vec) -> None:
    """finish(parts, chunks, n, y, incy, beta*): y[j * incy] = the sum of parts[:, j] in
    chunk order, after beta * y[j * incy] when *beta != 0 (y *= beta; y += sum). The sums
    go straight to y when it is contiguous and beta is 0, else through parts[0]."""
    tp = v.tp
    fn = ir.Function(mod, ir.FunctionType(VOID, [tp, I64, I64, tp, I64, tp]),
                     name=f"{name}_finish")
    parts, chunks, n, y, incy, beta_p = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    saved = set_ftz_daz(b)
    beta = b.load(beta_p)
    scale = b.fcmp_ordered("!=", beta, v.zero)
    direct = b.and_(b.not_(scale), b.icmp_signed("==", incy, i64(1)))
    dst = b.select(direct, y, parts)
    nv = v.whole(b, n)
    vacc, sacc = b.alloca(v.vt), b.alloca(v.t)

    def total(at: ir.Value, load: Callable[[ir.Value], ir.Value], acc: ir.Value,
              store: Callable[[ir.Value, ir.Value], None]) -> None:
        b.store(load(at), acc)
        with for_range(b, i64(1), chunks, "p") as p:
            b.store(b.fadd(b.load(acc), load(b.add(b.mul(p, n), at))), acc)
        store(b.load(acc), at)

    with for_range(b, i64(0), nv, "c", step=v.lanes) as c:
        total(c, lambda at: v.load(b, parts, at), vacc,
              lambda s, at: v.store(b, s, dst, at))
    with for_range(b, nv, n, "ct") as c:
        total(c, lambda at: b.load(b.gep(parts, [at])), sacc,
              lambda s, at: b.store(s, b.gep(dst, [at])))
    with b.if_then(b.not_(direct)):
        with for_range(b, i64(0), n, "j") as j:
            out = b.gep(y, [b.mul(j, incy)])
            res = b.load(b.gep(parts, [j]))
            b.store(b.select(scale, b.fadd(b.fmul(beta, b.load(out)), res), res), out)
    restore_mxcsr(b, saved)
    b.ret_void()


def _emit_cols(mod: ir.Module, name: str, v: Vec) -> None:
    """cols(x, w, y, k, ldw, nlo, nhi, incy, beta*): y[j * incy] = dot(x[:k], w[j * ldw :
    + k]) (+ beta * y[j * incy] when *beta != 0) for j in [nlo, nhi); x contiguous. COLS
    columns per pass over x, one vector accumulator each, lanes summed as a fixed tree, the
    k % lanes tail added after in k order."""
    tp = v.tp
    fn = ir.Function(mod, ir.FunctionType(VOID, [tp, tp, tp, I64, I64, I64, I64, I64, tp]),
                     name=f"{name}_cols")
    x, w, y, kk, ldw, nlo, nhi, incy, beta_p = fn.args
    for p in (x, w, y):
        p.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    saved = set_ftz_daz(b)
    beta = b.load(beta_p)
    scale = b.fcmp_ordered("!=", beta, v.zero)
    kv = v.whole(b, kk)
    slots = [b.alloca(v.t) for _ in range(COLS)]  # the tails' sums (entry block: registers)

    def pass_cols(j0: ir.Value, c: int) -> None:
        cs = [b.gep(w, [b.mul(b.add(j0, i64(j)), ldw)]) for j in range(c)]
        pre = b.block
        body = fn.append_basic_block("dot")
        done = fn.append_basic_block("dot.end")
        b.cbranch(b.icmp_signed("<", i64(0), kv), body, done)
        b.position_at_end(body)
        at = b.phi(I64)
        at.add_incoming(i64(0), pre)
        accs = [b.phi(v.vt) for _ in range(c)]
        for a in accs:
            a.add_incoming(v.zero_v, pre)
        xv = v.load(b, x, at)
        new = [v.fma(b, xv, v.load(b, cj, at), a) for cj, a in zip(cs, accs)]
        nxt = b.add(at, i64(v.lanes))
        for a, s in zip(accs, new):
            a.add_incoming(s, b.block)
        at.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_signed("<", nxt, kv), body, done)
        b.position_at_end(done)
        ends = []
        for s in new:
            phi = b.phi(v.vt)
            phi.add_incoming(v.zero_v, pre)
            phi.add_incoming(s, body)
            ends.append(phi)
        sums = [v.hsum(b, e) for e in ends]
        for j in range(c):
            acc = slots[j]
            b.store(sums[j], acc)
            with for_range(b, kv, kk, "kt") as kt:
                b.store(v.fma(b, b.load(b.gep(x, [kt])), b.load(b.gep(cs[j], [kt])),
                              b.load(acc)), acc)
            dst = b.gep(y, [b.mul(b.add(j0, i64(j)), incy)])
            res = b.load(acc)
            b.store(b.select(scale, b.fadd(b.fmul(beta, b.load(dst)), res), res), dst)

    in_groups(b, nlo, nhi, COLS, pass_cols, "q")
    restore_mxcsr(b, saved)
    b.ret_void()


def _emit_driver(mod: ir.Module, name: str, v: Vec, form: str) -> None:
    """drive(d): every chunk of a call on the caller and the workers whose slots the
    descriptor names (each taking the next chunk left: an atomic counter), then, for the
    rows form, `finish`. One native call per product: no Python per chunk or per worker.
    The descriptor's words are _D_* (gemv builds it)."""
    i64p = I64.as_pointer()
    tp = v.tp
    posted, fn_word, args_word = slot_words()

    def word(b: ir.IRBuilder, d: ir.Value, at: ir.Value | int) -> ir.Value:
        return b.load(b.gep(d, [i64(at) if isinstance(at, int) else at]))

    def ptr(b: ir.IRBuilder, d: ir.Value, at: int) -> ir.Value:
        return b.inttoptr(word(b, d, at), tp)

    # chunk(d, c): the loop over chunk c
    chunk = ir.Function(mod, ir.FunctionType(VOID, [i64p, I64]), name=f"{name}_chunk")
    d, c = chunk.args
    b = ir.IRBuilder(chunk.append_basic_block("entry"))
    lo = word(b, d, b.add(c, i64(_D_CUTS)))
    hi = word(b, d, b.add(c, i64(_D_CUTS + 1)))
    ext = word(b, d, _D_EXT)
    if form == "rows":  # chunk c's partial row at out + c * n
        out = b.gep(ptr(b, d, _D_OUT), [b.mul(c, word(b, d, _D_OUT_STEP))])
        b.call(mod.globals[f"{name}_rows"], [ptr(b, d, _D_X), ptr(b, d, _D_W), out, ext,
                                             word(b, d, _D_LDW), lo, hi, word(b, d, _D_INC)])
    else:
        b.call(mod.globals[f"{name}_cols"], [ptr(b, d, _D_X), ptr(b, d, _D_W),
                                             ptr(b, d, _D_OUT), ext, word(b, d, _D_LDW), lo,
                                             hi, word(b, d, _D_INC), ptr(b, d, _D_BETA)])
    b.ret_void()

    # claim(d, first): chunk `first` (each thread its own: thread t of T chunk t, so a loop's
    # gemv keeps its chunks of W in the same core's L2 step after step), then chunk
    # d[NEXT]++ until none is left (the workers' job, and the caller's)
    claim = ir.Function(mod, ir.FunctionType(VOID, [i64p, I64]), name=f"{name}_claim")
    d, first = claim.args
    entry = claim.append_basic_block("entry")
    own = claim.append_basic_block("own")
    loop, body, done = (claim.append_basic_block(n) for n in ("claim", "chunk", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed("<", first, word(b, d, _D_CHUNKS)), own, loop)
    b.position_at_end(own)
    b.call(chunk, [d, first])
    b.branch(loop)
    b.position_at_end(loop)
    k = b.atomic_rmw("add", b.gep(d, [i64(_D_NEXT)]), i64(1), "monotonic")
    b.cbranch(b.icmp_signed("<", k, word(b, d, _D_CHUNKS)), body, done)
    b.position_at_end(body)
    b.call(chunk, [d, k])
    b.branch(loop)
    b.position_at_end(done)
    b.ret_void()

    # drive(d): post claim(d) to the named workers, claim on this thread, wait for each
    # (a job a worker has not started runs here: wait's steal), then finish
    drive = ir.Function(mod, ir.FunctionType(VOID, [i64p]), name=f"{name}_drive")
    d = drive.args[0]
    b = ir.IRBuilder(drive.append_basic_block("entry"))
    post = b.inttoptr(word(b, d, _D_POST), ir.FunctionType(VOID, [i64p]).as_pointer())
    wait = b.inttoptr(word(b, d, _D_WAIT),
                      ir.FunctionType(VOID, [i64p, I32, I32]).as_pointer())
    nw = word(b, d, _D_WORKERS)

    def slot(k: ir.Value) -> ir.Value:
        return b.inttoptr(word(b, d, b.add(k, i64(_D_SLOTS))), i64p)

    b.store(b.add(nw, i64(1)), b.gep(d, [i64(_D_NEXT)]))  # (chunks 0..nw: claim's first)
    with for_range(b, i64(0), nw, "post") as k:
        sl = slot(k)
        b.store(b.ptrtoint(claim, I64), b.gep(sl, [i64(fn_word)]))
        b.store(b.ptrtoint(d, I64), b.gep(sl, [i64(args_word)]))
        b.store(b.add(k, i64(1)), b.gep(sl, [i64(args_word + 1)]))
        b.call(post, [sl])
    b.call(claim, [d, i64(0)])
    with for_range(b, i64(0), nw, "wait") as k:
        sl = slot(k)
        seq = b.load(b.bitcast(b.gep(sl, [i64(posted)]), I32.as_pointer()))
        b.call(wait, [sl, seq, ir.Constant(I32, 1)])
    if form == "rows":
        with b.if_then(b.icmp_signed("!=", word(b, d, _D_FINISH), i64(0))):
            b.call(mod.globals[f"{name}_finish"],
                   [ptr(b, d, _D_OUT), word(b, d, _D_CHUNKS), word(b, d, _D_EXT),
                    ptr(b, d, _D_Y), word(b, d, _D_INCY), ptr(b, d, _D_BETA)])
    b.ret_void()


def _emit(name: str, f64: bool, form: str) -> ir.Module:
    """The module of one loop form: "rows" (rows, finish and the driver) or "cols" (cols
    and the driver)."""
    mod = new_module(name)
    v = Vec(f64)
    if form == "rows":
        _emit_rows(mod, name, v)
        _emit_finish(mod, name, v)
    else:
        _emit_cols(mod, name, v)
    _emit_driver(mod, name, v, form)
    return mod


@dataclass(frozen=True)
class Compiled:
    """One loop form's module for one element type on one target: `drive(descriptor)`."""

    engine: Engine
    drive: Any


def _name(f64: bool, form: str) -> str:
    return f"xlapy_{'d' if f64 else 's'}gemv_{form}"


@started
def _job(f64: bool, tgt: target.CpuTarget, form: str) -> Callable[[], Engine]:
    """A loop form's module compiling on a compile thread (cache.library_job), started once
    per process by the first compile that plans such a product (`build_ahead`), so LLVM's
    work goes on beside the rest of that compile: started as the compile returned, it
    still made the batch-1 MLP's first call wait ~27 ms."""
    with target.use(tgt), denormal.use(denormal.IEEE):
        name = _name(f64, form)
        return cache.library_job(("gemv", f64, form), lambda: _emit(name, f64, form),
                                 "light", exports=[f"{name}_drive"])


@once
def _compile(f64: bool, tgt: target.CpuTarget, form: str) -> Compiled:
    """One module per loop form (a program needs one: less of the first call's compile),
    element type and target, compiled once per process, cached on disk like any kernel."""
    eng = _job(f64, tgt, form)()
    return Compiled(eng, _DRIVE_T(eng.address(f"{_name(f64, form)}_drive")))


def available() -> bool:
    """Whether the loops run here: an x86-64 target this process can run."""
    return _runs(target.current())


@functools.cache
def _runs(t: target.CpuTarget) -> bool:
    return t.is_x86 and t.runs_here


@functools.lru_cache(maxsize=512)
def plan(extent: int, line_bytes: int, total_bytes: int, align: int) -> tuple[int, ...]:
    """Chunk boundaries of the split extent (K rows of a row-major W, N columns of a
    transposed one; `line_bytes` each): ~CHUNK_BYTES of W per chunk, at most
    parallel.MAX_CHUNKS, inner boundaries at multiples of `align`; two halves below
    SPLIT_BYTES, one chunk below PAIR_BYTES. A function of the shape alone: so are the
    bits."""
    if total_bytes < min(PAIR_BYTES, SPLIT_BYTES) or extent < 2 * align:
        return (0, extent)
    per = max(align, CHUNK_BYTES // max(line_bytes, 1) // align * align)
    if total_bytes < SPLIT_BYTES:  # two halves: each thread's stays in its core's L2
        per = max(align, extent // 2 // align * align)
    return tuple(parallel.fixed_cuts(extent, per, align))


def describe(form: str, k: int, n: int, ldw: int, inc: int, incy: int, beta: np.ndarray,
             dtype: Any, zero_beta: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """A drive descriptor for one [1, k] x W product in loop form `form` ("rows": W [k, n]
    with row stride `ldw`, `inc` x's stride; "cols": W [n, k] transposed, `inc` y's) - its
    chunks, extents, strides and beta* - and the partial rows a "rows" product of several
    chunks (or a strided / beta output) sums through, else None. The caller writes x, w, y
    (_D_X, _D_W, _D_Y) and out (_D_OUT: y, or the partial rows) and the workers."""
    it = np.dtype(dtype).itemsize
    d = np.zeros(_D_CUTS + parallel.MAX_CHUNKS + 1, np.int64)
    parts = None
    if form == "cols":
        cuts = plan(n, k * it, k * n * it, COLS)
        d[_D_EXT], d[_D_LDW], d[_D_INC] = k, ldw, inc
    else:
        cuts = plan(k, n * it, k * n * it, ROWS)
        if not (len(cuts) == 2 and incy == 1 and zero_beta):  # else no partial row needed
            parts = np.empty((len(cuts) - 1, n), dtype)
        d[_D_EXT], d[_D_LDW], d[_D_INC], d[_D_OUT_STEP] = n, ldw, inc, n
        d[_D_FINISH], d[_D_INCY] = int(parts is not None), incy or 1
    d[_D_BETA] = _addr(beta)
    chunks = len(cuts) - 1
    d[_D_CHUNKS] = chunks
    d[_D_CUTS:_D_CUTS + chunks + 1] = cuts
    return d, parts


def _stride(v: np.ndarray, axis: int, it: int) -> int | None:
    """The element stride of `v` along `axis` (any for an extent of 1), or None when it is
    not a positive whole number of elements."""
    if v.shape[axis] == 1:
        return 0
    s = v.strides[axis]
    return s // it if s > 0 and s % it == 0 else None


def _addr(v: np.ndarray) -> int:
    """v's data address (thunks.ptr's buffer route where v allows it: ~0.35 us, not 1.3)."""
    if v.flags.c_contiguous and v.flags.writeable:
        return ptr(v)
    return int(v.__array_interface__["data"][0])


#: Zero betas (f32, f64) a cached descriptor points at.
_ZERO = {"f": np.zeros(1, np.float32), "d": np.zeros(1, np.float64)}


@functools.lru_cache(maxsize=256)
def _described(form: str, k: int, n: int, ldw: int, inc: int, incy: int, char: str
               ) -> tuple[np.ndarray, int | None]:
    """describe's descriptor of a zero-beta product (read-only: each call writes a copy)
    and the rows of the partial sums it needs, if any: ~11 us of Python a call less (a
    64 x 256 x @ W: 21 -> 7.7 us, one thread; 512 x 512 39 -> 22)."""
    d, parts = describe(form, k, n, ldw, inc, incy, _ZERO[char], np.dtype(char), True)
    d.flags.writeable = False
    return d, None if parts is None else parts.shape[0]


def gemv(a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float = 0.0,
         threads: int = 1) -> None:
    """out[0, :] = a[0, :] @ b + beta * out[0, :] for f32/f64 a [1, K], b [K, N] (any
    strides), threads taking the next chunk left (`plan`: the bits never depend on the
    thread count)."""
    k, n = b.shape
    if a.shape != (1, k) or out.shape != (1, n) or not a.dtype == b.dtype == out.dtype or \
            a.dtype.char not in "fd":
        raise ValueError(f"gemv: {a.shape} {a.dtype} @ {b.shape} {b.dtype} -> {out.shape} "
                         f"{out.dtype} is no f32/f64 [1, K] @ [K, N] -> [1, N]")
    if n == 0:
        return
    y = out[0]
    it = a.itemsize
    incy = _stride(out, 1, it)
    if incy is None:  # a reversed or odd output view: through a contiguous row
        tmp = np.zeros((1, n), a.dtype)
        gemv(a, b, tmp, 0.0, threads)
        if beta == 0.0:
            y[...] = tmp[0]
        else:
            y *= beta
            y += tmp[0]
        return
    if k == 0:
        if beta == 0.0:
            y.fill(0)
        else:
            y *= beta
        return
    f64 = a.dtype.char == "d"
    tgt = target.current()
    x = a[0]
    s0, s1 = _stride(b, 0, it), _stride(b, 1, it)
    dot_form = s0 in (0, 1) and s1 is not None and (n == 1 or s1 not in (0, 1))
    if not dot_form and (s1 not in (0, 1) or s0 is None):
        b = c_order(b)
        s0 = n
    if dot_form:
        form, inc, ldw = "cols", incy, s1 or k
        if x.strides[0] != it and k > 1:
            x = np.ascontiguousarray(x)
    else:
        form, inc, ldw = "rows", _stride(a, 1, it), s0 or n
        if inc is None:
            x = np.ascontiguousarray(x)
            inc = 1
    if beta == 0.0:  # (a product's usual call: its descriptor made once)
        template, rows = _described(form, k, n, ldw, inc, incy, a.dtype.char)
        d = template.copy()
        parts = None if rows is None else np.empty((rows, n), a.dtype)
    else:
        beta_buf = np.array([beta], a.dtype)
        d, parts = describe(form, k, n, ldw, inc, incy, beta_buf, a.dtype, False)
    y_at = _addr(y)
    d[_D_X], d[_D_W], d[_D_Y] = _addr(x), _addr(b), y_at
    d[_D_OUT] = y_at if parts is None else _addr(parts)
    code = _compile(f64, tgt, form)
    chunks = int(d[_D_CHUNKS])
    # under SPLIT_BYTES the halves both run here (a worker woken per call cost more than
    # it saved: 512 x 512 23 -> 33 us); a loop's reserved, spinning workers take them
    helpers = min(threads, chunks) - 1 if k * n * it >= SPLIT_BYTES else 0
    if helpers < 1:
        code.drive(ptr(d))
        return
    pool = parallel.pool(threads)
    ks = pool.reserve(helpers)  # fewer when another thread holds some: more chunks here
    d[_D_POST:_D_WAIT + 1] = _natives()
    d[_D_WORKERS] = len(ks)
    d[_D_SLOTS:_D_SLOTS + len(ks)] = [pool.addrs[j] for j in ks]
    try:
        code.drive(ptr(d))
    finally:
        pool.release(ks)


#: Matrix elements from which a matrix-vector product runs as the dot form here: below,
#: ?gemm's n = 1 call is as quick and the loop's module not worth its first compile.
MATVEC_ELEMENTS = 1 << 16


def takes_matvec(m: int, n: int, k: int, dtype: Any) -> bool:
    """Whether an f32/f64 [m, k] @ [k, 1] product runs as `matvec`: OpenBLAS's sgemm with
    n = 1 read a 4096 x 4096 f32 matrix at a third of the bandwidth (5.6 ms on 2 threads,
    XLA 2.3; the dot form 2.4)."""
    return (n == 1 and m > 1 and m * k >= MATVEC_ELEMENTS and np.dtype(dtype).char in "fd"
            and available())


def build_ahead(f64: bool, form: str = "cols") -> None:
    """In a compile: a loop form's module is built while the compile returns (once.py):
    "cols" for `matvec` (the dot form a row-major matrix takes) and for a [1, K] row times
    a transposed W, "rows" for a row times a row-major W."""
    tgt = target.current()
    if _runs(tgt):
        _job(f64, tgt, form)
    ahead(_compile, f64, tgt, form)


def matvec(a: np.ndarray, b: np.ndarray, out: np.ndarray, threads: int = 1) -> None:
    """out[m, 1] = a[m, k] @ b[k, 1] (f32/f64, any strides) as the transposed vector-matrix
    product out.T = b.T @ a.T: a row-major a is then a transposed W, read by the dot form
    (each output one dot of a row of a with b, bits fixed by the shape)."""
    gemv(b.T, a.T, out.T, 0.0, threads)


@functools.cache
def _natives() -> tuple[int, int]:
    """The pool's native post and wait (addresses fixed for the process)."""
    return natives()


__all__ = ["gemv", "describe", "matvec", "takes_matvec", "available", "plan", "Compiled",
           "ROWS", "COLS", "CHUNK_BYTES", "SPLIT_BYTES", "MATVEC_ELEMENTS"]
