"""FFT thunks: single precision (f32 / c64) over the last one or two axes of power-of-two
lengths through our own JIT function (fft_jit.py, where it takes the lengths), else through
DUCC (the `ducc0` package: the FFT library XLA's CPU runtime calls, by pocketfft's author),
as is every double-precision transform.

The interpreter computes every transform in double (numpy's pocketfft) and rounds once (the
reference). Here each precision computes in itself, as XLA's runtime does: each transform's
error stays within log2(n) eps / 2 of its norm (tests/unit/backends/cpu/test_lapack.py),
double precision an ulp or so of the largest output from numpy's bits and XLA's (whose
DUCC build gives numpy's bits on some inputs: a c128 fft2 of f32 values, not of full f64
ones). Double precision went through scipy.fft's pocketfft, numpy's bits, until session
69: ducc0 takes 0.5-0.97 of its time (Zen 4, one or two threads; a 16 x 256 x 256 c128
fft2 5.0-5.9 ms against XLA's 2.9-3.7, ducc0's 3.1-4.5). Single precision differs from
XLA's bits by about an ulp of the largest output (XLA's DUCC build matches scipy's pocketfft
bit for bit; ducc0's newer passes do not). ducc0 vectorizes across the rows it transforms
with the CPU's own vector width and plans its passes anew: a 256 x 4096 rfft took 2.77 ms
with scipy's pocketfft and 1.56 with ducc0 on one Zen 3 core (1.34 -> 0.80 on two), complex
and inverse transforms 1.3-1.9x faster (a program's rfft then ran at XLA's time, not 1.4-1.9x
it). A transform of PARALLEL_FFT elements or more runs over `threads` (each row is one
transform: the bits do not depend on the split), and so does one of PARALLEL_FFT_WORK
element passes (a 3-D one); smaller ones stay on one thread (64 x 1024 took 0.16 -> 0.29-0.39
ms on 2 in a program: the library's threads meet the pool's spinning worker).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

from xlapy.backends.cpu import recycle
from xlapy.backends.cpu.threads import parked
from xlapy.ir import Instruction

#: Elements of an fft from which it is split over the threads.
PARALLEL_FFT = 1 << 20
#: Or elements x log2(elements per transform) (its passes over the data) from which it is:
#: a 64 x 64 x 64 transform (262144 x 18) took 1.25 ms on one Zen 4 core, 0.78 on two; 256
#: x 1000 c64 (2.56M) 0.50 -> 0.31 (XLA 0.33); 256 x 400 (0.92M) gained nothing on two.
PARALLEL_FFT_WORK = 1 << 20


def _ducc(ft: object, axes: tuple[int, ...], lengths: tuple[int, ...], w: int,
          dims: tuple[int, ...], double: bool) -> Callable[[np.ndarray], np.ndarray]:
    """ducc0's transform (inverse ones scaled by 1 / n, inorm=2, as numpy's) into a result
    recycled across calls (recycle.py: a fresh one is page faults, ~0.5 ms for 256 x 1000
    c64); single precision by scipy's row by row where a row's bytes would alias
    (`_aliasing`: measured in c64; a c128 256 x 4096 c2c takes ducc0 half scipy's time)."""
    import ducc0

    from xlapy.ops.linalg import FftType

    f = ducc0.fft
    fn = {
        FftType.FFT: lambda x, out: f.c2c(x, axes=axes, forward=True, nthreads=w, out=out),
        FftType.IFFT: lambda x, out: f.c2c(x, axes=axes, forward=False, inorm=2, nthreads=w,
                                           out=out),
        FftType.RFFT: lambda x, out: f.r2c(x, axes=axes, forward=True, nthreads=w, out=out),
        FftType.IRFFT: lambda x, out: f.c2r(x, axes=axes, lastsize=lengths[-1],
                                            forward=False, inorm=2, nthreads=w, out=out),
    }[ft]
    real, cplx = (np.float64, np.complex128) if double else (np.float32, np.complex64)
    tout = np.dtype(real if ft == FftType.IRFFT else cplx)
    outs: dict[int, Any] = {}
    if not double and len(axes) == 1 and len(dims) > 1 and int(np.prod(dims[:-1])) > 1 and \
            _aliasing(ft, lengths[-1]):
        return _rowwise(ft, lengths, w)
    return lambda x: fn(x, recycle.output(outs, 0, dims, tout))


#: Row strides (bytes) that are multiples of this alias in the caches when ducc0 transforms
#: several rows at once.
ALIAS_BYTES = 4096


def _aliasing(ft: object, n: int) -> bool:
    """Whether the input's or the output's row stride of a transform of length n along the
    last axis is a multiple of ALIAS_BYTES. ducc0 vectorizes across rows, and rows 12 KB
    apart share their cache sets: c2c of 256 x 1536 c64 took 1.81 ms on one Zen 4 core,
    2.2x XLA's time (2560: 3.05, 3072: 3.82), 2.0 on one core of a Xeon (Sapphire Rapids
    class) against 0.85 through rows padded by 64 bytes, before two 0.22 ms copies."""
    from xlapy.ops.linalg import FftType

    nin, nout = {FftType.RFFT: (4 * n, 8 * (n // 2 + 1)),
                 FftType.IRFFT: (8 * (n // 2 + 1), 4 * n)}.get(ft, (8 * n, 8 * n))
    return nin % ALIAS_BYTES == 0 or nout % ALIAS_BYTES == 0


def _rowwise(ft: object, lengths: tuple[int, ...], w: int
             ) -> Callable[[np.ndarray], np.ndarray]:
    """scipy's pocketfft along the last axis, row by row (on `w` threads), in single
    precision: no cache aliasing, no copies, and XLA's bits for c2c and r2c (measured: its
    DUCC build matches scipy's pocketfft; not c2r's). Xeon, 2 threads, a program's fft
    against ducc0 through padded rows, interleaved: c2c 256 x 1536 1.07 -> 0.54 ms (XLA
    0.52), 256 x 2560 1.55 -> 0.85 (0.73), 128 x 3072 1.03 -> 0.63 (0.54); rfft 256 x 3072
    0.85 -> 0.64 (0.66)."""
    import scipy.fft as sfft

    from xlapy.ops.linalg import FftType

    return {
        FftType.FFT: lambda x: sfft.fft(x, axis=-1, workers=w),
        FftType.IFFT: lambda x: sfft.ifft(x, axis=-1, workers=w),
        FftType.RFFT: lambda x: sfft.rfft(x, axis=-1, workers=w),
        FftType.IRFFT: lambda x: sfft.irfft(x, n=lengths[-1], axis=-1, workers=w),
    }[ft]


def fft(instr: Instruction, threads: int = 1) -> Callable[..., np.ndarray]:
    """The thunk of an fft instruction: the operand in its own precision (f32, f64, c64 or
    c128: the op's verifier), the result in the instruction's type."""
    at = instr.attrs
    dims, out_dtype = tuple(instr.shape.dimensions), instr.shape.dtype
    src = instr.operands[0].shape
    axes = tuple(range(src.rank - len(at.fft_length), src.rank))
    compute = src.dtype
    lengths = tuple(at.fft_length)
    empty = any(d == 0 for d in dims) or 0 in src.dimensions
    size = int(np.prod(src.dimensions))
    work = size * max(1, int(np.prod(lengths))).bit_length()
    w = max(1, threads) if size >= PARALLEL_FFT or work >= PARALLEL_FFT_WORK else 1
    single = compute in (np.float32, np.complex64)
    if single and len(lengths) in (1, 2) and not empty:
        from xlapy.backends.cpu import fft_jit
        from xlapy.ops.linalg import FftType

        kind = [FftType.FFT, FftType.IFFT, FftType.RFFT, FftType.IRFFT].index(at.fft_type)
        jit = fft_jit.plan(kind, lengths[0], np.dtype(out_dtype), dims, threads) \
            if len(lengths) == 1 else \
            fft_jit.plan2(kind, (lengths[0], lengths[1]), np.dtype(out_dtype), dims, threads)
        if jit is not None:
            return jit
    fn = _ducc(at.fft_type, axes, lengths, w, dims, not single)
    # several workers: the library's threads get the cores xlapy's spinning ones held
    quiet = parked if w > 1 else contextlib.nullcontext

    def run(x: np.ndarray) -> np.ndarray:
        if empty:
            return np.zeros(dims, out_dtype)
        with quiet():
            return fn(x.astype(compute, copy=False)).astype(out_dtype, copy=False)

    return run


__all__ = ["fft", "PARALLEL_FFT"]
