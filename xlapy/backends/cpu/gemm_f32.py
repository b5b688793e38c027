"""An f32 GEMM of our own for wide row-major weights: C[m, n] = A[m, k] @ B[k, n], on AVX-512
(zmm tiles) and AVX2 + FMA targets (ymm tiles, `Tile`).

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
_gemm_args), for alpha 1 and beta 0 only: blas routes just those calls here (`routes`:
AVX-512 and AVX2 + FMA targets, the shapes where it won), so dot_epilogue's chunk job and
blas's thread pool call it unchanged; XLAPY_GEMM_F32=0 turns the routing off. Either operand
may be stored transposed ("T": a training step's g @ W^T and x^T @ g, which went to
OpenBLAS, ~4% slower on Zen 4 for the 256x1024x2048 halves of mlp_grad's g @ W^T on 2
threads): A's tiles then pack one vector a k (pack_a_t), B's panels through 8 x 8 register
transposes (pack_b_t); the packed tiles are the same, so the bits are too. MXCSR FTZ/DAZ are
cleared around it (IEEE, like BLAS). Built once per process (AVX-512 or AVX2 + FMA hosts
only; cached on disk like any kernel) as three modules compiled on compile threads, started
by the first compile that routes a product here (else the first call): the kernels and
packing (gemm_f32_text.py, -O3, two modules) and the blocking loops here (-O0: they only
call those, through `TABLE`, filled once all are linked).
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import cache, gemm_f32_text, target
from xlapy.backends.cpu.fp_env import restore_mxcsr, set_ftz_daz
from xlapy.backends.cpu.llvm_util import (
    F32,
    I8,
    I32,
    I64,
    VOID,
    Engine,
    for_range,
    i64,
    new_module,
    prefetch,
    smin,
)
from xlapy.backends.cpu.once import ahead, once, started

#: Register tile: MR rows x NV vectors of 16 columns (MR * NV accumulators), AVX-512.
MR, NV = 8, 3
#: The same for AVX2 + FMA targets, vectors of 8 columns (16 vector registers: 12
#: accumulators, 3 B vectors, a broadcast A value). Zen 4 running x86-64-v3 code, one thread,
#: GFLOP/s at 256x1024x4096, 256x4096x4096, 256x4096x1024, 256x512x512: 4 x 3 97-105, 6 x 2
#: 94-100, OpenBLAS (its SkylakeX AVX-512 kernels) 92-98; the MLP at x86-64-v3, 5 pairs of
#: processes: 66.2-68.5 ms, OpenBLAS 68.0-70.9.
MR8, NV8 = 4, 3


@dataclass(frozen=True)
class Tile:
    """A target's register tile: w floats a vector, mr rows x nv vectors."""

    w: int
    mr: int
    nv: int

    @property
    def nr(self) -> int:
        return self.w * self.nv

    @property
    def hot(self) -> list[str]:
        """The hot modules' functions in the driver's table (kernels of 1..nv vectors,
        packing)."""
        return [f"{NAME}_kernel{v}" for v in range(1, self.nv + 1)] + [
            f"{NAME}_{p}" for p in ("pack_a", "pack_b", "pack_a_t", "pack_b_t")]


def tile(t: target.CpuTarget) -> Tile:
    return Tile(16, MR, NV) if t.has("avx512f") else Tile(8, MR8, NV8)


#: k block (B panel KC x NR in L1 while all row tiles use it), column block, row block.
KC, NC, MC = 256, 1024, 256
NAME = "xlapy_sgemm_f32"
#: The products routed here (columns of a call at least, rows between, k at least), where it
#: beat OpenBLAS (one thread, hot B: 64x2048x1024 0.91, 256x2048x256 0.92, 256x1024x1024 1.00;
#: 512 rows or more lost, 1.04-1.06: B packed again per MC rows; few columns lost).
MIN_N, MIN_M, MAX_M, MIN_K = 512, 64, MC, 256
#: Short sums (k under MIN_K) where it also beat OpenBLAS: 128 rows or more and 1024 columns
#: or more (one thread: 128x64x1024 0.82-0.87, 256x64x1024 0.77-0.85, 128x16x1024 0.75,
#: 128x128x1024 0.97, 128x192x1024 0.93; 64 rows or 512 columns lost, 64x64x512 1.20): the
#: row chunks of a tall product with a short sum (1024x64x1024 on 2 threads: 128-row chunks).
SHORT_K, SHORT_K_MIN_M, SHORT_K_MIN_N = 16, 128, 1024

#: Where the next panel's rows are prefetched to (llvm.prefetch locality: 2 = L2). The
#: prefetch is worth ~5% (256x4096x4096, one thread, cold B: 171-174 GFLOP/s, 161-163
#: without; L1 or L3 hints ran alike within the noise).
PF_LOCALITY = 2
_FP = F32.as_pointer()
TABLE = f"{NAME}_table"
_KERNEL_T = ir.FunctionType(VOID, [_FP, _FP, I64, _FP, I64, ir.IntType(1)])
_PACK_T = ir.FunctionType(VOID, [_FP, I64, I64, I64, _FP])
#: XLAPY_GEMM_F32=0 keeps every call on OpenBLAS (for A/B measurements).
_ON = os.environ.get("XLAPY_GEMM_F32", "1") != "0"


#: k steps per iteration of the microkernel's loop (the rest one at a time after).
UNROLL = 4


def _emit_gemm(mod: ir.Module, tl: Tile) -> ir.Function:
    """gemm(a, lda, b, ldb, c, ldc, m, n, k, a_t, b_t): c = a @ b, row-major, k >= 1, A
    stored transposed ([k][m], a[k * lda + i]) where a_t, B ([n][k]) where b_t; the hot
    functions called through the table (`TABLE`, filled once both modules are linked)."""
    fn = ir.Function(mod, ir.FunctionType(VOID, [_FP, I64, _FP, I64, _FP, I64, I64, I64, I64,
                                                 ir.IntType(1), ir.IntType(1)]),
                     name=f"{NAME}_rm")
    fn.linkage = "internal"
    a, lda, bm, ldb, c, ldc, m, n, kk, a_t, b_t = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    table = ir.GlobalVariable(mod, ir.ArrayType(I64, len(tl.hot)), name=TABLE)
    table.initializer = ir.Constant(table.value_type, None)
    ptrs = [b.inttoptr(b.load(b.gep(table, [i64(0), i64(j)])), t.as_pointer())
            for j, t in enumerate([_KERNEL_T] * tl.nv + [_PACK_T] * 4)]
    kerns, (pack_a, pack_b, pack_a_t, pack_b_t) = ptrs[:tl.nv], ptrs[tl.nv:]
    pack_a = b.select(a_t, pack_a_t, pack_a)
    pack_b = b.select(b_t, pack_b_t, pack_b)

    def at(base: ir.Value, ld: ir.Value, row: ir.Value, col: ir.Value, t: ir.Value
           ) -> ir.Value:
        """&x[row, col] of a row-major x stored transposed where t."""
        return b.gep(base, [b.select(t, b.add(b.mul(col, ld), row), b.add(b.mul(row, ld), col))])
    kern = kerns[-1]
    ap = b.alloca(F32, -(-MC // tl.mr) * tl.mr * KC)  # whole tiles: the last one zero-padded
    ap.align = 64
    bp = b.alloca(F32, KC * tl.nr)
    bp.align = 64
    tile = b.alloca(F32, tl.mr * tl.nr)
    tile.align = 64
    with for_range(b, i64(0), m, "ic", step=MC) as ic:
        mc = smin(b, i64(MC), b.sub(m, ic))
        tiles = b.sdiv(b.add(mc, i64(tl.mr - 1)), i64(tl.mr))
        with for_range(b, i64(0), n, "jc", step=NC) as jc:
            nc = smin(b, i64(NC), b.sub(n, jc))
            with for_range(b, i64(0), kk, "pc", step=KC) as pc:
                kc = smin(b, i64(KC), b.sub(kk, pc))
                first = b.icmp_signed("==", pc, i64(0))
                b.call(pack_a, [at(a, lda, ic, pc, a_t), lda, mc, kc, ap])
                with for_range(b, i64(0), nc, "jr", step=tl.nr) as jr:
                    nr = smin(b, i64(tl.nr), b.sub(nc, jr))
                    col = b.add(jc, jr)
                    b.call(pack_b, [at(bm, ldb, pc, col, b_t), ldb, kc, nr, bp])
                    # the next panel: the next NR columns, else the next KC block's first
                    more = b.icmp_signed("<", b.add(jr, i64(tl.nr)), nc)
                    pc2 = b.select(more, pc, b.add(pc, i64(KC)))
                    pc2 = b.select(b.icmp_signed("<", pc2, kk), pc2, pc)
                    col2 = b.select(more, b.add(col, i64(tl.nr)), jc)
                    # its rows as stored (k rows of NV lines, or NR columns of kc floats)
                    pf = at(bm, ldb, pc2, col2, b_t)
                    pf_k = smin(b, i64(KC), b.sub(kk, pc2))
                    pf_rows = b.select(b_t, smin(b, i64(tl.nr), b.sub(n, col2)), pf_k)
                    lines = b.select(b_t, b.sdiv(b.add(pf_k, i64(15)), i64(16)),
                                     i64(-(-tl.nr // 16)))
                    per = b.sdiv(b.add(pf_rows, b.sub(tiles, i64(1))), tiles)
                    with for_range(b, i64(0), tiles, "t") as t:
                        lo = b.mul(t, per)
                        hi = smin(b, b.add(lo, per), pf_rows)
                        with for_range(b, lo, hi, "pf") as r:
                            row = b.gep(pf, [b.mul(r, ldb)])
                            with for_range(b, i64(0), lines, "pfl") as v:
                                prefetch(b, b.gep(row, [b.mul(v, i64(16))]), PF_LOCALITY)
                        i0 = b.mul(t, i64(tl.mr))
                        mr = smin(b, i64(tl.mr), b.sub(mc, i0))
                        dst = b.gep(c, [b.add(b.mul(b.add(ic, i0), ldc), col)])
                        apt = b.gep(ap, [b.mul(t, b.mul(kc, i64(tl.mr)))])
                        whole = b.and_(b.icmp_signed("==", mr, i64(tl.mr)),
                                       b.icmp_signed("==", b.and_(nr, i64(tl.w - 1)), i64(0)))
                        with b.if_else(whole) as (then, other):
                            with then:  # whole vectors: the kernel of nr / w of them
                                after = b.function.append_basic_block("kern.end")
                                sw = b.switch(b.sdiv(nr, i64(tl.w)), after)
                                for nv, kf in enumerate(kerns, 1):
                                    blk = b.function.append_basic_block(f"kern{nv}")
                                    sw.add_case(i64(nv), blk)
                                    b.position_at_end(blk)
                                    b.call(kf, [apt, bp, kc, dst, ldc, first])
                                    b.branch(after)
                                b.position_at_end(after)
                            with other:  # an edge tile: through `tile`
                                with for_range(b, i64(0), mr, "er") as r:
                                    with for_range(b, i64(0), nr, "ec") as j:
                                        b.store(b.load(b.gep(dst, [b.add(b.mul(r, ldc), j)])),
                                                b.gep(tile, [b.add(b.mul(r, i64(tl.nr)), j)]))
                                b.call(kern, [apt, bp, kc, tile, i64(tl.nr), first])
                                with for_range(b, i64(0), mr, "fr") as r:
                                    with for_range(b, i64(0), nr, "fc") as j:
                                        b.store(b.load(b.gep(tile, [b.add(b.mul(r, i64(tl.nr)),
                                                                          j)])),
                                                b.gep(dst, [b.add(b.mul(r, ldc), j)]))
    b.ret_void()
    return fn


def _emit_fortran(mod: ir.Module, gemm: ir.Function) -> None:
    """The Fortran sgemm signature (column-major C^T = B^T A^T as blas._gemm_args passes it):
    (ta, tb, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc), "N" or "T" each (ta for our B,
    tb for our A), alpha 1, beta 0 only."""
    i8p = I8.as_pointer()
    fn = ir.Function(mod, ir.FunctionType(VOID, [i8p] * 13), name=NAME)
    args = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    saved = set_ftz_daz(b)

    def num(p: ir.Value) -> ir.Value:
        return b.sext(b.load(b.bitcast(p, I32.as_pointer())), I64)

    def ptr(p: ir.Value) -> ir.Value:
        return b.bitcast(p, _FP)

    def trans(p: ir.Value) -> ir.Value:  # "T" or "t" (blas passes "N" or "T")
        ch = b.or_(b.load(p), ir.Constant(I8, 0x20))
        return b.icmp_unsigned("==", ch, ir.Constant(I8, ord("t")))

    n, m, k = num(args[2]), num(args[3]), num(args[4])
    ldb, lda, ldc = num(args[7]), num(args[9]), num(args[12])
    ok = b.and_(b.icmp_signed(">", m, i64(0)), b.icmp_signed(">", n, i64(0)))
    with b.if_then(ok):
        with b.if_else(b.icmp_signed(">", k, i64(0))) as (then, other):
            with then:
                b.call(gemm, [ptr(args[8]), lda, ptr(args[6]), ldb, ptr(args[11]), ldc, m, n,
                              k, trans(args[1]), trans(args[0])])
            with other:  # an empty sum: zeros (beta 0 never reads C)
                c = ptr(args[11])
                with for_range(b, i64(0), m, "zr") as r:
                    with for_range(b, i64(0), n, "zc") as j:
                        b.store(ir.Constant(F32, 0.0), b.gep(c, [b.add(b.mul(r, ldc), j)]))
    restore_mxcsr(b, saved)
    b.ret_void()


def _driver_module(tl: Tile) -> ir.Module:
    mod = new_module(NAME)
    _emit_fortran(mod, _emit_gemm(mod, tl))
    return mod


@started
def _jobs(tgt: target.CpuTarget) -> list[tuple[Callable[[], Engine], list[str]]]:
    """gemm_f32's three compiles per target, (the call giving each engine, its functions):
    the two hot modules (-O3) and the driver (-O0 code generation: its loops only call the
    hot functions, ~6 ms to build instead of ~12) compiling on compile threads, started once
    per process and target by the first compile that routes a product here (`build_ahead`)
    or the first call: LLVM's work, which holds no GIL, so a compile that starts them while
    it plans goes on beside them (the MLP's first call waited 15-30 ms for them when they
    started as its compile returned)."""
    tl = tile(tgt)
    with target.use(tgt), denormal.use(denormal.IEEE):
        jobs = [(cache.library_job(("gemm_f32", "hot", j, tl), lambda t=text: t, "light",
                                   exports=names), names)
                for j, (text, names) in enumerate(gemm_f32_text.modules(
                    NAME, tl.mr, tl.nv, UNROLL, tl.w))]
        jobs.append((cache.library_job(("gemm_f32", "driver", tl),
                                       lambda: _driver_module(tl), "light",
                                       exports=[NAME, TABLE], o0=True), [NAME, TABLE]))
    return jobs


@once
def _compile(tgt: target.CpuTarget) -> tuple[list[Engine], int]:
    """The modules on a target of `available` (`_jobs`), compiled once per process (cached),
    linked, the driver's table filled."""
    jobs = _jobs(tgt)
    engines = [job() for job, _ in jobs]
    driver = engines[-1]
    if driver.linked:
        where = {name: eng for eng, (_, names) in zip(engines, jobs) for name in names}
        table = driver.address(TABLE)
        for j, name in enumerate(tile(tgt).hot):
            ctypes.c_uint64.from_address(table + 8 * j).value = where[name].address(name)
    return engines, driver.address(NAME)


def available() -> bool:
    """Whether the kernel runs here: an AVX-512 or AVX2 + FMA x86-64 target this process
    can run."""
    return _runs(target.current())


@functools.cache
def _runs(t: target.CpuTarget) -> bool:
    return t.is_x86 and t.runs_here and (t.has("avx512f") or t.has("avx2") and t.has("fma"))


_F = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 13))


@functools.cache
def _fortran(addr: int) -> Any:
    return _F(addr)


def build_ahead() -> None:
    """In a compile: the modules start compiling now (`_jobs`), and are linked as the compile
    returns (once.py)."""
    tgt = target.current()
    if _runs(tgt):
        _jobs(tgt)
    ahead(_compile, tgt)


def fortran() -> Any:
    """The Fortran-signature function (a ctypes function, like blas._fn's)."""
    return _fortran(fortran_address())


def fortran_address() -> int:
    """The Fortran-signature function's address (regions' GEMM steps call it natively)."""
    return _compile(target.current())[1]


def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """out = a @ b on this thread through the kernel (f32 2-D views, each row-major or
    transposed; for tests and measurements: blas.gemm routes by `routes`)."""
    from xlapy.backends.cpu import blas

    assert a.dtype == b.dtype == out.dtype == np.float32 and available()
    call = blas._gemm_args(a, b, out, 0.0)
    if call is None:
        return
    _, args, _keep = call
    fortran()(*[x if isinstance(x, ctypes.c_void_p) else ctypes.byref(x) for x in args])


_OPS = (b"N", b"T")


def routes(m: int, n: int, k: int, ta: bytes, tb: bytes, beta: float) -> bool:
    """Whether blas sends this sgemm call here: an AVX-512 or AVX2 + FMA target, operands as
    stored or transposed ("N" or "T"), beta 0, and a wide product (n columns of a call, m
    rows, k) where the kernel beat OpenBLAS."""
    short = k >= SHORT_K and m >= SHORT_K_MIN_M and n >= SHORT_K_MIN_N
    return (_ON and ta in _OPS and tb in _OPS and beta == 0.0 and n >= MIN_N
            and MIN_M <= m <= MAX_M and (k >= MIN_K or short) and available())


__all__ = ["available", "fortran", "fortran_address", "gemm", "routes", "tile", "Tile", "MR",
           "KC", "NC", "MC"]
