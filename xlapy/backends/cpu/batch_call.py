"""One native loop calling a Fortran routine per matrix of a batch (lapack_batch.py's
runners, loop_lapack.py's steps), its ranges split over the backend's threads.

The loop (`xlapy_batch_call_<n>`) calls fn(args) per batch index with args[j] = base[j] +
b * stride[j]: every Fortran argument is a pointer. A range run on a worker thread sets that
thread's OpenBLAS count to 1 around its calls where lapack_threads.serial sets the calling
thread's (the same bits on every thread: OpenBLAS runs each call alone).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import cache, parallel
from xlapy.backends.cpu.llvm_util import I32, I64, for_range, i64, new_module, on_host
from xlapy.backends.cpu.once import once
from xlapy.backends.cpu.thunks import bounds, ptr
from xlapy.ops.lapack_threads import SERIAL_BELOW, SERIAL_FROM, scipy_setter_address

#: Argument counts of the routines called (potrf: 5, getrf: 6, geqrf, gtsv, steqr: 8, orgqr
#: / ungqr: 9, sytrd: 10, trsm and syevd: 11, real gesdd and geev 14, complex gesdd 15).
ARITIES = (5, 6, 8, 9, 10, 11, 14, 15)
#: Matrices of 64 elements or fewer from which a batch splits over the threads (SPLIT_BATCH / 2
#: a range: a hand-off costs ~2 us, a 3 x 3 syevd ~1; 4096 3 x 3 syevd 6.9 -> 4.1 ms), fewer
#: of bigger ones (`parts`).
SPLIT_BATCH = 32
_CALL = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                         ctypes.c_int64, ctypes.c_int64)


def _emit() -> ir.Module:
    mod = new_module("xlapy_lapack_batch")
    i64p = I64.as_pointer()
    for n in ARITIES:
        fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [I64, i64p, i64p, I64, I64]),
                         name=f"xlapy_batch_call_{n}")
        target, base, stride, batch, setter = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        call_t = ir.FunctionType(ir.VoidType(), [i64p] * n)
        callee = b.inttoptr(target, call_t.as_pointer())
        # setter (openblas_set_num_threads_local, or 0): this thread's OpenBLAS count at 1
        # around the loop, as lapack_threads.serial sets it on the calling thread
        set_fn = b.inttoptr(setter, ir.FunctionType(I32, [I32]).as_pointer())
        serial = b.icmp_signed("!=", setter, i64(0))
        old = b.alloca(I32)
        with b.if_then(serial):
            b.store(b.call(set_fn, [ir.Constant(I32, 1)]), old)
        with for_range(b, i64(0), batch, name="b") as k:
            args = [b.inttoptr(b.add(b.load(b.gep(base, [i64(j)])),
                                     b.mul(k, b.load(b.gep(stride, [i64(j)])))), i64p)
                    for j in range(n)]
            b.call(callee, args)
        with b.if_then(serial):
            b.call(set_fn, [b.load(old)])
        b.ret_void()
    return mod


@once
@on_host
def loops() -> dict[int, Any]:
    eng = cache.library_engine(("lapack-batch", 2), _emit, "lapack-batch-O0", o0=True,
                               exports=[f"xlapy_batch_call_{n}" for n in ARITIES])
    return {n: (eng, _CALL(a := eng.address(f"xlapy_batch_call_{n}")), a) for n in ARITIES}


class Args:
    """The batch loop's pointers for one operand shape: the constants' addresses (sizes,
    flags, alpha: arrays kept alive here) set once, each call writing its own arrays' into
    a copy (an executable may run on several threads at once). Marshalling every pointer
    per call had cost ~10 us, more than a 64 x 64 getrf's own time in the f2py wrapper."""

    def __init__(self, args: list[np.ndarray | None], strides: list[int]) -> None:
        self.keep = [a for a in args if a is not None]
        self.base = np.array([0 if a is None else a.ctypes.data for a in args], np.int64)
        self.stride = np.array(strides, np.int64)
        self.stride_at = self.stride.ctypes.data
        self.slots = [j for j, a in enumerate(args) if a is None]
        _, self.loop, self.address = loops()[len(args)]
        self.mine = threading.local()  # each thread's copy of base, and its address

    def call(self, threads: int, fn: int, batch: int, *arrays: np.ndarray,
             least: int = 1, shared: tuple[int, ...] = ()) -> None:
        """fn per batch index, `arrays` in the argument positions left None; split into
        ranges of the batch over `threads` (`parts`, matrices of `least` elements or more),
        each with scratch of its own (the arrays of stride 0, but for `shared`: indices of
        `arrays` that every call reads)."""
        got = getattr(self.mine, "base", None)
        if got is None:
            b = self.base.copy()
            got = self.mine.base = (b, b.ctypes.data)
        base, at = got
        for j, x in zip(self.slots, arrays):
            base[j] = ptr(x)
        split = parts(threads, batch, arrays, least)
        if split < 2:
            self.loop(fn, at, self.stride_at, batch, 0)
            return
        # a worker's OpenBLAS count too at 1 for the sizes lapack_threads.serial sets it
        each = arrays[0].size // batch
        setter = scipy_setter_address() if each >= SERIAL_FROM else 0
        cuts = bounds(batch, split)
        # every range its own workspaces (the arrays of stride 0, which each call overwrites)
        scratch = [(j, x) for i, (j, x) in enumerate(zip(self.slots, arrays))
                   if self.stride[j] == 0 and i not in shared]
        keep: list[np.ndarray] = []
        pool = parallel.pool(threads)
        done = []
        for k in range(1, split):
            b = base + cuts[k] * self.stride
            for j, x in scratch:
                keep.append(own := np.empty_like(x))
                b[j] = ptr(own)
            keep.append(b)
            done.append(pool.submit(self.address, fn, b.ctypes.data, self.stride_at,
                                    cuts[k + 1] - cuts[k], setter))
        self.loop(fn, at, self.stride_at, cuts[1], setter)
        for d in done:
            d.result()


def parts(threads: int, batch: int, arrays: tuple[np.ndarray, ...], least: int = 1) -> int:
    """Ranges a batch call over `arrays` (the first one's elements a matrix count) is split
    into (`ranges`)."""
    return ranges(threads, batch, arrays[0].size // max(batch, 1), least)


def ranges(threads: int, batch: int, each: int, least: int = 1) -> int:
    """Ranges a batch of matrices of `each` elements is split into, one per thread at most:
    each of SPLIT_BATCH / 2 matrices of 64 elements or fewer at least, fewer of bigger ones
    (one from 32 x 32 on), of `least` elements or more each, fewer than SERIAL_BELOW (where
    OpenBLAS keeps its threads); from SERIAL_FROM each range's thread sets its OpenBLAS count
    to 1 (`scipy_setter_address`, none found: no split)."""
    if threads < 2 or batch < 2 or not least <= each < SERIAL_BELOW or \
            each >= SERIAL_FROM and not scipy_setter_address():
        return 1
    return min(threads, batch // max(1, SPLIT_BATCH // 2 * 64 // max(each, 64)))


def cached(table: dict[Any, Args], key: Any, make: Callable[[], Args]) -> Args:
    got = table.get(key)
    if got is None:
        got = table[key] = make()
    return got


def check_info(info: np.ndarray, check: Callable[[int], int]) -> None:
    """The per-matrix info check (it raises on an invalid argument) of each negative (none,
    the usual case, in one reduction: np.unique cost ~3 us of a 4 x 8 x 8 getrf's ~23)."""
    if info.size and info.min() < 0:
        for bad in np.unique(info[info < 0]):
            check(int(bad))


__all__ = ["Args", "ARITIES", "SPLIT_BATCH", "cached", "check_info", "parts", "ranges", "loops"]
