"""LAPACK calls on matrices of moderate size run on the calling thread alone.

Why: scipy's and numpy's OpenBLAS split potrf, getrf, trsm, syevd, ... over threads of their
own from about 128 x 128 on. On 2 cores (Zen 4) that won nothing up to 1024 x 1024 (f32 potrf
256: 0.172 ms on one thread, 0.210 on two; 1024: 7.6 / 8.5; getrf equal) and only paid from
2048 (potrf 46 / 36 ms, getrf 74 / 47). Inside a program the split cost more: OpenBLAS's
workers woke beside xlapy's own (backends/cpu/threads.py) and kept spinning after the call,
so jax.scipy.linalg.cho_solve of a 256 x 256 matrix ran its potrf in 0.41 ms and each trsm
in 0.14 (one thread: 0.19 and 0.075) and the transposes after them at half speed.

Below SERIAL_BELOW elements per matrix the call now takes one thread, set through OpenBLAS's
per-thread count (openblas_set_num_threads_local) around the call and restored after it, so
a user's own scipy and numpy calls keep their threads. The bits of these routines depend on
OpenBLAS's split (potrf from 128 x 128 f64, getrf and syevd from 256): below SERIAL_BELOW they
no longer depend on the machine's core count, and both backends call through here, so they
agree with each other. Below SERIAL_FROM elements OpenBLAS does not split (the ~1 us of the
two ctypes calls a library is left out).
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
from collections.abc import Callable, Sequence
from typing import Any

#: Elements per matrix from which OpenBLAS keeps its own threads (2048 x 2048).
SERIAL_BELOW = 2048 * 2048
#: Elements per matrix below which nothing is set (OpenBLAS runs them on one thread anyway).
SERIAL_FROM = 64 * 64


@functools.cache
def _found() -> tuple[tuple[str, Any], ...]:
    """(package, openblas_set_num_threads_local) of scipy's and numpy's bundled OpenBLAS
    (those found)."""
    import numpy
    import scipy

    found = []
    for pkg in (scipy, numpy):
        libs = os.path.join(os.path.dirname(pkg.__file__), os.pardir, f"{pkg.__name__}.libs")
        for path in sorted(glob.glob(os.path.join(libs, "libscipy_openblas*.so"))):
            try:
                f = ctypes.CDLL(path).openblas_set_num_threads_local
            except (OSError, AttributeError):
                continue
            f.argtypes, f.restype = [ctypes.c_int], ctypes.c_int
            found.append((pkg.__name__, f))
    return tuple(found)


def _setters() -> tuple[Any, ...]:
    return tuple(f for _, f in _found())


def scipy_setter_address() -> int:
    """The address of scipy's openblas_set_num_threads_local (0 if not found): the OpenBLAS
    whose routines scipy's cython_lapack and cython_blas export (loop_lapack.py calls those
    natively and sets the count around them as `_one_thread` does)."""
    return next((ctypes.cast(f, ctypes.c_void_p).value or 0 for pkg, f in _found()
                 if pkg == "scipy"), 0)


def matrix_elements(shape: Sequence[int]) -> int:
    """Elements of one matrix of a batch of shape [..., r, c] (of a vector: its length)."""
    dims = list(shape)[-2:]
    return dims[0] * dims[-1] if len(dims) == 2 else (dims[0] if dims else 1)


def _applies(elements: int) -> bool:
    return SERIAL_FROM <= elements < SERIAL_BELOW and bool(_setters())


def _one_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """fn(*args, **kwargs) with the calling thread's OpenBLAS counts at 1, restored after."""
    sets = _setters()
    old = [s(1) for s in sets]
    try:
        return fn(*args, **kwargs)
    finally:
        for s, n in zip(sets, old):
            s(n)


def serial(fn: Callable[..., Any], elements: int) -> Callable[..., Any]:
    """`fn` run on the calling thread's OpenBLAS alone where its matrices have `elements`
    each in [SERIAL_FROM, SERIAL_BELOW); else `fn` itself."""
    return functools.wraps(fn)(functools.partial(_one_thread, fn)) if _applies(elements) \
        else fn


def serial_target(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A registered custom_call target run(operands, result, attrs) under `serial`, its
    size that of operand 0's matrices."""
    @functools.wraps(fn)
    def run(operands: list[Any], result: Any, attrs: Any) -> Any:
        shape = getattr(operands[0], "shape", ()) if operands else ()
        if _applies(matrix_elements(shape)):
            return _one_thread(fn, operands, result, attrs)
        return fn(operands, result, attrs)

    return run


__all__ = ["SERIAL_BELOW", "SERIAL_FROM", "matrix_elements", "scipy_setter_address", "serial",
           "serial_target"]
