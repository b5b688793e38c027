"""Small f32/f64 GEMMs as one JIT-compiled loop nest per shape, in place of a BLAS call.

OpenBLAS packs both operands on every call. For an RNN cell's [64, 256] x [256, 256] that is
a third of the call: 63 us single-threaded against 45 us here, and 9.6 against 1.4 us at
[8, 64] x [64, 64]. Here the rhs (row-major [k, n]) is read in place: for each block of V
vectors of output columns and R output rows, R x V vector accumulators sum k terms, each a
vector load of a rhs row (shared by the R rows) times a broadcast lhs element (shared by the
V vectors), so the loop is bound by FMAs, not loads (24 zmm accumulators on AVX-512, 12 on
AVX2 and SSE's 16 registers). Column blocks are the outer loop: a block's rhs panel stays in
L1 while every row block of the call passes over it. Columns past the last full block are
vectors of narrower powers of two (down to a scalar).

Each output element is one multiply-add chain in contracting-index order, so its bits do not
depend on how the rows are split over threads (row ranges are the functions' lo, hi). MXCSR
FTZ/DAZ are cleared around the loop, as BLAS runs on the Python path and as the interpreter
computes: a denormal product survives (tests/unit/backends/cpu/test_native_loop_gemm.py).

Three entry points per shape: `direct(lhs, rhs, out, lo, hi)` for library thunks,
`rows(descriptor, lo, hi)` for native callers (regions.py's steps, native_loop.py), the
descriptor's words 1-4 being regions.gemm_descriptor's: the pointer table, then the lhs,
rhs and out slots, and `batch(descriptor, lo, hi)` for products lo..hi of a batched dot
in a native loop's body (word 16: each product's rows). Only shapes whose rhs fits in L2
and whose product is small take this path (`MAX_MACS`, `MAX_RHS_BYTES`; `NARROW_N` on
AVX-512): above that, BLAS's cache blocking wins. Which dots are such products:
dot_shapes.py.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import cache, gemm_small_dot, parallel, target
from xlapy.backends.cpu.dot_shapes import batched_dot, plain_dot
from xlapy.backends.cpu.llvm_util import (
    F32,
    F64,
    I8P,
    I32,
    I64,
    VOID,
    Engine,
    for_range,
    i64,
    intrinsic,
    new_module,
)
from xlapy.backends.cpu.once import once
from xlapy.backends.cpu.threads import fn_address, strided_table
from xlapy.backends.cpu.transpose_lib import c_order
from xlapy.ir import Instruction

#: Multiply-adds above which BLAS is used (measured here, single-threaded: [128, 256] x
#: [256, 256] 114 vs 121 us, [128, 512] x [512, 512] 482 vs 438 us).
MAX_MACS = 1 << 23
#: Largest rhs (bytes) read in place: it must stay in L2 across the row blocks.
MAX_RHS_BYTES = 1 << 19
#: Columns up to which a product of any size runs here on AVX-512 (its rhs within
#: MAX_RHS_BYTES): BLAS packs the lhs for few columns of work. 2 threads, min of 60-450
#: calls against blas.gemm: 4096x1024x64 0.87-0.89 of its time, 1024x2048x64 0.80,
#: 1024x1024x96 0.73, 512x256x512 0.82, 2048x512x256 0.91-0.94, 8192x128x128 0.93,
#: 4096x256x256 0.99-1.01; with 1024 columns it lost (4096x64x1024 1.13-1.16).
NARROW_N = 512
#: On AVX-512 an f32 rhs up to WIDE_RHS_BYTES is read in place whatever the product's size,
#: when its column panels (k rows of a block's 48 columns) stay in L2 (k <= WIDE_K) and
#: gemm_skinny does not read it in one pass (more rows than its one_pass). The bounds above
#: were measured on a Sapphire Rapids; on Zen 4 (1 MB L2, 2 threads) this loop beat BLAS and
#: gemm_f32 (which packs) across the range, against XLA: 32x256x1024 0.19-0.30 -> 0.095 ms
#: (XLA 0.12-0.15), 24x1024x1024 0.48-0.53 -> 0.27 (0.27-0.28), 64x512x2048 0.81-0.83 ->
#: 0.62 (0.69-0.70), 256x256x1024 0.69 -> 0.61 (0.64-0.68), 1024x1024x1024 11.3 -> 9.7
#: (9.7); at k 4096 it lost (256x4096x1024 11.05 -> 12.0), as with AVX2's 12 accumulators
#: (64x2048x1024 1.87 -> 2.54). Not with an L2 of PACKED_L2 or more (the Sapphire Rapids
#: measurements above: BLAS won [128, 512] x [512, 512] there).
WIDE_RHS_BYTES = 4 << 20
WIDE_K = 2048
#: Descriptor words of `rows` (regions.gemm_descriptor's _G_TABLE, _G_LHS, _G_RHS, _G_OUT,
#: _G_N, _G_K).
TABLE, LHS, RHS, OUT, N, K, M = 1, 2, 3, 4, 9, 10, 16
#: Most rows sharing a pass over a rhs panel.
MAX_ROWS = 8
_MXCSR_FTZ_DAZ = 0x8040
_DIRECT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                           *[ctypes.c_int64] * 4)


@dataclass(frozen=True)
class GemmShape:
    """out[m, n] = lhs[m, k] @ rhs[k, n], all row-major, f64 or f32."""

    m: int
    n: int
    k: int
    f64: bool

    @property
    def macs(self) -> int:
        return self.m * self.n * self.k


def shape(m: int, n: int, k: int, f64: bool, rhs_t: bool = False) -> GemmShape | None:
    """The GemmShape this module computes for these extents, or None (BLAS): x86 targets,
    rhs not transposed, small enough (MAX_MACS, MAX_RHS_BYTES; on AVX-512 any MACs for
    NARROW_N columns or fewer, and any for an f32 rhs up to WIDE_RHS_BYTES: `_wide`)."""
    t = target.current()
    if (rhs_t and n != 1) or min(m, n, k) < 1 or not t.is_x86:
        return None  # (one column lies alike either way: a matrix times a vector's rhs_t)
    if _wide(m, n, k, f64, t.vector_bits):
        return GemmShape(m, n, k, f64)
    if k * n * (8 if f64 else 4) > MAX_RHS_BYTES:
        return None
    if m * n * k > MAX_MACS and not (n <= NARROW_N and t.vector_bits == 512):
        return None
    return GemmShape(m, n, k, f64)


def _wide(m: int, n: int, k: int, f64: bool, bits: int) -> bool:
    """Whether an rhs over MAX_RHS_BYTES is read in place here (WIDE_RHS_BYTES)."""
    from xlapy.backends.cpu import gemm_skinny

    l2 = parallel.l2_bytes()
    return (bits == 512 and not f64 and k <= WIDE_K and k * n * 4 <= WIDE_RHS_BYTES
            and not gemm_skinny.one_pass(m, bits) and l2 is not None and l2 < PACKED_L2)


def skinny_first(s: GemmShape) -> bool:
    """Whether a standalone product this module takes reading a wide rhs in place (over
    MAX_RHS_BYTES) goes to gemm_skinny's row groups instead: under 32 rows (measured there),
    when a pass over the rhs computes fewer than MIN_ROWS_PER_PASS rows (`rows_per_pass`
    over the machine's CPUs, as conv.split_rows cuts them). The bits are the same either
    way. Region members keep this module (their row chunks are the region's)."""
    return (s.k * s.n * (8 if s.f64 else 4) > MAX_RHS_BYTES and s.m < 32
            and rows_per_pass(s.m, parallel.usable_cpus()) < MIN_ROWS_PER_PASS)


#: Rows a pass over the rhs computes at least (the busiest thread's, `rows_per_pass`) for a
#: standalone product of fewer than 32 rows (measured there) to read a wide rhs here
#: (`skinny_first`); fewer go to gemm_skinny's row groups, the same bits (one chain
#: per element in k order) with one sweep over the rhs. Zen 4, 2 threads, same-process A/B
#: against XLA, here -> gemm_skinny: 13x1024x1024 (7 rows a thread: blocks of 4, 2, 1) 1.66
#: -> 0.79, 15x1024x1024 1.82 -> 0.86, 20x1024x1024 0.76-1.05 -> 0.59-0.94, 21x1024x1024
#: 1.03 -> 0.84, 27x1024x1024 1.13-1.40 -> 0.94-1.09 (one run 0.68 vs 0.77), 30x1024x1024
#: 0.96 -> 0.75, 31x1024x1024 0.97-1.35 -> 0.63-1.01; this loop won at 16, 24 and 33 rows
#: and more (5.67 rows a pass and up: 24x1024x1024 0.52-0.64 vs 0.57-0.69, 33x1024x1024 0.91
#: vs 1.04, 64x1024x1024 0.76-0.79 vs 1.05-1.10).
MIN_ROWS_PER_PASS = 5.5


def rows_per_pass(m: int, threads: int) -> float:
    """The fewest rows per pass over the rhs of any thread's share (conv.split_rows' parts:
    blocks of MAX_ROWS rows, then one block per set bit of the rest, each a pass)."""
    parts = max(1, min(threads, m))
    least = float(m)
    for j in range(parts):
        rows = m * (j + 1) // parts - m * j // parts
        passes = rows // MAX_ROWS + bin(rows % MAX_ROWS).count("1")
        least = min(least, rows / max(1, passes))
    return least


def batch_of(instr: Instruction) -> tuple[int, GemmShape] | None:
    """(batch, each product's GemmShape) of a batched dot_general (dot_shapes.batched_dot)
    whose products this module computes (`shape`), or None: what a native loop runs one
    product at a time (regions.batched_gemm_of, small_dots.batched_gemm)."""
    d = batched_dot(instr)
    s = None if d is None else shape(d[1], d[2], d[3], d[4])
    return None if d is None or s is None else (d[0], s)


def of_instruction(instr: Instruction, flat: bool = False) -> GemmShape | None:
    """The GemmShape of a plain 2-D [m, k] x [k, n] f32/f64 dot_general (`flat`: or one
    laid out as such, plain_dot), or None."""
    d = plain_dot(instr, flat=flat)
    return None if d is None else shape(d[0], d[1], d[2], d[4], d[3])


def _blocking(bits: int) -> tuple[int, int, int]:
    """(R rows, V vectors, accumulators) of the main register block: R x V accumulators,
    V rhs vectors and a broadcast within the target's vector registers."""
    accs = 24 if bits == 512 else 12 if bits == 256 else 8
    # AVX-512: 8 rows x 3 zmm (CPU time per call here, [64, 256] x [256, 256] over 16 / 64
    # rows: 13.5 / 53 us against 18.4 / 59 us for 6 x 4 and 17.6 / 67 us for 4 x 4); AVX2:
    # 4 rows x 3 ymm (19.9 / 78 us against 30 / 87 us for 6 x 2)
    v = 3 if bits >= 256 else 2
    return min(MAX_ROWS, accs // v), v, accs


@dataclass(frozen=True)
class Columns:
    """The column blocks an n-column product runs: blocks of V vectors (`full`), one block
    of the whole vectors left (`singles` of them, fewer than V), then one block per set bit
    of the rest (`rest`: the widths, half a vector down to one column). A module holds the
    code of one such pattern, that of the n it is built for (any n alike runs it):
    scan_rnn's [64, 256] x [256, 256] needs 4 of the 12 column loops of every pattern, and
    the module is built on a program's first run (37 -> 17 ms: IR 13.5 -> 5.6, LLVM 23 ->
    11)."""

    full: bool
    singles: int
    rest: tuple[int, ...]

    @property
    def suffix(self) -> str:
        """Its part of the module's name (functions of two patterns never share one)."""
        return f"_{'f' if self.full else ''}{f's{self.singles}' if self.singles else ''}" + \
            "".join(f"r{w}" for w in self.rest)


def columns(n: int, f64: bool) -> Columns:
    """The column blocks `_emit`'s loops run for n columns on the current target."""
    bits = target.current().vector_bits
    lanes = bits // (64 if f64 else 32)
    step = _blocking(bits)[1] * lanes
    full = n // step
    singles = (n - full * step) // lanes
    rest = n - full * step - singles * lanes
    widths = [lanes >> j for j in range(1, lanes.bit_length())]  # lanes / 2 .. 1
    return Columns(full > 0, singles, tuple(w for w in widths if rest & w))


def _emit(name: str, f64: bool, cols: Columns | None = None) -> ir.Module:
    """`direct(lhs, rhs, out, n, k, lo, hi)` and `rows(d, lo, hi)` for any k and any n
    whose column blocks are `cols` (None: every n): columns in blocks of V vectors, then
    the whole vectors left as one block, then one block per set bit of the rest (half a
    vector, a quarter, ... one column); rows in blocks of R, then one by one (half the code
    of blocks of 4, 2 and 1: the module is built on a program's first run)."""
    t = F64 if f64 else F32
    size = 8 if f64 else 4
    bits = target.current().vector_bits
    lanes = bits // (8 * size)
    r_max, v, accs = _blocking(bits)
    mod = new_module(name)
    tp = t.as_pointer()
    fn = ir.Function(mod, ir.FunctionType(VOID, [tp, tp, tp, I64, I64, I64, I64]),
                     name=f"{name}_direct")
    a, w, out, n, kk, lo, hi = fn.args
    for p in (a, w, out):
        p.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    stm = ir.Function(mod, ir.FunctionType(VOID, [I8P]), name="llvm.x86.sse.stmxcsr")
    ldm = ir.Function(mod, ir.FunctionType(VOID, [I8P]), name="llvm.x86.sse.ldmxcsr")
    saved, clear = b.alloca(I32), b.alloca(I32)
    b.call(stm, [b.bitcast(saved, I8P)])
    old = b.load(saved)
    need = b.icmp_unsigned("!=", b.and_(old, ir.Constant(I32, _MXCSR_FTZ_DAZ)),
                           ir.Constant(I32, 0))
    with b.if_then(need):
        b.store(b.and_(old, ir.Constant(I32, ~_MXCSR_FTZ_DAZ & 0xFFFFFFFF)), clear)
        b.call(ldm, [b.bitcast(clear, I8P)])

    def vtype(width: int) -> ir.Type:
        return t if width == 1 else ir.VectorType(t, width)

    def fma(x: ir.Value, y: ir.Value, acc: ir.Value, width: int) -> ir.Value:
        suffix = ("f64" if f64 else "f32") if width == 1 else \
            f"v{width}{'f64' if f64 else 'f32'}"
        return intrinsic(b, f"llvm.fmuladd.{suffix}", vtype(width), [x, y, acc])

    def splat(x: ir.Value, width: int) -> ir.Value:
        if width == 1:
            return x
        vt = vtype(width)
        undef = ir.Constant(vt, ir.Undefined)
        one = b.insert_element(undef, x, ir.Constant(I32, 0))
        return b.shuffle_vector(one, undef, ir.Constant(ir.VectorType(I32, width), [0] * width))

    def vec_ptr(base: ir.Value, at: ir.Value, width: int) -> ir.Value:
        return b.bitcast(b.gep(base, [at]), vtype(width).as_pointer())

    def block(r0: ir.Value, rows: int, c0: ir.Value, vecs: int, wd: int) -> None:
        """out[r0:r0+rows, c0:c0+vecs*wd] = lhs[r0:r0+rows] @ rhs[:, c0:c0+vecs*wd]."""
        pre = b.block
        body = fn.append_basic_block("k")
        done = fn.append_basic_block("k.end")
        b.branch(body)  # k >= 1 (shape)
        b.position_at_end(body)
        k = b.phi(I64, name="k")
        k.add_incoming(i64(0), pre)
        phis = [[b.phi(vtype(wd)) for _ in range(vecs)] for _ in range(rows)]
        for row in phis:
            for p in row:
                p.add_incoming(ir.Constant(vtype(wd), None), pre)  # zeros
        wrow = b.add(b.mul(k, n), c0)
        ws = []
        for j in range(vecs):
            ld = b.load(vec_ptr(w, b.add(wrow, i64(j * wd)), wd))
            ld.align = size
            ws.append(ld)
        news = []
        for r in range(rows):
            x = splat(b.load(b.gep(a, [b.add(b.mul(b.add(r0, i64(r)), kk), k)])), wd)
            news.append([fma(x, wv, acc, wd) for wv, acc in zip(ws, phis[r])])
        nk = b.add(k, i64(1))
        k.add_incoming(nk, b.block)
        for row, new in zip(phis, news):
            for p, x in zip(row, new):
                p.add_incoming(x, b.block)
        b.cbranch(b.icmp_signed("<", nk, kk), body, done)
        b.position_at_end(done)
        for r in range(rows):
            orow = b.add(b.mul(b.add(r0, i64(r)), n), c0)
            for j, x in enumerate(news[r]):
                st = b.store(x, vec_ptr(out, b.add(orow, i64(j * wd)), wd))
                st.align = size

    def row_blocks(c0: ir.Value, vecs: int, wd: int) -> None:
        """Rows [lo, hi) of columns [c0, c0 + vecs * wd): blocks of R rows, then the rest
        in one block per set bit of its count, widest first (each a pass over the columns'
        rhs panel: one row at a time, the 4 rows left per thread of 24 on 2 threads made 5
        passes of 3 FMAs per k step instead of 2 passes: 32 x 1024 x 1024 ran in 0.32 ms on
        Zen 4, 24 x 1024 x 1024 in 0.88)."""
        rm = min(MAX_ROWS, max(1, accs // vecs))
        nblocks = b.sdiv(b.sub(hi, lo), i64(rm))
        with for_range(b, i64(0), nblocks, "rb") as rb:
            block(b.add(lo, b.mul(rb, i64(rm))), rm, c0, vecs, wd)
        r1 = b.add(lo, b.mul(nblocks, i64(rm)))
        left = b.sub(hi, r1)  # < rm
        rows, done = 1 << (rm - 1).bit_length() - 1 if rm > 1 else 0, 0
        while rows >= 1:
            with b.if_then(b.icmp_unsigned("!=", b.and_(left, i64(rows)), i64(0))):
                block(b.add(r1, b.and_(left, i64(done))), rows, c0, vecs, wd)
            done |= rows
            rows //= 2

    def general() -> None:
        step = v * lanes
        full = b.sdiv(n, i64(step))
        if cols is None or cols.full:
            with for_range(b, i64(0), full, "cb") as cb:
                row_blocks(b.mul(cb, i64(step)), v, lanes)
        c1 = b.mul(full, i64(step))
        singles = b.sdiv(b.sub(n, c1), i64(lanes))
        # the whole vectors left (fewer than V): one block of them, one pass over the lhs (a
        # pass a vector read the lhs twice at 32 columns, a broadcast load an FMA:
        # 1024x1024x32 1.19x XLA's time)
        for count in range(1, v):
            if cols is None or cols.singles == count:
                with b.if_then(b.icmp_signed("==", singles, i64(count))):
                    row_blocks(c1, count, lanes)
        c2 = b.add(c1, b.mul(singles, i64(lanes)))
        rest = b.sub(n, c2)  # < lanes: one block per set bit, widest first
        width, done = lanes // 2, 0
        while width >= 1:
            if cols is None or width in cols.rest:
                with b.if_then(b.icmp_unsigned("!=", b.and_(rest, i64(width)), i64(0))):
                    row_blocks(b.add(c2, b.and_(rest, i64(done))), 1, width)
            done |= width
            width //= 2

    # one column (n = 1): dot products along k instead (gemm_small_dot.py)
    if cols is not None and not cols.full and not cols.singles and cols.rest == (1,):
        gemm_small_dot.emit(b, a, w, out, kk, lo, hi, lanes, fma)
    elif cols is None:
        with b.if_else(b.icmp_signed("==", n, i64(1))) as (dot, other):
            with dot:
                gemm_small_dot.emit(b, a, w, out, kk, lo, hi, lanes, fma)
            with other:
                general()
    else:
        general()
    with b.if_then(need):
        b.call(ldm, [b.bitcast(saved, I8P)])
    b.ret_void()

    # rows(i64* d, lo, hi): the table's lhs / rhs / out slots and n, k (regions'
    # descriptor: words 1-4, 9 and 10)
    i64p = I64.as_pointer()
    rows_fn = ir.Function(mod, ir.FunctionType(VOID, [i64p, I64, I64]), name=f"{name}_rows")
    d, rlo, rhi = rows_fn.args
    b = ir.IRBuilder(rows_fn.append_basic_block("entry"))
    table = b.inttoptr(b.load(b.gep(d, [i64(TABLE)])), i64p)

    def word(at: int) -> ir.Value:
        return b.load(b.gep(d, [i64(at)]))

    def operand(at: int) -> ir.Value:
        return b.inttoptr(b.load(b.gep(table, [word(at)])), tp)

    b.call(fn, [operand(LHS), operand(RHS), operand(OUT), word(N), word(K), rlo, rhi])
    b.ret_void()

    # batch(i64* d, lo, hi): products lo..hi of [B, m, k] x [B, k, n] -> [B, m, n] (word 16:
    # m), each the one product `direct` computes (a batched dot in a loop body: loop_steps)
    bat = ir.Function(mod, ir.FunctionType(VOID, [i64p, I64, I64]), name=f"{name}_batch")
    d, blo, bhi = bat.args
    b = ir.IRBuilder(bat.append_basic_block("entry"))
    table = b.inttoptr(b.load(b.gep(d, [i64(TABLE)])), i64p)
    m, n, kk = word(M), word(N), word(K)
    x, y, o = operand(LHS), operand(RHS), operand(OUT)
    with for_range(b, blo, bhi, "j") as j:
        b.call(fn, [b.gep(x, [b.mul(j, b.mul(m, kk))]), b.gep(y, [b.mul(j, b.mul(kk, n))]),
                    b.gep(o, [b.mul(j, b.mul(m, n))]), n, kk, i64(0), m])
    b.ret_void()
    return mod


@dataclass(frozen=True)
class Compiled:
    """One shape's engine: `direct` (a ctypes function), its address, `rows`' and `batch`'s."""

    engine: Engine
    direct: Any
    direct_address: int
    rows_address: int
    batch_address: int


@once
def _compile(f64: bool, tgt: target.CpuTarget, flushing: bool, cols: Columns) -> Compiled:
    with target.use(tgt), denormal.use(denormal.FTZ if flushing else denormal.IEEE):
        name = f"xlapy_{'d' if f64 else 's'}gemm_small{cols.suffix}"
        eng = cache.library_engine(("gemm_small", f64, cols), lambda: _emit(name, f64, cols),
                                   "light", light=True,
                                   exports=[f"{name}_direct", f"{name}_rows", f"{name}_batch"])
    addr = eng.address(f"{name}_direct")
    return Compiled(eng, _DIRECT(addr), addr, eng.address(f"{name}_rows"),
                    eng.address(f"{name}_batch"))


@dataclass(frozen=True)
class Later:
    """The compiled functions of a type for the target and denormal mode of the compile
    that asked, built on first use (a program's first run, once per process), not in the
    compile: a library routine, as gemm_amx's."""

    f64: bool
    tgt: target.CpuTarget
    flushing: bool
    #: The column blocks of its shape's n (one module per pattern).
    cols: Columns

    def get(self) -> Compiled:
        return _compile(self.f64, self.tgt, self.flushing, self.cols)

    @property
    def rows_address(self) -> int:
        return self.get().rows_address

    @property
    def batch_address(self) -> int:
        return self.get().batch_address


def later(s: GemmShape) -> Later:
    """Shape `s`'s functions for the current target and denormal mode, compiled on first
    use (`Later.get`)."""
    # Not asked for ahead (once.ahead): planning makes a Later for dots that a batch chain
    # then takes over (attention's q k^T), and a build nobody uses held the GIL against the
    # first run (attention's first call 15 -> 32 ms).
    return Later(s.f64, target.current(), denormal.flushing(), columns(s.n, s.f64))


def compiled(s: GemmShape) -> Compiled:
    """The compiled functions for shape `s`'s type on the current target: one module per
    type, target, denormal mode and column pattern (Columns), compiled once per process
    (cached on disk like any kernel)."""
    return later(s).get()


def runner(s: GemmShape, threads: int = 1) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    """A function (lhs, rhs, out) for a library thunk: rows split over `threads` when big
    (conv.split_rows: the split changes no bits)."""
    from xlapy.backends.cpu.conv import split_rows
    from xlapy.backends.cpu.thunks import ptr

    lazy = later(s)
    got: list[Any] = []  # the function, once built (Later.get's lookup: ~1.5 us a call)

    def run(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
        if not got:
            got.append(lazy.get().direct)
        x, y = c_order(x), c_order(y)
        if not out.flags.c_contiguous:  # pragma: no cover - dot outputs are dense
            res = np.empty(out.shape, out.dtype)
            run(x, y, res)
            out[...] = res
            return
        split_rows(got[0], (ptr(x), ptr(y), ptr(out), s.n, s.k), s.m, s.macs, threads)

    return run


#: Multiply-adds per product up to which a batch of products (each one job, on one thread)
#: runs here: single-threaded, [256, 256] x [256, 256] took 204 us here against OpenBLAS's
#: 237, [128, 256] x [256, 256] 91 against 134 (MAX_MACS bounds a lone product, whose rows
#: are split over the threads instead).
BATCH_MAX_MACS = 1 << 25


#: ... on AVX2 targets (x86-64-v3's 4 x 3 ymm blocks: 401 us a [256, 256] x [256, 256]
#: product, OpenBLAS 213), products up to this many: there a BLAS call's own cost decided.
#: Zen 3, 2 threads, same process, here / BLAS (/ XLA): 512 x [16, 64] x [64, 16] 0.64
#: (0.81), 128 x 32^3 0.79 (0.70), 64 x 64^3 0.80 (0.63), 16 x [16, 1024] x [1024, 16] 0.80
#: (0.73); from ~1M it lost or tied: 32 x [64, 256] x [256, 64] 1.02, 8 x [64, 512] x
#: [512, 64] 1.13, 16 x 192^3 1.26, 16 x 256^3 1.36. Batches of AVX2_BATCH_MIN products
#: or more (a few calls cost little).
AVX2_BATCH_MAX_MACS = 1 << 18
AVX2_BATCH_MIN = 8


def batch_shape(m: int, n: int, k: int, f64: bool, nbatch: int = AVX2_BATCH_MIN
                ) -> GemmShape | None:
    """The GemmShape of each product of a batch of `nbatch` that `batched_runner` computes,
    or None: AVX-512 targets, and AVX2 ones for products of up to AVX2_BATCH_MAX_MACS."""
    t = target.current()
    if min(m, n, k) < 1 or not t.is_x86 or t.vector_bits < 256:
        return None
    if t.vector_bits != 512:
        small = m * n * k <= AVX2_BATCH_MAX_MACS and k * n * (8 if f64 else 4) <= MAX_RHS_BYTES
        return GemmShape(m, n, k, f64) \
            if small and nbatch >= AVX2_BATCH_MIN and t.has("fma") else None
    if _wide(m, n, k, f64, 512):
        return GemmShape(m, n, k, f64)
    if m * n * k > BATCH_MAX_MACS or k * n * (8 if f64 else 4) > MAX_RHS_BYTES:
        return None
    return GemmShape(m, n, k, f64)


#: Products at least this big in m, n and k go through gemm_f32's kernel instead (f32 on
#: AVX-512: rhs packed in panels, so its 1 KB-strided rows stop thrashing L1's sets): 32 x
#: [256, 256] x [256, 256] on 2 threads took 3.65-3.80 ms here, 3.41-3.71 there (the same
#: bits: both are one multiply-add chain per element in k order); smaller products lose to
#: its packing ([64, 256] x [256, 256]: 2.06 -> 2.59 ms, [128, 128] x [128, 128]: 1.18 -> 1.38).
PACKED_MIN = 256
#: ... on a machine with an L2 of this many bytes or more per core: on Zen 4 (1 MB) this
#: loop, in place, beat the packed kernel: 32 x [256, 256] x [256, 256] 6.55-6.62 -> 5.53-5.74
#: ms (XLA 6.0-6.3); the Sapphire Rapids numbers above had 2 MB.
PACKED_L2 = 2 << 20


def _packed_job(s: GemmShape) -> Callable[[int, int, int], tuple[int, tuple[int, ...]]] | None:
    """job(lhs, rhs, out): one product through gemm_f32's kernel (its Fortran signature,
    arguments by reference), or None where it does not apply; its module is built ahead."""
    from xlapy.backends.cpu import gemm_f32

    l2 = parallel.l2_bytes()
    if s.f64 or min(s.m, s.n, s.k) < PACKED_MIN or not gemm_f32.available() or \
            l2 is None or l2 < PACKED_L2:
        return None
    gemm_f32.build_ahead()
    c = ctypes.c_int
    refs = (ctypes.c_char(b"N"), c(s.n), c(s.m), c(s.k), ctypes.c_float(1.0), c(s.n), c(s.k),
            ctypes.c_float(0.0), c(s.n))
    tr, n, m, k, alpha, ldb, lda, beta, ldc = (ctypes.addressof(r) for r in refs)

    def job(x: int, y: int, o: int, refs: tuple[Any, ...] = refs
            ) -> tuple[int, tuple[int, ...]]:
        return (fn_address(gemm_f32.fortran()),
                (tr, tr, n, m, k, alpha, y, ldb, x, lda, beta, o, ldc))

    return job


def batched_runner(s: GemmShape, threads: int = 1
                   ) -> Callable[[np.ndarray, np.ndarray, np.ndarray], bool]:
    """A function (lhs [B, m, k], rhs [B, k, n], out [B, m, n]) computing every product,
    one job each, the threads taking the next one left (each product's bits are its own
    chain's, whatever the thread count); it returns False, computing nothing, unless all
    three are dense (the caller then goes through BLAS)."""
    job = _packed_job(s)
    if job is None:
        lazy = later(s)
        built: list[int] = []  # (built on first use; looked up once, not per product)

        def job(x: int, y: int, o: int) -> tuple[int, tuple[int, ...]]:
            if not built:
                built.append(lazy.get().direct_address)
            return built[0], (x, y, o, s.n, s.k, 0, s.m)

    it = 8 if s.f64 else 4
    xs, ys, os_ = s.m * s.k * it, s.k * s.n * it, s.m * s.n * it

    def run(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> bool:
        if not (x.flags.c_contiguous and y.flags.c_contiguous and out.flags.c_contiguous):
            return False
        nb = x.shape[0]
        xa, ya, oa = x.ctypes.data, y.ctypes.data, out.ctypes.data
        fa, first = job(xa, ya, oa)  # (its arguments move by a product's bytes a job)
        step = [q - p for p, q in zip(first, job(xa + xs, ya + ys, oa + os_)[1])]
        parallel.run_jobs(strided_table(fa, first, step, nb), threads, (x, y, out))
        return True

    return run


__all__ = ["GemmShape", "Columns", "Compiled", "Later", "columns", "shape", "batch_of",
           "of_instruction",
           "compiled", "later", "runner", "batch_shape", "batched_runner", "BATCH_MAX_MACS",
           "AVX2_BATCH_MAX_MACS", "AVX2_BATCH_MIN",
           "MAX_MACS", "MAX_RHS_BYTES", "NARROW_N", "TABLE", "LHS", "RHS", "OUT", "N", "K", "M"]
