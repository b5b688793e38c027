"""gemm_jobs.py: blas.gemm's calls planned once per shape and run from native code give the
bits of the per-call Python path, for one call and split products, on 1-3 threads, strided
and transposed views, beta != 0 and complex; a plan is reused for other arrays of the same
layout, and operands BLAS would copy keep the Python path."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from tests.tolerance import assert_dot_close
from xlapy.backends.cpu import blas, gemm_jobs


def _python_path(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """blas.gemm as it ran before the plans (every call through ctypes from Python)."""
    def gemm(*args: object) -> None:
        with monkeypatch.context() as m:
            m.setattr(gemm_jobs, "table", lambda *a: None)
            blas.gemm(*args)  # type: ignore[arg-type]
    return gemm


@pytest.mark.parametrize(("m", "k", "n"), [(3, 5, 7), (3072, 64, 128), (128, 64, 1536),
                                           (32, 256, 1024), (300, 40, 70)])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_planned_calls_give_the_python_paths_bits(m: int, k: int, n: int, threads: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    want = np.full((m, n), np.nan, np.float32)
    _python_path(monkeypatch)(a, b, want, 0.0, 1)
    assert_dot_close(want, a, b, k=k)
    got = np.full((m, n), np.nan, np.float32)
    blas.gemm(a, b, got, 0.0, threads)
    np.testing.assert_array_equal(got, want)


def test_a_plan_serves_other_arrays_of_its_layout() -> None:
    """The second call finds the plan of the first and patches its own addresses in."""
    rng = np.random.default_rng(1)
    outs = []
    for _ in range(3):
        a = rng.standard_normal((640, 48)).astype(np.float32)
        b = rng.standard_normal((48, 96)).astype(np.float32)
        out = np.empty((640, 96), np.float32)
        blas.gemm(a, b, out, 0.0, 2)
        assert_dot_close(out, a, b, k=48)
        outs.append(out)
    assert not np.array_equal(outs[0], outs[1])


def test_views_beta_and_complex(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(2)
    old = _python_path(monkeypatch)
    big_a = rng.standard_normal((700, 90)).astype(np.float64)
    big_b = rng.standard_normal((80, 300)).astype(np.float64)
    a, b = big_a[3:603:2, 5:69], big_b[7:71, 10:290].T.copy().T  # strided rows, "T" storage
    for beta in (0.0, 0.5):
        base = rng.standard_normal((300, 280))
        want, got = base.copy(), base.copy()
        old(a, b, want, beta, 1)
        blas.gemm(a, b, got, beta, 2)
        np.testing.assert_array_equal(got, want)
    z = (rng.standard_normal((400, 30)) + 1j * rng.standard_normal((400, 30))).astype(
        np.complex64)
    w = (rng.standard_normal((30, 50)) + 1j * rng.standard_normal((30, 50))).astype(
        np.complex64)
    want, got = np.empty((400, 50), np.complex64), np.empty((400, 50), np.complex64)
    old(z, w, want, 0.0, 1)
    blas.gemm(z, w, got, 0.0, 3)
    np.testing.assert_array_equal(got, want)


def test_operands_blas_would_copy_keep_the_python_path() -> None:
    rng = np.random.default_rng(3)
    big = rng.standard_normal((64, 64, 3)).astype(np.float32)
    a = big[:, :, 1]  # no unit stride
    b = rng.standard_normal((64, 32)).astype(np.float32)
    out = np.empty((64, 32), np.float32)
    assert gemm_jobs.table(a, b, out, 0.0, None, lambda: [(a, b, out)],
                           blas._gemm_args) is None
    blas.gemm(a, b, out, 0.0, 2)
    assert_dot_close(out, a, b, k=64)
