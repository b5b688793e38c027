"""A column-split GEMM's element-wise consumer (bias, relu) applied to each column chunk by
the thread that has just computed it, while the chunk is still in that core's cache.

A wide GEMM whose rhs is too big to join a row-parallel region (regions.WIDE_RHS_BYTES: the
MLP's 16-64 MB layers) runs as fixed column chunks, one single-threaded BLAS call each
(blas.gemm). Its consumer kernel (JAX's `max(x @ w + b, 0)`) then ran as a second
thunk split by rows: a second hand-off to the worker pool, and half of each thread's rows
written by the other core. Here the kernel's root is computed by the GEMM: each chunk's job
calls BLAS, then this module's loop over the chunk's columns of every row (`chunk`), and the
root takes the GEMM's buffer. The expression is conv_epilogue's (`match`: scalar constants,
per-column buffers such as a bias, buffers read at the output's own index, elementwise.py's
own emitters), so the bits are the unfused kernel's; the chunks are blas.split's, so they
depend on the shape alone, never on the thread count.

Per executable, one module holds the epilogue functions and the job that runs a chunk,
`xlapy_dot_chunk(i64* d)`: d's BLAS routine with its 13 Fortran arguments, then d's epilogue
on the chunk's columns. (The job compiled once per process for the host instead cost an
x86-64-v3 process its host runtime: the MLP's first compile 19 -> 95 ms.)
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import (
    blas,
    cache,
    conv_epilogue,
    flush_ftz,
    lanes,
    regions,
)
from xlapy.backends.cpu.dot_shapes import plain_dot
from xlapy.backends.cpu.fp_env import restore_mxcsr, set_ftz_daz
from xlapy.backends.cpu.llvm_util import (
    F32,
    F64,
    I8P,
    I64,
    VOID,
    Engine,
    for_range,
    i64,
    module_text,
    new_module,
)
from xlapy.ir import Computation, Instruction
from xlapy.types import ElementType as ET

#: The job a pool thread runs per chunk (see the module docstring).
CHUNK_NAME = "xlapy_dot_chunk"
# Descriptor words of a chunk: the BLAS routine, its 13 argument addresses, the epilogue,
# then the epilogue's arguments: out, leaf table, row stride (elements), rows, lo, hi.
_D_BLAS, _D_ARGS, _D_EPI = 0, 1, 14
_D_OUT, _D_TABLE, _D_LD, _D_ROWS, _D_LO, _D_HI = range(15, 21)
_D_WORDS = 21
_CHUNK_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@dataclass
class DotEpilogue:
    """Dot `dot` computes `expr.root` (its consumer kernel, whose other members are
    `members`) column chunk by column chunk; `name` is its epilogue function."""

    dot: Instruction
    expr: conv_epilogue.Expr
    members: list[Instruction]
    name: str

    @property
    def root(self) -> Instruction:
        return self.expr.root

    @property
    def parts(self) -> list[Instruction]:
        """The instructions it computes besides the dot that would have had a thunk: the
        kernel's root (the values inside the kernel never had one)."""
        return [self.expr.root]

    @property
    def leaves(self) -> list[Instruction]:
        return [leaf for leaf, _ in self.expr.leaves]


def column_split(dot: Instruction) -> bool:
    """A plain 2-D f32/f64 GEMM that blas.gemm cuts into column chunks and no row-parallel
    region takes (regions.wide_alone): where an epilogue per chunk applies."""
    d = plain_dot(dot)
    if d is None:
        return False
    m, n, k, _, f64 = d
    if min(m, n, k) == 0 or max(m, n, k) > (1 << 31) - 1 or m * n * k < blas.SPLIT_FLOPS:
        return False
    return regions.wide_alone(m, n, k, f64) and len(blas.split(m, n)) > 2


def plan(comp: Computation, fusion: Any, outputs: AbstractSet[int]) -> dict[int, DotEpilogue]:
    """id(dot) -> its epilogue, for each column-split dot (not a result) that one kernel alone
    reads, when conv_epilogue.match can express that kernel over the dot's values (per
    column: dimension 1) and every buffer it reads (a constant too: its slot is made in
    program order) comes before the dot."""
    pos = {id(i): k for k, i in enumerate(comp.instructions)}
    by_id = {id(i): i for i in comp.instructions}
    roots = {id(r): [m for m in fusion.members(r) if m is not r] for r in fusion.kernel_roots()
             if id(r) not in fusion.row_reduces}
    kernel_of: dict[int, list[int]] = {}
    for r, inside in roots.items():
        for m in [*inside, by_id[r]]:
            kernel_of.setdefault(id(m), []).append(r)
    out: dict[int, DotEpilogue] = {}
    for dot in comp.instructions:
        if dot.opcode != "dot_general" or id(dot) in outputs or not dot.users or \
                not column_split(dot):
            continue
        ks = {k for u in dot.users for k in kernel_of.get(id(u), [None])}  # type: ignore[list-item]
        if len(ks) != 1 or None in ks or any(len(kernel_of.get(id(u), [])) != 1
                                             for u in dot.users):
            continue
        r = next(iter(ks))
        members = roots[r]
        expr = conv_epilogue.match(dot, by_id[r], {id(m) for m in members}, 1)
        if expr is None or any(pos[id(leaf)] > pos[id(dot)] for leaf, _ in expr.leaves):
            continue
        out[id(dot)] = DotEpilogue(dot, expr, members, f"dot_epilogue{len(out)}")
    return out


def _emit_epilogue(mod: ir.Module, epi: DotEpilogue, name: str) -> None:
    """void name(T* out, i8** leaves, i64 ld, i64 rows, i64 lo, i64 hi): out[r, c] = root at
    (r, c) for every row r and column c in [lo, hi), from out's dot values, in place."""
    t = F64 if epi.dot.shape.element_type == ET.F64 else F32
    fn = ir.Function(mod, ir.FunctionType(VOID, [t.as_pointer(), I8P.as_pointer(), I64, I64,
                                                 I64, I64]), name=name)
    out, table, ld, rows, lo, hi = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    saved = set_ftz_daz(b)  # the ops assume what a kernel's do (xlapy.denormal)
    width = max(1, lanes.vector_width() * 32 // (64 if t == F64 else 32))
    body = b.sub(hi, lo)
    vec_end = b.add(lo, b.mul(b.sdiv(body, i64(width)), i64(width)))

    def columns(r_at: ir.Value, start: ir.Value, stop: ir.Value, n: int) -> None:
        vt = ir.VectorType(t, n)
        with for_range(b, i64(0), b.sdiv(b.sub(stop, start), i64(n)), f"c{n}") as j:
            c = b.add(start, b.mul(j, i64(n)))
            at = b.add(r_at, c)
            ptr = b.bitcast(b.gep(out, [at]), vt.as_pointer())
            val = b.load(ptr)
            val.align = 8 if t == F64 else 4
            res = epi.expr.emit(b, val, c, at, table)
            st = b.store(res, ptr)
            st.align = 8 if t == F64 else 4

    d = plain_dot(epi.dot)
    assert d is not None
    cuts = blas.split(d[0], d[1])
    tail = any((c1 - c0) % width for c0, c1 in zip(cuts, cuts[1:]))
    with for_range(b, i64(0), rows, "r") as r, flush_ftz.in_kernel():  # (FTZ set above)
        r_at = b.mul(r, ld)
        columns(r_at, lo, vec_end, width)
        if tail:  # a chunk's width is not a multiple of the vector (known from the shape)
            columns(r_at, vec_end, hi, 1)
    restore_mxcsr(b, saved)
    b.ret_void()


def _emit_chunk(mod: ir.Module, name: str) -> None:
    """void name(i64* d): BLAS on the chunk, then the epilogue d names."""
    i64p = I64.as_pointer()
    fn = ir.Function(mod, ir.FunctionType(VOID, [i64p]), name=name)
    d = fn.args[0]
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def word(k: int) -> ir.Value:
        return b.load(b.gep(d, [i64(k)]))

    blas_t = ir.FunctionType(VOID, [I8P] * 13)
    b.call(b.inttoptr(word(_D_BLAS), blas_t.as_pointer()),
           [b.inttoptr(word(_D_ARGS + j), I8P) for j in range(13)])
    epi_t = ir.FunctionType(VOID, [I8P, I8P.as_pointer(), I64, I64, I64, I64])
    b.call(b.inttoptr(word(_D_EPI), epi_t.as_pointer()),
           [b.inttoptr(word(_D_OUT), I8P), b.inttoptr(word(_D_TABLE), I8P.as_pointer()),
            word(_D_LD), word(_D_ROWS), word(_D_LO), word(_D_HI)])
    b.ret_void()


class Compiled:
    """An executable's dot epilogues and the chunk job, one module (compiled under its target
    and denormal mode; on one thread: parallel_compile's threads cost the MLP's first compile
    ~10 ms to start, more than these small functions take). Epilogues whose code is the same
    (the MLP's two bias + relu layers of one width) share one function: LLVM took ~2 ms per
    function here, ~1 ms even for the chunk job."""

    def __init__(self, epilogues: Sequence[DotEpilogue]) -> None:
        mod = new_module("xlapy_dot_epilogues")
        bodies: dict[str, str] = {}  # the function's text with a neutral name -> its name
        self.names: dict[str, str] = {}  # epilogue name -> the function it runs
        for epi in epilogues:
            probe = new_module("probe")
            _emit_epilogue(probe, epi, "f")
            body = str(probe.get_global("f"))
            if body not in bodies:
                bodies[body] = epi.name
                _emit_epilogue(mod, epi, epi.name)
            self.names[epi.name] = bodies[body]
        _emit_chunk(mod, CHUNK_NAME)
        text = module_text(mod)
        exports = [*bodies.values(), CHUNK_NAME]
        key = cache.key(text, "light")
        obj = cache.get(key)
        self.engine = Engine(text, obj=obj, light=True, exports=exports)
        if obj is None:
            cache.put(key, self.engine.object)
        self.chunk = self.engine.address(CHUNK_NAME)
        self.addresses = {e: self.engine.address(f) for e, f in self.names.items()}


def runner(epi: DotEpilogue, compiled: Compiled, threads: int,
           pool: Any) -> Any:
    """run(x, y, out, *leaf arrays): out = the epilogue's root of x @ y (y [k, n], or [n, k]
    for a dot contracting its rhs' dimension 1), chunk by chunk on `threads` threads."""
    d = plain_dot(epi.dot)
    assert d is not None
    m, n, _, rhs_t, _ = d
    cuts = blas.split(m, n)
    fn_epi = compiled.addresses[epi.name]
    fn_chunk = compiled.chunk
    call_chunk = _CHUNK_T(fn_chunk)
    leaves = epi.expr.leaves

    def run(x: np.ndarray, y: np.ndarray, out: np.ndarray, *arrays: np.ndarray) -> None:
        b = y.T if rhs_t else y
        keep: list[Any] = []
        tab = _table(n, leaves, arrays, keep) if leaves else 0
        descs = np.zeros((len(cuts) - 1, _D_WORDS), np.int64)
        for j, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
            call = blas._gemm_args(x, b[:, lo:hi], out[:, lo:hi], 0.0)
            assert call is not None
            f, args, held = call
            keep.append(held)
            row = descs[j]
            row[_D_BLAS] = int(ctypes.cast(f, ctypes.c_void_p).value or 0)
            row[_D_ARGS:_D_ARGS + 13] = [int(a.value or 0) if isinstance(a, ctypes.c_void_p)
                                         else ctypes.addressof(a) for a in args]
            row[_D_EPI] = fn_epi
            row[_D_OUT], row[_D_TABLE], row[_D_LD] = out.ctypes.data, tab, n
            row[_D_ROWS], row[_D_LO], row[_D_HI] = m, lo, hi
        blas._single_thread()
        if threads < 2:
            for j in range(len(descs)):
                call_chunk(descs[j].ctypes.data)
            return
        p = pool()
        blas._pool_single(p)
        p.share([(fn_chunk, (int(descs[j].ctypes.data),)) for j in range(len(descs))],
                threads, (descs, keep))

    return run


def _table(n: int, leaves: Sequence[tuple[Instruction, str]], arrays: Sequence[np.ndarray],
           keep: list[Any]) -> int:
    """The address of the leaves' pointer table for one call: per-column leaves as [n]
    arrays (a broadcast one copied out), the others as they are (C-contiguous buffers)."""
    ptrs = []
    for (_, kind), a in zip(leaves, arrays):
        a = np.ascontiguousarray(np.broadcast_to(a.reshape(-1), (n,))) if kind == "channel" \
            else np.ascontiguousarray(a)
        keep.append(a)
        ptrs.append(a.ctypes.data)
    tab = np.array(ptrs, np.int64)
    keep.append(tab)
    return int(tab.ctypes.data)


def leaf_slots(epi: DotEpilogue, slot: Mapping[int, int]) -> list[int]:
    return [slot[id(leaf)] for leaf in epi.leaves]


__all__ = ["DotEpilogue", "Compiled", "plan", "runner", "column_split", "leaf_slots",
           "CHUNK_NAME"]
