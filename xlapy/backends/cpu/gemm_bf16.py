"""bf16 x bf16 -> f32 GEMM on AMX-BF16 tiles (`tdpbf16ps`): 16 x 16 x 32 multiply-adds per
instruction, the operands read as bf16 where they lie (no f32 copies, no convert passes).

Why: a bf16 dot_general otherwise widens both operands to f32 and runs OpenBLAS's sgemm
(widen_dots.py): the copies cost memory traffic and the f32 FMAs run at a 16th of what the
tiles do. `tdpbf16ps` computes each output element as an f32 sum: every bf16 x bf16 product
is exact in f32 and is added with round-to-nearest-even, as an f32 dot does (only the order
of the additions is the hardware's). Denormal inputs count as zero and denormal sums flush
(DAZ/FTZ, whatever MXCSR says): the `ftz` mode's semantics (XLA CPU's), so `takes` routes here
only in that mode; the `ieee` mode keeps the widened BLAS path.

Layout: A tiles (16 rows x 32 k) load straight from A with its row stride (k contiguous),
when its rows lie on 64-byte lines; else A is first staged into aligned rows (`tile_ready`:
a tile load from unaligned rows runs at a third of the speed). B must be in the VNNI layout:
panel p (16 columns) row g holds, for each column j, the pair (b[2g, 16p + j], b[2g + 1,
16p + j]). The kernel packs its own panels, from B either [k, n] (n contiguous: two rows
interleaved, each row's 64-byte piece read whole) or stored transposed as [n, k] (k
contiguous, attention's q k^T: a 16-dword gather per row): with one chunk of rows (at most
M_CHUNK_BLOCKS), each column pair right before its use, so its packed copy is still in L2
(64 x 4096 x 4096: 6.7 -> 2.8 ms); with more, every panel of the batch once, up front. C
is 2 x 2 tiles (32 x 32 f32) per step, stored straight into an f32 output, or through a 4 KB
block rounded once to bf16.
Each kernel also has a BLAS-convention entry (one product, out^T = b^T a^T) for the native
batch-chain runner (batch_chain.py). The kernels go through LLVM's -O0 code generator: the
time is in the tile instructions. Their code depends on no shape (m, n, k, strides are
arguments): each is built on the first run that needs it, once per process and target, and
cached on disk, so a program's compile builds none (attention_bf16's cold compile paid ~26 ms
of LLVM for two of them).

Shapes: m and n in 32-blocks, k in 32-blocks; the Python side pads what is not (zeros add
nothing). Work splits over threads by batch, else by 32-column blocks, else by row blocks;
every output element is one tile's sum over all of k in one order, so the bits never depend
on the thread count. Tile state is per thread: each call loads the configuration and
releases the tiles at its end; Linux grants the tile data state once per process
(`arch_prctl(ARCH_REQ_XCOMP_PERM)`), and `tiles()` is False where it refuses or the
target lacks AMX-BF16: there the same kernels sum each block with AVX512-BF16's `vdpbf16ps`
(gemm_bf16_dp.py: Zen 4 and 5, Cooper Lake), and `available()` is False only without that
too (AVX2/SSE targets: the widened BLAS path). Left: no k-blocking (each 2 x 2 tile step
loads its 4 KB from L2), and a pack that waits on memory before the tiles start.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import amx, cache, llvm_util, parallel, recycle, target
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.gemm_int import empty_product
from xlapy.backends.cpu.llvm_util import (
    I8,
    I8P,
    I64,
    VOID,
    Engine,
    for_range,
    new_module,
)
from xlapy.backends.cpu.once import once
from xlapy.backends.cpu.transpose_lib import c_order
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: Rows and columns of the C block per step (2 x 2 tiles of 16 x 16 f32).
BM, BN = 32, 32
#: k elements per tile step (one A tile row: 64 bytes of bf16).
BK = 32
#: A row blocks walked per pass over the column blocks (kept in L2).
M_CHUNK_BLOCKS = 8
#: Rows of B[k, n] ahead of its packing that are prefetched (64 x 4096 x 4096: 3.7 -> 2.8
#: ms, runs one after the other: noisy).
PACK_AHEAD = 16
#: Multiply-adds a product (one of a batch) below which a dot stays on the widened path
#: (tiny products: the bits of small dots stay OpenBLAS's, as the interpreter's; the tiles
#: win from here on; 4096 products of 4 x 4 x 4, padded to 32-blocks, ran at 2.1x XLA's
#: time, 512 of 16 x 64 x 16 at 1.2x).
MIN_MACS = 1 << 15
#: Multiply-adds below which a product is not split over threads.
SPLIT_MACS = 1 << 20
_I16 = ir.IntType(16)
_I32 = ir.IntType(32)
_V16H = ir.VectorType(_I16, 16)
_V32H = ir.VectorType(_I16, 32)
_V16D = ir.VectorType(_I32, 16)
#: Kernel arguments: (params, j0, j1, m0, m1, n0, n1, bp); params holds PARAMS words.
_SIG = ctypes.CFUNCTYPE(None, *([ctypes.c_int64] * 8))
#: a, lda, sa, b, ldb, sb, c, ldc, sc, kb (pointers and byte strides).
PARAMS = 10


def tiles() -> bool:
    """Whether the current target has AMX-BF16, it runs here and Linux grants the tiles."""
    t = target.current()
    return (t.is_x86 and t.has("amx-bf16") and t.has("amx-tile") and t.has("avx512f")
            and t.runs_here and amx.tile_permission())


def available() -> bool:
    """Whether the kernels run here: on the AMX tiles (`tiles`), else on AVX512-BF16's
    `vdpbf16ps` (gemm_bf16_dp.py: Zen 4 and 5, Cooper Lake)."""
    t = target.current()
    return tiles() or (t.is_x86 and t.has("avx512bf16") and t.has("avx512bw") and t.runs_here)


def takes(instr: Instruction) -> bool:
    """Whether a dot_general (bf16 x bf16, no algorithm, an f32 or bf16 result) computes here:
    a kernel available, the `ftz` denormal mode (tiles and vdpbf16ps flush), enough work."""
    if instr.opcode != "dot_general" or instr.attrs.algorithm is not None:
        return False
    if any(o.shape.element_type != ET.BF16 for o in instr.operands):
        return False
    if instr.shape.element_type not in (ET.BF16, ET.F32):
        return False
    lhs = instr.operands[0].shape
    k = int(np.prod([lhs.dimensions[d] for d in instr.attrs.lhs_contracting_dimensions]))
    batch = int(np.prod([lhs.dimensions[d] for d in instr.attrs.lhs_batching_dimensions]))
    if instr.shape.num_elements // max(batch, 1) * k < MIN_MACS:
        return False
    return denormal.flushing() and available()


def _decl(mod: ir.Module, name: str, args: list[ir.Type]) -> ir.Function:
    fn = mod.globals.get(name)
    return fn if fn is not None else ir.Function(mod, ir.FunctionType(VOID, args), name=name)


def _load(b: ir.IRBuilder, base: ir.Value, off: ir.Value, ty: ir.VectorType) -> ir.Value:
    return b.load(b.bitcast(b.gep(base, [off]), ty.as_pointer()), align=1)


def _store(b: ir.IRBuilder, v: ir.Value, base: ir.Value, off: ir.Value) -> None:
    b.store(v, b.bitcast(b.gep(base, [off]), v.type.as_pointer()), align=1)


def _pack_nn(b: ir.IRBuilder, pb: ir.Value, ldb: ir.Value, bp: ir.Value, kq: ir.Value,
             p0: ir.Value, p1: ir.Value) -> None:
    """Panels [p0, p1) (p0 and p1 even) of B[k, n] (n contiguous, row stride ldb bytes) in
    the VNNI layout: row g of a panel interleaves rows 2g and 2g + 1 of its 16 columns.
    Row by row, each 64-byte piece of a row (two panels) read whole: B's rows lie ldb
    apart, so each is a miss to memory, and reading half a line per pass over k (panel by
    panel) had the pack of a 4096 x 4096 B take 3.2 ms, 10 GB/s."""
    half = [[h * 16 + i // 2 + 32 * (i % 2) for i in range(32)] for h in (0, 1)]
    with for_range(b, I64(0), kq, "pg") as g:
        r0 = b.mul(b.mul(g, I64(2)), ldb)
        r1 = b.add(r0, ldb)
        ahead = b.mul(ldb, I64(PACK_AHEAD))
        out = b.mul(g, I64(64))
        with for_range(b, b.udiv(p0, I64(2)), b.udiv(p1, I64(2)), "pq") as q:
            col = b.mul(q, I64(64))  # 32 bf16 columns: two panels
            llvm_util.prefetch(b, b.gep(pb, [b.add(b.add(r0, ahead), col)]))
            llvm_util.prefetch(b, b.gep(pb, [b.add(b.add(r1, ahead), col)]))
            lo = _load(b, pb, b.add(r0, col), _V32H)
            hi = _load(b, pb, b.add(r1, col), _V32H)
            dst = b.add(b.mul(b.mul(b.sub(b.mul(q, I64(2)), p0), kq), I64(64)), out)
            for h in (0, 1):
                _store(b, b.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(_I32, 32),
                                                               half[h])),
                       bp, b.add(dst, b.mul(I64(h), b.mul(kq, I64(64)))))


def _pack_nt(b: ir.IRBuilder, pb: ir.Value, ldb: ir.Value, bp: ir.Value, kq: ir.Value,
             p0: ir.Value, p1: ir.Value) -> None:
    """Panels [p0, p1) of B stored as Bt[n, k] (k contiguous, row stride ldb bytes) in the
    VNNI layout: row g, column j is the dword Bt[16p + j, 2g : 2g + 2], one AVX-512 gather
    per row. (A 16 x 16 dword transpose by shuffles ran ~10% faster but cost ~8 ms more of a
    cold compile, LLVM's shuffle lowering.)"""
    v16i1 = ir.VectorType(ir.IntType(1), 16)
    gather = _decl_fn(b.module, "llvm.x86.avx512.mask.gather.dpi.512", _V16D,
                      [_V16D, I8P, _V16D, v16i1, _I32])
    ld32 = b.trunc(ldb, _I32)
    idx = b.mul(ir.Constant(_V16D, list(range(16))),
                b.shuffle_vector(b.insert_element(ir.Constant(_V16D, None), ld32, _I32(0)),
                                 ir.Constant(_V16D, None), ir.Constant(_V16D, [0] * 16)))
    ones = ir.Constant(v16i1, [1] * 16)
    with for_range(b, p0, p1, "pp") as p:
        src = b.gep(pb, [b.mul(b.mul(p, I64(16)), ldb)])
        dst = b.mul(b.mul(b.sub(p, p0), kq), I64(64))
        with for_range(b, I64(0), kq, "pg") as g:
            row = b.call(gather, [ir.Constant(_V16D, None), b.gep(src, [b.mul(g, I64(4))]),
                                  idx, ones, _I32(1)])
            _store(b, row, bp, b.add(dst, b.mul(g, I64(64))))


def _decl_fn(mod: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    fn = mod.globals.get(name)
    return fn if fn is not None else ir.Function(mod, ir.FunctionType(ret, args), name=name)


def _store_rounded(b: ir.IRBuilder, store: ir.Function, scratch: ir.Value, crow: ir.Value,
                   ldc: ir.Value) -> None:
    """The 32 x 32 f32 block in tiles 0-3 rounded once to bf16 (to nearest even, NaN
    quiet: elementwise.to_storage) into C at crow (row stride ldc bytes), through a
    4 KB scratch block."""
    sp = b.bitcast(scratch, I8P)
    for k, off in enumerate((0, 64, 16 * 128, 16 * 128 + 64)):
        b.call(store, [ir.Constant(I8, k), b.gep(sp, [I64(off)]), I64(128)])
    with for_range(b, I64(0), I64(BM), "cr") as r:
        v = _load(b, sp, b.mul(r, I64(128)), ir.VectorType(ir.FloatType(), 32))
        _store(b, ew.to_storage(b, v, ET.BF16), b.gep(crow, [b.mul(r, ldc)]), I64(0))


@dataclass(frozen=True)
class Block:
    """One 32 x 32 block of C for a kernel's `emit_block`: A's rows at `arow` (row stride
    `lda` bytes), the two packed 16-column panels b0 and b1 (`kq` rows of 64 bytes: k
    pairs), kb 32-blocks of k, and C's block at `crow` (row stride `ldc` bytes)."""

    arow: ir.Value
    lda: ir.Value
    b0: ir.Value
    b1: ir.Value
    kq: ir.Value
    kb: ir.Value
    crow: ir.Value
    ldc: ir.Value


def emit_blocks(b: ir.IRBuilder, args: Sequence[ir.Value], transposed: bool, bf16_out: bool,
                emit_block: Callable[[Block], None]) -> None:
    """The loops every kernel here runs (arguments (params, j0, j1, m0, m1, n0, n1, bp)):
    for batches [j0, j1), C's blocks [m0, m1) x [n0, n1) (in 32s), `emit_block` computing
    each. At most M_CHUNK_BLOCKS row blocks: each column pair's panels packed into bp right
    before its blocks; more: the panels of all of B's columns [n0, n1) packed into bp first,
    then M_CHUNK_BLOCKS row blocks (kept in L2) per pass over the columns."""
    iparams, j0, j1, m0, m1, n0, n1, ibp = args
    pp = b.inttoptr(iparams, I64.as_pointer())
    ia, lda, sa, ib_, ldb, sb, ic, ldc, sc, kb = (b.load(b.gep(pp, [I64(i)]))
                                                  for i in range(PARAMS))
    pbp = b.inttoptr(ibp, I8P)
    kq = b.mul(kb, I64(BK // 2))  # VNNI rows per panel
    panel = b.mul(kq, I64(64))  # bytes of one packed 16-column panel
    pack = _pack_nt if transposed else _pack_nn
    with for_range(b, j0, j1, "bj") as j:
        pa = b.inttoptr(b.add(ia, b.mul(j, sa)), I8P)
        pb = b.inttoptr(b.add(ib_, b.mul(j, sb)), I8P)
        pc = b.inttoptr(b.add(ic, b.mul(j, sc)), I8P)

        def blocks(jb: ir.Value, b0: ir.Value, mc: ir.Value, mend: ir.Value) -> None:
            with for_range(b, mc, mend, "ib") as ib:
                crow = b.gep(pc, [b.add(b.mul(b.mul(ib, I64(BM)), ldc),
                                        b.mul(jb, I64(BN * (2 if bf16_out else 4))))])
                emit_block(Block(b.gep(pa, [b.mul(b.mul(ib, I64(BM)), lda)]), lda, b0,
                                 b.gep(b0, [panel]), kq, kb, crow, ldc))

        one = b.icmp_signed("<=", b.sub(m1, m0), I64(M_CHUNK_BLOCKS))
        with b.if_else(one) as (once, chunks):
            with once:  # one chunk of rows: each column pair packed right before its use
                with for_range(b, n0, n1, "jb") as jb:
                    pack(b, pb, ldb, pbp, kq, b.mul(jb, I64(2)), b.add(b.mul(jb, I64(2)),
                                                                    I64(2)))
                    blocks(jb, pbp, m0, m1)
            with chunks:  # every column's panels packed once, walked once per chunk
                pack(b, pb, ldb, pbp, kq, b.mul(n0, I64(2)), b.mul(n1, I64(2)))
                with for_range(b, m0, m1, "mc", step=M_CHUNK_BLOCKS) as mc:
                    nxt = b.add(mc, I64(M_CHUNK_BLOCKS))
                    mend = b.select(b.icmp_signed("<", nxt, m1), nxt, m1)
                    with for_range(b, n0, n1, "jb") as jb:
                        blocks(jb, b.gep(pbp, [b.mul(b.mul(b.sub(jb, n0), I64(2)), panel)]),
                               mc, mend)


def _emit_kernel(mod: ir.Module, name: str, transposed: bool, bf16_out: bool) -> None:
    """void NAME(params, j0, j1, m0, m1, n0, n1, bp): for batches [j0, j1), C blocks
    [m0, m1) x [n0, n1) (in 32s) of c = a @ b over kb 32-blocks of k, stored as f32 or
    rounded once to bf16; bp is this call's scratch for the packed panels of its columns
    (kb * 1 KB per 16 columns)."""
    cfgvar = amx.tile_config(mod, "amx_bf16_cfg")
    ldcfg = _decl(mod, "llvm.x86.ldtilecfg", [I8P])
    release = _decl(mod, "llvm.x86.tilerelease", [])
    zero = _decl(mod, "llvm.x86.tilezero", [I8])
    load = _decl(mod, "llvm.x86.tileloadd64", [I8, I8P, I64])
    store = _decl(mod, "llvm.x86.tilestored64", [I8, I8P, I64])
    dp = _decl(mod, "llvm.x86.tdpbf16ps", [I8, I8, I8])
    fn = ir.Function(mod, ir.FunctionType(VOID, [I64] * 8), name=name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    with b.goto_entry_block():
        scratch = b.alloca(ir.ArrayType(ir.FloatType(), BM * BN), name="cblock")
        scratch.align = 64
    b.call(ldcfg, [b.bitcast(cfgvar, I8P)])

    def t(k: int) -> ir.Constant:
        return ir.Constant(I8, k)

    def block(blk: Block) -> None:
        arow1 = b.gep(blk.arow, [b.mul(blk.lda, I64(16))])
        for k in range(4):
            b.call(zero, [t(k)])
        with for_range(b, I64(0), blk.kb, "kk") as kk:
            ko = b.mul(kk, I64(BK * 2))
            bo = b.mul(kk, I64(16 * 64))
            b.call(load, [t(4), b.gep(blk.arow, [ko]), blk.lda])
            b.call(load, [t(5), b.gep(arow1, [ko]), blk.lda])
            b.call(load, [t(6), b.gep(blk.b0, [bo]), I64(64)])
            b.call(load, [t(7), b.gep(blk.b1, [bo]), I64(64)])
            b.call(dp, [t(0), t(4), t(6)])
            b.call(dp, [t(1), t(4), t(7)])
            b.call(dp, [t(2), t(5), t(6)])
            b.call(dp, [t(3), t(5), t(7)])
        crow, ldc = blk.crow, blk.ldc
        if bf16_out:
            _store_rounded(b, store, scratch, crow, ldc)
        else:
            crow1 = b.gep(crow, [b.mul(ldc, I64(16))])
            b.call(store, [t(0), crow, ldc])
            b.call(store, [t(1), b.gep(crow, [I64(64)]), ldc])
            b.call(store, [t(2), crow1, ldc])
            b.call(store, [t(3), b.gep(crow1, [I64(64)]), ldc])

    emit_blocks(b, fn.args, transposed, bf16_out, block)
    b.call(release, [])
    b.ret_void()


#: Bytes of packed B a chain step may take on the stack (chainable).
CHAIN_PACK_BYTES = 1 << 19


def _emit_blas_wrapper(mod: ir.Module, kernel: ir.Function, name: str, bf16_out: bool) -> None:
    """void NAME(ta, tb, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc): one product through
    `kernel` with BLAS's column-major argument convention (out^T = b^T a^T; every argument
    by reference, the integers 32-bit, leading dimensions in elements), as batch_chain.py's
    runner calls sgemm. alpha is 1 and beta 0 there, and are not read; ta is the kernel's
    own B layout, tb 'N'. m, n, k are whole 32-blocks; the packed B goes on the stack
    (`chainable` bounds it)."""
    i32p = ir.IntType(32).as_pointer()
    fn = ir.Function(mod, ir.FunctionType(VOID, [I8P] * 13), name=name)
    _ta, _tb, pn, pm, pk, _alpha, pb, pldb, pa, plda, _beta, pc, pldc = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def int_arg(p: ir.Value) -> ir.Value:
        return b.sext(b.load(b.bitcast(p, i32p)), I64)

    n, m, k, ldb, lda, ldc = (int_arg(x) for x in (pn, pm, pk, pldb, plda, pldc))
    params = b.alloca(ir.ArrayType(I64, PARAMS), name="params")
    words = [b.ptrtoint(pa, I64), b.mul(lda, I64(2)), I64(0), b.ptrtoint(pb, I64),
             b.mul(ldb, I64(2)), I64(0), b.ptrtoint(pc, I64),
             b.mul(ldc, I64(2 if bf16_out else 4)), I64(0), b.udiv(k, I64(BK))]
    for i, w in enumerate(words):
        b.store(w, b.gep(params, [I64(0), I64(i)]))
    bp = b.alloca(_I16, b.mul(n, k), name="packed")
    bp.align = 64
    b.call(kernel, [b.ptrtoint(params, I64), I64(0), I64(1), I64(0), b.udiv(m, I64(BM)),
                    I64(0), b.udiv(n, I64(BN)), b.ptrtoint(bp, I64)])
    b.ret_void()


def chainable(m: int, n: int, k: int) -> bool:
    """Whether one m x k x n product can run as a batch-chain step (`blas_address`): whole
    32-blocks, and its packed B small enough for the stack."""
    return m % BM == 0 and n % BN == 0 and k % BK == 0 and n * k * 2 <= CHAIN_PACK_BYTES


#: (B transposed, bf16 result) -> kernel name.
_NAMES = {(tr, h): f"amx_bf16_{'nt' if tr else 'nn'}_{'bf16' if h else 'f32'}"
          for tr in (False, True) for h in (False, True)}


@once
def _compiled(key: str, transposed: bool, bf16_out: bool) -> tuple[Engine, int]:
    """One of the four kernels (B as [k, n] or transposed; f32 or bf16 C), per target and
    process, built when first asked for (a program's first run: the code depends on no
    shape, so no compile pays it) and cached on disk, keyed by its IR text, as every
    kernel (cache.py)."""
    name = _NAMES[(transposed, bf16_out)]
    mod = new_module(f"xlapy_{name}")
    exports = [name, f"{name}_blas"]
    if tiles():
        _emit_kernel(mod, name, transposed, bf16_out)
        _emit_blas_wrapper(mod, mod.globals[name], f"{name}_blas", bf16_out)
        eng = cache.o0_engine(llvm_util.module_text(mod), "amx-bf16-O0", exports=exports)
    else:  # vdpbf16ps: its accumulators need -O3's register allocation
        from xlapy.backends.cpu import gemm_bf16_dp

        gemm_bf16_dp.emit_kernel(mod, name, transposed, bf16_out)
        _emit_blas_wrapper(mod, mod.globals[name], f"{name}_blas", bf16_out)
        eng = cache.engine(mod, "bf16-dp", vectorize=False, light=True, exports=exports)
    return eng, eng.address(name)


def blas_address(transposed: bool, bf16_out: bool) -> int:
    """The address of a kernel's BLAS-convention entry (`_emit_blas_wrapper`), for native
    callers (batch_chain.py, on a program's first run)."""
    eng, _ = _compiled(target.current().key, transposed, bf16_out)
    return int(eng.address(f"{_NAMES[(transposed, bf16_out)]}_blas"))


def _kernel(transposed: bool, bf16_out: bool) -> int:
    """The kernel's address (built on first use: `_compiled`)."""
    return _compiled(target.current().key, transposed, bf16_out)[1]


def reads_transposed(k: int, n: int, k_last: bool) -> bool:
    """Whether `gemm` packs B from its transposed storage: a B[k, n] whose k is the unit-
    stride dimension (`k_last`), already whole 32-blocks (else it is padded into [k, n])."""
    return k_last and n > 1 and k % BK == 0 and n % BN == 0


def tile_ready(a: np.ndarray, rows: int, cols: int) -> bool:
    """Whether the kernels can load A's tiles where it lies: whole blocks (rows x cols),
    unit stride along k, every row on a 64-byte boundary. A tile load from rows that are
    not runs at a third of the speed or less (512 x 1024 x 1024 with A 16 bytes off a line:
    0.675 -> 1.003 ms, XLA 0.76), so such an A is staged (`_stage`)."""
    return (a.shape[1:] == (rows, cols) and a.strides[2] == 2
            and (a.ctypes.data | a.strides[1] | (a.strides[0] if a.shape[0] > 1 else 0))
            % recycle.ALIGN == 0)


def _stage(a: np.ndarray, rows: int, cols: int,
           raw: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """a[batch, r, c] (bf16) copied into 64-byte aligned rows of a batch x rows x cols
    array, zero beyond its extent (also B's padding), in raw (a byte buffer kept from the
    last call: a fresh one pays page faults) when it is big enough; and the buffer."""
    nb, m, k = a.shape
    size = nb * rows * cols * 2
    if raw is None or raw.nbytes < size + recycle.ALIGN:
        raw = recycle.aligned_bytes(size)[0]
    off = (-raw.ctypes.data) % recycle.ALIGN
    out = raw[off:off + size].view(a.dtype).reshape(nb, rows, cols)
    out[:, :m, :k] = a
    if cols != k:
        out[:, :m, k:] = 0
    if rows != m:
        out[:, m:] = 0
    return out, raw


def _cuts(total: int, parts: int) -> list[int]:
    return [total * p // parts for p in range(parts + 1)]


def gemm(threads: int = 1) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    """A function (a[batch, m, k], b[batch, k, n] bf16, c[batch, m, n] f32 or bf16): c = a @ b
    summed in f32 (module docstring), a bf16 c rounded once, for targets where
    `available()`. a and b may be strided views: a needs unit stride along k (else it is
    copied), b along n or along k; c is C-contiguous along n. The kernel a call needs is
    built on that call (once per process: `_compiled`), not in the program's compile."""
    addrs: dict[tuple[bool, bool], int] = {}
    tgt = target.current()
    #: The packed-B scratch of the last call, for the next (fresh, mlp_bf16's 4096 x 4096
    #: layer paid 2 x 16 MB of page faults a call); a call while another thread's holds it
    #: (an executable runs concurrent calls on private state) packs into its own.
    scratch: dict[tuple[int, int], np.ndarray] = {}
    #: The last call's staged A (`_stage`), under the same lock.
    staged: dict[str, np.ndarray] = {}
    busy = threading.Lock()

    def run(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        if empty_product(a, b, c):
            return
        nb, m, k = a.shape
        n = b.shape[2]
        mp, kp, np_ = -(-m // BM) * BM, -(-k // BK) * BK, -(-n // BN) * BN
        owned = busy.acquire(blocking=False)  # else another thread's call has the scratch
        try:
            if a.strides[2] != 2 and (mp, kp) == (m, k):
                a = c_order(a)  # a transposed copy through the routine (numpy's is slow)
            if not tile_ready(a, mp, kp):
                a, raw = _stage(a, mp, kp, staged.get("a") if owned else None)
                if owned:
                    staged["a"] = raw
            _run(a, b, c, m, k, (mp, kp, np_), owned)
        finally:
            if owned:
                busy.release()

    def _run(a: np.ndarray, b: np.ndarray, c: np.ndarray, m: int, k: int,
             padded: tuple[int, int, int], owned: bool) -> None:
        """The product of a (staged: whole blocks, aligned rows) and b into c (m x n) on
        the kernels; `owned`: this call holds the scratch."""
        mp, kp, np_ = padded
        nb, n = a.shape[0], b.shape[2]
        # (the gather's 32-bit offsets: 16 rows of Bt within 2 GB)
        transposed = reads_transposed(k, n, b.strides[1] == 2) and \
            abs(b.strides[2]) < (1 << 31) // 16
        if not transposed and ((kp, np_) != (k, n) or b.strides[2] != 2):
            b = _stage(b, kp, np_, None)[0]
        half = c.dtype.itemsize == 2
        direct = (mp, np_) == (m, n) and c.strides[2] == c.itemsize
        out = c if direct else np.empty((nb, mp, np_), c.dtype)
        mblocks, nblocks, kb = mp // BM, np_ // BN, kp // BK
        ldb = b.strides[2] if transposed else b.strides[1]
        params = np.array([a.ctypes.data, a.strides[1], a.strides[0], b.ctypes.data, ldb,
                           b.strides[0], out.ctypes.data, out.strides[1], out.strides[0], kb],
                          np.int64)
        addr = addrs.get((transposed, half))
        if addr is None:
            with target.use(tgt):
                addr = addrs[(transposed, half)] = _kernel(transposed, half)
        big = nb * m * n * k >= SPLIT_MACS
        parts = min(threads, max(nb, nblocks, mblocks)) if big else 1
        if parts > 1 and nb >= parts:
            jobs = [(j0, j1, 0, mblocks, 0, nblocks) for j0, j1 in
                    zip(_cuts(nb, parts), _cuts(nb, parts)[1:])]
        elif parts > 1 and nblocks >= parts:
            cuts = _cuts(nblocks, parts)
            jobs = [(0, nb, 0, mblocks, lo, hi) for lo, hi in zip(cuts, cuts[1:])]
        else:
            parts = min(parts, mblocks)
            cuts = _cuts(mblocks, parts)
            jobs = [(0, nb, lo, hi, 0, nblocks) for lo, hi in zip(cuts, cuts[1:])]
        width = max(j[5] - j[4] for j in jobs)
        key = (len(jobs), width * BN * kp)
        bp = scratch.get(key) if owned else None
        if bp is None:
            bp = np.empty(key, np.uint16)
            if owned:
                scratch.clear()
                scratch[key] = bp
        args = [(int(params.ctypes.data), *job, int(bp[p].ctypes.data))
                for p, job in enumerate(jobs)]
        if len(jobs) == 1:
            _SIG(addr)(*args[0])
        else:
            parallel.pool(threads).share([(addr, x) for x in args], len(jobs),
                                         keep=(a, b, bp, out, params))
        if not direct:
            c[...] = out[:, :m, :n]

    return run


__all__ = ["BK", "BM", "BN", "CHAIN_PACK_BYTES", "MIN_MACS", "M_CHUNK_BLOCKS", "PARAMS",
           "SPLIT_MACS", "Block", "available", "blas_address", "chainable", "emit_blocks",
           "gemm", "takes", "tiles"]
