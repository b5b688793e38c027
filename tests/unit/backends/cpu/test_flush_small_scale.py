"""A multiply by a constant of magnitude below 1 skips its other operand's denormal flush in
kernels (flush_ftz.scaled_by_small: FTZ flushes the product instead): the interpreter's bits
for denormals of both signs, zeros, NaN payloads (quiet and signaling), infinities and
normal values, times constants below 1 (positive, negative, tiny, denormal) and at or above
1 (flushed as before), f32 and f64, vector lanes and scalar rests, in a scaled softmax (the
row max and exp of x * c) too."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import cache, flush_ftz


def _values(dt: type, n: int) -> np.ndarray:
    rng = np.random.default_rng(8)
    it = np.uint32 if dt is np.float32 else np.uint64
    fi = np.finfo(dt)
    x = (rng.standard_normal(n) * 3).astype(dt)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, fi.smallest_subnormal,
                        -fi.smallest_subnormal, fi.tiny / 2, -fi.tiny / 2,
                        fi.tiny - fi.smallest_subnormal, fi.tiny, -fi.tiny, fi.max, 1.0],
                       dt)
    if n < 2 * len(special):  # a few values only: the denormals, a NaN, -0
        return special[[7, 8, 5, 4, 1]][:n].copy()
    x[:len(special)] = special
    x.view(it)[len(special)] = 0x7F800456 if dt is np.float32 else 0x7FF0000000000456
    x.view(it)[len(special) + 1] = 0xFFC00123 if dt is np.float32 else 0xFFF8000000000123
    x[len(special) + 2::7] = rng.uniform(-1, 1, len(x[len(special) + 2::7])) * fi.tiny
    return x


@pytest.mark.parametrize("n", [67, 5])  # lanes and a scalar rest; scalars only
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("c", [0.125, -0.3, 0.99999, 1e-30, 1e-40, 1.0, -1.0, 2.0, 0.0])
def test_multiply_by_a_small_constant(c: float, dt: type, n: int,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    t = "f32" if dt is np.float32 else "f64"
    cv = float(dt(c))
    text = f"""
func.func public @main(%x: tensor<{n}x{t}>) -> (tensor<{n}x{t}>, tensor<{n}x{t}>) {{
  %c = stablehlo.constant dense<{cv!r}> : tensor<{n}x{t}>
  %a = stablehlo.multiply %x, %c : tensor<{n}x{t}>
  %b = stablehlo.multiply %c, %x : tensor<{n}x{t}>
  return %a, %b : tensor<{n}x{t}>, tensor<{n}x{t}>
}}
"""
    x = _values(dt, n)
    cache.clear_memory()
    got = xlapy.compile(text, backend="cpu")(x)
    ref = xlapy.compile(text, backend="interpreter")(x)
    it = np.uint32 if dt is np.float32 else np.uint64
    for g, r in zip(got, ref):
        g, r = np.asarray(g), np.asarray(r)
        nan = np.isnan(r)
        np.testing.assert_array_equal(np.isnan(g), nan)
        np.testing.assert_array_equal(g.view(it)[~nan], r.view(it)[~nan])


def test_only_small_constants_skip_the_flush() -> None:
    from llvmlite import ir

    from xlapy.backends.cpu.llvm_util import splat

    vt = ir.VectorType(ir.FloatType(), 16)
    x = ir.Argument(ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), [vt]), "f"),
                    vt)
    with flush_ftz.in_kernel():
        assert flush_ftz.scaled_by_small("multiply", [x, splat(vt, 0.125)], 0)
        assert flush_ftz.scaled_by_small("multiply", [splat(vt, -0.5), x], 1)
        assert not flush_ftz.scaled_by_small("multiply", [x, splat(vt, 0.125)], 1)
        for c in (1.0, -1.0, 2.0, 0.0, float("inf"), float("nan")):
            assert not flush_ftz.scaled_by_small("multiply", [x, splat(vt, c)], 0)
        assert not flush_ftz.scaled_by_small("add", [x, splat(vt, 0.125)], 0)
    assert not flush_ftz.scaled_by_small("multiply", [x, splat(vt, 0.125)], 0)


@pytest.mark.parametrize("threads", [1, 2])
def test_scaled_softmax_rows(threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """softmax(x * 0.125) (attention's scores) on rows with denormals, NaN, -inf: the row
    max bit for bit, the softmax within exp's ulp, as the interpreter."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    rows, cols = 24, 128
    x = (np.random.default_rng(2).standard_normal((rows, cols)) * 8).astype(np.float32)
    x[1, :] = 1e-39  # all denormal: max of flushed values is +0 (the exact loop)
    x[2, 5] = -1e-39
    x[3, 9] = np.nan
    x[4, :] = -np.inf
    x[5, ::3] = 2e-39
    t, r = f"tensor<{rows}x{cols}xf32>", f"tensor<{rows}xf32>"
    text = f"""
func.func public @main(%x: {t}) -> ({t}, {r}) {{
  %c = stablehlo.constant dense<0.125> : {t}
  %xs = stablehlo.multiply %x, %c : {t}
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%xs init: %ninf) applies stablehlo.maximum across dimensions = [1]
    : ({t}, tensor<f32>) -> {r}
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : ({r}) -> {t}
  %d = stablehlo.subtract %xs, %mb : {t}
  %e = stablehlo.exponential %d : {t}
  %s = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [1]
    : ({t}, tensor<f32>) -> {r}
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : ({r}) -> {t}
  %y = stablehlo.divide %e, %sb : {t}
  return %y, %m : {t}, {r}
}}
"""
    cache.clear_memory()
    got = [np.asarray(v) for v in
           xlapy.compile(text, backend="cpu", options={"num_threads": threads})(x)]
    ref = [np.asarray(v) for v in xlapy.compile(text, backend="interpreter")(x)]
    np.testing.assert_array_equal(got[1].view(np.uint32), ref[1].view(np.uint32))
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(ref[0]))
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-6, atol=0)
