"""s8 x s8 -> s32 (and u8 x u8 -> u32) GEMM for x86 targets without VNNI or AMX (AVX2, plain
AVX-512; SSE4 too, though dots route here only from AVX2 up: `available`), through `pmaddwd`:
the bytes widened to s16 once (both operands packed), then each instruction multiplies 2W
pairs of s16 and adds adjacent products into W s32 lanes.

Why not `pmaddubsw` (u8 x s8 -> s16 pairs, twice the work per instruction): its pair sums
saturate at 32767 (255 * 127 * 2 does not fit), so the results would not be exact. With
s16 operands every product and pair sum fits s32; the accumulation wraps modulo 2^32,
which is the interpreter's 64-bit sum wrapped to 32 bits in any order (gemm_int.py).

Layout: B [k, n] packed into panels of NR = 2W columns, per k pair p one row of NR (b[2p, j],
b[2p + 1, j]) s16 pairs (two vectors); A rows packed to s16 by chunks, a k pair read as one
32-bit word and broadcast. Register tile: MR = 6 rows x 2 vectors (12 accumulators, 2 B
vectors, 1 broadcast: 15 of AVX2's 16 registers). k is padded to even and n to NR with
zeros (zero pairs add nothing); rows past m are zero in the A chunk and never stored, and
the last panel's columns past n are stored with masks.

Two phases per product, both split over threads by a fixed rule: `pack` (panels) and
`igemm` (rows, in MR multiples); every element is one thread's sum in one order, so the bits
never depend on the split. One module per (vector width, signedness, target), compiled
once per process with sizes at run time.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import cache, parallel, recycle, target
from xlapy.backends.cpu.gemm_int import empty_product
from xlapy.backends.cpu.llvm_util import (
    I8,
    I8P,
    I16,
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

#: Rows per register tile.
MR = 6
#: A rows packed (as s16) per chunk: kept in L2 while the B panels go by.
A_CHUNK_ROWS = 48
#: Multiply-adds below which a product is not split over threads.
SPLIT_MACS = 1 << 21
#: Scratch up to this size is kept for the next call (fresh pages cost); bigger is freed.
KEEP_SCRATCH_BYTES = 1 << 24
_PMADD = {4: "llvm.x86.sse2.pmadd.wd", 8: "llvm.x86.avx2.pmadd.wd",
          16: "llvm.x86.avx512.pmaddw.d.512"}
_NARGS = 8
_SIG = ctypes.CFUNCTYPE(None, *([ctypes.c_int64] * _NARGS))


def lanes() -> int:
    """s32 lanes of the current target's widest integer vectors (0: not x86)."""
    t = target.current()
    if not t.is_x86:
        return 0
    return 16 if t.has("avx512bw") else 8 if t.has("avx2") else 4


def available() -> bool:
    """Whether dots should take this kernel: an x86 target with AVX2 (or AVX-512) whose code
    runs here. SSE-only targets keep BLAS in f32/f64 where exact (library.exact_float): the
    4-lane kernel ran 3-5x slower than that here (the kernel itself works at any width)."""
    t = target.current()
    return t.is_x86 and t.runs_here and lanes() >= 8


def _vec(t: ir.Type, n: int) -> ir.VectorType:
    return ir.VectorType(t, n)


def _emit_pack(mod: ir.Module, w: int, signed: bool) -> None:
    """void pack(b, bp, k, n, p0, p1, -, -): panels [p0, p1) of bp (NR = 2w columns, kp/2
    rows of NR s16 pairs each) from b[k, n] bytes; zero past row k and column n."""
    nr = 2 * w
    fn = _cold(ir.Function(mod, ir.FunctionType(VOID, [I64] * _NARGS), name="pack"))
    ib, ibp, k, n, p0, p1 = fn.args[:6]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    src = b.inttoptr(ib, I8P)
    dst = b.inttoptr(ibp, I16.as_pointer())
    kq = b.sdiv(b.add(k, I64(1)), I64(2))  # k pairs
    ext = b.sext if signed else b.zext
    inter = ir.Constant(_vec(I32, 2 * nr), [j // 2 + (nr if j % 2 else 0) for j in range(2 * nr)])
    lo = ir.Constant(_vec(I32, nr), list(range(nr)))
    hi = ir.Constant(_vec(I32, nr), list(range(nr, 2 * nr)))
    with for_range(b, p0, p1, "pp") as pp:
        col = b.mul(pp, I64(nr))
        panel = b.gep(dst, [b.mul(b.mul(pp, kq), I64(2 * nr))])
        full = b.icmp_signed("<=", b.add(col, I64(nr)), n)
        with for_range(b, I64(0), kq, "pk") as p:
            out = b.gep(panel, [b.mul(p, I64(2 * nr))])
            r0 = b.mul(p, I64(2))
            r1 = b.add(r0, I64(1))
            both = b.and_(full, b.icmp_signed("<", r1, k))
            with b.if_else(both, likely=True) as (fast, slow):
                with fast:  # NR bytes of each row, widened and interleaved
                    vs = []
                    for r in (r0, r1):
                        ptr = b.gep(src, [b.add(b.mul(r, n), col)])
                        v = b.load(b.bitcast(ptr, _vec(I8, nr).as_pointer()), align=1)
                        vs.append(ext(v, _vec(I16, nr)))
                    pair = b.shuffle_vector(vs[0], vs[1], inter)
                    for h, sel in enumerate((lo, hi)):
                        part = b.shuffle_vector(pair, pair, sel)
                        p_out = b.bitcast(b.gep(out, [I64(h * nr)]), _vec(I16, nr).as_pointer())
                        b.store(part, p_out, align=2)
                with slow:  # the last panel or an odd k: element by element, zero outside
                    with for_range(b, I64(0), I64(2 * nr), "pe") as e:
                        r = b.add(r0, b.urem(e, I64(2)))
                        c = b.add(col, b.udiv(e, I64(2)))
                        ok = b.and_(b.icmp_signed("<", r, k), b.icmp_signed("<", c, n))
                        at = b.gep(src, [b.select(ok, b.add(b.mul(r, n), c), I64(0))])
                        v = b.select(ok, ext(b.load(at), I16), ir.Constant(I16, 0))
                        b.store(v, b.gep(out, [e]))
    b.ret_void()


def _cold(fn: ir.Function) -> ir.Function:
    """`optnone noinline`: codegen as at -O0 (fast instruction selection and register
    allocation) for a function off the hot loop: a third of the codegen time."""
    fn.attributes.add("noinline")
    fn.attributes.add("optnone")
    return fn


def _emit_pack_a(mod: ir.Module, signed: bool) -> ir.Function:
    """void pack_a(a, ap, r0, rows, m, k, kp): ap[r, :kp] (s16) = a[r0 + r, :k], zero past
    k and at rows r0 + r >= m."""
    fn = _cold(ir.Function(mod, ir.FunctionType(VOID, [I8P, I16.as_pointer()] + [I64] * 5),
                           name="pack_a"))
    fn.linkage = "internal"
    src, ap, r0, rows, m, k, kp = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ext = b.sext if signed else b.zext
    step = 16
    with for_range(b, I64(0), rows, "ar") as r:
        row = b.add(r0, r)
        live = b.icmp_signed("<", row, m)
        arow = b.gep(src, [b.mul(b.select(live, row, I64(0)), k)])  # dead rows: read none
        prow = b.gep(ap, [b.mul(r, kp)])
        k_main = b.select(live, b.mul(b.sdiv(k, I64(step)), I64(step)), I64(0))
        with for_range(b, I64(0), k_main, "av", step=step) as j:
            v = b.load(b.bitcast(b.gep(arow, [j]), _vec(I8, step).as_pointer()), align=1)
            out = b.bitcast(b.gep(prow, [j]), _vec(I16, step).as_pointer())
            b.store(ext(v, _vec(I16, step)), out, align=2)
        with for_range(b, k_main, kp, "at") as j:
            ok = b.and_(live, b.icmp_signed("<", j, k))
            at = b.gep(arow, [b.select(ok, j, I64(0))])
            b.store(b.select(ok, ext(b.load(at), I16), ir.Constant(I16, 0)), b.gep(prow, [j]))
    b.ret_void()
    return fn


def _emit_micro(mod: ir.Module, w: int) -> ir.Function:
    """void micro(ap, kq, bpan, out): the MR x 2w block of packed A rows at ap (row stride
    kq 32-bit pairs) times the panel at bpan over kq k pairs, into out (MR x 2 vectors):
    the hot loop, accumulators in registers."""
    vi = _vec(I32, w)
    vh = _vec(I16, 2 * w)
    pmadd = _decl(mod, _PMADD[w], vi, [vh, vh])
    fn = ir.Function(mod, ir.FunctionType(VOID, [I32.as_pointer(), I64, vh.as_pointer(),
                                                 vi.as_pointer()]), name="micro")
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    ap32, kq, bpan, out = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero = ir.Constant(vi, [0] * w)
    bases = [b.gep(ap32, [b.mul(I64(i), kq)]) for i in range(MR)]
    pre = b.block
    body = fn.append_basic_block("kp.body")
    done = fn.append_basic_block("kp.end")
    b.branch(body)
    b.position_at_end(body)
    p = b.phi(I64, name="p")
    p.add_incoming(I64(0), pre)
    accs = [[b.phi(vi) for _ in range(2)] for _ in range(MR)]
    for row in accs:
        for acc in row:
            acc.add_incoming(zero, pre)
    bvs = [b.load(b.gep(bpan, [b.add(b.mul(p, I64(2)), I64(v))]), align=2) for v in range(2)]
    new = []
    for i in range(MR):
        word = b.load(b.gep(bases[i], [p]))
        av = b.bitcast(_splat(b, word, w), vh)
        new.append([b.add(accs[i][v], b.call(pmadd, [av, bvs[v]])) for v in range(2)])
    nxt = b.add(p, I64(1), flags=["nsw"])
    p.add_incoming(nxt, b.block)
    for i in range(MR):
        for v in range(2):
            accs[i][v].add_incoming(new[i][v], b.block)
    b.cbranch(b.icmp_signed("<", nxt, kq), body, done)
    b.position_at_end(done)
    for i in range(MR):
        for v in range(2):
            b.store(new[i][v], b.gep(out, [I64(2 * i + v)]), align=4)
    b.ret_void()
    return fn


def _emit_store(mod: ir.Module, w: int) -> ir.Function:
    """void store(tile, c, rows, cols, n): the first rows x cols of the MR x 2w block at
    tile into c (row stride n), masked."""
    vi = _vec(I32, w)
    mask_store = _decl(mod, f"llvm.masked.store.v{w}i32.p0", VOID,
                       [vi, vi.as_pointer(), I32, _vec(ir.IntType(1), w)])
    fn = _cold(ir.Function(mod, ir.FunctionType(VOID, [vi.as_pointer(), I32.as_pointer(),
                                                       I64, I64, I64]), name="store"))
    fn.linkage = "internal"
    tile, pc, rows, cols, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    lane = ir.Constant(vi, list(range(w)))
    masks = [b.icmp_signed("<", lane, _splat(b, b.trunc(b.sub(cols, I64(v * w)), I32), w))
             for v in range(2)]
    with for_range(b, I64(0), rows, "sr") as r:
        crow = b.gep(pc, [b.mul(r, n)])
        for v in range(2):
            val = b.load(b.gep(tile, [b.add(b.mul(r, I64(2)), I64(v))]), align=4)
            ptr = b.bitcast(b.gep(crow, [I64(v * w)]), vi.as_pointer())
            b.call(mask_store, [val, ptr, I32(4), masks[v]])
    b.ret_void()
    return fn


def _decl(mod: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    fn = mod.globals.get(name)
    return fn if fn is not None else ir.Function(mod, ir.FunctionType(ret, args), name=name)


def _emit_igemm(mod: ir.Module, w: int, signed: bool) -> None:
    """void igemm(a, bp, c, m0, m1, n, k, ap): rows [m0, m1) of c = a @ b (b packed by
    `pack`); ap is this call's scratch for A_CHUNK_ROWS packed rows and one output tile."""
    nr = 2 * w
    vi = _vec(I32, w)
    vh = _vec(I16, 2 * w)
    pack_a, micro, store = _emit_pack_a(mod, signed), _emit_micro(mod, w), _emit_store(mod, w)
    fn = _cold(ir.Function(mod, ir.FunctionType(VOID, [I64] * _NARGS), name="igemm"))
    ia, ibp, ic, m0, m1, n, k, iap = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    pa, pc = b.inttoptr(ia, I8P), b.inttoptr(ic, I32.as_pointer())
    bp, ap = b.inttoptr(ibp, I16.as_pointer()), b.inttoptr(iap, I16.as_pointer())
    kq = b.sdiv(b.add(k, I64(1)), I64(2))
    kp = b.mul(kq, I64(2))
    panels = b.sdiv(b.add(n, I64(nr - 1)), I64(nr))
    ap32 = b.bitcast(ap, I32.as_pointer())
    tile = b.bitcast(b.gep(ap, [b.mul(I64(A_CHUNK_ROWS), kp)]), vi.as_pointer())
    nchunks = b.sdiv(b.add(b.sub(m1, m0), I64(A_CHUNK_ROWS - 1)), I64(A_CHUNK_ROWS))
    with for_range(b, I64(0), nchunks, "ch") as ch:
        r0 = b.add(m0, b.mul(ch, I64(A_CHUNK_ROWS)))
        left = b.sub(m1, r0)
        rows = b.select(b.icmp_signed("<", left, I64(A_CHUNK_ROWS)), left, I64(A_CHUNK_ROWS))
        tiles = b.sdiv(b.add(rows, I64(MR - 1)), I64(MR))
        b.call(pack_a, [pa, ap, r0, b.mul(tiles, I64(MR)), m1, k, kp])
        with for_range(b, I64(0), panels, "pn") as pn:
            bpan = b.bitcast(b.gep(bp, [b.mul(b.mul(pn, kq), I64(2 * nr))]), vh.as_pointer())
            col = b.mul(pn, I64(nr))
            cols = b.sub(n, col)
            with for_range(b, I64(0), tiles, "tl") as tl:
                arow = b.mul(tl, I64(MR))
                b.call(micro, [b.gep(ap32, [b.mul(arow, kq)]), kq, bpan, tile])
                row = b.add(r0, arow)
                nrows = b.sub(m1, row)
                nrows = b.select(b.icmp_signed("<", nrows, I64(MR)), nrows, I64(MR))
                b.call(store, [tile, b.gep(pc, [b.add(b.mul(row, n), col)]), nrows, cols, n])
    b.ret_void()


def _splat(b: ir.IRBuilder, v: ir.Value, n: int) -> ir.Value:
    vt = _vec(v.type, n)
    one = b.insert_element(ir.Constant(vt, ir.Undefined), v, I32(0))
    return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), ir.Constant(_vec(I32, n),
                                                                             [0] * n))


def _module(w: int, signed: bool) -> ir.Module:
    mod = new_module(f"xlapy_igemm16_{w}")
    _emit_pack(mod, w, signed)
    _emit_igemm(mod, w, signed)
    return mod


@started
def _job(w: int, signed: bool, key: str) -> Callable[[], Engine]:
    """The module compiling on a compile thread (cache.library_job; from the disk cache if
    there), started once per process, width and target by the compile that plans the
    first such product (`igemm8`), beside the rest of that compile."""
    return cache.library_job(("i16_igemm8", w, signed), lambda: _module(w, signed),
                             "light-novec", vectorize=False, exports=["igemm", "pack"])


@once
def _compiled(w: int, signed: bool, key: str) -> tuple[Engine, int, int]:
    """The module, once per process, width and target (`_job`), linked."""
    eng = _job(w, signed, key)()
    return eng, eng.address("igemm"), eng.address("pack")


def igemm8(threads: int = 1, signed: bool = True
           ) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    """A function (a[batch, m, k], b[batch, k, n], c[batch, m, n]): s8 operands and an s32
    c (`signed`), else u8 and u32; c = a @ b exactly (wrapping), for `available()` targets."""
    w = lanes()
    nr = 2 * w
    t = target.current()
    _job(w, signed, t.key)  # starts compiling now, beside the rest of the program's compile
    built: list[tuple[Engine, int, int, Callable[..., None], Callable[..., None]]] = []
    lock = threading.Lock()

    def module() -> tuple[Engine, int, int, Callable[..., None], Callable[..., None]]:
        """The module (`_job`), linked on the first run, once per process, width and
        target."""
        if not built:
            with lock:
                if not built:
                    with target.use(t):
                        eng, addr, pack_addr = _compiled(w, signed, t.key)
                    built.append((eng, addr, pack_addr, _SIG(addr), _SIG(pack_addr)))
        return built[0]

    free: list[np.ndarray] = []  # scratch not in use (list.pop/append: thread-safe)

    def run(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        if empty_product(a, b, c):
            return
        nb, m, k = a.shape
        n = b.shape[2]
        _, addr, pack_addr, call, pack = module()
        a, b = c_order(a), c_order(b)
        out = c if c.flags.c_contiguous else np.empty(c.shape, c.dtype)
        kp, panels = k + k % 2, -(-n // nr)
        tiles = -(-m // MR)
        parts = max(1, min(threads, tiles)) if m * n * k >= SPLIT_MACS else 1
        cuts = [tiles * p // parts * MR for p in range(parts)] + [m]
        pcuts = [panels * p // parts for p in range(parts + 1)]
        bp_bytes = panels * nr * kp * 2
        ap_bytes = A_CHUNK_ROWS * kp * 2 + MR * nr * 4 + 64
        each = -(-(bp_bytes + ap_bytes) // recycle.ALIGN) * recycle.ALIGN
        # (also products big enough to split when there are as many as threads: each
        # then on one thread, no split and wait per product)
        if nb > 1 and (parts == 1 or nb >= threads) and nb * each <= BATCH_SCRATCH:
            # A batch of small products as two job tables (every rhs packed, then every
            # product), each product with scratch of its own, the threads taking the next
            # job left: the loop's ctypes calls had cost ~4 us a product (512 [16, 64] @
            # [64, 16] int8 products on x86-64-v3 code: 2.0 ms against XLA's 0.36).
            raw = np.empty(nb * each + recycle.ALIGN, np.uint8)
            base = raw.ctypes.data
            base += (-base) % recycle.ALIGN
            pa, pb, pc = a.ctypes.data, b.ctypes.data, out.ctypes.data
            packs = strided_table(pack_addr, [pb, base, k, n, 0, panels, 0, 0],
                                  [k * n, each, 0, 0, 0, 0, 0, 0], nb)
            calls = strided_table(addr, [pa, base, pc, 0, m, n, k, base + bp_bytes],
                                  [m * k, each, m * n * 4, 0, 0, 0, 0, each], nb)
            for table in (packs, calls):
                parallel.run_jobs(table, threads, (a, b, out, raw))
            if out is not c:
                c[...] = out
            return
        need = bp_bytes + parts * ap_bytes + recycle.ALIGN
        try:
            raw = free.pop()
        except IndexError:
            raw = np.empty(0, np.uint8)
        if raw.nbytes < need:
            raw = np.empty(need, np.uint8)
        bp = raw.ctypes.data
        bp += (-bp) % recycle.ALIGN
        aps = [bp + bp_bytes + p * ap_bytes for p in range(parts)]
        pool = parallel.pool(threads) if parts > 1 else None
        pa, pb, pc = a.ctypes.data, b.ctypes.data, out.ctypes.data
        for j in range(nb):  # batch j's operands: pointers into the contiguous arrays
            ptrs = (pa + j * m * k, bp, pc + j * m * n * 4)
            packs = [(pb + j * k * n, bp, k, n, pcuts[p], pcuts[p + 1], 0, 0)
                     for p in range(parts)]
            jobs = [(*ptrs, cuts[p], cuts[p + 1], n, k, aps[p]) for p in range(parts)]
            if pool is None:
                pack(*packs[0])
                call(*jobs[0])
            else:
                keep = (a, b, out, raw)
                pool.share([(pack_addr, x) for x in packs], parts, keep=keep)
                pool.share([(addr, x) for x in jobs], parts, keep=keep)
        if raw.nbytes <= KEEP_SCRATCH_BYTES:
            free.append(raw)
        if out is not c:
            c[...] = out

    return run


#: Bytes of per-product scratch (packed rhs and lhs chunk) up to which a batch of small
#: products runs as job tables.
BATCH_SCRATCH = 8 << 20

__all__ = ["A_CHUNK_ROWS", "MR", "SPLIT_MACS", "available", "igemm8", "lanes"]
