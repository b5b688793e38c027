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
