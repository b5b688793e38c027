"""small_qr.py: batches of small real geqrf / orgqr calls (jnp.linalg.qr under vmap, 16384
4 x 4 QRs 10.2 -> 1.5 ms, XLA 5.2-6.7) run as small_lu's JIT functions: LAPACK's Householder
arithmetic within rounding of the per-matrix LAPACK calls, for every shape up to MAX_N, with
the columns LAPACK treats apart (zero, already reduced, subnormal, huge); native loop steps
call the same functions; what it does not take stays on LAPACK. Complex matrices as well
(small_qr_complex.py)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from scipy.linalg import lapack

import xlapy
from xlapy.backends.cpu import small_lu, small_qr

jax = pytest.importorskip("jax")
jnp = jax.numpy


#: The types small_qr takes (complex geqrf and ungqr: small_qr_complex.py).
TYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _cases(m: int, n: int, dtype: Any) -> np.ndarray:
    """Matrices whose columns take each of ?larfg's paths."""
    r = np.random.default_rng(m * 17 + n)
    a = r.standard_normal((7, m, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * r.standard_normal((7, m, n))
    a = a.astype(dtype)
    single = dtype in (np.float32, np.complex64)
    a[1] *= 1e-39 if single else 1e-310  # subnormal: |beta| below safmin
    a[2][:, 0] = 0  # a zero column
    a[3][1:, 0] = 0  # nothing below the diagonal: H = I, tau 0 (complex: a reflector still)
    a[4][1:, 0] = 0  # nothing below a real diagonal: H = I, tau 0
    a[4][0, 0] = 2.5
    a[5] *= 1e30 if single else 1e300  # squares beyond the type's range
    a[6] = np.round(a[6] * 8) + 50 * np.eye(m, n)  # exact values, full rank (a column
    # reduced to exactly zero by rounding errors takes either sign: both QRs are right)
    return a


@pytest.mark.parametrize("dtype", TYPES)
def test_geqrf_and_orgqr_agree_with_lapack(dtype: Any) -> None:
    """m x n up to MAX_N (every one for f64 on the host, each a compile): the factored
    matrix and tau as ?geqrf's, Q as ?orgqr's / ?ungqr's (tall and square; k = n) within
    rounding. (The subnormal and huge cases failed with the reciprocal scaling first tried:
    infinities.) A complex R's diagonal is real, even where nothing is below it."""
    t = {np.float32: "s", np.float64: "d", np.complex64: "c", np.complex128: "z"}[dtype]
    cplx = t in "cz"
    geqrf, orgqr = (lapack.get_lapack_funcs(r, dtype=dtype)
                    for r in ("geqrf", "ungqr" if cplx else "orgqr"))
    eps = np.finfo(dtype).eps
    spread = [1, 2, 3, 5, 8, 13, small_lu.MAX_N]
    shapes = {(m, n) for m in spread for n in spread}
    if dtype is np.float64 and not os.environ.get("XLAPY_CPU_TARGET"):
        # host f64: every shape up to 8 x 8 and every square one as well (all 256 shapes
        # were 59 s of CI; f32 is the same generator, complex types and a lower target's
        # suite run again for each: a spread, a compile each)
        shapes |= {(m, n) for m in range(1, 9) for n in range(1, 9)}
        shapes |= {(m, m) for m in range(1, small_lu.MAX_N + 1)}
    for m, n in sorted(shapes):
        a = _cases(m, n, dtype)
        run = small_qr.geqrf(t, m, n)
        assert run is not None
        qr, tau = run(a)
        q = small_qr.orgqr(t, m, n, n)(qr, tau)[0] if m >= n else None  # type: ignore
        for j in range(len(a)):
            wqr, wtau, _, info = geqrf(a[j])
            assert info == 0
            scale = np.abs(wqr).max() or 1.0
            # (subnormals: fewer bits; huge: the norm's scaling rounds as each OpenBLAS
            # ?nrm2 kernel does: 129 eps from f64 tau on Zen 3)
            tol = (2e3 if j == 1 else 512 if j == 5 else 256 if cplx else 128) * eps
            np.testing.assert_allclose(qr[j] / scale, wqr / scale, rtol=0, atol=tol)
            np.testing.assert_allclose(tau[j], wtau, rtol=0, atol=tol)
            if q is not None:
                wq = orgqr(wqr, wtau)[0]
                np.testing.assert_allclose(q[j], wq, rtol=0, atol=tol)
        assert np.all(np.diagonal(qr, 0, -2, -1).imag == 0) and tau[4, 0] == 0


def test_tau_zero_columns_are_exact() -> None:
    """A column with nothing below the diagonal is left as it is (tau exactly 0, no update of
    the rest, which holds an inf: 0 * inf would be NaN)."""
    a = np.array([[2.0, np.inf, 1.0], [0.0, 3.0, 1.0], [0.0, 4.0, 2.0]], np.float32)[None]
    qr, tau = small_qr.geqrf("s", 3, 3)(a)
    want = lapack.sgeqrf(a[0])
    assert tau[0, 0] == 0 and want[1][0] == 0
    np.testing.assert_array_equal(qr[0, 0], want[0][0])  # (row 0 untouched)


def test_a_nan_spreads_as_in_lapack() -> None:
    """(Columns whose entries in a reflector's rows are all exactly zero LAPACK leaves as
    they are, a NaN reflector too (dlarf's iladlc); here they become NaN. All ones made such
    columns on Zen 3's OpenBLAS kernels, exactly, and not on the Xeon's: not tested.)"""
    a = np.random.default_rng(3).standard_normal((1, 4, 4))
    a[0, 2, 1] = np.nan
    qr, tau = small_qr.geqrf("d", 4, 4)(a)
    want = lapack.dgeqrf(a[0])
    np.testing.assert_array_equal(np.isnan(qr[0]), np.isnan(want[0]))
    np.testing.assert_array_equal(np.isnan(tau[0]), np.isnan(want[1]))


def _jax_vs_interpreter(fn: Any, args: list[np.ndarray], threads: int = 2) -> list[Any]:
    with jax.enable_x64(any(a.dtype in (np.float64, np.complex128) for a in args)):
        text = jax.jit(fn).lower(*args).as_text()
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    got = jax.tree_util.tree_leaves(cpu(*args))
    want = jax.tree_util.tree_leaves(xlapy.compile(text, backend="interpreter")(*args))
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        tol = 5e-4 if g.dtype in (np.float32, np.complex64) else 1e-11
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    return got


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape,dtype", [  # (each a jax program compiled for each target)
    *((s, t) for s in [(40, 4, 4), (40, 9, 5), (40, 3, 7), (40, 16, 16)] for t in TYPES[:2]),
    ((40, 9, 5), np.complex64), ((40, 1, 3), np.complex64), ((40, 3, 7), np.complex128)])
def test_vmap_qr(shape: tuple[int, ...], mode: str, dtype: Any, built: list[str]) -> None:
    a = _cases(shape[1], shape[2], dtype)[0]  # (random)
    a = np.stack([a * (k + 1) for k in range(shape[0])])
    got = _jax_vs_interpreter(lambda x: jnp.linalg.qr(x, mode=mode), [a])
    assert "geqrf" in built and ("orgqr" in built) == (mode != "r")
    if mode != "r":
        q, r = (np.asarray(v, np.complex128) for v in got)
        eps = np.finfo(dtype).eps
        assert np.abs(q @ r - a).max() < 64 * eps * np.abs(a).max()


def test_a_big_batch_splits_over_threads_with_the_same_bits() -> None:
    a = np.random.default_rng(4).standard_normal((4096, 6, 6)).astype(np.float32)
    one = small_qr.geqrf("s", 6, 6)(a, 1)  # type: ignore[misc]
    two = small_qr.geqrf("s", 6, 6)(a, 2)  # type: ignore[misc]
    for x, y in zip(one, two):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_native_steps_run_it_too(dtype: Any, built: list[str]) -> None:
    a = 0.1 * _cases(5, 5, dtype)[0][None].repeat(8, 0)
    a += 3 * np.eye(5, dtype=dtype)  # (Q + a stays well conditioned, Q with it)

    def loop(m: Any) -> Any:
        return jax.lax.fori_loop(0, 3, lambda i, x: jnp.linalg.qr(x)[0] + m, m)
    _jax_vs_interpreter(loop, [a], threads=1)
    assert "geqrf" in built and "orgqr" in built


@pytest.mark.parametrize("case", ["big", "wide_orgqr"])
def test_what_it_does_not_take_stays_on_lapack(case: str, built: list[str]) -> None:
    rng = np.random.default_rng(6)
    if case == "big":
        n = small_lu.MAX_N + 1
        _jax_vs_interpreter(jnp.linalg.qr, [rng.standard_normal((4, n, 3)).astype(np.float32)])
        assert not built
    else:  # (LAPACK wants m >= n >= k: the takes check refuses it)
        assert small_lu.takes("orgqr", "s", [(3, 4), (3,)], ()) is None
        assert small_lu.takes("orgqr", "s", [(4, 3), (4,)], ()) is None
        assert small_qr.orgqr("c", 3, 4, 4) is None
