"""Batches of small LAPACK/BLAS calls in one native loop (jax.vmap of jnp.linalg.solve,
cholesky or eigh).

lapack.py runs a batched custom call one matrix at a time through scipy's f2py wrappers,
~3 us of Python a call: 512 4x4 solves (getrf, two trsm) took 4.8 ms against XLA's 0.19.
Here the batch is laid out in Fortran order with one numpy transpose, a JIT loop calls the
routine per matrix through the pointer scipy's cython_lapack / cython_blas export (the same
LAPACK the f2py wrappers call, with the same arguments: the same bits), and one transpose
brings the results back (the loop and its split over the threads: batch_call.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from xlapy.backends.cpu.batch_call import ARITIES, Args, cached, check_info
from xlapy.backends.cpu.transpose_lib import swap_last
from xlapy.ops.custom_call_targets import GESDD_NAN, potrf_uplo, routine, trsm_flags
from xlapy.ops.custom_call_targets import qr_lwork as qr_lwork_query
from xlapy.ops.lapack_threads import SERIAL_BELOW

#: Elements per matrix from which getrf, potrf, geqrf, orgqr and trsm batches split over the
#: threads (each call takes OpenBLAS's locked buffer allocator: 512 4 x 4 getrf and trsm
#: calls ran slower split, 0.58 -> 0.74 ms a jax.vmap(jnp.linalg.solve)).
SPLIT_ELEMENTS = 256
#: The routines of SPLIT_ELEMENTS (the others split from one element: `split_from`).
SMALL_CALLS = frozenset({"getrf", "potrf", "geqrf", "orgqr", "ungqr", "trsm"})


def split_from(routine: str) -> int:
    """Elements a matrix has at least for a batch of `routine` calls to split (batch_call's
    `least`)."""
    return SPLIT_ELEMENTS if routine in SMALL_CALLS else 1


def getrf_args(m: int, n: int, item: int) -> Args:
    """?getrf(m, n, a, lda, ipiv, info) over [.., m, n] matrices of `item` bytes a number."""
    dims = np.array([m, n, max(m, 1)], np.int32)
    return Args([dims[0:], dims[1:], None, dims[2:], None, None],
                [0, 0, m * n * item, 0, min(m, n) * 4, 4])


def potrf_args(lower: bool, n: int, item: int) -> Args:
    """?potrf(uplo, n, a, lda, info) on a row-major a, as LAPACK sees it: transposed
    (custom_call_targets.potrf_uplo)."""
    uplo = np.frombuffer(potrf_uplo(lower).encode(), np.uint8).copy()
    dims = np.array([n, max(n, 1)], np.int32)
    return Args([uplo, dims[0:], None, dims[1:], None], [0, 0, n * n * item, 0, 4])


def trsm_args(flags: tuple[bool, bool, int, bool], m: int, n: int, s: int, at: np.dtype,
              bt: np.dtype) -> Args:
    """?trsm(side, uplo, transa, diag, m, n, alpha = 1, a, lda, b, ldb) on row-major a [s, s]
    and b [m, n] as BLAS sees them, transposed (custom_call_targets.trsm_flags); flags
    (left, lower, trans: 0 / 1 / 2 for N / T / C, unit)."""
    return _trsm_call(flags, n, m, s, n, s * s * at.itemsize, m * n * bt.itemsize, bt)


#: Multiply-adds (s^2 n / 2) of one trsm from which its columns split over the threads, and
#: the columns of a chunk a multiple of this.
TRSM_SPLIT_WORK = 1 << 22
TRSM_COLUMNS = 16


def trsm_part_args(flags: tuple[bool, bool, int, bool], m: int, n: int, s: int, c: int,
                   at: np.dtype, bt: np.dtype) -> Args:
    """trsm_args for one matrix's independent solves c at a time: b's columns (a left
    solve: rows of BLAS's transposed view, M = c) or rows (a right one: its columns, N = c),
    a call per part, a the same for each (stride 0, `shared`). Each is solved alone, in
    the same order whatever its part: the same bits."""
    left = flags[0]
    return _trsm_call(flags, c if left else n, m if left else c, s, n, 0,
                      c * (1 if left else n) * bt.itemsize, bt)


def _trsm_call(flags: tuple[bool, bool, int, bool], bm: int, bn: int, s: int, ldb: int,
               a_stride: int, b_stride: int, bt: np.dtype) -> Args:
    """?trsm's arguments for BLAS's M = bm, N = bn, lda = s, ldb, a and b advancing by
    `a_stride` / `b_stride` bytes a call."""
    left, lower, trans, unit = flags
    side, uplo = trsm_flags(left, lower)
    chars = np.frombuffer((side + uplo + "NTC"[trans] + "NU"[unit]).encode(), np.uint8).copy()
    dims = np.array([bm, bn, max(s, 1), max(ldb, 1)], np.int32)
    return Args([chars[0:], chars[1:], chars[2:], chars[3:], dims[0:], dims[1:],
                  np.ones(1, bt), None, dims[2:], None, dims[3:]],
                [0] * 7 + [a_stride, 0, b_stride, 0])


def trsm_part(count: int, s: int, threads: int) -> int:
    """Solves per part of one big trsm of `count` independent ones (b's columns for a left
    solve, rows for a right one) split over the threads (0: no split): a part per thread
    from TRSM_SPLIT_WORK multiply-adds (s * s * count / 2), in multiples of TRSM_COLUMNS.
    lapack_threads keeps such a call on one thread (OpenBLAS's own split did not pay for
    potrf / getrf up to 1024 x 1024); the solves are independent. jnp.linalg.inv of
    1024 x 1024: its two trsm 13 ms each on one thread."""
    if threads < 2 or s * s * count < 2 * TRSM_SPLIT_WORK or count < 2 * TRSM_COLUMNS or \
            s * s >= SERIAL_BELOW:  # (OpenBLAS splits such a call itself, as the interpreter)
        return 0
    c = -(-count // threads)
    return -(-c // TRSM_COLUMNS) * TRSM_COLUMNS


def syevd_sizes(vectors: bool, n: int) -> tuple[int, int]:
    """f2py's default lwork and liwork of ?syevd (the same path through it: the same bits)."""
    return (max(1 + 6 * n + 2 * n * n, 1), 3 + 5 * n) if vectors else (max(2 * n + 1, 1), 1)


def syevd_args(lower: bool, vectors: bool, n: int, item: int) -> Args:
    """?syevd(jobz, uplo, n, a, lda, w, work, lwork, iwork, liwork, info); work and iwork
    shared by the batch (stride 0)."""
    flags = np.frombuffer(("V" if vectors else "N").encode() + (b"L" if lower else b"U"),
                          np.uint8).copy()
    lwork, liwork = syevd_sizes(vectors, n)
    ints = np.array([n, max(n, 1), lwork, liwork], np.int32)
    return Args([flags[0:], flags[1:], ints[0:], None, ints[1:], None, None, ints[2:],
                  None, ints[3:], None],
                [0, 0, 0, n * n * item, 0, n * item, 0, 0, 0, 0, 4])


def gesdd_sizes(t: str, mode: str, m: int, n: int) -> tuple[int, int]:
    """f2py's default lwork of ?gesdd (the same path through it: the same bits) and an
    rwork (complex types) of at least what LAPACK asks for every jobz."""
    k, big, uv = min(m, n), max(m, n), mode != "N"
    if t in "sd":
        lwork = 4 * k * k + big + 9 * k if uv else max(14 * k + 4, 10 * k + 2 + 25 * 33) + big
    else:
        lwork = 2 * k * k + big + 2 * k if uv else 2 * k + big
    return max(lwork, 1), max(5 * k * k + 7 * k, 2 * big * k + 2 * k * k + k, 1)


def gesdd_args(t: str, mode: str, m: int, n: int, item: int) -> Args:
    """?gesdd(jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, [rwork,] iwork, info):
    u [ldu, uc] and vt [ldvt, n] (1 x 1 for jobz N, as f2py's), work arrays shared."""
    k = min(m, n)
    uc, ldvt = {"A": (m, n), "S": (k, k), "N": (1, 1)}[mode]
    ldu = m if mode != "N" else 1
    lwork, _ = gesdd_sizes(t, mode, m, n)
    ints = np.array([m, n, max(m, 1), ldu, ldvt, lwork], np.int32)
    jobz = np.frombuffer(mode.encode(), np.uint8).copy()
    real = item // (1 if t in "sd" else 2)
    uv = mode != "N"
    args: list[np.ndarray | None] = [jobz, ints[0:], ints[1:], None, ints[2:], None, None,
                                     ints[3:], None, ints[4:], None, ints[5:]]
    strides = [0, 0, 0, m * n * item, 0, k * real, ldu * uc * item * uv, 0,
               ldvt * n * item * uv, 0, 0, 0]
    if t not in "sd":
        args.append(None)
        strides.append(0)
    return Args(args + [None, None], strides + [0, 4])


def geev_lwork(t: str, n: int) -> int:
    """f2py's default lwork of ?geev (the same path through it: the same bits)."""
    return max((4 if t in "sd" else 2) * n, 1)


def gtsv_args(n: int, nrhs: int, item: int) -> Args:
    """?gtsv(n, nrhs, dl, d, du, b, ldb, info) over [.., n] diagonals and [.., nrhs, n]
    right-hand sides (Fortran order) of `item` bytes a number."""
    ints = np.array([n, nrhs, max(n, 1)], np.int32)
    return Args([ints[0:], ints[1:], None, None, None, None, ints[2:], None],
                [0, 0, n * item, n * item, n * item, n * nrhs * item, 0, 4])


def geev_args(t: str, left: bool, right: bool, n: int, item: int) -> Args:
    """?geev(jobvl, jobvr, n, a, lda, wr, wi | w, vl, ldvl, vr, ldvr, work, lwork, [rwork,]
    info) with f2py's lwork and leading dimensions (1 for vectors not computed); work arrays
    shared."""
    real = t in "sd"
    ints = np.array([n, max(n, 1), n if left else 1, n if right else 1, geev_lwork(t, n)],
                    np.int32)
    jobs = np.frombuffer(("V" if left else "N").encode() + ("V" if right else "N").encode(),
                         np.uint8).copy()
    w = [None, None] if real else [None]
    ws = [n * item] * len(w)
    args: list[np.ndarray | None] = [jobs[0:], jobs[1:], ints[0:], None, ints[1:], *w, None,
                                     ints[2:], None, ints[3:], None, ints[4:]]
    strides = [0, 0, 0, n * n * item, 0, *ws, n * n * item * left, 0, n * n * item * right, 0,
               0, 0]
    if not real:
        args.append(None)
        strides.append(0)
    return Args(args + [None], strides + [4])


def qr_lwork(t: str, m: int, n: int, k: int | None = None) -> int:
    """The interpreter's lwork of ?geqrf (k None: min(m, n) reflectors) or ?orgqr / ?ungqr
    (custom_call_targets.qr_lwork, LAPACK's workspace query: the same blocking, the same
    bits)."""
    if k is None:
        return qr_lwork_query("geqrf", t, m, n, min(m, n))
    return qr_lwork_query("orgqr" if t in "sd" else "ungqr", t, m, n, k)


def geqrf_args(t: str, m: int, n: int, item: int) -> Args:
    """?geqrf(m, n, a, lda, tau, work, lwork, info); work shared by the batch (stride 0)."""
    ints = np.array([m, n, max(m, 1), qr_lwork(t, m, n)], np.int32)
    return Args([ints[0:], ints[1:], None, ints[2:], None, None, ints[3:], None],
                [0, 0, m * n * item, 0, min(m, n) * item, 0, 0, 4])


def orgqr_args(t: str, m: int, n: int, k: int, item: int) -> Args:
    """?orgqr / ?ungqr(m, n, k, a, lda, tau, work, lwork, info); work shared (stride 0)."""
    ints = np.array([m, n, k, max(m, 1), qr_lwork(t, m, n, k)], np.int32)
    return Args([ints[0:], ints[1:], ints[2:], None, ints[3:], None, None, ints[4:], None],
                [0, 0, 0, m * n * item, 0, k * item, 0, 0, 4])


def fortran(x: np.ndarray) -> np.ndarray:
    """A batch of matrices [..., r, c] as C-contiguous [..., c, r]: each one column-major
    (and a result back to row-major: the same swap), a fresh array LAPACK may overwrite
    (with one row or column the swap is x's own memory: a one-column trsm or gtsv wrote its
    solution over the caller's operand)."""
    out = swap_last(x)
    return out.copy() if np.may_share_memory(out, x) else out


def getrf(t: str, check: Callable[[int], int]) -> Callable[..., tuple[np.ndarray, ...]]:
    """run(a [B.., m, n]) -> (lu, pivots (1-based, int32), info (int32)), as lapack._getrf
    per matrix."""
    from scipy.linalg import cython_lapack

    fn = routine(cython_lapack, f"{t}getrf")
    shapes: dict[Any, Args] = {}

    def run(a: np.ndarray, threads: int = 1) -> tuple[np.ndarray, ...]:
        *lead, m, n = a.shape
        batch = math.prod(lead)
        work = fortran(a)
        ipiv = np.empty((*lead, min(m, n)), np.int32)
        info = np.empty(lead, np.int32)
        cached(shapes, (m, n, work.itemsize), lambda: getrf_args(m, n, work.itemsize)).call(
            threads, fn, batch, work, ipiv, info, least=split_from("getrf"))
        check_info(info, check)
        return fortran(work), ipiv, info

    return run


def potrf(t: str, lower: bool, check: Callable[[int], int]
          ) -> Callable[..., tuple[np.ndarray, ...]]:
    """run(a [B.., n, n]) -> (the factor, the other triangle as given; info (int32)), as
    lapack._potrf per matrix."""
    from scipy.linalg import cython_lapack

    fn = routine(cython_lapack, f"{t}potrf")
    shapes: dict[Any, Args] = {}

    def run(a: np.ndarray, threads: int = 1) -> tuple[np.ndarray, ...]:
        *lead, n, _ = a.shape
        batch = math.prod(lead)
        work = np.array(a, order="C")  # (a copy: ?potrf writes the factor over it)
        info = np.empty(lead, np.int32)
        cached(shapes, (n, work.itemsize), lambda: potrf_args(lower, n, work.itemsize)).call(
            threads, fn, batch, work, info, least=split_from("potrf"))
        check_info(info, check)
        return work, info

    return run


def syevd(t: str, lower: bool, vectors: bool, check: Callable[[int], int]
          ) -> Callable[..., tuple[np.ndarray, ...]]:
    """run(a [B.., n, n]) -> (eigenvectors (or a as given), eigenvalues, info (int32)), as
    lapack._syevd per matrix: the same routine with f2py's default work sizes (so the same
    path through it: the same bits). jax.vmap(jnp.linalg.eigh) of 4096 3 x 3 matrices:
    23.5 ms (XLA 2.3) through the f2py wrapper, ~5.7 us a matrix."""
    from scipy.linalg import cython_lapack

    fn = routine(cython_lapack, f"{t}syevd")
    shapes: dict[Any, Args] = {}

    def run(a: np.ndarray, threads: int = 1) -> tuple[np.ndarray, ...]:
        *lead, n, _ = a.shape
        batch = math.prod(lead)
        work = fortran(a)
        w = np.empty((*lead, n), a.dtype)
        lwork, liwork = syevd_sizes(vectors, n)
        scratch, iscratch = np.empty(lwork, a.dtype), np.empty(liwork, np.int32)
        info = np.empty(lead, np.int32)
        cached(shapes, (n, work.itemsize),
                lambda: syevd_args(lower, vectors, n, work.itemsize)).call(
            threads, fn, batch, work, w, scratch, iscratch, info)
        check_info(info, check)
        return (fortran(work) if vectors else a.copy()), w, info  # (fresh, as f2py's)

    return run


#: ?stedc's SMLSIZ (LAPACK's ilaenv(9, 'SSTEDC') = 25): up to it ?syevd with vectors runs
#: ?sytrd then ?steqr, whose eigenvalues do not depend on whether vectors are computed.
STEQR_MAX = 25
#: ?syevd scales a matrix whose largest |element| lies outside [rmin, 1 / rmin] (rmin =
#: sqrt(safmin / eps): 2^-51.5 in f32, 2^-485 in f64); inside this (with margin) it does not.
_UNSCALED = {"s": 2.0 ** 50, "d": 2.0 ** 480}


def syevals(t: str, lower: bool, check: Callable[[int], int]
            ) -> Callable[..., tuple[np.ndarray, ...]]:
    """run(a [B.., n, n]) -> (a as given, eigenvalues, info): for n <= STEQR_MAX the
    eigenvalues ?syevd with vectors gives, bit for bit, without the vectors (?sytrd then
    ?steqr 'N': the same path through LAPACK, less the rotations applied to Z and ?ormtr).
    For jnp.linalg.eigvalsh, whose ?syevd asks for vectors nobody reads: 4096 3 x 3
    matrices 3.6 -> 1.9 ms on one thread, 1.9-2.1 -> 1.1 on two. A matrix ?syevd would
    scale (its largest |element| outside _UNSCALED) goes through ?syevd itself."""
    from scipy.linalg import cython_lapack

    trd, eqr = (routine(cython_lapack, f"{t}{r}") for r in ("sytrd", "steqr"))
    full = syevd(t, lower, True, check)
    shapes: dict[Any, Any] = {}
    hi = _UNSCALED[t]

    def run(a: np.ndarray, threads: int = 1) -> tuple[np.ndarray, ...]:
        *lead, n, _ = a.shape
        batch, item = math.prod(lead), a.dtype.itemsize
        work = fortran(a)
        w = np.empty((*lead, n), a.dtype)
        e, tau = (np.empty((*lead, max(n - 1, 1)), a.dtype) for _ in range(2))
        scratch = np.empty(max(2 * n - 2, 1), a.dtype)
        info, info0 = np.empty(lead, np.int32), np.empty(lead, np.int32)
        a_trd, a_eqr, seen = cached(shapes, (n, item), lambda: sytrd_steqr_args(
            lower, n, item))
        a_trd.call(threads, trd, batch, work, w, e, tau, scratch, info0)
        a_eqr.call(threads, eqr, batch, w, e, scratch, scratch, info)
        check_info(info0, check)
        big = np.abs(a.reshape(lead + [n * n])[..., seen]).max(axis=-1)
        scaled = (big > 0) & ((big < 1 / hi) | (big > hi))  # (a NaN one is not scaled)
        if scaled.any():
            _, w[scaled], info[scaled] = full(a[scaled], threads)
        check_info(info, check)
        return a.copy(), w, info

    return run


def sytrd_steqr_args(lower: bool, n: int, item: int) -> tuple[Args, Args, np.ndarray]:
    """?sytrd(uplo, n, a, lda, d, e, tau, work, lwork, info) and ?steqr('N', n, d, e, z,
    ldz, work, info); work shared, lwork n (?sytrd's unblocked code, as for any n < 32);
    the flat indices of the triangle ?sytrd reads in a row-major matrix."""
    flags = np.frombuffer((b"L" if lower else b"U") + b"N", np.uint8).copy()
    ints = np.array([n, max(n, 1), 1], np.int32)
    v = max(n - 1, 1) * item
    trd = Args([flags[0:], ints[0:], None, ints[1:], None, None, None, None, ints[1:], None],
                [0, 0, n * n * item, 0, n * item, v, v, 0, 0, 4])
    eqr = Args([flags[1:], ints[0:], None, None, None, ints[2:], None, None],
                [0, 0, n * item, v, 0, 0, 0, 4])
    below = np.tri(n, dtype=bool)
    return trd, eqr, np.flatnonzero(below if lower else below.T)


def gesdd(t: str, mode: str, shapes_uv: tuple[tuple[int, ...], tuple[int, ...]],
          check: Callable[[int], int]) -> Callable[..., tuple[np.ndarray, ...]]:
    """run(a [B.., m, n]) -> (a as given, s, u, vt, info), as lapack._gesdd per matrix
    (f2py's lwork: the same bits; jobz N: u and vt zeros of `shapes_uv`). jax.vmap of 16 x 16
    singular values ran ~18 us a matrix through the f2py wrapper, XLA ~7."""
    from scipy.linalg import cython_lapack

    fn = routine(cython_lapack, f"{t}gesdd")
    shapes: dict[Any, Args] = {}

    def run(a: np.ndarray, threads: int = 1) -> tuple[np.ndarray, ...]:
        *lead, m, n = a.shape
        k = min(m, n)
        real = np.finfo(a.dtype).dtype  # (a complex type's part type)
        work = fortran(a)
        s = np.empty((*lead, k), real)
        if mode == "N":  # (not referenced by LAPACK)
            u, vt = np.empty(1, a.dtype), np.empty(1, a.dtype)
        else:  # Fortran order: [.., columns, rows]
            u = np.empty((*lead, m if mode == "A" else k, m), a.dtype)
            vt = np.empty((*lead, n, n if mode == "A" else k), a.dtype)
        lwork, lrwork = gesdd_sizes(t, mode, m, n)
        scratch = [np.empty(lwork, a.dtype)] + ([] if t in "sd" else [np.empty(lrwork, real)])
        info = np.empty(lead, np.int32)
        cached(shapes, (m, n, work.itemsize),
                lambda: gesdd_args(t, mode, m, n, work.itemsize)).call(
            threads, fn, math.prod(lead), work, s, u, vt, *scratch,
            np.empty(8 * k, np.int32), info)
        check_info(info, check)
        nan = info == GESDD_NAN  # (LAPACK leaves those results unset)
        s[nan] = np.nan
        if mode == "N":
            return (a.copy(), s, *(np.zeros((*lead, *d), a.dtype) for d in shapes_uv), info)
        u, vt = fortran(u), fortran(vt)
        u[nan], vt[nan] = np.nan, np.nan
        return a.copy(), s, u, vt, info

    return run


def geev(t: str, left: bool, right: bool, shapes_v: tuple[tuple[int, ...], tuple[int, ...]],
         check: Callable[[int], int]) -> Callable[..., tuple[np.ndarray, ...]]:
    """run(a [B.., n, n]) -> ((wr, wi) or w, vl, vr, info), as custom_call_targets.geev_one
    per matrix (f2py's lwork: the same bits). jnp.linalg.eigvals of 64 8 x 8 matrices: 2.9
    ms through the f2py wrapper (computing vectors it was not asked for), XLA 0.5."""
    from scipy.linalg import cython_lapack

    from xlapy.ops.custom_call_targets import real_eigenvectors

    fn = routine(cython_lapack, f"{t}geev")
    shapes: dict[Any, Args] = {}
    real = t in "sd"

    def run(a: np.ndarray, threads: int = 1) -> tuple[np.ndarray, ...]:
        *lead, n, _ = a.shape
        work = fortran(a)
        w = [np.empty((*lead, n), a.dtype) for _ in range(2 if real else 1)]
        vs = [np.empty((*lead, n, n) if asked else 1, a.dtype) for asked in (left, right)]
        scratch = [np.empty(geev_lwork(t, n), a.dtype)] + \
            ([] if real else [np.empty(2 * n, np.finfo(a.dtype).dtype)])
        info = np.empty(lead, np.int32)
        cached(shapes, (n, work.itemsize), lambda: geev_args(t, left, right, n, work.itemsize)
                ).call(threads, fn, math.prod(lead), work, *w, vs[0], vs[1], *scratch, info)
        check_info(info, check)
        cplx = np.result_type(a.dtype, np.complex64)
        out = [np.zeros((*lead, *d), cplx) if not asked else
               real_eigenvectors(w[1], fortran(v)) if real else fortran(v)
               for v, asked, d in zip(vs, (left, right), shapes_v)]
        return (*w, *out, info)

    return run


def gtsv(t: str, check: Callable[[int], int]) -> Callable[..., tuple[np.ndarray, ...]]:
    """run(dl, d, du [B.., n], b [B.., n, nrhs]) -> (dl, d, du as LAPACK leaves them, x,
    info), as custom_call_targets.gtsv_one per system (dl from its second entry, as jaxlib
    passes it). lax.linalg.tridiagonal_solve of 64 systems of 128: 1.24 ms a system at a
    time, XLA 0.36."""
    from scipy.linalg import cython_lapack

    fn = routine(cython_lapack, f"{t}gtsv")
    shapes: dict[Any, Args] = {}

    def run(dl: np.ndarray, d: np.ndarray, du: np.ndarray, b: np.ndarray, threads: int = 1
            ) -> tuple[np.ndarray, ...]:
        *lead, n, nrhs = b.shape
        dl, d, du = (np.array(v, dtype=b.dtype, order="C", copy=True) for v in (dl, d, du))
        x = fortran(b)
        info = np.empty(lead, np.int32)
        cached(shapes, (n, nrhs, x.itemsize), lambda: gtsv_args(n, nrhs, x.itemsize)).call(
            threads, fn, math.prod(lead), dl[..., 1:], d, du, x, info)
        check_info(info, check)
        return dl, d, du, fortran(x), info

    return run


def geqrf(t: str, check: Callable[[int], int]) -> Callable[..., tuple[np.ndarray, ...]]:
    """run(a [B.., m, n]) -> (the factored matrix, tau), as lapack._geqrf per matrix (its
    lwork: the same bits). jax.vmap(jnp.linalg.qr) went through f2py a matrix at a time."""
    from scipy.linalg import cython_lapack

    fn = routine(cython_lapack, f"{t}geqrf")
    shapes: dict[Any, Args] = {}

    def run(a: np.ndarray, threads: int = 1) -> tuple[np.ndarray, ...]:
        *lead, m, n = a.shape
        work = fortran(a)
        tau = np.empty((*lead, min(m, n)), a.dtype)
        scratch = np.empty(qr_lwork(t, m, n), a.dtype)
        info = np.empty(lead, np.int32)
        cached(shapes, (m, n, work.itemsize), lambda: geqrf_args(t, m, n, work.itemsize)).call(
            threads, fn, math.prod(lead), work, tau, scratch, info, least=split_from("geqrf"))
        check_info(info, check)
        return fortran(work), tau

    return run


def orgqr(t: str, check: Callable[[int], int]) -> Callable[..., tuple[np.ndarray]]:
    """run(a [B.., m, n], tau [B.., k]) -> (q,), as lapack._orgqr per matrix (?orgqr, or
    ?ungqr for complex types)."""
    from scipy.linalg import cython_lapack

    fn = routine(cython_lapack, f"{t}{'orgqr' if t in 'sd' else 'ungqr'}")
    shapes: dict[Any, Args] = {}

    def run(a: np.ndarray, tau: np.ndarray, threads: int = 1) -> tuple[np.ndarray]:
        *lead, m, n = a.shape
        k = tau.shape[-1]
        work = fortran(a)
        scratch = np.empty(qr_lwork(t, m, n, k), a.dtype)
        info = np.empty(lead, np.int32)
        cached(shapes, (m, n, k, work.itemsize),
                lambda: orgqr_args(t, m, n, k, work.itemsize)).call(
            threads, fn, math.prod(lead), work, np.ascontiguousarray(tau), scratch, info,
            least=split_from("orgqr"))
        check_info(info, check)
        return (fortran(work),)

    return run


def trsm(t: str, left: bool, lower: bool, trans: int, unit: bool
         ) -> Callable[..., tuple[np.ndarray]]:
    """run(a [B.., s, s], b [B.., m, n]) -> (alpha op(a)^-1 b or b op(a)^-1, alpha 1), as
    lapack._trsm per matrix."""
    from scipy.linalg import cython_blas

    fn = routine(cython_blas, f"{t}trsm")
    flags = (left, lower, trans, unit)
    shapes: dict[Any, Args] = {}

    def run(a: np.ndarray, b: np.ndarray, threads: int = 1) -> tuple[np.ndarray]:
        *lead, m, n = b.shape
        batch = math.prod(lead)
        a = np.ascontiguousarray(a)
        x = np.array(b, order="C")  # (a copy: ?trsm writes the solution over it)
        s = a.shape[-1]
        count = n if left else m  # the independent solves: b's columns, or its rows
        c = trsm_part(count, s, threads) if batch == 1 else 0
        if c:  # one big solve: in parts over the threads
            whole = count // c
            cached(shapes, ("parts", m, n, s, c, a.dtype, x.dtype),
                   lambda: trsm_part_args(flags, m, n, s, c, a.dtype, x.dtype)).call(
                threads, fn, whole, a, x, shared=(0,))
            if r := count % c:
                at = whole * c * (1 if left else n)
                cached(shapes, ("parts", m, n, s, r, a.dtype, x.dtype),
                       lambda: trsm_part_args(flags, m, n, s, r, a.dtype, x.dtype)).call(
                    1, fn, 1, a, x.reshape(-1)[at:])
            return (x,)
        cached(shapes, (m, n, s, a.dtype, x.dtype),
                lambda: trsm_args(flags, m, n, s, a.dtype, x.dtype)).call(
            threads, fn, batch, a, x, least=split_from("trsm"))
        return (x,)

    return run


__all__ = ["getrf", "potrf", "geqrf", "orgqr", "trsm", "routine", "fortran", "getrf_args",
           "potrf_args", "geqrf_args", "orgqr_args", "qr_lwork", "trsm_args", "syevd_args",
           "syevd_sizes", "geev", "geev_args", "geev_lwork", "gesdd", "gesdd_args",
           "gesdd_sizes", "gtsv", "gtsv_args", "ARITIES", "SMALL_CALLS", "SPLIT_ELEMENTS",
           "split_from"]
