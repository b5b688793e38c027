"""JAX's softmax row kernel (one fused kernel: the fast row max, exp and its sum, the divide
by the row's sum) matches the interpreter on rows of special values (the row max bit for
bit, the softmax within exp's ulp): NaN with payloads
(quiet and signaling), +-inf, all -inf, zeros of both signs as the row max, denormals, tiny
and huge values; with JAX's `maximum(-inf, row max)` (the `initial=-inf` of jnp.max), which
the kernel takes as the row max itself (max(-inf, v) = v for a computed v); f32 and f64,
1 and 2 threads."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import cache


def _text(rows: int, cols: int, t: str) -> str:
    x, r = f"tensor<{rows}x{cols}x{t}>", f"tensor<{rows}x{t}>"
    ninf = "0xFF800000" if t == "f32" else "0xFFF0000000000000"
    return f"""
func.func public @main(%x: {x}) -> {x} {{
  %ninf = stablehlo.constant dense<{ninf}> : tensor<{t}>
  %z = stablehlo.constant dense<0.0> : tensor<{t}>
  %m0 = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1]
    : ({x}, tensor<{t}>) -> {r}
  %nb = stablehlo.broadcast_in_dim %ninf, dims = [] : (tensor<{t}>) -> {r}
  %m = stablehlo.maximum %nb, %m0 : {r}
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : ({r}) -> {x}
  %d = stablehlo.subtract %x, %mb : {x}
  %e = stablehlo.exponential %d : {x}
  %s = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [1]
    : ({x}, tensor<{t}>) -> {r}
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : ({r}) -> {x}
  %y = stablehlo.divide %e, %sb : {x}
  return %y, %m : {x}, {r}
}}
""".replace(f"-> {x} {{", f"-> ({x}, {r}) {{")


def _rows(dt: type, cols: int) -> np.ndarray:
    rng = np.random.default_rng(11)
    it = np.uint32 if dt is np.float32 else np.uint64
    qnan = it(0x7FC00123) if dt is np.float32 else it(0x7FF8000000000123)
    snan = it(0x7F800456) if dt is np.float32 else it(0x7FF0000000000456)
    tiny = np.finfo(dt).tiny
    out = []

    def row(scale: float = 4.0, **at: object) -> None:
        r = (rng.standard_normal(cols) * scale).astype(dt)
        for k, v in at.items():
            c = int(k[1:])
            if isinstance(v, np.unsignedinteger):
                r.view(it)[c] = v
            else:
                r[c] = v
        out.append(r)

    row()
    row(c3=np.nan)
    row(**{f"c{cols - 1}": qnan})
    row(**{f"c{cols // 2}": snan})
    row(c5=np.inf)
    row(c5=np.inf, c9=-np.inf)
    row(c7=-np.inf)
    out.append(np.full(cols, -np.inf, dt))
    out.append(np.full(cols, 0.0, dt))
    z = np.full(cols, -3.0, dt)
    z[[4, 40]] = [-0.0, 0.0]
    out.append(z)
    z = np.full(cols, -3.0, dt)
    z[17] = -0.0
    out.append(z)
    out.append(np.full(cols, tiny / 4, dt))  # a denormal max: flushed
    row(1e-3, c2=tiny / 2, c11=-tiny / 2)
    row(1e3)  # exp underflows to 0 for most values
    row(60.0)
    row(**{f"c{cols - 2}": 1e30})
    return np.stack(out)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_softmax_rows_match_the_interpreter(dt: type, threads: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    cols = 256
    x = _rows(dt, cols)
    text = _text(x.shape[0], cols, "f32" if dt is np.float32 else "f64")
    cache.clear_memory()
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    assert not list(prog._exe.fallbacks())
    got = [np.asarray(v) for v in prog(x)]
    ref = [np.asarray(v) for v in xlapy.compile(text, backend="interpreter")(x)]
    # the row max (and the max with -inf) bit for bit, payloads and zero signs included
    np.testing.assert_array_equal(got[1].view(np.uint8), ref[1].view(np.uint8))
    assert np.isnan(ref[1][1]) and ref[1][4] == np.inf and ref[1][8] == 0.0
    # softmax within exp's ulp and the reassociated sum; NaN, inf and zeros where the
    # interpreter has them
    y, yr = got[0], ref[0]
    np.testing.assert_array_equal(np.isnan(y), np.isnan(yr))
    np.testing.assert_array_equal(y == 0, yr == 0)
    np.testing.assert_allclose(y, yr, rtol=1e-6 if dt is np.float32 else 1e-14, atol=0)


def test_max_with_minus_inf_keeps_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """maximum(-inf, v) and minimum(v, +inf) of computed values (NaN and -0 included) are v,
    bit for bit, as the interpreter's; of a loaded value (maybe denormal) the flushed v."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    t = "tensor<64xf32>"
    text = f"""
func.func public @main(%x: {t}) -> ({t}, {t}, {t}) {{
  %ninf = stablehlo.constant dense<0xFF800000> : {t}
  %inf = stablehlo.constant dense<0x7F800000> : {t}
  %v = stablehlo.multiply %x, %x : {t}
  %n = stablehlo.negate %v : {t}
  %a = stablehlo.maximum %ninf, %v : {t}
  %b = stablehlo.minimum %n, %inf : {t}
  %c = stablehlo.maximum %x, %ninf : {t}
  return %a, %b, %c : {t}, {t}, {t}
}}
"""
    x = np.random.default_rng(3).standard_normal(64).astype(np.float32)
    x[:8] = [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1e-40, 1e-20]
    cache.clear_memory()
    got = [np.asarray(v) for v in xlapy.compile(text, backend="cpu")(x)]
    ref = [np.asarray(v) for v in xlapy.compile(text, backend="interpreter")(x)]
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g.view(np.uint32), r.view(np.uint32))
