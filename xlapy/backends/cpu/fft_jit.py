"""f32 / c64 FFTs of power-of-two lengths along the last axis (`plan`), or the last two
(`plan2`), through fft_emit's JIT function: the thunks fft_lib.fft runs for them (others
keep DUCC).

The function is built once per process and target (cached on disk like any library
module); the twiddle tables once per length and direction, in double precision rounded to
f32. Rows split over the native pool (each row whole on one thread, with scratch of its
own): the bits never depend on the thread count.
"""

from __future__ import annotations

import ctypes
import functools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.backends.cpu import cache, fft_emit, parallel, recycle, target, transpose_lib
from xlapy.backends.cpu.once import once
from xlapy.backends.cpu.threads import fn_address
from xlapy.backends.cpu.thunks import ptr

#: Elements (of the complex core, per call) from which rows split over the threads.
SPLIT_ELEMENTS = 1 << 15
#: Complex core lengths taken. One Zen 4 core, 512K points a call (two rows from 2^18), time /
#: ducc0's, interleaved: complex transforms of 128-2048 points 0.26-0.43, 4096-262144
#: 0.45-0.87 (8192: 1.02); real ones (rfft, irfft) of 128-262144 points 0.14-0.84. Under 64
#: (a 64-point rfft's core of 32 points) the call's Python costs more than DUCC's; over 2^20
#: the scratch (16 bytes a point) passes 16 MB.
MIN_CORE, MAX_COMPLEX, MAX_REAL = 64, 1 << 20, 1 << 20
_FN = ctypes.CFUNCTYPE(None, *([ctypes.c_int64] * 10))


def width(t: target.CpuTarget) -> int:
    """Floats per vector of the target's function."""
    return t.vector_bits // 32


@once
def _compile(tgt: target.CpuTarget) -> tuple[object, int]:
    with target.use(tgt):
        w = width(tgt)
        eng = cache.library_engine(("fft_f32", w), lambda: fft_emit.function(w), "light",
                                   light=True, exports=[fft_emit.NAME, fft_emit.STEP])
    return eng, eng.address(fft_emit.NAME)


@functools.cache
def table(nc: int, inverse: bool, w: int) -> np.ndarray:
    """The twiddles exp(s 2 pi i a) (re part, then im part) of these angles a, s = +1 if
    inverse, else -1: the stage table (nc + 3 log2(w) w each part: entry Ns + k = k / 2Ns,
    radix-4 stage Ns's w2 and stage Ns / 2's w1; then per stage Ns = 2^t < w its w1, w2 and
    w3 periodic over w lanes at nc + (3t + r) w), the real transforms' k / 2nc (k < nc), and
    the radix-4 stages' w3 = 3k / 4Ns at Ns + k."""
    lw = fft_emit.log2(w)
    ang = np.zeros(nc + 3 * lw * w)
    w3 = np.zeros(nc)
    ns = 1
    while ns < nc:
        k = np.arange(ns)
        ang[ns:2 * ns] = k / (2 * ns)
        w3[ns:2 * ns] = 3 * k / (4 * ns)
        ns *= 2
    for t in range(lw):
        ns = 1 << t
        k = np.arange(w) % ns
        for r, a in enumerate((k / (4 * ns), k / (2 * ns), 3 * k / (4 * ns))):
            ang[nc + (3 * t + r) * w: nc + (3 * t + r + 1) * w] = a
    post = np.arange(nc) / (2 * nc)
    sign = 1.0 if inverse else -1.0
    parts = []
    for a in (ang, post, w3):
        parts += [np.cos(2 * math.pi * a), np.sin(2 * math.pi * sign * a)]
    out = np.concatenate(parts).astype(np.float32)
    out.setflags(write=False)
    return out


def plan(kind: int, n: int, out_dtype: np.dtype, dims: tuple[int, ...], threads: int
         ) -> Callable[[np.ndarray], np.ndarray] | None:
    """The thunk of a 1-D transform of length n (the fft_length) with result `dims`, or
    None where the function does not take it: n not a power of two, its complex core
    outside MIN_CORE .. MAX_COMPLEX (MAX_REAL), a target that cannot run here."""
    tgt = target.current()
    if not tgt.runs_here:
        return None
    w = width(tgt)
    real = kind in (fft_emit.RFFT, fft_emit.IRFFT)
    nc = n // 2 if real else n
    if (n < 2 or n & (n - 1) or nc < max(2 * w, MIN_CORE) or nc > (MAX_REAL if real else
                                                                  MAX_COMPLEX)
            or any(d == 0 for d in dims)):
        return None
    rows = int(np.prod(dims[:-1], dtype=np.int64))
    ldin = {fft_emit.RFFT: n, fft_emit.IRFFT: 2 * (nc + 1)}.get(kind, 2 * n)
    ldout = {fft_emit.RFFT: 2 * (nc + 1), fft_emit.IRFFT: n}.get(kind, 2 * n)
    src = np.float32 if kind == fft_emit.RFFT else np.complex64
    inverse = kind in (fft_emit.IFFT, fft_emit.IRFFT)
    tw = table(nc, inverse, w)
    pad = 4 * (nc + w)
    parts = max(1, min(threads, rows, rows * nc // SPLIT_ELEMENTS))

    own_scratch: list[tuple[int, np.ndarray]] = []  # made by the first call
    busy = threading.Lock()  # the scratch: a call while another runs takes fresh scratch
    cuts = [rows * k // parts for k in range(parts + 1)]
    tail = (nc, tw.ctypes.data)
    last = (kind, ldin, ldout)
    fn: list[Any] = []
    outs: dict[int, Any] = {}  # the last call's result, written again once it is dropped

    def run(x: np.ndarray) -> np.ndarray:
        if not fn:
            fn.append(_fn(_compile(tgt)[1]))
            own_scratch.append(_fresh(parts * pad))
        x = np.ascontiguousarray(x, dtype=src)
        out = recycle.output(outs, 0, dims, out_dtype)  # (a fresh big one: page faults)
        head = (ptr(x), ptr(out))
        own = busy.acquire(blocking=False)
        try:
            at, keep = own_scratch[0] if own else _fresh(parts * pad)
            if parts == 1:
                fn[0](*head, 0, rows, *tail, at, *last)
                return out
            pool = parallel.pool(threads)
            futs = [pool.submit(fn_address(fn[0]), *head, cuts[k], cuts[k + 1], *tail,
                                at + 4 * k * pad, *last, keep=(x, out, keep))
                    for k in range(1, parts)]
            fn[0](*head, cuts[0], cuts[1], *tail, at, *last)
            for f in futs:
                f.result()
            return out
        finally:
            if own:
                busy.release()

    run.jit = True  # type: ignore[attr-defined]  (the report's "library fft (jit)")
    if parts == 1:
        run.fft_step = Step(tgt, kind, rows, nc, tw, ldin, ldout, pad)  # type: ignore[attr-defined]
    return run


def plan2(kind: int, lengths: tuple[int, int], out_dtype: np.dtype, dims: tuple[int, ...],
          threads: int) -> Callable[[np.ndarray], np.ndarray] | None:
    """The thunk of a transform over the last two axes (fft2, rfft2, irfft2) as two passes
    of the jit's rows with blocked transposes between (transpose_lib.swap_last): the last
    axis, then the other as rows of the transposed array; or None where `plan` takes either
    length not. An irfft2 runs the inverse complex pass first, the real one last (numpy's
    and XLA's order). Scaling: each pass's 1 / n."""
    r, c = lengths
    lead = dims[:-2]
    half = c // 2 + 1
    cdt = np.dtype(np.complex64)
    if kind == fft_emit.IRFFT:
        cols = plan(fft_emit.IFFT, r, cdt, (*lead, half, r), threads)
        rows = plan(fft_emit.IRFFT, c, out_dtype, dims, threads)
        mid = (*lead, half, r)
    else:
        width = half if kind == fft_emit.RFFT else c
        rows = plan(kind, c, cdt, (*lead, r, width), threads)
        cols = plan(fft_emit.IFFT if kind == fft_emit.IFFT else fft_emit.FFT, r, cdt,
                    (*lead, width, r), threads)
        mid = (*lead, width, r)
    if rows is None or cols is None:
        return None
    outs: dict[int, Any] = {}

    def swap(x: np.ndarray, slot: int, shape: tuple[int, ...]) -> np.ndarray:
        return transpose_lib.swap_last(x, recycle.output(outs, slot, shape, x.dtype), threads)

    def run(x: np.ndarray) -> np.ndarray:
        if kind == fft_emit.IRFFT:
            x = np.ascontiguousarray(x, dtype=cdt)
            y = cols(swap(x, 0, mid))
            return rows(swap(y, 1, (*lead, r, half)))
        y = rows(x)
        return swap(cols(swap(y, 0, mid)), 1, dims)

    run.jit = True  # type: ignore[attr-defined]
    return run


@dataclass(frozen=True)
class Step:
    """A one-thread transform a native loop runs as a step (loop_library.py): all `rows`
    of the operand the loop's table points at into the step's result, no Python between."""

    tgt: target.CpuTarget
    kind: int
    rows: int
    nc: int
    tw: np.ndarray
    ldin: int
    ldout: int
    pad: int


def entry(keep: list[Any], st: Step, slot: int, out: int, table: int) -> list[int]:
    """The driver's (function, argument, outer) words of step `st` reading the operand at
    table[slot] into `out`: the descriptor and scratch made here, kept in `keep`."""
    eng, _ = _compile(st.tgt)
    at, scratch = _fresh(st.pad)
    d = np.array([table, slot, out, st.rows, st.nc, st.tw.ctypes.data, at, st.kind, st.ldin,
                  st.ldout], np.int64)
    keep.extend([eng, scratch, d, st.tw])
    return [eng.address(fft_emit.STEP), ptr(d), 0]


@functools.cache
def _fn(addr: int) -> Any:
    return _FN(addr)


def _fresh(floats: int) -> tuple[int, np.ndarray]:
    """(aligned address, its buffer) of `floats` floats of scratch (recycle.ALIGN)."""
    raw, off = recycle.aligned_bytes(4 * floats)
    return raw.ctypes.data + off, raw


__all__ = ["Step", "entry", "plan", "plan2", "table", "width", "SPLIT_ELEMENTS", "MIN_CORE",
           "MAX_COMPLEX", "MAX_REAL"]
