"""Row-parallel regions: runs of consecutive thunks in which row r of each result needs only
row r of the run's earlier results, compiled into one native `region(table, lo, hi)` that
runs every member on rows [lo, hi).

Members are 2-D dot_generals (sgemm/dgemm on rows of the left operand; the right one is
read whole, so it must come from before the run) and element-wise kernels that read the
run's values only along their outer index (bias, relu, softmax's row reductions). Each
thread runs the whole chain on its own rows with no barrier between members: a GEMM's rows
are still in that core's L2 when the bias/relu kernel reads them, and the next GEMM reads
its rows of the left operand from there too. Separately, each GEMM and kernel split over
threads wait for each other and hand rows across cores: the MLP (3 GEMMs, 3 bias kernels)
and attention (q k^T, softmax, p v) are one region each.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import blas, cache, dot_shapes, gemm_small, guarded_dots
from xlapy.backends.cpu.kernels import Kernel
from xlapy.backends.cpu.llvm_util import (
    I8P,
    I32,
    I64,
    VOID,
    Engine,
    for_range,
    i64,
    new_module,
    on_host,
)
from xlapy.backends.cpu.once import ahead, once
from xlapy.backends.cpu.parallel import fixed_cuts
from xlapy.ir import Instruction
from xlapy.types import Shape

#: Rows per thread below which a run is not made a region (a GEMM that short splits
#: better along its columns: blas.gemm).
MIN_ROWS_PER_THREAD = 8
#: Rows per chunk at least: each chunk's GEMM packs the whole rhs again, a cost of the
#: rhs' size against the chunk's rows times it (the transformer block's MLP region, 256
#: rows: 25 ms single-threaded in 32-row chunks, 18 ms in 128-row ones).
MIN_ROWS_PER_CHUNK = 128
#: Rows per chunk at least when that leaves fewer than two chunks (two threads still share,
#: each packing the whole rhs: on two threads that beats one thread doing it all). Was 32:
#: on AVX2 (Zen 3), where the LSTM step's h @ u (1 MB rhs) goes to BLAS, its 32-row region
#: ran on one thread while the other waited (jax_probe lstm 40.5 -> 24.5 ms at 16, XLA 26;
#: one thread's 16 rows of x @ w and h @ u take 72 + 139 us against 115 + 224 for 32).
MIN_ROWS_PER_HALF = 16
#: Rhs bytes up to which a wide GEMM (one blas.gemm alone splits by columns) still joins a
#: region in row chunks: each chunk packs the whole rhs again, but an rhs this small is
#: read from the last-level cache, and the region saves the barrier and the cross-core
#: hand-off of rows between separately split thunks. The jax transformer block (256 rows,
#: 512x1536 .. 2048x512 weights, 4 MiB at most) in two regions: 6.66 -> 6.12 ms on 2
#: threads (same run). The MLP's 16-64 MiB layers stay column-split (29.3 -> 26.9 ms).
WIDE_RHS_BYTES = 8 << 20
_INT_MAX = (1 << 31) - 1


@dataclass
class Gemm:
    """A dot_general [m, k] x [k, n] (or rhs [n, k], `rhs_t`) as one BLAS call per row range."""

    lhs: int
    rhs: int
    out: int
    m: int
    n: int
    k: int
    rhs_t: bool
    f64: bool
    #: gemm_small's functions for this shape, compiled on first use (None: BLAS through
    #: gemm_rows).
    small: gemm_small.Later | None = None
    #: lhs stored [k, m] (a weight gradient x^T g: BLAS only, a native loop's step alone).
    lhs_t: bool = False
    #: products of a batched dot [batch, m, k] x [batch, k, n] (batched_gemm_of: gemm_small
    #: only, a native loop's step alone)
    batch: int = 1
    #: c64 / c128 (`f64`) elements: cgemm / zgemm (gemm_of's `cplx`: a native loop's step)
    cplx: bool = False


@dataclass
class Member:
    """One thunk as a region sees it: the slot it writes, its rows (result dimension 0) and
    the slots it reads other than only at its own rows (those must come from before the run)."""

    instr: Instruction
    slot: int
    rows: int
    other_reads: set[int]
    cost: int
    kernel: Kernel | None = None
    gemm: Gemm | None = None
    #: rows that are a vector's elements: a row-split loop's member (row_loop.py) only
    vector: bool = False


@dataclass
class Region:
    name: str
    members: list[Member] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return self.members[0].rows

    @property
    def align(self) -> int:
        """Split points every member accepts: lanes (powers of two) and residue groups
        (residue_emit.py: 3 for a pad's interior 2) alike."""
        return math.lcm(*(m.kernel.align if m.kernel else 1 for m in self.members))

    @property
    def packs(self) -> bool:
        """Whether a GEMM member packs its rhs per call (BLAS), not gemm_small's in place."""
        return any(m.gemm is not None and m.gemm.small is None for m in self.members)

    def cuts(self) -> list[int]:
        """Its fixed row chunks (`cuts`)."""
        return cuts(self.rows, self.align, self.packs)


def gemm_of(instr: Instruction, slot: dict[int, int], vectors: bool = False,
            flat: bool = False, lhs_t: bool = False, cplx: bool = False) -> Gemm | None:
    """The Gemm of a plain 2-D f32/f64 dot_general whose result rows are the lhs rows
    (`vectors`: or a vector-matrix / matrix-vector one; `flat`: or a higher-rank one laid
    out as such: dot_shapes.plain_dot; `lhs_t`: or a 2-D one contracting the lhs' first
    dimension, through BLAS; `cplx`: or a c64 / c128 one, BLAS's cgemm / zgemm as the
    Python path's blas.gemm)."""
    d = dot_shapes.plain_dot(instr, vectors, flat) or \
        (dot_shapes.plain_dot(instr, vectors, flat, cplx=True) if cplx else None)
    if d is None:
        t = dot_shapes.lhs_transposed(instr) if lhs_t else None
        if t is None:
            return None
        m, n, k, rhs_t, f64 = t
        return Gemm(slot[id(instr.operands[0])], slot[id(instr.operands[1])], slot[id(instr)],
                    m, n, k, rhs_t, f64, lhs_t=True)
    m, n, k, rhs_t, f64 = d
    if min(m, n, k) == 0 or max(m, n, k) > _INT_MAX:
        return None
    cx = instr.shape.element_type.is_complex
    small = None if cx else gemm_small.shape(m, n, k, f64, rhs_t)
    return Gemm(slot[id(instr.operands[0])], slot[id(instr.operands[1])], slot[id(instr)],
                m, n, k, rhs_t, f64,
                gemm_small.later(small) if small is not None else None, cplx=cx)


def batched_gemm_of(instr: Instruction, slot: dict[int, int]) -> Gemm | None:
    """The Gemm of a batched dot_general whose products gemm_small computes, one at a time
    (gemm_small.batch_of), or None."""
    got = gemm_small.batch_of(instr)
    if got is None:
        return None
    batch, small = got
    return Gemm(slot[id(instr.operands[0])], slot[id(instr.operands[1])], slot[id(instr)],
                small.m, small.n, small.k, False, small.f64, gemm_small.later(small),
                batch=batch)


def gemm_member(instr: Instruction, slot: dict[int, int]) -> Member | None:
    """A GEMM as a region member, split by rows with its neighbours; not one that blas.gemm
    or gemm_skinny splits better by columns (`rhs_alone`, which covers `wide_alone`: each row
    chunk would read or pack all of a big rhs again, from DRAM)."""
    g = gemm_of(instr, slot)
    if g is None or rhs_alone(g) or guarded_dots.guard(instr) is not None:
        return None  # (a dot a select may drop: a step of its own, guarded_dots.py)
    return Member(instr, g.out, g.m, {g.rhs}, g.m * g.n * g.k, gemm=g)


def wide_alone(m: int, n: int, k: int, f64: bool) -> bool:
    """A wide product with enough rows for two chunks and an rhs over WIDE_RHS_BYTES: it runs
    alone, split by columns (blas.gemm), never in a region."""
    return m >= 2 * blas.MIN_CHUNK and _big_columns(m, n, k, f64)


def _big_columns(m: int, n: int, k: int, f64: bool) -> bool:
    """A product blas.gemm (or gemm_skinny) cuts by columns with an rhs over WIDE_RHS_BYTES."""
    return blas.columns(m, n) and k * n * (8 if f64 else 4) > WIDE_RHS_BYTES


def rhs_alone(g: Gemm) -> bool:
    """A product that blas.gemm or gemm_skinny would cut by columns (blas.columns: fewer rows
    than two chunks, or a wide one) with an rhs over WIDE_RHS_BYTES: it runs alone, its
    column chunks reading the rhs from memory once; as a region member each thread's rows
    would read all of it, and BLAS pack it again per row chunk. The MLP (1024-4096-4096-1024,
    16-64 MB weights) on 2 threads against XLA, region -> alone: batch 32 1.54 -> 0.85
    (gemm_skinny), 96 1.19 -> 1.06, 128 1.14 -> 1.04, 192 1.11 -> 1.01 (blas.gemm)."""
    return _big_columns(g.m, g.n, g.k, g.f64)


def kernel_member(spec: Kernel, reads: dict[int, set[tuple[str, ...]]],
                  leaves: dict[int, int], shapes: list[Shape]) -> Member | None:
    """A kernel computing rows of an array from `leaves` (id -> slot, `shapes[slot]`) read
    at the symbolic indices `reads` (fusion_plan.row_walk: "r" is the kernel's outer index).
    A vector's elements are its rows: a row-split loop's member (row_loop.py), never a
    region's (`plan`)."""
    root = spec.root
    dims = root.shape.dimensions
    if root.opcode == "reduce" or spec.partial or spec.extra or \
            not spec.splittable or not dims or spec.outer != dims[0]:
        return None
    other = set()
    for lid, s in leaves.items():
        idxs = reads.get(lid, set())
        leaf = shapes[s]
        if not (idxs and all(ix[:1] == ("r",) for ix in idxs) and leaf.is_array
                and leaf.rank >= 1 and leaf.dimensions[0] == dims[0]):
            other.add(s)
    return Member(root, spec.output, dims[0], other, spec.cost, kernel=spec,
                  vector=len(dims) == 1)


def cuts(rows: int, align: int = 1, packs: bool = True) -> list[int]:
    """The fixed row chunks a region runs in (parallel.fixed_cuts): its GEMMs' bits depend on
    them, never on the thread count. MIN_ROWS_PER_CHUNK rows each, or halves of at least
    MIN_ROWS_PER_HALF rows when the rows make fewer than two such chunks; of at least
    MIN_ROWS_PER_THREAD when no GEMM packs its rhs per chunk (`packs` False: gemm_small's
    read it in place). An LSTM step's two 32-row GEMMs ran as one 32-row chunk, on one
    thread: 218 us, against 50 + 86 us as two split thunks (Zen 4); in 16-row halves
    ~120 us (BLAS packing its rhs for each half, on AVX2)."""
    least = MIN_ROWS_PER_HALF if packs else MIN_ROWS_PER_THREAD
    return fixed_cuts(rows, min(MIN_ROWS_PER_CHUNK, max(rows // 2, least)), align)


def plan(members: list[Member | None], threads: int, min_cost: int) -> list[list[Member]]:
    """Runs of consecutive members (None: a thunk that is not one; a vector's kernel is not
    either) that read each other's results only at their own rows, of at least two members,
    `min_cost` work and MIN_ROWS_PER_THREAD rows per thread. The executable passes a fixed
    `threads` (its regions, like their chunks, never depend on its thread count)."""
    runs: list[list[Member]] = []
    run: list[Member] = []
    made: set[int] = set()

    def close() -> None:
        if len(run) >= 2 and sum(m.cost for m in run) >= min_cost and \
                run[0].rows >= MIN_ROWS_PER_THREAD * threads:
            runs.append(list(run))
        run.clear()
        made.clear()

    for m in members:
        if m is None or m.vector:
            close()
            continue
        if run and not (m.rows == run[0].rows and not (m.other_reads & made)):
            close()
        run.append(m)
        made.add(m.slot)
    close()
    return runs if threads > 1 else []


# ---- native runtime: two functions compiled once per process ---------------------------------
# A region runs as region_run(i64* steps, lo, hi), steps = [count, fn0, arg0, fn1, arg1, ...],
# calling fn(arg, lo, hi) in order: a kernel with the table address, or gemm_rows with a
# GEMM descriptor. Nothing is compiled per executable (an LLVM function per GEMM cost ~1 ms
# of codegen each), and cached object files hold no library addresses.
#: GEMM descriptor words: the BLAS function, the table, the lhs/rhs/out slots, the lhs and out
#: row bytes, then the Fortran argument cells (little-endian, read in place by BLAS).
_G_FN, _G_TABLE, _G_LHS, _G_RHS, _G_OUT, _G_LROW, _G_OROW = range(7)
_G_TA, _G_TB, _G_N, _G_K, _G_LDA, _G_LDB, _G_LDC = 7, 8, 9, 10, 12, 13, 15  # (gemm_small's)
#: ... and, for a batched product (Gemm.batch > 1: gemm_small's `batch`), the rows of each;
#: then the most rows one call takes (0: all; gemm_f32's MAX_M where it is the function);
#: then alpha and beta, two words each (zgemm's are pairs of doubles; 11 and 14 unused).
_G_M, _G_STEP, _G_ALPHA, _G_BETA = 16, 17, 18, 20
_G_WORDS = 22


def build_ahead() -> None:
    """In a compile with regions: the runner is built while the compile returns (once.py)."""
    ahead(_runtime)


@once
@on_host
def _runtime() -> tuple[Engine, Any, int]:
    """(engine, region_run as a ctypes function, gemm_rows address). Built on a program's
    first run: the light pipeline and -O0 code generation (a loop of calls and a BLAS call:
    ~1 ms instead of ~3), compiled outside llvmlite's lock (the first run's other builds
    do not wait for it), from the disk cache in a later process without emitting it
    (cache.library_engine)."""
    engine = cache.library_engine(("regions",), _emit_runtime, "regions-O0", o0=True,
                                  exports=["region_run", "gemm_rows"])
    fn_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    return engine, fn_t(engine.address("region_run")), engine.address("gemm_rows")


def _emit_runtime() -> ir.Module:
    """region_run(steps, lo, hi) and gemm_rows(descriptor, lo, hi)."""
    mod = new_module("xlapy_regions")
    i64p = I64.as_pointer()
    step_t = ir.FunctionType(VOID, [I64, I64, I64])

    run = ir.Function(mod, ir.FunctionType(VOID, [i64p, I64, I64]), name="region_run")
    steps, lo, hi = run.args
    b = ir.IRBuilder(run.append_basic_block("entry"))
    with for_range(b, i64(0), b.load(steps)) as j:
        at = b.add(b.mul(j, i64(2)), i64(1))
        fn = b.inttoptr(b.load(b.gep(steps, [at])), step_t.as_pointer())
        b.call(fn, [b.load(b.gep(steps, [b.add(at, i64(1))])), lo, hi])
    b.ret_void()

    gemm = ir.Function(mod, ir.FunctionType(VOID, [i64p, I64, I64]), name="gemm_rows")
    d, lo, hi = gemm.args
    b = ir.IRBuilder(gemm.append_basic_block("entry"))

    def word(k: int) -> ir.Value:
        return b.load(b.gep(d, [i64(k)]))

    def cell(k: int) -> ir.Value:
        return b.bitcast(b.gep(d, [i64(k)]), I8P)

    table = b.inttoptr(word(_G_TABLE), I8P.as_pointer())

    def rows(slot: int, row_bytes: int | None) -> ir.Value:
        base = b.load(b.gep(table, [word(slot)]))
        return base if row_bytes is None else b.gep(base, [b.mul(lo, word(row_bytes))])

    m = b.alloca(I32)
    blas_t = ir.FunctionType(VOID, [I8P] * 13)
    fn = b.inttoptr(word(_G_FN), blas_t.as_pointer())
    total = b.sub(hi, lo)
    most = word(_G_STEP)  # (calls of at most this many rows: gemm_f32's)
    whole = b.select(b.icmp_signed(">", total, i64(0)), total, i64(1))
    most = b.select(b.icmp_signed(">", most, i64(0)), most, whole)
    calls = b.sdiv(b.add(total, b.sub(most, i64(1))), most)
    with for_range(b, i64(0), calls, name="call") as j:
        first = b.add(lo, b.mul(j, most))
        left = b.sub(hi, first)
        b.store(b.trunc(b.select(b.icmp_signed("<", left, most), left, most), I32), m)

        def at(slot: int, row_bytes: int) -> ir.Value:
            return b.gep(b.load(b.gep(table, [word(slot)])), [b.mul(first, word(row_bytes))])
        b.call(fn, [cell(_G_TA), cell(_G_TB), cell(_G_N), b.bitcast(m, I8P), cell(_G_K),
                    cell(_G_ALPHA), rows(_G_RHS, None), cell(_G_LDA), at(_G_LHS, _G_LROW),
                    cell(_G_LDB), cell(_G_BETA), at(_G_OUT, _G_OROW), cell(_G_LDC)])
    b.ret_void()
    return mod


def run_function() -> Any:
    """region_run(steps, lo, hi) as a ctypes function."""
    return _runtime()[1]


def gemm_rows_address() -> int:
    """The address of gemm_rows(descriptor, lo, hi) (a native while loop's GEMM steps)."""
    return int(_runtime()[2])


def gemm_descriptor(g: Gemm, table: int) -> np.ndarray:
    dt = np.dtype(("D" if g.f64 else "F") if g.cplx else ("d" if g.f64 else "f"))
    size = dt.itemsize
    d = np.zeros(_G_WORDS, np.int64)
    d[_G_FN] = blas.function_address(blas.routine(dt))
    if not (g.f64 or g.cplx) and g.small is None:
        # rows of at most MAX_M through gemm_f32, as blas.gemm routes a chunk (its bits
        # never depend on the rows of a call): a region's 512-row halves of a 1024^3
        # product had gone to OpenBLAS, 1.1x XLA's time with a tanh
        from xlapy.backends.cpu import gemm_f32

        ta, tb = (b"T" if g.rhs_t else b"N"), (b"T" if g.lhs_t else b"N")
        if gemm_f32.routes(gemm_f32.MAX_M, g.n, g.k, ta, tb, 0.0):
            d[_G_FN], d[_G_STEP] = gemm_f32.fortran_address(), gemm_f32.MAX_M
    d[_G_TABLE] = table
    d[_G_LHS], d[_G_RHS], d[_G_OUT] = g.lhs, g.rhs, g.out
    # (an lhs stored [k, m]: its rows are columns of the stored matrix, `T` with ld m)
    d[_G_LROW], d[_G_OROW] = size if g.lhs_t else g.k * size, g.n * size
    d[_G_TA], d[_G_TB] = ord("T" if g.rhs_t else "N"), ord("T" if g.lhs_t else "N")
    d[_G_N], d[_G_K], d[_G_M] = g.n, g.k, g.m
    d[_G_LDA], d[_G_LDB], d[_G_LDC] = g.k if g.rhs_t else g.n, g.m if g.lhs_t else g.k, g.n
    d.view(np.uint8)[_G_ALPHA * 8:_G_ALPHA * 8 + size] = np.ones(1, dt).view(np.uint8)
    return d  # beta: 0.0 (all zero bits)


def gemm_step(g: Gemm) -> int:
    """The function a step runs for GEMM `g` with its descriptor: gemm_small's JIT loop
    nest for a small product (it reads the descriptor's table and slots), else gemm_rows
    (BLAS)."""
    return g.small.rows_address if g.small is not None else int(_runtime()[2])


def steps(region: Region, table: int, kernel_address: dict[str, int]
          ) -> tuple[int, list[np.ndarray]]:
    """(address of the steps array for pointer table `table`, the arrays to keep alive)."""
    words = [len(region.members)]
    keep = []
    for m in region.members:
        if m.kernel is not None:
            words += [kernel_address[m.kernel.name], table]
        else:
            assert m.gemm is not None
            d = gemm_descriptor(m.gemm, table)
            keep.append(d)
            words += [gemm_step(m.gemm), d.ctypes.data]
    arr = np.array(words, np.int64)
    keep.append(arr)
    return arr.ctypes.data, keep


__all__ = ["Region", "Member", "Gemm", "gemm_of", "gemm_member", "kernel_member", "plan",
           "wide_alone", "rhs_alone", "batched_gemm_of",
           "steps", "run_function", "cuts", "gemm_descriptor", "gemm_rows_address", "gemm_step",
           "MIN_ROWS_PER_THREAD", "MIN_ROWS_PER_CHUNK", "MIN_ROWS_PER_HALF", "WIDE_RHS_BYTES"]
