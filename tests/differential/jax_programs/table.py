"""The program table's vocabulary: one `Program` per JAX function, with example inputs and the
tolerance it is compared under, plus seeded input makers (small shapes keep the suite fast)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
I8, I16, I32, I64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
U8, U32, U64 = np.dtype(np.uint8), np.dtype(np.uint32), np.dtype(np.uint64)
BOOL = np.dtype(np.bool_)

#: Short dtype names used in program ids.
SHORT = {BF16: "bf16", F16: "f16", F32: "f32", F64: "f64", C64: "c64", C128: "c128",
         I8: "s8", I16: "s16", I32: "s32", I64: "s64", U8: "u8", U32: "u32", U64: "u64",
         BOOL: "pred"}

#: Tolerance for inexact (transcendental) results: (rtol, atol) per dtype. XLA's CPU backend
#: uses its own polynomial approximations, so a few ulps are allowed.
INEXACT = {BF16: (2e-2, 1e-2), F16: (4e-3, 1e-3), F32: (2e-5, 1e-6), F64: (1e-12, 1e-13),
           C64: (2e-5, 1e-6), C128: (1e-12, 1e-13)}


@dataclass(frozen=True)
class Sums:
    """The tolerance of a program made of dots, convolutions, sums and products (and any
    composition of them with nonnegative coefficients, like the gradient of a sum of squares
    of a convolution): each float result is a sum of at most `k` roundings' worth of terms
    (for a chain, the contraction lengths added), which XLA and we may add in different
    orders. Compared within tests/tolerance.py's `magnitude_bound`, each result's sum of
    |terms| being the program itself run on |arguments| in float64. `acc`: the type the
    sums are accumulated in when not f32/f64 (None: f32 for bf16/f16, as jnp.sum and XLA's
    dots do)."""

    k: int
    acc: Any = None


Tol = tuple[float, float] | Sums | None


@dataclass(frozen=True, eq=False)  # hashed by identity: the lowering cache key
class Program:
    """A JAX function and its example inputs; `tol` None means bit-exact comparison."""

    id: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    tol: Tol = None


def inexact(dtype: np.dtype, scale: float = 1.0) -> tuple[float, float]:
    """The stated tolerance for an inexact result of `dtype`, widened by `scale`."""
    rtol, atol = INEXACT.get(np.dtype(dtype), INEXACT[F32])
    return (rtol * scale, atol * scale)


_RNG = np.random.default_rng(20240404)


def arr(shape: tuple[int, ...], dtype: Any, lo: float = -3.0, hi: float = 3.0) -> np.ndarray:
    """Seeded random array: uniform floats in [lo, hi), integers in [lo, hi], random bools."""
    dt = np.dtype(dtype)
    if dt == BOOL:
        return _RNG.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return _RNG.integers(max(int(lo), info.min), min(int(hi), info.max) + 1, shape,
                             dtype=np.int64).astype(dt)
    if dt.kind == "c":
        re = _RNG.uniform(lo, hi, shape)
        im = _RNG.uniform(lo, hi, shape)
        return (re + 1j * im).astype(dt)
    return _RNG.uniform(lo, hi, shape).astype(dt)


def spd(n: int, dtype: Any, batch: tuple[int, ...] = ()) -> np.ndarray:
    """A well-conditioned symmetric (Hermitian) positive definite matrix."""
    a = arr((*batch, n, n), dtype, -1, 1)
    m = a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)
    return m.astype(dtype)


def bits(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Random raw bits (every bit pattern, NaNs and infinities included) viewed as `dtype`."""
    dt = np.dtype(dtype)
    raw = _RNG.integers(0, 256, (*shape, dt.itemsize), dtype=np.uint8)
    return raw.view(dt).reshape(shape)


def dtype_id(dtype: Any) -> str:
    return SHORT[np.dtype(dtype)]
