"""row_divide's test for a numerator expected >= 0 (an exp: no sign mask; with AVX2 the
only case it applies) keeps the division's bits: with the hint forced on for any
dividends (negative, -0, negative NaN, tiny, huge: the vectors holding them divide) and
for exp(x) / d itself (exp's zeros, tiny and infinite results, NaN), against the same
kernel dividing; f32 and f64."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_row_divide import DIVIDE, _case
from xlapy.backends.cpu import cache, row_divide, target

EXP_DIVIDE = """
func.func public @main(%x: tensor<{r}x{c}x{t}>, %d: tensor<{r}x{t}>) -> tensor<{r}x{c}x{t}> {{
  %e = stablehlo.exponential %x : tensor<{r}x{c}x{t}>
  %b = stablehlo.broadcast_in_dim %d, dims = [0] : (tensor<{r}x{t}>) -> tensor<{r}x{c}x{t}>
  %q = stablehlo.divide %e, %b : tensor<{r}x{c}x{t}>
  return %q : tensor<{r}x{c}x{t}>
}}
"""


def _run(text: str, x: np.ndarray, d: np.ndarray) -> np.ndarray:
    cache.clear_memory()
    return np.asarray(xlapy.compile(text, backend="cpu", options={"num_threads": 2})(x, d))


def _dividing(text: str, x: np.ndarray, d: np.ndarray,
              monkeypatch: pytest.MonkeyPatch) -> np.ndarray:
    with monkeypatch.context() as m:
        m.setattr(row_divide, "applies", lambda *a: False)
        return _run(text, x, d)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_hint_on_any_dividend(dt: type, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    rows, cols = 300, 512
    x, d = _case(dt, rows, cols, seed=13)
    x[5, :] = np.abs(x[5, :])  # whole rows of positive dividends: the product form
    x[6, 3] = -0.0
    x[7].view(np.uint32 if dt is np.float32 else np.uint64)[9] |= \
        np.uint32(0xFFC00000) if dt is np.float32 else np.uint64(0xFFF8000000000000)
    t = "f32" if dt is np.float32 else "f64"
    text = DIVIDE.format(r=rows, c=cols, t=t)
    want = _dividing(text, x, d, monkeypatch)
    real, real_applies = row_divide.emit, row_divide.applies
    calls: list[bool] = []

    def forced(b, a, dd, before, nonneg=False):  # type: ignore[no-untyped-def]
        calls.append(nonneg)
        return real(b, a, dd, before, nonneg=True)

    monkeypatch.setattr(row_divide, "emit", forced)
    monkeypatch.setattr(row_divide, "applies",
                        lambda a, dd, hoisted, nonneg=False: real_applies(a, dd, hoisted, True))
    got = _run(text, x, d)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    t = target.current()  # (AVX2 too, with the hint)
    assert bool(calls) == (t.has("avx512f") or t.has("avx2") and t.has("fma"))
    assert not any(calls)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_exp_over_row_value(dt: type, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    rows, cols = 64, 256
    rng = np.random.default_rng(21)
    x = (rng.standard_normal((rows, cols)) * 30).astype(dt)
    x[0, :7] = [np.nan, -np.inf, np.inf, 0.0, -0.0, -1e30, 1e30]
    x[1, :] = rng.uniform(-110, -60, cols)  # exp tiny, below 2^-79, or flushed to 0
    x[2, :] = -np.inf  # all zeros: the product form
    d = np.abs(rng.standard_normal(rows)).astype(dt) + 0.5
    d[3:6] = [0.0, np.inf, np.nan]
    t = "f32" if dt is np.float32 else "f64"
    text = EXP_DIVIDE.format(r=rows, c=cols, t=t)
    want = _dividing(text, x, d, monkeypatch)
    seen: list[bool] = []
    real = row_divide.emit

    def spy(b, a, dd, before, nonneg=False):  # type: ignore[no-untyped-def]
        seen.append(nonneg)
        return real(b, a, dd, before, nonneg)

    monkeypatch.setattr(row_divide, "emit", spy)
    got = _run(text, x, d)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    t = target.current()  # (AVX2 too: an exp numerator)
    assert bool(seen) == (t.has("avx512f") or t.has("avx2") and t.has("fma")) and all(seen)
