"""Two convolutions in one loop nest: the first's rows computed as the second's ring needs
them (conv_kernel.Source), its value never stored whole.

A CNN's `conv -> bias -> relu -> conv` keeps the first layer's 16 MB output (the CNN
benchmark's) only for the second to read it back: here each thread's ring of padded rows
of the second convolution is filled by running the first convolution (with its epilogue)
on that row, so the peak memory is the second's output and a few rows per thread, and the
first layer's value goes to memory only through the ring (L1/L2). A row is computed by the
same code as alone, so the bits are the unchained ones. Each thread computes the first
rows its own rows need: a row on either side of a split is computed twice.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from math import prod
from typing import Any

import numpy as np

from xlapy.backends.cpu.conv_compile import Engines, build
from xlapy.backends.cpu.conv_epilogue import Epilogue, table
from xlapy.backends.cpu.conv_general import _llvm_type, channels_last, chunks, split_parts
from xlapy.backends.cpu.conv_kernel import Source, emit
from xlapy.ir import Instruction

_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)


def chainable(first: Instruction, second: Instruction) -> bool:
    """Whether `second` can compute `first` row by row: both real, channels-last, in one
    compute type; the second's ring maps each row it reads to its own slot and pads the
    last dimension by >= 0 on both sides (the first's row lands whole in a ring row)."""
    a = channels_last(first, False)
    b = channels_last(second, True)
    if a is None or b is None or a.dtype != b.dtype:
        return False
    lo, hi = b.nest.pad[-1]
    return b.nest.ring() and lo >= 0 and hi >= 0 and \
        tuple(first.shape.dimensions) == tuple(second.operands[0].shape.dimensions)


def chain_plan(epi: Epilogue, threads: int) -> Callable[..., None]:
    """run(x, w, out, *extra) for Epilogue.inputs(): the first convolution's operand, the
    second's weights, its output; then the first's weights, its leaves, the second's."""
    assert epi.chain is not None
    first, second = epi.chain.conv, epi.conv
    a = channels_last(first, False)
    b = channels_last(second, True)
    assert a is not None and b is not None
    e1 = epi.chain.expr
    n1 = len(e1.leaves) if e1 is not None else 0
    pool = epi.pool
    t = _llvm_type(b.dtype)
    name = "conv_chain"
    addr, eng = build(name, emit(name, t, b.nest, epi.emit, pool.spec() if pool else None,
                                 Source(a.nest, e1.emit if e1 is not None else None,
                                        len(epi.leaves))), threads)
    fn = _FN(addr)
    nest = b.nest
    rows = nest.b * (pool.rw.shape.dimensions[1] if pool is not None
                     else prod(nest.sp_out[:-1]))
    macs = (second.shape.num_elements * prod(nest.ks) * nest.ci
            + first.shape.num_elements * prod(a.nest.ks) * a.nest.ci)
    parts = chunks(rows, macs, threads)
    size = nest.scratch_bytes(b.dtype.itemsize) + a.nest.scratch_bytes(a.dtype.itemsize)
    spare = threading.Lock()
    kept: list[np.ndarray] = []

    def run(x: np.ndarray, w2: np.ndarray, out: np.ndarray, w1: np.ndarray,
            *leaves: np.ndarray, eng: Engines = eng) -> None:
        eng.ready()
        mine = spare.acquire(blocking=False)
        try:
            if mine and kept:
                scratch = kept[0]
            else:
                scratch = np.empty((parts, size + 64), np.uint8)
                if mine:
                    kept.append(scratch)
            keep: list[Any] = []
            x = np.ascontiguousarray(x)
            wk1 = a.pack(w1)
            wk2 = b.pack(w2)
            t1 = table(first, e1.leaves, leaves[:n1], keep) if e1 is not None else 0
            t2 = table(second, epi.leaves, leaves[n1:], keep,
                       [x.ctypes.data, wk1.ctypes.data, t1])
            res = out if out.flags.c_contiguous else np.empty(out.shape, b.dtype)
            split_parts(fn, (x.ctypes.data, wk2.ctypes.data, res.ctypes.data), rows, parts,
                        scratch, t2, nest.b, threads)
            if res is not out:
                out[...] = res
        finally:
            if mine:
                spare.release()

    return run


__all__ = ["chainable", "chain_plan"]
