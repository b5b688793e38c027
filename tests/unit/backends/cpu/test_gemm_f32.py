"""gemm_f32.py, the f32 GEMM for wide row-major weights (AVX-512, or AVX2 + FMA: CI runs this
file for each): within the float64 dot bound for odd shapes and tails (rows, columns and k
past the register tile and the MC, NC, KC blocks), strided views, operands stored
transposed, NaN/inf, IEEE denormals; the same bits run to run and on 1, 2 and 3 threads
through blas.gemm; routing only of plain wide products on those targets."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tolerance import assert_dot_close
from xlapy.backends.cpu import blas, gemm_f32, gemm_jobs, target

pytestmark = pytest.mark.skipif(not gemm_f32.available(),
                                reason="gemm_f32.py runs on AVX-512 or AVX2 + FMA targets only")

SHAPES = [(1, 1, 1), (7, 33, 5), (8, 48, 256), (9, 47, 257), (13, 50, 300), (17, 95, 3),
          (64, 256, 256), (300, 1100, 600)]


@pytest.fixture
def fortran_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per call routed to the kernel (gemm_f32.fortran asked for)."""
    seen: list[int] = []
    real = gemm_f32.fortran

    def spy() -> object:
        seen.append(1)
        return real()

    monkeypatch.setattr(gemm_f32, "fortran", spy)
    return seen


def _run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.full((a.shape[0], b.shape[1]), np.nan, np.float32)  # beta 0 ignores NaNs there
    gemm_f32.gemm(a, b, out)
    return out


@pytest.mark.parametrize(("m", "n", "k"), SHAPES)
def test_odd_shapes_within_the_dot_bound(m: int, n: int, k: int) -> None:
    rng = np.random.default_rng(m * 10000 + n * 10 + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    got = _run(a, b)
    assert_dot_close(got, a, b, k=k)
    np.testing.assert_array_equal(got, _run(a, b))  # run to run


def test_empty_sum_is_zeros_and_empty_output_is_untouched() -> None:
    """k = 0 writes zeros over whatever the output held (as ?gemm with beta 0)."""
    got = _run(np.ones((5, 0), np.float32), np.ones((0, 7), np.float32))
    np.testing.assert_array_equal(got, np.zeros((5, 7), np.float32))
    assert _run(np.ones((0, 3), np.float32), np.ones((3, 7), np.float32)).shape == (0, 7)


def test_strided_views() -> None:
    """Leading dimensions wider than the rows (a slice of a wider array) on every operand."""
    rng = np.random.default_rng(3)
    big_a = rng.standard_normal((70, 300)).astype(np.float32)
    big_b = rng.standard_normal((290, 600)).astype(np.float32)
    a, b = big_a[3:68, 5:280], big_b[2:277, 7:520]
    out_big = np.full((80, 700), np.nan, np.float32)
    out = out_big[4:69, 100:613]
    gemm_f32.gemm(a, b, out)
    assert_dot_close(out, a, b, k=a.shape[1])
    assert np.isnan(out_big[:4]).all() and np.isnan(out_big[:, :100]).all()
    assert np.isnan(out_big[69:]).all() and np.isnan(out_big[:, 613:]).all()


def _transposed(x: np.ndarray) -> np.ndarray:
    """x's values as a transposed view (column-major storage: BLAS's "T")."""
    return np.ascontiguousarray(x.T).T


@pytest.mark.parametrize(("m", "n", "k"), [(9, 47, 257), (16, 96, 600), (13, 50, 31),
                                           (64, 256, 256), (3, 5, 16), (300, 700, 290)])
def test_transposed_operands_give_the_row_major_bits(m: int, n: int, k: int) -> None:
    """A stored [k][m] (pack_a_t) and B stored [n][k] (pack_b_t: 16 x 16 transposed blocks,
    a k tail past them and partial panels): the same packed tiles, so the same bits as the
    row-major operands, for each of the four combinations."""
    rng = np.random.default_rng(m * 7 + n * 3 + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    want = _run(a, b)
    assert_dot_close(want, a, b, k=k)
    for x, y in ((_transposed(a), b), (a, _transposed(b)), (_transposed(a), _transposed(b))):
        assert not (x.flags.c_contiguous and y.flags.c_contiguous)
        np.testing.assert_array_equal(_run(x, y), want)


def test_transposed_strided_views() -> None:
    """Transposed views of slices (leading dimensions wider than the stored rows) with NaN
    around them that must not be read."""
    rng = np.random.default_rng(8)
    a_big = np.full((300, 90), np.nan, np.float32)  # A^T stored, A = a_big[5:280, 3:68].T
    b_big = np.full((600, 290), np.nan, np.float32)  # B^T stored, B = b_big[7:520, 2:277].T
    a_big[5:280, 3:68] = rng.standard_normal((275, 65))
    b_big[7:520, 2:277] = rng.standard_normal((513, 275))
    a, b = a_big[5:280, 3:68].T, b_big[7:520, 2:277].T
    got = _run(a, b)
    assert_dot_close(got, a, b, k=275)
    np.testing.assert_array_equal(got, _run(np.ascontiguousarray(a), np.ascontiguousarray(b)))


def test_nan_and_inf_propagate() -> None:
    rng = np.random.default_rng(4)
    m, n, k = 20, 70, 300
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = np.abs(rng.standard_normal((k, n))).astype(np.float32)
    a[3, 7] = np.nan
    a[5, 9], a[6, 1:] = np.inf, 0.0
    b[9, :] = 1.0
    b[100, 50] = np.inf
    got = _run(a, b)
    with np.errstate(invalid="ignore"):  # inf * 0
        ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-4, atol=1e-3)


def test_denormal_products_survive() -> None:
    """IEEE arithmetic as BLAS (FTZ/DAZ cleared): a denormal product is kept."""
    tiny = np.float32(2.0 ** -140)
    a = np.full((9, 3), tiny, np.float32)
    got = _run(a, np.ones((3, 50), np.float32))
    np.testing.assert_array_equal(got, np.float32(3 * tiny))


@pytest.mark.parametrize(("m", "n", "k"), [(256, 1024, 300), (256, 1040, 257), (1024, 1024, 64)])
def test_blas_gemm_bits_do_not_depend_on_threads(m: int, n: int, k: int,
                                                 fortran_calls: list[int]) -> None:
    """Chunks of blas.split (columns; rows for the short sum), each one thread's call into
    the kernel: the same bits on 1, 2 and 3 threads, and every chunk routed here."""
    seen = fortran_calls
    rng = np.random.default_rng(5)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    got = []
    for threads in (1, 2, 3):
        gemm_jobs._PLANS.clear()  # (planned once per shape: each run plans, routing anew)
        out = np.full((m, n), np.nan, np.float32)
        blas.gemm(a, b, out, 0.0, threads)
        got.append(out)
    assert len(seen) == 3 * (len(blas.split(m, n)) - 1)
    assert_dot_close(got[0], a, b, k=k)
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0], got[2])


def test_routes_only_plain_wide_products() -> None:
    assert gemm_f32.routes(256, 2048, 4096, b"N", b"N", 0.0)
    assert gemm_f32.routes(256, 2048, 4096, b"T", b"N", 0.0)
    assert gemm_f32.routes(256, 2048, 4096, b"N", b"T", 0.0)
    assert not gemm_f32.routes(256, 2048, 4096, b"C", b"N", 0.0)
    assert not gemm_f32.routes(256, 2048, 4096, b"N", b"N", 1.0)
    assert not gemm_f32.routes(32, 2048, 4096, b"N", b"N", 0.0)
    assert not gemm_f32.routes(512, 2048, 4096, b"N", b"N", 0.0)
    assert not gemm_f32.routes(256, 256, 4096, b"N", b"N", 0.0)
    assert not gemm_f32.routes(256, 2048, 8, b"N", b"N", 0.0)
    assert not gemm_f32.routes(64, 2048, 64, b"N", b"N", 0.0)  # short sums: 128 rows and
    assert not gemm_f32.routes(128, 512, 64, b"N", b"N", 0.0)  # 1024 columns at least
    assert gemm_f32.routes(128, 1024, 64, b"N", b"N", 0.0)
    assert gemm_f32.routes(256, 2048, 16, b"N", b"N", 0.0)
    with target.use("x86-64-v3"):  # AVX2 + FMA: 8-lane vectors, 4 x 3 of them
        assert gemm_f32.available() and gemm_f32.tile(target.current()) == gemm_f32.Tile(
            8, gemm_f32.MR8, gemm_f32.NV8)
        assert gemm_f32.routes(256, 2048, 4096, b"N", b"N", 0.0)
    with target.use("x86-64-v2"):
        assert not gemm_f32.available()
        assert not gemm_f32.routes(256, 2048, 4096, b"N", b"N", 0.0)


@pytest.mark.parametrize("name", ["x86-64-v2"])
def test_other_targets_keep_openblas(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail() -> object:
        raise AssertionError("routed off AVX-512 / AVX2")

    monkeypatch.setattr(gemm_f32, "fortran", fail)
    rng = np.random.default_rng(6)
    a = rng.standard_normal((256, 300)).astype(np.float32)
    b = rng.standard_normal((300, 1024)).astype(np.float32)
    out = np.empty((256, 1024), np.float32)
    with target.use(name):
        blas.gemm(a, b, out, 0.0, 2)
    assert_dot_close(out, a, b, k=300)


@pytest.mark.parametrize(("m", "n", "k"), [(9, 47, 257), (16, 96, 600), (13, 530, 40)])
def test_each_element_is_one_fma_chain_in_k_order(m: int, n: int, k: int) -> None:
    """Integers whose products are exact but whose running sums pass 2^24, so f32 rounds
    them: the bits are those of c = fma(a[i, k], b[k, j], c) in k order from 0 (emulated in
    float64, where every sum is exact and then rounded once), across KC blocks (the sum
    continued from C), row and column tails and every kernel width."""
    rng = np.random.default_rng(m + n + k)
    a = rng.integers(-4095, 4096, (m, k)).astype(np.float32)
    b = rng.integers(-4095, 4096, (k, n)).astype(np.float32)
    want = np.zeros((m, n), np.float32)
    for j in range(k):
        want = (want.astype(np.float64)
                + np.outer(a[:, j], b[j]).astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(_run(a, b), want)


def test_the_driver_calls_every_hot_function() -> None:
    """The hot modules (gemm_f32_text.py) define each function of the driver's table once,
    and the compiled table holds their addresses."""
    import ctypes

    from xlapy.backends.cpu import gemm_f32_text

    tl = gemm_f32.tile(target.current())
    mods = gemm_f32_text.modules(gemm_f32.NAME, tl.mr, tl.nv, gemm_f32.UNROLL, tl.w)
    names = [name for _, names in mods for name in names]
    assert sorted(names) == sorted(tl.hot) and len(mods) == 2
    engines, _ = gemm_f32._compile(target.current())
    driver = engines[-1]
    table = driver.address(gemm_f32.TABLE)
    got = [ctypes.c_uint64.from_address(table + 8 * j).value for j in range(len(names))]
    assert all(got) and len(set(got)) == len(got)


def test_a_compile_starts_the_modules_while_it_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compile routing a product here starts gemm_f32's compiles (`_jobs`) while it plans,
    not as it returns: their LLVM work runs beside the rest of the compile."""
    import threading

    import xlapy

    started: list[object] = []
    real = gemm_f32._jobs

    def spy(tgt: target.CpuTarget) -> object:
        # only the compiling thread's calls: the build-ahead thread's _compile asks too,
        # as the compile returns, which alone would let this test pass
        if threading.current_thread() is threading.main_thread():
            started.append(tgt)
        return real(tgt)

    monkeypatch.setattr(gemm_f32, "_jobs", spy)
    # (an rhs over gemm_small.WIDE_RHS_BYTES: read in place under it)
    text = """
func.func @main(%x: tensor<256x1024xf32>, %w: tensor<1024x2048xf32>) -> tensor<256x2048xf32> {
  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
      : (tensor<256x1024xf32>, tensor<1024x2048xf32>) -> tensor<256x2048xf32>
  return %y : tensor<256x2048xf32>
}
"""
    prog = xlapy.compile(text, backend="cpu")
    assert started and set(started) == {target.current()}  # (planning may ask again)
    rng = np.random.default_rng(9)
    x = rng.standard_normal((256, 1024)).astype(np.float32)
    w = rng.standard_normal((1024, 2048)).astype(np.float32)
    assert_dot_close(np.asarray(prog(x, w)), x, w, k=1024)


@pytest.mark.parametrize(("lhs", "rhs", "dims"), [
    ("256x1024", "2048x1024", "[1] x [1]"),   # x @ W^T (a gradient's g @ W^T)
    ("1024x256", "1024x2048", "[0] x [0]"),   # x^T @ g (a weight gradient)
])
def test_programs_with_transposed_operands_route_here(lhs: str, rhs: str, dims: str,
                                                      fortran_calls: list[int]) -> None:
    """dot_general contracting an operand's other dimension reaches the kernel with that
    operand as stored (no copy, "T"), within the dot bound of the float64 product."""
    import xlapy

    seen = fortran_calls
    (m0, m1), (n0, n1) = (map(int, s.split("x")) for s in (lhs, rhs))
    out = f"{m1 if dims[1] == '0' else m0}x{n1 if dims[-2] == '0' else n0}"
    text = (f"func.func @main(%a: tensor<{lhs}xf32>, %b: tensor<{rhs}xf32>) -> "
            f"tensor<{out}xf32> {{\n"
            f"  %0 = stablehlo.dot_general %a, %b, contracting_dims = {dims} : "
            f"(tensor<{lhs}xf32>, tensor<{rhs}xf32>) -> tensor<{out}xf32>\n"
            f"  return %0 : tensor<{out}xf32>\n}}\n")
    rng = np.random.default_rng(9)
    a = rng.standard_normal((m0, m1)).astype(np.float32)
    b = rng.standard_normal((n0, n1)).astype(np.float32)
    got = np.asarray(xlapy.compile(text, backend="cpu")(a, b))
    x = a if dims[1] == "1" else a.T
    y = b.T if dims[-2] == "1" else b
    assert_dot_close(got, x, y, k=x.shape[1])
    assert seen
