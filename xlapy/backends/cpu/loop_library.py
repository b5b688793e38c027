"""Sorts and top-k selections (and, through loop_lapack.py, LAPACK calls; through
loop_callback.py, any other library thunk of a loop: FFTs, convolutions, dots no native step
takes, LAPACK calls without a step of their own, a lone integer sort key) as steps of a
native loop (native_loop.py).

On the Python path a sort runs its JIT function (sort_emit.py, topk_emit.py) from a thunk
that lays the operands out in rows, then gathers every operand through the permutation with
numpy into fresh arrays. A loop whose body sorted or took a top-k therefore ran through
Python: ~140 us an iteration, a fori_loop of lax.top_k over 1000 logits 26x XLA's time, a
lax.map of jnp.sort 9x. As a step, the same function runs from `xlapy_sort_step` with the
loop's buffers: the permutation into scratch rows of the loop's own, then the gather (each
element copied as its bytes, so any element type) and, for chlo.top_k, the s32 indices.
The permutation is the Python path's (the same function over the same rows), so are the
bits.

A step is planned only where the Python path runs the function on one thread (`Native`, set
by the planners: the sort along the last dimension, small enough not to be split): a big
sort splits its rows over the pool there, and an iteration's Python costs little beside it.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import cache, fft_jit, loop_callback
from xlapy.backends.cpu.llvm_util import I8P, I64, KERNEL_TYPE, for_range, i64, new_module, on_host
from xlapy.backends.cpu.once import once
from xlapy.backends.cpu.thunks import ptr

if TYPE_CHECKING:
    from xlapy.backends.cpu.executable import CpuExecutable
    from xlapy.ir import Instruction

NAME = "xlapy_sort_step"
# Descriptor words (i64): the table, the mode (0: fn(ops, r0, r1, n, perm, tmp), a full sort;
# 1: fn(ops, r0, r1, n, k, perm), a selection), fn, rows, n, k (elements gathered per row),
# perm, tmp, the operand count, the results' row stride, the s32 indices (or 0), the operand
# pointer array; then per operand its slot, result buffer and element bytes.
(_TABLE, _MODE, _FN, _ROWS, _N, _K, _PERM, _TMP, _NOPS, _OSTRIDE, _INDICES, _OPS) = range(12)
_HEAD = 12


@dataclass(frozen=True)
class Native:
    """What a sort's thunk runs, for a step: its function (`address`, kept alive by
    `engine`), the mode (descriptor words above), rows x n operands, k elements kept per
    row in results of row stride `out_stride`, and whether s32 indices are a result."""

    mode: int
    address: int
    engine: Any
    rows: int
    n: int
    k: int
    out_stride: int
    indices: bool = False


@dataclass
class LibStep:
    """A sort, top-k or LAPACK call of a cond/body as a native step: the instruction, its
    Native (a LapackNative: loop_lapack.py) and its operands' slots."""

    instr: Instruction
    native: Any
    ins: list[int]


def native(instr: Instruction, lib: tuple[str, Any], loop_part: bool) -> Any:
    """The Native of a library thunk `lib` (kind, run) a step may run: its planner's. A
    sort numpy runs (lapack._sort: one compare of operand 0) gets sort_emit's function too
    when `instr` is in a loop's cond or body (`loop_part`): the unique stable order, the
    same bits, so a loop of integer sorts stays native (only there: one more module)."""
    if lib[0] == "lapack":  # (loop_lapack.py; else a callback, loop_callback.py)
        return (getattr(lib[1], "loop_native", None) or loop_callback.Callback(lib[1])) \
            if loop_part else None
    if loop_part and (step := getattr(lib[1], "fft_step", None)) is not None:
        return step  # (fft_jit.Step: a transform of our own FFT function)
    if loop_part and (call := loop_callback.native(instr.opcode, lib[1])) is not None:
        return call  # (loop_callback.py)
    got = getattr(lib[1], "native", None)
    if got is None and loop_part and hasattr(lib[1], "into") and len(instr.operands) == 1:
        return loop_callback.Callback(lib[1].into, True)  # (numpy's SIMD sort of one key)
    if got is None and loop_part and lib[0] == "numpy sort":
        from xlapy.backends.cpu import sort_emit

        got = getattr(sort_emit.plan(instr), "native", None)
    return got


def takes(how: str) -> bool:
    """Whether a report line's thunk may be a step (`step` says whether it is: a callback,
    loop_callback.py, where nothing native runs it)."""
    return how.startswith("library ")


def call_step(exe: CpuExecutable, instr: Instruction, run: Any, ins: list[int]) -> None:
    """Record dot/conv thunk `run` (lhs, rhs, out) of a loop's cond or body as a callback
    step (loop_callback.py), where it is one (a dot: where no native step takes it)."""
    cb = loop_callback.native(instr.opcode, run, True) if exe.options.loop_part else None
    if cb is not None:
        exe.lib_steps[instr.name] = LibStep(instr, cb, ins)


def step(exe: CpuExecutable, name: str, how: str) -> LibStep | None:
    """The step of report line (name, how) when every reader of the results has a slot."""
    got = exe.lib_steps.get(name) if takes(how) else None
    if got is None or any(s is None for s in got.ins):
        return None
    instr = got.instr
    if instr.shape.is_tuple:
        if not all(u.opcode == "get_tuple_element" and id(u) in exe.slot for u in instr.users):
            return None
    elif id(instr) not in exe.slot:
        return None
    return got


def reads_one(exe: CpuExecutable, gte: Instruction) -> bool:
    """Whether get_tuple_element `gte` reads a result of a sort step of `exe`."""
    src = gte.operands[0]
    got = exe.lib_steps.get(src.name)
    return got is not None and got.instr is src


def entry(keep: list[Any], exe: CpuExecutable, st: LibStep, table: int,
          failed: list[BaseException], stop: int) -> list[int]:
    """The driver's (function, argument, outer) words of step `st` over the table at
    `table`: the results' buffers, scratch and descriptor made here, kept in `keep`; the
    table's entries of the get_tuple_elements reading the results pointed at the buffers.
    A callback step's error goes to `failed`, the driver's word at `stop` set."""
    instr = st.instr
    shapes = list(instr.shape.tuple_shapes) if instr.shape.is_tuple else [instr.shape]
    tab = (ctypes.c_int64 * exe.num_slots).from_address(table)
    one = None if instr.shape.is_tuple else exe.slot[id(instr)]
    # (one result: the buffer the loop's tables give its slot, when they give one)
    outs = [] if one is not None and tab[one] else \
        [np.empty(tuple(s.dimensions), s.dtype) for s in shapes]
    if one is None:
        for u in instr.users:
            tab[exe.slot[id(u)]] = ptr(outs[u.attrs.index])
    elif outs:
        tab[one] = ptr(outs[0])
    keep.append(outs)
    res = [ptr(o) for o in outs] if outs else [int(tab[one])]
    if isinstance(st.native, Native):
        return _sort_entry(keep, st, st.native, res, shapes, table)
    if isinstance(st.native, loop_callback.Callback):
        return loop_callback.entry(keep, st, res, table, exe.num_slots, failed, stop)
    if isinstance(st.native, fft_jit.Step):
        return fft_jit.entry(keep, st.native, st.ins[0], res[0], table)
    from xlapy.backends.cpu import loop_lapack

    return loop_lapack.entry(keep, exe, st, res, table)


def _sort_entry(keep: list[Any], st: LibStep, nat: Native, res: list[int],
                shapes: list[Any], table: int) -> list[int]:
    width = nat.n if nat.mode == 0 else nat.k
    perm = np.empty(max(nat.rows * width, 1), np.int64)
    tmp = np.empty(max(nat.rows * nat.n, 1) if nat.mode == 0 else 1, np.int64)
    ops = np.zeros(len(st.ins), np.int64)
    d = np.zeros(_HEAD + 3 * len(st.ins), np.int64)
    d[:_HEAD] = [table, nat.mode, nat.address, nat.rows, nat.n, nat.k, ptr(perm), ptr(tmp),
                 len(st.ins), nat.out_stride, res[1] if nat.indices else 0, ptr(ops)]
    for j, (s, sh) in enumerate(zip(st.ins, shapes)):  # (chlo.top_k's indices: not gathered)
        d[_HEAD + 3 * j: _HEAD + 3 * j + 3] = [s, res[j], np.dtype(sh.dtype).itemsize]
    keep.extend([perm, tmp, ops, d, nat.engine])
    return [function(), int(d.ctypes.data), 0]


@once
@on_host
def _engine() -> Any:
    from xlapy.backends.cpu import loop_lapack

    return cache.library_engine(("loop-library",), _emit, "loop-library",
                                exports=[NAME, loop_lapack.NAME])


def function(name: str = NAME) -> int:
    """The address of `xlapy_sort_step` (or loop_lapack's `xlapy_lapack_step`): one module
    built once per process, cached on disk."""
    return _engine().address(name)


def _emit() -> ir.Module:
    from xlapy.backends.cpu import loop_lapack

    mod = new_module("xlapy_loop_library")
    _emit_sort(mod)
    loop_lapack.emit(mod)
    return mod


def _emit_sort(mod: ir.Module) -> None:
    i64p = I64.as_pointer()
    fn = ir.Function(mod, KERNEL_TYPE, name=NAME)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d = b.bitcast(fn.args[0], i64p)

    def word(k: ir.Value | int) -> ir.Value:
        return b.load(b.gep(d, [i64(k) if isinstance(k, int) else k]))

    table = b.inttoptr(word(_TABLE), i64p)
    ops = b.inttoptr(word(_OPS), i64p)
    rows, n, k, nops = word(_ROWS), word(_N), word(_K), word(_NOPS)
    perm, tmp = word(_PERM), word(_TMP)
    with for_range(b, i64(0), nops, "op") as j:
        slot = word(b.add(i64(_HEAD), b.mul(j, i64(3))))
        b.store(b.load(b.gep(table, [slot])), b.gep(ops, [j]))
    full = b.icmp_signed("==", word(_MODE), i64(0))
    opsp = b.bitcast(ops, I8P)
    sort_t = ir.FunctionType(ir.VoidType(), [I8P, I64, I64, I64, I64, I64])
    callee = b.inttoptr(word(_FN), sort_t.as_pointer())
    with b.if_else(full) as (whole, select):
        with whole:
            b.call(callee, [opsp, i64(0), rows, n, perm, tmp])
        with select:
            b.call(callee, [opsp, i64(0), rows, n, k, perm])
    pstride = b.select(full, n, k)
    pp = b.inttoptr(perm, i64p)
    ostride = word(_OSTRIDE)
    with for_range(b, i64(0), nops, "g") as j:
        base = b.add(i64(_HEAD), b.mul(j, i64(3)))
        src = b.inttoptr(b.load(b.gep(ops, [j])), I8P)
        dst = b.inttoptr(word(b.add(base, i64(1))), I8P)
        size = word(b.add(base, i64(2)))
        with for_range(b, i64(0), rows, "r") as r:
            with for_range(b, i64(0), k, "c") as c:
                q = b.load(b.gep(pp, [b.add(b.mul(r, pstride), c)]))
                s_at = b.mul(b.add(b.mul(r, n), q), size)
                d_at = b.mul(b.add(b.mul(r, ostride), c), size)
                copy_bytes(b, b.gep(src, [s_at]), b.gep(dst, [d_at]), size)
    idx = word(_INDICES)
    with b.if_then(b.icmp_signed("!=", idx, i64(0))):
        ip = b.inttoptr(idx, ir.IntType(32).as_pointer())
        with for_range(b, i64(0), rows, "ir") as r:
            with for_range(b, i64(0), k, "ic") as c:
                at = b.add(b.mul(r, k), c)
                q = b.load(b.gep(pp, [at]))
                b.store(b.trunc(q, ir.IntType(32)), b.gep(ip, [at]))
    b.ret_void()


def copy_bytes(b: ir.IRBuilder, src: ir.Value, dst: ir.Value, size: ir.Value) -> None:
    """`size` bytes from src to dst: one load and store for 1, 2, 4 or 8, else byte by byte."""
    done = b.append_basic_block("copy.done")
    other = b.append_basic_block("copy.bytes")
    sw = b.switch(size, other)
    for nbytes in (1, 2, 4, 8):
        blk = b.append_basic_block(f"copy.{nbytes}")
        sw.add_case(i64(nbytes), blk)
        b.position_at_end(blk)
        t = ir.IntType(8 * nbytes).as_pointer()
        b.store(b.load(b.bitcast(src, t)), b.bitcast(dst, t))
        b.branch(done)
    b.position_at_end(other)
    with for_range(b, i64(0), size, "byte") as m:
        b.store(b.load(b.gep(src, [m])), b.gep(dst, [m]))
    b.branch(done)
    b.position_at_end(done)


__all__ = ["LibStep", "Native", "call_step", "copy_bytes", "entry", "function",
           "native", "reads_one", "step", "takes"]
