"""gemm_bf16.py: bf16 x bf16 dots on AMX-BF16 tiles - f32 sums (within f32 accumulation error
of the exact sum), a bf16 result rounded once (the f32 result's rounding, bit for bit), the
same bits on any thread count, both B layouts and padded shapes; routing: programs keep their
bf16 operands (no convert kernels) where the target has AMX-BF16 and denormals flush, and
widen to f32 BLAS elsewhere (x86-64-v3, the `ieee` mode, tiny dots); results vs the
interpreter and vs jax.jit."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import gemm_bf16, target

BF = ml_dtypes.bfloat16
amx = pytest.mark.skipif(not gemm_bf16.available(), reason="no AMX-BF16 or AVX512-BF16 here")
#: How explain() names a dot on these kernels (then "(amx)" or "(avx512-bf16)").
BF16_GEMM = "library bf16 gemm"


def _operands(nb: int, m: int, k: int, n: int, transposed: bool, seed: int = 0
              ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((nb, m, k)).astype(BF)
    if transposed:  # B as a view of its transpose: k the unit-stride dimension
        return a, rng.standard_normal((nb, n, k)).astype(BF).transpose(0, 2, 1)
    return a, rng.standard_normal((nb, k, n)).astype(BF)


def _bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Error bound of an f32 sum of k exact products in any order: k u sum |a_i b_i|."""
    k = a.shape[2]
    mag = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    return k * 2.0 ** -24 * mag + 1e-30


@amx
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("shape", [(1, 32, 32, 32), (2, 64, 64, 96), (3, 7, 33, 9),
                                   (2, 50, 70, 45), (1, 5, 3, 1), (4, 256, 64, 256),
                                   (1, 96, 256, 64), (2, 33, 1, 40)])
def test_f32_sums_within_f32_error_and_bf16_rounded_once(shape: tuple[int, ...],
                                                         transposed: bool) -> None:
    a, b = _operands(*shape, transposed)
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64))
    outs = {}
    for threads in (1, 2):
        c = np.full(exact.shape, np.nan, np.float32)
        gemm_bf16.gemm(threads)(a, b, c)
        assert np.all(np.abs(c - exact) <= _bound(a, b)), shape
        h = np.zeros(exact.shape, BF)
        gemm_bf16.gemm(threads)(a, b, h)
        np.testing.assert_array_equal(h.view(np.uint16), c.astype(BF).view(np.uint16))
        outs[threads] = c
    np.testing.assert_array_equal(outs[1].view(np.uint32), outs[2].view(np.uint32))


@amx
def test_specials_propagate_like_the_f32_sum() -> None:
    a, b = _operands(2, 64, 64, 64, False, seed=5)
    a[0, 3, 7], a[1, 10, 0], b[0, 5, 9], b[1, 63, 2] = np.inf, np.nan, -np.inf, np.inf
    c = np.empty((2, 64, 64), np.float32)
    gemm_bf16.gemm(1)(a, b, c)
    with np.errstate(invalid="ignore"):
        want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(c), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(c), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_array_equal(np.sign(c[np.isinf(c)]), np.sign(want[np.isinf(want)]))
    assert np.all(np.abs(c[fin] - want[fin]) <= _bound(a, b)[fin] + 1e-6 * np.abs(want[fin]))


def _offset(x: np.ndarray, off: int) -> np.ndarray:
    """A copy of x whose data starts `off` bytes past a 64-byte boundary."""
    raw = np.empty(x.nbytes + 128, np.uint8)
    s = (-raw.ctypes.data) % 64 + off
    out = raw[s:s + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


@amx
@pytest.mark.parametrize("shape", [(1, 300, 96, 200), (1, 64, 96, 224), (2, 40, 70, 96),
                                   (1, 520, 32, 64)])
def test_unaligned_a_and_row_chunks_keep_the_bits(shape: tuple[int, ...]) -> None:
    """An A whose rows are off a 64-byte line is staged (tile loads from it ran at a third
    of the speed): the bits equal an aligned A's; rows past one chunk (M_CHUNK_BLOCKS) and
    one chunk (each column pair packed before use) both sum within the f32 bound, on 1 and
    2 threads; a staged buffer reused by a smaller padded product zero-fills its pads."""
    nb, m, k, n = shape
    a, b = _operands(nb, m, k, n, False, seed=3)
    aligned, unaligned = _offset(a, 0), _offset(a, 16)
    mp, kp = -(-m // 32) * 32, -(-k // 32) * 32
    assert gemm_bf16.tile_ready(aligned, mp, kp) == ((mp, kp) == (m, k))
    assert not gemm_bf16.tile_ready(unaligned, mp, kp)
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64))
    outs = []
    for threads in (1, 2):
        run = gemm_bf16.gemm(threads)
        for x in (aligned, unaligned):
            c = np.full(exact.shape, np.nan, np.float32)
            run(x, b, c)
            outs.append(c)
        small = _operands(1, 7, 33, 40, False, seed=4)  # into the staged buffer, padded
        c = np.full((1, 7, 40), np.nan, np.float32)
        run(_offset(small[0], 16), small[1], c)
        assert np.all(np.abs(c - np.matmul(small[0].astype(np.float64),
                                           small[1].astype(np.float64)))
                      <= _bound(*small))
    assert np.all(np.abs(outs[0] - exact) <= _bound(a, b))
    for c in outs[1:]:
        np.testing.assert_array_equal(c.view(np.uint32), outs[0].view(np.uint32))


_ATTN = """func.func @main(%q: tensor<2x4x64x32xbf16>, %k: tensor<2x4x64x32xbf16>,
                     %v: tensor<2x4x64x32xbf16>) -> tensor<2x4x64x32xbf16> {
  %0 = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1],
      contracting_dims = [3] x [3] : (tensor<2x4x64x32xbf16>, tensor<2x4x64x32xbf16>)
      -> tensor<2x4x64x64xbf16>
  %1 = stablehlo.exponential %0 : tensor<2x4x64x64xbf16>
  %2 = stablehlo.dot_general %1, %v, batching_dims = [0, 1] x [0, 1],
      contracting_dims = [3] x [2] : (tensor<2x4x64x64xbf16>, tensor<2x4x64x32xbf16>)
      -> tensor<2x4x64x32xbf16>
  return %2 : tensor<2x4x64x32xbf16>
}"""


def _attn_args() -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [(rng.standard_normal((2, 4, 64, 32)) * 0.3).astype(BF) for _ in range(3)]


def _kinds(prog: object) -> list[tuple[str, str]]:
    lines = prog._exe.explain().splitlines()  # type: ignore[attr-defined]
    return [(ln.split()[1], ln.split(None, 2)[2]) for ln in lines
            if ln.startswith("  ") and len(ln.split()) >= 3]


def _close_in_bf16(got: np.ndarray, want: np.ndarray) -> None:
    """Equal up to the bf16 rounding of sums taken in another order: within a bf16 ulp of
    the value (or of the largest one, where sums cancel), and nearly all bit for bit."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_allclose(g, w, rtol=2.0 ** -7, atol=2.0 ** -8 * np.abs(w).max())
    assert np.mean(got.view(np.uint16) != want.view(np.uint16)) < 0.02


@amx
def test_program_keeps_bf16_operands_on_amx() -> None:
    prog = xlapy.compile(_ATTN, backend="cpu")
    kinds = _kinds(prog)
    assert [k[:17] for op, k in kinds if op == "dot_general"] == [BF16_GEMM] * 2, kinds
    assert not any(op == "convert" for op, _ in kinds), kinds  # no widening copies
    args = _attn_args()
    want = xlapy.compile(_ATTN, backend="interpreter")(*args)
    got = prog(*args)
    assert got.dtype == want.dtype
    _close_in_bf16(got, want)


@pytest.mark.parametrize("options", [{"target": "x86-64-v3"}, {"denormal": "ieee"}])
def test_widened_blas_elsewhere_bit_for_bit(options: dict[str, str]) -> None:
    """No AMX-BF16 (an AVX2 target) or IEEE denormals: f32 BLAS between converts, the
    interpreter's bits."""
    prog = xlapy.compile(_ATTN, backend="cpu", options=options)
    kinds = _kinds(prog)
    assert [k for op, k in kinds if op == "dot_general"] == ["library blas"] * 2, kinds
    if not target.resolve(options.get("target")).runs_here:  # pragma: no cover
        return
    args = _attn_args()
    want = xlapy.compile(_ATTN, backend="interpreter", options=options)(*args)
    np.testing.assert_array_equal(prog(*args).view(np.uint16), want.view(np.uint16))


def test_tiny_dots_stay_on_blas() -> None:
    text = _ATTN.replace("64x32", "8x4").replace("64x64", "8x8")
    kinds = _kinds(xlapy.compile(text, backend="cpu"))
    assert all(k == "library blas" for op, k in kinds if op == "dot_general"), kinds


@amx
def test_a_batch_of_tiny_products_stays_widened() -> None:
    """MIN_MACS counts one product of a batch: 4096 products of 4 x 4 x 4 (each padded to
    32-blocks on the tiles: 2.1x XLA's time) widen to f32; 2 x 4 heads of 64 x 64 x 32
    take the tiles."""
    tiny = _ATTN.replace("2x4x64x32", "512x8x4x4").replace("2x4x64x64", "512x8x4x4")
    assert all(k == "library blas" for op, k in _kinds(xlapy.compile(tiny, backend="cpu"))
               if op == "dot_general")
    kinds = _kinds(xlapy.compile(_ATTN, backend="cpu"))
    assert all(k.startswith(BF16_GEMM) for op, k in kinds if op == "dot_general"), kinds


@amx
def test_matches_jax_bf16_dots() -> None:
    """jax.jit's bf16 dot sums in f32 and rounds once to bf16, as the tiles do."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def f(q: object, k: object, v: object) -> object:
        s = jnp.einsum("bhtd,bhsd->bhts", q, k)
        return jnp.einsum("bhts,bhsd->bhtd", jnp.tanh(s), v), s

    args = _attn_args()
    text = jax.jit(f).lower(*args).as_text()
    prog = xlapy.compile(text, backend="cpu")
    assert [k[:17] for op, k in _kinds(prog) if op == "dot_general"] == [BF16_GEMM] * 2
    got = prog(*args)
    want = jax.jit(f)(*args)
    for g, w in zip(got, want):
        _close_in_bf16(np.asarray(g), np.asarray(w))


_LAYOUT = """func.func @main(%a: tensor<{ash}xbf16>, %b: tensor<{bsh}xbf16>) -> tensor<{rsh}x{r}> {{
  %0 = stablehlo.dot_general %a, %b, batching_dims = [{lb}] x [{rb}],
      contracting_dims = [{lc}] x [{rc}] : (tensor<{ash}xbf16>, tensor<{bsh}xbf16>)
      -> tensor<{rsh}x{r}>
  return %0 : tensor<{rsh}x{r}>
}}"""


@amx
@pytest.mark.parametrize("r", ["bf16", "f32"])
@pytest.mark.parametrize("case", [
    # (lhs dims, rhs dims, lhs batch, rhs batch, lhs contracting, rhs contracting, result)
    ((3, 40, 64), (3, 64, 48), "0", "0", "2", "1", (3, 40, 48)),  # [k, n]
    ((3, 40, 64), (3, 48, 64), "0", "0", "2", "2", (3, 40, 48)),  # [n, k]: q k^T
    ((64, 3, 40), (3, 64, 48), "1", "0", "0", "1", (3, 40, 48)),  # lhs k outermost: copied
    ((3, 40, 64), (64, 48, 3), "0", "2", "2", "0", (3, 40, 48)),  # rhs batch innermost
    ((40, 8, 16), (16, 8, 96), "", "", "1, 2", "1, 0", (40, 96)),  # two contracting dims
])
def test_dimension_numbers_vs_the_interpreter(case: tuple[object, ...], r: str) -> None:
    ash, bsh, lb, rb, lc, rc, rsh = case
    dims = {"ash": "x".join(map(str, ash)), "bsh": "x".join(map(str, bsh)),
            "rsh": "x".join(map(str, rsh)), "lb": lb, "rb": rb, "lc": lc, "rc": rc, "r": r}
    text = _LAYOUT.format(**dims)
    if not lb:
        text = text.replace("batching_dims = [] x [],\n      ", "")
    prog = xlapy.compile(text, backend="cpu")
    assert [k[:17] for op, k in _kinds(prog) if op == "dot_general"] == [BF16_GEMM]
    rng = np.random.default_rng(2)
    a = rng.standard_normal(ash).astype(BF)
    b = rng.standard_normal(bsh).astype(BF)
    got = prog(a, b)
    want = xlapy.compile(text, backend="interpreter")(a, b)
    assert got.dtype == want.dtype
    if r == "f32":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        _close_in_bf16(got, want)


@amx
def test_reversed_views_read_in_place() -> None:
    """Negative strides (reversed batches, rows of A, rows of the transposed B): the tiles
    and the B gather read them where they lie, the bits of contiguous copies."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal((3, 64, 64)).astype(BF)[::-1, ::-1]
    bt = rng.standard_normal((3, 96, 64)).astype(BF)[:, ::-1]
    b = bt.transpose(0, 2, 1)
    assert b.strides[1] == 2 and b.strides[2] < 0
    got = np.empty((3, 64, 96), BF)
    gemm_bf16.gemm(2)(a, b, got)
    want = np.empty((3, 64, 96), BF)
    gemm_bf16.gemm(2)(np.ascontiguousarray(a), np.ascontiguousarray(bt).transpose(0, 2, 1),
                      want)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@amx
def test_scratch_reused_across_calls() -> None:
    """One closure's packed-B scratch serves every call (no fresh pages); each call packs
    its own B over it, also after a call of another shape."""
    run = gemm_bf16.gemm(2)
    for seed, shape in enumerate([(2, 64, 96, 128), (2, 64, 96, 128), (1, 32, 64, 32),
                                  (2, 64, 96, 128)]):
        a, b = _operands(*shape, False, seed=seed)
        got = np.empty((shape[0], shape[1], shape[3]), BF)
        run(a, b, got)
        want = np.empty_like(got)
        gemm_bf16.gemm(2)(a, b, want)
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@amx
def test_concurrent_calls_of_one_closure() -> None:
    """Threads calling one dot at once (an executable's concurrent calls) each get their
    own product: the scratch is taken by one call at a time."""
    import threading

    run = gemm_bf16.gemm(1)
    cases = [_operands(4, 64, 256, 256, False, seed=s) for s in range(4)]
    wants = []
    for a, b in cases:
        w = np.empty((4, 64, 256), BF)
        gemm_bf16.gemm(1)(a, b, w)
        wants.append(w)
    bad: list[int] = []

    def work(i: int) -> None:
        a, b = cases[i]
        for _ in range(20):
            got = np.empty((4, 64, 256), BF)
            run(a, b, got)
            if not np.array_equal(got.view(np.uint16), wants[i].view(np.uint16)):
                bad.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad
