"""Batch-1 vector-matrix products y[1, N] = x[1, K] @ W[K, N] as JIT-compiled loops of our own.

A batch-1 layer is bound by reading W once (the 1 x 4096 x 4096 f32 layer: 64 MB). OpenBLAS's
?gemv, one call per chunk of rows, reached ~2/3 of the machine's read bandwidth on 2 threads
and needed ctypes argument marshalling per call; these loops stream W at the bandwidth.

Two loop forms, by how W lies in memory:

* row-major W (unit stride along N), the axpy form `rows`: y += x[k] * W[k, :], R rows of W
  per pass over y (R = 8: the partial row, in L1, is loaded and stored once per 8 rows), each
  element one multiply-add chain in k order. The K sum is cut into chunks fixed by the shape
  (`plan`); each chunk writes its own partial row and `finish` sums them in chunk order. A
  chunk is a contiguous block of W, streamed in address order.
* a transposed view (unit stride along K), the dot form `cols`: y[n] = dot(x, W[:, n]), four
  columns at a time, one vector accumulator each, lanes summed in a fixed tree; the output
  columns are cut into chunks, each element computed whole by one chunk.

Either way the bits depend on the shape alone, never on the thread count: the threads of the
pool (threads.NativePool.share) take the next chunk left, so a busy second core costs at most
its chunk in flight. MXCSR FTZ/DAZ are cleared around the loops (IEEE, like BLAS on the Python
path and gemm_small). One module per element type and target, built once per process on first
use and cached on disk like any kernel (shape-independent: n, k, strides are arguments).
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
from xlapy.backends.cpu.llvm_util import (
    F32,
    F64,
    I64,
    VOID,
    Engine,
    for_range,
    i64,
    intrinsic,
    module_text,
    new_module,
    restore_mxcsr,
    set_ftz_daz,
)
from xlapy.backends.cpu.once import once

#: Rows of W per pass over the partial row (axpy form).
ROWS = 8
#: Columns of a transposed W per pass over x (dot form).
COLS = 4
#: Bytes of W per chunk at least: enough work per hand-off that a chunk costs far more than
#: taking it (~1 us), small enough that a late or busy thread holds up little of the call.
CHUNK_BYTES = 1 << 20
#: Bytes of W below which the call runs on the calling thread alone.
SPLIT_BYTES = 1 << 21

_P = ctypes.c_void_p
_I = ctypes.c_int64
_ROWS_T = ctypes.CFUNCTYPE(None, _P, _P, _P, _I, _I, _I, _I, _I)
_COLS_T = ctypes.CFUNCTYPE(None, _P, _P, _P, _I, _I, _I, _I, _I, _P)
_FINISH_T = ctypes.CFUNCTYPE(None, _P, _I, _I, _P, _I, _P)


def _emit(name: str, f64: bool) -> ir.Module:
    """rows(x, w, y, n, ldw, klo, khi, incx), cols(x, w, y, k, ldw, nlo, nhi, incy, beta*),
    finish(parts, chunks, n, y, incy, beta*)."""
    t = F64 if f64 else F32
    size = 8 if f64 else 4
    lanes = target.current().vector_bits // (8 * size)
    vt = ir.VectorType(t, lanes)
    tp = t.as_pointer()
    mod = new_module(name)
    zero_v = ir.Constant(vt, None)
    zero = ir.Constant(t, 0.0)

    def fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, acc: ir.Value) -> ir.Value:
        suffix = f"v{lanes}{'f64' if f64 else 'f32'}" if isinstance(x.type, ir.VectorType) \
            else ("f64" if f64 else "f32")
        return intrinsic(b, f"llvm.fmuladd.{suffix}", x.type, [x, y, acc])

    def splat(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        one = b.insert_element(ir.Constant(vt, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
        return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined),
                                ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))

    def vload(b: ir.IRBuilder, base: ir.Value, at: ir.Value) -> ir.Value:
        ld = b.load(b.bitcast(b.gep(base, [at]), vt.as_pointer()))
        ld.align = size
        return ld

    def vstore(b: ir.IRBuilder, v: ir.Value, base: ir.Value, at: ir.Value) -> None:
        st = b.store(v, b.bitcast(b.gep(base, [at]), vt.as_pointer()))
        st.align = size

    # ---- rows(x, w, y, n, ldw, klo, khi, incx): y[:n] = sum_k x[k*incx] * w[k*ldw : +n]
    fn = ir.Function(mod, ir.FunctionType(VOID, [tp, tp, tp, I64, I64, I64, I64, I64]),
                     name=f"{name}_rows")
    x, w, y, n, ldw, klo, khi, incx = fn.args
    for p in (x, w, y):
        p.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    saved = set_ftz_daz(b)
    nv = b.mul(b.sdiv(n, i64(lanes)), i64(lanes))  # columns in whole vectors
    with for_range(b, i64(0), nv, "z", step=lanes) as c:
        vstore(b, zero_v, y, c)
    with for_range(b, nv, n, "zt") as c:
        b.store(zero, b.gep(y, [c]))

    def pass_rows(k0: ir.Value, r: int) -> None:
        """y += x[k0 .. k0+r) @ w[k0 .. k0+r, :]: one load and store of y per r rows."""
        xs = [b.load(b.gep(x, [b.mul(b.add(k0, i64(j)), incx)])) for j in range(r)]
        xv = [splat(b, s) for s in xs]
        ws = [b.gep(w, [b.mul(b.add(k0, i64(j)), ldw)]) for j in range(r)]
        with for_range(b, i64(0), nv, "c", step=lanes) as c:
            acc = vload(b, y, c)
            for j in range(r):
                acc = fma(b, xv[j], vload(b, ws[j], c), acc)
            vstore(b, acc, y, c)
        with for_range(b, nv, n, "ct") as c:
            acc = b.load(b.gep(y, [c]))
            for j in range(r):
                acc = fma(b, xs[j], b.load(b.gep(ws[j], [c])), acc)
            b.store(acc, b.gep(y, [c]))

    groups = b.sdiv(b.sub(khi, klo), i64(ROWS))
    with for_range(b, i64(0), groups, "g") as g:
        pass_rows(b.add(klo, b.mul(g, i64(ROWS))), ROWS)
    with for_range(b, b.add(klo, b.mul(groups, i64(ROWS))), khi, "k1") as k:
        pass_rows(k, 1)
    restore_mxcsr(b, saved)
    b.ret_void()

    # ---- cols(x, w, y, k, ldw, nlo, nhi, incy, beta*): y[j*incy] = dot(x[:k], w[j*ldw:+k])
    # (+ beta * y[j*incy] when *beta != 0) for j in [nlo, nhi); x contiguous.
    fn = ir.Function(mod, ir.FunctionType(VOID, [tp, tp, tp, I64, I64, I64, I64, I64, tp]),
                     name=f"{name}_cols")
    x, w, y, kk, ldw, nlo, nhi, incy, beta_p = fn.args
    for p in (x, w, y):
        p.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    saved = set_ftz_daz(b)
    beta = b.load(beta_p)
    scale = b.fcmp_ordered("!=", beta, zero)
    kv = b.mul(b.sdiv(kk, i64(lanes)), i64(lanes))
    slots = [b.alloca(t) for _ in range(COLS)]  # the tails' sums (entry block: registers)

    def hsum(v: ir.Value) -> ir.Value:
        """The lanes of v summed as a fixed tree (halves added until one lane is left)."""
        width = lanes
        while width > 1:
            half = width // 2
            lo = b.shuffle_vector(v, v, ir.Constant(ir.VectorType(ir.IntType(32), half),
                                                    list(range(half))))
            hi = b.shuffle_vector(v, v, ir.Constant(ir.VectorType(ir.IntType(32), half),
                                                    list(range(half, width))))
            v, width = b.fadd(lo, hi), half
        return b.extract_element(v, ir.Constant(ir.IntType(32), 0))

    def pass_cols(j0: ir.Value, c: int) -> None:
        cs = [b.gep(w, [b.mul(b.add(j0, i64(j)), ldw)]) for j in range(c)]
        pre = b.block
        body = fn.append_basic_block("dot")
        done = fn.append_basic_block("dot.end")
        b.cbranch(b.icmp_signed("<", i64(0), kv), body, done)
        b.position_at_end(body)
        at = b.phi(I64)
        at.add_incoming(i64(0), pre)
        accs = [b.phi(vt) for _ in range(c)]
        for a in accs:
            a.add_incoming(zero_v, pre)
        xv = vload(b, x, at)
        new = [fma(b, xv, vload(b, cj, at), a) for cj, a in zip(cs, accs)]
        nxt = b.add(at, i64(lanes))
        for a, v in zip(accs, new):
            a.add_incoming(v, b.block)
        at.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_signed("<", nxt, kv), body, done)
        b.position_at_end(done)
        ends = []
        for v in new:
            phi = b.phi(vt)
            phi.add_incoming(zero_v, pre)
            phi.add_incoming(v, body)
            ends.append(phi)
        sums = [hsum(v) for v in ends]
        for j in range(c):  # the k % lanes tail, in k order, after the vector sum
            acc = slots[j]
            b.store(sums[j], acc)
            with for_range(b, kv, kk, "kt") as kt:
                b.store(fma(b, b.load(b.gep(x, [kt])), b.load(b.gep(cs[j], [kt])),
                            b.load(acc)), acc)
            dst = b.gep(y, [b.mul(b.add(j0, i64(j)), incy)])
            res = b.load(acc)
            with b.if_else(scale) as (then, other):
                with then:
                    b.store(b.fadd(b.fmul(beta, b.load(dst)), res), dst)
                with other:
                    b.store(res, dst)

    quads = b.sdiv(b.sub(nhi, nlo), i64(COLS))
    with for_range(b, i64(0), quads, "q") as q:
        pass_cols(b.add(nlo, b.mul(q, i64(COLS))), COLS)
    with for_range(b, b.add(nlo, b.mul(quads, i64(COLS))), nhi, "j1") as j:
        pass_cols(j, 1)
    restore_mxcsr(b, saved)
    b.ret_void()

    # ---- finish(parts, chunks, n, y, incy, beta*): y[j*incy] = the sum of parts[:, j] in
    # chunk order (after beta * y[j*incy] when *beta != 0: y *= beta; y += sum). The sums
    # go straight to y when it is contiguous and beta is 0, else through parts[0].
    fn = ir.Function(mod, ir.FunctionType(VOID, [tp, I64, I64, tp, I64, tp]),
                     name=f"{name}_finish")
    parts, chunks, n, y, incy, beta_p = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    saved = set_ftz_daz(b)
    beta = b.load(beta_p)
    scale = b.fcmp_ordered("!=", beta, zero)
    direct = b.and_(b.not_(scale), b.icmp_signed("==", incy, i64(1)))
    dst = b.select(direct, y, parts)
    nv = b.mul(b.sdiv(n, i64(lanes)), i64(lanes))
    vacc, sacc = b.alloca(vt), b.alloca(t)

    def total(at: ir.Value, load: Callable[[ir.Value], ir.Value], acc: ir.Value,
              store: Callable[[ir.Value, ir.Value], None]) -> None:
        b.store(load(at), acc)
        with for_range(b, i64(1), chunks, "p") as p:
            b.store(b.fadd(b.load(acc), load(b.add(b.mul(p, n), at))), acc)
        store(b.load(acc), at)

    with for_range(b, i64(0), nv, "c", step=lanes) as c:
        total(c, lambda at: vload(b, parts, at), vacc,
              lambda v, at: vstore(b, v, dst, at))
    with for_range(b, nv, n, "ct") as c:
        total(c, lambda at: b.load(b.gep(parts, [at])), sacc,
              lambda v, at: b.store(v, b.gep(dst, [at])))
    with b.if_then(b.not_(direct)):
        with for_range(b, i64(0), n, "j") as j:
            out = b.gep(y, [b.mul(j, incy)])
            res = b.load(b.gep(parts, [j]))
            b.store(b.select(scale, b.fadd(b.fmul(beta, b.load(out)), res), res), out)
    restore_mxcsr(b, saved)
    b.ret_void()
    return mod


@dataclass(frozen=True)
class Compiled:
    """One element type's functions on one target: addresses (for the pool's jobs) and
    ctypes callables (for the calling thread)."""

    engine: Engine
    rows: int
    cols: int
    finish: int
    rows_fn: Any
    cols_fn: Any
    finish_fn: Any


@once
def _compile(f64: bool, tgt: target.CpuTarget) -> Compiled:
    with target.use(tgt), denormal.use(denormal.IEEE):
        name = f"xlapy_{'d' if f64 else 's'}gemv"
        text = module_text(_emit(name, f64))
        key = cache.key(text, "light")
        obj = cache.get(key)
        exports = [f"{name}_rows", f"{name}_cols", f"{name}_finish"]
        eng = Engine(text, obj=obj, light=True, exports=exports)
        if obj is None:
            cache.put(key, eng.object)
    rows, cols, finish = (eng.address(e) for e in exports)
    return Compiled(eng, rows, cols, finish, _ROWS_T(rows), _COLS_T(cols), _FINISH_T(finish))


def available() -> bool:
    """Whether the loops run here: an x86-64 target this process can run."""
    t = target.current()
    return t.is_x86 and t.runs_here


@functools.lru_cache(maxsize=512)
def plan(extent: int, line_bytes: int, total_bytes: int, align: int) -> tuple[int, ...]:
    """Chunk boundaries of the split extent (K rows of a row-major W, N columns of a
    transposed one; `line_bytes` each): ~CHUNK_BYTES of W per chunk, at most
    parallel.MAX_CHUNKS, inner boundaries at multiples of `align`; one chunk below
    SPLIT_BYTES. A function of the shape alone: so are the bits."""
    if total_bytes < SPLIT_BYTES or extent < 2 * align:
        return (0, extent)
    per = max(align, CHUNK_BYTES // max(line_bytes, 1) // align * align)
    return tuple(parallel.fixed_cuts(extent, per, align))


def _stride(v: np.ndarray, axis: int, it: int) -> int | None:
    """The element stride of `v` along `axis` (any for an extent of 1), or None when it is
    not a positive whole number of elements."""
    if v.shape[axis] == 1:
        return 0
    s = v.strides[axis]
    return s // it if s > 0 and s % it == 0 else None


def _addr(v: np.ndarray) -> int:
    return int(v.__array_interface__["data"][0])


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
    code = _compile(f64, target.current())
    x = a[0]
    s0, s1 = _stride(b, 0, it), _stride(b, 1, it)
    dot_form = s0 in (0, 1) and s1 is not None and (n == 1 or s1 not in (0, 1))
    if not dot_form and (s1 not in (0, 1) or s0 is None):
        b = np.ascontiguousarray(b)
        s0 = n
    beta_buf = np.array([beta], a.dtype)
    keep: list[Any] = [a, b, out, beta_buf]
    if dot_form:
        if x.strides[0] != it and k > 1:
            x = np.ascontiguousarray(x)
            keep.append(x)
        ldw = s1 or k
        cuts = plan(n, k * it, k * n * it, COLS)
        args = (_addr(x), _addr(b), _addr(y), k, ldw)
        tail = (incy, _addr(beta_buf))
        if len(cuts) == 2 or threads < 2:
            for lo, hi in zip(cuts, cuts[1:]):
                code.cols_fn(*args, lo, hi, *tail)
            return
        jobs = [(code.cols, (*args, lo, hi, *tail)) for lo, hi in zip(cuts, cuts[1:])]
        parallel.pool(threads).share(jobs, threads, keep)
        return
    incx = _stride(a, 1, it)
    if incx is None:
        x = np.ascontiguousarray(x)
        keep.append(x)
        incx = 1
    ldw = s0 or n
    cuts = plan(k, n * it, k * n * it, ROWS)
    chunks = len(cuts) - 1
    if chunks == 1 and incy == 1 and beta == 0.0:
        code.rows_fn(_addr(x), _addr(b), _addr(y), n, ldw, 0, k, incx)
        return
    parts = np.empty((chunks, n), a.dtype)
    keep.append(parts)
    base, row = _addr(parts), n * it
    args = (_addr(x), _addr(b))
    if threads < 2 or chunks < 2:
        for j in range(chunks):
            code.rows_fn(*args, base + j * row, n, ldw, cuts[j], cuts[j + 1], incx)
    else:
        jobs = [(code.rows, (*args, base + j * row, n, ldw, cuts[j], cuts[j + 1], incx))
                for j in range(chunks)]
        parallel.pool(threads).share(jobs, threads, keep)
    code.finish_fn(base, chunks, n, _addr(y), incy or 1, _addr(beta_buf))


__all__ = ["gemv", "available", "plan", "Compiled", "ROWS", "COLS", "CHUNK_BYTES",
           "SPLIT_BYTES"]
