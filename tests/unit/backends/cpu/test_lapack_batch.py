"""lapack_batch.py: a batched getrf / trsm custom call runs as one native loop over scipy's
exported routines, bit for bit the interpreter's per-matrix scipy calls (all four types,
triangular-solve options, singular matrices, batch dims of any rank)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import batch_call, lapack_batch, small_lu

jax = pytest.importorskip("jax")
jnp = jax.numpy
jsl = jax.scipy.linalg


def _data(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return (x + 3 * np.eye(shape[-1])).astype(dtype) if shape[-1] == shape[-2] else \
        x.astype(dtype)


@pytest.fixture
def loops(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The batch sizes lapack_batch's native loops ran (the batched path was taken); small
    real getrf / trsm batches kept on LAPACK's loop, not small_lu.py's JIT (its own tests:
    test_small_lu.py)."""
    monkeypatch.setattr(small_lu, "MAX_N", 0)
    ran: list[int] = []
    real = batch_call.Args.call
    monkeypatch.setattr(batch_call.Args, "call", lambda self, threads, fn, batch, *arrays, **kw: (
        ran.append(batch), real(self, threads, fn, batch, *arrays, **kw))[1])
    return ran


def _same(fn: Any, args: list[np.ndarray], loops: list[int],
          options: dict[str, Any] | None = None) -> None:
    with jax.enable_x64(any(a.dtype in (np.float64, np.complex128) for a in args)):
        text = jax.jit(fn).lower(*args).as_text()
    assert "lapack_" in text
    cpu = xlapy.compile(text, backend="cpu", options={"entry_trip": False, **(options or {})})
    got = cpu(*args)
    assert loops and min(loops) >= 2
    want = xlapy.compile(text, backend="interpreter")(*args)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_vmap_solve(dtype: Any, loops: list[int]) -> None:
    _same(jax.vmap(jnp.linalg.solve), [_data((64, 4, 4), dtype, 0), _data((64, 4), dtype, 1)],
          loops)


def test_lu_factor_with_batch_dims_and_a_singular_matrix(loops: list[int]) -> None:
    a = _data((3, 5, 6, 6), np.float32, 2)
    a[1, 2] = 0.0  # singular: info > 0, not an error
    _same(lambda m: jsl.lu_factor(m), [a], loops)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("left", [True, False])
def test_triangular_solve_options(lower: bool, trans: int, unit: bool, left: bool,
                                  loops: list[int]) -> None:
    a = _data((9, 5, 5), np.complex64, 3)
    b = _data((9, 5, 3) if left else (9, 3, 5), np.complex64, 4)

    def fn(m: Any, r: Any) -> Any:
        return jax.lax.linalg.triangular_solve(m, r, left_side=left, lower=lower,
                                               transpose_a=trans > 0, conjugate_a=trans == 2,
                                               unit_diagonal=unit)
    _same(fn, [a, b], loops)


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_vmap_cholesky_and_a_matrix_that_is_not_positive(dtype: Any, loops: list[int]
                                                          ) -> None:
    a = _data((3, 7, 6, 6), dtype, 5)
    a = a @ np.conj(np.swapaxes(a, -1, -2)) + 6 * np.eye(6, dtype=dtype)
    a[0, 3] = -np.eye(6, dtype=dtype)  # not positive definite: info > 0, NaNs from jax
    _same(jnp.linalg.cholesky, [a], loops)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("values_only", [False, True])
@pytest.mark.parametrize("lower", [True, False])
def test_vmap_eigh(dtype: Any, values_only: bool, lower: bool, loops: list[int]) -> None:
    """Batched syevd (jax.vmap(jnp.linalg.eigh) of small matrices: a 3 x 3 batch ran 10x
    XLA's time through the f2py wrapper), with a NaN matrix and batch dims of rank 2."""
    a = _data((4, 17, 3, 3), dtype, 6)
    a = a + np.swapaxes(a, -1, -2)
    a[1, 2, 0, 0] = np.nan
    fn = (lambda m: jnp.linalg.eigvalsh(m, UPLO="L" if lower else "U")) if values_only else \
        (lambda m: jnp.linalg.eigh(m, UPLO="L" if lower else "U", symmetrize_input=False))
    _same(fn, [a], loops)
    _same(fn, [_data((9, 16, 16), dtype, 7)], loops)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lower", [True, False])
def test_eigenvalues_without_vectors_are_the_bits_syevd_with_vectors_gives(
        dtype: Any, lower: bool) -> None:
    """lapack_batch.syevals (?sytrd, ?steqr 'N') against ?syevd 'V' for every n up to
    STEQR_MAX: normal matrices, zero ones, NaN and inf ones, and norms at and beyond where
    ?syevd scales (those go through ?syevd itself), on one thread and split over three."""
    rng = np.random.default_rng(11)
    t = "s" if dtype == np.float32 else "d"
    fast = lapack_batch.syevals(t, lower, lambda i: i)
    full = lapack_batch.syevd(t, lower, True, lambda i: i)
    edge = 50 if t == "s" else 480
    for n in range(1, lapack_batch.STEQR_MAX + 1):
        a = rng.standard_normal((40, n, n))
        for k, scale in enumerate([0.0, 2.0 ** -edge, 2.0 ** edge, 2.0 ** -(edge + 3),
                                   2.0 ** (edge + 3), 1e-300, 1e300]):
            a[k + 1] *= scale
        a[9, 0, 0], a[10, -1, 0] = np.nan, np.inf
        a[11] *= 2.0 ** -(edge + 3)  # scaled: only the triangle ?syevd does not read is big
        if n > 1:
            i, j = (0, n - 1) if lower else (n - 1, 0)
            a[11, i, j] = 1.0
        a = a.astype(dtype)
        for threads in (1, 3):
            _, w, info = fast(a, threads)
            _, w_full, info_full = full(a, threads)
            np.testing.assert_array_equal(w, w_full)
            np.testing.assert_array_equal(info, info_full)


@pytest.mark.parametrize(("fn", "n", "fast"), [
    (jnp.linalg.eigvalsh, 3, True), (lambda m: jnp.linalg.eigh(m)[0], 25, True),
    (lambda m: jnp.linalg.eigh(m)[1], 3, False), (jnp.linalg.eigvalsh, 26, False)])
def test_eigvalsh_computes_no_vectors(fn: Any, n: int, fast: bool, loops: list[int],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """jnp.linalg.eigvalsh lowers to a ?syevd asking for vectors nobody reads: the cpu
    backend computes the eigenvalues without them (4096 3 x 3: 1.10 -> 0.64 of XLA's
    time), the interpreter's bits; vectors read, or n over STEQR_MAX, keep ?syevd."""
    used: list[int] = []
    real = lapack_batch.syevals
    monkeypatch.setattr(lapack_batch, "syevals", lambda *a: (used.append(1), real(*a))[1])
    a = _data((33, n, n), np.float32, n)
    _same(fn, [a + np.swapaxes(a, -1, -2)], loops)
    assert bool(used) == fast


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize(("m", "n", "mode"), [(6, 6, "reduced"), (7, 4, "reduced"),
                                              (7, 4, "complete"), (3, 5, "reduced")])
def test_vmap_qr(dtype: Any, m: int, n: int, mode: str, loops: list[int]) -> None:
    """Batched geqrf and orgqr / ungqr (jax.vmap(jnp.linalg.qr) went through f2py a matrix
    at a time), with f2py's work sizes: the interpreter's bits."""
    _same(lambda a: jnp.linalg.qr(a, mode=mode), [_data((2, 9, m, n), dtype, m * n)], loops)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_big_eigh_batch_splits_over_threads_with_the_same_bits(
        dtype: Any, loops: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """4096 3 x 3 syevd calls: 6.9 -> 4.1 ms on 2 threads, each range with its own work
    arrays (shared ones would mix matrices' workspaces)."""
    parts: list[int] = []
    real = batch_call.parts
    monkeypatch.setattr(batch_call, "parts", lambda *a: (parts.append(real(*a)), parts[-1])[1])
    a = _data((3, 333, 3, 3), dtype, 8)
    a = a + np.swapaxes(a, -1, -2)
    _same(lambda m: jnp.linalg.eigh(m, symmetrize_input=False), [a], loops,
          options={"num_threads": 3})
    assert max(parts) == 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize(("m", "n"), [(6, 6), (7, 4), (3, 5)])
@pytest.mark.parametrize("uv", ["none", "reduced", "full"])
def test_vmap_svd(dtype: Any, m: int, n: int, uv: str, loops: list[int]) -> None:
    """Batched gesdd (jnp.linalg.svd of 64 16 x 16 matrices ran 2.8x XLA's time through the
    f2py wrapper, ~18 us a matrix), jobz N, S and A, with a NaN matrix (info > 0)."""
    a = _data((2, 9, m, n), dtype, m * n + 1)
    a[1, 3, 0, 0] = np.nan
    fn = (lambda x: jnp.linalg.svd(x, compute_uv=False)) if uv == "none" else \
        (lambda x: jnp.linalg.svd(x, full_matrices=uv == "full"))
    _same(fn, [a], loops)


def test_a_big_svd_batch_splits_over_threads_with_the_same_bits(
        loops: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    parts: list[int] = []
    real = batch_call.parts
    monkeypatch.setattr(batch_call, "parts", lambda *a: (parts.append(real(*a)), parts[-1])[1])
    _same(jnp.linalg.svd, [_data((200, 5, 4), np.float32, 9)], loops,
          options={"num_threads": 2})
    assert max(parts) == 2


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("lead", [(), (3,)])
@pytest.mark.parametrize("uv", [False, True])
def test_svd_of_a_nan_matrix_is_nan_as_jax_gives(backend: str, lead: tuple[int, ...],
                                                 uv: bool) -> None:
    """LAPACK's gesdd returns info -4 for a matrix with a NaN (it computes nothing): that
    raised 'argument 4 is invalid'; jax gives NaN results for that matrix."""
    a = _data((*lead, 5, 4), np.float32, 10)
    a[(*(1 for _ in lead), 2, 1)] = np.nan
    fn = (lambda x: jnp.linalg.svd(x, full_matrices=False)) if uv else \
        (lambda x: jnp.linalg.svd(x, compute_uv=False))
    got = xlapy.compile(jax.jit(fn).lower(a).as_text(), backend=backend)(a)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(fn(a))):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-5)
        assert np.isnan(np.asarray(g)).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize(("left", "right"), [(False, False), (False, True), (True, True),
                                             (True, False)])
def test_vmap_eig(dtype: Any, left: bool, right: bool, loops: list[int]) -> None:
    """Batched geev honouring compute_left / compute_right (jnp.linalg.eigvals of 64 8 x 8
    matrices computed both sets of vectors through f2py: 5.6x XLA's time), real
    eigenvectors unpacked for the whole batch at once (pairs, and real eigenvalues)."""
    a = _data((3, 11, 5, 5), dtype, 11)
    a[0, 0] = np.diag(np.arange(5.0)).astype(dtype)  # real eigenvalues only

    def fn(m: Any) -> Any:
        return jax.lax.linalg.eig(m, compute_left_eigenvectors=left,
                                  compute_right_eigenvectors=right)
    _same(fn, [a], loops)


def test_eigvals_asks_lapack_for_no_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    """jnp.linalg.eigvals lowers geev with compute_left = compute_right = N: the values
    come from LAPACK's eigenvalues-only path, as jax's (they computed vectors before): the
    interpreter's f2py calls and the cpu backend's batch loop ask for none."""
    from xlapy.backends.cpu import cache
    from xlapy.ops import custom_call_targets as cct

    asked: list[tuple[int, int]] = []
    real_lapack, real_args = cct._lapack, lapack_batch.geev_args

    def lapack(name: str, dtype: Any) -> Any:
        fn = real_lapack(name, dtype)
        return lambda a, **kw: (asked.append((kw["compute_vl"], kw["compute_vr"])),
                                fn(a, **kw))[1]

    monkeypatch.setattr(cct, "_lapack", lapack)
    monkeypatch.setattr(lapack_batch, "geev_args", lambda t, left, right, *rest: (
        asked.append((int(left), int(right))), real_args(t, left, right, *rest))[1])
    cache.clear_memory()
    a = _data((4, 6, 6), np.float32, 12)
    text = jax.jit(jnp.linalg.eigvals).lower(a).as_text()
    assert "compute_left = 78" in text and "compute_right = 78" in text
    want = np.asarray(jnp.linalg.eigvals(a))
    for backend in ("interpreter", "cpu"):
        got = np.asarray(xlapy.compile(text, backend=backend)(a))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert len(asked) == 5 and set(asked) == {(0, 0)}  # 4 matrices, then one batch


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("nrhs", [1, 3])
def test_batched_tridiagonal_solve(dtype: Any, nrhs: int, loops: list[int]) -> None:
    """Batched gtsv (lax.linalg.tridiagonal_solve of 64 systems ran 3.4x XLA's time a
    system at a time), with a system whose pivot is zero (info > 0) and batch dims of
    rank 2; 2 threads split the 40 systems."""
    dl, d, du = (_data((4, 10, 7), dtype, s) for s in (13, 14, 15))
    d = d + 4
    d[1, 2], du[1, 2], dl[1, 2] = 0, 0, 0  # a singular system
    b = _data((4, 10, 7, nrhs), dtype, 16)
    _same(jax.lax.linalg.tridiagonal_solve, [dl, d, du, b], loops,
          options={"num_threads": 2})


def test_a_one_column_solve_leaves_its_operand_alone(loops: list[int]) -> None:
    """A batch of trsm with one right-hand side: the Fortran-order copy of b [B, n, 1] was
    b's own memory (the swap of a one-column matrix is contiguous as it is), so LAPACK wrote
    the solution over the caller's array."""
    a = _data((8, 5, 5), np.float32, 17)
    b = _data((8, 5, 1), np.float32, 18)
    b0 = b.copy()
    fn = jax.vmap(lambda m, r: jsl.solve_triangular(m, r, lower=True))
    got = xlapy.compile(jax.jit(fn).lower(a, b).as_text(), backend="cpu")(a, b)
    assert loops
    np.testing.assert_array_equal(b, b0)
    np.testing.assert_allclose(np.asarray(got), np.asarray(fn(a, b0)), rtol=1e-5, atol=1e-5)


def refuse_transposes(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, any transposing copy (transpose_lib.swap_last) fails the test."""
    from xlapy.backends.cpu import transpose_lib

    def refuse(*args: Any, **kw: Any) -> Any:
        raise AssertionError("a transposing copy")

    monkeypatch.setattr(transpose_lib, "swap_last", refuse)
    monkeypatch.setattr(lapack_batch, "swap_last", refuse)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize(("trans", "dtype"), [(0, np.float32), (1, np.float32),
                                              (2, np.complex64), (1, np.complex128)])
def test_a_big_triangular_solve_takes_no_transposing_copy(left: bool, lower: bool, trans: int,
                                                          dtype: Any,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """?trsm reads the row-major operands as their transposes (trsm_flags: side and triangle
    flipped): a 160 x 160 solve (the batch loop's path) copies b once and transposes
    nothing (two transposes in, one out had cost 30 of 128 us at 128 x 128)."""
    # well conditioned: a random triangle's inverse grows with its size
    a = (_data((160, 160), dtype, 5) - 3 * np.eye(160)) * 0.05 + 2 * np.eye(160)
    a = a.astype(dtype)
    b = _data((160, 96) if left else (96, 160), dtype, 6)

    def fn(m: Any, r: Any) -> Any:
        return jax.lax.linalg.triangular_solve(m, r, left_side=left, lower=lower,
                                               transpose_a=trans > 0, conjugate_a=trans == 2)
    with jax.enable_x64(dtype == np.complex128):
        text = jax.jit(fn).lower(a, b).as_text()
    cpu = xlapy.compile(text, backend="cpu")
    refuse_transposes(monkeypatch)
    got = np.asarray(cpu(a, b))
    t = (np.tril(a) if lower else np.triu(a)).astype(np.complex128)
    op = t.conj().T if trans == 2 else t.T if trans else t
    want = np.linalg.solve(op, b) if left else np.linalg.solve(op.T, b.T).T
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_a_big_cholesky_takes_no_transposing_copy(lower: bool, dtype: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """?potrf reads the row-major matrix as its transpose (potrf_uplo: the other triangle),
    whose factor read back row-major is the one asked for: a 160 x 160 factor copies a
    once and transposes nothing; the other triangle is left as given."""
    x = _data((160, 160), dtype, 7)
    a = (x @ np.conj(x.T) + 160 * np.eye(160)).astype(dtype)
    cpu = xlapy.compile(_potrf_module(dtype, lower), backend="cpu")
    refuse_transposes(monkeypatch)
    got = np.asarray(cpu(a))
    ref = np.linalg.cholesky(a.astype(np.complex128))  # a = L L^H
    want, part = (ref, np.tril) if lower else (np.conj(ref.T), np.triu)
    np.testing.assert_allclose(part(got), want, rtol=1e-4, atol=1e-4)
    other = np.triu(np.ones((160, 160), bool), 1) if lower else \
        np.tril(np.ones((160, 160), bool), -1)
    np.testing.assert_array_equal(got[other], a[other])


def _potrf_module(dtype: Any, lower: bool) -> str:
    """jaxlib's potrf custom call on one 160 x 160 matrix of `dtype`, returning the factor."""
    letter, ty = {np.float32: ("s", "f32"), np.float64: ("d", "f64"),
                  np.complex64: ("c", "complex<f32>"), np.complex128: ("z", "complex<f64>")}[dtype]
    t, uplo = f"tensor<160x160x{ty}>", ord("L" if lower else "U")
    return f"""
func.func public @main(%a: {t}) -> {t} {{
  %r:2 = stablehlo.custom_call @lapack_{letter}potrf_ffi(%a)
    {{mhlo.backend_config = {{uplo = {uplo} : ui8}},
    operand_layouts = [dense<[0, 1]> : tensor<2xindex>],
    result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]}}
    : ({t}) -> ({t}, tensor<i32>)
  return %r#0 : {t}
}}"""


@pytest.mark.parametrize(("batch", "n", "least", "want"), [
    (31, 3, 1, 1), (32, 3, 1, 2), (4096, 3, 1, 2),  # tiny: SPLIT_BATCH / 2 a range
    (7, 16, 1, 1), (8, 16, 1, 2),  # 16 x 16: 4 a range
    (2, 32, 1, 2), (2, 64, 1, 2), (3, 300, 1, 2),  # from 32 x 32: one a range
    (64, 8, 256, 1), (64, 16, 256, 2),  # getrf & co: from 16 x 16 only (SPLIT_ELEMENTS)
    (2, 2048, 1, 1), (1, 64, 1, 1)])  # OpenBLAS keeps its threads (SERIAL_BELOW); one matrix
def test_parts_by_matrix_size(batch: int, n: int, least: int, want: int) -> None:
    a = np.empty((batch, n, n), np.float32) if batch * n * n < 1 << 24 else \
        np.lib.stride_tricks.as_strided(np.empty(1, np.float32), (batch, n, n), (0, 0, 0))
    assert batch_call.parts(2, batch, (a,), least) == want
    assert batch_call.parts(1, batch, (a,), least) == 1


@pytest.mark.parametrize("routine", ["lu", "cholesky", "qr", "solve", "eigh"])
def test_batches_of_bigger_matrices_split_with_the_same_bits(
        routine: str, loops: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """getrf, potrf, geqrf, orgqr and trsm batches of 16 x 16 or more split over the threads
    too (Zen 4, 2 threads: 32 64 x 64 getrf 577 -> 383 us, XLA 433; potrf 437 -> 287, XLA
    242; geqrf 1140 -> 650, XLA 753), syevd ones of 64 x 64 or more (32 64 x 64: 6.8 -> 3.8
    ms, XLA 3.8), each worker's OpenBLAS at one thread as the caller's is (the same bits on
    1 and 3 threads, the interpreter's)."""
    parts: list[int] = []
    real = batch_call.parts
    monkeypatch.setattr(batch_call, "parts", lambda *a: (parts.append(real(*a)), parts[-1])[1])
    a = _data((6, 64, 64), np.float32, 11)
    a = a @ np.swapaxes(a, -1, -2) / 64 + np.eye(64, dtype=np.float32)
    fn = {"lu": lambda m: jsl.lu_factor(m)[0], "cholesky": jnp.linalg.cholesky,
          "qr": lambda m: jnp.linalg.qr(m)[0], "eigh": lambda m: jnp.linalg.eigh(m)[1],
          "solve": lambda m: jnp.linalg.solve(m, m[..., :3])}[routine]
    _same(fn, [a], loops, options={"num_threads": 3})
    assert max(parts) == 3
    _same(fn, [a], loops, options={"num_threads": 1})


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize(("trans", "unit", "dtype"), [(0, False, np.float32),
                                                      (1, True, np.float32),
                                                      (0, False, np.float64),
                                                      (2, False, np.complex64)])
@pytest.mark.parametrize("count", [1000, 256])
def test_a_big_triangular_solve_splits_its_solves_with_the_same_bits(
        left: bool, lower: bool, trans: int, unit: bool, dtype: Any, count: int,
        loops: list[int]) -> None:
    """One big trsm (jnp.linalg.inv's) runs its independent solves (b's columns for a left
    solve, its rows for a right one) in parts over the threads, the last part shorter, each
    on its thread's OpenBLAS alone as the one call runs on the caller's
    (lapack_threads.serial): the interpreter's bits on 3 threads and on 1."""
    s = 256
    a = ((_data((s, s), dtype, 7) - 3 * np.eye(s)) * 0.05 + 2 * np.eye(s)).astype(dtype)
    b = _data((s, count) if left else (count, s), dtype, 8)
    part = lapack_batch.trsm_part(count, s, 3)
    assert part and count % part  # (a shorter last part: 1000 / 3 -> 336, 256 / 3 -> 96)
    assert not lapack_batch.trsm_part(count, 2048, 3)  # (OpenBLAS's own split there)

    def fn(m: Any, r: Any) -> Any:
        return jax.lax.linalg.triangular_solve(m, r, left_side=left, lower=lower,
                                               transpose_a=trans > 0, conjugate_a=trans == 2,
                                               unit_diagonal=unit)
    for threads in (3, 1):
        loops.clear()
        _same(fn, [a, b], [2], options={"num_threads": threads})
        want = [count // part] + ([1] if count % part else []) if threads > 1 else [1]
        assert loops == want, loops


@pytest.mark.parametrize("left", [True, False])
def test_a_small_triangle_with_many_solves_splits_too(left: bool, loops: list[int]) -> None:
    """A 64 x 64 triangle against 4096 right-hand sides (multivariate_normal.logpdf's
    whitening): the largest operand decides the route, so it takes the split over the
    threads; by its triangle's size it went to f2py on one thread (Zen 4: the program
    1.11 -> 0.63 ms, XLA 0.68-0.85). The interpreter's bits."""
    s, count = 64, 4096
    a = ((_data((s, s), np.float32, 7) - 3 * np.eye(s)) * 0.05 + 2 * np.eye(s)).astype(
        np.float32)
    b = _data((s, count) if left else (count, s), np.float32, 8)
    part = lapack_batch.trsm_part(count, s, 2)
    assert part

    def fn(m: Any, r: Any) -> Any:
        return jax.lax.linalg.triangular_solve(m, r, left_side=left, lower=True,
                                               transpose_a=True)
    loops.clear()
    _same(fn, [a, b], [2], options={"num_threads": 2})
    assert loops == [count // part], loops
