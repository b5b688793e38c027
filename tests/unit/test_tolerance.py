"""The derived tolerances of tests/tolerance.py accept what any conforming float computation
gives and still reject a wrong result: one element off by 100x its bound, a sum off by a
few ulps beyond its rounding, a function off by more than its documented ulps."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tests.tolerance import (
    Bounded,
    assert_close_to_bound,
    assert_dot_close,
    assert_ulp_close,
    dot_bound,
    eps,
    gamma,
    sum_bound,
    ulp_distance,
)


def _operands(m: int, k: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(np.float32),
            rng.standard_normal((k, n)).astype(np.float32))


def test_eps_of_each_type() -> None:
    assert eps(np.float32) == 2.0 ** -23 and eps(np.float64) == 2.0 ** -52
    assert eps(np.complex64) == 2.0 ** -23 and eps(ml_dtypes.bfloat16) == 2.0 ** -7
    assert eps(np.float16) == 2.0 ** -10
    assert gamma(10, np.float32) == pytest.approx(10 * 2.0 ** -24, rel=1e-6)


def test_correctly_rounded_and_blas_results_are_accepted() -> None:
    a, b = _operands(40, 300, 30)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert_dot_close(exact.astype(np.float32), a, b)  # float64 rounded once to float32
    assert_dot_close(a @ b, a, b)                      # whatever sgemm kernel runs here
    assert_dot_close(a.T.copy().T @ b, a, b, ref=a @ b)


def test_perturbed_element_is_rejected() -> None:
    a, b = _operands(40, 300, 30)
    got = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    bound = dot_bound(a, b, np.float32)
    got[7, 3] += np.float32(100 * bound[7, 3])
    with pytest.raises(AssertionError, match=r"1 of 1200 elements outside the bound; worst "
                                             r"at \(7, 3\)"):
        assert_dot_close(got, a, b)


def test_bound_follows_the_products_not_the_result() -> None:
    """2^24 + 1 - 2^24 summed left to right in f32 gives 0 (exact: 1): a total loss relative
    to the result, yet within 3 roundings of the sum of |products| 2^25 + 1."""
    a = np.array([[2.0 ** 24, 1.0, -2.0 ** 24]], np.float32)
    b = np.ones((3, 1), np.float32)
    left_to_right = (a[0, 0] + a[0, 1]) + a[0, 2]
    assert left_to_right == 0
    assert_dot_close(np.array([[left_to_right]], np.float32), a, b)
    with pytest.raises(AssertionError):  # an error past 3 roundings of 2^25 is not
        assert_dot_close(np.array([[-2.0 ** 7]], np.float32), a, b)


def test_complex_and_narrow_types() -> None:
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((5, 9)) + 1j * rng.standard_normal((5, 9))).astype(np.complex64)
    b = (rng.standard_normal((9, 4)) + 1j * rng.standard_normal((9, 4))).astype(np.complex64)
    assert_dot_close(a @ b, a, b)
    x = rng.standard_normal((6, 17)).astype(ml_dtypes.bfloat16)
    y = rng.standard_normal((17, 3)).astype(ml_dtypes.bfloat16)
    once = (x.astype(np.float32) @ y.astype(np.float32)).astype(ml_dtypes.bfloat16)
    assert_dot_close(once, x, y)  # f32 accumulation, rounded to bf16 once
    off = once.astype(np.float64) + 100 * dot_bound(x, y, ml_dtypes.bfloat16) * (x[:, :1] > 0)
    with pytest.raises(AssertionError):
        assert_dot_close(off, x, y)


def test_sum_bound() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 500)).astype(np.float32)
    exact = x.astype(np.float64).sum(1)
    bound = sum_bound(x, 1, np.float32)
    assert_close_to_bound(x.sum(1), exact, bound)  # numpy's pairwise order
    assert_close_to_bound(np.cumsum(x, 1)[:, -1], exact, bound)  # left to right
    with pytest.raises(AssertionError):
        assert_close_to_bound(exact + 100 * bound * (np.arange(64) == 5), exact, bound)
    assert sum_bound(x, (0, 1), np.float32).shape == ()


def test_ulps() -> None:
    one = np.float32(1.0)
    up = np.nextafter(one, np.float32(2))
    down = np.nextafter(one, np.float32(0))
    assert ulp_distance(np.array([up, down]), np.array([1.0, 1.0])).tolist() == [1.0, 0.5]
    assert ulp_distance(np.array([np.nan, np.inf, 0.0], np.float32),
                        np.array([np.nan, np.inf, np.nan])).tolist() == [0, 0, np.inf]
    assert_ulp_close(np.array([up], np.float32), np.array([1.0]), 1)
    with pytest.raises(AssertionError, match="over 2 ulp"):
        assert_ulp_close(np.array([up + 2 * (up - one)], np.float32), np.array([1.0]), 2)


def test_bounded_program() -> None:
    """relu(x w0 + b0) w1, and exp: NumPy's f32 computation is inside the bound, a result
    off by 100x its bound at one element is not."""
    x, w0 = _operands(32, 64, 48, seed=3)
    _, w1 = _operands(1, 48, 8, seed=4)
    b0 = np.random.default_rng(5).standard_normal(48).astype(np.float32)
    want = (Bounded.exact(x) @ Bounded.exact(w0) + Bounded.exact(b0)).maximum(0.0) \
        @ Bounded.exact(w1)
    got = np.maximum(x @ w0 + b0, 0) @ w1
    want.check(got)
    got[4, 2] += 100 * want.err[4, 2]
    with pytest.raises(AssertionError):
        want.check(got)
    e = Bounded.exact(x).exp()
    e.check(np.exp(x))
    with pytest.raises(AssertionError):
        e.check(np.exp(x) * np.float32(1 + 16 * eps(np.float32)))
