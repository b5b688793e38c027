"""small_lu.py: batches of small real getrf / left trsm calls run as JIT loops (65536 4 x 4
inverses 27.5 -> 5.4 ms, XLA 24): LAPACK's arithmetic within rounding of the interpreter's
per-matrix LAPACK calls, the same pivots and info (singular matrices too), every left-solve
option, the same bits on one thread or split over two; what it does not take (a complex
Cholesky factor, right solves, more than MAX_N rows) stays on LAPACK's loop. Complex getrf
and trsm: test_small_lu_complex.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import small_lu

jax = pytest.importorskip("jax")
jnp = jax.numpy
jsl = jax.scipy.linalg


#: The types small_lu takes (complex getrf and trsm: small_lu_complex.py).
TYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _data(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    r = np.random.default_rng(seed)
    x = r.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * r.standard_normal(shape)
    return x.astype(dtype)


def _compare(fn: Any, args: list[np.ndarray], threads: int = 2) -> tuple[Any, Any]:
    """(cpu results, interpreter results) of jit(fn), checked within rounding; integer
    results (pivots, info) equal."""
    with jax.enable_x64(any(a.dtype in (np.float64, np.complex128) for a in args)):
        text = jax.jit(fn).lower(*args).as_text()
    cpu = xlapy.compile(text, backend="cpu", options={"entry_trip": False,
                                                      "num_threads": threads})
    got = jax.tree_util.tree_leaves(cpu(*args))
    want = jax.tree_util.tree_leaves(xlapy.compile(text, backend="interpreter")(*args))
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.kind == "i":
            np.testing.assert_array_equal(g, w)
        else:
            tol = 2e-4 if g.dtype in (np.float32, np.complex64) else 1e-11
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    return got, want


@pytest.mark.parametrize("n,dtype", [(n, t) for n in [1, 2, 3, 4, 6, 16] for t in TYPES[:2]]
                         + [(n, np.complex64) for n in [1, 3, 16]] + [(4, np.complex128)])
def test_vmap_inverse_and_solve(dtype: Any, n: int, jit_runs: list[int]) -> None:
    a = _data((40, n, n), dtype, n) + 3 * np.eye(n, dtype=dtype)
    _compare(jnp.linalg.inv, [a])
    assert jit_runs and sum(jit_runs) >= 3 * 40  # getrf and both triangular solves
    jit_runs.clear()
    _compare(jax.vmap(jnp.linalg.solve), [a, _data((40, n), dtype, 7)])
    assert jit_runs


def test_lu_factor_pivots_and_a_singular_matrix(jit_runs: list[int]) -> None:
    """Pivots as LAPACK picks them (the first largest magnitude), info the first zero
    pivot's 1-based index, the singular matrix's factor as LAPACK leaves it."""
    a = _data((3, 5, 6, 6), np.float32, 2)
    a[1, 2] = 0.0
    a[2, 3, :, 4] = 0.0  # a zero column: info 5, not an error
    a[0, 1, :, 0] = [1, -3, 2, 3, 0, -3]  # a tie: the first of the largest
    got, _ = _compare(lambda m: jsl.lu_factor(m), [a])
    assert jit_runs
    piv = np.asarray(got[1])
    assert piv[0, 1, 0] == 1  # (jax's 0-based pivots)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("dtype", TYPES[:3])  # (c128: the same code as c64, in f64)
def test_left_triangular_solve_options(lower: bool, trans: int, unit: bool, dtype: Any,
                                       jit_runs: list[int]) -> None:
    a = _data((9, 5, 5), dtype, 3) + 4 * np.eye(5, dtype=dtype)
    b = _data((9, 5, 3), dtype, 4)

    def fn(m: Any, r: Any) -> Any:
        return jax.lax.linalg.triangular_solve(m, r, left_side=True, lower=lower,
                                               transpose_a=trans > 0, conjugate_a=trans == 2,
                                               unit_diagonal=unit)
    _compare(fn, [a, b])
    assert jit_runs


def test_a_big_batch_splits_over_threads_with_the_same_bits(jit_runs: list[int]) -> None:
    a = _data((4096, 4, 4), np.float32, 11)
    text = jax.jit(jnp.linalg.inv).lower(a).as_text()
    thunks = {"entry_trip": False}
    one = xlapy.compile(text, backend="cpu", options={"num_threads": 1, **thunks})(a)
    assert max(jit_runs) == 4096
    jit_runs.clear()
    two = xlapy.compile(text, backend="cpu", options={"num_threads": 2, **thunks})(a)
    assert max(jit_runs) < 4096  # (split: this thread ran one range)
    np.testing.assert_array_equal(np.asarray(one), np.asarray(two))


@pytest.mark.parametrize("case", ["complex", "right", "big"])
def test_what_it_does_not_take_stays_on_lapack(case: str, jit_runs: list[int]) -> None:
    if case == "complex":  # (a Cholesky factor: complex getrf and trsm are taken)
        a = (_data((8, 4, 4), np.float32, 1) + 1j * _data((8, 4, 4), np.float32, 2)).astype(
            np.complex64)
        a = a @ np.conj(np.swapaxes(a, -1, -2)) + 4 * np.eye(4, dtype=np.complex64)
        fn, args = jnp.linalg.cholesky, [a]
    elif case == "right":
        a = _data((8, 4, 4), np.float32, 1) + 4 * np.eye(4, dtype=np.float32)
        fn, args = (lambda m, r: jax.lax.linalg.triangular_solve(m, r, left_side=False,
                                                                 lower=True)), \
            [a, _data((8, 3, 4), np.float32, 2)]
    else:
        n = small_lu.MAX_N + 1
        fn, args = jnp.linalg.inv, [_data((4, n, n), np.float32, 3) + 4 * np.eye(
            n, dtype=np.float32)]
    _compare(fn, args)
    assert not jit_runs


def test_the_operands_are_left_alone(jit_runs: list[int]) -> None:
    a = _data((16, 4, 4), np.float64, 5) + 2 * np.eye(4)
    b = _data((16, 4, 2), np.float64, 6)
    a0, b0 = a.copy(), b.copy()
    _compare(jax.vmap(jnp.linalg.solve), [a, b])
    assert jit_runs
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_steps_run_it_too(dtype: Any, built: list[str], jit_runs: list[int]) -> None:
    """A program's entry run as one native trip, and a loop body solving a small system
    each step (loop_lapack.py's steps), call the same function."""
    a = _data((32, 4, 4), dtype, 8) + 3 * np.eye(4, dtype=dtype)
    b = _data((32, 4), dtype, 9)

    def loop(m: Any, r: Any) -> Any:
        return jax.lax.fori_loop(0, 5, lambda i, x: jax.vmap(jnp.linalg.solve)(m, x + r), r)
    for fn, args in ((jnp.linalg.inv, [a]), (loop, [a, b])):
        built.clear()
        with jax.enable_x64(dtype == np.float64):
            text = jax.jit(fn).lower(*args).as_text()
        cpu = xlapy.compile(text, backend="cpu", options={"num_threads": 1})
        got = np.asarray(cpu(*args))
        assert "getrf" in built and "trsm" in built and not jit_runs  # (no thunk ran it)
        want = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
        tol = 2e-3 if dtype == np.float32 else 1e-10
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def _spd(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    a = _data(shape, dtype, seed)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 3, 6, 16])
def test_vmap_cholesky_and_cho_solve(dtype: Any, n: int, built: list[str]) -> None:
    """potrf too (the lower factor: jnp.linalg.cholesky), and cho_solve's two solves."""
    a = _spd((40, n, n), dtype, n)
    _compare(jnp.linalg.cholesky, [a])
    assert "potrf" in built
    b = _data((40, n, 2), dtype, 3)
    _compare(jax.vmap(lambda m, r: jsl.cho_solve(jsl.cho_factor(m, lower=True), r)), [a, b])


def test_cholesky_stops_where_lapack_does() -> None:
    """A matrix that is not positive definite: info the failing column (jax then makes the
    factor NaN), the factor as LAPACK leaves it (the failing pivot stored, nothing after
    it changed), the upper triangle as given; a NaN goes on as OpenBLAS's potf2 does."""
    from xlapy.backends.cpu import lapack_batch

    a = _spd((6, 5, 5), np.float32, 4)
    a[1] = -a[1]  # fails at the first pivot
    a[2, 3, 3] = -100.0  # at the fourth
    a[3, 0, 0] = np.nan
    a += np.triu(_data((5, 5), np.float32, 5), 1)  # the other triangle: kept as given
    got = small_lu.potrf("s", True, 5, lambda i: i)(a)
    want = lapack_batch.potrf("s", True, lambda i: i)(a)
    np.testing.assert_array_equal(got[1], want[1])
    assert list(got[1][:4]) == [0, 1, 4, 0]
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want[0]))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.triu(got[0], 1), np.triu(a, 1))
