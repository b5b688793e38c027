"""How batched and 2-D BLAS products split over threads (blas.py): by product for several small
products (blas.by_batch), by rows or columns of one big product; the bits never depend on the
thread count, and results match NumPy in float64 within the dot bound."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.tolerance import assert_dot_close
from xlapy.backends.cpu import blas, cache, parallel

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


# ---- batch-1 rows: gemv.py's loops on x86-64, OpenBLAS ?gemv elsewhere -------------------------
@pytest.fixture(params=["jit", "openblas"])
def row_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both batch-1 paths of blas.gemm: gemv.py's (x86-64) and OpenBLAS's ?gemv (any other
    machine; taken here by saying gemv.py's loops do not run)."""
    from xlapy.backends.cpu import gemv

    if request.param == "openblas":
        monkeypatch.setattr(gemv, "available", lambda: False)
    return str(request.param)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("k", "n"), [(1024, 4096), (4096, 700), (5, 7), (1, 9), (9, 1)])
@pytest.mark.parametrize("rhs_t", [False, True])
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_row_times_matrix_is_gemv(dtype: type, k: int, n: int, rhs_t: bool,
                                  beta: float, row_path: str) -> None:
    """1 x K @ K x N (row-major or a transposed view): within the dot bound of float64, NaNs
    left in the output ignored when beta is 0 (?scal by 0 would keep them), columns outside
    the output view untouched, the same bits on 1 and 2 threads."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((1, k)).astype(dtype)
    b = rng.standard_normal((n, k)).astype(dtype).T if rhs_t else \
        rng.standard_normal((k, n)).astype(dtype)
    got = []
    for threads in (1, 2):
        out = np.full((1, n + 2), np.nan if beta == 0 else 2.0, dtype)
        blas.gemm(a, b, out[:, 1:1 + n], beta, threads)
        assert (np.isnan(out[0, [0, -1]]) if beta == 0 else out[0, [0, -1]] == 2.0).all()
        got.append(out[:, 1:1 + n])
    np.testing.assert_array_equal(got[0], got[1])
    want = a.astype(np.float64) @ b.astype(np.float64) + (2.0 if beta else 0.0)
    bound = (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)) * \
        (k + 2) * np.finfo(dtype).eps + 4 * np.finfo(dtype).eps
    assert (np.abs(got[0] - want) <= bound).all()


def test_strided_row_times_matrix(row_path: str) -> None:
    rng = np.random.default_rng(8)
    a = rng.standard_normal((1, 4096)).astype(np.float32)[:, ::2]
    b = rng.standard_normal((2048, 1024)).astype(np.float32)
    out = np.empty((1, 1024), np.float32)
    blas.gemm(a, b, out, 0.0, 2)
    assert_dot_close(out, a, b, k=2048, product=np.matmul)


BATCH1 = """
func.func @main(%x: tensor<1x{k}xf32>, %w: tensor<{k}x{n}xf32>, %b: tensor<{n}xf32>)
    -> tensor<1x{n}xf32> {{
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
       : (tensor<1x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<1x{n}xf32>
  %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<{n}xf32>) -> tensor<1x{n}xf32>
  %2 = stablehlo.add %0, %1 : tensor<1x{n}xf32>
  %z = stablehlo.constant dense<0.0> : tensor<1x{n}xf32>
  %3 = stablehlo.maximum %2, %z : tensor<1x{n}xf32>
  return %3 : tensor<1x{n}xf32>
}}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_batch1_layer_matches_the_interpreter(threads: int) -> None:
    k, n = 1536, 2304
    rng = np.random.default_rng(9)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((1, k), (k, n), (n,)))
    text = BATCH1.format(k=k, n=n)
    cache.clear_memory()
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x, w, b))
    got = np.asarray(prog(x, w, b))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(np.asarray(prog(x, w, b)), got)


def test_wide_products_split_by_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """A row chunk packs all of b again, a column chunk all of a: a product with enough rows
    for two chunks splits by columns when b is the wider, into as many chunks as rows would
    give; a tall one by rows; one with too few rows by columns, 128 at least, and 512 at
    least (at most 8 chunks) once it has 1024; always a power of two of chunks. (On a
    machine of 8 CPUs or more: `row_chunks` caps the rest.)"""
    monkeypatch.setattr(blas, "row_chunks", lambda: 16)
    assert blas.columns(256, 4096) and blas.split(256, 4096) == [0, 2048, 4096]
    assert len(blas.split(1024, 4096)) - 1 == len(blas.split(1024, 1024)) - 1 == 8
    assert not blas.columns(4096, 256) and blas.split(4096, 256)[-1] == 4096
    assert not blas.columns(512, 512) and blas.split(512, 512) == [0, 128, 256, 384, 512]
    assert blas.columns(64, 4096) and blas.split(64, 4096) == list(range(0, 4097, 512))
    assert blas.split(64, 1024) == [0, 512, 1024] and blas.split(64, 16384)[1] == 2048
    assert len(blas.split(64, 1000)) - 1 == 4  # under 1024 columns: 128 at least (7 -> 4)
    # a power of two of chunks, so 2 or 4 threads share them evenly
    for m, n in [(384, 768), (384, 384), (640, 512), (100, 1000), (3000, 100), (130, 2000)]:
        chunks = len(blas.split(m, n)) - 1
        assert chunks & (chunks - 1) == 0, (m, n, chunks)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_split_bits_do_not_depend_on_threads(dtype: type) -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal((256, 300)).astype(dtype)
    b = rng.standard_normal((300, 1000)).astype(dtype)
    outs = []
    for threads in (1, 2, 3):
        out = np.full((256, 1000), np.nan, dtype)
        blas.gemm(a, b, out, threads=threads)
        outs.append(out)
    assert all(np.array_equal(outs[0], o) for o in outs[1:])
    assert_dot_close(outs[0], a, b)


def test_wide_gemm_is_no_region_member() -> None:
    """The MLP's wide layers (256 x 1024 -> 4096, a 16 MiB rhs) run as column-split GEMM
    thunks, not row chunks of a region; the narrow ones stay region members, and so do wide
    ones whose rhs is at most regions.WIDE_RHS_BYTES (a transformer block's 512 x 2048)."""
    from xlapy.backends.cpu import regions

    text = """
func.func @main(%x: tensor<256x{k}xf32>, %w: tensor<{k}x{n}xf32>) -> tensor<256x{n}xf32> {{
  %d = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
      : (tensor<256x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<256x{n}xf32>
  return %d : tensor<256x{n}xf32>
}}
"""
    for k, n, member in ((1024, 4096, False), (512, 128, True), (512, 2048, True),
                         (1024, 2048, True), (1024, 2049, False)):
        prog = xlapy.compile(text.format(k=k, n=n), backend="cpu")
        dot = next(i for i in prog._exe.comp.instructions if i.opcode == "dot_general")
        slots = {id(i): k for k, i in enumerate(prog._exe.comp.instructions)}
        assert (regions.gemm_member(dot, slots) is not None) == member


def test_chunks_with_rows_for_two_at_most_twice_the_cpus(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """Every chunk packs the other operand again: a product with rows for two chunks or more
    is cut into at most `row_chunks` (twice the usable CPUs) of them, rows or columns, 128
    rows at least still; products of fewer rows keep their column chunks."""
    assert blas.row_chunks() == 2 * parallel.usable_cpus()
    monkeypatch.setattr(blas, "row_chunks", lambda: 4)
    assert blas.split(2048, 2048) == [0, 512, 1024, 1536, 2048]
    assert len(blas.split(1024, 4096)) - 1 == len(blas.split(768, 768)) - 1 == 4
    assert blas.split(512, 512) == [0, 128, 256, 384, 512]
    assert blas.split(256, 256) == [0, 128, 256]
    assert blas.split(64, 4096) == list(range(0, 4097, 512))  # few rows: as before


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("m", "k", "n"), [(128, 4096, 128), (100, 3000, 100), (64, 8192, 64)])
def test_deep_products_split_their_contraction(dtype: type, m: int, k: int, n: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A deep product of few rows and columns (a weight gradient over many tokens) runs as
    partial products over chunks of k (blas.k_cuts: one BLAS call on one thread took 1.1 ms
    for 128 x 4096 x 128, XLA 1.1; cut in 2, 0.63): the same bits on any thread count, beta
    applied once."""
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 2)
    cuts = blas.k_cuts(m, n, k)
    assert cuts is not None and len(cuts) == 3 and cuts[1] % 16 == 0
    rng = np.random.default_rng(2)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    outs = []
    for threads in (1, 2, 3):
        out = np.full((m, n), np.nan, dtype)
        blas.gemm(a, b, out, 0.0, threads)
        outs.append(out)
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    assert_dot_close(outs[0], a, b)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    c = c0.copy()
    blas.gemm(a, b, c, 1.0, 2)
    np.testing.assert_allclose(c, c0 + outs[0], rtol=1e-5, atol=1e-4)
    assert blas.k_cuts(m, n, 2 * blas.K_CHUNK - 1) is None  # too shallow
    assert blas.k_cuts(4, 4, k) is None  # too little work
