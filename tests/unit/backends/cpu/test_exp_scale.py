"""f32 exp's one-multiply 2^n (math_poly._exp_scale; vectors without vscalefps, FTZ): the
bits of ldexp's two scalings for every input - the flush below -87.3, n = -127 (2^n = +0),
the overflow edge where n = 128 takes ldexp (88.3 to 88.8), inf, NaN, the range between -
on AVX2, SSE and 8-lane vectors on AVX-512; in the IEEE mode nothing changes."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import cache, math_poly, target

TEXT = """
func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %r = stablehlo.exponential %x : tensor<{n}xf32>
  return %r : tensor<{n}xf32>
}}
"""


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(2)
    n = 1 << 18
    parts = [rng.uniform(-110, 90, n), rng.uniform(-88.5, -86.5, n), rng.uniform(88.0, 89.0, n),
             rng.uniform(-1, 1, n), np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.3,
                                              88.37626, 88.72283, 88.7229, -88.0, -87.336])]
    x = np.concatenate(parts).astype(np.float32)
    x[::997] = 88.5  # vectors with one lane past 88.3 next to ordinary ones
    return x


@pytest.mark.parametrize("mode", ["ftz", "ieee"])
@pytest.mark.parametrize("lanes", [None, 8])
def test_same_bits_as_ldexp(mode: str, lanes: int | None,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    x = _inputs()
    opts = {"denormal": mode, **({"lanes": lanes} if lanes else {})}
    text = TEXT.format(n=x.size)
    seen: list[bool] = []
    real = math_poly.Math._one_scale

    def spy(self, terms):  # type: ignore[no-untyped-def]
        seen.append(real(self, terms))
        return seen[-1]

    monkeypatch.setattr(math_poly.Math, "_one_scale", spy)
    cache.clear_memory()
    got = np.asarray(xlapy.compile(text, backend="cpu", options=opts)(x))
    assert not any(seen) or mode == "ftz"
    if mode == "ftz" and (lanes or not target.current().has("avx512f")):
        assert any(seen)  # the one-scale form ran
    monkeypatch.setattr(math_poly.Math, "_one_scale", lambda self, terms: False)
    cache.clear_memory()
    want = np.asarray(xlapy.compile(text, backend="cpu", options=opts)(x))
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()
