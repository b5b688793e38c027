"""Float -> integer converts in vector kernels (elementwise_convert._to_int_saturated): XLA
CPU's saturating conversion (NaN -> 0, out of range -> the type's min or max) exactly as the
interpreter computes it, for every float and integer type, at every range boundary, in
lanes and in the scalar tail."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy

FLOATS = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}
INTS = ["i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64"]


def _values(dtype: type) -> np.ndarray:
    """Specials, each power-of-two range edge with its neighbours in `dtype`, halves."""
    v = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 1e-40, -1e-40]
    for k in (7, 8, 15, 16, 31, 32, 63, 64):
        for e in (2.0 ** k, -(2.0 ** k)):
            v += [e, e - 1, e + 1, e - 0.5]
    x = np.array(v, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        edge = x.astype(dtype)
        up = np.nextafter(edge.astype(np.float64), np.inf).astype(dtype)
        down = np.nextafter(edge.astype(np.float64), -np.inf).astype(dtype)
    rng = np.random.default_rng(3)
    rand = (rng.standard_normal(64) * 10.0 ** rng.integers(0, 20, 64)).astype(dtype)
    return np.concatenate([edge, up, down, rand, edge[:7]])  # 7: a scalar tail too


@pytest.mark.parametrize("t", INTS)
@pytest.mark.parametrize("s", list(FLOATS))
def test_saturating_converts_match_the_interpreter(s: str, t: str) -> None:
    x = _values(FLOATS[s])
    n = x.shape[0]
    text = f"""
func.func @main(%x: tensor<{n}x{s}>) -> tensor<{n}x{t}> {{
  %y = stablehlo.convert %x : (tensor<{n}x{s}>) -> tensor<{n}x{t}>
  return %y : tensor<{n}x{t}>
}}
"""
    want = np.asarray(xlapy.compile(text, "interpreter")(x))
    got = np.asarray(xlapy.compile(text, "cpu")(x))
    np.testing.assert_array_equal(got, want)
