"""xlapy/ops/custom_call_targets.py (jaxlib's lapack_*_ffi targets): every FFI attribute value
the targets accept, on small hand-written modules checked against numpy/scipy, and a clear
error for a missing or unknown attribute value. The linalg programs of test_jax_programs.py
check the same targets end to end against JAX.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import scipy.linalg

from tests.differential.compare import jax_x64
from tests.differential.jax_programs import model_programs
from tests.differential.jax_programs.runner import lower, run_ours

jax_x64()

_RNG = np.random.default_rng(7)


def _module(target: str, config: str, operands: list[str], results: list[str]) -> str:
    """A module calling `target` once on its parameters, returning every result."""
    params = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(operands))
    args = ", ".join(f"%arg{i}" for i in range(len(operands)))
    n = len(results)
    outs = ", ".join(f"%0#{i}" for i in range(n)) if n > 1 else "%0"
    lhs = f"%0:{n}" if n > 1 else "%0"
    res = f"({', '.join(results)})" if n > 1 else results[0]
    return (f"module @m {{\n  func.func public @main({params}) -> ({', '.join(results)}) {{\n"
            f"    {lhs} = stablehlo.custom_call @{target}({args}) {{mhlo.backend_config = "
            f"{{{config}}}}} : ({', '.join(operands)}) -> {res}\n"
            f"    return {outs} : {', '.join(results)}\n  }}\n}}\n")


def _trsm_reference(a: np.ndarray, b: np.ndarray, side: str, uplo: str, trans: str,
                    diag: str) -> np.ndarray:
    """What BLAS ?trsm computes: only the `uplo` triangle of `a` is read, a unit diagonal
    replaces the stored one, op(a) is a, a^T or a^H."""
    t = np.tril(a) if uplo == "L" else np.triu(a)
    if diag == "U":
        t = t - np.diag(np.diag(t)) + np.eye(len(t), dtype=a.dtype)
    op = {"N": t, "T": t.T, "C": np.conj(t.T)}[trans]
    return np.linalg.solve(op, b) if side == "L" else np.linalg.solve(op.T, b.T).T


_TRSM_CASES = list(itertools.product("LR", "LU", "NTC", "NU", ("d", "z")))


@pytest.mark.parametrize(("side", "uplo", "trans", "diag", "t"), _TRSM_CASES,
                         ids=["".join(c) for c in _TRSM_CASES])
def test_trsm_attributes(side: str, uplo: str, trans: str, diag: str, t: str) -> None:
    dtype = np.float64 if t == "d" else np.complex128
    ty = "f64" if t == "d" else "complex<f64>"
    a = _RNG.uniform(-1, 1, (3, 3)) + 4 * np.eye(3)  # both triangles set: one must be ignored
    b = _RNG.uniform(-1, 1, (3, 2) if side == "L" else (2, 3))
    if t == "z":
        a = a + 1j * _RNG.uniform(-1, 1, a.shape)
        b = b + 1j * _RNG.uniform(-1, 1, b.shape)
    a, b = a.astype(dtype), b.astype(dtype)
    config = (f"diag = {ord(diag)} : ui8, side = {ord(side)} : ui8, trans_x = {ord(trans)} : ui8,"
              f" uplo = {ord(uplo)} : ui8")
    bty = f"tensor<{'x'.join(map(str, b.shape))}x{ty}>"
    text = _module(f"lapack_{t}trsm_ffi", config, [f"tensor<3x3x{ty}>", bty], [bty])
    (got,) = run_ours(text, (a, b))
    np.testing.assert_allclose(got, _trsm_reference(a, b, side, uplo, trans, diag),
                               rtol=1e-12, atol=1e-13)


def _jax_trsm_text() -> tuple[str, tuple[np.ndarray, ...]]:
    program = next(p for p in model_programs.programs() if p.id == "linalg.triangular_solve[f32]")
    return lower(program).text, program.args


def test_trsm_missing_attribute_is_a_clear_error() -> None:
    from xlapy.errors import InterpreterError

    text, args = _jax_trsm_text()
    stripped = re.sub(r"side = \d+ : ui8, ", "", text)
    assert stripped != text
    with pytest.raises(InterpreterError, match="needs the FFI attribute 'side'"):
        run_ours(stripped, args)


@pytest.mark.parametrize("key", ["side", "uplo", "trans_x", "diag"])
def test_trsm_unknown_attribute_value_is_a_clear_error(key: str) -> None:
    from xlapy.errors import InterpreterError

    text, args = _jax_trsm_text()
    bad = re.sub(rf"\b{key} = \d+ : ui8", f"{key} = 88 : ui8", text)  # 'X'
    assert bad != text
    with pytest.raises(InterpreterError, match=f"FFI attribute '{key}' = 88 is not one of"):
        run_ours(bad, args)


@pytest.mark.parametrize("uplo", "LU")
def test_potrf_reads_the_uplo_triangle(uplo: str) -> None:
    m = _RNG.uniform(-1, 1, (3, 3))
    spd = m @ m.T + 3 * np.eye(3)
    a = np.tril(spd) + np.triu(_RNG.uniform(5, 6, (3, 3)), 1) if uplo == "L" \
        else np.triu(spd) + np.tril(_RNG.uniform(5, 6, (3, 3)), -1)  # other triangle: garbage
    text = _module("lapack_dpotrf_ffi", f"uplo = {ord(uplo)} : ui8", ["tensor<3x3xf64>"],
                   ["tensor<3x3xf64>", "tensor<i32>"])
    c, info = run_ours(text, (a,))
    assert int(info) == 0
    want = scipy.linalg.cholesky(spd, lower=uplo == "L")
    part = np.tril if uplo == "L" else np.triu
    np.testing.assert_allclose(part(c), want, rtol=1e-12, atol=1e-13)
    # jaxlib leaves the other triangle as it was; JAX masks it afterwards
    np.testing.assert_array_equal(c - part(c), a - part(a))


def test_potrf_not_positive_definite_reports_info() -> None:
    text = _module("lapack_dpotrf_ffi", "uplo = 76 : ui8", ["tensor<2x2xf64>"],
                   ["tensor<2x2xf64>", "tensor<i32>"])
    _, info = run_ours(text, (np.array([[1.0, 2.0], [2.0, 1.0]]),))
    assert int(info) == 2


@pytest.mark.parametrize("uplo", "LU")
def test_syevd_reads_the_uplo_triangle(uplo: str) -> None:
    a = _RNG.uniform(-1, 1, (4, 4))  # not symmetric: only the `uplo` triangle counts
    text = _module("lapack_dsyevd_ffi", f"mode = 86 : ui8, uplo = {ord(uplo)} : ui8",
                   ["tensor<4x4xf64>"], ["tensor<4x4xf64>", "tensor<4xf64>", "tensor<i32>"])
    v, w, info = run_ours(text, (a,))
    assert int(info) == 0
    sym = np.tril(a) + np.tril(a, -1).T if uplo == "L" else np.triu(a) + np.triu(a, 1).T
    np.testing.assert_allclose(w, np.linalg.eigvalsh(sym), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(sym @ v, v * w, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("target", "config"), [
    ("lapack_dpotrf_ffi", "uplo = 81 : ui8"),
    ("lapack_dsyevd_ffi", "mode = 86 : ui8, uplo = 81 : ui8"),
    ("lapack_dsyevd_ffi", "mode = 81 : ui8, uplo = 76 : ui8"),
])
def test_unknown_uplo_or_mode_is_a_clear_error(target: str, config: str) -> None:
    from xlapy.errors import InterpreterError

    results = (["tensor<2x2xf64>", "tensor<i32>"] if "potrf" in target
               else ["tensor<2x2xf64>", "tensor<2xf64>", "tensor<i32>"])
    text = _module(target, config, ["tensor<2x2xf64>"], results)
    with pytest.raises(InterpreterError, match="= 81 is not one of"):
        run_ours(text, (np.eye(2),))


@pytest.mark.parametrize("t", "dz")
def test_geqp3_fixed_columns_match_jax(t: str) -> None:
    """A nonzero jpvt entry on entry moves that column in front (LAPACK's and jaxlib's
    geqp3; scipy's f2py wrapper would ignore it): pivots and factors as JAX gives them."""
    import jax
    from jax._src.lax import linalg as jlinalg

    a = _RNG.uniform(-1, 1, (6, 5))
    a = (a + 1j * _RNG.uniform(-1, 1, a.shape)) if t == "z" else a
    jpvt = np.array([0, 0, 1, 0, 1], np.int32)
    fn = jax.jit(jlinalg.geqp3)
    lowered = fn.lower(a, jpvt)
    want = [np.asarray(v) for v in lowered.compile()(a, jpvt)]
    got = run_ours(lowered.as_text(), (a, jpvt))
    assert list(got[1][:2]) == [3, 5]  # the fixed columns first (1-based)
    for backend in (None, "cpu"):
        got = run_ours(lowered.as_text(), (a, jpvt), backend)
        np.testing.assert_array_equal(got[1], want[1])
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize(("low", "high"), [(1, 5), (2, 4), (3, 3)])
def test_gehrd_low_high_are_lapacks_1_based_ilo_ihi(low: int, high: int) -> None:
    a = _RNG.uniform(-1, 1, (5, 5))
    text = _module("lapack_dgehrd_ffi", f"high = {high} : i32, low = {low} : i32",
                   ["tensor<5x5xf64>"], ["tensor<5x5xf64>", "tensor<4xf64>", "tensor<i32>"])
    h, tau, info = run_ours(text, (a,))
    want_h, want_tau, want_info = scipy.linalg.lapack.dgehrd(a, lo=low - 1, hi=high - 1)
    assert int(info) == want_info == 0
    np.testing.assert_allclose(h, want_h, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(tau, want_tau, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize(("target", "config", "results", "match"), [
    ("lapack_dgehrd_ffi", "high = 3 : i32, low = 4 : i32",
     ["tensor<3x3xf64>", "tensor<2xf64>", "tensor<i32>"], "low = 4, high = 3"),
    ("lapack_dgees_ffi", "mode = 86 : ui8, sort = 83 : ui8",
     ["tensor<3x3xf64>", "tensor<3x3xf64>", "tensor<3xf64>", "tensor<3xf64>", "tensor<i32>",
      "tensor<i32>"], "'sort' = 83 is not one of 'N'"),
    ("lapack_dgesvd_ffi", "mode = 79 : ui8",
     ["tensor<3x3xf64>", "tensor<3xf64>", "tensor<3x3xf64>", "tensor<3x3xf64>", "tensor<i32>"],
     "'mode' = 79 is not one of"),
])
def test_factorization_attribute_errors(target: str, config: str, results: list[str],
                                        match: str) -> None:
    """gehrd's range outside 1 <= low <= high <= n, gees' eigenvalue sorting (jaxlib does
    not implement it) and gesvd's overwrite mode 'O' (JAX never emits it) are clear errors."""
    from xlapy.errors import InterpreterError

    text = _module(target, config, ["tensor<3x3xf64>"], results)
    for backend in (None, "cpu"):
        with pytest.raises(InterpreterError, match=match):
            run_ours(text, (np.eye(3),), backend)
