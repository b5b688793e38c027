"""gemm_small_dot.py: gemm_small's one-column products ([m, k] @ [k, 1], or a vector rhs,
which lies alike) run as dot products along k: values within the dot's rounding bound for
any m and k (rows past the last block of ROWS, k past the last whole vector), the same bits
on any row split, and a fori_loop of a matrix times its vector takes it as its native step
(a BLAS sgemm of one column there before: 1024 x 1024 336 us a step, XLA 43; now ~70)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import gemm_small, gemm_small_dot, target

jax = pytest.importorskip("jax")


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The Gemm steps loop_steps.native_gemm made (None where a dot keeps its Python step)."""
    from xlapy.backends.cpu import loop_steps

    got: list[Any] = []
    real = loop_steps.native_gemm
    monkeypatch.setattr(loop_steps, "native_gemm", lambda exe, i: got.append(
        real(exe, i)) or got[-1])
    return got


@pytest.mark.parametrize(("m", "k"), [(1, 1), (3, 5), (8, 16), (13, 47), (64, 256),
                                      (257, 1000)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_within_the_dot_bound(m: int, k: int, dtype: Any) -> None:
    s = gemm_small.shape(m, 1, k, dtype == np.float64, rhs_t=True)
    assert s is not None  # (a vector rhs: its [1, k] is the [k, 1] column)
    rng = np.random.default_rng(m + k)
    x = rng.standard_normal((m, k)).astype(dtype)
    y = rng.standard_normal((k, 1)).astype(dtype)
    out = np.full((m, 1), np.nan, dtype)
    gemm_small.runner(s)(x, y, out)
    want = x.astype(np.float64) @ y.astype(np.float64)
    bound = k * np.finfo(dtype).eps * (np.abs(x).astype(np.float64) @ np.abs(y))
    assert np.all(np.abs(out - want) <= bound + np.finfo(dtype).tiny)


@pytest.mark.parametrize("name", ["host", "x86-64-v3", "x86-64-v2"])
def test_row_splits_give_the_same_bits(name: str) -> None:
    t = target.resolve(name)
    if not t.runs_here:
        pytest.skip(f"{name} does not run here")
    m, k = 37, 123
    rng = np.random.default_rng(1)
    x = rng.standard_normal((m, k)).astype(np.float32)
    y = rng.standard_normal(k).astype(np.float32)
    with target.use(t):
        c = gemm_small.compiled(gemm_small.GemmShape(m, 1, k, False))
        whole = np.full(m, np.nan, np.float32)
        c.direct(x.ctypes.data, y.ctypes.data, whole.ctypes.data, 1, k, 0, m)
        parts = np.full(m, np.nan, np.float32)
        for lo, hi in ((0, 5), (5, 21), (21, m)):
            c.direct(x.ctypes.data, y.ctypes.data, parts.ctypes.data, 1, k, lo, hi)
    np.testing.assert_array_equal(whole, parts)
    np.testing.assert_allclose(whole, x.astype(np.float64) @ y, rtol=1e-4, atol=1e-4)
    assert m % gemm_small_dot.ROWS  # (a rest of rows)


def test_a_loop_of_matrix_vector_products_takes_it(made: list[Any]) -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((300, 300)).astype(np.float32) / 20
    v = rng.standard_normal(300).astype(np.float32)

    def loop(a: Any, v: Any) -> Any:
        return jax.lax.fori_loop(0, 7, lambda i, x: jax.numpy.tanh(a @ x), v)
    text = jax.jit(loop).lower(a, v).as_text()
    got = np.asarray(xlapy.compile(text, backend="cpu")(a, v))
    assert made and all(g is not None and g.small is not None and g.n == 1 for g in made)
    want = v.astype(np.float64)
    for _ in range(7):
        want = np.tanh(a.astype(np.float64) @ want)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("spec", ["bij,bj->bi", "bj,bjk->bk"])
def test_a_loop_of_batched_matrix_vector_products_takes_it(
        spec: str, made: list[Any]) -> None:
    """A batch of matrix-vector (or vector-matrix) products in a loop body is gemm_small's
    batch step too (dot_shapes.batched_dot: an operand without a free dimension is n or m =
    1); it was a Python BLAS step: 64 [64, 64] @ [64] 24.7 us a step, XLA 13, now ~12."""
    if not target.current().has("fma"):  # (a batch step only with FMA: loop_steps.native_gemm)
        pytest.skip("no FMA: batched products keep their Python step")
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((16, 24, 24)) * 0.2).astype(np.float32)
    v = rng.standard_normal((16, 24)).astype(np.float32)

    def loop(a: Any, v: Any) -> Any:
        return jax.lax.fori_loop(0, 5, lambda i, x: jax.numpy.tanh(
            jax.numpy.einsum(spec, *((a, x) if spec[0:3] == "bij" else (x, a)))), v)
    text = jax.jit(loop).lower(a, v).as_text()
    got = np.asarray(xlapy.compile(text, backend="cpu")(a, v))
    assert made and all(g is not None and g.batch == 16 and 1 in (g.m, g.n) for g in made)
    want = v.astype(np.float64)
    for _ in range(5):
        want = np.tanh(np.einsum(spec, *((a, want) if spec[0:3] == "bij" else (want, a))))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
