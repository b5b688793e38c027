"""Complex ops whose results follow XLA's formulas on both backends (issue 15): square as
(re - im)(re + im) (0 where |re| = |im| is finite) + i 2 re im, log_plus_one without
hypot's overflow, sign as the parts divided by the real |z|.
Expected values are XLA CPU's (jax.jit)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy

BACKENDS = ("interpreter", "cpu")
_UNARY = """
func.func public @main(%arg0: tensor<{n}xcomplex<{p}>>) -> tensor<{n}xcomplex<{p}>> {{
  %0 = {op} %arg0 : {sig}
  return %0 : tensor<{n}xcomplex<{p}>>
}}
"""


def _run(op: str, x: np.ndarray, backend: str, chlo: bool = False) -> np.ndarray:
    p = "f32" if x.dtype == np.complex64 else "f64"
    t = f"tensor<{len(x)}xcomplex<{p}>>"
    sig = f"{t} -> {t}" if chlo else t
    text = _UNARY.format(n=len(x), p=p, op=op, sig=sig)
    exe = xlapy.compile(text, backend=backend)
    if backend == "cpu":
        assert not exe._exe.fallbacks()
    with np.errstate(all="ignore"):
        return np.asarray(exe(x))


def _same(got: np.ndarray, want: np.ndarray) -> None:
    for part in ("real", "imag"):
        g, w = getattr(got, part), getattr(want, part)
        ok = (g == w) | (np.isnan(g) & np.isnan(w))
        assert ok.all(), (part, got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_square_does_not_make_inf_minus_inf(backend: str, dtype: type) -> None:
    big = float(np.finfo(dtype).max)
    x = np.array([complex(-np.inf, -big), complex(2e30, -3e20), complex(3, 4),
                  complex(big, big), complex(np.inf, np.inf)], dtype)
    # c64: the parts of x[1] ** 2 overflow (inf - inf i); c128: its parts rounded as XLA
    sq = complex((2e30 + 3e20) * (2e30 - 3e20), 2e30 * -3e20 * 2)
    if dtype == np.complex64:
        sq = complex(np.inf, -np.inf)
    want = np.array([complex(np.inf, np.inf), sq, complex(-7, 24), complex(0, np.inf),
                     complex(np.nan, np.inf)], dtype)
    _same(_run("chlo.square", x, backend, chlo=True), want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_log_plus_one_of_huge_values_is_finite(backend: str) -> None:
    x = np.array([complex(-3.4e38, -3.4e38), complex(3.4e38, 3.4e38), complex(1e38, 0)],
                 np.complex64)
    got = _run("stablehlo.log_plus_one", x, backend)
    want = np.array([complex(89.06858, -2.3561945), complex(89.06858, 0.7853982),
                     complex(87.49823, 0)], np.complex64)
    np.testing.assert_allclose(got, want, rtol=2e-7)
    x = np.array([complex(-1.7e308, 1.7e308), complex(0.5, -0.25)], np.complex128)
    got = _run("stablehlo.log_plus_one", x, backend)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got[1], np.log(1.5 - 0.25j), rtol=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_sign_divides_each_part_by_the_real_abs(backend: str, dtype: type) -> None:
    x = np.array([complex(np.inf, 1), complex(-1, -np.inf), complex(3, 4), 0j,
                  complex(np.nan, 0)], dtype)
    want = np.array([complex(np.nan, 0), complex(-0.0, np.nan), complex(0.6, 0.8), 0j,
                     complex(np.nan, np.nan)], dtype)
    _same(_run("stablehlo.sign", x, backend), want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_sinh_cosh_use_xla_exp_difference(backend: str, dtype: type) -> None:
    """exp(z - ln 2) -+ exp(-ln 2 - z): c64 sinh(1e-8 + 0.06i) has real part 0 as XLA's (not
    numpy's 1e-8); infinite parts give XLA's NaN + NaN i; native on cpu (was a fallback)."""
    x = np.array([complex(1e-8, 0.06), complex(0, np.inf), complex(2, -1), complex(89, 1)],
                 dtype)
    for op, fn in (("chlo.sinh", np.sinh), ("chlo.cosh", np.cosh)):
        got = _run(op, x, backend, chlo=True)
        assert np.isnan(got[1].real) and np.isnan(got[1].imag), (op, got)
        np.testing.assert_allclose(got[2:], fn(x[2:]), rtol=4e-6 if dtype == np.complex64
                                   else 1e-14)
        if op == "chlo.sinh" and dtype == np.complex64:
            assert got[0].real == 0, got


@pytest.mark.parametrize("backend", BACKENDS)
def test_log_plus_one_near_zero_keeps_the_real_part(backend: str) -> None:
    """x + 1 rounds small z away: XLA's real part of log1p(1.67e-8 - 1.8e-27i) is 1.67e-8
    and of log1p(-4.4e-38 + 3.3e-4i) 5.48e-8 (y^2 / 2), not 0."""
    x = np.array([complex(1.6726615e-08, -1.7924967e-27), complex(-4.371844e-38, 0.00033114865)],
                 np.complex64)
    got = _run("stablehlo.log_plus_one", x, backend)
    np.testing.assert_allclose(got.real, [1.6726615e-08, 5.4829712e-08], rtol=2e-7)
    z = np.array([complex(1e-20, 1e-30), complex(-0.25, 0.125)], np.complex128)
    got = _run("stablehlo.log_plus_one", z, backend)
    np.testing.assert_allclose(got, [complex(1e-20, 1e-30), np.log(0.75 + 0.125j)], rtol=1e-15)


_POW = """
func.func public @main(%a: tensor<5xcomplex<f32>>, %b: tensor<5xcomplex<f32>>)
    -> tensor<5xcomplex<f32>> {
  %0 = stablehlo.power %a, %b : tensor<5xcomplex<f32>>
  return %0 : tensor<5xcomplex<f32>>
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_power_is_xla_polar_formula(backend: str) -> None:
    """|z|^c e^(-d t) (cos q, sin q), |z| without overflow or underflow: tiny^i is finite
    (numpy's cpow: NaN), nan^0 = 1, 0^2 = 0; values as XLA's."""
    x = np.array([complex(1.1754944e-38, -0.0), complex(np.nan, 0), 0j, complex(3, 4),
                  complex(0, 3.4028235e38)], np.complex64)
    y = np.array([1j, complex(-0.0, 0), complex(2, 0), complex(0.5, 0.25), complex(-0.0, 1)],
                 np.complex64)
    exe = xlapy.compile(_POW, backend=backend)
    if backend == "cpu":
        assert not exe._exe.fallbacks()
    with np.errstate(all="ignore"):
        got = np.asarray(exe(x, y))
    want = np.array([complex(0.80917686, 0.5875651), 1, 0, (3 + 4j) ** (0.5 + 0.25j),
                     complex(0.1509297, 0.14294805)], np.complex64)
    np.testing.assert_allclose(got, want, rtol=2e-6)
