"""Sorts and top-k selections as native loop steps (loop_library.py): a JAX loop whose body
sorts or takes a top-k (a decoding loop sampling from the top k, lax.map of a sort) stays
native, with the interpreter's bits; sorts the Python path splits over threads, or along
another dimension, keep it."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import loop_callback, loop_library, small_lu

jax = pytest.importorskip("jax")
jnp, lax = jax.numpy, jax.lax
_RNG = np.random.default_rng(11)


def _f32(*shape: int) -> np.ndarray:
    return _RNG.standard_normal(shape).astype(np.float32)


def _top_k_both(x: Any) -> Any:
    """values and indices of each row's top 8 (chlo.top_k: topk_emit.plan_top_k)."""
    def body(i: Any, c: Any) -> Any:
        v, j = lax.top_k(x[i] + c[0][0] * 1e-3, 8)
        return c[0] * 0.5 + v, c[1] + j * (i + 1)
    return lax.fori_loop(0, x.shape[0], body, (jnp.zeros(8), jnp.zeros(8, jnp.int32)))


def _top_k_indices(x: Any) -> Any:
    """indices only (a sort of (x, iota) read through its first k: topk_emit.plan)."""
    return lax.fori_loop(0, x.shape[0], lambda i, c: c + lax.top_k(x[i], 5)[1] * i,
                         jnp.zeros(5, jnp.int32))


def _sort_rows(x: Any) -> Any:
    """lax.map of a descending sort's head (sort_emit.plan, one operand)."""
    return lax.map(lambda r: jnp.sort(r)[::-1][:4], x)


def _sort_pairs(k: Any, v: Any) -> Any:
    """Two operands sorted by the first (stable: equal keys keep the values' order)."""
    def body(i: Any, c: Any) -> Any:
        ks, vs = lax.sort((k[i], v[i] + c[:1]), num_keys=1)
        return c + vs[:16] * (ks[:16] > 0).astype(vs.dtype)
    return lax.fori_loop(0, k.shape[0], body, jnp.zeros(16, v.dtype))


def _sort_desc(x: Any) -> Any:
    """jnp.sort(descending=True) of each row, in a fori_loop."""
    return lax.fori_loop(0, 3, lambda i, c: c + jnp.sort(x[i] + c[0], descending=True),
                         x[0] * 0)


def _argsort_rows(x: Any) -> Any:
    return lax.fori_loop(0, x.shape[0], lambda i, c: c + jnp.argsort(x[i])[:6].astype(c.dtype),
                         jnp.zeros(6, jnp.int32))


def _with_nans(n: int) -> np.ndarray:
    x = _f32(12, n)
    x[::3, ::7] = np.nan
    x[1, :] = 0.5  # all equal: the stable order
    x[2, ::2] = -0.0
    x[2, 1::2] = 0.0
    return x


PROGRAMS: dict[str, tuple[Any, list[np.ndarray]]] = {
    "top_k_both": (_top_k_both, [_f32(20, 1000)]),
    "top_k_indices": (_top_k_indices, [_with_nans(300)]),
    "sort_rows": (_sort_rows, [_with_nans(128)]),
    "sort_pairs_f32_s32": (_sort_pairs, [np.round(_f32(9, 200) * 3), _RNG.integers(
        -50, 50, (9, 200)).astype(np.int32)]),
    "sort_pairs_bf16_f64": (_sort_pairs, [_f32(9, 200).astype(ml_dtypes.bfloat16),
                                          _RNG.standard_normal((9, 200))]),
    "sort_pairs_i8_i16": (_sort_pairs, [_RNG.integers(-5, 5, (9, 64)).astype(np.int8),
                                        _RNG.integers(-9, 9, (9, 64)).astype(np.int16)]),
    "argsort_rows": (_argsort_rows, [_with_nans(257)]),
    # one compare of integers: numpy's sort on the Python path; in the loop numpy's SIMD sort
    # of a lone key through a callback (loop_callback.py), else sort_emit's function
    "sort_rows_i32": (_sort_rows, [_RNG.integers(-9, 9, (10, 96)).astype(np.int32)]),
    "sort_desc_u16": (_sort_desc, [_RNG.integers(0, 900, (3, 77)).astype(np.uint16)]),
    "argsort_rows_u8": (_argsort_rows, [_RNG.integers(0, 4, (10, 70)).astype(np.uint8)]),
}


def _close(got: Any, want: Any) -> None:
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        tol = 1e-4 if g.dtype in (np.float32, np.complex64) else 1e-11
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _equal(got: Any, want: Any) -> None:
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.reshape(-1).view(np.uint8), w.reshape(-1).view(np.uint8))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_loop_with_a_sort_stays_native(name: str, threads: int,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[loop_library.LibStep] = []
    real = loop_library.entry
    monkeypatch.setattr(loop_library, "entry", lambda keep, exe, st, *rest: made.append(st)
                        or real(keep, exe, st, *rest))
    fn, args = PROGRAMS[name]
    text = jax.jit(fn).lower(*args).as_text()
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    report = cpu._exe.explain()
    assert "native while loop" in report.split("-- called by")[0], report
    want = xlapy.compile(text, backend="interpreter")(*args)
    for _ in range(2):  # (the second call reuses the prepared tables)
        _equal(cpu(*args), want)
    assert made and all(getattr(st.native, "indices", False) == (name == "top_k_both")
                        for st in made)
    assert all(isinstance(st.native, loop_callback.Callback) == (
        name in ("sort_rows_i32", "sort_desc_u16")) for st in made)
    _equal(jax.jit(fn)(*args), want) if name.startswith("top_k") else None


def test_a_sort_split_over_threads_keeps_the_python_path() -> None:
    """Rows enough that the Python path splits them over the pool: no step (a native step
    runs on one thread)."""
    x = _f32(4, 64, 4096)
    def fn(x: Any) -> Any:
        return lax.fori_loop(0, 4, lambda i, c: c + jnp.sort(x[i], axis=-1)[:, -1],
                             jnp.zeros(64))
    text = jax.jit(fn).lower(x).as_text()
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": 2})
    assert "native while loop" not in cpu._exe.explain()
    _equal(cpu(x), xlapy.compile(text, backend="interpreter")(x))


def test_a_sort_along_another_dimension_keeps_the_python_path() -> None:
    x = _f32(3, 40, 6)
    def fn(x: Any) -> Any:
        return lax.fori_loop(0, 3, lambda i, c: c + jnp.sort(x[i], axis=0)[0], jnp.zeros(6))
    text = jax.jit(fn).lower(x).as_text()
    cpu = xlapy.compile(text, backend="cpu")
    assert "native while loop" not in cpu._exe.explain()
    _equal(cpu(x), xlapy.compile(text, backend="interpreter")(x))


# ---- LAPACK calls in loops (loop_lapack.py) ---------------------------------------------------
def _spd(n: int, dtype: Any, batch: tuple[int, ...] = ()) -> np.ndarray:
    a = _RNG.standard_normal((*batch, n, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * _RNG.standard_normal((*batch, n, n))
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def _solve_loop(a: Any, b: Any) -> Any:
    """jnp.linalg.solve every step (getrf, the pivots' permutation loop, two trsm) of a
    matrix that changes with the step (of `a` alone, LICM hoists the getrf, as XLA's)."""
    eye = jnp.eye(a.shape[-1], dtype=a.dtype)
    return lax.fori_loop(0, 6, lambda i, c: c * 0.5 + jnp.linalg.solve(
        a + i.astype(a.dtype) * 0.125 * eye, b + c), b * 0)


def _cho_loop(a: Any, b: Any) -> Any:
    """cho_factor / cho_solve every step (potrf, two trsm)."""
    def body(i: Any, c: Any) -> Any:
        f = jax.scipy.linalg.cho_factor(a + i * jnp.eye(a.shape[-1], dtype=a.dtype))
        return c * 0.5 + jax.scipy.linalg.cho_solve(f, b + c)
    return lax.fori_loop(0, 5, body, b * 0)


def _inv_loop(a: Any) -> Any:
    return lax.fori_loop(0, 4, lambda i, c: c + jnp.linalg.inv(a + c * 0.01), a * 0)


def _lu_loop(a: Any) -> Any:
    """lax.linalg.lu's three results (a singular matrix: info > 0, a result, not an error)."""
    def body(i: Any, c: Any) -> Any:
        lu, piv, perm = lax.linalg.lu(a + c[0] * 0)
        return c[0] + lu, c[1] + piv, c[2] + perm
    z = jnp.zeros(a.shape[-1], jnp.int32)
    return lax.fori_loop(0, 3, body, (a * 0, z, z))


def _eigh_loop(a: Any) -> Any:
    """jnp.linalg.eigh every step (syevd: vectors and values; eigvalsh: values only)."""
    def body(i: Any, c: Any) -> Any:
        w, v = jnp.linalg.eigh(a + c[0] * 0.01)
        return c[0] + v * w[0], c[1] + jnp.linalg.eigvalsh(a * (i + 1))
    return lax.fori_loop(0, 4, body, (a * 0, a[0] * 0))


def _qr_loop(a: Any) -> Any:
    """jnp.linalg.qr every step (geqrf, then orgqr / ungqr for Q)."""
    def body(i: Any, c: Any) -> Any:
        q, r = jnp.linalg.qr(a + c[1][..., :1, :1] * 0.01)
        return c[0] + q[..., :, :1] * r[..., :1, :], c[1] + r[..., :1, :1]
    return lax.fori_loop(0, 4, body, (a * 0, a[..., :1, :1] * 0))


def _r_loop(a: Any) -> Any:
    """qr(...)[1] alone: the unused Q's orgqr call is dead (dce.py), as in XLA."""
    return lax.fori_loop(0, 8, lambda i, c: c + jnp.linalg.qr(a + c * 0.01)[1], a * 0)


_SINGULAR = np.ones((6, 6), np.float32)
_SINGULAR[::2] = 0
LAPACK_PROGRAMS: dict[str, tuple[Any, list[np.ndarray]]] = {
    "solve_f32": (_solve_loop, [_spd(12, np.float32), _f32(12)]),
    "solve_f64_batched": (jax.vmap(_solve_loop), [_spd(9, np.float64, (3,)),
                                                 _RNG.standard_normal((3, 9, 2))]),
    "solve_c64": (_solve_loop, [_spd(7, np.complex64), (_f32(7) + 1j * _f32(7)).astype(
        np.complex64)]),
    "cho_f32": (_cho_loop, [_spd(10, np.float32), _f32(10, 3)]),
    "cho_c128": (_cho_loop, [_spd(5, np.complex128), (_f32(5) + 1j).astype(np.complex128)]),
    "inv_f64": (_inv_loop, [_spd(8, np.float64)]),
    "lu_singular": (_lu_loop, [_SINGULAR]),
    "eigh_f64": (_eigh_loop, [_spd(7, np.float64)]),
    "eigh_f32_batched": (jax.vmap(_eigh_loop), [_spd(5, np.float32, (3,))]),
    "qr_f32": (_qr_loop, [_f32(8, 8)]),
    "qr_f32_tall": (_qr_loop, [_f32(11, 6)]),
    "qr_c64_tall": (_qr_loop, [(_f32(9, 5) + 1j * _f32(9, 5)).astype(np.complex64)]),
    "qr_f64_batched": (jax.vmap(_qr_loop), [_RNG.standard_normal((3, 4, 6))]),
    "r_f32": (_r_loop, [_f32(8, 8)]),
    # 256 x 256: a callback below loop_lapack.NATIVE_BELOW's old 256 x 256 (cho_factor as an
    # entry trip 1.0-1.1x XLA's time through it, 0.66-0.70 as a step)
    "cho_f32_256": (_cho_loop, [_spd(256, np.float32), _f32(256, 2)]),
}


@pytest.mark.parametrize("name", list(LAPACK_PROGRAMS))
def test_loop_with_lapack_calls_stays_native(name: str, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    from xlapy.backends.cpu import loop_lapack

    made: list[str] = []
    real = loop_lapack.entry
    monkeypatch.setattr(loop_lapack, "entry", lambda keep, exe, st, outs, table: made.append(
        st.native.routine) or real(keep, exe, st, outs, table))
    fn, args = LAPACK_PROGRAMS[name]
    text = jax.jit(fn).lower(*args).as_text()
    cpu = xlapy.compile(text, backend="cpu")
    report = cpu._exe.explain()
    assert "native while loop" in report.split("-- called by")[0], report
    want = xlapy.compile(text, backend="interpreter")(*args)
    # (small getrf / potrf / trsm / geqrf / orgqr steps call small_lu.py's and
    # small_qr.py's JIT: LAPACK's arithmetic within rounding, not its bits; the singular
    # matrix's integer arithmetic is exact)
    small = args[0].dtype.kind in "fc" and max(args[0].shape[-2:]) <= small_lu.MAX_N and \
        name.split("_")[0] in ("solve", "cho", "inv", "qr", "r")
    for _ in range(2):
        (_close if small else _equal)(cpu(*args), want)
    assert sorted(set(made)) == {"solve": ["getrf", "trsm"], "cho": ["potrf", "trsm"],
                                 "inv": ["getrf", "trsm"], "lu": ["getrf"],
                                 "eigh": ["syevd"], "r": ["geqrf"],
                                 "qr": ["geqrf", "ungqr" if "_c" in name else "orgqr"]
                                 }[name.split("_")[0]]


def _svd_loop(a: Any) -> Any:
    """jnp.linalg.svd every step (gesdd: no step of its own)."""
    def body(i: Any, c: Any) -> Any:
        u, s, vt = jnp.linalg.svd(a + c[0] * 0.01)
        return c[0] + s[0], c[1] + jnp.abs(u[0, :5]) + jnp.abs(vt[:, 0])
    return lax.fori_loop(0, 3, body, (a * 0, a[0] * 0))


@pytest.mark.parametrize("name", ["solve_256", "svd"])
def test_lapack_calls_without_a_step_are_callbacks(name: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A solve of NATIVE_BELOW elements or more (here lowered to 256 x 256: the call's own
    time dwarfs the Python) and an SVD (gesdd) run their Python path's function from the
    native loop (loop_callback.py): the interpreter's bits."""
    from xlapy.backends.cpu import loop_callback, loop_lapack

    monkeypatch.setattr(loop_lapack, "NATIVE_BELOW", 256 * 256)
    made: list[str] = []
    real = loop_callback.entry
    monkeypatch.setattr(loop_callback, "entry", lambda keep, st, *rest: made.append(
        st.instr.attrs.call_target_name) or real(keep, st, *rest))
    fn, args = (_solve_loop, [_spd(256, np.float32), _f32(256)]) if name == "solve_256" \
        else (_svd_loop, [_f32(7, 5)])
    text = jax.jit(fn).lower(*args).as_text()
    cpu = xlapy.compile(text, backend="cpu")
    assert "native while loop" in cpu._exe.explain().split("-- called by")[0]
    _equal(cpu(*args), xlapy.compile(text, backend="interpreter")(*args))
    assert made and all(m.startswith("lapack_s") for m in made)


@pytest.mark.parametrize("dtype,n", [(np.float32, 64), (np.complex64, 64), (np.complex128, 64),
                                     (np.float32, 24)])
def test_a_solve_step_runs_lapack_on_one_openblas_thread(
        dtype: Any, n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 64 x 64 solve in a loop (lapack_threads.SERIAL_FROM: the Python path sets the
    calling thread's OpenBLAS count to 1 there) is a native step that sets it too, through
    openblas_set_num_threads_local's address (here a recording stand-in), and restores it:
    the interpreter's bits (f32 and c64 moved to and from Fortran order by transpose_lib's
    routine, c128 by the step's own loop nest). It was a callback: jax_probe's solve_64
    1.34x XLA's time. A 24 x 24 one runs on one thread either way, but sets the count too:
    OpenBLAS's workers spun beside the 16 x 16 loop (160 -> 119 us a 16-step loop), which
    small_lu.py's JIT now takes (no OpenBLAS call)."""
    import ctypes

    from xlapy.backends.cpu import loop_callback, loop_lapack
    from xlapy.ops import lapack_threads

    real = lapack_threads.scipy_setter_address()
    assert real, "scipy's OpenBLAS exports openblas_set_num_threads_local"
    setter = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(real)
    counts: list[int] = []
    record = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(
        lambda n: counts.append(n) or setter(n))
    monkeypatch.setattr(loop_lapack, "scipy_setter_address",
                        lambda: ctypes.cast(record, ctypes.c_void_p).value)
    monkeypatch.setattr(loop_callback, "entry", lambda *a: pytest.fail("a callback step"))
    args = [_spd(n, dtype), (_f32(n) + (1j * _f32(n) if dtype != np.float32 else 0)
                             ).astype(dtype)]
    text = jax.jit(_solve_loop).lower(*args).as_text()
    cpu = xlapy.compile(text, backend="cpu")
    _equal(cpu(*args), xlapy.compile(text, backend="interpreter")(*args))
    # 6 steps of a getrf and two trsms: each sets 1, then restores the count it returned
    assert len(counts) == 6 * 3 * 2 and counts[::2] == [1] * 18, counts
    assert all(n >= 1 for n in counts[1::2])
