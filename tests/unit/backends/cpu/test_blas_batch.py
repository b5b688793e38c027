"""blas.batched_gemm: one native job per batch index, planned once per shape (gemm_jobs.py),
each the single-threaded ?gemm call `_gemm1` makes: the same bits for every type, operand
layout and thread count, and no Python per batch index (it cost ~15 us each)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from xlapy.backends.cpu import blas


def _operands(dtype: Any, nb: int, m: int, n: int, k: int, seed: int
              ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)

    def make(shape: tuple[int, ...]) -> np.ndarray:
        x = rng.standard_normal(shape)
        if np.dtype(dtype).kind == "c":
            x = x + 1j * rng.standard_normal(shape)
        return x.astype(dtype)
    return make((nb, m, k)), make((nb, k, n))


def _one_by_one(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty((a.shape[0], a.shape[1], b.shape[2]), a.dtype)
    for j in range(a.shape[0]):
        blas._gemm1(a[j], b[j], out[j], 0.0)
    return out


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("layout", ["plain", "rhs_t", "lhs_t", "broadcast", "strided"])
def test_same_bits_as_one_call_per_batch(threads: int, dtype: Any, layout: str) -> None:
    a, b = _operands(dtype, 7, 13, 9, 11, seed=len(layout) + threads)
    if layout == "rhs_t":  # b given as [n, k] per batch, read transposed (q k^T)
        b = np.ascontiguousarray(np.swapaxes(b, 1, 2)).swapaxes(1, 2)
    elif layout == "lhs_t":
        a = np.ascontiguousarray(np.swapaxes(a, 1, 2)).swapaxes(1, 2)
    elif layout == "broadcast":  # one rhs for every batch index (stride 0)
        b = np.broadcast_to(b[:1], b.shape)
    elif layout == "strided":  # no unit stride in a matrix: each one copied for BLAS
        wide = np.repeat(b, 2, axis=2)  # (test_gemm_int's batch dims not first, widened)
        b = wide[:, :, ::2]
    want = _one_by_one(a, b)
    out = np.full_like(want, np.nan)
    blas.batched_gemm(a, b, out, threads)
    np.testing.assert_array_equal(out.view(np.uint8), want.view(np.uint8))


def test_no_python_call_per_batch_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch runs as native jobs: `_gemm1` (a Python call per product) never runs."""
    a, b = _operands(np.float32, 32, 8, 8, 8, seed=1)
    want = _one_by_one(a, b)

    def no(*args: Any) -> None:
        raise AssertionError("a Python call per batch index")
    monkeypatch.setattr(blas, "_gemm1", no)
    for threads in (1, 2):
        out = np.empty_like(want)
        blas.batched_gemm(a, b, out, threads)
        np.testing.assert_array_equal(out, want)


def test_eight_products_run_by_batch_whatever_their_size() -> None:
    """Eight or more products: each thread takes whole products (8 of 512^3, split each
    over 2 threads, took 10.2 ms against XLA's 7.5); fewer big ones keep the split. A
    function of the shape alone."""
    assert blas.by_batch(8, 512, 512, 512)
    assert blas.by_batch(blas.BATCH_MANY, 4096, 4096, 4096)
    assert not blas.by_batch(4, 1024, 1024, 1024)
    assert not blas.by_batch(1, 64, 64, 64)


_DOT = """func.func @main(%x: tensor<{b}x{m}x{k}xf32>, %y: tensor<{b}x{k}x{n}xf32>)
    -> tensor<{b}x{m}x{n}xf32> {{
  %0 = stablehlo.dot_general %x, %y, batching_dims = [0] x [0],
      contracting_dims = [2] x [1] : (tensor<{b}x{m}x{k}xf32>, tensor<{b}x{k}x{n}xf32>)
      -> tensor<{b}x{m}x{n}xf32>
  return %0 : tensor<{b}x{m}x{n}xf32>
}}"""


@pytest.mark.parametrize(("nb", "m", "k", "n"), [(8, 256, 256, 256), (3, 1, 1024, 300),
                                                 (17, 1, 512, 512)])
def test_big_batched_products_same_bits_on_any_thread_count(
        nb: int, m: int, k: int, n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of big products (by batch from BATCH_MANY) and of [1, k] @ [k, n] rows (each
    its own threaded gemv call past library.ROWS1_MIN: 32 of 1 x 4096 x 1024 took 49.7 ms
    as single-threaded BLAS calls, XLA 30): within f32's error of the exact product, the
    same bits on 1 and 2 threads."""
    import xlapy

    a, b = _operands(np.float32, nb, m, n, k, seed=nb + m)
    text = _DOT.format(b=nb, m=m, k=k, n=n)
    calls: list[int] = []
    real = blas.gemm
    monkeypatch.setattr(blas, "gemm", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    outs = [np.asarray(xlapy.compile(text, backend="cpu", options={"num_threads": t})(a, b))
            for t in (1, 2)]
    assert len(calls) == (2 * nb if m == 1 else 0)  # rows: one threaded gemv call each
    np.testing.assert_array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64))
    bound = k * 2.0 ** -24 * np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    assert np.all(np.abs(outs[0] - exact) <= bound)
