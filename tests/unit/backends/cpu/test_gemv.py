"""Batch-1 vector-matrix products of gemv.py (the JIT-compiled axpy and dot loops behind
blas.gemm's 1-row products): within the float64 dot bound for odd shapes, strided and
transposed views, f32 and f64; the same bits on 1, 2 and 3 threads; beta; IEEE denormals."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tests.tolerance import assert_dot_close
from xlapy.backends.cpu import blas, gemv

pytestmark = pytest.mark.skipif(not gemv.available(), reason="gemv.py runs on x86-64 only")


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Chunks of a few KB, so small shapes split into many (the bits must not change)."""
    monkeypatch.setattr(gemv, "CHUNK_BYTES", 1 << 10)
    monkeypatch.setattr(gemv, "SPLIT_BYTES", 1 << 11)
    gemv.plan.cache_clear()
    gemv._described.cache_clear()
    yield
    gemv.plan.cache_clear()
    gemv._described.cache_clear()


def _bound_check(got: np.ndarray, a: np.ndarray, b: np.ndarray, beta: float = 0.0,
                 before: np.ndarray | None = None) -> None:
    k = a.shape[1]
    if beta == 0.0:
        assert_dot_close(got, a, b, k=k + 16)  # + the partial rows' sums
        return
    assert before is not None
    wide = before.astype(np.float64) * beta
    ref = a.astype(np.float64) @ b.astype(np.float64) + wide
    bound = (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64) + np.abs(wide)) * \
        (k + 18) * np.finfo(a.dtype).eps
    assert (np.abs(got.astype(np.float64) - ref) <= bound).all()


def _run(a: np.ndarray, b: np.ndarray, threads: int, beta: float = 0.0,
         start: np.ndarray | None = None) -> np.ndarray:
    out = np.full((1, b.shape[1]), np.nan, a.dtype) if start is None else start.copy()
    gemv.gemv(a, b, out, beta, threads)
    return out


SHAPES = [(1, 1), (1, 9), (9, 1), (5, 7), (17, 33), (33, 17), (8, 16), (9, 65), (300, 37),
          (37, 300), (1000, 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("k", "n"), SHAPES)
@pytest.mark.parametrize("form", ["rows", "transposed"])
def test_odd_shapes_within_the_dot_bound(dtype: type, k: int, n: int, form: str,
                                         small_chunks: None) -> None:
    rng = np.random.default_rng(k * 1000 + n)
    a = rng.standard_normal((1, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype) if form == "rows" else \
        rng.standard_normal((n, k)).astype(dtype).T
    got = [_run(a, b, threads) for threads in (1, 2, 3)]
    _bound_check(got[0], a, b)
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0], got[2])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("k", "n"), [(1024, 1029), (2053, 517), (700, 4099)])
def test_split_bits_do_not_depend_on_threads(dtype: type, k: int, n: int) -> None:
    """Shapes big enough for several chunks at the real chunk size."""
    assert len(gemv.plan(k, n * np.dtype(dtype).itemsize, k * n * np.dtype(dtype).itemsize,
                         gemv.ROWS)) > 2
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1, k)).astype(dtype)
    for b in (rng.standard_normal((k, n)).astype(dtype),
              rng.standard_normal((n, k)).astype(dtype).T):
        got = [_run(a, b, threads) for threads in (1, 2, 3)]
        _bound_check(got[0], a, b)
        np.testing.assert_array_equal(got[0], got[1])
        np.testing.assert_array_equal(got[0], got[2])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("beta", [0.5, -2.0, 1.0])
@pytest.mark.parametrize("form", ["rows", "transposed"])
def test_beta_scales_the_output_first(dtype: type, beta: float, form: str,
                                      small_chunks: None) -> None:
    """out = beta * out + a @ b (the BLAS order: out *= beta, then the sum added)."""
    rng = np.random.default_rng(11)
    k, n = 67, 45
    a = rng.standard_normal((1, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype) if form == "rows" else \
        rng.standard_normal((n, k)).astype(dtype).T
    start = rng.standard_normal((1, n)).astype(dtype)
    got = [_run(a, b, threads, beta, start) for threads in (1, 2)]
    _bound_check(got[0], a, b, beta, start)
    np.testing.assert_array_equal(got[0], got[1])


@pytest.mark.parametrize("threads", [1, 2])
def test_strided_views(threads: int, small_chunks: None) -> None:
    """A strided x, a strided matrix (neither stride unit: copied), a reversed matrix and
    strided or reversed outputs: columns outside the output view are never written."""
    rng = np.random.default_rng(12)
    big = rng.standard_normal((90, 120)).astype(np.float32)
    xs = rng.standard_normal((1, 200)).astype(np.float32)
    cases = [(xs[:, ::2][:, :90], big[:, :50]), (xs[:, :45], big[::2, ::3]),
             (xs[:, 1:91], big[::-1]), (xs[:, :120], big.T[:, ::-1]),
             (xs[:, ::5][:, :30], big.T[::4, 3:9])]
    for a, b in cases:
        n = b.shape[1]
        wide = np.full((1, 2 * n + 1), np.nan, np.float32)
        gemv.gemv(a, b, wide[:, 1::2], 0.0, threads)
        assert np.isnan(wide[0, ::2]).all()
        _bound_check(wide[:, 1::2], a, b)
        rev = np.full((1, n), np.nan, np.float32)
        gemv.gemv(a, b, rev[:, ::-1], 0.0, threads)
        np.testing.assert_array_equal(rev[:, ::-1], wide[:, 1::2])


def test_mismatched_shapes_fail_loudly() -> None:
    with pytest.raises(ValueError, match="gemv"):
        gemv.gemv(np.ones((1, 5)), np.ones((4, 3)), np.empty((1, 3)))
    with pytest.raises(ValueError, match="gemv"):
        gemv.gemv(np.ones((1, 4)), np.ones((4, 3)), np.empty((1, 2)))


def test_empty_sum_and_empty_output() -> None:
    out = np.full((1, 5), np.nan, np.float32)
    gemv.gemv(np.zeros((1, 0), np.float32), np.zeros((0, 5), np.float32), out, 0.0, 2)
    np.testing.assert_array_equal(out, 0)
    out = np.full((1, 5), 3.0)
    gemv.gemv(np.zeros((1, 0)), np.zeros((0, 5)), out, 0.5, 2)
    np.testing.assert_array_equal(out, 1.5)
    gemv.gemv(np.ones((1, 4)), np.ones((4, 0)), np.empty((1, 0)), 0.0, 2)


def test_nans_in_the_output_are_ignored_when_beta_is_zero(small_chunks: None) -> None:
    """An arena output may hold NaNs: beta 0 overwrites it (never 0 * NaN)."""
    a = np.ones((1, 40), np.float32)
    for b in (np.ones((40, 30), np.float32), np.ones((30, 40), np.float32).T):
        out = np.full((1, 30), np.nan, np.float32)
        gemv.gemv(a, b, out, 0.0, 2)
        np.testing.assert_array_equal(out, 40)


@pytest.mark.parametrize("form", ["rows", "transposed"])
def test_denormal_products_survive(form: str) -> None:
    """IEEE arithmetic as BLAS on the Python path: a denormal product is kept."""
    tiny = np.float32(2.0 ** -140)
    a = np.full((1, 3), tiny, np.float32)
    b = np.ones((3, 20), np.float32) if form == "rows" else np.ones((20, 3), np.float32).T
    out = np.empty((1, 20), np.float32)
    gemv.gemv(a, b, out, 0.0, 1)
    np.testing.assert_array_equal(out, np.float32(3 * tiny))


def test_blas_gemm_routes_one_row_here(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    real = gemv.gemv

    def spy(*args: object) -> None:
        seen.append(1)
        real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(gemv, "gemv", spy)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((1, 64)).astype(np.float32)
    b = rng.standard_normal((64, 48)).astype(np.float32)
    out = np.empty((1, 48), np.float32)
    blas.gemm(a, b, out, 0.0, 2)
    assert seen
    _bound_check(out, a, b)


def test_plan_is_a_function_of_the_shape() -> None:
    """~CHUNK_BYTES of the matrix per chunk, at most 16 chunks, boundaries on whole groups of
    rows; two halves below SPLIT_BYTES (a loop's threads each keep theirs in L2), one chunk
    below PAIR_BYTES."""
    assert gemv.plan(100, 4096, 100 * 4096, gemv.ROWS) == (0, 48, 100)
    assert gemv.plan(60, 4096, 60 * 4096, gemv.ROWS) == (0, 60)
    assert gemv.plan(512, 2048, 512 * 2048, gemv.COLS) == (0, 256, 512)
    cuts = gemv.plan(1024, 4 * 4096, 1024 * 4 * 4096, gemv.ROWS)
    assert len(cuts) == 17 and cuts[-1] == 1024
    assert all(c % gemv.ROWS == 0 for c in cuts[:-1])
    cuts = gemv.plan(4099, 4 * 700, 4099 * 4 * 700, gemv.COLS)
    assert cuts[0] == 0 and cuts[-1] == 4099 and len(cuts) - 1 <= 16


def test_workers_held_elsewhere_leave_the_chunks_to_the_caller(small_chunks: None) -> None:
    """With every worker reserved by another caller, the chunks all run here (same bits)."""
    from xlapy.backends.cpu import parallel

    rng = np.random.default_rng(21)
    a = rng.standard_normal((1, 200)).astype(np.float32)
    b = rng.standard_normal((200, 70)).astype(np.float32)
    want = _run(a, b, 1)
    pool = parallel.pool(2)
    held = pool.reserve(pool.workers)
    try:
        np.testing.assert_array_equal(_run(a, b, 2), want)
    finally:
        pool.release(held)
    np.testing.assert_array_equal(_run(a, b, 2), want)


def test_concurrent_callers(small_chunks: None) -> None:
    """Products run from several Python threads at once share the pool's workers safely."""
    import threading

    rng = np.random.default_rng(22)
    cases = [(rng.standard_normal((1, 150)).astype(np.float64),
              rng.standard_normal((150, 90)).astype(np.float64)) for _ in range(4)]
    wants = [_run(a, b, 1) for a, b in cases]
    errors: list[str] = []

    def work(j: int) -> None:  # an exception in a thread would not fail the test: recorded
        try:
            for _ in range(50):
                got = _run(*cases[j], 3)
                if not np.array_equal(got, wants[j]):
                    errors.append(f"case {j}")
                    return
        except Exception as e:  # noqa: BLE001
            errors.append(f"case {j}: {e!r}")

    ts = [threading.Thread(target=work, args=(j,)) for j in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def test_a_products_descriptor_is_made_once_and_each_call_binds_its_arrays() -> None:
    """Zero-beta calls of one shape share a descriptor made once (gemv._described: ~11 us
    of Python a call less); each call writes its own arrays' addresses into a copy, read-only
    and strided operands included."""
    rng = np.random.default_rng(23)
    gemv._described.cache_clear()
    for j in range(3):
        a = rng.standard_normal((1, 90)).astype(np.float32)
        b = rng.standard_normal((90, 40)).astype(np.float32)
        if j == 1:
            a.flags.writeable = b.flags.writeable = False
        got = _run(a, b, 2)
        _bound_check(got, a, b)
        wide = rng.standard_normal((80, 90)).astype(np.float32)[::2].T  # (the dot form)
        got = _run(a, wide, 1)
        _bound_check(got, a, wide)
    assert gemv._described.cache_info().misses == 2
