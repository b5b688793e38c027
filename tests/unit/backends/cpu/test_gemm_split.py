"""How batched and 2-D BLAS products split over threads (blas.py): by product for several small
products (blas.by_batch), by rows or columns of one big product; the bits never depend on the
thread count, and results match NumPy in float64 within the dot bound."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.tolerance import assert_dot_close
from xlapy.backends.cpu import blas, cache

HEADS = """
func.func @main(%q: tensor<{b}x{m}x{k}xf32>, %kt: tensor<{b}x{n}x{k}xf32>)
    -> tensor<{b}x{m}x{n}xf32> {{
  %s = stablehlo.dot_general %q, %kt, batching_dims = [0] x [0], contracting_dims = [2] x [2]
       : (tensor<{b}x{m}x{k}xf32>, tensor<{b}x{n}x{k}xf32>) -> tensor<{b}x{m}x{n}xf32>
  return %s : tensor<{b}x{m}x{n}xf32>
}}
"""


def test_by_batch_is_a_function_of_the_shape() -> None:
    small = blas.BATCH_SPLIT_FLOPS // 2
    assert blas.by_batch(8, 256, 256, 64)  # the transformer's heads
    assert blas.by_batch(2, small, 1, 1)
    assert not blas.by_batch(1, 256, 256, 64)  # one product: split by rows
    assert not blas.by_batch(2, 256, 256, 256)  # two big ones: each split by rows
    assert blas.by_batch(17, 1024, 1024, 1024)  # many: shared out, whatever their size


@pytest.mark.parametrize(("b", "m", "k", "n"), [(8, 96, 32, 80), (3, 40, 16, 24),
                                                (2, 256, 256, 256)])
def test_batched_dot_bits_do_not_depend_on_threads(b: int, m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(5)
    q = rng.standard_normal((b, m, k)).astype(np.float32)
    kt = rng.standard_normal((b, n, k)).astype(np.float32)
    text = HEADS.format(b=b, m=m, k=k, n=n)
    got = []
    for threads in (1, 2, 3):
        cache.clear_memory()
        prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads,
                                                           "split_cost": 1})
        got.append(np.asarray(prog(q, kt)))
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0], got[2])
    assert_dot_close(got[0], q, kt, k=k, product=lambda x, y: np.einsum("bmk,bnk->bmn", x, y))
    if blas.by_batch(b, m, n, k):  # one BLAS call per product, as on one thread
        want = np.empty_like(got[0])
        for j in range(b):
            blas.gemm(q[j], kt[j].T, want[j])
        if m * n * k < blas.SPLIT_FLOPS:
            np.testing.assert_array_equal(got[0], want)
