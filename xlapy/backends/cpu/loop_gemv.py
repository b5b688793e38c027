"""Vector-matrix products in native loops on gemv.py's loops, split over threads.

A decoding loop's layers are [1, k] x [k, n] products; the driver ran them as one GEMM call
each (gemm_small's loop nest or BLAS for one row), on one thread: the 4096 x 256 logits
product alone read 4 MB a token at one core's bandwidth. gemv.py's loops split W's rows (or
a transposed W's columns) into chunks fixed by the shape, claimed by the caller and the
pool's workers, and are bound by memory as the Python path's `jit gemv` is; a W of
gemv.PAIR_BYTES up to gemv.SPLIT_BYTES in two halves, thread t of a call running chunk t
first, so each keeps its half in its core's L2 step after step. Smaller W (MIN_BYTES up)
run as one chunk on the calling thread: gemv's rows form beat the GEMM step's loop nest
there too.

A step is `xlapy_patch_call` (while_driver.py): it writes the current addresses of x, W and
y from the loop's tables into the gemv descriptor (state buffers swap between iterations),
resets its chunk counter and calls the module's `drive`. The workers are reserved per call
with the loop's other split steps (native_loop._reserve: `bind`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.backends.cpu import gemv, target
from xlapy.backends.cpu.gemv import (
    _D_CHUNKS,
    _D_NEXT,
    _D_OUT,
    _D_POST,
    _D_SLOTS,
    _D_W,
    _D_WAIT,
    _D_WORKERS,
    _D_X,
    _D_Y,
)

if TYPE_CHECKING:
    from xlapy.backends.cpu.regions import Gemm


#: Bytes of W from which gemv's loops take a one-row product (one chunk, on the caller,
#: below gemv.SPLIT_BYTES): a fori_loop of h @ W per step on Zen 3 (AVX2), gemm_small's loop
#: nest against gemv's rows form: 64x512 8.4 -> 4.9 us a step, 128x128 3.6 -> 2.5, 256x1024
#: 75 -> 19 us a product (XLA 16); 16x16 and 32x32 ran alike either way.
MIN_BYTES = 1 << 14


def takes(g: Gemm) -> bool:
    """Whether GEMM step `g` runs on gemv's loops: one row, W of MIN_BYTES or more (split
    over threads from gemv.SPLIT_BYTES), the loops built for this target."""
    size = 8 if g.f64 else 4
    return g.m == 1 and g.batch == 1 and not g.cplx and g.n * g.k * size >= MIN_BYTES and \
        gemv.available() and target.current().is_x86


class Step:
    """One product's descriptor and the words of its patch-call step."""

    def __init__(self, g: Gemm, table: int, threads: int) -> None:
        dtype = np.float64 if g.f64 else np.float32
        form = "cols" if g.rhs_t else "rows"  # W [n, k] read by rows, or W [k, n]
        code = gemv._compile(g.f64, target.current(), form)
        self.beta = np.zeros(1, dtype)
        ldw = g.k if g.rhs_t else g.n
        self.d, self.parts = gemv.describe(form, g.k, g.n, ldw, 1, 1, self.beta, dtype, True)
        if self.parts is not None:
            self.d[_D_OUT] = self.parts.ctypes.data
        self.most = max(1, min(threads, int(self.d[_D_CHUNKS])))
        self.zero = np.zeros(1, np.int64)
        base = self.d.ctypes.data
        y = _D_OUT if self.parts is None else _D_Y
        patches = [(base + 8 * _D_X, table + 8 * g.lhs), (base + 8 * _D_W, table + 8 * g.rhs),
                   (base + 8 * y, table + 8 * g.out),
                   (base + 8 * _D_NEXT, self.zero.ctypes.data)]  # the claim counter
        self.words = np.array([code.engine.address(f"{gemv._name(g.f64, form)}_drive"), base,
                               len(patches), *(w for p in patches for w in p)], np.int64)

    @property
    def address(self) -> int:
        return int(self.words.ctypes.data)

    def bind(self, slot_addresses: list[int]) -> None:
        """Run on the caller and these reserved workers (at most `most` threads)."""
        use = slot_addresses[:self.most - 1]
        d = self.d
        d[_D_POST:_D_WAIT + 1] = gemv._natives()
        d[_D_WORKERS] = len(use)
        d[_D_SLOTS:_D_SLOTS + len(use)] = use


def entry(keep: list[Any], splits: list[Any], g: Gemm, table: int, threads: int) -> list[int]:
    """The driver's (function, argument, outer) words of GEMM step `g` on gemv's loops."""
    from xlapy.backends.cpu.while_driver import driver

    st = Step(g, table, threads)
    keep.append(st)
    splits.append(st)
    return [driver()[0].address("xlapy_patch_call"), st.address, 0]


__all__ = ["takes", "entry", "Step"]
