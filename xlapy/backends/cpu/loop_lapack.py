"""LAPACK custom calls (getrf, potrf, trsm, syevd, geqrf, orgqr / ungqr: jnp.linalg.solve,
inv, cholesky, cho_solve, eigh, qr) as steps of a native loop (native_loop.py, loop_library.py).

On the Python path each call is a thunk: f2py's wrapper, or lapack_batch's native loop over
a batch, with numpy transposes to and from Fortran order around it. A loop whose body
solved a small system therefore ran through Python: a 16-step fori_loop of a 16 x 16
jnp.linalg.solve 1.4 ms against XLA's 0.045. As a step, `xlapy_lapack_step` runs a small
program over the loop's buffers: each operand transposed into Fortran-order scratch of the
loop's own (trsm's and potrf's copied as they are, read transposed: trsm_flags, potrf_uplo),
lapack_batch's loop calling the routine per matrix with the arguments the Python path passes
(lapack_batch.*_args: the same routine, the same bits), and the results transposed (or, for
pivots and info, written directly) into the step's result buffers.

Only matrices below NATIVE_BELOW elements (1024 x 1024: a bigger call's own time dwarfs
the Python; under lapack_threads.SERIAL_BELOW, so the step's one OpenBLAS thread is the
Python path's too). It was 256 x 256, but the callback also moves the operands to and from
Fortran order with numpy's column-at-a-time copies: with the step, a program's entry trip
of jax.scipy.linalg.cho_factor of 256 x 256 ran 1.00-1.12 -> 0.66-0.70 of XLA's time,
cho_solve 1.22-1.25 -> 0.69-0.86, a solve with 64 right-hand sides 1.03-1.09 -> 0.79-0.84,
inv 1.23-1.63 -> 1.07-1.31, a 400 x 400 solve 1.03-1.12 -> 1.00-1.01.
From lapack_threads.SERIAL_FROM the Python path sets the calling thread's OpenBLAS
count to one around the call; the step does the same, through the address of scipy's
openblas_set_num_threads_local (the OpenBLAS whose routines it calls): the same bits. Left
to the callback, a 64 x 64 jnp.linalg.solve (its getrf and two trsms) ran ~50 us of Python
around ~70 of LAPACK. Smaller calls run on one thread either way (no split, the same bits),
but the step sets the count for them too: OpenBLAS's workers otherwise woke and spun beside
the loop (perf: 36% of a loop's time in blas_thread_server), a 16-step fori_loop of a 16 x
16 solve 160 -> 119 us (XLA 222), a 64-step loop inverting a 32 x 32 matrix every 8th step
420 -> 316 (452). The Python path raises for a negative info (an invalid argument, which
the arguments planned here never are); a positive one (a singular matrix) is a result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import batch_call, lapack_batch, loop_library, small_lu, transpose_lib
from xlapy.backends.cpu.llvm_util import I8P, I64, KERNEL_TYPE, for_range, i64
from xlapy.backends.cpu.thunks import ptr
from xlapy.ops.lapack_threads import SERIAL_FROM, matrix_elements, scipy_setter_address

if TYPE_CHECKING:
    from xlapy.backends.cpu.executable import CpuExecutable
    from xlapy.backends.cpu.loop_library import LibStep
    from xlapy.ir import Instruction

NAME = "xlapy_lapack_step"
#: Matrices of this many elements or more keep the callback (module docstring).
NATIVE_BELOW = 1024 * 1024
#: Words per program op: (0, src, dst, rows, cols, batch, bytes, routine): dst[b] = src[b]^T
#: with src[b] rows x cols, by transpose_lib's routine at `routine` when not 0 (else a loop
#: nest); (1, loop, routine, base, stride, batch, setter, 0): loop(routine, base, stride,
#: batch, setter), the loop setting its thread's OpenBLAS count to 1 around its calls when
#: `setter` (the address of openblas_set_num_threads_local) is not 0 (batch_call.py). An
#: address below 0 is the table's entry
#: -address - 1 (an operand, read per call).
_OP = 8
_TRANSPOSE, _CALL = 0, 1
#: Matrix elements from which a Fortran-order copy calls transpose_lib's blocked routine (the
#: loop nest met L1 conflict misses at 512-byte strides: a 6-step 128 x 128 solve loop 1314
#: -> 646 us); smaller ones keep the nest (no routine to build for them).
ROUTINE_FROM = 64 * 64
#: Element bytes with a transpose loop of their own (s, d / c, z).
_SIZES = (4, 8, 16)


@dataclass(frozen=True)
class LapackNative:
    """A custom call a step can run: the routine (getrf, potrf, trsm, syevd, geqrf, orgqr or
    ungqr), its type letter and flags (potrf: lower; syevd: lower, vectors; trsm: left,
    lower, trans, unit)."""

    routine: str
    t: str
    flags: tuple[Any, ...] = ()


def native(instr: Instruction, routine: str, t: str, flags: tuple[Any, ...]
           ) -> LapackNative | None:
    """The LapackNative of custom call `instr`, when a step runs it (module docstring)."""
    if routine not in ("getrf", "potrf", "trsm", "syevd", "geqrf", "orgqr", "ungqr") or \
            t not in "sdcz":
        return None
    ops = [o.shape for o in instr.operands]
    if routine in ("orgqr", "ungqr"):  # (a, tau): tau one vector per matrix
        routine = "orgqr" if t in "sd" else "ungqr"
        ops, tau = ops[:1], ops[1]
        if not tau.is_array or tuple(tau.dimensions[:-1]) != tuple(ops[0].dimensions[:-2]):
            return None
    if any(not s.is_array or s.rank < 2 or 0 in s.dimensions for s in ops) or \
            any(matrix_elements(s.dimensions) >= NATIVE_BELOW for s in ops):
        return None
    if _serial(instr) and not scipy_setter_address():
        return None  # (smaller ones run without the count set: the same bits)
    if routine == "trsm" and tuple(ops[0].dimensions[:-2]) != tuple(ops[1].dimensions[:-2]):
        return None
    return LapackNative(routine, t, flags)


def _serial(instr: Instruction) -> bool:
    """Whether the call's matrices are big enough for the Python path to set one thread
    (lapack_threads.serial_target: operand 0's size)."""
    return matrix_elements(instr.operands[0].shape.dimensions) >= SERIAL_FROM


def entry(keep: list[Any], exe: CpuExecutable, st: LibStep, outs: list[int], table: int
          ) -> list[int]:
    """The driver's words of step `st` over the table at `table`, its results written to
    `outs` (their buffers' addresses, in the custom call's result order)."""
    nat, instr = st.native, st.instr
    assert isinstance(nat, LapackNative)
    shapes = [o.shape for o in instr.operands]
    item = np.dtype(shapes[0].dtype).itemsize
    *lead, m, n = shapes[-1 if nat.routine == "trsm" else 0].dimensions
    batch = math.prod(lead)
    loops = batch_call.loops()

    def operand(j: int) -> int:
        return -(st.ins[j] + 1)

    def scratch(nbytes: int) -> int:
        keep.append(buf := np.empty(max(nbytes, 1), np.uint8))
        return ptr(buf)

    prog: list[list[int]] = []
    small = small_lu.takes(nat.routine, nat.t, [tuple(x.dimensions) for x in shapes],
                           nat.flags)
    if small is not None:  # small_lu's function (as batch_call's loop: its words)
        kind, dims = small
        fn = small_lu.function(kind, nat.t, dims, nat.flags)
        if kind == "getrf":  # factored in place of a's copy in the result
            prog += [[_TRANSPOSE, operand(0), outs[0], 1, m * n, batch, item],
                     [_CALL, fn, outs[0], outs[1], outs[2], 0, batch]]
        elif kind == "potrf":  # likewise, then info
            prog += [[_TRANSPOSE, operand(0), outs[0], 1, m * n, batch, item],
                     [_CALL, fn, outs[0], 0, outs[1], 0, batch]]
        elif kind in ("geqrf", "orgqr"):  # in place of a's copy; tau written / read
            tau = outs[1] if kind == "geqrf" else operand(1)
            prog += [[_TRANSPOSE, operand(0), outs[0], 1, m * n, batch, item],
                     [_CALL, fn, outs[0], tau, 0, 0, batch]]
        else:  # solved in place of b's copy in the result
            prog += [[_TRANSPOSE, operand(1), outs[0], 1, m * n, batch, item],
                     [_CALL, fn, operand(0), outs[0], 0, 0, batch]]
        return _program(keep, prog, item, table)
    fn = _routine(nat)
    if nat.routine == "trsm":
        s = shapes[0].dimensions[-1]
        args = lapack_batch.trsm_args(nat.flags, m, n, s, np.dtype(shapes[0].dtype),
                                      np.dtype(shapes[1].dtype))
        # a and b row-major as they are (trsm_args flips side and triangle): copies as one
        # row each, b's into the result, which the routine overwrites with the solution
        fa = scratch(batch * s * s * item)
        prog += [[_TRANSPOSE, operand(0), fa, 1, s * s, batch, item],
                 [_TRANSPOSE, operand(1), outs[0], 1, m * n, batch, item]]
        arrays, back = [fa, outs[0]], []
    elif nat.routine == "potrf":  # a row-major as it is, copied into the result (potrf_args)
        args = lapack_batch.potrf_args(nat.flags[0], n, item)
        prog.append([_TRANSPOSE, operand(0), outs[0], 1, n * n, batch, item])
        arrays, back = [outs[0], outs[1]], []
    else:
        work = scratch(batch * m * n * item)
        prog.append([_TRANSPOSE, operand(0), work, m, n, batch, item])
        back = [(work, outs[0], n, m)]
        if nat.routine == "getrf":
            args = lapack_batch.getrf_args(m, n, item)
            arrays = [work, outs[1], outs[2]]  # (pivots and info: written in place)
        elif nat.routine == "geqrf":  # (the factored matrix, tau); work shared by the batch
            args = lapack_batch.geqrf_args(nat.t, m, n, item)
            arrays = [work, outs[1], scratch(lapack_batch.qr_lwork(nat.t, m, n) * item),
                      scratch(4 * batch)]
        elif nat.routine in ("orgqr", "ungqr"):  # (a, tau) -> q; tau copied as 1 x k rows
            k = shapes[1].dimensions[-1]
            args = lapack_batch.orgqr_args(nat.t, m, n, k, item)
            taus = scratch(batch * k * item)
            prog.append([_TRANSPOSE, operand(1), taus, 1, k, batch, item])
            arrays = [work, taus, scratch(lapack_batch.qr_lwork(nat.t, m, n, k) * item),
                      scratch(4 * batch)]
        else:  # syevd: (vectors or a as given, eigenvalues, info); work shared by the batch
            lower, vectors = nat.flags
            args = lapack_batch.syevd_args(lower, vectors, n, item)
            lwork, liwork = lapack_batch.syevd_sizes(vectors, n)
            arrays = [work, outs[1], scratch(lwork * item), scratch(4 * liwork), outs[2]]
            if not vectors:  # a itself: copied as one row
                back = [(operand(0), outs[0], 1, n * n)]
    base = args.base.copy()
    base[args.slots] = arrays
    keep.extend([args, base])
    width = len(base)
    prog.append([_CALL, loops[width][2], fn,
                 ptr(base), args.stride_at, batch,
                 scipy_setter_address()])
    prog += [[_TRANSPOSE, src, dst, r, c, batch, item] for src, dst, r, c in back]
    return _program(keep, prog, item, table)


def _program(keep: list[Any], prog: list[list[int]], item: int, table: int) -> list[int]:
    """The driver's words of a step running `prog` (each transpose with its routine)."""
    for op in prog:
        op.append(transpose_lib.address(item) if op[0] == _TRANSPOSE and item in
                  transpose_lib.ELEMENT_BYTES and op[3] * op[4] >= ROUTINE_FROM else 0)
    d = np.array([table, len(prog)] + [w for op in prog for w in op], np.int64)
    keep.append(d)
    return [loop_library.function(NAME), ptr(d), 0]


def _routine(nat: LapackNative) -> int:
    """The address of the routine scipy's cython modules export (jaxlib's LAPACK and BLAS)."""
    from scipy.linalg import cython_blas, cython_lapack

    module = cython_blas if nat.routine == "trsm" else cython_lapack
    return lapack_batch.routine(module, f"{nat.t}{nat.routine}")


def _transpose(b: ir.IRBuilder, src: ir.Value, dst: ir.Value, rows: ir.Value, cols: ir.Value,
               batch: ir.Value, size: ir.Value) -> None:
    """dst[k] = src[k]^T for `batch` rows x cols matrices of `size`-byte elements: one loop
    nest per element size of the LAPACK types (typed loads and stores), bytes otherwise.
    (One nest with the size's switch inside took ~5 us an iteration of a 16 x 16 solve
    loop: its four transposes, 12% of the loop.)"""
    done = b.append_basic_block("tr.done")
    other = b.append_basic_block("tr.bytes")
    sw = b.switch(size, other)
    for nbytes in (*_SIZES, None):
        if nbytes is not None:
            blk = b.append_basic_block(f"tr.{nbytes}")
            sw.add_case(i64(nbytes), blk)
            b.position_at_end(blk)
            t = ir.IntType(8 * nbytes).as_pointer()
            s_t, d_t = b.bitcast(src, t), b.bitcast(dst, t)
        else:
            b.position_at_end(other)
        with for_range(b, i64(0), batch, "tb") as bi:
            at = b.mul(bi, b.mul(rows, cols))
            with for_range(b, i64(0), rows, "ti") as i:
                with for_range(b, i64(0), cols, "tj") as j:
                    s_at = b.add(at, b.add(b.mul(i, cols), j))
                    d_at = b.add(at, b.add(b.mul(j, rows), i))
                    if nbytes is None:
                        loop_library.copy_bytes(b, b.gep(src, [b.mul(s_at, size)]),
                                                b.gep(dst, [b.mul(d_at, size)]), size)
                    else:
                        b.store(b.load(b.gep(s_t, [s_at])), b.gep(d_t, [d_at]))
        b.branch(done)
    b.position_at_end(done)


def emit(mod: ir.Module) -> None:
    """Add `xlapy_lapack_step` to `mod` (loop_library's module)."""
    i64p = I64.as_pointer()
    fn = ir.Function(mod, KERNEL_TYPE, name=NAME)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d = b.bitcast(fn.args[0], i64p)
    table = b.inttoptr(b.load(d), i64p)
    count = b.load(b.gep(d, [i64(1)]))

    def resolve(v: ir.Value) -> ir.Value:  # (an operand: its table entry)
        neg = b.icmp_signed("<", v, i64(0))
        return b.select(neg, b.load(b.gep(table, [b.select(neg, b.sub(i64(-1), v), i64(0))])), v)

    loop_t = ir.FunctionType(ir.VoidType(), [I64, i64p, i64p, I64, I64])
    with for_range(b, i64(0), count, "op") as k:
        w = b.gep(d, [b.add(i64(2), b.mul(k, i64(_OP)))])
        word = [b.load(b.gep(w, [i64(j)])) for j in range(_OP)]
        with b.if_else(b.icmp_signed("==", word[0], i64(_TRANSPOSE))) as (tr, call):
            with tr:
                src, dst = b.inttoptr(resolve(word[1]), I8P), b.inttoptr(resolve(word[2]), I8P)
                with b.if_else(b.icmp_signed("!=", word[7], i64(0))) as (lib, nest):
                    with lib:
                        rows, cols, size = word[3], word[4], b.mul(word[3], word[4])
                        b.call(b.inttoptr(word[7], transpose_lib.ROUTINE_T.as_pointer()),
                               [src, dst, rows, cols, cols, rows, word[5], size, size])
                    with nest:
                        _transpose(b, src, dst, word[3], word[4], word[5], word[6])
            with call:  # (the loop sets and restores the OpenBLAS count itself; small_lu's
                # function reads an operand: its table entry, as a transpose's)
                callee = b.inttoptr(word[1], loop_t.as_pointer())
                b.call(callee, [resolve(word[2]), b.inttoptr(resolve(word[3]), i64p),
                                b.inttoptr(resolve(word[4]), i64p), word[5], word[6]])
    b.ret_void()


__all__ = ["LapackNative", "NAME", "emit", "entry", "native"]
