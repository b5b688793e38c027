"""Comparison helpers for differential tests: bit-exact for integers, NaN-aware for floats."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def jax_x64() -> Any:
    """Import jax with 64-bit types enabled (XLA's full type set)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def assert_same(ours: Any, theirs: Any, rtol: float = 0.0, atol: float = 0.0,
                what: str = "") -> None:
    """Equal dtype and shape; exact (NaN == NaN, signed zeros equal) unless tolerances given."""
    theirs = np.asarray(theirs)
    ours = np.asarray(ours)
    assert ours.dtype == theirs.dtype, f"{what}: dtype {ours.dtype} vs XLA {theirs.dtype}"
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} vs XLA {theirs.shape}"
    if ours.dtype.kind in "biu" or ours.dtype == np.bool_:
        mismatch = ours != theirs
    else:
        a = ours.astype(np.complex128 if ours.dtype.kind == "c" else np.float64)
        b = theirs.astype(a.dtype)
        both_nan = np.isnan(a) & np.isnan(b)
        if rtol == 0 and atol == 0:
            mismatch = ~(both_nan | (a == b))
        else:
            mismatch = ~(both_nan | np.isclose(a, b, rtol=rtol, atol=atol))
    if np.any(mismatch):
        idx = np.argwhere(mismatch)[:5]
        details = "; ".join(f"at {tuple(int(i) for i in ix)}: ours {ours[tuple(ix)]!r} "
                            f"XLA {theirs[tuple(ix)]!r}" for ix in idx)
        raise AssertionError(f"{what}: {int(np.sum(mismatch))} of {ours.size} differ: {details}")
