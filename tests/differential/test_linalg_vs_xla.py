"""Linalg ops against XLA (through jax): dot_general, convolution, fft, cholesky, triangular_solve.

Tolerances, per op:
* dot_general / convolution on integer-valued float inputs: exact (every partial sum is
  representable, so summation order cannot matter); integers: exact (wrapping).
* dot_general and convolution on random normals: XLA's kernels add in their own order, so
  the results may differ by the bound of tests/tolerance.py: 2 K eps(f32 or f64) times each
  element's sum of |products| (the same op on |operands| in float64), plus one rounding to
  the result type for f16/bf16 (XLA and we both accumulate those in f32 and round once).
* fft: c64/f32 rtol 1e-5 with atol 1e-5 x max|result|; c128/f64 rtol 1e-12 (XLA uses DUCC).
* cholesky / triangular_solve: f32/c64 rtol 1e-4, f64/c128 rtol 1e-10 (LAPACK vs numpy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from scipy.linalg import lapack

from tests.differential.compare import assert_same, assert_within, jax_x64, magnitudes
from tests.tolerance import magnitude_bound

jax = jax_x64()
from jax import lax  # noqa: E402

import xlapy  # noqa: E402
from xlapy.builder import ops  # noqa: E402
from xlapy.builder.xla_builder import XlaBuilder  # noqa: E402
from xlapy.ops.linalg import FftType, Transpose  # noqa: E402
from xlapy.types import Shape, from_dtype  # noqa: E402

CLIENT = xlapy.Client()


def ours(fn: Callable[..., Any], *args: np.ndarray) -> np.ndarray:
    """Build `fn(*parameters)` with XlaBuilder and run it on the interpreter."""
    b = XlaBuilder("t")
    b.set_die_immediately_on_error(True)
    params = [ops.Parameter(b, i, Shape.array(from_dtype(a.dtype), a.shape))
              for i, a in enumerate(args)]
    fn(*params)
    return CLIENT.execute_and_transfer(b.build(), list(args)).to_numpy()


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any,
            integral: bool) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, int(info.max) + 1, shape, dtype=dt)
    if integral:
        x = rng.integers(-3, 4, shape).astype(np.float64)
    else:
        x = rng.standard_normal(shape)
    if dt.kind == "c":
        x = x + 1j * (rng.integers(-3, 4, shape) if integral else rng.standard_normal(shape))
    return x.astype(dt)


# ---- dot_general --------------------------------------------------------------------------------
DOT_TYPES = [np.int8, np.int32, ml_dtypes.bfloat16, np.float16, np.float32, np.float64,
             np.complex64]


def _dot_case(rng: np.random.Generator) -> tuple[Any, ...]:
    nb, nc = int(rng.integers(0, 3)), int(rng.integers(0, 3))
    nlf, nrf = int(rng.integers(0, 3)), int(rng.integers(0, 3))
    bsz = [int(x) for x in rng.integers(1, 4, nb)]
    csz = [int(x) for x in rng.integers(1, 6, nc)]
    lrank, rrank = nb + nc + nlf, nb + nc + nrf
    lperm, rperm = rng.permutation(lrank), rng.permutation(rrank)
    lshape, rshape = [0] * lrank, [0] * rrank
    lb, lc = [int(d) for d in lperm[:nb]], [int(d) for d in lperm[nb:nb + nc]]
    rb, rc = [int(d) for d in rperm[:nb]], [int(d) for d in rperm[nb:nb + nc]]
    for d, s in zip(lb + lc, bsz + csz):
        lshape[d] = s
    for d, s in zip(rb + rc, bsz + csz):
        rshape[d] = s
    for d in lperm[nb + nc:]:
        lshape[d] = int(rng.integers(1, 5))
    for d in rperm[nb + nc:]:
        rshape[d] = int(rng.integers(1, 5))
    return tuple(lshape), tuple(rshape), ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))


@pytest.mark.parametrize("dtype, integral", [
    (t, i) for t in DOT_TYPES for i in (True, False) if i or np.dtype(t).kind not in "iu"
], ids=lambda v: np.dtype(v).name if not isinstance(v, bool) else ("intvalued" if v else
                                                                  "normal"))
def test_dot_general(dtype: Any, integral: bool) -> None:
    rng = np.random.default_rng(1234)
    dt = np.dtype(dtype)
    for _ in range(12):
        lshape, rshape, dn = _dot_case(rng)
        x, y = _values(rng, lshape, dt, integral), _values(rng, rshape, dt, integral)
        def theirs(a: Any, b: Any, dn: Any = dn) -> Any:
            return lax.dot_general(a, b, dn)

        want = jax.jit(theirs)(x, y)
        got = ours(lambda a, b, dn=dn: ops.DotGeneral(a, b, dn), x, y)
        what = f"dot_general {lshape} {rshape} {dn}"
        if integral or dt.kind in "iu":
            assert_same(got, np.asarray(want), what=what)
        else:
            k = int(np.prod([lshape[d] for d in dn[0][0]]))
            [mag] = magnitudes(theirs, x, y)
            assert_within(got, want, magnitude_bound(mag, k, dt), what)


@pytest.mark.parametrize("pair", [(np.int8, np.int32), (ml_dtypes.bfloat16, np.float32),
                                  (np.float16, np.float32), (np.int8, np.float32)],
                         ids=lambda p: f"{np.dtype(p[0]).name}-{np.dtype(p[1]).name}")
def test_dot_general_preferred_element_type(pair: Any) -> None:
    src, dst = pair
    rng = np.random.default_rng(7)
    x = _values(rng, (3, 17), src, True) if np.dtype(src).kind == "f" else \
        _values(rng, (3, 17), src, False)
    y = _values(rng, (17, 4), src, True) if np.dtype(src).kind == "f" else \
        _values(rng, (17, 4), src, False)
    dn = (((1,), (0,)), ((), ()))
    want = jax.jit(lambda a, b: lax.dot_general(a, b, dn, preferred_element_type=dst))(x, y)
    got = ours(lambda a, b: ops.DotGeneral(a, b, dn, preferred_element_type=dst), x, y)
    assert_same(got, np.asarray(want), what="preferred_element_type")


def test_dot_bf16_rounds_once() -> None:
    # 256 + 1 + 1 + ... : rounding every partial sum to bf16 would drop each 1.
    x = np.ones((1, 64), ml_dtypes.bfloat16)
    x[0, 0] = 256
    y = np.ones((64, 1), ml_dtypes.bfloat16)
    want = jax.jit(lambda a, b: lax.dot(a, b))(x, y)
    got = ours(lambda a, b: ops.Dot(a, b), x, y)
    assert_same(got, np.asarray(want), what="bf16 dot")


# ---- convolution --------------------------------------------------------------------------------
def _conv_case(rng: np.random.Generator) -> dict[str, Any] | None:
    s = int(rng.choice([1, 2, 2, 3]))
    n = s + 2
    fgc = bgc = 1
    mode = rng.integers(0, 3)
    if mode == 1:
        fgc = int(rng.integers(2, 4))
    elif mode == 2:
        bgc = int(rng.integers(2, 4))
    batch = bgc * int(rng.integers(1, 3))
    cin = fgc * int(rng.integers(1, 3))
    cout = fgc * bgc * int(rng.integers(1, 3))
    spatial = [int(rng.integers(3, 8 if s < 3 else 5)) for _ in range(s)]
    window = [int(rng.integers(1, 4)) for _ in range(s)]
    strides = [int(rng.integers(1, 3)) for _ in range(s)]
    padding = [(int(rng.integers(-1, 3)), int(rng.integers(-1, 3))) for _ in range(s)]
    lhs_dil = [int(rng.integers(1, 3)) for _ in range(s)]
    rhs_dil = [int(rng.integers(1, 3)) for _ in range(s)]
    for i in range(s):
        dil = (spatial[i] - 1) * lhs_dil[i] + 1 + sum(padding[i])
        if dil < (window[i] - 1) * rhs_dil[i] + 1:
            return None
    lspec, rspec, ospec = (tuple(int(d) for d in rng.permutation(n)) for _ in range(3))
    lhs_shape, rhs_shape = [0] * n, [0] * n
    lhs_shape[lspec[0]], lhs_shape[lspec[1]] = batch, cin
    rhs_shape[rspec[0]], rhs_shape[rspec[1]] = cout, cin // fgc
    for i in range(s):
        lhs_shape[lspec[2 + i]] = spatial[i]
        rhs_shape[rspec[2 + i]] = window[i]
    return dict(lhs_shape=tuple(lhs_shape), rhs_shape=tuple(rhs_shape), strides=strides,
                padding=padding, lhs_dilation=lhs_dil, rhs_dilation=rhs_dil,
                dn=(lspec, rspec, ospec), fgc=fgc, bgc=bgc)


@pytest.mark.parametrize("integral", [True, False], ids=["intvalued", "normal"])
def test_conv_general_dilated(integral: bool) -> None:
    rng = np.random.default_rng(99)
    done = 0
    while done < 30:
        c = _conv_case(rng)
        if c is None:
            continue
        done += 1
        x = _values(rng, c["lhs_shape"], np.float32, integral)
        w = _values(rng, c["rhs_shape"], np.float32, integral)
        args = (c["strides"], c["padding"], c["lhs_dilation"], c["rhs_dilation"], c["dn"],
                c["fgc"], c["bgc"])

        def theirs(a: Any, b: Any, args: Any = args) -> Any:
            st, pad, ld, rd, dn, f, g = args
            return lax.conv_general_dilated(a, b, st, pad, ld, rd, lax.ConvDimensionNumbers(*dn),
                                            f, g)

        want = np.asarray(jax.jit(theirs)(x, w))
        got = ours(lambda a, b, args=args: ops.ConvGeneralDilated(a, b, *args), x, w)
        if integral:
            assert_same(got, want, what=f"conv {c}")
            continue
        # Each output sums (input features per group) x (window) products: the kernel's size
        # over its output features.
        k = int(np.prod(c["rhs_shape"])) // c["rhs_shape"][c["dn"][1][0]]
        [mag] = magnitudes(theirs, x, w)
        assert_within(got, want, magnitude_bound(mag, k, np.float32), f"conv {c}")


@pytest.mark.parametrize("dtype", [np.int32, np.float64, np.complex64],
                         ids=lambda t: np.dtype(t).name)
def test_conv_other_types(dtype: Any) -> None:
    rng = np.random.default_rng(5)
    x = _values(rng, (2, 3, 6, 5), dtype, True)
    w = _values(rng, (4, 3, 3, 2), dtype, True)
    want = jax.jit(lambda a, b: lax.conv_general_dilated(a, b, (1, 2), [(1, 1), (0, 1)],
                                                         (1, 1), (2, 1)))(x, w)
    got = ours(lambda a, b: ops.ConvGeneralDilated(a, b, (1, 2), [(1, 1), (0, 1)], (1, 1),
                                                   (2, 1)), x, w)
    assert_same(got, np.asarray(want), what="conv types")


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_conv_same_valid(padding: str) -> None:
    rng = np.random.default_rng(3)
    x = _values(rng, (1, 2, 7, 6), np.float32, True)
    w = _values(rng, (3, 2, 3, 4), np.float32, True)
    want = jax.jit(lambda a, b: lax.conv(a, b, (2, 1), padding))(x, w)
    got = ours(lambda a, b: ops.Conv(a, b, (2, 1), padding), x, w)
    assert_same(got, np.asarray(want), what=f"Conv {padding}")


# ---- fft ----------------------------------------------------------------------------------------
FFT_CASES = [
    (FftType.FFT, np.complex64, (3, 8), (8,)),
    (FftType.IFFT, np.complex64, (2, 5, 6), (5, 6)),
    (FftType.FFT, np.complex128, (2, 3, 4, 5), (3, 4, 5)),
    (FftType.IFFT, np.complex128, (4, 7), (7,)),
    (FftType.RFFT, np.float32, (3, 10), (10,)),
    (FftType.RFFT, np.float64, (2, 4, 9), (4, 9)),
    (FftType.RFFT, np.float32, (2, 3, 4, 6), (3, 4, 6)),
    (FftType.IRFFT, np.complex64, (3, 6), (10,)),
    (FftType.IRFFT, np.complex128, (2, 4, 5), (4, 9)),
    (FftType.IRFFT, np.complex64, (3, 4, 4), (3, 4, 6)),
]


@pytest.mark.parametrize("case", FFT_CASES, ids=lambda c: f"{c[0].value}-{np.dtype(c[1]).name}-"
                         f"{len(c[3])}d")
def test_fft(case: Any) -> None:
    ft, dtype, shape, lengths = case
    rng = np.random.default_rng(11)
    x = _values(rng, shape, dtype, False)
    jt = getattr(lax.FftType, ft.value)
    want = np.asarray(jax.jit(lambda a: lax.fft(a, jt, lengths))(x))
    got = ours(lambda a: ops.Fft(a, ft, lengths), x)
    single = np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.complex64))
    rtol = 1e-5 if single else 1e-12
    assert_same(got, want, rtol=rtol, atol=rtol * float(np.max(np.abs(want))), what=str(case))


def test_jnp_fft_family() -> None:
    rng = np.random.default_rng(12)
    x = _values(rng, (4, 6, 8), np.complex64, False)
    r = _values(rng, (4, 6, 8), np.float32, False)
    jnp = jax.numpy
    for name, fn, arg, ft, lengths in [
        ("fft", jnp.fft.fft, x, FftType.FFT, (8,)),
        ("ifft", jnp.fft.ifft, x, FftType.IFFT, (8,)),
        ("rfft", jnp.fft.rfft, r, FftType.RFFT, (8,)),
        ("fftn", jnp.fft.fftn, x, FftType.FFT, (4, 6, 8)),
    ]:
        want = np.asarray(jax.jit(fn)(arg))
        got = ours(lambda a, ft=ft, lengths=lengths: ops.Fft(a, ft, lengths), arg)
        assert_same(got, want, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(want))), what=name)
    spec = np.fft.rfft(r).astype(np.complex64)
    want = np.asarray(jax.jit(lambda a: jnp.fft.irfft(a, 8))(spec))
    got = ours(lambda a: ops.Fft(a, FftType.IRFFT, (8,)), spec)
    assert_same(got, want, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(want))), what="irfft")


# ---- cholesky, triangular_solve -----------------------------------------------------------------
LINALG_TYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _rtol(dtype: Any) -> float:
    return 1e-4 if np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.complex64)) else 1e-10


def _hpd(rng: np.random.Generator, batch: tuple[int, ...], n: int, dtype: Any) -> np.ndarray:
    m = _values(rng, (*batch, n, n), np.complex128 if np.dtype(dtype).kind == "c" else
                np.float64, False)
    a = m @ np.conj(np.swapaxes(m, -1, -2)) + n * np.eye(n)
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", LINALG_TYPES, ids=lambda t: np.dtype(t).name)
def test_cholesky(dtype: Any) -> None:
    rng = np.random.default_rng(21)
    for batch, n in [((), 1), ((), 5), ((3,), 4), ((2, 2), 3)]:
        a = _hpd(rng, batch, n, dtype)
        a = a + np.triu(_values(rng, a.shape, dtype, False), 1)  # upper triangle is not read
        want = np.asarray(jax.jit(lambda x: lax.linalg.cholesky(x, symmetrize_input=False))(a))
        got = ours(lambda x: ops.Cholesky(x, lower=True), a)
        assert_same(got, want, rtol=_rtol(dtype), atol=_rtol(dtype), what=f"cholesky {a.shape}")


def test_cholesky_not_positive_definite() -> None:
    a = np.stack([np.array([[1.0, 2.0], [2.0, 1.0]]), np.eye(2) * 4]).astype(np.float32)
    want = np.asarray(jax.jit(lambda x: lax.linalg.cholesky(x, symmetrize_input=False))(a))
    got = ours(lambda x: ops.Cholesky(x), a)
    assert_same(got, want, what="non-PD cholesky")


TRANSPOSES = {(False, False): Transpose.NO_TRANSPOSE, (True, False): Transpose.TRANSPOSE,
              (True, True): Transpose.ADJOINT}


@pytest.mark.parametrize("dtype", LINALG_TYPES, ids=lambda t: np.dtype(t).name)
def test_triangular_solve(dtype: Any) -> None:
    rng = np.random.default_rng(31)
    for left in (True, False):
        for lower in (True, False):
            for unit in (True, False):
                for (tr, conj), mode in TRANSPOSES.items():
                    if conj and np.dtype(dtype).kind != "c":
                        continue
                    n, k = 4, 3
                    a = _values(rng, (2, n, n), dtype, False) + (3 * np.eye(n)).astype(dtype)
                    b = _values(rng, (2, n, k) if left else (2, k, n), dtype, False)

                    def theirs(x: Any, y: Any, f: Any = (left, lower, tr, conj, unit)) -> Any:
                        return lax.linalg.triangular_solve(
                            x, y, left_side=f[0], lower=f[1], transpose_a=f[2],
                            conjugate_a=f[3], unit_diagonal=f[4])

                    want = np.asarray(jax.jit(theirs)(a, b))
                    got = ours(lambda x, y, f=(left, lower, unit, mode):
                               ops.TriangularSolve(x, y, *f), a, b)
                    assert_same(got, want, rtol=_rtol(dtype), atol=_rtol(dtype),
                                what=f"triangular_solve {left} {lower} {unit} {mode}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("shape", [(300, 200), (64, 96), (257, 129)])
def test_qr_blocked_as_xla(dtype: Any, shape: tuple[int, int]) -> None:
    """jnp.linalg.qr (?geqrf then ?orgqr / ?ungqr) lowered by jax: the interpreter and the
    cpu backend agree bit for bit, both with scipy's LAPACK called with the workspace its
    query asks for (as jaxlib's kernels ask: the same blocking; f2py's default lwork of 3 n
    made blocks of 3 columns: other bits, and a 1024 x 512 sgeqrf 2.6x slower), on one
    OpenBLAS thread (lapack_threads.py); within rounding of XLA's, which lets OpenBLAS split
    the blocked updates over its threads (on Zen 3 other bits; on the Xeons the same)."""
    import jax.numpy as jnp

    from xlapy.ops import lapack_threads

    a = _values(np.random.default_rng(11), shape, dtype, False)
    fn = jax.jit(lambda a: jnp.linalg.qr(a))
    want = [np.asarray(w) for w in fn(a)]
    text = fn.lower(a).as_text()
    ref = [np.asarray(g) for g in xlapy.compile(text, backend="interpreter")(a)]
    got = [np.asarray(g) for g in xlapy.compile(text, backend="cpu")(a)]
    m, n = shape
    k, kind = min(m, n), "sdcz"[[np.float32, np.float64, np.complex64].index(dtype)]
    geqrf, orgqr = lapack.get_lapack_funcs(("geqrf", "ungqr" if kind == "c" else "orgqr"),
                                           dtype=np.dtype(dtype))
    qr, tau, _, _ = lapack_threads.serial(geqrf, m * n)(a, lwork=_queried(geqrf, a))
    q = lapack_threads.serial(orgqr, m * n)(qr[:, :k], tau,
                                            lwork=_queried(orgqr, qr[:, :k], tau))[0]
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for r, g, w, lap in zip(ref, got, want, [q, np.triu(qr[:k])]):
        np.testing.assert_array_equal(g, r)
        np.testing.assert_array_equal(r, lap)
        np.testing.assert_allclose(r, w, rtol=tol, atol=tol)


def _queried(fn: Any, *args: Any) -> int:
    """LAPACK's workspace query's answer (lwork = -1)."""
    return int(np.real(fn(*args, lwork=-1)[-2][0]))
