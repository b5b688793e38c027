"""An AVX-512 f32 GEMM of our own for wide row-major weights: C[m, n] = A[m, k] @ B[k, n].

OpenBLAS packs a block of B (the MLP's weights, 16-64 MB read from memory every call) *then*
computes on it, so the memory reads are not overlapped with arithmetic (23.5% of the MLP's
time was sgemm_itcopy). Here B is packed one small panel at a time (KC rows x NR columns,
48 KB) just before the microkernels use it, and while the microkernels run on panel p
the rows of panel p+1 are prefetched into L2 (`llvm.prefetch`, spread over the row tiles),
so packing reads L2 and the memory stream runs under the FMAs.

Measured (2-core SPR VM, loaded): 256x4096x4096 one thread, cold B 169-179 GFLOP/s vs
OpenBLAS 146-162, B hot (256x384x512) 184-187 vs 160-168; the MLP ~4% faster end to end.

Blocking (BLIS style, loops outside in): MC rows of A, NC columns of B, KC of the k sum
(A's MC x KC block packed as MR-row tiles, [tile][k][MR], zero-padded), NR-column panels of
B ([k][NR], zero-padded), MR x NR register tiles (MR * NR/16 zmm accumulators, the A
values broadcast into the FMAs). An element's k sum is one FMA chain in k order, continued
from C across KC blocks: the bits depend on the shape alone (never on the thread count: a
column chunk is one thread's call).

The exported function has the Fortran sgemm signature (13 pointers, column-major: blas.py's
_gemm_args), for the no-transpose, alpha 1, beta 0 case only: blas routes just those calls
here (`routes`: AVX-512 targets, the shapes where it won), so dot_epilogue's chunk job and
blas's thread pool call it unchanged; XLAPY_GEMM_F32=0 turns the routing off.
MXCSR FTZ/DAZ are cleared around it (IEEE, like BLAS). One module per process (AVX-512
hosts only), cached on disk like any kernel.
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import cache, target
from xlapy.backends.cpu.llvm_util import (
    F32,
    I8,
    I32,
    I64,
    VOID,
    Engine,
    broadcast,
    for_range,
    i64,
    intrinsic,
    new_module,
    prefetch,
    restore_mxcsr,
    set_ftz_daz,
)
from xlapy.backends.cpu.once import ahead, once

#: Register tile: MR rows x NV vectors of 16 columns (MR * NV accumulators).
MR, NV = 8, 3
NR = 16 * NV
#: k block (B panel KC x NR in L1 while all row tiles use it), column block, row block.
KC, NC, MC = 256, 1024, 256
NAME = "xlapy_sgemm_f32"
#: The products routed here (columns of a call at least, rows between, k at least), where it
#: beat OpenBLAS (one thread, hot B: 64x2048x1024 0.91, 256x2048x256 0.92, 256x1024x1024 1.00;
#: 512 rows or more lost, 1.04-1.06: B packed again per MC rows; few columns lost).
MIN_N, MIN_M, MAX_M, MIN_K = 512, 64, MC, 256

#: Where the next panel's rows are prefetched to (llvm.prefetch locality: 2 = L2). The
#: prefetch is worth ~5% (256x4096x4096, one thread, cold B: 171-174 GFLOP/s, 161-163
#: without; L1 or L3 hints ran alike within the noise).
PF_LOCALITY = 2
_V = ir.VectorType(F32, 16)
#: XLAPY_GEMM_F32=0 keeps every call on OpenBLAS (for A/B measurements).
_ON = os.environ.get("XLAPY_GEMM_F32", "1") != "0"
_FP = F32.as_pointer()


def _vload(b: ir.IRBuilder, base: ir.Value, at: ir.Value, align: int) -> ir.Value:
    ld = b.load(b.bitcast(b.gep(base, [at]), _V.as_pointer()))
    ld.align = align
    return ld


def _vstore(b: ir.IRBuilder, v: ir.Value, base: ir.Value, at: ir.Value, align: int) -> None:
    st = b.store(v, b.bitcast(b.gep(base, [at]), _V.as_pointer()))
    st.align = align


def _min(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


#: k steps per iteration of the microkernel's loop (the rest one at a time after).
UNROLL = 4


def _emit_kernel(mod: ir.Module, nv: int) -> ir.Function:
    """kern(ap, bp, kc, c, ldc, first): c[MR, 16 nv] (row stride ldc) = (first ? 0 : c) +
    ap-tile @ the panel's first 16 nv columns, one FMA chain per element in k order (nv <
    NV: a chunk's last columns, e.g. 2048 = 42 x 48 + 32, at the cost of their own work)."""
    fn = ir.Function(mod, ir.FunctionType(VOID, [_FP, _FP, I64, _FP, I64, ir.IntType(1)]),
                     name=f"{NAME}_kernel{nv}")
    fn.linkage = "internal"
    ap, bp, kc, c, ldc, first = fn.args
    for p in (ap, bp, c):
        p.add_attribute("noalias")
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    zero = ir.Constant(_V, None)
    load = fn.append_basic_block("load")
    start = fn.append_basic_block("start")
    b.cbranch(first, start, load)
    b.position_at_end(load)  # a later k block continues C's sums; the first never reads C
    loaded = []
    for r in range(MR):
        row = b.mul(i64(r), ldc)
        for v in range(nv):
            loaded.append(_vload(b, c, b.add(row, i64(16 * v)), 4))
    b.branch(start)
    b.position_at_end(start)
    accs: list[ir.Value] = []
    for x in loaded:
        phi = b.phi(_V)
        phi.add_incoming(zero, entry)
        phi.add_incoming(x, load)
        accs.append(phi)

    def step(k: ir.Value, accs: list[ir.Value]) -> list[ir.Value]:
        bk, ak = b.gep(bp, [b.mul(k, i64(NR))]), b.gep(ap, [b.mul(k, i64(MR))])
        bv = [_vload(b, bk, i64(16 * v), 64) for v in range(nv)]
        new = []
        for r in range(MR):
            s = broadcast(b, b.load(b.gep(ak, [i64(r)])), 16)
            for v in range(nv):
                new.append(intrinsic(b, "llvm.fma.v16f32", _V, [s, bv[v], accs[r * nv + v]]))
        return new

    def loop(lo: ir.Value, hi: ir.Value, unroll: int, accs: list[ir.Value]) -> list[ir.Value]:
        """accs after steps lo .. hi (hi - lo a multiple of unroll), as phis."""
        pre = b.block
        body = fn.append_basic_block("k")
        done = fn.append_basic_block("k.end")
        b.cbranch(b.icmp_signed("<", lo, hi), body, done)
        b.position_at_end(body)
        k = b.phi(I64)
        k.add_incoming(lo, pre)
        phis = [b.phi(_V) for _ in accs]
        for p, x in zip(phis, accs):
            p.add_incoming(x, pre)
        cur: list[ir.Value] = list(phis)
        for u in range(unroll):
            cur = step(b.add(k, i64(u)), cur)
        nxt = b.add(k, i64(unroll), flags=["nsw"])
        for p, x in zip(phis, cur):
            p.add_incoming(x, b.block)
        k.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_signed("<", nxt, hi), body, done)
        b.position_at_end(done)
        out = []
        for x0, x1 in zip(accs, cur):
            p = b.phi(_V)
            p.add_incoming(x0, pre)
            p.add_incoming(x1, body)
            out.append(p)
        return out

    if nv == NV:  # the hot kernel unrolled; the narrow ones (a panel per block) not
        whole = b.mul(b.sdiv(kc, i64(UNROLL)), i64(UNROLL))
        accs = loop(i64(0), whole, UNROLL, accs)
        accs = loop(whole, kc, 1, accs)
    else:
        accs = loop(i64(0), kc, 1, accs)
    for r in range(MR):
        row = b.mul(i64(r), ldc)
        for v in range(nv):
            _vstore(b, accs[r * nv + v], c, b.add(row, i64(16 * v)), 4)
    b.ret_void()
    return fn


def _emit_pack_a(mod: ir.Module) -> ir.Function:
    """pack_a(a, lda, mc, kc, ap): ap[t][k][r] = a[(t*MR + r) * lda + k], 0 past mc rows."""
    fn = ir.Function(mod, ir.FunctionType(VOID, [_FP, I64, I64, I64, _FP]),
                     name=f"{NAME}_pack_a")
    fn.linkage = "internal"
    a, lda, mc, kc, ap = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    tiles = b.sdiv(b.add(mc, i64(MR - 1)), i64(MR))
    full = b.sdiv(mc, i64(MR))
    with for_range(b, i64(0), full, "t") as t:
        dst = b.gep(ap, [b.mul(t, b.mul(kc, i64(MR)))])
        rows = [b.gep(a, [b.mul(b.add(b.mul(t, i64(MR)), i64(r)), lda)]) for r in range(MR)]
        with for_range(b, i64(0), kc, "k") as k:
            for r in range(MR):
                b.store(b.load(b.gep(rows[r], [k])),
                        b.gep(dst, [b.add(b.mul(k, i64(MR)), i64(r))]))
    with for_range(b, full, tiles, "tt") as t:
        dst = b.gep(ap, [b.mul(t, b.mul(kc, i64(MR)))])
        with for_range(b, i64(0), kc, "kt") as k:
            for r in range(MR):
                row = b.add(b.mul(t, i64(MR)), i64(r))
                inside = b.icmp_signed("<", row, mc)
                src = b.gep(a, [b.add(b.mul(b.select(inside, row, i64(0)), lda), k)])
                b.store(b.select(inside, b.load(src), ir.Constant(F32, 0.0)),
                        b.gep(dst, [b.add(b.mul(k, i64(MR)), i64(r))]))
    b.ret_void()
    return fn


def _emit_pack_b(mod: ir.Module) -> ir.Function:
    """pack_b(b, ldb, kc, nr, bp): bp[k][j] = b[k * ldb + j] for j < nr, 0 up to NR."""
    fn = ir.Function(mod, ir.FunctionType(VOID, [_FP, I64, I64, I64, _FP]),
                     name=f"{NAME}_pack_b")
    fn.linkage = "internal"
    src, ldb, kc, nr, bp = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    whole = b.icmp_signed("==", nr, i64(NR))
    with b.if_else(whole) as (then, other):
        with then:
            with for_range(b, i64(0), kc, "k") as k:
                row = b.mul(k, ldb)
                for v in range(NV):
                    _vstore(b, _vload(b, src, b.add(row, i64(16 * v)), 4), bp,
                            b.add(b.mul(k, i64(NR)), i64(16 * v)), 64)
        with other:
            with for_range(b, i64(0), kc, "kp") as k:
                row = b.mul(k, ldb)
                with for_range(b, i64(0), i64(NR), "j") as j:
                    inside = b.icmp_signed("<", j, nr)
                    at = b.add(row, b.select(inside, j, i64(0)))
                    b.store(b.select(inside, b.load(b.gep(src, [at])), ir.Constant(F32, 0.0)),
                            b.gep(bp, [b.add(b.mul(k, i64(NR)), j)]))
    b.ret_void()
    return fn


def _emit_gemm(mod: ir.Module) -> ir.Function:
    """gemm(a, lda, b, ldb, c, ldc, m, n, k): c = a @ b, row-major, k >= 1."""
    kerns = [_emit_kernel(mod, nv) for nv in range(1, NV + 1)]
    kern = kerns[-1]
    pack_a, pack_b = _emit_pack_a(mod), _emit_pack_b(mod)
    fn = ir.Function(mod, ir.FunctionType(VOID, [_FP, I64, _FP, I64, _FP, I64, I64, I64, I64]),
                     name=f"{NAME}_rm")
    fn.linkage = "internal"
    a, lda, bm, ldb, c, ldc, m, n, kk = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ap = b.alloca(F32, -(-MC // MR) * MR * KC)  # whole tiles: the last one zero-padded
    ap.align = 64
    bp = b.alloca(F32, KC * NR)
    bp.align = 64
    tile = b.alloca(F32, MR * NR)
    tile.align = 64
    with for_range(b, i64(0), m, "ic", step=MC) as ic:
        mc = _min(b, i64(MC), b.sub(m, ic))
        tiles = b.sdiv(b.add(mc, i64(MR - 1)), i64(MR))
        with for_range(b, i64(0), n, "jc", step=NC) as jc:
            nc = _min(b, i64(NC), b.sub(n, jc))
            with for_range(b, i64(0), kk, "pc", step=KC) as pc:
                kc = _min(b, i64(KC), b.sub(kk, pc))
                first = b.icmp_signed("==", pc, i64(0))
                b.call(pack_a, [b.gep(a, [b.add(b.mul(ic, lda), pc)]), lda, mc, kc, ap])
                with for_range(b, i64(0), nc, "jr", step=NR) as jr:
                    nr = _min(b, i64(NR), b.sub(nc, jr))
                    col = b.add(jc, jr)
                    b.call(pack_b, [b.gep(bm, [b.add(b.mul(pc, ldb), col)]), ldb, kc, nr, bp])
                    # the next panel: the next NR columns, else the next KC block's first
                    more = b.icmp_signed("<", b.add(jr, i64(NR)), nc)
                    pc2 = b.select(more, pc, b.add(pc, i64(KC)))
                    pc2 = b.select(b.icmp_signed("<", pc2, kk), pc2, pc)
                    col2 = b.select(more, b.add(col, i64(NR)), jc)
                    pf = b.gep(bm, [b.add(b.mul(pc2, ldb), col2)])
                    pf_rows = _min(b, i64(KC), b.sub(kk, pc2))
                    per = b.sdiv(b.add(pf_rows, b.sub(tiles, i64(1))), tiles)
                    with for_range(b, i64(0), tiles, "t") as t:
                        lo = b.mul(t, per)
                        hi = _min(b, b.add(lo, per), pf_rows)
                        with for_range(b, lo, hi, "pf") as r:
                            row = b.gep(pf, [b.mul(r, ldb)])
                            for v in range(NV):
                                prefetch(b, b.gep(row, [i64(16 * v)]), PF_LOCALITY)
                        i0 = b.mul(t, i64(MR))
                        mr = _min(b, i64(MR), b.sub(mc, i0))
                        at = b.gep(c, [b.add(b.mul(b.add(ic, i0), ldc), col)])
                        apt = b.gep(ap, [b.mul(t, b.mul(kc, i64(MR)))])
                        whole = b.and_(b.icmp_signed("==", mr, i64(MR)),
                                       b.icmp_signed("==", b.and_(nr, i64(15)), i64(0)))
                        with b.if_else(whole) as (then, other):
                            with then:  # whole vectors: the kernel of nr / 16 of them
                                after = b.function.append_basic_block("kern.end")
                                sw = b.switch(b.sdiv(nr, i64(16)), after)
                                for nv, kf in enumerate(kerns, 1):
                                    blk = b.function.append_basic_block(f"kern{nv}")
                                    sw.add_case(i64(nv), blk)
                                    b.position_at_end(blk)
                                    b.call(kf, [apt, bp, kc, at, ldc, first])
                                    b.branch(after)
                                b.position_at_end(after)
                            with other:  # an edge tile: through `tile`
                                with for_range(b, i64(0), mr, "er") as r:
                                    with for_range(b, i64(0), nr, "ec") as j:
                                        b.store(b.load(b.gep(at, [b.add(b.mul(r, ldc), j)])),
                                                b.gep(tile, [b.add(b.mul(r, i64(NR)), j)]))
                                b.call(kern, [apt, bp, kc, tile, i64(NR), first])
                                with for_range(b, i64(0), mr, "fr") as r:
                                    with for_range(b, i64(0), nr, "fc") as j:
                                        b.store(b.load(b.gep(tile, [b.add(b.mul(r, i64(NR)),
                                                                          j)])),
                                                b.gep(at, [b.add(b.mul(r, ldc), j)]))
    b.ret_void()
    return fn


def _emit_fortran(mod: ir.Module, gemm: ir.Function) -> None:
    """The Fortran sgemm signature (column-major C^T = B^T A^T as blas._gemm_args passes it):
    (ta, tb, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc), "N", "N", alpha 1, beta 0 only."""
    i8p = I8.as_pointer()
    fn = ir.Function(mod, ir.FunctionType(VOID, [i8p] * 13), name=NAME)
    args = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    saved = set_ftz_daz(b)

    def num(p: ir.Value) -> ir.Value:
        return b.sext(b.load(b.bitcast(p, I32.as_pointer())), I64)

    def ptr(p: ir.Value) -> ir.Value:
        return b.bitcast(p, _FP)

    n, m, k = num(args[2]), num(args[3]), num(args[4])
    ldb, lda, ldc = num(args[7]), num(args[9]), num(args[12])
    ok = b.and_(b.icmp_signed(">", m, i64(0)), b.icmp_signed(">", n, i64(0)))
    with b.if_then(ok):
        with b.if_else(b.icmp_signed(">", k, i64(0))) as (then, other):
            with then:
                b.call(gemm, [ptr(args[8]), lda, ptr(args[6]), ldb, ptr(args[11]), ldc, m, n,
                              k])
            with other:  # an empty sum: zeros (beta 0 never reads C)
                c = ptr(args[11])
                with for_range(b, i64(0), m, "zr") as r:
                    with for_range(b, i64(0), n, "zc") as j:
                        b.store(ir.Constant(F32, 0.0), b.gep(c, [b.add(b.mul(r, ldc), j)]))
    restore_mxcsr(b, saved)
    b.ret_void()


def _module() -> ir.Module:
    mod = new_module(NAME)
    _emit_fortran(mod, _emit_gemm(mod))
    return mod


@once
def _compile(tgt: target.CpuTarget) -> tuple[Engine, int]:
    """The module on an AVX-512 target, compiled once per process (disk-cached)."""
    with target.use(tgt), denormal.use(denormal.IEEE):
        eng = cache.library_engine(("gemm_f32",), _module, "light", light=True, exports=[NAME])
    return eng, eng.address(NAME)


def available() -> bool:
    """Whether the kernel runs here: an AVX-512 x86-64 target this process can run."""
    return _runs(target.current())


@functools.cache
def _runs(t: target.CpuTarget) -> bool:
    return t.is_x86 and t.runs_here and t.has("avx512f")


_F = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 13))


@functools.cache
def _fortran(addr: int) -> Any:
    return _F(addr)


def build_ahead() -> None:
    """In a compile: the module is built while the compile returns (once.py)."""
    ahead(_compile, target.current())


def fortran() -> Any:
    """The Fortran-signature function (a ctypes function, like blas._fn's)."""
    _, addr = _compile(target.current())
    return _fortran(addr)


def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """out = a @ b on this thread through the kernel (f32 views with a unit column stride;
    for tests and measurements: blas.gemm routes by `routes`)."""
    from xlapy.backends.cpu import blas

    assert a.dtype == b.dtype == out.dtype == np.float32 and available()
    call = blas._gemm_args(a, b, out, 0.0)
    if call is None:
        return
    _, args, _keep = call
    assert a.shape[1] == 0 or args[0].value == args[1].value == b"N", \
        "transposed views go to OpenBLAS"  # (an empty sum reads neither operand)
    fortran()(*[x if isinstance(x, ctypes.c_void_p) else ctypes.byref(x) for x in args])


def routes(m: int, n: int, k: int, ta: bytes, tb: bytes, beta: float) -> bool:
    """Whether blas sends this sgemm call here: an AVX-512 host, no transposes, beta 0, and
    a wide product (n columns of a call, m rows, k) where the kernel beat OpenBLAS."""
    return (_ON and ta == b"N" and tb == b"N" and beta == 0.0 and n >= MIN_N
            and MIN_M <= m <= MAX_M and k >= MIN_K and available())


__all__ = ["available", "fortran", "gemm", "routes", "MR", "NR", "KC", "NC", "MC"]
