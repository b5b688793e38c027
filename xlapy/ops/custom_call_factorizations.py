"""jaxlib's CPU LAPACK targets for the factorizations custom_call_targets.py does not cover:
Schur (gees: jax.scipy.linalg.schur, sqrtm), Hessenberg (gehrd), SVD by QR iteration (gesvd:
lax.linalg.svd with SvdAlgorithm.QR), QR with column pivoting (geqp3: qr(pivoting=True)) and
the tridiagonal reduction (sytrd / hetrd: lax.linalg.tridiagonal).

jaxlib calls these routines through scipy's cython_lapack with the workspace a workspace
query (lwork = -1) asks for; scipy's f2py defaults are minimal workspaces, which take the
unblocked paths and round differently (a 200 x 200 dgees: Schur forms 15 apart, gesvd's u
0.46). So every call here queries first and passes that workspace: the same routine, the
same arguments and the same bits as jaxlib.

Results follow the lowered text (jax/_src/lax/linalg.py): gees gives the Schur form, the
Schur vectors (zeros when mode is 'N': jaxlib leaves that buffer unwritten), the eigenvalues
(real and imaginary parts for s/d), sdim (0: sorting is not implemented, as in jaxlib) and
info; gehrd the reduced matrix with its reflectors below the subdiagonal, tau (n - 1) and
info, for the FFI's 1-based `low` / `high` (LAPACK's ilo / ihi); gesvd the operand (JAX
ignores what LAPACK leaves there), s, u, vt and info; geqp3 the factored matrix, the 1-based
column permutation (LAPACK's jpvt: a nonzero entry on entry fixes that column in front) and
tau, no info; sytrd / hetrd the reduced matrix, the real diagonal and off-diagonal, tau and
info. Leading dimensions are batch dimensions.

Each `<routine>_one` builder is shared with the cpu backend (backends/cpu/lapack.py), which
runs the same function per matrix: both give the same bits.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.linalg import lapack

from xlapy.errors import InterpreterError
from xlapy.ops.custom_call_targets import (
    _PREFIX,
    _batched,
    _char,
    _check_info,
    _config,
    _leaves,
    routine,
)
from xlapy.ops.lapack_threads import serial_target
from xlapy.ops.misc import register_custom_call
from xlapy.types import Shape

#: one(*matrices) -> the results of one batch element, and the operands' matrix ranks.
One = tuple[Callable[..., tuple[Any, ...]], list[int]]
Builder = Callable[[str, dict[str, Any], list[Shape], str], One]


def _fn(name: str, t: str) -> Callable[..., Any]:
    return lapack.get_lapack_funcs(name, dtype=np.dtype(_PREFIX[t]))


def _lwork(query: Any) -> int:
    """A workspace query's answer (work[0], or scipy's *_lwork (work, info)) as jaxlib reads
    it: the real part, truncated."""
    work = query[0] if isinstance(query, tuple) else query
    return max(1, int(np.real(np.ravel(work)[0])))


def _no_select(*_: Any) -> None:
    """gees' eigenvalue selection callback, never called when sort is 'N'."""


def gees_one(t: str, cfg: dict[str, Any], leaves: list[Shape], target: str) -> One:
    vectors = _char(cfg, "mode", "VN", "V", target) == "V"
    _char(cfg, "sort", "N", "N", target)  # jaxlib: sorting eigenvalues is unimplemented
    fn = _fn("gees", t)
    vs_shape = leaves[1].dimensions[-2:]

    def one(a: np.ndarray) -> tuple[Any, ...]:
        lw = _lwork(fn(_no_select, a, compute_v=int(vectors), lwork=-1)[-2])
        got = fn(_no_select, a, compute_v=int(vectors), lwork=lw, overwrite_a=0)
        info = _check_info(got[-1], target)
        vs = got[-3] if vectors else np.zeros(vs_shape, a.dtype)
        if t in "sd":
            schur, sdim, wr, wi = got[:4]
            return schur, vs, wr, wi, sdim, info
        schur, sdim, w = got[:3]
        return schur, vs, w, sdim, info
    return one, [2]


def _int_attr(cfg: dict[str, Any], key: str, default: int, target: str) -> int:
    value = cfg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InterpreterError(f"custom_call {target}: FFI attribute '{key}' = {value!r} is "
                               "not an integer")
    return int(value)


def gehrd_one(t: str, cfg: dict[str, Any], leaves: list[Shape], target: str) -> One:
    n = leaves[0].dimensions[-1]
    low, high = _int_attr(cfg, "low", 1, target), _int_attr(cfg, "high", n, target)
    if not (1 <= low <= max(1, n) and min(low, n) <= high <= n):
        raise InterpreterError(f"custom_call {target}: low = {low}, high = {high} must satisfy "
                               f"1 <= low <= high <= n = {n} (LAPACK's ilo, ihi)")
    fn = _fn("gehrd", t)
    # (the query answers 1 for ihi = ilo, below the max(1, n) LAPACK then demands)
    lw = max(_lwork(_fn("gehrd_lwork", t)(n, lo=low - 1, hi=high - 1)), n, 1) if n else 1

    def one(a: np.ndarray) -> tuple[Any, ...]:
        h, tau, info = fn(a, lo=low - 1, hi=high - 1, lwork=lw, overwrite_a=0)  # 0-based
        return h, tau, _check_info(info, target)
    return one, [2]


def gesvd_one(t: str, cfg: dict[str, Any], leaves: list[Shape], target: str) -> One:
    m, n = leaves[0].dimensions[-2:]
    full = leaves[2].dimensions[-2:] == (m, m) and leaves[3].dimensions[-2:] == (n, n)
    mode = _char(cfg, "mode", "ASN", "A" if full else "S", target)
    fn = _fn("gesvd", t)
    uv = dict(compute_uv=int(mode != "N"), full_matrices=int(mode == "A"))
    lw = _lwork(_fn("gesvd_lwork", t)(m, n, **uv)) if m and n else 1
    u_shape, vt_shape = leaves[2].dimensions[-2:], leaves[3].dimensions[-2:]

    def one(a: np.ndarray) -> tuple[Any, ...]:
        u, s, vt, info = fn(a, lwork=lw, overwrite_a=0, **uv)
        if mode == "N":  # jaxlib leaves u and vt unwritten
            u, vt = np.zeros(u_shape, a.dtype), np.zeros(vt_shape, a.dtype)
        return a, s, u, vt, _check_info(info, target)
    return one, [2]


def geqp3_one(t: str, cfg: dict[str, Any], leaves: list[Shape], target: str) -> One:
    """LAPACK's ?geqp3 through the pointer scipy's cython_lapack exports (what jaxlib calls):
    scipy's f2py wrapper ignores an incoming jpvt, which fixes columns."""
    from scipy.linalg import cython_lapack

    cplx = t in "cz"
    fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (10 if cplx else 9))(
        routine(cython_lapack, f"{t}geqp3"))
    dt = np.dtype(_PREFIX[t])

    def call(ints: np.ndarray, a: np.ndarray, jpvt: np.ndarray, tau: np.ndarray,
             work: np.ndarray, rwork: np.ndarray) -> None:
        at = ints.ctypes.data  # m, n, lda, lwork, info
        ptrs = [at, at + 4, a.ctypes.data, at + 8, jpvt.ctypes.data, tau.ctypes.data,
                work.ctypes.data, at + 12]
        fn(*ptrs, *([rwork.ctypes.data] if cplx else []), at + 16)

    def one(a: np.ndarray, jpvt: np.ndarray) -> tuple[Any, ...]:
        m, n = a.shape
        x = np.array(a, dtype=dt, order="F", copy=True)
        p = np.array(jpvt, dtype=np.int32, copy=True)
        tau = np.zeros(min(m, n), dt)
        rwork = np.zeros(2 * n, dt.type(0).real.dtype)
        ints = np.array([m, n, max(m, 1), -1, 0], np.int32)
        query = np.zeros(1, dt)
        call(ints, x, p, tau, query, rwork)
        _check_info(int(ints[4]), target)
        ints[3] = _lwork(query)
        call(ints, x, p, tau, np.zeros(int(ints[3]), dt), rwork)
        _check_info(int(ints[4]), target)
        return x, p, tau
    return one, [2, 1]


def sytrd_one(t: str, cfg: dict[str, Any], leaves: list[Shape], target: str) -> One:
    lower = int(_char(cfg, "uplo", "LU", "L", target) == "L")
    name = "sytrd" if t in "sd" else "hetrd"
    n = leaves[0].dimensions[-1]
    fn = _fn(name, t)
    lw = _lwork(_fn(f"{name}_lwork", t)(n, lower=lower)) if n else 1

    def one(a: np.ndarray) -> tuple[Any, ...]:
        c, d, e, tau, info = fn(a, lower=lower, lwork=lw, overwrite_a=0)
        return c, d, e, tau, _check_info(info, target)
    return one, [2]


#: routine name (as in the target) -> its one-matrix builder.
BUILDERS: dict[str, Builder] = {
    "gees": gees_one, "gehrd": gehrd_one, "gesvd": gesvd_one, "geqp3": geqp3_one,
    "sytrd": sytrd_one, "hetrd": sytrd_one,
}


def _target(name: str, t: str) -> Callable[..., Any]:
    target = f"lapack_{t}{name}_ffi"

    def run(operands: list[Any], result: Shape, attrs: Any) -> Any:
        leaves = _leaves(result)
        one, ranks = BUILDERS[name](t, _config(attrs), leaves, target)
        return _batched(one, operands, leaves, ranks)
    return run


for _t in "sdcz":
    for _name in ("gees", "gehrd", "gesvd", "geqp3", "sytrd" if _t in "sd" else "hetrd"):
        register_custom_call(f"lapack_{_t}{_name}_ffi", serial_target(_target(_name, _t)))
