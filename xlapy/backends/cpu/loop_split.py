"""Split steps of native while loops: one step's rows shared with the worker pool from
native code, so a loop whose body is worth two cores (an RNN cell's GEMM and tanh) keeps
both without a trip through Python per iteration.

A split step runs `fn(arg, cuts[c], cuts[c + 1])` for every chunk c of fixed cuts: a
row-parallel region's chunks (regions.cuts, region_run over its steps array), or rows of a
gemm_small product or an element-wise kernel. The chunks are the Python path's, so the
bits are too; only who runs which chunk changes. Thread t of T takes chunks
[C t / T, C (t + 1) / T): the driver posts threads 1.. to workers reserved for the loop's
call (NativePool.reserve: their slots are written here directly, then `post`), runs its own
share, then waits for each with `wait(steal)`: a job a worker has not claimed yet (it has
no core) runs on the caller instead. With no worker reserved (another thread has them)
the caller runs every chunk.

Descriptor words (i64): fn, arg, chunks C, threads T (set per call), post, wait, cuts
(C + 1 words), then T - 1 worker slot addresses.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import threads
from xlapy.backends.cpu.llvm_util import I32, I64, VOID, for_range, i64

_FN, _ARG, _CHUNKS, _THREADS, _POST, _WAIT, _CUTS = range(7)
SPLIT_NAME = "xlapy_split"


def emit(mod: ir.Module) -> None:
    """Add `void xlapy_split(i64* d, i64, i64)` (the driver's step entry: the step's table
    word is the descriptor) and its job `xlapy_chunks(i64* d, c0, c1)` to `mod`."""
    i64p = I64.as_pointer()
    job_t = ir.FunctionType(VOID, [I64, I64, I64])
    posted, fn_word, args_word = threads.slot_words()

    def word(b: ir.IRBuilder, d: ir.Value, at: ir.Value | int) -> ir.Value:
        return b.load(b.gep(d, [i64(at) if isinstance(at, int) else at]))

    chunks = ir.Function(mod, ir.FunctionType(VOID, [i64p, I64, I64]), name="xlapy_chunks")
    d, c0, c1 = chunks.args
    b = ir.IRBuilder(chunks.append_basic_block("entry"))
    f = b.inttoptr(word(b, d, _FN), job_t.as_pointer())
    arg = word(b, d, _ARG)
    with for_range(b, c0, c1, "c") as c:
        at = b.add(c, i64(_CUTS))
        b.call(f, [arg, word(b, d, at), word(b, d, b.add(at, i64(1)))])
    b.ret_void()

    split = ir.Function(mod, ir.FunctionType(VOID, [i64p, I64, I64]), name=SPLIT_NAME)
    d = split.args[0]
    b = ir.IRBuilder(split.append_basic_block("entry"))
    n, t = word(b, d, _CHUNKS), word(b, d, _THREADS)
    post = b.inttoptr(word(b, d, _POST), ir.FunctionType(VOID, [i64p]).as_pointer())
    wait = b.inttoptr(word(b, d, _WAIT), ir.FunctionType(VOID, [i64p, I32, I32]).as_pointer())
    slots = b.add(n, i64(_CUTS + 1))

    def slot(k: ir.Value) -> ir.Value:
        return b.inttoptr(word(b, d, b.add(slots, b.sub(k, i64(1)))), i64p)

    with for_range(b, i64(1), t, "post") as k:  # thread k of t: chunks [n k / t, n (k+1) / t)
        s = slot(k)
        b.store(b.ptrtoint(chunks, I64), b.gep(s, [i64(fn_word)]))
        b.store(b.ptrtoint(d, I64), b.gep(s, [i64(args_word)]))
        b.store(b.sdiv(b.mul(n, k), t), b.gep(s, [i64(args_word + 1)]))
        b.store(b.sdiv(b.mul(n, b.add(k, i64(1))), t), b.gep(s, [i64(args_word + 2)]))
        b.call(post, [s])
    b.call(chunks, [d, i64(0), b.sdiv(n, b.select(b.icmp_signed(">", t, i64(1)), t, i64(1)))])
    with for_range(b, i64(1), t, "wait") as k:
        s = slot(k)
        seq = b.load(b.bitcast(b.gep(s, [i64(posted)]), I32.as_pointer()))
        b.call(wait, [s, seq, ir.Constant(I32, 1)])
    b.ret_void()


class Split:
    """One split step's descriptor: fn(arg, lo, hi) over the chunks of `cuts`, on at most
    `most` threads."""

    def __init__(self, fn: int, arg: int, cuts: list[int], most: int) -> None:
        chunks = len(cuts) - 1
        self.most = max(1, min(most, chunks))
        post, wait = threads.natives()
        self.words = np.zeros(_CUTS + chunks + 1 + self.most - 1, np.int64)
        self.words[:_CUTS] = [fn, arg, chunks, 1, post, wait]
        self.words[_CUTS:_CUTS + chunks + 1] = cuts
        self._slots = _CUTS + chunks + 1

    @property
    def address(self) -> int:
        return int(self.words.ctypes.data)

    def bind(self, slot_addresses: list[int]) -> None:
        """Run on the caller and these reserved workers' slots (at most `most` threads)."""
        use = slot_addresses[:self.most - 1]
        self.words[_THREADS] = 1 + len(use)
        self.words[self._slots:self._slots + len(use)] = use


__all__ = ["Split", "emit", "SPLIT_NAME"]
