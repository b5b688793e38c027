"""small_qr_complex.py: batches of small complex geqrf / ungqr calls (jnp.linalg.qr under
vmap, 4096 4 x 4 c64 1.9x XLA's time before) as small_lu's JIT functions: LAPACK's
Householder arithmetic (clarfg, clarf with conj(tau), cung2r) within rounding of the
per-matrix LAPACK calls for every shape up to MAX_N, with the columns clarfg treats apart:
H = I only when nothing is below the diagonal and the diagonal is real (a complex one is
made real, an order-1 reflector too), subnormal and huge columns."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.linalg import lapack

from tests.unit.backends.cpu.test_small_qr import _jax_vs_interpreter
from xlapy.backends.cpu import small_lu, small_qr

jax = pytest.importorskip("jax")
jnp = jax.numpy

TYPES = [np.complex64, np.complex128]


def _cases(m: int, n: int, dtype: Any) -> np.ndarray:
    """Matrices whose columns take each of clarfg's paths."""
    r = np.random.default_rng(m * 17 + n)
    a = (r.standard_normal((7, m, n)) + 1j * r.standard_normal((7, m, n))).astype(dtype)
    a[1] *= 1e-39 if dtype == np.complex64 else 1e-310  # subnormal: |beta| below safmin
    a[2][:, 0] = 0  # a zero column
    a[3][1:, 0] = 0  # nothing below a complex diagonal: a reflector all the same
    a[4][1:, 0] = 0  # nothing below a real one: H = I, tau 0
    a[4][0, 0] = 2.5
    a[5] *= 1e30 if dtype == np.complex64 else 1e300  # squares beyond the type's range
    a[6] = np.round(a[6] * 8) + 50 * np.eye(m, n)  # exact values, full rank
    return a


@pytest.mark.parametrize("dtype", TYPES)
def test_geqrf_and_ungqr_agree_with_lapack(dtype: Any) -> None:
    t = "c" if dtype == np.complex64 else "z"
    geqrf, ungqr = (lapack.get_lapack_funcs(r, dtype=dtype) for r in ("geqrf", "ungqr"))
    eps = np.finfo(dtype).eps
    sizes = [1, 2, 3, 5, 8, 13, small_lu.MAX_N]  # (each shape is a compile of its own)
    for m in sizes:
        for n in sizes:
            a = _cases(m, n, dtype)
            run = small_qr.geqrf(t, m, n)
            assert run is not None
            qr, tau = run(a)
            q = small_qr.orgqr(t, m, n, n)(qr, tau)[0] if m >= n else None  # type: ignore
            for j in range(len(a)):
                wqr, wtau, _, info = geqrf(a[j])
                assert info == 0
                scale = np.abs(wqr).max() or 1.0
                tol = (2e3 if j == 1 else 256) * eps  # (subnormals carry fewer bits)
                np.testing.assert_allclose(qr[j] / scale, wqr / scale, rtol=0, atol=tol)
                np.testing.assert_allclose(tau[j], wtau, rtol=0, atol=tol)
                if q is not None:
                    wq = ungqr(wqr, wtau)[0]
                    np.testing.assert_allclose(q[j], wq, rtol=0, atol=tol)
            assert np.all(np.diag(qr[3]).imag == 0)  # (R's diagonal is real)
            assert tau[4, 0] == 0


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape", [(40, 4, 4), (40, 9, 5), (40, 3, 7), (40, 1, 3)])
@pytest.mark.parametrize("dtype", TYPES)
def test_vmap_qr(shape: tuple[int, ...], mode: str, dtype: Any, built: list[str]) -> None:
    r = np.random.default_rng(3)
    a = (r.standard_normal(shape) + 1j * r.standard_normal(shape)).astype(dtype)
    got = _jax_vs_interpreter(lambda x: jnp.linalg.qr(x, mode=mode), [a])
    assert "geqrf" in built and ("orgqr" in built) == (mode != "r")
    if mode != "r":
        q, rr = (np.asarray(v, np.complex128) for v in got)
        eps = np.finfo(dtype).eps
        assert np.abs(q @ rr - a).max() < 64 * eps * np.abs(a).max()


def test_native_steps_run_it_too(built: list[str]) -> None:
    r = np.random.default_rng(5)
    a = (0.1 * (r.standard_normal((8, 5, 5)) + 1j * r.standard_normal((8, 5, 5)))).astype(
        np.complex64) + 3 * np.eye(5, dtype=np.complex64)

    def loop(m: Any) -> Any:
        return jax.lax.fori_loop(0, 3, lambda i, x: jnp.linalg.qr(x)[0] + m, m)
    _jax_vs_interpreter(loop, [a], threads=1)
    assert "geqrf" in built and "orgqr" in built
