"""xlapy.ops.libm: the C library's pow / atan2 / cbrt element-wise, the same bits as the cpu
backend's calls on every machine (NumPy's loops are SIMD approximations on AVX-512)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from xlapy.ops import libm


def test_f64_is_the_c_librarys() -> None:
    rng = np.random.default_rng(3)
    x, y = rng.uniform(0.1, 20, 500), rng.uniform(-3, 3, 500)
    got = libm.call("power", x, y)
    assert got.dtype == np.float64
    assert all(g == math.pow(a, b) for g, a, b in zip(got, x, y))
    assert all(g == math.atan2(a, b) for g, a, b in zip(libm.call("atan2", x, y), x, y))
    assert all(g == math.cbrt(a) for g, a in zip(libm.call("cbrt", -x), -x))


def test_f32_edge_values_and_broadcast() -> None:
    x = np.array([-2.0, 0.0, -0.0, np.inf, np.nan, 1.0], np.float32)
    got = libm.call("power", x, np.float32(0.5))
    assert got.dtype == np.float32 and got.shape == x.shape
    assert np.isnan(got[0]) and got[1] == 0 and np.isposinf(got[3]) and np.isnan(got[4])
    assert libm.call("power", np.float32(0.0), np.float32(-1.0)) == np.inf  # no exception
    assert libm.call("cbrt", np.zeros((2, 0), np.float32)).shape == (2, 0)


def test_other_types_are_refused() -> None:
    with pytest.raises(TypeError, match="f32 or f64"):
        libm.call("power", np.ones(2, np.float16), np.ones(2, np.float16))
