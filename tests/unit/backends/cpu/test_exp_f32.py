"""The f32 exp's degree-6 minimax polynomial (math_coeffs.EXP_F32): under one ulp of the exact
value (not only of the rounded one) over 3M inputs - all binades of results, dense near 0
and at the edges of every reduction interval - and exact where it must be (exp(0) = 1,
overflow to inf, the flush of results below the normal range)."""

from __future__ import annotations

import math

import numpy as np

import xlapy
from xlapy.backends.cpu import math_coeffs

TEXT = """
func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %r = stablehlo.exponential %x : tensor<{n}xf32>
  return %r : tensor<{n}xf32>
}}
"""


def test_within_one_ulp_of_exact() -> None:
    rng = np.random.default_rng(0)
    n = 1 << 20
    edges = np.round(rng.uniform(-125, 127, n)) * math.log(2) + \
        rng.choice([-1, 1], n) * math.log(2) / 2 * (1 - rng.uniform(0, 1e-3, n))
    x = np.concatenate([rng.uniform(-87.3, 88.7, n), rng.uniform(-1, 1, n), edges])
    x = x.astype(np.float32)
    got = np.asarray(xlapy.compile(TEXT.format(n=x.size), backend="cpu")(x)).astype(np.float64)
    exact = np.exp(x.astype(np.float64))
    ref = exact.astype(np.float32)
    normal = np.isfinite(ref) & (ref >= np.finfo(np.float32).tiny)
    ulp = np.spacing(ref[normal]).astype(np.float64)
    assert np.max(np.abs(got[normal] - exact[normal]) / ulp) < 1.0
    assert len(math_coeffs.EXP_F32) == 7 and math_coeffs.EXP_F32[:2] == (1.0, 1.0)


def test_exact_points() -> None:
    x = np.array([0.0, -0.0, 88.8, 89.0, np.inf, -np.inf, -87.5, -104.0, -200.0, np.nan],
                 np.float32)
    got = np.asarray(xlapy.compile(TEXT.format(n=x.size), backend="cpu")(x))
    assert got[0] == 1.0 and got[1] == 1.0
    assert np.isinf(got[2:5]).all() and (got[5:9] == 0).all() and np.isnan(got[9])
