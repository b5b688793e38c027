# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""jaxlib's LAPACK custom calls and the cholesky op inside objects (xlapy/aot/lapack*.py):
every routine, every type (s, d, c, z; geev: eigenvalues only), batched, wide and tall, upper and lower, failing
factorizations, compared with JAX (custom calls: the programs are JAX lowerings) or the
interpreter (the cholesky op, which JAX does not emit on the CPU), on the host and a sample
on aarch64 under qemu.

Tolerances are the JAX suite's for linear algebra (tests/differential/jax_programs:
inexact(dtype, 100) for f32 / c64, inexact(F64, 1000) for f64 / c128): the same routines
computed in another order (unblocked loops, Jacobi rotations) differ from LAPACK's by a
small multiple of the backward error, ~n eps |A| over the condition number. Eigen- and
singular vectors are compared after fixing each one's unit factor (tests/aot/phases.py);
where they are not unique (a null space), programs return what is: s, u s vh, u^H u.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tests.aot.compare import mismatch
from tests.aot.phases import align
from tests.differential.compare import assert_same, jax_x64
from tests.differential.jax_programs.table import C64, C128, F32, F64, inexact
from xlapy.aot import Unimplemented, driver
from xlapy.aot import compile as aot_compile
from xlapy.backends.cpu import objfile, rtlib

jax = jax_x64()
jnp = jax.numpy
lax = jax.lax

gcc = pytest.mark.skipif(driver.tool("gcc") is None, reason="gcc is not installed (Debian: gcc)")
ARM_TOOLS = ("aarch64-linux-gnu-gcc", "qemu-aarch64")
QEMU = ("qemu-aarch64", "-L", "/usr/aarch64-linux-gnu")


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def mat(shape: tuple[int, ...], dt: np.dtype, seed: int = 0) -> np.ndarray:
    r = _rng(seed)
    x = r.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * r.standard_normal(shape)
    return x.astype(dt)


def hpd(n: int, dt: np.dtype, batch: tuple[int, ...] = (), seed: int = 1) -> np.ndarray:
    """A Hermitian positive definite matrix (batch)."""
    x = mat((*batch, n, n), dt, seed)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)).astype(dt)


def tol(dt: np.dtype) -> tuple[float, float]:
    return inexact(F64, 1000) if np.dtype(dt) in (F64, C128) else inexact(F32, 100)


def svd_invariants(full: bool) -> Callable[..., Any]:
    """s, u s vh (the rank-k reconstruction) and u^H u, vh vh^H: unique where u and vh are
    not (zero singular values, the completed columns of full_matrices)."""
    def f(a: Any) -> Any:
        u, s, vh = jnp.linalg.svd(a, full_matrices=full)
        k = s.shape[-1]
        us = u[..., :k] * s[..., None, :].astype(u.dtype)
        eye_u = jnp.conj(jnp.swapaxes(u, -1, -2)) @ u
        eye_v = vh @ jnp.conj(jnp.swapaxes(vh, -1, -2))
        return s, us @ vh[..., :k, :], eye_u, eye_v
    return f


#: (id, function, arguments, vectors spec for phases.align or None).
CASES: list[tuple[str, Callable[..., Any], tuple[np.ndarray, ...], Any]] = [
    ("potrf_c128_batched", jnp.linalg.cholesky, (hpd(4, C128, (2,)),), None),
    ("potrf_f64_upper", lambda a: jnp.linalg.cholesky(a, upper=True), (hpd(5, F64),), None),
    ("potrf_c64_upper", lambda a: jnp.linalg.cholesky(a, upper=True), (hpd(3, C64),), None),
    ("potrf_f32_not_pd", jnp.linalg.cholesky,
     (np.stack([hpd(3, F32), np.diag([1.0, -1.0, 2.0]).astype(F32)]),), None),
    ("getrf_f64_wide", lax.linalg.lu, (mat((3, 5), F64),), None),
    ("getrf_c64_tall", lax.linalg.lu, (mat((5, 3), C64),), None),
    ("getrf_c128_batched", lax.linalg.lu, (mat((2, 4, 4), C128),), None),
    ("getrf_f32_singular", lax.linalg.lu,
     (np.array([[1, 2, 3], [2, 4, 6], [1, 0, 1]], F32),), None),
    ("solve_c128", jnp.linalg.solve, (mat((4, 4), C128) + 4 * np.eye(4), mat((4, 2), C128, 3)), None),
    ("trsm_c64_right_upper_adjoint_batched", lambda a, b: lax.linalg.triangular_solve(
        a, b, left_side=False, lower=False, transpose_a=True, conjugate_a=True),
     (np.triu(hpd(3, C64, (2,))), mat((2, 4, 3), C64)), None),
    ("geqrf_c64_wide_complete", lambda a: jnp.linalg.qr(a, mode="complete"),
     (mat((3, 5), C64),), None),
    ("geqrf_f64_tall_complete", lambda a: jnp.linalg.qr(a, mode="complete"),
     (mat((5, 3), F64),), None),
    ("geqrf_c128_batched", jnp.linalg.qr, (mat((2, 4, 3), C128),), None),
    ("geqrf_f32_r", lambda a: jnp.linalg.qr(a, mode="r"), (mat((4, 6), F32),), None),
    ("syevd_c128_batched", lambda a: jnp.linalg.eigh(a), (hpd(4, C128, (2,)),),
     ("columns", 1)),
    ("syevd_f64_upper", lambda a: lax.linalg.eigh(a, lower=False), (hpd(5, F64),),
     ("columns", 0)),
    ("syevd_f32_indefinite", jnp.linalg.eigh,
     ((mat((4, 4), F32) + mat((4, 4), F32).T),), ("columns", 1)),
    ("heevd_c64_values", jnp.linalg.eigvalsh, (hpd(3, C64),), None),
    ("gesdd_c64_wide", lambda a: jnp.linalg.svd(a, full_matrices=False),
     (mat((3, 5), C64),), ("svd", 0, 2)),
    ("gesdd_c64_wide_full", svd_invariants(True), (mat((3, 5), C64),), None),
    ("gesdd_c128_tall_reduced", lambda a: jnp.linalg.svd(a, full_matrices=False),
     (mat((5, 3), C128),), ("svd", 0, 2)),
    ("gesdd_f64_batched_wide_full", svd_invariants(True), (mat((2, 3, 6), F64),), None),
    ("gesdd_f64_tall_full", svd_invariants(True), (mat((6, 3), F64),), None),
    ("gesdd_f32_rank_deficient", svd_invariants(True),
     ((mat((5, 2), F32) @ mat((2, 4), F32, 5)),), None),
    ("gesdd_c64_values", lambda a: jnp.linalg.svd(a, compute_uv=False), (mat((4, 3), C64),), None),
    # geev, eigenvalues only: LAPACK's order (balancing permutations, the Schur form's)
    ("geev_f64_random", jnp.linalg.eigvals, (mat((7, 7), F64),), None),
    ("geev_f32_batched", jnp.linalg.eigvals, (mat((2, 5, 5), F32),), None),
    ("geev_f64_triangular", jnp.linalg.eigvals, (np.triu(mat((5, 5), F64, 3)),), None),
    ("geev_f64_block_triangular", jnp.linalg.eigvals,
     (np.block([[mat((3, 3), F64, 8), mat((3, 2), F64, 9)],
                [np.zeros((2, 3)), mat((2, 2), F64, 10)]]),), None),
    ("geev_f64_badly_scaled", jnp.linalg.eigvals,
     (mat((5, 5), F64, 11) * np.array([1e-6, 1, 1e6, 1, 1e3])[:, None],), None),
    ("geev_f64_rotation", jnp.linalg.eigvals,
     (np.array([[0, -1, 0], [1, 0, 0], [0, 0, 2]], F64),), None),
    ("geev_c64_random", jnp.linalg.eigvals, (mat((6, 6), C64),), None),
    ("geev_c128_batched", jnp.linalg.eigvals, (mat((2, 4, 4), C128, 5),), None),
    ("geev_c128_triangular", jnp.linalg.eigvals, (np.triu(mat((5, 5), C128, 3)),), None),
    ("geev_c128_badly_scaled", jnp.linalg.eigvals,
     (mat((5, 5), C128, 11) * np.array([1e-6, 1, 1e6, 1, 1e3])[:, None],), None),
]


def _lowered(fn: Callable[..., Any], args: tuple[np.ndarray, ...]) -> tuple[str, list[np.ndarray]]:
    low = jax.jit(fn).lower(*args)
    out = low.compile()(*args)
    return low.as_text(), [np.asarray(x) for x in jax.tree_util.tree_leaves(out)]


def _sweep(tmp: Path, target: str | None = None, cc: str = "gcc",
           runner: tuple[str, ...] = (), step: int = 1) -> None:
    cases = CASES[::step]
    objs, refs = [], []
    for k, (_, fn, args, _) in enumerate(cases):
        text, ref = _lowered(fn, args)
        objs.append(aot_compile(text, name=f"la{k}", target=target))
        refs.append(ref)
    exe = driver.build(objs, tmp, cc=cc)
    got = driver.run(objs, {o.name: list(c[2]) for o, c in zip(objs, cases)}, tmp, exe,
                     runner=runner)
    for o, (cid, _, args, spec), ref in zip(objs, cases, refs):
        res = got[o.name]
        assert not isinstance(res, int), f"{cid}: error {res}"
        assert len(res) == len(ref), cid
        rtol, atol = tol(args[0].dtype)
        for j, (g, r) in enumerate(zip(align(spec, res, ref), ref)):
            assert_same(g, r, rtol=rtol, atol=atol, what=f"{cid} result {j}")


@gcc
def test_custom_calls_match_jax(tmp_path: Path) -> None:
    _sweep(tmp_path)


@gcc
def test_custom_calls_on_baseline_x86_64(tmp_path: Path) -> None:
    """Objects for x86-64-v2 (no AVX, no FMA: other contractions) match too."""
    _sweep(tmp_path, "x86-64-v2", step=2)


def test_custom_calls_on_aarch64_under_qemu(tmp_path: Path) -> None:
    missing = [t for t in ARM_TOOLS if driver.tool(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: `make aot-tools`")
    _sweep(tmp_path, "aarch64-linux-gnu", "aarch64-linux-gnu-gcc", QEMU, step=3)


def _cholesky(dt: str, shape: str, lower: bool) -> str:
    t = f"tensor<{shape}x{dt}>"
    return f"""
func.func @main(%a: {t}) -> {t} {{
  %0 = "stablehlo.cholesky"(%a) {{lower = {str(lower).lower()}}} : ({t}) -> {t}
  return %0 : {t}
}}
"""


#: The cholesky op against the interpreter: (program, argument).
CHOLESKY = [
    (_cholesky("f32", "3x3", True), hpd(3, F32)),
    (_cholesky("f64", "2x4x4", False), hpd(4, F64, (2,))),
    (_cholesky("complex<f32>", "3x3", True), hpd(3, C64)),
    (_cholesky("complex<f64>", "3x3", False), hpd(3, C128)),
    (_cholesky("bf16", "3x3", True), hpd(3, F32).astype(ml_dtypes.bfloat16)),
    (_cholesky("f32", "2x3x3", True),  # the second matrix is not positive definite: NaN
     np.stack([hpd(3, F32), np.diag([1.0, -1.0, 2.0]).astype(F32)])),
]


@gcc
def test_cholesky_op_matches_interpreter(tmp_path: Path) -> None:
    cases = CHOLESKY
    objs = [aot_compile(p, name=f"chol{k}") for k, (p, _) in enumerate(cases)]
    exe = driver.build(objs, tmp_path)
    got = driver.run(objs, {o.name: [a] for o, (_, a) in zip(objs, cases)}, tmp_path, exe)
    for o, (p, a) in zip(objs, cases):
        ref = np.asarray(xlapy.compile(p, backend="interpreter")(a))
        res = got[o.name]
        assert not isinstance(res, int), f"{o.name}: error {res}"
        assert mismatch(res[0], ref) is None, f"{o.name}: {mismatch(res[0], ref)}"
    nan = got[objs[-1].name][0][1]
    assert np.isnan(nan[np.tril_indices(3)]).all() and not np.triu(nan, 1).any()


@pytest.mark.parametrize("dt", [F64, C64])
def test_geev_eigenvectors_are_refused(dt: np.dtype) -> None:
    text, _ = _lowered(jnp.linalg.eig, (mat((3, 3), dt),))
    with pytest.raises(Unimplemented, match="eigenvectors"):
        aot_compile(text, name="refused")


@pytest.mark.parametrize("target", ["aarch64-linux-gnu"])
def test_objects_need_only_libc_libm(target: str) -> None:
    """Every routine in one object: nothing undefined beyond libc / libm. For aarch64, whose
    objects the qemu sweep may not link (no cross gcc); x86 objects are linked by gcc with
    libc and libm alone in the sweeps above (host and x86-64-v2), which fail on anything
    else (an x86-64-v3 object of everything here was 39 s of CI on Zen 3)."""
    fns = [fn for _, fn, _, _ in CASES]
    args = [a for _, _, a, _ in CASES]

    def everything(*xs: Any) -> Any:
        out, at = [], 0
        for fn, a in zip(fns, args):
            out.append(fn(*xs[at:at + len(a)]))
            at += len(a)
        return out

    text, _ = _lowered(everything, tuple(x for a in args for x in a))
    o = aot_compile(text, name="all_lapack", target=target)
    assert set(o.undefined) <= set(rtlib.LIBC) | set(rtlib.LIBM), (target, o.undefined)
    exported = {s.name for s in objfile.symbols(o.object) if s.defined and s.binding == 1}
    assert exported == {"all_lapack_run", "all_lapack_run_threaded"}
