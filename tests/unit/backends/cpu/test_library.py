"""Library thunks: shift-GEMM convolution and BLAS dot_general against the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.tolerance import assert_close_to_bound, assert_dot_close, dot_bound
from xlapy.backends.cpu.blas import gemm

CONV = """
func.func @main(%x: tensor<{xs}xf32>, %w: tensor<{ws}xf32>) -> tensor<{os}xf32> {{
  %y = stablehlo.convolution(%x, %w) dim_numbers = {dn},
      window = {{stride = [1, 1], pad = {pad}, rhs_dilate = {dil}}}
      {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}}
      : (tensor<{xs}xf32>, tensor<{ws}xf32>) -> tensor<{os}xf32>
  return %y : tensor<{os}xf32>
}}
"""


def _shape(s: list[int]) -> str:
    return "x".join(map(str, s))


@pytest.mark.parametrize(("layout", "pad", "dil"), [
    ("nchw", [[1, 1], [1, 1]], [1, 1]),
    ("nhwc", [[0, 2], [1, 0]], [1, 1]),
    ("nchw", [[2, 2], [0, 1]], [2, 1]),
])
def test_conv_matches_interpreter(layout: str, pad: list[list[int]], dil: list[int]) -> None:
    n, c, h, w, o, kh, kw = 2, 3, 7, 6, 4, 3, 2
    oh = h + sum(pad[0]) - (kh - 1) * dil[0]
    ow = w + sum(pad[1]) - (kw - 1) * dil[1]
    if layout == "nchw":
        xs, ws, os_ = [n, c, h, w], [o, c, kh, kw], [n, o, oh, ow]
        dn = "[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]"
    else:
        xs, ws, os_ = [n, h, w, c], [kh, kw, c, o], [n, oh, ow, o]
        dn = "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]"
    text = CONV.format(xs=_shape(xs), ws=_shape(ws), os=_shape(os_), dn=dn, pad=pad, dil=dil)
    cpu = xlapy.compile(text, backend="cpu")
    assert "convolution" in cpu._exe.explain() and "library conv-" in cpu._exe.explain()
    rng = np.random.default_rng(1)
    x = rng.standard_normal(xs).astype(np.float32)
    k = rng.standard_normal(ws).astype(np.float32)
    want = xlapy.compile(text, backend="interpreter")(x, k)
    # A sum of c kh kw products per element: bounded by that many roundings of the sum of
    # |products| (the same convolution of |x| and |k| in float64), in any order.
    abs_conv = xlapy.compile(text.replace("xf32>", "xf64>"), backend="interpreter")
    assert_dot_close(cpu(x, k), x, k, np.float32, ref=want, k=c * kh * kw, product=abs_conv)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("m", "k", "n"), [(3, 5, 4), (300, 64, 200), (40, 3, 700)])
def test_gemm_layouts(dtype: type, m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(2)
    for ta in (False, True):
        for tb in (False, True):
            a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
            b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
            a, b = (a.T if ta else a), (b.T if tb else b)
            out = np.full((m, n + 3), 7.0, dtype)
            gemm(a, b, out[:, 1:1 + n])
            want = a.astype(np.float64) @ b.astype(np.float64)
            bound = dot_bound(a, b, dtype)
            assert_close_to_bound(out[:, 1:1 + n], want, bound, f"{ta} {tb}")
            assert (out[:, 0] == 7).all() and (out[:, -2:] == 7).all()
            gemm(a, b, out[:, 1:1 + n], beta=1.0)  # two GEMMs' errors and one more rounding
            assert_close_to_bound(out[:, 1:1 + n], 2 * want, 2 * bound, f"{ta} {tb} beta")


DOT = """
func.func @main(%x: tensor<2x5x3xf32>, %y: tensor<2x4x5xf32>) -> tensor<2x3x4xf32> {
  %z = stablehlo.dot_general %x, %y, batching_dims = [0] x [0], contracting_dims = [1] x [2]
      : (tensor<2x5x3xf32>, tensor<2x4x5xf32>) -> tensor<2x3x4xf32>
  return %z : tensor<2x3x4xf32>
}
"""


def test_batched_transposed_dot() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    y = rng.standard_normal((2, 4, 5)).astype(np.float32)
    got = xlapy.compile(DOT, backend="cpu")(x, y)
    assert_dot_close(got, x, y, k=5, product=lambda a, b: np.einsum("bkm,bnk->bmn", a, b))


def test_blas_is_own_openblas_and_scipy_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """gemm calls xlapy's own OpenBLAS (scipy-openblas32, a dependency) when installed;
    without it, scipy's BLAS computes the same."""
    from xlapy.backends.cpu import blas

    assert blas.library().startswith("OpenBLAS 0.3.")
    version = tuple(int(p) for p in blas.library().split()[1].split(".")[:3])
    assert version >= (0, 3, 31)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((70, 33)).astype(np.float32)
    b = rng.standard_normal((33, 50)).astype(np.float32)
    own = np.empty((70, 50), np.float32)
    gemm(a, b, own)
    monkeypatch.setattr(blas, "_own_library", lambda: None)
    blas._fn.cache_clear()
    blas._set_local_threads.cache_clear()
    try:
        assert blas.library() == "scipy.linalg.cython_blas"
        fallback = np.empty((70, 50), np.float32)
        gemm(a, b, fallback)
    finally:
        blas._fn.cache_clear()
        blas._set_local_threads.cache_clear()
    assert_dot_close(own, a, b)
    assert_close_to_bound(fallback, own, dot_bound(a, b, np.float32), "fallback")


@pytest.mark.parametrize(("ty", "lhs", "rhs", "dims"), [
    ("f32", "256x10", "256x128", "batching_dims = [0] x [0], contracting_dims = [] x []"),
    ("f32", "128x1", "1x256", "contracting_dims = [1] x [0]"),  # K = 1, unbatched
    ("f32", "128x64", "256", "contracting_dims = [] x []"),  # [128, 64, 256], unbatched
    ("f64", "16x1x32", "16x1x8", "batching_dims = [0] x [0], contracting_dims = [1] x [1]"),
    ("i32", "64x10", "64x100", "batching_dims = [0] x [0], contracting_dims = [] x []"),
])
def test_outer_products_match_the_interpreter_bit_for_bit(ty: str, lhs: str, rhs: str,
                                                           dims: str) -> None:
    """Products with one term per element (no contraction, or K = 1): one multiply for the
    whole batch, 0 + it (-0 products +0, as the sum's init makes them), IEEE denormals
    kept, NaN and inf as products; no BLAS call per batch element."""
    import jax

    jnp_ty = {"f32": np.float32, "f64": np.float64, "i32": np.int32}[ty]
    ls, rs = [int(d) for d in lhs.split("x")], [int(d) for d in rhs.split("x")]
    lo = jax.jit(lambda a, b: jax.lax.dot_general(
        a, b, _dnums(dims, len(ls), len(rs)))).lower(
        jax.ShapeDtypeStruct(ls, jnp_ty), jax.ShapeDtypeStruct(rs, jnp_ty))
    text = lo.as_text()
    rng = np.random.default_rng(3)
    if ty == "i32":
        a = rng.integers(-70000, 70000, ls).astype(np.int32)
        b = rng.integers(-70000, 70000, rs).astype(np.int32)
    else:
        a = rng.standard_normal(ls).astype(jnp_ty)
        b = rng.standard_normal(rs).astype(jnp_ty)
        a.flat[:6] = [-0.0, 0.0, np.nan, np.inf, 1e-39 if ty == "f32" else 1e-310, -2.0]
        b.flat[:3] = [-0.0, 1e-30 if ty == "f32" else 1e-300, 3.0]
    cpu = xlapy.compile(text, backend="cpu")
    got = np.asarray(cpu(a, b))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(a, b))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    assert "interpreter" not in cpu._exe.explain().split("--")[0]


def _dnums(text: str, lr: int, rr: int) -> tuple:
    """((lhs contracting, rhs contracting), (lhs batch, rhs batch)) from the MLIR spelling."""
    import re

    def pair(name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        m = re.search(name + r" = \[([0-9, ]*)\] x \[([0-9, ]*)\]", text)
        if m is None:
            return (), ()
        return tuple(int(v) for v in m.group(1).split(",") if v.strip()), \
            tuple(int(v) for v in m.group(2).split(",") if v.strip())

    return pair("contracting_dims"), pair("batching_dims")
