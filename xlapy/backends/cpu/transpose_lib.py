"""Kernels that are one transpose of a buffer, nothing fused: a call to a routine built once
per process instead of a loop nest of their own.

A generated transpose kernel below tile_emit.MIN_BYTES read its operand down the columns one
scalar at a time: a 256 x 256 f32 `x.T` ran 64 us (XLA 15-19), f64 141 us, and its cold
compile was 12 ms (f32), 23 ms (bf16), 53 ms (int8: 40 ms of it LLVM's loop vectorizer
reshaping strided byte loads). JAX writes such transposes around every LAPACK call and
wherever a dot does not absorb one. Here the kernel is a stub that calls `xlapy_transpose<E>`
for its E-byte elements, moved as integers (bits, NaN payloads and all, untouched): 8 x 8
blocks through register transposes (tile_emit.transpose8), each block's 8 rows read as
vectors and its 8 columns stored as vectors, in strips of a cache line of rows so every
line of the output is written whole before the strip moves on; scalar loops for the edges.
The stub keeps the kernel interface, so thread splits, regions and kernel sequences run it
as any other kernel.

The stub reads the routine's address from a global of its module, set once the module is
linked (Kernel.cells): the module's text, and so its compile-cache key, stays the same in
every process. Only code that runs in this process calls the routine: xlapy.aot's compiles
(options.routines off: it links the kernels into an object of their own) and targets other
than the host keep generated kernels. Loop bodies and branches call it too (their kernels
are steps of the native driver, stub and all).

A transpose of an expression (JAX's mask of a factor, `select(iota >= iota, x, 0).T`,
around each LAPACK call) read its operand down the columns, a scalar at a time: 256 x 256
f32 in 100 us. When such a transpose is its kernel's root, the fusion plan computes the
expression in its own order into a buffer (a vectorized kernel) and the routine moves it:
fusion_plan.routine_operands.
"""

from __future__ import annotations

import ctypes
import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import cache, target
from xlapy.backends.cpu.kernels import Kernel
from xlapy.backends.cpu.llvm_util import (
    I8,
    I64,
    KERNEL_TYPE,
    VOID,
    for_range,
    i64,
    new_module,
)
from xlapy.backends.cpu.once import once
from xlapy.backends.cpu.tile_emit import transpose8
from xlapy.ir import Instruction

NAME = "xlapy_transpose"
ELEMENT_BYTES = (1, 2, 4, 8)
#: src, dst, rows, cols, src row stride, dst row stride (elements), batch, batch strides.
ROUTINE_T = ir.FunctionType(VOID, [I8.as_pointer()] * 2 + [I64] * 7)
#: Output elements from which a transpose is a routine call (below it a kernel of its own
#: compiles to a few instructions and runs as fast).
MIN_ELEMENTS = 256
#: Elements from which `swap_last` calls the routine: its ctypes call costs ~7 us, numpy's
#: copy of 64 x 64 f32 1.7, of 128 x 128 10.4 (the routine 9.5), of 256 x 256 54 (16).
SWAP_MIN_ELEMENTS = 1 << 14
#: Input columns below which a kernel without batch dimensions splits its threads' work by
#: bands of ROW_BAND input rows, not of columns: [1024, 256, 8] -> [8, 1024, 256] (an
#: einsum's outer product moved to the front) ran its 8 columns as 4 + 4 through the scalar
#: edge loops, 1.48 ms; swap_last on the same matrix 0.28.
NARROW_COLUMNS = 64
ROW_BAND = 64
#: Elements from which `swap_last` splits x's rows over `threads`.
SWAP_SPLIT_ELEMENTS = 1 << 15


def _emit_routine(mod: ir.Module, e: int) -> None:
    """dst[b][j][i] = src[b][i][j] for i < rows, j < cols, b < batch (row strides src_ld,
    dst_ld; batch strides src_bs, dst_bs; all in elements)."""
    t = ir.IntType(8 * e)
    vt = ir.VectorType(t, 8)
    fn = ir.Function(mod, ROUTINE_T, name=f"{NAME}{e}")
    src, dst, rows, cols, sld, dld, batch, sbs, dbs = fn.args
    for a in (src, dst):
        a.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ps, pd = b.bitcast(src, t.as_pointer()), b.bitcast(dst, t.as_pointer())
    r8, c8 = b.and_(rows, i64(-8)), b.and_(cols, i64(-8))
    strip = max(8, 64 // e)  # rows per strip: a whole line of the output per column

    def at(p: ir.Value, i: ir.Value, ld: ir.Value, j: ir.Value) -> ir.Value:
        return b.gep(p, [b.add(b.mul(i, ld, flags=["nsw"]), j, flags=["nsw"])], inbounds=True)

    def scalar(s0: ir.Value, d0: ir.Value, i_lo: ir.Value, i_hi: ir.Value, j_lo: ir.Value,
               j_hi: ir.Value, name: str) -> None:
        with for_range(b, i_lo, i_hi, name=f"{name}i") as i:
            with for_range(b, j_lo, j_hi, name=f"{name}j") as j:
                b.store(b.load(at(s0, i, sld, j)), at(d0, j, dld, i))

    with for_range(b, i64(0), batch, name="bt") as k:
        s0 = b.gep(ps, [b.mul(k, sbs, flags=["nsw"])], inbounds=True)
        d0 = b.gep(pd, [b.mul(k, dbs, flags=["nsw"])], inbounds=True)
        with for_range(b, i64(0), r8, name="ib", step=strip) as ib:
            nxt = b.add(ib, i64(strip))
            ie = b.select(b.icmp_signed("<", nxt, r8), nxt, r8)
            with for_range(b, i64(0), c8, name="j0", step=8) as j0:
                with for_range(b, ib, ie, name="i0", step=8) as i0:
                    vals = [b.load(b.bitcast(at(s0, b.add(i0, i64(q)), sld, j0),
                                             vt.as_pointer()), align=e) for q in range(8)]
                    for q, col in enumerate(transpose8(b, vals)):
                        b.store(col, b.bitcast(at(d0, b.add(j0, i64(q)), dld, i0),
                                               vt.as_pointer()), align=e)
        scalar(s0, d0, i64(0), r8, c8, cols, "ec")  # the columns past the last block
        scalar(s0, d0, r8, rows, i64(0), cols, "er")  # the rows past the last block
    b.ret_void()


_CALL = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 2 + [ctypes.c_int64] * 7))


@once
def _routine(tgt: target.CpuTarget, e: int) -> tuple[Any, int, Any]:
    """(engine, address, ctypes function) of the routine for e-byte elements on target
    `tgt` (one build per target and size a process uses: 10 ms for 4 or 8 bytes, 15-26 ms
    for 2 or 1, once; later processes load it from the cache)."""
    def emit() -> ir.Module:
        mod = new_module(f"{NAME}{e}")
        _emit_routine(mod, e)
        return mod

    eng = cache.library_engine((NAME, e), emit, f"{NAME}-light", light=True,
                               vectorize=False, exports=[f"{NAME}{e}"])
    addr = eng.address(f"{NAME}{e}")
    return eng, addr, _CALL(addr)


def address(e: int) -> int:
    """The address of the routine for e-byte elements on the current target (built once)."""
    return int(_routine(target.current(), e)[1])


def swap_last(x: np.ndarray, out: np.ndarray | None = None, threads: int = 1) -> np.ndarray:
    """np.ascontiguousarray(np.swapaxes(x, -1, -2)) (a batch of matrices in Fortran order
    for LAPACK, or back), through the routine where it takes x: numpy's copy reads down the
    columns one element at a time (256 x 256 f32: 54-68 us; here 12-16). `out`: a
    C-contiguous array of the result's shape and type to write it into. `threads`: x's rows
    split over the pool from SWAP_SPLIT_ELEMENTS (cuts at multiples of 8: the routine's
    blocks whole; fft_jit's two-axis transforms on two threads ran 1.1-1.6x DUCC's time with
    one thread's transposes)."""
    if x.ndim < 2 or x.size < SWAP_MIN_ELEMENTS or x.dtype.itemsize not in ELEMENT_BYTES or \
            not x.flags.c_contiguous or not target.current().runs_here:
        # (the target asked last: ~3 us a call, a small LAPACK call's operands take this)
        if out is None:
            return np.ascontiguousarray(np.swapaxes(x, -1, -2))
        np.copyto(out, np.swapaxes(x, -1, -2))
        return out
    t = target.current()
    *lead, r, c = x.shape
    if out is None:
        out = np.empty((*lead, c, r), x.dtype)
    assert out.shape == (*lead, c, r) and out.dtype == x.dtype and out.flags.c_contiguous
    e, nb = x.dtype.itemsize, math.prod(lead)
    parts = min(threads, r // 8) if x.size >= SWAP_SPLIT_ELEMENTS else 1
    if parts < 2:
        _routine(t, e)[2](x.ctypes.data, out.ctypes.data, r, c, c, r, nb, r * c, r * c)
        return out
    from xlapy.backends.cpu import parallel

    src, dst = x.ctypes.data, out.ctypes.data
    cuts = [r * k // parts // 8 * 8 for k in range(parts)] + [r]
    jobs = [(_routine(t, e)[1], (src + lo * c * e, dst + lo * e, hi - lo, c, c, r, nb, r * c,
                                 r * c)) for lo, hi in zip(cuts, cuts[1:])]
    parallel.pool(threads).share(jobs, threads, keep=(x, out))
    return out


def c_order(x: np.ndarray) -> np.ndarray:
    """x itself if C-contiguous, else a C-contiguous copy: through the routine when x is a
    C-contiguous array with its last two axes swapped (a dot's operand read transposed:
    dot_general(g, w) contracting w's last dimension; numpy's copy of a 512 x 512 f32 one
    took 0.3 ms, most of the product's time)."""
    if x.flags.c_contiguous:
        return x
    if x.ndim >= 2 and np.swapaxes(x, -1, -2).flags.c_contiguous:
        return swap_last(np.swapaxes(x, -1, -2))
    return np.ascontiguousarray(x)


def transposed_view(shape: Sequence[int], perm: Sequence[int], e: int = 1) -> np.ndarray:
    """A view of no memory with the layout of a C-contiguous array of `shape` (e-byte
    elements) transposed by `perm`: its strides, contiguity and reshapes, never its data."""
    cs = [e * math.prod(shape[d + 1:]) for d in range(len(shape))]
    return np.lib.stride_tricks.as_strided(np.empty(0, np.uint8),
                                           tuple(shape[p] for p in perm),
                                           tuple(cs[p] for p in perm))


@functools.lru_cache(maxsize=512)
def _gather_plan(shape: tuple[int, ...], perm: tuple[int, ...], e: int, t: target.CpuTarget
                 ) -> tuple[int, tuple[tuple[int, int], ...], tuple[int, ...]] | None:
    """(the routine's address on target `t`, per-call (source, destination) byte offsets,
    its other arguments) that
    copy a C-contiguous array of `shape` into x.transpose(perm)'s C order, or None where
    the routine does not help (the innermost axis stays innermost: numpy's copy moves
    whole rows)."""
    src = transposed_view(shape, perm, e)
    if len(shape) < 2 or src.strides[-1] == e or math.prod(shape) < MIN_ELEMENTS:
        return None
    unit = [a for a in range(len(perm) - 1) if src.strides[a] == e and src.shape[a] > 1]
    if not unit:
        return None
    dst = transposed_view(src.shape, range(len(perm)), e)
    src, dst = np.moveaxis(src, unit[-1], -2), np.moveaxis(dst, unit[-1], -2)
    # src[..., p, q] (p of unit stride) is the routine's [q, p] matrix, transposed into
    # dst[..., p, q]: the last lead axis its batch, the others one call each
    *lead, cols, rows = src.shape
    bs = (src.strides[-3] // e, dst.strides[-3] // e) if lead else (0, 0)
    args = (rows, cols, src.strides[-1] // e, dst.strides[-2] // e, lead[-1] if lead else 1,
            *bs)
    offsets = tuple((sum(i * s for i, s in zip(idx, src.strides)),
                     sum(i * s for i, s in zip(idx, dst.strides)))
                    for idx in np.ndindex(*lead[:-1]))
    return _routine(t, e)[1], offsets, args


def gathered(x: np.ndarray, perm: Sequence[int], threads: int = 1) -> np.ndarray:
    """np.ascontiguousarray(x.transpose(perm)) (a dot operand with its dimensions in GEMM
    order), through the routine where the innermost axis moves: numpy's copy then reads
    one element at a time down strides (an attention's k of [2, 128, 4, 64] as [8, 64, 128]
    products: 56 us; here ~20). Otherwise the view itself (a reshape copies it, or BLAS reads
    it with its strides)."""
    v = x.transpose(perm)
    if v.flags.c_contiguous or not x.flags.c_contiguous or x.itemsize not in ELEMENT_BYTES:
        return v
    t = target.current()
    plan = _gather_plan(x.shape, tuple(perm), x.itemsize, t) if t.runs_here else None
    if plan is None:
        return v
    fn, offsets, args = plan
    out = np.empty(v.shape, v.dtype)
    xa, oa = x.ctypes.data, out.ctypes.data
    jobs = [(fn, (xa + so, oa + do, *args)) for so, do in offsets]
    if threads > 1 and len(jobs) > 1 and x.size >= SWAP_SPLIT_ELEMENTS:
        from xlapy.backends.cpu import parallel

        parallel.pool(threads).share(jobs, threads, keep=(x, out))
    else:
        from xlapy.backends.cpu.threads import call

        for f, a in jobs:
            call(f, *a)
    return out


def pattern(instr: Instruction) -> tuple[int, int, int, int] | None:
    """(leading identity dimensions nb, batch, rows, cols) when transpose `instr` is
    out[b.., J.., I..] = in[b.., I.., J..] (the first nb dimensions kept, then the two
    groups I and J swapped, J not empty, the innermost dimension moved); else None."""
    perm = list(instr.attrs.permutation)
    r = len(perm)
    dims = list(instr.operands[0].shape.dimensions)
    nb = 0
    while nb < r and perm[nb] == nb:
        nb += 1
    if nb >= r - 1:
        return None
    g = perm[nb] - nb  # the I group's size: J starts at input dimension nb + g
    want = list(range(nb + g, r)) + list(range(nb, nb + g))
    if g <= 0 or perm[nb:] != want:
        return None
    return (nb, math.prod(dims[:nb]), math.prod(dims[nb:nb + g]),
            math.prod(dims[nb + g:]))


def takes(root: Instruction, leaves: dict[int, int], routines: bool) -> bool:
    """Whether kernel `root` is a transpose of one leaf this module runs (docstring);
    `routines`: the compile's kernels may call it (options.routines)."""
    return routines and id(root.operands[0]) in leaves and routine_shape(root) if \
        root.opcode == "transpose" else False


def routine_shape(instr: Instruction) -> bool:
    """Whether a transpose is one the routine runs, given a buffer to read, on this host."""
    if instr.opcode != "transpose" or not instr.shape.is_array or \
            not target.current().runs_here:
        return False
    found = pattern(instr)
    # matrices under a block a side run the routine's scalar edge loops alone, slower than a
    # kernel whose constant extents LLVM unrolls (1024 of 64 x 3 f32: 0.137 ms, the kernel
    # 0.030)
    return instr.shape.dtype.itemsize in ELEMENT_BYTES and instr.shape.num_elements >= \
        MIN_ELEMENTS and found is not None and min(found[2:]) >= 8


#: The fewest elements of a row (of a row reduction reading a transpose) worth the buffer.
ROW_READ_MIN = 64


def read_by_rows(instr: Instruction) -> str | None:
    """Why transpose `instr` gets a buffer, the routine writing it, when it moves the
    innermost dimension and a row reduction reads it (through element-wise ops): the row
    kernel read each row down a column of the operand, a cache line per element
    (jax.nn.softmax(x.T): 1.40x XLA's time over 1024 x 1024), where a buffer's rows are
    contiguous. None otherwise."""
    from xlapy.passes.fusion_decision import is_elementwise

    rank = instr.shape.rank if instr.shape.is_array else 0
    if not routine_shape(instr) or tuple(instr.attrs.permutation)[-1] == rank - 1 or \
            instr.shape.dimensions[-1] < ROW_READ_MIN:
        return None
    todo, seen = [instr], set()
    while todo:
        v = todo.pop()
        for u in v.users:
            if id(u) in seen or u.shape.dimensions != instr.shape.dimensions[
                    :u.shape.rank if u.opcode == "reduce" else None]:
                continue
            seen.add(id(u))
            if u.opcode == "reduce" and tuple(u.attrs.dimensions) == (rank - 1,):
                return (f"transposed rows that row reduction %{u.name} reads: a buffer the "
                        "transpose routine writes, not a column read per row")
            if is_elementwise(u) or u.opcode == "convert":
                todo.append(u)
    return None


class TransposeEmitter:
    """A kernel `name` (KERNEL_TYPE) for `root`, one call of the routine per [begin, end)
    of its outer dimension (`takes` must hold)."""

    def __init__(self, mod: ir.Module, name: str, root: Instruction,
                 leaves: dict[int, int], out_slot: int) -> None:
        self.mod, self.name, self.root, self.out_slot = mod, name, root, out_slot
        self.in_slot = leaves[id(root.operands[0])]

    def build(self) -> Kernel:
        root = self.root
        nb, _, rows, cols = pattern(root)  # type: ignore[misc]
        dims: Sequence[int] = root.shape.dimensions
        e = root.shape.dtype.itemsize
        addr = _routine(target.current(), e)[1]
        # The routine's address from a global set once the kernel is linked (Kernel.cells):
        # a constant in the code would make the module's text, and so its disk-cache key,
        # differ in every process.
        cell = ir.GlobalVariable(self.mod, I64, name=f"{self.name}_routine")
        cell.initializer = i64(0)
        fn = ir.Function(self.mod, KERNEL_TYPE, name=self.name)
        fn.args[0].add_attribute("noalias")
        table, begin, end = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        src, dst = (b.load(b.gep(table, [i64(s)])) for s in (self.in_slot, self.out_slot))
        count = b.sub(end, begin)
        outer = dims[0]
        if not nb and cols < NARROW_COLUMNS:  # bands of the input's rows (of the output's
            # columns): a band of few columns each ran the routine's scalar edge loops
            outer = -(-rows // ROW_BAND)
            row0 = b.mul(begin, i64(ROW_BAND))
            stop = b.mul(end, i64(ROW_BAND))
            stop = b.select(b.icmp_signed("<", stop, i64(rows)), stop, i64(rows))
            args = [b.gep(src, [b.mul(row0, i64(cols * e))]), b.gep(dst, [b.mul(row0, i64(e))]),
                    b.sub(stop, row0), i64(cols), i64(cols), i64(rows), i64(1), i64(0), i64(0)]
        elif nb:  # the outer dimension is the first batch dimension: whole matrices each
            per = math.prod(dims[1:nb])  # matrices per index of it
            first = b.mul(begin, i64(per * rows * cols * e))
            args = [b.gep(src, [first]), b.gep(dst, [first]), i64(rows), i64(cols),
                    i64(cols), i64(rows), b.mul(count, i64(per)), i64(rows * cols),
                    i64(rows * cols)]
        else:  # the outer dimension is J's first: a band of the input's columns
            inner = math.prod(dims[1:]) // rows  # columns per index of it
            col0 = b.mul(begin, i64(inner))
            args = [b.gep(src, [b.mul(col0, i64(e))]),
                    b.gep(dst, [b.mul(col0, i64(rows * e))]), i64(rows),
                    b.mul(count, i64(inner)), i64(cols), i64(rows), i64(1), i64(0), i64(0)]
        b.call(b.inttoptr(b.load(cell), ROUTINE_T.as_pointer()), args)
        b.ret_void()
        return Kernel(self.name, root, [self.in_slot], self.out_slot, outer,
                      root.shape.num_elements, True, explicit=True,
                      cells=((cell.name, addr),))


__all__ = ["TransposeEmitter", "c_order", "gathered", "pattern", "routine_shape", "swap_last",
           "takes", "transposed_view",
           "ELEMENT_BYTES", "MIN_ELEMENTS", "SWAP_MIN_ELEMENTS"]
