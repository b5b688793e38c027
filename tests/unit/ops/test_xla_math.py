"""ops/xla_math.py: XLA CPU's own exp and tanh, bit for bit against jax.jit(jnp.exp) /
jax.jit(jnp.tanh) (which run the same inline forms), and the cpu backend's twins
(backends/cpu/xla_math_emit.py) against them through complex pow and expm1 (the ops that
call them; the f32 log and the log1p are checked against XLA through complex log in
tests/unit/ops/test_complex_xla_unary.py and the jax_ulp_complex histogram)."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.ops import xla_math


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))


def _inputs(dtype: type) -> np.ndarray:
    rng = np.random.default_rng(15)
    lim = 300 if dtype == np.float64 else 38
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 88.7, 88.72, 88.8, 89.0, -87.3, -87.8, -88.0,
             -103.0, 709.78, 709.79, -708.39, -708.4, -745.0, 1e-30, -1e-30]
    return np.concatenate([edges, rng.uniform(-100, 100, 50000), rng.uniform(-750, 750, 20000),
                           10.0 ** rng.uniform(-lim, lim, 20000) * rng.choice([-1, 1], 20000)]
                          ).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exp_is_xla_cpus(dtype: type) -> None:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    x = _inputs(dtype)
    want = np.asarray(jax.jit(jax.numpy.exp)(x))
    got = xla_math.exp(x)
    bad = ~_same(got, want)
    assert not bad.any(), (x[bad][:5], got[bad][:5], want[bad][:5])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tanh_is_xla_cpus(dtype: type) -> None:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(15)
    x = np.concatenate([[0.0, -0.0, np.inf, -np.inf, np.nan, 4e-4, -4e-4, 20.0, -20.0, 7.99,
                         17.7, 1e-30], rng.uniform(-25, 25, 50000),
                        rng.uniform(-1e-3, 1e-3, 5000)]).astype(dtype)
    want = np.asarray(jax.jit(jax.numpy.tanh)(x))
    got = xla_math.tanh(x)
    bad = ~_same(got, want)
    assert not bad.any(), (x[bad][:5], got[bad][:5], want[bad][:5])


def test_log32_edges() -> None:
    x = np.array([0.0, -0.0, np.inf, -1.0, -np.inf, np.nan, 1.0, 2.0, 1e-45, 3.4e38],
                 np.float32)
    got = xla_math.log32(x)
    assert got[0] == -np.inf and got[1] == -np.inf and got[2] == np.inf
    assert np.isnan(got[3:6]).all() and got[6] == 0
    # within an ulp of the true log on normal inputs; a denormal input is the smallest normal
    ref = np.log(x[7:].astype(np.float64))
    ref[1] = np.log(np.float64(np.finfo(np.float32).tiny))
    assert np.allclose(got[7:], ref, rtol=2 ** -22)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("op", ["power", "exponential_minus_one", "log"])
def test_cpu_twins_agree(dtype: type, op: str) -> None:
    """Complex pow, expm1 and log on both backends over exp's, tanh's, log's and log1p's
    whole range (|z|, d t spread)."""
    import xlapy

    rng = np.random.default_rng(3)
    n = 4000
    lim = 300 if dtype == np.complex128 else 38
    x = (10.0 ** rng.uniform(-lim, lim, n) * np.exp(1j * rng.uniform(-4, 4, n))).astype(dtype)
    y = (rng.uniform(-3, 3, n) + 1j * rng.uniform(-300, 300, n)).astype(dtype)
    p = "f32" if dtype == np.complex64 else "f64"
    t = f"tensor<{n}xcomplex<{p}>>"
    if op == "power":
        text = (f"func.func @main(%a: {t}, %b: {t}) -> {t} {{\n"
                f"  %r = stablehlo.power %a, %b : {t}\n  return %r : {t}\n}}")
        args = [x, y]
    else:
        text = (f"func.func @main(%a: {t}) -> {t} {{\n"
                f"  %r = stablehlo.{op} %a : {t}\n  return %r : {t}\n}}")
        x = (rng.uniform(-3, 3, n) * 10.0 ** rng.integers(-8, 2, n) + 1j * y.imag).astype(dtype)
        x[: n // 4] = x[: n // 4] * 0.01 + np.exp(1j * rng.uniform(-4, 4, n // 4)) - 1
        args = [x]
    with np.errstate(all="ignore"):
        got = np.asarray(xlapy.compile(text, backend="cpu")(*args))
        ref = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    for part in ("real", "imag"):
        bad = ~_same(getattr(got, part), getattr(ref, part))
        assert not bad.any(), (part, x[bad][:3], y[bad][:3], got[bad][:3], ref[bad][:3])
