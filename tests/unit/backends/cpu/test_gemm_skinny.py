"""Skinny GEMMs of gemm_skinny.py (2..80 rows against a W too big for gemm_small, in row
groups past one register block, column chunks over the threads): within the float64 dot
bound for odd shapes (column tails of every width), f32 and f64; the same bits as
gemm_small's register blocks (one multiply-add chain in k order) and on 1, 2 and 3 threads;
IEEE denormals; routing by library.py."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import xlapy
from tests.tolerance import assert_dot_close
from xlapy.backends.cpu import gemm_skinny, gemm_small, target

pytestmark = pytest.mark.skipif(not (target.current().is_x86 and target.current().runs_here),
                                reason="gemm_skinny.py runs on x86-64 only")


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Chunks of a few KB, so the test shapes split into many (the bits must not change)."""
    monkeypatch.setattr(gemm_skinny, "CHUNK_BYTES", 1 << 12)
    gemm_skinny.cuts.cache_clear()
    yield
    gemm_skinny.cuts.cache_clear()


def _most(f64: bool = False) -> int:
    """The most rows the target routes here (gemm_skinny.takes): 80 with AVX-512's 32
    registers (f64: 32), 40 with AVX2's 16 (groups of 6; f64: 24), none on SSE targets."""
    bits = target.current().vector_bits
    if bits == 512:
        return gemm_skinny.MAX_GROUPED_F64 if f64 else gemm_skinny.MAX_GROUPED
    if bits == 256:
        return gemm_skinny.MAX_GROUPED_AVX2_F64 if f64 else gemm_skinny.MAX_GROUPED_AVX2
    return 0


def _dot(m: int, k: int, n: int, ty: str = "f32") -> str:
    return f"""
func.func @main(%x: tensor<{m}x{k}x{ty}>, %w: tensor<{k}x{n}x{ty}>) -> tensor<{m}x{n}x{ty}> {{
  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
      : (tensor<{m}x{k}x{ty}>, tensor<{k}x{n}x{ty}>) -> tensor<{m}x{n}x{ty}>
  return %y : tensor<{m}x{n}x{ty}>
}}
"""


def _operands(m: int, k: int, n: int, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(m * 7 + k + n)
    return (rng.standard_normal((m, k)).astype(dtype),
            rng.standard_normal((k, n)).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("m", "k", "n"), [(2, 300, 517), (3, 129, 1031), (5, 257, 640),
                                           (8, 200, 763), (7, 1, 140000), (7, 300, 517),
                                           (9, 300, 517),
                                           (16, 129, 1031), (23, 129, 1031),
                                           (31, 300, 517), (80, 129, 1031)])
def test_compiled_dot_within_the_dot_bound(dtype: type, m: int, k: int, n: int) -> None:
    x, w = _operands(m, k, n, dtype)
    ty = "f32" if dtype == np.float32 else "f64"
    prog = xlapy.compile(_dot(m, k, n, ty), backend="cpu", options={"num_threads": 2})
    small = gemm_small.shape(m, n, k, dtype == np.float64)
    label = "jit gemm\n" if small and not gemm_small.skinny_first(small) else \
        "jit gemm (skinny)" if m <= _most(dtype == np.float64) else "library blas"
    assert label in prog._exe.explain()
    assert list(prog._exe.fallbacks()) == []
    got = np.asarray(prog(x, w))
    assert got.dtype == dtype
    assert_dot_close(got, x, w)


@pytest.mark.parametrize("blocked", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [2, 4, 7, 8, 11, 16, 17, 31, 64])
def test_same_bits_as_gemm_small_on_any_thread_count(dtype: type, m: int, blocked: bool,
                                                     small_chunks: None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`blocked`: W read k_block rows at a time (here 7, not a divisor of k), each column
    block's sums continued through the output: still one chain in k order."""
    if blocked:
        monkeypatch.setattr(gemm_skinny, "BLOCKED_BYTES", 0)
        monkeypatch.setattr(gemm_skinny, "BLOCKED_ROW_BYTES", 0)
        monkeypatch.setattr(gemm_skinny, "k_block", lambda width, size: 7)
    k, n = 150, 1000 + 13
    x, w = _operands(m, k, n, dtype)
    f64 = dtype == np.float64
    want = np.empty((m, n), dtype)
    gemm_small.compiled(gemm_small.GemmShape(m, n, k, f64)).direct(
        x.ctypes.data, w.ctypes.data, want.ctypes.data, n, k, 0, m)
    assert len(gemm_skinny.cuts(n, k, x.itemsize, 1)) > 3
    for threads in (1, 2, 3):
        out = np.full((m, n), np.nan, dtype)
        gemm_skinny.runner(m, n, k, f64, threads)(x, w, out)
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("m", [4, 13])
def test_strided_operands_and_output(m: int) -> None:
    k, n = 200, 700
    x, w = _operands(m, 2 * k, 2 * n, np.float32)
    xs, ws = x[:, ::2], w[::2, ::2]
    out = np.full((m, 2 * n), 7.0, np.float32)
    gemm_skinny.runner(m, n, k, False, 2)(xs, ws, out[:, ::2])
    assert_dot_close(out[:, ::2], xs, ws)
    assert (out[:, 1::2] == 7.0).all()


def test_denormal_products_survive() -> None:
    """IEEE like the interpreter: 1e-30 * 1e-10 is a denormal f32, not zero."""
    m, k, n = 2, 300, 600
    x = np.zeros((m, k), np.float32)
    w = np.zeros((k, n), np.float32)
    x[:, 3], w[3, :] = 1e-30, 1e-10
    out = np.empty((m, n), np.float32)
    gemm_skinny.runner(m, n, k, False, 2)(x, w, out)
    assert (out == np.float32(1e-30) * np.float32(1e-10)).all() and (out != 0).all()


def test_takes_only_skinny_row_major_products_too_big_for_gemm_small() -> None:
    assert gemm_skinny.takes(8, 4096, 4096, False, False) == (8 <= _most())
    assert not gemm_skinny.takes(1, 4096, 4096, False, False)  # gemv.py's
    assert gemm_skinny.takes(12, 4096, 4096, False, False) == (12 <= _most())  # two passes
    assert gemm_skinny.takes(13, 4096, 4096, False, False) == (13 <= _most())  # AVX2: BLAS
    assert gemm_skinny.takes(16, 4096, 4096, False, False) == (16 <= _most())
    assert gemm_skinny.takes(17, 4096, 4096, False, False) == (17 <= _most())  # groups
    assert gemm_skinny.takes(80, 4096, 4096, False, False) == (80 <= _most())
    assert not gemm_skinny.takes(81, 4096, 4096, False, False)  # BLAS
    assert gemm_skinny.takes(32, 4096, 4096, True, False) == (32 <= _most(True))
    assert not gemm_skinny.takes(33, 4096, 4096, True, False)  # f64 past 32 rows: BLAS
    assert not gemm_skinny.takes(8, 4096, 4096, False, True)  # transposed W: BLAS
    assert not gemm_skinny.takes(8, 64, 64, False, False)  # gemm_small's
    # a narrow W past NARROW_ROWS rows: compute-bound, BLAS's (48x8192x256 2.05 -> 1.02 ms)
    assert not gemm_skinny.takes(48, 256, 8192, False, False)
    assert not gemm_skinny.takes(9, 512, 16384, False, False)
    assert gemm_skinny.takes(8, 256, 16384, False, False) == (8 <= _most())
    assert gemm_skinny.takes(32, 1024, 8192, False, False) == (32 <= _most())
    prog = xlapy.compile(_dot(96, 1100, 1000), backend="cpu")  # (over WIDE_RHS_BYTES)
    assert "library blas" in prog._exe.explain()


def test_blocked_only_for_a_big_w_of_long_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The k blocks (and their wider chunks) for a W over BLOCKED_BYTES (AVX2: any) whose rows
    are a page or more; the kernel is called with k as its block otherwise."""
    calls: list[int] = []
    avx2 = target.current().vector_bits == 256

    class Code:
        address = 0

        @staticmethod
        def fn(*args: int) -> None:
            calls.append(args[-1])

    monkeypatch.setattr(gemm_skinny, "_compile", lambda *a: Code)
    for (k, n), kb in {(4096, 1024): 32, (1024, 4096): 32, (4096, 1000): 4096,
                       (256, 2048): 32 if avx2 else 256}.items():
        x, w = np.zeros((2, k), np.float32), np.zeros((k, n), np.float32)
        gemm_skinny.runner(2, n, k, False, 1)(x, w, np.zeros((2, n), np.float32))
        assert calls[-1] == kb, (k, n)
    # blocked chunks read PIECE_BYTES of each row at least: 4096 f32 columns in 8 chunks,
    # 1024 in 2
    assert len(gemm_skinny.cuts(4096, 4096, 4, 48, True)) - 1 == 4096 * 4 // 2048
    assert len(gemm_skinny.cuts(1024, 4096, 4, 64, True)) - 1 == 2


def test_a_w_of_half_a_megabyte_or_more_splits() -> None:
    """A W of 0.5-1 MB is cut in chunks of CHUNK_BYTES (512 KB), so both threads read it (as
    one 1 MB chunk it ran on one: 12x256x1024 1.2-1.3x XLA's time on Zen 4)."""
    assert len(gemm_skinny.cuts(1024, 256, 4, 32)) - 1 == 2
    assert len(gemm_skinny.cuts(2048, 128, 4, 32)) - 1 == 2
    assert len(gemm_skinny.cuts(1024, 128, 4, 32)) - 1 == 1


@pytest.mark.parametrize(("bits", "m", "parts"), [
    (512, 8, ((8, 1),)), (512, 9, ((9, 1),)), (512, 12, ((12, 1),)),
    (512, 13, ((7, 1), (6, 1))), (512, 16, ((8, 2),)), (512, 17, ((6, 2), (5, 1))),
    (512, 31, ((8, 3), (7, 1))), (512, 64, ((8, 8),)), (512, 80, ((8, 10),)),
    (256, 7, ((7, 1),)), (256, 8, ((8, 1),)), (256, 9, ((3, 3),)),
    (256, 10, ((4, 2), (2, 1))), (256, 12, ((4, 3),)), (256, 24, ((4, 6),))])
def test_rows_sweep_w_once_in_groups(bits: int, m: int, parts: tuple[tuple[int, int], ...],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """One register block up to MAX_ROWS rows and on while it holds two vectors of columns
    (AVX-512: 12 rows, 24 accumulators); past that row groups of at most MAX_ROWS (AVX-512)
    or GROUP_ROWS_AVX2 (AVX2) rows, sizes as even as can be, all in one module (one sweep
    over W: every group runs over a k block in turn)."""
    built: list[tuple[tuple[int, int], ...]] = []
    calls: list[tuple[int, ...]] = []

    class Code:
        address = 0

        @staticmethod
        def fn(*args: int) -> None:
            calls.append(args)

    def compile_(p: tuple[tuple[int, int], ...], *_: object) -> type[Code]:
        built.append(p)
        return Code

    monkeypatch.setattr(gemm_skinny, "_compile", compile_)
    monkeypatch.setattr(gemm_skinny, "ahead", lambda *a: None)
    assert gemm_skinny.groups(m, bits) == parts
    assert sum(r * c for r, c in parts) == m
    assert gemm_skinny.one_pass(m, bits) == (parts == ((m, 1),))
    name = {512: "x86-64-v4", 256: "x86-64-v3"}[bits]
    with target.use(name):
        x, w = np.zeros((m, 4096), np.float32), np.zeros((4096, 1024), np.float32)
        gemm_skinny.runner(m, 1024, 4096, False, 1)(x, w, np.zeros((m, 1024), np.float32))
    assert built == [parts] and len(calls) == 1


def test_few_rows_a_pass_go_to_row_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """A standalone product gemm_small would run reading a wide rhs in place goes to
    gemm_skinny's groups (the same bits) when a pass over the rhs computes fewer than
    MIN_ROWS_PER_PASS rows (the busiest thread's share in blocks of 8, then one block per set
    bit of the rest: 13 rows on 2 threads, 7 = 4 + 2 + 1); region members keep gemm_small."""
    assert gemm_small.rows_per_pass(13, 2) == pytest.approx(7 / 3)
    assert gemm_small.rows_per_pass(16, 2) == 8 and gemm_small.rows_per_pass(24, 2) == 6
    assert gemm_small.rows_per_pass(31, 1) == 31 / 6  # 8 + 8 + 8 + 4 + 2 + 1
    monkeypatch.setattr(gemm_small.parallel, "usable_cpus", lambda: 2)
    monkeypatch.setattr(gemm_small.parallel, "l2_bytes", lambda: 1 << 20)
    with target.use("x86-64-v4"):
        shapes = {m: gemm_small.shape(m, 1024, 1024, False) for m in range(13, 40)}
        assert all(s is not None for s in shapes.values())  # (regions: gemm_small's)
        kept = [m for m, s in shapes.items() if s is not None and not gemm_small.skinny_first(s)]
        assert kept == [16, 24, *range(32, 40)]
        assert not gemm_small.skinny_first(gemm_small.GemmShape(13, 64, 64, False))  # in L2


@pytest.mark.skipif(target.current().vector_bits != 512 or
                    gemm_small.shape(13, 1024, 1024, False) is None,
                    reason="gemm_small reads a wide rhs in place only on AVX-512, L2 < 2 MB")
def test_a_13_row_dot_compiles_to_row_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """13 rows against a 4 MB rhs on 2 CPUs (2.3 rows a pass in gemm_small): gemm_skinny."""
    monkeypatch.setattr(gemm_small.parallel, "usable_cpus", lambda: 2)
    prog = xlapy.compile(_dot(13, 1024, 1024), backend="cpu")
    assert "jit gemm (skinny)" in prog._exe.explain()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("m", "k", "cols"), [(32, 300, 1031), (13, 64, 1040), (40, 129, 1045)])
def test_avx2_groups_read_the_k_blocks_panels_with_the_same_bits(
        dtype: type, m: int, k: int, cols: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """On AVX2 the first row group of a k block copies it into panels the others read
    (`PACK`): the module's packed variant, the bits of the unpacked walk (and of gemm_small)
    on 1, 2 and 3 threads, every column tail; one group alone reads W in place."""
    v3 = target.resolve("x86-64-v3")
    if not v3.runs_here:
        pytest.skip("x86-64-v3 code does not run here")
    built: list[bool] = []
    real = gemm_skinny._compile
    monkeypatch.setattr(gemm_skinny, "_compile",
                        lambda *a: (built.append(a[-1]), real(*a))[1])
    f64 = dtype == np.float64
    n = cols // 2 if f64 else cols  # rows of 4 KB or more (blocked), k blocks that fit
    x, w = _operands(m, k, n, dtype)
    want = np.empty((m, n), dtype)
    with target.use(v3):
        gemm_small.compiled(gemm_small.GemmShape(m, n, k, f64)).direct(
            x.ctypes.data, w.ctypes.data, want.ctypes.data, n, k, 0, m)
        for pack in (True, False):
            monkeypatch.setattr(gemm_skinny, "PACK", pack)
            for threads in (1, 2, 3):
                out = np.full((m, n), np.nan, dtype)
                gemm_skinny.runner(m, n, k, f64, threads)(x, w, out)
                np.testing.assert_array_equal(out, want)
        assert True in built and built[-1] is False
        built.clear()
        monkeypatch.setattr(gemm_skinny, "PACK", True)
        gemm_skinny.runner(6, n, k, f64, 2)(x[:6], w, np.empty((6, n), dtype))
        assert built == [False]  # one group: no panels


@pytest.mark.parametrize(("name", "m", "packed"), [("x86-64-v4", 32, False),
                                                   ("x86-64-v3", 32, True),
                                                   ("x86-64-v3", 10, True)])
def test_the_second_group_prefetches_the_next_k_block_into_l2(name: str, m: int,
                                                               packed: bool) -> None:
    """The group after a k block's first (which reads W from memory) prefetches the next k
    block's lines into L2 (llvm.prefetch locality 2) for the next first group; one module
    of one group has none (its own read-ahead is along the row, into L1)."""
    def l2_prefetches(parts: tuple[tuple[int, int], ...], packed: bool) -> int:
        text = str(gemm_skinny._emit("f", False, parts, packed))
        return text.count("i32 0, i32 2, i32 1)")

    with target.use(name):
        parts = gemm_skinny.groups(m, target.current().vector_bits)
        assert len(parts) > 1 or parts[0][1] > 1
        assert l2_prefetches(parts, packed) > 0
        assert l2_prefetches(((8, 1),), False) == 0
