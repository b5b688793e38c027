"""Matrix-vector dot_generals ([m, k] @ [k], JAX's `a @ v`) run as gemv.py's dot form
(library.py routes them to gemv.matvec; OpenBLAS's n = 1 sgemm read the matrix at a third of
the bandwidth): within the float64 dot bound for row-major and transposed matrices, batched,
f32 and f64; the same bits on 1, 2 and 3 threads; small ones stay on BLAS."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.tolerance import assert_dot_close
from xlapy.backends.cpu import gemv

pytestmark = pytest.mark.skipif(not gemv.available(), reason="gemv.py runs on x86-64 only")


def _matvec(m: int, k: int, ty: str = "f32", lhs_contract: int = 1, batch: int = 0) -> str:
    a = f"{m}x{k}" if lhs_contract == 1 else f"{k}x{m}"
    b, out, dims = f"{k}", f"{m}", f"contracting_dims = [{lhs_contract}] x [0]"
    if batch:
        a, b, out = f"{batch}x{a}", f"{batch}x{b}", f"{batch}x{out}"
        dims = f"batching_dims = [0] x [0], contracting_dims = [{lhs_contract + 1}] x [1]"
    return f"""
func.func @main(%a: tensor<{a}x{ty}>, %v: tensor<{b}x{ty}>) -> tensor<{out}x{ty}> {{
  %y = stablehlo.dot_general %a, %v, {dims} : (tensor<{a}x{ty}>, tensor<{b}x{ty}>)
      -> tensor<{out}x{ty}>
  return %y : tensor<{out}x{ty}>
}}
"""


def _run(text: str, *args: np.ndarray, threads: int = 2) -> np.ndarray:
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    assert list(prog._exe.fallbacks()) == []
    return np.asarray(prog(*args))


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """The shapes of the matrices gemv.matvec was handed (routing, not speed, is tested)."""
    seen: list[tuple[int, ...]] = []
    real = gemv.matvec

    def spy(a: np.ndarray, b: np.ndarray, out: np.ndarray, threads: int = 1) -> None:
        seen.append(a.shape)
        real(a, b, out, threads)

    monkeypatch.setattr(gemv, "matvec", spy)
    return seen


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("m", "k"), [(300, 257), (1100, 65), (257, 1000)])
@pytest.mark.parametrize("lhs_contract", [1, 0])
def test_matvec_within_the_dot_bound(dtype: type, m: int, k: int, lhs_contract: int,
                                     calls: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(m + k)
    a = rng.standard_normal((m, k) if lhs_contract == 1 else (k, m)).astype(dtype)
    v = rng.standard_normal(k).astype(dtype)
    ty = "f32" if dtype == np.float32 else "f64"
    got = _run(_matvec(m, k, ty, lhs_contract), a, v)
    mat = a if lhs_contract == 1 else a.T
    assert got.shape == (m,) and got.dtype == dtype
    assert_dot_close(got, mat, v, k=k + 16)
    assert calls == [(m, k)]


def test_batched_matvec(calls: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 300, 400)).astype(np.float32)
    v = rng.standard_normal((3, 400)).astype(np.float32)
    got = _run(_matvec(300, 400, batch=3), a, v)
    assert_dot_close(got, a, v, k=416, product=lambda x, y: np.einsum("bmk,bk->bm", x, y))
    assert len(calls) == 3


def test_same_bits_on_any_thread_count() -> None:
    rng = np.random.default_rng(6)
    a = rng.standard_normal((2048, 1500)).astype(np.float32)
    v = rng.standard_normal(1500).astype(np.float32)
    text = _matvec(2048, 1500)
    one = _run(text, a, v, threads=1)
    for threads in (2, 3):
        np.testing.assert_array_equal(_run(text, a, v, threads=threads), one)


def test_small_and_non_float_stay_on_blas(calls: list[tuple[int, ...]]) -> None:
    assert not gemv.takes_matvec(8, 1, 16, np.float32)
    assert not gemv.takes_matvec(1024, 1, 1024, np.complex64)
    assert not gemv.takes_matvec(1024, 2, 1024, np.float32)
    assert gemv.takes_matvec(1024, 1, 1024, np.float64)
    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    v = np.ones(4, np.float32)
    np.testing.assert_array_equal(_run(_matvec(8, 4), a, v), a.sum(axis=1))
    assert calls == []


def test_a_two_d_column_rhs_runs_as_a_matvec_not_gemm_small(
        calls: list[tuple[int, ...]]) -> None:
    """[m, k] @ [k, 1] (JAX's `x @ w` for a one-column w): gemv.matvec once m * k is big
    enough for it, even where gemm_small would take the shape (one lane of 16 its block)."""
    text = """
func.func @main(%a: tensor<1000x300xf32>, %w: tensor<300x1xf32>) -> tensor<1000x1xf32> {
  %y = stablehlo.dot_general %a, %w, contracting_dims = [1] x [0]
      : (tensor<1000x300xf32>, tensor<300x1xf32>) -> tensor<1000x1xf32>
  return %y : tensor<1000x1xf32>
}
"""
    rng = np.random.default_rng(8)
    a = rng.standard_normal((1000, 300)).astype(np.float32)
    w = rng.standard_normal((300, 1)).astype(np.float32)
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": 2})
    assert "library jit gemv (matvec)" in prog._exe.explain()
    got = np.asarray(prog(a, w))
    assert_dot_close(got, a, w, k=316)
    assert calls == [(1000, 300)]
    small = text.replace("1000x", "8x")
    assert "library jit gemm" in xlapy.compile(small, backend="cpu")._exe.explain()
