"""gemm_small.py: small f32/f64 [m, k] x [k, n] products as JIT loop nests (the rhs read in
place): values against NumPy in f64 over row and column tails, bits independent of the row
split, which dots take it (explain), and its use in regions and library thunks."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.tolerance import assert_dot_close
from xlapy.backends.cpu import gemm_small, parallel, regions, target

SHAPES = [(1, 1, 1), (7, 13, 5), (33, 100, 17), (6, 64, 9), (13, 257, 31), (64, 65, 64),
          (64, 256, 256), (2, 3, 300), (9, 31, 8), (17, 47, 40), (3, 255, 7)]

DOT = """
func.func @main(%x: tensor<{m}x{k}x{t}>, %w: tensor<{k}x{n}x{t}>) -> tensor<{m}x{n}x{t}> {{
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [{c}]
       : (tensor<{m}x{k}x{t}>, tensor<{k}x{n}x{t}>) -> tensor<{m}x{n}x{t}>
  return %0 : tensor<{m}x{n}x{t}>
}}
"""


def _operands(m: int, n: int, k: int, dtype: type, seed: int = 0
              ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed + m * 7 + n * 11 + k)
    return (rng.standard_normal((m, k)).astype(dtype),
            rng.standard_normal((k, n)).astype(dtype))


@pytest.mark.parametrize(("m", "n", "k"), SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_against_numpy_in_f64(m: int, n: int, k: int, dtype: type) -> None:
    s = gemm_small.shape(m, n, k, dtype == np.float64)
    assert s is not None
    x, y = _operands(m, n, k, dtype)
    out = np.full((m, n), np.nan, dtype)
    gemm_small.runner(s)(x, y, out)
    want = x.astype(np.float64) @ y.astype(np.float64)
    # one rounding per multiply-add: k eps |x| |y| at most
    bound = k * np.finfo(dtype).eps * (np.abs(x).astype(np.float64) @ np.abs(y))
    assert np.all(np.abs(out - want) <= bound + np.finfo(dtype).tiny)


@pytest.mark.parametrize(("m", "n", "k"), [(64, 256, 256), (13, 257, 31), (33, 100, 17)])
def test_bits_do_not_depend_on_the_row_split(m: int, n: int, k: int) -> None:
    s = gemm_small.shape(m, n, k, False)
    assert s is not None
    c = gemm_small.compiled(s)
    x, y = _operands(m, n, k, np.float32)
    whole = np.empty((m, n), np.float32)
    c.direct(x.ctypes.data, y.ctypes.data, whole.ctypes.data, n, k, 0, m)
    for cuts in ([0, m // 2, m], [0, 1, m // 3, m - 1, m], list(range(m + 1))):
        parts = np.empty((m, n), np.float32)
        for lo, hi in zip(cuts, cuts[1:]):
            c.direct(x.ctypes.data, y.ctypes.data, parts.ctypes.data, n, k, lo, hi)
        np.testing.assert_array_equal(parts.view(np.uint32), whole.view(np.uint32))
    two = np.empty((m, n), np.float32)
    gemm_small.runner(s, threads=2)(x, y, two)
    np.testing.assert_array_equal(two.view(np.uint32), whole.view(np.uint32))


def test_rows_entry_reads_the_table_through_a_region_descriptor() -> None:
    """`rows` reads regions.gemm_descriptor: the table, the lhs / rhs / out slots, n, k."""
    assert (gemm_small.TABLE, gemm_small.LHS, gemm_small.RHS, gemm_small.OUT, gemm_small.N,
            gemm_small.K) == (regions._G_TABLE, regions._G_LHS, regions._G_RHS,
                              regions._G_OUT, regions._G_N, regions._G_K)
    import ctypes

    m, n, k = 9, 40, 12
    s = gemm_small.shape(m, n, k, False)
    assert s is not None
    x, y = _operands(m, n, k, np.float32)
    out = np.zeros((m, n), np.float32)
    table = (ctypes.c_void_p * 5)(0, out.ctypes.data, 0, x.ctypes.data, y.ctypes.data)
    g = regions.Gemm(3, 4, 1, m, n, k, False, False)
    d = regions.gemm_descriptor(g, ctypes.addressof(table))
    ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(
        gemm_small.compiled(s).rows_address)(d.ctypes.data, 0, m)
    direct = np.empty((m, n), np.float32)
    gemm_small.runner(s)(x, y, direct)
    np.testing.assert_array_equal(out, direct)


@pytest.fixture
def l2_1mb(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with Zen 4's 1 MB L2 (the measured thresholds flip at PACKED_L2)."""
    monkeypatch.setattr(parallel, "l2_bytes", lambda root="/": 1 << 20)


def test_which_shapes_take_it(l2_1mb: None) -> None:
    assert gemm_small.shape(64, 256, 256, False) is not None
    assert gemm_small.shape(64, 256, 256, False, rhs_t=True) is None  # rhs [n, k]: BLAS
    assert gemm_small.shape(64, 1, 256, False, rhs_t=True) is not None  # (one column alike)
    wide_regs = target.current().vector_bits == 512
    # over MAX_MACS: f32 on AVX-512 only (WIDE_RHS_BYTES, WIDE_K), never f64
    assert (gemm_small.shape(256, 1024, 128, False) is not None) == wide_regs
    assert gemm_small.shape(256, 1024, 128, True) is None
    # over MAX_MACS with NARROW_N columns or fewer: here on AVX-512 only
    assert (gemm_small.shape(256, 256, 256, False) is not None) == wide_regs
    assert (gemm_small.shape(4096, 64, 1024, False) is not None) == wide_regs
    with target.use("x86-64-v3"):
        assert gemm_small.shape(256, 256, 256, False) is None
    assert gemm_small.shape(4, 1024, 1024, False) is None  # a 4 MB rhs: not L2-resident
    assert gemm_small.shape(0, 4, 4, False) is None


def test_wide_rhs_on_avx512(l2_1mb: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """An f32 rhs over MAX_RHS_BYTES and up to WIDE_RHS_BYTES, k up to WIDE_K, more rows
    than gemm_skinny's one pass: read in place on AVX-512 targets with an L2 under
    PACKED_L2 only."""
    for name, wide in (("x86-64-v4", True), ("x86-64-v3", False)):
        with target.use(name):
            assert (gemm_small.shape(32, 1024, 256, False) is not None) == wide  # 1 MB
            assert (gemm_small.shape(1024, 1024, 1024, False) is not None) == wide  # 4 MB
            assert gemm_small.shape(32, 1024, 256, True) is None  # f64
            assert gemm_small.shape(32, 1024, 4096, False) is None  # k over WIDE_K
            assert gemm_small.shape(32, 2048, 1024, False) is None  # 8 MB
            assert gemm_small.shape(12, 1024, 256, False) is None  # gemm_skinny's one pass
            assert (gemm_small.shape(13, 1024, 256, False) is not None) == wide
    for l2 in (2 << 20, None):  # a Sapphire Rapids' L2, or none told
        monkeypatch.setattr(parallel, "l2_bytes", lambda root="/", v=l2: v)
        with target.use("x86-64-v4"):
            assert gemm_small.shape(32, 1024, 256, False) is None


def test_batches_pack_only_with_a_big_l2(monkeypatch: pytest.MonkeyPatch) -> None:
    """gemm_f32's packed kernel per product of a batch only with an L2 of PACKED_L2 or more
    (and an AVX-512 host); in place otherwise."""
    from xlapy.backends.cpu import gemm_f32

    s = gemm_small.GemmShape(256, 256, 256, False)
    for l2, packed in ((1 << 20, False), (2 << 20, gemm_f32.available()), (None, False)):
        monkeypatch.setattr(parallel, "l2_bytes", lambda root="/", v=l2: v)
        assert (gemm_small._packed_job(s) is not None) == packed


@pytest.mark.parametrize(("t", "c", "kind"), [("f32", 0, "jit gemm"), ("f64", 0, "jit gemm"),
                                              ("f32", 1, "blas")])
def test_dot_general_through_the_backend(t: str, c: int, kind: str) -> None:
    m, n, k = 10, 24, 24  # k == n: the rhs is [k, n] or, contracting its dim 1, [n, k]
    text = DOT.format(m=m, n=n, k=k, t=t, c=c)
    prog = xlapy.compile(text, backend="cpu")
    assert f"library {kind}" in prog._exe.explain()
    dtype = np.float64 if t == "f64" else np.float32
    x, y = _operands(m, n, k, dtype)
    want = xlapy.compile(text, backend="interpreter")(x, y)
    np.testing.assert_allclose(prog(x, y), want, rtol=1e-5 if t == "f32" else 1e-12,
                               atol=1e-5 if t == "f32" else 1e-12)


REGION = """
func.func @main(%x: tensor<64x48xf32>, %w: tensor<48x40xf32>, %b: tensor<40xf32>)
    -> tensor<64x40xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
       : (tensor<64x48xf32>, tensor<48x40xf32>) -> tensor<64x40xf32>
  %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<40xf32>) -> tensor<64x40xf32>
  %2 = stablehlo.add %0, %1 : tensor<64x40xf32>
  %3 = stablehlo.tanh %2 : tensor<64x40xf32>
  return %3 : tensor<64x40xf32>
}
"""


def test_region_member_bits_equal_the_library_thunks_for_any_thread_count() -> None:
    rng = np.random.default_rng(3)
    args = (rng.standard_normal((64, 48)).astype(np.float32),
            rng.standard_normal((48, 40)).astype(np.float32),
            rng.standard_normal(40).astype(np.float32))
    outs = []
    for threads in (1, 2, 3):
        prog = xlapy.compile(REGION, backend="cpu",
                             options={"num_threads": threads, "split_cost": 1})
        explain = prog._exe.explain()
        assert "library jit gemm" in explain and "row-parallel" in explain
        outs.append(prog(*args))
    for o in outs[1:]:
        np.testing.assert_array_equal(o.view(np.uint32), outs[0].view(np.uint32))
    want = np.tanh(args[0].astype(np.float64) @ args[1] + args[2])
    np.testing.assert_allclose(outs[0], want, rtol=1e-5, atol=1e-5)


def test_other_targets_compile_their_own_code() -> None:
    """x86-64-v2 (SSE, no FMA) and v3 (AVX2) blockings run here and agree with NumPy."""
    x, y = _operands(13, 70, 33, np.float32)
    want = x.astype(np.float64) @ y
    for name in ("x86-64-v2", "x86-64-v3"):
        with target.use(target.resolve(name)):
            s = gemm_small.shape(13, 70, 33, False)
            assert s is not None
            out = np.empty((13, 70), np.float32)
            gemm_small.runner(s)(x, y, out)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


def test_compile_builds_nothing_the_first_run_builds_it_for_the_compiles_target(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The module is a library routine: built on a program's first run (once per process,
    type, target and denormal mode), for the target the program was compiled for."""
    built: list[tuple[object, ...]] = []
    real = gemm_small._compile

    def recording(*key: object) -> gemm_small.Compiled:
        built.append(key)
        return real(*key)  # type: ignore[arg-type]

    monkeypatch.setattr(gemm_small, "_compile", recording)
    text = DOT.format(m=6, n=40, k=24, t="f32", c=0)
    prog = xlapy.compile(text, backend="cpu", options={"target": "x86-64-v3"})
    assert "library jit gemm" in prog._exe.explain()
    assert built == []
    x, y = _operands(6, 40, 24, np.float32)
    got = prog(x, y)
    # n = 40 on AVX2 (8 lanes, blocks of 3 vectors): one block of 24 columns, 2 vectors
    assert built == [(False, target.resolve("x86-64-v3"), True,
                      gemm_small.Columns(True, 2, ()))]
    np.testing.assert_allclose(got, x.astype(np.float64) @ y, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("m", "n", "k", "t"), [(2053, 100, 300, "f32"),
                                                (1500, 512, 64, "f32"),
                                                (3000, 96, 200, "f64")])
def test_a_big_narrow_product_runs_here_on_any_thread_count(m: int, n: int, k: int,
                                                            t: str) -> None:
    """Over MAX_MACS with NARROW_N columns or fewer (AVX-512): the JIT loops, within the dot
    bound, the same bits on 1, 2 and 3 threads."""
    text = DOT.format(m=m, n=n, k=k, t=t, c=0)
    x, y = _operands(m, n, k, np.float64 if t == "f64" else np.float32)
    got = []
    for threads in (1, 2, 3):
        prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
        kind = "jit gemm" if target.current().vector_bits == 512 else "blas"
        assert f"library {kind}" in prog._exe.explain()
        got.append(np.asarray(prog(x, y)))
    assert_dot_close(got[0], x, y, k=k)
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0], got[2])
