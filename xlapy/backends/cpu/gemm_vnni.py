"""s8 x s8 -> s32 GEMM with AVX-512 VNNI (`vpdpbusd`), for the int8 matmuls of quantized
models: 64 multiply-adds per instruction, four times an f32 FMA's.

`vpdpbusd` multiplies unsigned bytes by signed bytes and adds each group of four products
to a 32-bit lane. The signed lhs is made unsigned by flipping its sign bit (a + 128), and
the extra 128 * sum_k b[k, j] is subtracted from each result column: exact in 32 bits
modulo 2^32, so the bits equal the interpreter's 64-bit accumulation wrapped to s32 (any k).

B [k, n] is packed once per call into k/4 rows of n 32-bit lanes, each lane holding the four
bytes b[4g .. 4g+3, j] (`pack`, which also sums the columns). The kernel computes register
tiles of MR rows x 64 columns (24 zmm accumulators) walking k, with a broadcast of four lhs
bytes per row and one load of packed B per 16 columns; rows are split over threads (each
result element is computed by one thread in one fixed order: exact anyway). Shapes whose k
is not a multiple of 4 or n of 16 are padded with zeros (zero bytes add nothing; the
flipped zero-padding of A multiplies packed zeros).

The module does not depend on the shapes: compiled once per process and target, on the first
run of a program that uses it (not in the program's compile), and cached on disk.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import cache, parallel, target
from xlapy.backends.cpu.gemm_int import empty_product
from xlapy.backends.cpu.llvm_util import (
    I8P,
    I32,
    I64,
    VOID,
    Engine,
    for_range,
    new_module,
)
from xlapy.backends.cpu.once import once, started
from xlapy.backends.cpu.threads import strided_table
from xlapy.backends.cpu.transpose_lib import c_order

#: Rows per register tile and 16-lane vectors per tile row (MR x NV accumulators).
MR, NV = 5, 4
#: Multiply-adds below which a product is not split over threads.
SPLIT_MACS = 1 << 21
_V16 = ir.VectorType(I32, 16)
_B16 = ir.VectorType(ir.IntType(8), 16)
_SIG = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 4), *([ctypes.c_int64] * 4))
_PACK_SIG = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 3), *([ctypes.c_int64] * 2))


def available() -> bool:
    """Whether the current target has AVX-512 VNNI (and the kernel can run here)."""
    t = target.current()
    return t.is_x86 and t.has("avx512vnni") and t.has("avx512bw") and t.runs_here


def _consts(vals: list[int], t: ir.Type = I32) -> ir.Constant:
    return ir.Constant(ir.VectorType(t, len(vals)), vals)


def _emit_pack(mod: ir.Module) -> None:
    """void pack(b, bp, csum, kq, n): bp[g, j] = bytes b[4g + i, j] (i = 0..3), csum[j] =
    sum over k of b[k, j]; n a multiple of 16, k = 4 kq."""
    fn = ir.Function(mod, ir.FunctionType(VOID, [I8P, I8P, I8P, I64, I64]), name="pack")
    pb, pbp, pcs, kq, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    src = b.bitcast(pb, ir.IntType(8).as_pointer())
    dst = b.bitcast(pbp, _V16.as_pointer())
    csum = b.bitcast(pcs, _V16.as_pointer())
    with for_range(b, I64(0), b.udiv(n, I64(16)), "z") as j:
        b.store(ir.Constant(_V16, [0] * 16), b.gep(csum, [j]), align=4)
    cat = _consts(list(range(32)))
    inter = _consts([16 * i + j for j in range(16) for i in range(4)])
    with for_range(b, I64(0), kq, "g") as g:
        with for_range(b, I64(0), n, "j", step=16) as j:
            rows = []
            for i in range(4):
                off = b.add(b.mul(b.add(b.mul(g, I64(4)), I64(i)), n), j)
                p = b.bitcast(b.gep(src, [off]), _B16.as_pointer())
                rows.append(b.load(p, align=1))
            lo = b.shuffle_vector(rows[0], rows[1], cat)
            hi = b.shuffle_vector(rows[2], rows[3], cat)
            packed = b.bitcast(b.shuffle_vector(lo, hi, inter), _V16)
            lane = b.udiv(j, I64(16))
            b.store(packed, b.gep(dst, [b.add(b.mul(g, b.udiv(n, I64(16))), lane)]), align=4)
            cp = b.gep(csum, [lane])
            total = b.load(cp, align=4)
            for r in rows:
                total = b.add(total, b.sext(r, _V16))
            b.store(total, cp, align=4)
    b.ret_void()


def _tile(b: ir.IRBuilder, dot: ir.Function, pa: ir.Value, pbp: ir.Value, pcs: ir.Value,
          pc: ir.Value, r: ir.Value, j: ir.Value, mr: int, nv: int, k: ir.Value, n: ir.Value,
          kq: ir.Value) -> None:
    """c[r:r+mr, j:j+16 nv] = a[r:r+mr] @ b[:, j:j+16 nv] through mr x nv accumulators held
    in phis over the k/4 steps."""
    fn = b.function
    a8 = b.bitcast(pa, ir.IntType(8).as_pointer())
    bp = b.bitcast(pbp, _V16.as_pointer())
    lanes_n = b.udiv(n, I64(16))
    lane0 = b.udiv(j, I64(16))
    pre = b.block
    body = fn.append_basic_block("t.body")
    done = fn.append_basic_block("t.end")
    b.branch(body)
    b.position_at_end(body)
    g = b.phi(I64, name="g")
    g.add_incoming(I64(0), pre)
    zero = ir.Constant(_V16, [0] * 16)
    accs = [[b.phi(_V16, name=f"acc{i}_{v}") for v in range(nv)] for i in range(mr)]
    for row in accs:
        for acc in row:
            acc.add_incoming(zero, pre)
    brow = b.mul(g, lanes_n)
    bvecs = [b.load(b.gep(bp, [b.add(brow, b.add(lane0, I64(v)))]), align=4)
             for v in range(nv)]
    new = []
    for i in range(mr):
        off = b.add(b.mul(b.add(r, I64(i)), k), b.mul(g, I64(4)))
        aw = b.load(b.bitcast(b.gep(a8, [off]), I32.as_pointer()), align=1)
        aw = b.xor(aw, ir.Constant(I32, 0x80808080 - (1 << 32)))
        av = b.shuffle_vector(b.insert_element(ir.Constant(_V16, ir.Undefined), aw, I32(0)),
                              ir.Constant(_V16, ir.Undefined), _consts([0] * 16))
        new.append([b.call(dot, [accs[i][v], av, bvecs[v]]) for v in range(nv)])
    nxt = b.add(g, I64(1), flags=["nsw"])
    g.add_incoming(nxt, b.block)
    for i in range(mr):
        for v in range(nv):
            accs[i][v].add_incoming(new[i][v], b.block)
    b.cbranch(b.icmp_signed("<", nxt, kq), body, done)
    b.position_at_end(done)
    cs = b.bitcast(pcs, _V16.as_pointer())
    c = b.bitcast(pc, _V16.as_pointer())
    for v in range(nv):
        corr = b.shl(b.load(b.gep(cs, [b.add(lane0, I64(v))]), align=4),
                     ir.Constant(_V16, [7] * 16))
        for i in range(mr):
            out = b.sub(new[i][v], corr)
            idx = b.add(b.mul(b.add(r, I64(i)), lanes_n), b.add(lane0, I64(v)))
            b.store(out, b.gep(c, [idx]), align=4)


def _emit_kernel(mod: ir.Module) -> None:
    """void igemm8(a, bp, csum, c, row0, row1, n, kq): rows [row0, row1) of c = a @ b."""
    dot = ir.Function(mod, ir.FunctionType(_V16, [_V16, _V16, _V16]),
                      name="llvm.x86.avx512.vpdpbusd.512")
    fn = ir.Function(mod, ir.FunctionType(VOID, [I8P, I8P, I8P, I8P, I64, I64, I64, I64]),
                     name="igemm8")
    for arg in fn.args[:4]:
        arg.add_attribute("noalias")
    pa, pbp, pcs, pc, row0, row1, n, kq = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    k = b.mul(kq, I64(4))
    rows = b.sub(row1, row0)
    r_main = b.add(row0, b.mul(b.sdiv(rows, I64(MR)), I64(MR)))
    wide = NV * 16
    j_main = b.mul(b.sdiv(n, I64(wide)), I64(wide))
    for lo, hi, step, nv in ((I64(0), j_main, wide, NV), (j_main, n, 16, 1)):
        with for_range(b, lo, hi, "jb", step=step) as j:
            with for_range(b, row0, r_main, "rb", step=MR) as r:
                _tile(b, dot, pa, pbp, pcs, pc, r, j, MR, nv, k, n, kq)
            with for_range(b, r_main, row1, "rt") as r:
                _tile(b, dot, pa, pbp, pcs, pc, r, j, 1, nv, k, n, kq)
    b.ret_void()


def _module() -> ir.Module:
    mod = new_module("xlapy_igemm8")
    _emit_pack(mod)
    _emit_kernel(mod)
    return mod


@started
def _job(key: str) -> Callable[[], Engine]:
    """The module compiling on a compile thread (cache.library_job; from the disk cache if
    there), started once per process and target by the compile that plans the first such
    product (`igemm8`), so LLVM's 10-20 ms go on beside that compile, not in the first
    call."""
    return cache.library_job(("vnni_igemm8",), _module, "light-novec", vectorize=False,
                             exports=["igemm8", "pack"])


@once
def _compiled(key: str) -> tuple[Engine, object, object]:
    """The module, once per process and target (`_job`), linked."""
    eng = _job(key)()
    return eng, _SIG(eng.address("igemm8")), _PACK_SIG(eng.address("pack"))


def igemm8(threads: int = 1) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    """A function (a[batch, m, k] s8, b[batch, k, n] s8, c[batch, m, n] s32), c = a @ b
    exactly (wrapping), for targets where `available()`."""
    t = target.current()
    _job(t.key)  # starts compiling now, beside the rest of the program's compile
    built: list[tuple[Engine, Any, Any, int]] = []  # (engine, kernel, pack, kernel address)
    lock = threading.Lock()

    def module() -> tuple[Engine, Any, Any, int]:
        """The module (`_job`), linked on the first run, once per process and target."""
        if not built:
            with lock:
                if not built:
                    with target.use(t):
                        eng, fn, pack = _compiled(t.key)
                    built.append((eng, fn, pack, ctypes.cast(fn, ctypes.c_void_p).value or 0))
        return built[0]

    def run(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        if empty_product(a, b, c):
            return
        nb, m, k = a.shape
        n = b.shape[2]
        _, fn, pack, addr = module()
        kp, np_ = -(-k // 4) * 4, -(-n // 16) * 16
        if kp != k:
            a = np.pad(a, ((0, 0), (0, 0), (0, kp - k)))
            b = np.pad(b, ((0, 0), (0, kp - k), (0, 0)))
        if np_ != n:
            b = np.pad(b, ((0, 0), (0, 0), (0, np_ - n)))
        a, b = c_order(a), c_order(b)
        out = c if np_ == n else np.empty((nb, m, np_), np.int32)
        bp = np.empty((kp // 4, np_), np.int32)
        csum = np.empty(np_, np.int32)
        parts = min(threads, m) if m * n * k >= SPLIT_MACS else 1
        # several products, each on one thread, when there are as many as threads
        # (64 of 128 x 256 x 128, each split over 2 threads: 2.6 ms, XLA 0.7 with AMX)
        if nb > 1 and (parts == 1 or nb >= threads) and nb * bp.nbytes <= BATCH_SCRATCH:
            _batched(a, b, out, nb, m, kp, np_, threads)
            if out is not c:
                c[...] = out[:, :, :n]
            return
        pool = parallel.pool(threads) if parts > 1 else None
        cuts = [m * p // parts for p in range(parts + 1)]
        for j in range(nb):
            pack(b[j].ctypes.data, bp.ctypes.data, csum.ctypes.data,  # type: ignore[operator]
                 kp // 4, np_)
            ptrs = (a[j].ctypes.data, bp.ctypes.data, csum.ctypes.data, out[j].ctypes.data)
            if pool is None:
                fn(*ptrs, 0, m, np_, kp // 4)  # type: ignore[operator]
                continue
            futs = [pool.submit(addr, *ptrs, cuts[p], cuts[p + 1], np_, kp // 4,
                                keep=(a, bp, csum, out)) for p in range(1, parts)]
            fn(*ptrs, cuts[0], cuts[1], np_, kp // 4)  # type: ignore[operator]
            for f in futs:
                f.result()
        if out is not c:
            c[...] = out[:, :, :n]

    def _batched(a: np.ndarray, b: np.ndarray, out: np.ndarray, nb: int, m: int, kp: int,
                 np_: int, threads: int) -> None:
        """A batch of small products as two job tables (every b packed, then every
        product), each product with its own packed b, the threads taking the next job
        left: a Python loop of ctypes calls a product had taken 9 us each (512 [16, 64] @
        [64, 16] int8 products: 4.8 ms against XLA's 0.35)."""
        _, _, pack, addr = module()
        kq = kp // 4
        bps = np.empty((nb, kq * np_), np.int32)
        csums = np.empty((nb, np_), np.int32)
        pa, pb, pbp, pcs, pc = (int(x.ctypes.data) for x in (a, b, bps, csums, out))
        packs = strided_table(int(ctypes.cast(pack, ctypes.c_void_p).value or 0),
                              [pb, pbp, pcs, kq, np_], [kp * np_, bps.strides[0], np_ * 4,
                                                         0, 0], nb)
        calls = strided_table(addr, [pa, pbp, pcs, pc, 0, m, np_, kq],
                              [m * kp, bps.strides[0], np_ * 4, m * np_ * 4, 0, 0, 0, 0], nb)
        for table in (packs, calls):
            parallel.run_jobs(table, threads, (a, b, bps, csums, out))

    return run


#: Bytes of packed rhs (one per product) up to which a batch runs as job tables.
BATCH_SCRATCH = 8 << 20

__all__ = ["MR", "NV", "SPLIT_MACS", "available", "igemm8"]
