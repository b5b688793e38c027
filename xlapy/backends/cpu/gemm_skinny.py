"""Skinny f32/f64 GEMMs out[m, n] = x[m, k] @ W[k, n], a few rows against a big row-major W
(2..80 rows on AVX-512, 2..40 on AVX2), as a JIT-compiled loop that reads W once, in place.

A few rows against a weight matrix (a small batch of inference, issue 14's "skinny shapes")
is bound by reading W: the 8 x 4096 @ 4096 x 4096 f32 product moves 64 MB for 0.27 GFLOP.
OpenBLAS packs W first (a copy of all of it per call): 11.1 ms on one core here, 5.1 on two.
gemm_small's register blocks read W in place, but its rows are 16 KB apart and each block
touches 3 lines of every row, so no hardware prefetcher follows them: 8.2 ms on one core.
This loop is gemm_small's register block (all m rows x V vectors of columns in registers, k
in order, each output one multiply-add chain in k order) plus a software prefetch of the
block's lines PREFETCH_ROWS rows ahead: 5.0 ms on one core, 2.3-2.8 on two (without the
prefetch 8.1, as gemm_small). It splits the columns over the threads (gemm_small splits
rows: here there is one row block). A W over 3 MB is swept 64 KB of rows at a time across a
chunk's columns, each block's sums continued through the output (the same chain, the same
bits), so each row is read in pieces of the chunk's width, not 3 lines at a time: 1.3-1.9x
faster on 2 threads.

More rows than one register block holds (`one_pass`) go in row groups (`groups`: at most
MAX_ROWS rows each on AVX-512, GROUP_ROWS_AVX2 on AVX2): every group in turn runs its
register blocks over a k block while that block of W is in L2, so W still comes from memory
once. The first group of a k block waits on memory while the others compute from L2, so the
second group prefetches the next k block's lines into L2 as it goes (`lead`): Zen 4, 2
threads, same process, a 64 MB W: 16x4096x4096 3.89 -> 3.14 ms, 32x 6.34 -> 6.00, 48x 9.14
-> 8.57 (AVX-512); x86-64-v3 code 32x4096x4096 8.95 -> 8.62 (groups of 6), f64 24x2048x2048
4.40 -> 4.11; a W in L3 ran alike (32x1024x4096 1.63 -> 1.67, 1.80 -> 1.81). Prefetching in
every group instead (the others' own lines) lost 35%: their extra loads of W's lines.
Two passes over all of W (one per half of the rows) had been the way up to 16 rows;
batches of 17-80 rows went to BLAS, whose packing of W for a few row tiles lost to XLA
1.1-1.3x (MAX_GROUPED). Each element stays one multiply-add chain in k order.

The columns are cut into chunks fixed by the shape (`cuts`), each computed whole by one
thread, so the bits never depend on the thread count. MXCSR FTZ/DAZ are cleared around the
loop (IEEE, as BLAS and the interpreter). One module per row grouping, element type and
target, built on first use and cached on disk like any kernel.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import cache, parallel, target
from xlapy.backends.cpu.fp_env import restore_mxcsr, set_ftz_daz
from xlapy.backends.cpu.llvm_util import (
    F32,
    F64,
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
)
from xlapy.backends.cpu.once import ahead, once
from xlapy.backends.cpu.transpose_lib import c_order

#: Most lhs rows: all of them stay in registers with the block's columns (8 x 3 zmm).
MAX_ROWS = 8
#: Rows of W ahead that each k step prefetches (0 to 64 ran alike; no prefetch: 1.6x slower).
PREFETCH_ROWS = 16
#: In k blocks, bytes ahead along the row that each k step prefetches instead: the next
#: block's lines of the same row (16 rows ahead, the block's last 16 rows prefetched the
#: next k block's, long evicted when it came, and its first 16 were never prefetched: rows
#: 16 KB apart, each on its own page, defeat the hardware prefetchers). On Zen 4, 2
#: threads, against XLA: 8x4096x4096 3.9 -> 2.8-2.9 ms (XLA 3.9-4.1), 3x8192x1024 2.7 ->
#: 1.0 (1.5), 16x4096x4096 8.0 -> 5.6-6.4 (5.0-5.5); x86-64-v3 code 8x4096x4096 5.6 -> 3.7
#: (XLA with AVX-512 4.0-4.2). 128 bytes ran alike on AVX2, slower on AVX-512; 512 slower.
PREFETCH_AHEAD = 256
#: A W of more bytes than this is read in k blocks: `k_block` rows at a time across its
#: chunk's width (BLOCK_BYTES of W a block), each column block's sums continued through
#: `out` (the same chain), in column chunks of PIECE_BYTES of each row or more, instead of
#: one register block's 3 lines of every row per k step. Against XLA,
#: round robin (dot_sweep.py, 2 runs), one block of k -> 64 KB blocks: 2x1024x4096 1.27-1.34
#: -> 0.78-0.84, 2x4096x4096 0.93-1.00 -> 0.68-0.73, 8x4096x4096 0.65-0.68 -> 0.51-0.53,
#: 4x4096x1024 1.12-1.32 -> 0.92-0.96, 3x8192x1024 1.38-1.46 -> 1.03-1.08. Fixed 128-row
#: blocks (256 KB on 512 columns) ran 8x4096x4096 at 0.90-1.06, 32-row ones (16 KB on 128)
#: 4x4096x1024 at 1.10-1.25. At 2.4 MB it lost 5%; rows under a page (BLOCKED_ROW_BYTES)
#: lost too (7x777x999 1.11x, 6x2000x900 1.05x): the old walk's next row is then on the
#: same or the next page. Neither is blocked.
BLOCKED_BYTES = 3 << 20
#: The same on AVX2, where every W this module takes (over gemm_small.MAX_RHS_BYTES) with
#: rows of a page or more is read in k blocks: the unblocked walk's column of one line per
#: k step, rows 4 KB apart and prefetched PREFETCH_ROWS ahead, thrashed one L1 set (Zen 4,
#: x86-64-v3 code, 2 threads, same process, against XLA's AVX-512: 8x256x1024 1.32 -> 0.93,
#: 12x256x1024 0.74 -> 0.59, 20x512x1024 1.55 -> 1.13, 8x128x2048 1.11 -> 0.86, 4x256x1024
#: 0.95 -> 0.85). On AVX-512 (3 lines a step) the blocked walk lost there (8x256x1024 48 ->
#: 68 us).
BLOCKED_BYTES_AVX2 = 0
BLOCKED_ROW_BYTES = 4096
BLOCK_BYTES = 64 << 10
#: On AVX2 a k block of W read by two row groups or more is copied by the first into panels
#: of one cache line of columns ([panel][k][line], PACK_BYTES at most, on the stack), which
#: the others read: a block's k walk then reads consecutive lines, where W's rows (4 KB
#: apart) shared one L1 set and each group refetched them from L2. x86-64-v3 code, same
#: process against XLA: 32x4096x4096 1.35-1.41 -> 1.04-1.20, 24x4096x4096 1.28-1.30 -> 1.05-
#: 1.23, 32x1024x4096 1.35 -> 0.99, 20x512x1024 1.35 -> 1.19; f64 24x2048x2048 1.36 -> 1.17.
#: A separate packing pass first lost where one group reads W (8x4096x4096 0.87 -> 1.36); on
#: AVX-512 (3 lines a k step) the panels ran alike or slower (80x1024x4096 1.12 -> 1.21).
PACK_BYTES = BLOCK_BYTES + 256 * 64  # (a k block's rows of a part-filled last line)
PACK = True
#: Bytes of each row of W a blocked chunk reads at least (so at most n * size / PIECE_BYTES
#: chunks). Against XLA (dot_sweep, 2 runs; n / 8 columns before): 4x4096x1024 1.06-1.09
#: -> 0.79-0.84 (2 chunks), 3x8192x1024 1.15-1.18 -> 0.79-0.83, 10x2048x2048 1.06-1.13 ->
#: ~1.0 (4); 8x4096x4096 keeps its 8.
PIECE_BYTES = 2048
#: Bytes of W per column chunk at least (a chunk costs ~1 us to hand over). At 1 MB a W of
#: 0.5-1 MB was one chunk, on one thread: Zen 4, 2 threads, against XLA, 1 MB -> 512 KB:
#: 12x256x1024 1.19-1.33 -> 0.71-1.11, 8x256x1024 0.55-0.71 -> 0.45-0.54, 8x128x2048 0.66-0.75
#: -> 0.54-0.55; x86-64-v3 code 12x256x1024 1.15-1.82 -> 0.74-1.05, 8x256x1024 2.02 -> 1.26,
#: 16x256x1024 2.99 -> 1.66 (256 KB ran alike, 128 KB lost: 20x512x1024 0.88 -> 1.22).
CHUNK_BYTES = 1 << 19

_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                       *[ctypes.c_int64] * 5)


def _block(bits: int, rows: int) -> int:
    """Vectors of columns per register block: rows x V accumulators, V loads and a
    broadcast within the registers (32 on AVX-512, 16 otherwise). AVX2 allows 14
    accumulators: 7 rows take 2 vectors (one value spills) instead of 1, whose 8 loads per
    7 FMAs bound the loop (7 x 4096 @ 4096 x 4096 on Zen 4: 5.6 -> 3.8-4.6 ms). There 3-4
    rows take 3 vectors: 3 rows at 4 lost (groups of 3, 9 x 2048 x 2048, Zen 4, 2 threads,
    same process: 0.83-0.84 -> 0.74-0.79 ms)."""
    accs = 24 if bits == 512 else 14 if bits == 256 else 8
    most = 3 if bits == 256 and rows >= 3 else 4
    return max(1, min(most, accs // rows))


def groups(m: int, bits: int) -> tuple[tuple[int, int], ...]:
    """The row groups of an m-row product, ((rows, count), ...): one group while `one_pass`
    holds, else groups of at most MAX_ROWS rows (sizes as even as can be, at most two of
    them), each a pass over every k block of W while the block is in L2."""
    if one_pass(m, bits):
        return ((m, 1),)
    cap = MAX_ROWS if bits == 512 else GROUP_ROWS_AVX2
    g = -(-m // cap)
    q = -(-m // g)
    out = [(q, m // q)]
    if m % q:
        out.append((m % q, 1))
    return tuple(out)


def _emit(name: str, f64: bool, parts: tuple[tuple[int, int], ...], packed: bool = False
          ) -> ir.Module:
    """`name(x, w, out, n, k, c_lo, c_hi, kb)`: columns [c_lo, c_hi) of out = x @ w (x [m,
    k], w [k, n], out [m, n], all dense; m the rows of `parts`, `groups`), kb rows of w at a
    time (k: all at once); in each k block every row group in turn (all of its rows in
    registers), each in blocks of V vectors, then the rest one masked vector at a time (two
    block shapes a group size: a module of one group compiles in ~25 ms, not the ~44 of
    gemm_small's single vectors plus one block per narrower width)."""
    t = F64 if f64 else F32
    size = 8 if f64 else 4
    bits = target.current().vector_bits
    lanes = bits // (8 * size)
    mod = new_module(name)
    tp = t.as_pointer()
    fn = ir.Function(mod, ir.FunctionType(VOID, [tp, tp, tp, I64, I64, I64, I64, I64]),
                     name=name)
    x_all, w, out_all, n, kk, lo, hi, kb = fn.args
    for p in (x_all, w, out_all):
        p.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    saved = set_ftz_daz(b)

    vt = ir.VectorType(t, lanes)

    def vec_ptr(base: ir.Value, at: ir.Value) -> ir.Value:
        return b.bitcast(b.gep(base, [at]), vt.as_pointer())

    ety = "f64" if f64 else "f32"
    iota = ir.Constant(ir.VectorType(I64, lanes), list(range(lanes)))

    def lanes_below(valid: ir.Value) -> ir.Value:
        """The mask of the lanes < valid (all of them when valid >= lanes)."""
        return b.icmp_unsigned("<", iota, broadcast(b, valid, lanes))

    def load(at: ir.Value, mask: ir.Value | None, base: ir.Value = w) -> ir.Value:
        ptr = vec_ptr(base, at)
        if mask is None:
            ld = b.load(ptr)
            ld.align = size
            return ld
        return intrinsic(b, f"llvm.masked.load.v{lanes}{ety}.p0", vt,
                         [ptr, ir.Constant(I32, size), mask, ir.Constant(vt, None)])

    def store(x: ir.Value, out: ir.Value, at: ir.Value, mask: ir.Value | None) -> None:
        ptr = vec_ptr(out, at)
        if mask is None:
            b.store(x, ptr).align = size
        else:
            intrinsic(b, f"llvm.masked.store.v{lanes}{ety}.p0", VOID,
                      [x, ptr, ir.Constant(I32, size), mask])

    def block(a: ir.Value, out: ir.Value, rows: int, c0: ir.Value, vecs: int, k0: ir.Value,
              k1: ir.Value, first: ir.Value, valid: ir.Value | None = None,
              panels: ir.Value | None = None, fill: bool = False,
              lead: ir.Value | None = None) -> None:
        """out[:rows, c0:c0+vecs*lanes] (+)= a[:rows, k0:k1] @ w[k0:k1, c0:c0+vecs*lanes],
        k in order, from zero when `first` (`valid`: one vector, its first `valid` columns
        only, masked): each element's one multiply-add chain, continued through `out`. With
        `panels`, W's values of this k block are read there, or (`fill`) read from W and
        written there, whole vectors only: panels of one cache line of columns, [panel][k -
        k0][line], so a later group's k walk reads consecutive lines (W's rows 4 KB apart
        shared one L1 set). `lead` (true at run time): each k step also prefetches the
        block's lines of the next k block into L2, for its first group."""
        mask = None if valid is None else lanes_below(valid)
        if panels is not None:  # vector j: column c0 + j lanes - lo of the panels
            rel = [b.add(b.sub(c0, lo), i64(j * lanes)) for j in range(vecs)]
            kbl = b.sub(k1, k0)
            vbase = [b.add(b.mul(b.udiv(r, i64(line)), b.mul(kbl, i64(line))),
                           b.urem(r, i64(line))) for r in rel]
        entry = b.block
        load_bb = fn.append_basic_block("acc.load")
        body = fn.append_basic_block("k")
        done = fn.append_basic_block("k.end")
        b.cbranch(first, body, load_bb)  # k1 > k0 (the k blocks)
        b.position_at_end(load_bb)
        loaded = []
        for r in range(rows):
            orow = b.add(b.mul(i64(r), n), c0)
            loaded.append([load(b.add(orow, i64(j * lanes)), mask, out)
                           for j in range(vecs)])
        b.branch(body)
        b.position_at_end(body)
        k = b.phi(I64, name="k")
        k.add_incoming(k0, entry)
        k.add_incoming(k0, load_bb)
        phis = [[b.phi(vt) for _ in range(vecs)] for _ in range(rows)]
        for row, got in zip(phis, loaded):
            for p, x in zip(row, got):
                p.add_incoming(ir.Constant(vt, None), entry)  # zeros
                p.add_incoming(x, load_bb)
        if lead is not None:  # the next k block's lines, for its first group
            with b.if_then(lead):  # (a branch LLVM moves out of the loop)
                nxt = b.add(b.mul(b.add(k, b.sub(k1, k0)), n), c0)
                for j in range(0, vecs * lanes, line):
                    prefetch(b, b.gep(w, [b.add(nxt, i64(j))]), 2)
        if panels is not None and not fill:  # consecutive lines of each panel
            at = b.mul(b.sub(k, k0), i64(line))
            ws = [load(b.add(vb, at), None, panels) for vb in vbase]
        else:
            wrow = b.add(b.mul(k, n), c0)
            ahead = b.select(in_blocks, b.add(wrow, i64(PREFETCH_AHEAD // size)),
                             b.add(wrow, b.mul(n, i64(PREFETCH_ROWS))))
            for j in range(0, vecs * lanes, line):  # each cache line of the block, ahead
                prefetch(b, b.gep(w, [b.add(ahead, i64(j))]))
            ws = [load(b.add(wrow, i64(j * lanes)), mask) for j in range(vecs)]
        if fill:
            at = b.mul(b.sub(k, k0), i64(line))
            whole = b.icmp_signed(">=", valid, i64(lanes)) if valid is not None else None
            with b.if_then(whole) if whole is not None else contextlib.nullcontext():
                for vb, x in zip(vbase, ws):
                    store(x, panels, b.add(vb, at), None)
        news = []
        for r in range(rows):
            x = broadcast(b, b.load(b.gep(a, [b.add(b.mul(i64(r), kk), k)])), lanes)
            news.append([intrinsic(b, f"llvm.fmuladd.v{lanes}{ety}", vt, [x, wv, acc])
                         for wv, acc in zip(ws, phis[r])])
        nk = b.add(k, i64(1))
        k.add_incoming(nk, b.block)
        for row, new in zip(phis, news):
            for p, x in zip(row, new):
                p.add_incoming(x, b.block)
        b.cbranch(b.icmp_signed("<", nk, k1), body, done)
        b.position_at_end(done)
        for r in range(rows):
            orow = b.add(b.mul(i64(r), n), c0)
            for j, x in enumerate(news[r]):
                store(x, out, b.add(orow, i64(j * lanes)), mask)

    def group(a: ir.Value, out: ir.Value, rows: int, k0: ir.Value, k1: ir.Value,
              first: ir.Value, fill: bool = False, lead: ir.Value | None = None) -> None:
        """One row group's columns [lo, hi) over k block [k0, k1) (`fill`: the k block's
        first group, W read in place and written to `pack`; the others read `pack`)."""
        v = _block(bits, rows)
        step = v * lanes
        full = b.sdiv(b.sub(hi, lo), i64(step))
        c1 = b.add(lo, b.mul(full, i64(step)))
        rest = b.sdiv(b.add(b.sub(hi, c1), i64(lanes - 1)), i64(lanes))
        with for_range(b, i64(0), full, "cb") as cb:
            block(a, out, rows, b.add(lo, b.mul(cb, i64(step))), v, k0, k1, first,
                  panels=pack, fill=fill, lead=lead)
        with for_range(b, i64(0), rest, "cv") as cv:  # the rest: one masked vector at a time
            c = b.add(c1, b.mul(cv, i64(lanes)))
            block(a, out, rows, c, 1, k0, k1, first, b.sub(hi, c),
                  panels=pack if fill else None, fill=fill, lead=lead)

    line = max(1, 64 // size)
    pack = None
    if packed:
        with b.goto_entry_block():
            pack = b.alloca(t, PACK_BYTES // size)
        pack.align = 64
    in_blocks = b.icmp_signed("<", kb, kk)
    with for_range(b, i64(0), kk, "kb", step=kb) as k0:
        k1 = b.select(b.icmp_signed("<", b.add(k0, kb), kk), b.add(k0, kb), kk)
        first = b.icmp_signed("==", k0, i64(0))
        more = b.icmp_signed("<", k1, kk)  # a next k block, for the lead group to prefetch
        row0 = seen = 0
        for at, (rows, count) in enumerate(parts):
            if packed and at == 0:  # the first group fills the panels
                group(x_all, out_all, rows, k0, k1, first, fill=True)
                row0, count, seen = rows, count - 1, 1
            if count == 1:
                group(b.gep(x_all, [b.mul(i64(row0), kk)]),
                      b.gep(out_all, [b.mul(i64(row0), n)]), rows, k0, k1, first,
                      lead=more if seen == 1 else None)
            elif count > 1:
                with for_range(b, i64(0), i64(count), "g") as g:
                    r0 = b.add(i64(row0), b.mul(g, i64(rows)))
                    lead = None if seen > 1 else \
                        b.and_(more, b.icmp_signed("==", g, i64(1 - seen)))
                    group(b.gep(x_all, [b.mul(r0, kk)]), b.gep(out_all, [b.mul(r0, n)]),
                          rows, k0, k1, first, lead=lead)
            row0 += rows * count
            seen += count
    restore_mxcsr(b, saved)
    b.ret_void()
    return mod


@dataclass(frozen=True)
class Compiled:
    """One row count's engine and its function (a ctypes function and its address)."""

    engine: Engine
    fn: Callable[..., None]
    address: int


@once
def _compile(parts: tuple[tuple[int, int], ...], f64: bool, tgt: target.CpuTarget,
             packed: bool = False) -> Compiled:
    with target.use(tgt), denormal.use(denormal.IEEE):
        tag = "_".join(f"{r}x{c}" for r, c in parts) + ("_packed" if packed else "")
        name = f"xlapy_{'d' if f64 else 's'}gemm_skinny{tag}"
        eng = cache.library_engine(("gemm_skinny", parts, f64, packed),
                                   lambda: _emit(name, f64, parts, packed), "light",
                                   light=True, exports=[name])
    addr = eng.address(name)
    return Compiled(eng, _FN(addr), addr)


#: Rows of a group on AVX2 past one pass (16 registers: a register block of 4 rows keeps 3
#: vectors of columns, 12 accumulators, 7 loads a k step; 8 rows at one vector per block
#: lost). Against XLA (dot_sweep, x86-64-v3 code, OpenBLAS -> here, one pass): 2x1024x4096
#: 1.96 -> 0.84, 4x4096x1024 2.10 -> 0.82, 5x4096x4096 1.27 -> 0.65, 8x1024x4096 1.54 ->
#: 1.05, 8x2048x2048 1.34 -> 0.82; groups: 10x2048x2048 1.45 -> 1.00, 12x1024x4096 1.26 ->
#: 1.10. Groups of 6 rows (2 vectors, 8 loads a k step and a spilled row pointer) -> 4, Zen
#: 4, 2 threads, same process: 16x1024x4096 1.14 -> 1.05-1.06 ms, 24x2048x2048 1.46 -> 1.40,
#: 32x4096x1024 1.98 -> 1.97, 40x1024x4096 2.17 -> 2.15; f64 24x2048x2048 4.11 -> 3.89; 3
#: rows (4 vectors) lost 30%.
GROUP_ROWS_AVX2 = 4
#: Most rows run here on AVX-512 (in groups of MAX_ROWS, `groups`). Zen 4, 2 threads,
#: round robin against XLA (XLA's AVX-512 kernels), BLAS (OpenBLAS or gemm_f32) -> here:
#: 17x4096x1024 1.20 -> 0.62, 24x4096x4096 1.32 -> 0.95, 31x4096x1024 1.15 -> 0.78,
#: 32x1024x4096 1.26 -> 0.77, 32x4096x4096 1.23 -> 0.85, 40x4096x1024 1.22 -> 0.92,
#: 48x4096x4096 1.23 -> 0.97, 63x2048x2048 1.19 -> 0.94, 64x1024x4096 1.15 -> 0.92,
#: 72x2048x2048 1.11 -> 0.92, 80x1024x4096 1.18 -> 0.98, 80x4096x1024 1.13 -> 1.07; past
#: it BLAS wins (96x4096x1024 1.02 against 1.07, 128x4096x4096 1.03 against 1.18: with
#: more groups W's k block is read from L2 more times than gemm_f32's packed panels).
MAX_GROUPED = 80
#: The same on AVX2 (groups of GROUP_ROWS_AVX2), x86-64-v3 code against XLA's AVX-512:
#: 16x1024x4096 1.27-1.38 -> 1.03-1.13, 17x4096x1024 1.26-1.29 -> 1.03-1.11, 24x4096x4096
#: 1.30-1.31 -> 1.23-1.31. With the k block's panels (`_emit`'s `fill`) 25-40 rows beat BLAS
#: too (Zen 4, 2 threads, same process, here vs BLAS: 32x4096x4096 1.08-1.20 vs 1.23-1.33,
#: 32x1024x4096 1.03-1.13 vs 1.12-1.27, 25x4096x4096 1.32 vs 1.54, 40x1024x4096 1.08 vs
#: 1.10-1.16); 48 rows ran alike (1.02-1.14 vs 0.98-1.15). f64 keeps 24.
MAX_GROUPED_AVX2 = 40
MAX_GROUPED_AVX2_F64 = 24
#: f64 products at most this many rows (AVX-512; AVX2: MAX_GROUPED_AVX2_F64): against XLA,
#: dgemm -> here, 32x1024x4096 1.07-1.10 -> 0.97-1.06; 48-80 rows ran alike or slower
#: (48x2048x1024 0.97-1.05 -> 0.97-1.34, 80x1024x2048 0.99-1.05 -> 1.09-1.21).
MAX_GROUPED_F64 = 32


#: A deep W (k >= DEEP n) narrower than NARROW_COLUMNS takes at most NARROW_ROWS rows: past
#: them the product is compute-bound and this loop's register blocks over a narrow chunk ran
#: at half BLAS's rate, split over rows, columns or the contraction (this Xeon, 2 threads,
#: same process: 48x8192x256 2.05 ms against 1.02 (XLA 1.10), 32x16384x512 5.9 against 3.3 (3.3),
#: 64x8192x64 0.78 against 0.44 (0.64); 8x16384x256 stays here: 0.61 against 0.91).
NARROW_ROWS = 8
NARROW_COLUMNS = 1024
DEEP = 8


def takes(m: int, n: int, k: int, f64: bool, rhs_t: bool) -> bool:
    """Whether a plain [m, k] @ [k, n] product runs here: 2..MAX_GROUPED rows on AVX-512,
    2..MAX_GROUPED_AVX2 on AVX2 (past `one_pass`, in row groups), a row-major W too big for
    gemm_small (its rows do not stay in L2), an x86 target this process runs. Not on SSE targets (8
    registers: unmeasured). Before W was read in k blocks, the 8 rows' one vector per block
    on AVX2 read half a cache line of each W row per pass: 25-38 ms on one core (OpenBLAS
    11.7); in 64 KB k blocks the rows come from L2."""
    from xlapy.backends.cpu import gemm_small

    t = target.current()
    most = (MAX_GROUPED_F64 if f64 else MAX_GROUPED) if t.vector_bits == 512 else \
        (MAX_GROUPED_AVX2_F64 if f64 else MAX_GROUPED_AVX2) if t.vector_bits == 256 else 0
    return (2 <= m <= most and not rhs_t and n >= 1 and k >= 1 and t.is_x86 and t.runs_here
            and k * n * (8 if f64 else 4) > gemm_small.MAX_RHS_BYTES
            and (m <= NARROW_ROWS or n >= NARROW_COLUMNS or k < DEEP * n))


@functools.lru_cache(maxsize=256)
def cuts(n: int, k: int, itemsize: int, align: int, blocked: bool = False
         ) -> tuple[int, ...]:
    """Column chunk boundaries: at least CHUNK_BYTES of W each (`blocked`: and rows of at
    least PIECE_BYTES), inner ones at multiples of `align` (a register block); a function
    of the shape alone."""
    width = max(align, CHUNK_BYTES // max(1, k * itemsize),
                PIECE_BYTES // itemsize if blocked else 0)
    return tuple(parallel.fixed_cuts(n, width, align))


def k_block(width: int, itemsize: int) -> int:
    """Rows of W per k block for a chunk `width` columns wide: BLOCK_BYTES of W, 16-256."""
    return max(16, min(256, BLOCK_BYTES // max(1, width * itemsize)))


def one_pass(m: int, bits: int) -> bool:
    """Whether m rows read W once: up to MAX_ROWS, and more while a register block still
    holds 2 vectors of columns (AVX-512: 12 rows). A block of one vector reads 64 bytes of
    each row per pass and lost to two passes; two passes of blocks of 2-3 vectors lost to
    one pass of 2 (Zen 4, 2 threads, x 4096 x 4096 against XLA: 9 rows 6.1 -> 2.8-2.9 ms
    (XLA 4.0-4.3), 11 rows 6.1-6.9 -> 3.3-3.8 (4.3-4.5), 12 rows 6.1-7.1 -> 4.5-4.6 (4.4-4.6);
    14 rows at one vector 5.6-6.5 vs two passes 6.4-6.8, kept)."""
    return m <= MAX_ROWS or _block(bits, m) >= 2


def runner(m: int, n: int, k: int, f64: bool, threads: int = 1
           ) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    """A function (x, w, out) for a library thunk, the module built on its first call (in a
    compile: meanwhile): one sweep over W, every row group (`groups`) in each k block."""
    tgt = target.current()
    parts = groups(m, tgt.vector_bits)
    size = 8 if f64 else 4
    lanes = tgt.vector_bits // (8 * size)
    least = BLOCKED_BYTES_AVX2 if tgt.vector_bits == 256 else BLOCKED_BYTES
    blocked = k * n * size > least and n * size >= BLOCKED_ROW_BYTES
    bounds = cuts(n, k, size, _block(tgt.vector_bits, parts[0][0]) * lanes, blocked)
    kb = k_block(bounds[1] - bounds[0], size) if blocked else k
    single = threads < 2 or len(bounds) < 3
    width = n if single else max(hi - lo for lo, hi in zip(bounds, bounds[1:]))
    line = 64 // size  # (panels of whole lines: a part-filled last one takes a line)
    packed = PACK and tgt.vector_bits == 256 and blocked and sum(c for _, c in parts) > 1 \
        and kb * -(-width // line) * line * size <= PACK_BYTES
    ahead(_compile, parts, f64, tgt, packed)  # in a compile: built meanwhile (once.py)

    def run(x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
        code = _compile(parts, f64, tgt, packed)
        x, w = c_order(x), c_order(w)
        res = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
        args = (x.ctypes.data, w.ctypes.data, res.ctypes.data, n, k)
        chunks = len(bounds) - 1
        if threads < 2 or chunks < 2:
            code.fn(*args, 0, n, kb)
        else:
            jobs = [(code.address, (*args, bounds[j], bounds[j + 1], kb))
                    for j in range(chunks)]
            parallel.pool(threads).share(jobs, threads, (x, w, res))
        if res is not out:
            out[...] = res

    return run


__all__ = ["takes", "runner", "one_pass", "groups", "cuts", "MAX_ROWS", "MAX_GROUPED",
           "MAX_GROUPED_AVX2", "MAX_GROUPED_AVX2_F64", "MAX_GROUPED_F64", "GROUP_ROWS_AVX2",
           "PREFETCH_ROWS", "PREFETCH_AHEAD", "CHUNK_BYTES"]
