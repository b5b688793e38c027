"""ops/fma.py: x * y + z rounded once, against the C library's fma / fmaf (issue 15: XLA CPU
fuses its complex products, so the interpreter needs an exact FMA)."""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import pytest

from xlapy.ops.fma import fma


def _libm_fma(dtype: type) -> np.ufunc:
    lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    c = ctypes.c_double if dtype == np.float64 else ctypes.c_float
    fn = getattr(lib, "fma" if dtype == np.float64 else "fmaf")
    fn.restype, fn.argtypes = c, [c, c, c]
    return np.frompyfunc(fn, 3, 1)


def _same_normal(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Bitwise equal (NaN = NaN), results below the smallest normal flushed (FTZ: the only
    place the emulation may round twice)."""
    tiny = np.finfo(want.dtype).tiny
    g = np.where(np.abs(got) < tiny, np.copysign(0, got).astype(got.dtype), got)
    w = np.where(np.abs(want) < tiny, np.copysign(0, want).astype(want.dtype), want)
    return ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fma_matches_libm(dtype: type) -> None:
    rng = np.random.default_rng(15)
    n = 20000
    lim = 300 if dtype == np.float64 else 37

    def spread() -> np.ndarray:
        return (10.0 ** rng.uniform(-lim, lim, n) * rng.choice([-1.0, 1.0], n)).astype(dtype)

    x, y = spread(), spread()
    with np.errstate(all="ignore"):
        # z: random, or -x y rounded (the cancellation FMA exists for), or nearly so
        near = (-(x.astype(np.longdouble) * y) * (1 + rng.normal(size=n) * 1e-12)).astype(dtype)
        z = np.where(rng.random(n) < 0.3, spread(), np.where(rng.random(n) < 0.5,
                                                             -(x * y), near)).astype(dtype)
        want = np.asarray(_libm_fma(dtype)(x, y, z), dtype)
        got = fma(x, y, z)
    assert got.dtype == dtype
    bad = ~_same_normal(got, want)
    assert not bad.any(), (x[bad][:3], y[bad][:3], z[bad][:3], got[bad][:3], want[bad][:3])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fma_edges(dtype: type) -> None:
    """Zeros (signed), infinities, NaN, the largest finite (x y overflows but x y + z may
    not; x y + inf is inf), the smallest normal (x y underflows to a signed zero)."""
    f = np.finfo(dtype)
    edge = np.array([0.0, -0.0, 1.0, -1.0, 1 + float(f.eps), float(f.max), -float(f.max),
                     float(f.tiny), -float(f.tiny), np.inf, -np.inf, np.nan], dtype)
    x, y, z = (v.ravel() for v in np.meshgrid(edge, edge, edge))
    with np.errstate(all="ignore"):
        want = np.asarray(_libm_fma(dtype)(x, y, z), dtype)
        got = fma(x, y, z)
    bad = ~_same_normal(got, want)
    assert not bad.any(), (x[bad][:3], y[bad][:3], z[bad][:3], got[bad][:3], want[bad][:3])
    # exact cancellation is +0; a product underflowing under z = +-0 keeps its sign
    assert not np.signbit(fma(np.array([2.0], dtype), np.array([3.0], dtype),
                              np.array([-6.0], dtype)))[0]
    tiny = np.array([-float(f.tiny)], dtype)
    with np.errstate(all="ignore"):
        assert np.signbit(fma(tiny, tiny * 0 + float(f.tiny), np.zeros(1, dtype)))[0]


def test_fma_rejects_other_types() -> None:
    with pytest.raises(TypeError, match="fma takes f32 or f64"):
        fma(np.array([1], np.int32), np.array([1], np.int32), np.array([1], np.int32))
