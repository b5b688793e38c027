"""Batches of small products through gemm_small's register blocks (gemm_small.batched_runner,
routed by library.py where BLAS's batched_gemm ran: JAX's einsum('bij,bjk->bik')): each
product the bits of gemm_small's own chain, on 1, 2 and 3 threads, f32 and f64; operands that
are not dense (a transposed rhs) still go through BLAS, within the dot bound; so do batches
of bigger products on AVX2 targets (AVX2_BATCH_MAX_MACS) and every batch on SSE ones."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.tolerance import assert_dot_close
from xlapy.backends.cpu import gemm_small, parallel, target

pytestmark = pytest.mark.skipif(not target.current().is_x86,
                                reason="gemm_small.py runs on x86-64 only")


def _bmm(b: int, m: int, k: int, n: int, ty: str, rhs_t: bool = False) -> str:
    rhs, rc = (f"{b}x{n}x{k}", 2) if rhs_t else (f"{b}x{k}x{n}", 1)
    return f"""
func.func @main(%x: tensor<{b}x{m}x{k}x{ty}>, %y: tensor<{rhs}x{ty}>) -> tensor<{b}x{m}x{n}x{ty}> {{
  %z = stablehlo.dot_general %x, %y, batching_dims = [0] x [0], contracting_dims = [2] x [{rc}]
      : (tensor<{b}x{m}x{k}x{ty}>, tensor<{rhs}x{ty}>) -> tensor<{b}x{m}x{n}x{ty}>
  return %z : tensor<{b}x{m}x{n}x{ty}>
}}
"""


def _chain(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each product through gemm_small's own function: the bits the batch must have."""
    b, m, k = x.shape
    n = y.shape[2]
    f64 = x.dtype == np.float64
    fn = gemm_small.compiled(gemm_small.GemmShape(m, n, k, f64)).direct
    out = np.empty((b, m, n), x.dtype)
    for j in range(b):
        xj, yj, oj = (np.ascontiguousarray(v[j]) for v in (x, y, out))
        fn(xj.ctypes.data, yj.ctypes.data, oj.ctypes.data, n, k, 0, m)
        out[j] = oj
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("b", "m", "k", "n"), [(20, 33, 17, 45), (3, 64, 200, 70),
                                                (17, 256, 256, 256)])
def test_batch_has_gemm_small_bits_on_any_thread_count(dtype: type, b: int, m: int, k: int,
                                                       n: int) -> None:
    rng = np.random.default_rng(b + m + k + n)
    x = rng.standard_normal((b, m, k)).astype(dtype)
    y = rng.standard_normal((b, k, n)).astype(dtype)
    ty = "f32" if dtype == np.float32 else "f64"
    want = _chain(x, y)
    assert_dot_close(want, x, y)
    routed = gemm_small.batch_shape(m, n, k, dtype == np.float64, b) is not None
    bits = target.current().vector_bits
    assert routed == (bits == 512 or (bits == 256 and m * n * k <= 1 << 18 and b >= 8))
    for threads in (1, 2, 3):
        prog = xlapy.compile(_bmm(b, m, k, n, ty), backend="cpu",
                             options={"num_threads": threads})
        assert list(prog._exe.fallbacks()) == []
        got = np.asarray(prog(x, y))
        if routed:
            np.testing.assert_array_equal(got, want)
        else:
            assert_dot_close(got, x, y)


def test_transposed_rhs_goes_through_blas() -> None:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((20, 40, 30)).astype(np.float32)
    y = rng.standard_normal((20, 50, 30)).astype(np.float32)
    got = xlapy.compile(_bmm(20, 40, 30, 50, "f32", rhs_t=True), backend="cpu")(x, y)
    assert_dot_close(got, x, y, k=30, product=lambda a, c: np.einsum("bmk,bnk->bmn", a, c))


def test_batch_shape_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    avx512 = target.current().vector_bits == 512
    avx2 = target.current().vector_bits == 256
    # on AVX2 up to AVX2_BATCH_MAX_MACS (512 x [16, 64] x [64, 16]: a BLAS call each cost
    # more than the product; 0.34 -> 0.22 ms on Zen 3, XLA 0.27)
    assert (gemm_small.batch_shape(16, 16, 64, False) is not None) == (avx512 or avx2)
    assert (gemm_small.batch_shape(64, 64, 64, True) is not None) == (avx512 or avx2)
    assert (gemm_small.batch_shape(64, 64, 128, False) is not None) == avx512
    assert (gemm_small.batch_shape(16, 16, 64, False, 7) is not None) == avx512  # (7 calls)
    assert (gemm_small.batch_shape(256, 256, 256, False) is not None) == avx512
    assert (gemm_small.batch_shape(512, 512, 128, False) is not None) == avx512
    monkeypatch.setattr(parallel, "l2_bytes", lambda root="/": 2 << 20)
    assert gemm_small.batch_shape(64, 512, 512, False) is None  # rhs 1 MB: not in L2
    monkeypatch.setattr(parallel, "l2_bytes", lambda root="/": 1 << 20)  # Zen 4: in place
    assert (gemm_small.batch_shape(64, 512, 512, False) is not None) == avx512
    assert gemm_small.batch_shape(1024, 256, 256, True) is None  # rhs 512 KB f64 + macs
    assert gemm_small.batch_shape(0, 8, 8, False) is None
    run = gemm_small.batched_runner(gemm_small.GemmShape(4, 4, 4, False), 2)
    x = np.ones((3, 4, 4), np.float32)
    assert not run(x, np.ones((3, 4, 8), np.float32)[:, :, ::2], np.empty((3, 4, 4), np.float32))


@pytest.mark.parametrize("threads", [1, 2])
def test_packed_products_keep_gemm_small_bits(threads: int,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Products of at least PACKED_MIN in m, n and k go through gemm_f32's packed kernel
    (AVX-512 f32, an L2 of PACKED_L2: as told here): each one gemm_small's chain bit for
    bit, denormal operands and products kept (IEEE, as BLAS computes), infinities and NaN
    through."""
    from xlapy.backends.cpu import gemm_f32

    monkeypatch.setattr(parallel, "l2_bytes", lambda root="/": gemm_small.PACKED_L2)

    b, m, k, n = 3, 256, 256, 256
    shape = gemm_small.GemmShape(m, n, k, False)
    if gemm_small.batch_shape(m, n, k, False) is None or not gemm_f32.available():
        pytest.skip("batches of products run here on AVX-512 hosts only")
    assert gemm_small._packed_job(shape) is not None
    assert gemm_small._packed_job(gemm_small.GemmShape(128, 256, 256, False)) is None
    rng = np.random.default_rng(21)
    x = rng.standard_normal((b, m, k)).astype(np.float32)
    y = rng.standard_normal((b, k, n)).astype(np.float32)
    x[0, :2], y[0, :, :2] = 0.0, 0.0
    x[0, 0, :2], y[0, :2, 0] = [1e-20, 3e-20], 1e-20  # out[0, 0, 0]: a denormal sum, 4e-40
    x[0, 1, 0], y[0, 0, 1] = 1e-40, 2.0                # out[0, 1, 1]: a denormal operand
    x[1, 5, 7], y[1, 7, 3] = np.inf, 0.0               # inf * 0: NaN at out[1, 5, 3]
    y[2, 9, 11] = np.nan
    out = np.empty((b, m, n), np.float32)
    assert gemm_small.batched_runner(shape, threads)(x, y, out)
    np.testing.assert_array_equal(out, _chain(x, y))
    tiny = np.finfo(np.float32).tiny  # both denormal, neither flushed to zero
    assert 3.9e-40 < out[0, 0, 0] < tiny and 1.9e-40 < out[0, 1, 1] < tiny
    assert np.isnan(out[1, 5, 3]) and np.isinf(out[1, 5]).sum() == n - 1
    assert np.isnan(out[2, :, 11]).all()
