"""jaxlib's CPU custom-call targets (`lapack_<t><routine>_ffi`), so linalg programs that JAX
lowers for the CPU run: cholesky (potrf), LU (getrf), QR (geqrf + orgqr/ungqr), symmetric and
Hermitian eigendecomposition (syevd/heevd), SVD (gesdd), general eigenvalues (geev),
triangular solves (trsm) and tridiagonal solves (gtsv). Schur (gees), Hessenberg (gehrd), SVD
by QR iteration (gesvd), pivoted QR (geqp3) and the tridiagonal reduction (sytrd / hetrd) are
in custom_call_factorizations.py.

jaxlib's kernels call the LAPACK that scipy ships (scipy.linalg.cython_lapack), so calling the
same routines through scipy.linalg.lapack reproduces them. Operand/result conventions follow
the lowered text (jax/_src/lax/linalg.py, jaxlib/cpu/lapack_kernels.cc): leading dimensions
are batch dimensions; the layouts ({0, 1} minor-to-major, column-major) only describe the
physical buffer, so the logical matrices are used as they are. getrf returns 1-based pivots
(LAPACK's ipiv); geqrf/orgqr return no info; the first gesdd result is the overwritten
operand, which JAX ignores.

The FFI attributes (`mhlo.backend_config = {uplo = 76 : ui8, ...}`, LAPACK's characters as
ui8 codes) arrive in `attrs.mhlo_backend_config`. Where a module lacks one, the value JAX always
emits is assumed (potrf/syevd lower, syevd computes vectors; gesdd's mode follows the result
shapes); trsm has no such default and needs all four. A value outside LAPACK's choices is a
clear error rather than a silent default. Triangular solves run BLAS's ?trsm
(scipy.linalg.blas), which is what jaxlib calls.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.linalg import blas, lapack

from xlapy.errors import InterpreterError
from xlapy.ops.lapack_threads import serial_target
from xlapy.ops.misc import register_custom_call
from xlapy.types import Shape

_PREFIX = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


def _leaves(result: Shape) -> list[Shape]:
    return list(result.tuple_shapes) if result.is_tuple else [result]


def _config(attrs: Any) -> dict[str, Any]:
    """The FFI attributes as a dict (empty when the front door did not keep them)."""
    raw = getattr(attrs, "mhlo_backend_config", None)
    if not raw:
        return {}
    return dict(raw) if not isinstance(raw, dict) else raw


def _char(cfg: dict[str, Any], key: str, allowed: str, default: str | None,
          target: str) -> str:
    """An FFI `ui8` attribute as its LAPACK character ('L', 'N', ...), one of `allowed`."""
    if key not in cfg:
        if default is None:
            raise InterpreterError(f"custom_call {target}: needs the FFI attribute '{key}' "
                                   "(mhlo.backend_config), which this module does not carry")
        return default
    value = cfg[key]
    try:
        ch = value if isinstance(value, str) else chr(int(value))
    except (TypeError, ValueError, OverflowError):
        ch = ""
    if len(ch) != 1 or ch not in allowed:
        raise InterpreterError(f"custom_call {target}: FFI attribute '{key}' = {value!r} is "
                               f"not one of {', '.join(f'{c!r} ({ord(c)})' for c in allowed)}")
    return ch


def _lapack(name: str, dtype: Any) -> Callable[..., Any]:
    return lapack.get_lapack_funcs(name, dtype=np.dtype(dtype))


@functools.lru_cache(maxsize=256)
def qr_lwork(routine: str, t: str, m: int, n: int, k: int) -> int:
    """lwork of ?geqrf / ?orgqr / ?ungqr (`routine`, type letter t) for an m x n matrix and k
    reflectors: LAPACK's own workspace query (lwork = -1), the blocked algorithm's, as
    jaxlib's kernels ask. f2py's default max(3 n, 1) ran both blocked 3 columns at a time:
    sgeqrf / sorgqr of 1024 x 512 26 ms each against 10 with the query's 16384. The
    interpreter and the cpu backend pass the same value: the same blocking, the same bits."""
    least = max(3 * n, 1)
    if min(m, n, k) <= 0:
        return least
    dt = _PREFIX[t]
    a = np.zeros((m, n), dt, order="F")
    fn = _lapack(routine, dt)
    if routine == "geqrf":
        _, _, work, info = fn(a, lwork=-1)
    else:
        _, work, info = fn(a, np.zeros(k, dt), lwork=-1)
    return max(least, int(np.real(work[0]))) if info == 0 else least


_GET_NAME = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
    ("PyCapsule_GetName", ctypes.pythonapi))
_GET_POINTER = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def routine(module: Any, name: str) -> int:
    """The address scipy's cython module exports for routine `name` (e.g. sgetrf): the
    LAPACK and BLAS jaxlib calls."""
    capsule = module.__pyx_capi__[name]
    return int(_GET_POINTER(capsule, _GET_NAME(capsule)))


def _batched(fn: Callable[..., tuple[Any, ...]], operands: Sequence[np.ndarray],
             leaves: Sequence[Shape], matrix_ranks: Sequence[int]) -> tuple[np.ndarray, ...]:
    """Run `fn(*matrices)` for every batch index; results are stacked into `leaves`."""
    outs = [np.empty(s.dimensions, s.dtype) for s in leaves]
    batch = operands[0].shape[:operands[0].ndim - matrix_ranks[0]]
    for idx in np.ndindex(*batch):
        if operands[0][idx].size == 0:
            got = empty_matrix_results([o[idx] for o in outs])
        else:
            got = fn(*(o[idx] for o in operands))
        for out, value in zip(outs, got):
            out[idx] = np.asarray(value).astype(out.dtype, copy=False).reshape(out[idx].shape)
    return tuple(outs)


def empty_matrix_results(outs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The results for an empty matrix, which LAPACK refuses (a leading dimension of 0 is an
    illegal argument, printed to stderr): square results are identities (gesdd's u and vt, as
    jnp.linalg.svd gives), the rest zeros (empty arrays and info = 0)."""
    return [np.eye(o.shape[0], dtype=o.dtype) if o.ndim == 2 and o.shape[0] == o.shape[1]
            else np.zeros(o.shape, o.dtype) for o in outs]


def _check_info(info: int, target: str) -> int:
    if info < 0:
        raise InterpreterError(f"custom_call {target}: LAPACK argument {-info} is invalid")
    return info


def potrf_uplo(lower: bool) -> str:
    """?potrf's uplo for a row-major matrix: LAPACK reads it as its transpose (conj(a) for a
    Hermitian a), whose factor in the other triangle, read back row-major, is a's (a = L L^H
    from conj(a) = U^H U with L = U^T; likewise upper). No transposing copies; every backend
    calls it so (the same bits), jaxlib's column-major call equal up to rounding."""
    return "U" if lower else "L"


def potrf_one(t: str, lower: bool) -> Callable[[np.ndarray], tuple[np.ndarray, int]]:
    """One Cholesky factor (the other triangle as given) and LAPACK's info, through scipy's
    f2py ?potrf as `potrf_uplo` says (a.T is a column-major view: f2py copies it as is)."""
    fn = _lapack("potrf", _PREFIX[t])
    flipped = potrf_uplo(lower) == "L"

    def one(a: np.ndarray) -> tuple[np.ndarray, int]:
        c, info = fn(a.T, lower=flipped, clean=0, overwrite_a=0)
        return c.T, info
    return one


def _potrf(t: str) -> Callable[..., Any]:
    target = f"lapack_{t}potrf_ffi"

    def run(operands: list[Any], result: Shape, attrs: Any) -> Any:
        lower = _char(_config(attrs), "uplo", "LU", "L", target) == "L"
        factor = potrf_one(t, lower)

        def one(a: np.ndarray) -> tuple[Any, ...]:
            c, info = factor(a)
            return c, _check_info(info, target)
        return _batched(one, operands, _leaves(result), [2])
    return run


def _getrf(t: str) -> Callable[..., Any]:
    target = f"lapack_{t}getrf_ffi"

    def run(operands: list[Any], result: Shape, attrs: Any) -> Any:
        fn = _lapack("getrf", _PREFIX[t])

        def one(a: np.ndarray) -> tuple[Any, ...]:
            lu, piv, info = fn(a, overwrite_a=0)
            return lu, piv + 1, _check_info(info, target)  # scipy's pivots are 0-based
        return _batched(one, operands, _leaves(result), [2])
    return run


def _geqrf(t: str) -> Callable[..., Any]:
    target = f"lapack_{t}geqrf_ffi"

    def run(operands: list[Any], result: Shape, attrs: Any) -> Any:
        fn = _lapack("geqrf", _PREFIX[t])

        def one(a: np.ndarray) -> tuple[Any, ...]:
            m, n = a.shape
            qr, tau, _, info = fn(a, lwork=qr_lwork("geqrf", t, m, n, min(m, n)),
                                  overwrite_a=0)
            _check_info(info, target)
            return qr, tau
        return _batched(one, operands, _leaves(result), [2])
    return run


def _orgqr(t: str) -> Callable[..., Any]:
    name = "orgqr" if t in "sd" else "ungqr"
    target = f"lapack_{t}{name}_ffi"

    def run(operands: list[Any], result: Shape, attrs: Any) -> Any:
        fn = _lapack(name, _PREFIX[t])

        def one(a: np.ndarray, tau: np.ndarray) -> tuple[Any, ...]:
            m, n = a.shape
            q, _, info = fn(a, tau, lwork=qr_lwork(name, t, m, n, tau.shape[-1]),
                            overwrite_a=0)
            _check_info(info, target)
            return (q,)
        return _batched(one, operands, _leaves(result), [2, 1])[0]
    return run


def _syevd(t: str) -> Callable[..., Any]:
    name = "syevd" if t in "sd" else "heevd"
    target = f"lapack_{t}{name}_ffi"

    def run(operands: list[Any], result: Shape, attrs: Any) -> Any:
        cfg = _config(attrs)
        lower = _char(cfg, "uplo", "LU", "L", target) == "L"
        vectors = _char(cfg, "mode", "VN", "V", target) == "V"
        fn = _lapack(name, _PREFIX[t])

        def one(a: np.ndarray) -> tuple[Any, ...]:
            w, v, info = fn(a, compute_v=int(vectors), lower=int(lower))
            return (v if vectors else a), w, _check_info(info, target)
        return _batched(one, operands, _leaves(result), [2])
    return run


#: ?gesdd's info for a matrix with a NaN (LAPACK >= 3.10 returns it without computing, and
#: without xerbla's message): not an invalid argument; jaxlib passes it on, and the program
#: JAX lowers selects NaN results for any info != 0.
GESDD_NAN = -4


def gesdd_info(info: int, target: str) -> int:
    """`info` as the call's result; an invalid argument (other than GESDD_NAN) raises."""
    return info if info == GESDD_NAN else _check_info(info, target)


def gesdd_one(t: str, mode: str, u_shape: Sequence[int], vt_shape: Sequence[int],
              target: str) -> Callable[..., tuple[Any, ...]]:
    """one(a) -> (a, s, u, vt, info) through scipy's f2py ?gesdd (jobz `mode`; N: u and vt
    zeros of their shapes); a NaN matrix gives NaN s (and u, vt), which LAPACK leaves unset."""
    fn = _lapack("gesdd", _PREFIX[t])

    def one(a: np.ndarray) -> tuple[Any, ...]:
        if mode == "N":
            _, s, _, info = fn(a, compute_uv=0)
            u, vt = np.zeros(u_shape, a.dtype), np.zeros(vt_shape, a.dtype)
        else:
            u, s, vt, info = fn(a, compute_uv=1, full_matrices=int(mode == "A"))
        if gesdd_info(info, target) == GESDD_NAN:
            s = np.full_like(s, np.nan)
            if mode != "N":
                u, vt = np.full_like(u, np.nan), np.full_like(vt, np.nan)
        return a, s, u, vt, info
    return one


def _gesdd(t: str) -> Callable[..., Any]:
    target = f"lapack_{t}gesdd_ffi"

    def run(operands: list[Any], result: Shape, attrs: Any) -> Any:
        leaves = _leaves(result)
        m, n = operands[0].shape[-2:]
        full = leaves[2].dimensions[-2:] == (m, m) and leaves[3].dimensions[-2:] == (n, n)
        mode = _char(_config(attrs), "mode", "ASN", "A" if full else "S", target)
        one = gesdd_one(t, mode, leaves[2].dimensions[-2:], leaves[3].dimensions[-2:], target)
        return _batched(one, operands, leaves, [2])
    return run


def real_eigenvectors(wi: np.ndarray, v: np.ndarray) -> np.ndarray:
    """LAPACK's packed real eigenvectors [..., n, n] -> complex ones (pairs (v_j +- i v_j+1)
    where wi[j] != 0, scanning j upwards), every matrix of a batch at once."""
    out = v.astype(np.result_type(v.dtype, np.complex64))
    n = wi.shape[-1]
    skip = np.zeros(wi.shape[:-1], bool)
    for j in range(n - 1):
        pair = ~skip & (wi[..., j] != 0)
        if pair.any():
            vp = v[pair]
            re, im = vp[..., :, j], vp[..., :, j + 1]
            out[pair, :, j], out[pair, :, j + 1] = re + 1j * im, re - 1j * im
        skip = pair
    return out


def geev_one(t: str, left: bool, right: bool, shapes: tuple[Sequence[int], Sequence[int]],
             target: str) -> Callable[..., tuple[Any, ...]]:
    """one(a) -> ((wr, wi) or w, vl, vr, info) through scipy's f2py ?geev: left and right
    eigenvectors only when asked (jnp.linalg.eigvals asks for neither: its eigenvalues then
    come from LAPACK's eigenvalues-only path, as jaxlib's); not computed, zeros of `shapes`."""
    fn = _lapack("geev", _PREFIX[t])

    def vectors(wi: Any, v: np.ndarray, asked: bool, shape: Sequence[int]) -> np.ndarray:
        if not asked:
            return np.zeros(shape, np.result_type(v.dtype, np.complex64))
        return v if wi is None else real_eigenvectors(wi, v)

    def one(a: np.ndarray) -> tuple[Any, ...]:
        *w, vl, vr, info = fn(a, compute_vl=int(left), compute_vr=int(right), overwrite_a=0)
        _check_info(info, target)
        wi = w[1] if t in "sd" else None
        return (*w, vectors(wi, vl, left, shapes[0]), vectors(wi, vr, right, shapes[1]), info)
    return one


def _geev(t: str) -> Callable[..., Any]:
    target = f"lapack_{t}geev_ffi"

    def run(operands: list[Any], result: Shape, attrs: Any) -> Any:
        leaves = _leaves(result)
        cfg = _config(attrs)
        left, right = (_char(cfg, k, "NV", "V", target) == "V"
                       for k in ("compute_left", "compute_right"))
        k = 2 if t in "sd" else 1
        one = geev_one(t, left, right, (leaves[k].dimensions[-2:],
                                        leaves[k + 1].dimensions[-2:]), target)
        return _batched(one, operands, leaves, [2])
    return run


def trsm_flags(left: bool, lower: bool) -> tuple[str, str]:
    """BLAS ?trsm's side and uplo for a row-major solve: BLAS reads a row-major matrix as
    its transpose, so op(a) x = b is solved as x^T op(a)^T = b^T (side and triangle flipped,
    op unchanged: op(a)^T is op of a^T, conjugation included) with no transposing copies.
    Every backend calls BLAS so (the same bits); jaxlib's column-major operands take the
    unflipped call, equal up to rounding."""
    return "LR"[left], "LU"[lower]


def trsm_one(t: str, left: bool, lower: bool, trans: int, unit: bool
             ) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray]]:
    """One solve op(a) x = b (left) or x op(a) = b, trans 0 / 1 / 2 for N / T / C, through
    scipy's f2py ?trsm as `trsm_flags` says (a.T and b.T are column-major views: only b is
    copied, as f2py does for the result)."""
    fn = blas.get_blas_funcs("trsm", dtype=np.dtype(_PREFIX[t]))
    side, uplo = trsm_flags(left, lower)

    def one(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        return (fn(1.0, a.T, b.T, side=int(side == "R"), lower=int(uplo == "L"),
                   trans_a=trans, diag=int(unit)).T,)
    return one


def _trsm(t: str) -> Callable[..., Any]:
    """op(a) x = b (side 'L') or x op(a) = b (side 'R'); op is trans_x ('N', 'T', 'C')."""
    target = f"lapack_{t}trsm_ffi"

    def run(operands: list[Any], result: Shape, attrs: Any) -> Any:
        cfg = _config(attrs)
        left = _char(cfg, "side", "LR", None, target) == "L"
        lower = _char(cfg, "uplo", "LU", None, target) == "L"
        trans = "NTC".index(_char(cfg, "trans_x", "NTC", None, target))
        unit = _char(cfg, "diag", "NU", None, target) == "U"
        return _batched(trsm_one(t, left, lower, trans, unit), operands, [result],
                        [2, 2])[0]
    return run


def gtsv_one(t: str, target: str) -> Callable[..., tuple[Any, ...]]:
    """One tridiagonal system (lax.linalg.tridiagonal_solve) as jaxlib solves it: dl, d, du
    of n entries each in JAX's convention (dl[0] and du[n - 1] lie outside the matrix), b
    [n, nrhs]; LAPACK's ?gtsv on copies, called through the pointer scipy's cython_lapack
    exports (as jaxlib does: dl from its second entry; scipy's f2py wrapper refuses n = 1).
    Returns the overwritten dl, d, du (LAPACK's factor), the solution and info (info > 0:
    a zero pivot, the solution left unfinished as LAPACK leaves it)."""
    from scipy.linalg import cython_lapack

    fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 8)(routine(cython_lapack, f"{t}gtsv"))
    dt = np.dtype(_PREFIX[t])

    def one(dl: np.ndarray, d: np.ndarray, du: np.ndarray,
            b: np.ndarray) -> tuple[Any, ...]:
        n, nrhs = b.shape
        dl2, d2, du2 = (np.array(v, dtype=dt, copy=True) for v in (dl, d, du))
        x = np.array(b, dtype=dt, order="F", copy=True)
        ints = np.array([n, nrhs, max(n, 1), 0], np.int32)
        at = ints.ctypes.data
        fn(at, at + 4, dl2.ctypes.data + dt.itemsize, d2.ctypes.data, du2.ctypes.data,
           x.ctypes.data, at + 8, at + 12)
        return dl2, d2, du2, x, _check_info(int(ints[3]), target)
    return one


def _gtsv(t: str) -> Callable[..., Any]:
    target = f"lapack_{t}gtsv_ffi"

    def run(operands: list[Any], result: Shape, attrs: Any) -> Any:
        return _batched(gtsv_one(t, target), operands, _leaves(result), [1, 1, 1, 2])
    return run


for _t in "sdcz":  # (LAPACK on one thread below lapack_threads.SERIAL_BELOW elements)
    for _name, _make in (("gtsv", _gtsv), ("potrf", _potrf), ("getrf", _getrf),
                         ("geqrf", _geqrf), ("orgqr" if _t in "sd" else "ungqr", _orgqr),
                         ("syevd" if _t in "sd" else "heevd", _syevd), ("gesdd", _gesdd),
                         ("geev", _geev), ("trsm", _trsm)):
        register_custom_call(f"lapack_{_t}{_name}_ffi", serial_target(_make(_t)))
