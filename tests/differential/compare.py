"""Comparison helpers for differential tests: bit-exact for integers, NaN-aware for floats;
results of dots, convolutions and sums within the bound of tests/tolerance.py, since XLA's
CPU kernels (Eigen, YNNPACK, its own vectorized loops) add in another order than ours."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tests.tolerance import assert_close_to_bound

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


def assert_within(ours: Any, theirs: Any, bound: Any, what: str = "") -> None:
    """Equal dtype and shape, and |ours - theirs| <= bound elementwise (NaN where XLA's is)."""
    theirs = np.asarray(theirs)
    ours = np.asarray(ours)
    assert ours.dtype == theirs.dtype, f"{what}: dtype {ours.dtype} vs XLA {theirs.dtype}"
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} vs XLA {theirs.shape}"
    assert_close_to_bound(ours, theirs, bound, what)


def magnitudes(fn: Any, *args: Any) -> list[np.ndarray]:
    """jax `fn` on |args| in float64 (floats and complex; other args as they are), flattened:
    for a dot, convolution or sum -- or any composition of them with nonnegative
    coefficients, e.g. the gradient of a sum of squares of one -- each result's sum of
    |products|, which bounds its rounding error (tests/tolerance.py)."""
    jax = jax_x64()
    def inexact(a: Any) -> bool:
        dt = np.asarray(a).dtype
        return dt.kind in "fc" or (dt.kind == "V" and "float" in dt.name)

    wide = [np.abs(np.asarray(a)).astype(np.float64) if inexact(a) else a for a in args]
    return [np.asarray(v, np.float64) for v in jax.tree_util.tree_leaves(jax.jit(fn)(*wide))]
