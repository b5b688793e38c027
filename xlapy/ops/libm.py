"""The C library's pow, atan2, cbrt (and log, sin, cos for XLA's complex formulas,
ops/complex_xla.py) on arrays, one call an element.

The cpu backend's kernels call libm for f64 pow, atan2 and cbrt and for the complex formulas'
f32 parts (backends/cpu/elementwise_libm.py), and the reference must give the same bits on
every machine. Real f32 pow, atan2 and cbrt are `wide`: the f64 function rounded once,
which the kernels compute as f64 vector code (backends/cpu/libm_f32.py) to within 2^-43
relative, so both give the correctly rounded result save for values that close to a tie
(glibc's powf, atan2f and cbrtf are 1 ulp off on 0.02%, 20% and 21% of a sample).
NumPy's own loops are not libm everywhere: on AVX-512 machines they are SIMD
approximations (about 20% of f32 `np.power` results differ from glibc's powf there), so
values computed with them would depend on the CPU. ctypes costs about half a microsecond an
element; the reference interpreter pays that for values that are the same everywhere.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

#: op -> (f32 function, f64 function) in the C library.
NAMES = {"power": ("powf", "pow"), "atan2": ("atan2f", "atan2"), "cbrt": ("cbrtf", "cbrt"),
         "cos": ("cosf", "cos"), "sin": ("sinf", "sin"), "log": ("logf", "log")}
_ARITY = {"power": 2, "atan2": 2, "cbrt": 1, "cos": 1, "sin": 1, "log": 1}


@functools.cache
def _library() -> ctypes.CDLL:
    """The libm the process (and so the cpu backend's bound calls) uses."""
    for name in ("libm.so.6", ctypes.util.find_library("m")):
        if name:
            try:
                return ctypes.CDLL(name)
            except OSError:
                continue
    return ctypes.CDLL(None)  # libm's symbols are in the process (Python links it)


@functools.cache
def _ufunc(op: str, f64: bool) -> Callable[..., Any]:
    name = NAMES[op][f64]
    c_type = ctypes.c_double if f64 else ctypes.c_float
    fn = getattr(_library(), name)
    fn.restype, fn.argtypes = c_type, [c_type] * _ARITY[op]
    return np.frompyfunc(fn, _ARITY[op], 1)  # type: ignore[no-any-return]


def call(op: str, *args: np.ndarray) -> np.ndarray:
    """libm's `op` element-wise on f32 or f64 arrays (broadcast), in their type."""
    dtype = np.result_type(*args)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"libm.call({op!r}) takes f32 or f64 arrays, not {dtype}")
    arrays = [np.asarray(a, dtype) for a in args]
    with np.errstate(all="ignore"):  # libm raises the IEEE flags; NaN / inf are the values
        out = _ufunc(op, dtype == np.float64)(*arrays)
    return np.asarray(out, dtype)


def wide(op: str, *args: np.ndarray) -> np.ndarray:
    """libm's `op` on f32 arrays as the f64 function rounded once to f32 (f64: `call`)."""
    dtype = np.result_type(*args)
    if dtype != np.float32:
        return call(op, *args)
    return call(op, *(np.asarray(a, np.float64) for a in args)).astype(np.float32)
