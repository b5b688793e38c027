"""s8 x s8 -> s32 (and u8 x u8 -> u32) GEMM on AMX-INT8 tiles (`tdpbssd`, `tdpbuud`): 16384
multiply-adds per instruction, one every 16 cycles (measured here: 3.7 T/s on one core,
about 8x gemm_vnni.py's peak).

`tdpbssd` multiplies signed by signed bytes (`tdpbuud` unsigned by unsigned) and adds groups
of four products into 32-bit lanes: exact modulo 2^32 in any order, so the bits equal the
interpreter's 64-bit sum wrapped to 32 bits for any k (as gemm_vnni.py's and gemm_int.py's).

Tiles (8 registers of 16 rows x 64 bytes, one configuration for every call): four C tiles (a
32 x 32 s32 block), two A tiles (16 rows x 64 k bytes) and two B tiles in the VNNI layout
(row g holds, for 16 columns, the four bytes b[4g .. 4g+3, j]). A tile load is fast only
from 64-byte-aligned rows (measured: 2.6 ns aligned, 14 ns at a 16-byte offset: the loads
then bound the kernel at a third of the peak), so both operands are packed into aligned
scratch: B into panels of 16 columns (k/4 rows of 64 bytes), A by chunks of rows into tiles
(32 rows x 64 bytes per k step), each tile 1 KB contiguous. The packs zero-fill rows,
columns and k beyond the matrices (zero bytes add nothing), so any m, n, k take the same
full-tile loop; a block that is partial, or a C that is not aligned, is stored through a
scratch block and copied with masked stores.

Loop nest per call (a job: batches [j0, j1), rows [m0, m1) x 32-column blocks [nb0, nb1),
nb0 even; threads split batches when there are enough, else rows or columns): per chunk
of A rows (A_CHUNK_BYTES packed, kept in L1/L2): pack it, then per group of 64 B columns
(packed in the first chunk's pass: one masked 64-byte load per row, eight byte shuffles)
walk its two 32-column blocks over the chunk's 32-row blocks (`amx_block`). With one chunk
(few rows) every group goes to the same slot, packed right before its use: B is read once
and its packed copy stays in cache (8 x 4096 x 1024: 805 -> 638 us); with several, each
group keeps a slot for the later chunks. Tile loads and products are interleaved in
`amx_block` (load A0 B0, product, load B1, product, load A1, two products), so a load
overlaps the product before it: LLVM's scheduler (-O1 and above) groups the loads first,
25% slower. `amx_block` is `optnone` and the module is generated at -O0: the order stays
as written, and codegen takes 1.3 ms instead of 5-10 (the packs are as fast: they wait on
memory).

The module does not depend on the shapes: compiled once per process and target, on the
first run of a program that uses it (a library routine, as batch_chain.py's runner), not in
the program's compile, and cached on disk as every kernel.

Tile state is per thread: every call loads the configuration (`ldtilecfg`) and releases the
tiles at its end (`tilerelease`). Linux hands the tile data state only to a process that
asked (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`): `available()` asks once and
is False where the kernel refuses or the target lacks amx-int8 (gemm_vnni.py then).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import amx, cache, parallel, recycle, target
from xlapy.backends.cpu.gemm_int import empty_product
from xlapy.backends.cpu.llvm_util import (
    I1,
    I8,
    I8P,
    I32,
    I64,
    VOID,
    Engine,
    for_range,
    new_module,
)
from xlapy.backends.cpu.once import once, started
from xlapy.backends.cpu.transpose_lib import c_order

#: Rows and columns of the C block per tile step (2 x 2 tiles of 16 x 16 s32).
BM, BN = 32, 32
#: k bytes per tile step (one A tile row).
BK = 64
#: Bytes of packed A per row chunk (kept near while the B panels go by; 256 KB measured no
#: faster, and a smaller scratch leaves more of L2 to C and the operands).
A_CHUNK_BYTES = 1 << 16
#: Multiply-adds below which a product is not split over threads (a hand-off costs 5-10 us,
#: 2^24 multiply-adds about 10 us of tiles and packs).
SPLIT_MACS = 1 << 24
#: Scratch up to this size is kept for the next call (np.empty per call: ~1 us, and fresh
#: pages); bigger (huge k) is freed.
KEEP_SCRATCH_BYTES = 1 << 24
_V64I8 = ir.VectorType(I8, 64)
_V16I32 = ir.VectorType(I32, 16)
#: amx_igemm8(a, b, c, m0, m1, n, k, nb0, nb1, chunk, scratch, batch)
_NARGS = 12
_SIG = ctypes.CFUNCTYPE(None, *([ctypes.c_int64] * _NARGS))


def available() -> bool:
    """Whether the current target has AMX-INT8 (and AVX-512BW/VBMI for the packs), runs here,
    and the kernel grants this process the tiles."""
    t = target.current()
    return (t.is_x86 and all(t.has(f) for f in ("amx-int8", "amx-tile", "avx512bw",
                                                 "avx512vbmi"))
            and t.runs_here and amx.tile_permission())


def _decl(mod: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    fn = mod.globals.get(name)
    return fn if fn is not None else ir.Function(mod, ir.FunctionType(ret, args), name=name)


def _mask(b: ir.IRBuilder, valid: ir.Value, n: int) -> ir.Value:
    """<n x i1> with the first `valid` (0 <= valid <= n <= 64) lanes set: a k-mask built
    as an integer ((1 << valid) - 1), one kmov, instead of a vector compare."""
    bits = b.sub(b.shl(I64(1), valid), I64(1))
    if n == 64:
        bits = b.select(b.icmp_signed(">=", valid, I64(64)), I64(-1), bits)
    else:
        bits = b.trunc(bits, ir.IntType(n))
    return b.bitcast(bits, ir.VectorType(I1, n))


def _clamp(b: ir.IRBuilder, v: ir.Value, hi: int) -> ir.Value:
    """min(max(v, 0), hi)."""
    v = b.select(b.icmp_signed("<", v, I64(0)), I64(0), v)
    return b.select(b.icmp_signed(">", v, I64(hi)), I64(hi), v)


def _masked_load(b: ir.IRBuilder, vt: ir.VectorType, ptr: ir.Value, valid: ir.Value
                 ) -> ir.Value:
    """The first `valid` lanes at ptr (the rest zero, never read: no fault past an end)."""
    n = vt.count
    fn = _decl(b.module, f"llvm.masked.load.v{n}i{vt.element.width}.p0", vt,
               [vt.as_pointer(), I32, ir.VectorType(I1, n), vt])
    mask = _mask(b, valid, n)
    return b.call(fn, [b.bitcast(ptr, vt.as_pointer()), I32(1), mask,
                       ir.Constant(vt, [0] * n)])


def _masked_store(b: ir.IRBuilder, v: ir.Value, ptr: ir.Value, valid: ir.Value) -> None:
    vt = v.type
    n = vt.count
    fn = _decl(b.module, f"llvm.masked.store.v{n}i{vt.element.width}.p0", VOID,
               [vt, vt.as_pointer(), I32, ir.VectorType(I1, n)])
    mask = _mask(b, valid, n)
    b.call(fn, [v, b.bitcast(ptr, vt.as_pointer()), I32(1), mask])


def _emit_pack_b(b: ir.IRBuilder, pb: ir.Value, n: ir.Value, k: ir.Value, bp: ir.Value,
                 kq: ir.Value, col0: ir.Value, groups: ir.Value, panel: ir.Value) -> None:
    """Pack `groups` groups of 64 columns from col0: panel 4q + s of bp, row g (64 bytes)
    = b[4g + i, col0 + 64q + 16s + j] at byte 4j + i; zero past column n and row k. Each
    64-byte row of b is loaded once (masked) and eight two-source byte shuffles (vpermt2b)
    make the four panels' rows."""
    pairs = [[j // 2 + (32 * h) if j % 2 == 0 else 64 + j // 2 + 32 * h for j in range(64)]
             for h in range(2)]  # rows i, i+1 interleaved: columns 32h .. 32h+31
    quads = [[(2 * (16 * s + j) % 64 if i < 2 else 64 + 2 * (16 * s + j) % 64) + i % 2
              for j in range(16) for i in range(4)] for s in range(4)]
    with for_range(b, I64(0), groups, "bq") as q:
        col = b.add(col0, b.mul(q, I64(64)))
        cols = _clamp(b, b.sub(n, col), 64)
        dst = b.gep(bp, [b.mul(b.mul(q, I64(4)), panel)])
        with for_range(b, I64(0), kq, "bg") as g:
            rows = []
            for i in range(4):
                row = b.add(b.mul(g, I64(4)), I64(i))
                valid = b.select(b.icmp_signed("<", row, k), cols, I64(0))
                rows.append(_masked_load(b, _V64I8, b.gep(pb, [b.add(b.mul(row, n), col)]),
                                         valid))
            inter = [[_permute2(b, rows[2 * r], pairs[h], rows[2 * r + 1]) for h in range(2)]
                      for r in range(2)]
            for sp in range(4):
                v = _permute2(b, inter[0][sp // 2], quads[sp], inter[1][sp // 2])
                out = b.gep(dst, [b.add(b.mul(I64(sp), panel), b.mul(g, I64(64)))])
                b.store(v, b.bitcast(out, _V64I8.as_pointer()), align=64)


class _ByteVector(ir.Constant):
    """A <64 x i8> constant printed from one string (ir.Constant makes and formats an
    object per lane: most of the Python time of the pack's index vectors)."""

    def __init__(self, vals: list[int]) -> None:  # not ir.Constant.__init__ (per lane)
        self.type = _V64I8
        self.constant = vals
        self._text = "<" + ", ".join(f"i8 {v}" for v in vals) + ">"

    def _get_reference(self) -> str:
        return self._text


def _permute2(b: ir.IRBuilder, x: ir.Value, idx: list[int], y: ir.Value) -> ir.Value:
    """Bytes of x (indices < 64) and y (64 + i) picked by idx: one vpermt2b, called as the
    intrinsic (a shufflevector of 64 lanes cost twice the codegen time)."""
    fn = _decl(b.module, "llvm.x86.avx512.vpermi2var.qi.512", _V64I8, [_V64I8] * 3)
    return b.call(fn, [x, _ByteVector(idx), y])


def _emit_pack_a(b: ir.IRBuilder, pa: ir.Value, k: ir.Value, ap: ir.Value, kb: ir.Value,
                 r0: ir.Value, r1: ir.Value, nrows: ir.Value) -> None:
    """ap[(r / 32) kb + kk][r % 32] (64 bytes) = a[r0 + r, 64 kk ...] for r < nrows
    (a multiple of 32), zero at rows r0 + r >= r1 and past k."""
    with for_range(b, I64(0), nrows, "ar") as r:
        row = b.add(r0, r)
        live = b.icmp_signed("<", row, r1)
        src = b.gep(pa, [b.mul(row, k)])
        base = b.add(b.mul(b.mul(b.sdiv(r, I64(32)), kb), I64(32)), b.srem(r, I64(32)))
        with for_range(b, I64(0), kb, "ak") as kk:
            off = b.mul(kk, I64(BK))
            valid = b.select(live, _clamp(b, b.sub(k, off), BK), I64(0))
            v = _masked_load(b, _V64I8, b.gep(src, [off]), valid)
            dst = b.gep(ap, [b.mul(b.add(base, b.mul(kk, I64(32))), I64(64))])
            b.store(v, b.bitcast(dst, _V64I8.as_pointer()), align=64)


def _emit_kernel(mod: ir.Module, signed: bool) -> None:
    """void amx_igemm8(a, b, c, m0, m1, n, k, nb0, nb1, chunk, scratch, batch): for batches
    j in [j0, j1) (batch -> i64 words j0, j1, sa, sb, sc; the operands at a + j sa, b + j sb,
    c + j sc), c[m0:m1, 32 nb0 : 32 nb1] (clipped to n) of c = a @ b for contiguous a[., k]
    s8, b[k, n] s8, c[., n] s32; `chunk` rows of A are packed at a time (a multiple of 32);
    scratch (64-byte aligned)
    holds the packed B panels, the packed A chunk and one C block. The batch loop is here,
    not in the caller: 512 products of 16 x 64 x 16 cost 3 us a call from Python (1.7 ms,
    XLA 0.23)."""
    i64 = ir.IntType(64)
    cfgvar = amx.tile_config(mod, "amx_cfg")
    ldcfg = _decl(mod, "llvm.x86.ldtilecfg", VOID, [I8P])
    release = _decl(mod, "llvm.x86.tilerelease", VOID, [])
    block = _emit_block(mod, signed)
    fn = ir.Function(mod, ir.FunctionType(VOID, [i64] * _NARGS), name="amx_igemm8")
    ia, ib_, ic, m0, m1, n, k, nb0, nb1, chunk, iscr, ibatch = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    words = b.inttoptr(ibatch, i64.as_pointer())
    j0, j1, sa, sb, sc = (b.load(b.gep(words, [I64(w)])) for w in range(5))
    scr = b.inttoptr(iscr, I8P)
    kb = b.sdiv(b.add(k, I64(BK - 1)), I64(BK))
    kq = b.mul(kb, I64(BK // 4))
    panel = b.mul(kq, I64(64))  # bytes of one packed 16-column panel
    bp = scr
    ap = b.gep(bp, [b.mul(b.mul(b.sdiv(b.add(b.sub(nb1, nb0), I64(1)), I64(2)), I64(4)), panel)])
    cs = b.gep(ap, [b.mul(chunk, b.mul(kb, I64(BK)))])  # one 32 x 32 s32 block
    ldc = b.mul(n, I64(4))
    groups = b.sdiv(b.add(b.sub(nb1, nb0), I64(1)), I64(2))
    b.call(ldcfg, [b.bitcast(cfgvar, I8P)])
    nchunks = b.sdiv(b.add(b.sub(m1, m0), b.sub(chunk, I64(1))), chunk)
    # One A chunk (few rows): each B group is packed right before its use into one slot
    # (B read once, the slot stays in cache). Several: every group packed once, in the
    # first chunk's pass, into a slot of its own for the later chunks.
    streamed = b.icmp_signed("==", nchunks, I64(1))
    with for_range(b, j0, j1, "bj") as j:
        icj = b.add(ic, b.mul(j, sc))
        pa, pb, pc = (b.inttoptr(b.add(v, b.mul(j, st)), I8P)
                      for v, st in ((ia, sa), (ib_, sb), (ic, sc)))
        aligned = b.icmp_signed("==", b.and_(b.or_(icj, ldc), I64(63)), I64(0))
        _emit_batch(b, block, (pa, pb, pc), (m0, m1, n, k, nb0, nb1, chunk), nchunks,
                    streamed, (ap, bp, cs, kb, kq, panel, groups, ldc, aligned))
    b.call(release, [])
    b.ret_void()


def _emit_batch(b: ir.IRBuilder, block: ir.Function, ptrs: tuple[ir.Value, ...],
                dims: tuple[ir.Value, ...], nchunks: ir.Value, streamed: ir.Value,
                lay: tuple[ir.Value, ...]) -> None:
    """One batch's product in amx_igemm8 (its loops over A chunks, B groups, C blocks)."""
    pa, pb, pc = ptrs
    m0, m1, n, k, nb0, nb1, chunk = dims
    ap, bp, cs, kb, kq, panel, groups, ldc, aligned = lay
    with for_range(b, I64(0), nchunks, "mc") as ci:
        mc = b.add(m0, b.mul(ci, chunk))
        rows = b.sub(m1, mc)
        rows = b.select(b.icmp_signed("<", rows, chunk), rows, chunk)
        blocks = b.sdiv(b.add(rows, I64(BM - 1)), I64(BM))
        _emit_pack_a(b, pa, k, ap, kb, mc, m1, b.mul(blocks, I64(BM)))
        with for_range(b, I64(0), groups, "gq") as q:
            slot = b.gep(bp, [b.mul(b.select(streamed, I64(0), q), b.mul(panel, I64(4)))])
            first = b.icmp_signed("==", ci, I64(0))
            with b.if_then(first):
                _emit_pack_b(b, pb, n, k, slot, kq,
                             b.add(b.mul(nb0, I64(BN)), b.mul(q, I64(2 * BN))), I64(1), panel)
            jb0 = b.add(nb0, b.mul(q, I64(2)))
            jb1 = b.add(jb0, I64(2))
            jb1 = b.select(b.icmp_signed("<", jb1, nb1), jb1, nb1)
            with for_range(b, jb0, jb1, "jb") as jb:
                b0 = b.gep(slot, [b.mul(b.mul(b.sub(jb, jb0), I64(2)), panel)])
                b1 = b.gep(b0, [panel])
                col0 = b.mul(jb, I64(BN))
                with for_range(b, I64(0), blocks, "ib") as ib:
                    a0 = b.gep(ap, [b.mul(b.mul(ib, kb), I64(BM * BK))])
                    row0 = b.add(mc, b.mul(ib, I64(BM)))
                    full = b.and_(aligned, b.and_(
                        b.icmp_signed("<=", b.add(row0, I64(BM)), m1),
                        b.icmp_signed("<=", b.add(col0, I64(BN)), n)))
                    with b.if_else(full) as (direct, partial):
                        with direct:
                            crow = b.gep(pc, [b.add(b.mul(row0, ldc), b.mul(col0, I64(4)))])
                            b.call(block, [a0, b0, b1, kb, crow, ldc])
                        with partial:
                            b.call(block, [a0, b0, b1, kb, cs, I64(BN * 4)])
                            _emit_copy_partial(b, cs, pc, ldc, row0, col0, m1, n)


def _emit_block(mod: ir.Module, signed: bool) -> ir.Function:
    """void amx_block(a0, b0, b1, kb, dst, ldd): the 32 x 32 32-bit block of packed A tiles
    at a0 times the packed panels b0, b1 over kb k steps, stored at dst (row stride ldd
    bytes); bytes signed (tdpbssd) or unsigned (tdpbuud). `optnone`: compiled as written,
    loads interleaved with the products."""
    zero = _decl(mod, "llvm.x86.tilezero", VOID, [I8])
    load = _decl(mod, "llvm.x86.tileloadd64", VOID, [I8, I8P, I64])
    store = _decl(mod, "llvm.x86.tilestored64", VOID, [I8, I8P, I64])
    dp = _decl(mod, f"llvm.x86.tdpb{'ss' if signed else 'uu'}d", VOID, [I8, I8, I8])
    fn = ir.Function(mod, ir.FunctionType(VOID, [I8P, I8P, I8P, I64, I8P, I64]),
                     name="amx_block")
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("optnone")
    a0, b0, b1, kb, dst, ldd = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def t(x: int) -> ir.Constant:
        return ir.Constant(I8, x)

    for x in range(4):
        b.call(zero, [t(x)])
    with for_range(b, I64(0), kb, "kk") as kk:
        ao = b.gep(a0, [b.mul(kk, I64(BM * BK))])
        bo = b.mul(kk, I64(16 * 64))
        b.call(load, [t(4), ao, I64(64)])
        b.call(load, [t(6), b.gep(b0, [bo]), I64(64)])
        b.call(dp, [t(0), t(4), t(6)])
        b.call(load, [t(7), b.gep(b1, [bo]), I64(64)])
        b.call(dp, [t(1), t(4), t(7)])
        b.call(load, [t(5), b.gep(ao, [I64(16 * 64)]), I64(64)])
        b.call(dp, [t(2), t(5), t(6)])
        b.call(dp, [t(3), t(5), t(7)])
    half = b.gep(dst, [b.mul(ldd, I64(16))])
    b.call(store, [t(0), dst, ldd])
    b.call(store, [t(1), b.gep(dst, [I64(64)]), ldd])
    b.call(store, [t(2), half, ldd])
    b.call(store, [t(3), b.gep(half, [I64(64)]), ldd])
    b.ret_void()
    return fn


def _emit_copy_partial(b: ir.IRBuilder, cs: ir.Value, pc: ir.Value, ldc: ir.Value,
                       row0: ir.Value, col0: ir.Value, m1: ir.Value, n: ir.Value) -> None:
    """The rows below m1 and columns below n of the block at cs (32 rows of 128 bytes,
    aligned) into c at (row0, col0), with masked stores."""
    rows = _clamp(b, b.sub(m1, row0), BM)
    with for_range(b, I64(0), rows, "cr") as r:
        src = b.bitcast(b.gep(cs, [b.mul(r, I64(128))]), _V16I32.as_pointer())
        dst = b.gep(pc, [b.add(b.mul(b.add(row0, r), ldc), b.mul(col0, I64(4)))])
        for h in range(2):
            valid = _clamp(b, b.sub(n, b.add(col0, I64(16 * h))), 16)
            v = b.load(b.gep(src, [I64(h)]), align=64)
            _masked_store(b, v, b.gep(dst, [I64(64 * h)]), valid)


def _module(signed: bool) -> ir.Module:
    mod = new_module("xlapy_amx_igemm8")
    _emit_kernel(mod, signed)
    return mod


@started
def _job(signed: bool, key: str) -> Callable[[], Engine]:
    """The kernel module compiling at -O0 on a compile thread (cache.library_job; from the
    disk cache if there), started once per process and target by the compile that plans
    the first such product (`igemm8`), so LLVM's ~10 ms go on beside the rest of that
    compile instead of in the program's first call (int8_matmul's: ~12 ms, XLA's 2)."""
    return cache.library_job(("amx_igemm8", signed), lambda: _module(signed), "amx-O0",
                             o0=True, exports=["amx_igemm8"])


@once
def _compiled(signed: bool, key: str) -> tuple[Engine, int]:
    """The kernel module, once per process and target (`_job`), linked."""
    eng = _job(signed, key)()
    return eng, eng.address("amx_igemm8")


#: (A chunk rows, job spans (j0, j1, r0, r1, nb0, nb1), scratch bytes per job)
Plan = tuple[int, list[tuple[int, int, int, int, int, int]], int]


def _scratch_bytes(nblocks: int, chunk: int, kp: int) -> int:
    """Bytes of one job's scratch: its B panels (in groups of 64 columns), the A chunk,
    one C block."""
    return -(-nblocks // 2) * 2 * BN * kp + chunk * kp + BM * BN * 4


def igemm8(threads: int = 1, signed: bool = True
           ) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    """A function (a[batch, m, k], b[batch, k, n], c[batch, m, n]): s8 operands and an
    s32 c (`signed`), else u8 and u32; c = a @ b exactly (wrapping), for targets where
    `available()`."""
    t = target.current()
    _job(signed, t.key)  # starts compiling now, beside the rest of the program's compile
    built: list[tuple[Engine, int, Callable[..., None]]] = []  # (engine, address, function)
    lock = threading.Lock()

    def kernel() -> tuple[Engine, int, Callable[..., None]]:
        """The module (`_job`), linked on the first run, once per process and target."""
        if not built:
            with lock:
                if not built:
                    with target.use(t):
                        eng, addr = _compiled(signed, t.key)
                    built.append((eng, addr, _SIG(addr)))
        return built[0]

    plans: dict[tuple[int, int, int, int], Plan] = {}
    free: list[np.ndarray] = []  # scratch buffers not in use (list.pop/append: thread-safe)

    def plan(nb: int, m: int, k: int, n: int) -> Plan:
        """(A chunk rows, job spans (j0, j1, r0, r1, nb0, nb1), scratch bytes per job)."""
        kp = -(-k // BK) * BK
        mblocks, nblocks = -(-m // BM), -(-n // BN)
        chunk = BM * max(1, min(mblocks, A_CHUNK_BYTES // (BM * kp)))
        parts = max(1, min(threads, max(nb, nblocks, mblocks))) \
            if nb * m * n * k >= SPLIT_MACS else 1
        if nb >= parts:  # batches split (or one job): each job whole products
            cuts = [nb * p // parts for p in range(parts + 1)]
            spans = [(cuts[p], cuts[p + 1], 0, m, 0, nblocks) for p in range(parts)]
        elif nblocks >= 2 * parts:  # columns split (by 64): each job packs its own B panels
            cuts = [nblocks * p // parts // 2 * 2 for p in range(parts)] + [nblocks]
            spans = [(0, nb, 0, m, cuts[p], cuts[p + 1]) for p in range(parts)]
        else:  # rows split (few columns): each job packs all of B
            cuts = [mblocks * p // parts * BM for p in range(parts)] + [m]
            spans = [(0, nb, cuts[p], cuts[p + 1], 0, nblocks) for p in range(parts)]
        size = max(_scratch_bytes(s[5] - s[4], chunk, kp) for s in spans)
        return chunk, spans, size

    def run(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        if empty_product(a, b, c):
            return
        nb, m, k = a.shape
        n = b.shape[2]
        _, addr, call = kernel()
        a, b = c_order(a), c_order(b)
        out = c if c.flags.c_contiguous else np.empty(c.shape, c.dtype)
        got = plans.get((nb, m, k, n))
        if got is None:
            got = plans[(nb, m, k, n)] = plan(nb, m, k, n)
        chunk, spans, size = got
        try:
            raw = free.pop()
        except IndexError:
            raw = np.empty(0, np.uint8)
        if raw.nbytes < size * len(spans) + recycle.ALIGN:
            raw = np.empty(size * len(spans) + recycle.ALIGN, np.uint8)
        base = raw.ctypes.data
        base += (-base) % recycle.ALIGN
        ptrs = (a.ctypes.data, b.ctypes.data, out.ctypes.data)
        batch = np.array([(j0, j1, m * k, k * n, m * n * 4) for j0, j1, *_ in spans],
                         np.int64)
        jobs = [(*ptrs, r0, r1, n, k, c0, c1, chunk, base + p * size,
                 batch.ctypes.data + 40 * p)
                for p, (_, _, r0, r1, c0, c1) in enumerate(spans)]
        if len(jobs) == 1:
            call(*jobs[0])
        else:
            parallel.pool(threads).share([(addr, x) for x in jobs], len(jobs),
                                         keep=(a, b, out, raw, batch))
        if raw.nbytes <= KEEP_SCRATCH_BYTES:
            free.append(raw)
        if out is not c:
            c[...] = out

    return run


__all__ = ["A_CHUNK_BYTES", "BK", "BM", "BN", "SPLIT_MACS", "available", "igemm8"]
