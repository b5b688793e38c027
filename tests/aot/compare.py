"""How an object's results are compared with the interpreter's: integer, pred and other
exact types bit for bit; floats within a small number of units in the last place (the
object's products and convolutions sum in another order than the interpreter's, and its
transcendental functions are the cpu backend's, within their documented ULP bounds)."""

from __future__ import annotations

from typing import Any

import numpy as np

#: Units in the last place a float result may differ by (tests/tolerance.py's ULP_CPU
#: bounds are at most 5; sums of a few terms in another order add a few more).
MAX_ULP = 64
#: Absolute slack in units of eps times the largest magnitude of the result.
ATOL_EPS = 8


def _floats(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "c":
        return np.stack([a.real, a.imag]).astype(np.float64)
    return a.astype(np.float64)


def mismatch(got: np.ndarray, ref: Any) -> str | None:
    """None when `got` matches the reference value, else what differs."""
    ref = np.asarray(ref)
    if got.shape != ref.shape:
        return f"shape {got.shape} != {ref.shape}"
    if got.dtype.kind in "biu" or ref.dtype.kind in "biu":
        if np.array_equal(got, ref):
            return None
        bad = np.flatnonzero(got.reshape(-1) != ref.reshape(-1))
        return f"{bad.size} element(s) differ, first at {bad[:1]}: got " \
               f"{got.reshape(-1)[bad[:1]]}, expected {ref.reshape(-1)[bad[:1]]}"
    g, r = _floats(got), _floats(ref)
    try:
        import ml_dtypes

        eps = float(ml_dtypes.finfo(ref.dtype).eps)
    except (ImportError, ValueError, TypeError):
        eps = 2.0 ** -7
    both_nan = np.isnan(g) & np.isnan(r)
    tiny = np.abs(r) < 1e-30
    finite = np.abs(r[np.isfinite(r)])
    scale = float(finite.max()) if finite.size else 0.0
    # Sums (products, convolutions, transforms) cancel: an element far below the result's
    # scale carries the rounding of terms of the scale's size.
    atol = ATOL_EPS * eps * scale
    close = np.isclose(g, r, rtol=MAX_ULP * eps, atol=atol) | both_nan | \
        (tiny & (np.abs(g) < 1e-30))
    close |= (g == r)
    if close.all():
        return None
    bad = np.flatnonzero(~close.reshape(-1))
    return f"{bad.size} element(s) differ, first at {bad[:1]}: got {g.reshape(-1)[bad[:1]]}, " \
           f"expected {r.reshape(-1)[bad[:1]]}"
