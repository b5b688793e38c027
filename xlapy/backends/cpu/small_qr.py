"""Batches of small real Householder QR factorizations (?geqrf) and the Q they define (?orgqr)
as small_lu's JIT functions, each matrix's rows in vector registers: jnp.linalg.qr under
vmap (and lstsq, which factors with it).

LAPACK's per-call cost dominated: 16384 4 x 4 QRs took 10.2 ms (XLA 6.7: it calls the same
routines). The arithmetic is unblocked LAPACK's, which ?geqrf and ?orgqr run for these sizes
(sgeqr2 with slarfg's reflectors: beta = -sign(alpha) |(alpha, x)|, tau = (beta - alpha) /
beta, v = x / (alpha - beta), the rescaling when |beta| is below safmin; slarf's
w = C^T v, C -= tau v w^T; sorg2r's backward accumulation), so results agree with LAPACK
within rounding (the norms of single-precision columns are taken in double, as OpenBLAS's
snrm2 does). A row is one vector: v^T C is a sum of rows, the update one FMA per row.
One difference: LAPACK's slarf leaves the trailing columns that are exactly zero in the
reflector's rows as they are (iladlc); with finite values that changes nothing, but with a NaN
or inf in the reflector those columns stay zero there and become NaN here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import small_lu
from xlapy.backends.cpu.llvm_util import F32, F64, I32, broadcast, i64, intrinsic, sfx
from xlapy.backends.cpu.thunks import ptr

_EPS = {"s": float(np.finfo(np.float32).epsneg), "d": float(np.finfo(np.float64).epsneg)}


def _lane(j: int) -> ir.Constant:
    return ir.Constant(I32, j)


def _nrm2(b: ir.IRBuilder, t: str, xs: list[ir.Value]) -> ir.Value:
    """The 2-norm of scalars xs: single precision summed in double; double scaled by the
    largest magnitude (no overflow or underflow of the squares), or summed as they are where
    that is zero, infinite or NaN (the norm then 0, inf or NaN as LAPACK's)."""
    et = xs[0].type
    if et == F32:
        acc: ir.Value = ir.Constant(F64, 0.0)
        for x in xs:
            d = b.fpext(x, F64)
            acc = small_lu._fmuladd(b, d, d, acc)
        return b.fptrunc(intrinsic(b, "llvm.sqrt.f64", F64, [acc]), F32)
    mags = [intrinsic(b, "llvm.fabs.f64", F64, [x]) for x in xs]
    big = mags[0]
    plain: ir.Value = ir.Constant(F64, 0.0)
    for x, m in zip(xs, mags):
        big = b.select(b.fcmp_ordered(">", m, big), m, big)
        plain = small_lu._fmuladd(b, x, x, plain)
    acc = ir.Constant(F64, 0.0)
    for x in xs:  # (divided: the reciprocal of a subnormal overflows)
        s = b.fdiv(x, big)
        acc = small_lu._fmuladd(b, s, s, acc)
    scaled = b.fmul(big, intrinsic(b, "llvm.sqrt.f64", F64, [acc]))
    ok = b.and_(b.fcmp_ordered(">", big, ir.Constant(F64, 0.0)),
                b.fcmp_ordered("<", big, ir.Constant(F64, float("inf"))))
    return b.select(ok, scaled, intrinsic(b, "llvm.sqrt.f64", F64, [plain]))


def _lapy2(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """sqrt(x^2 + y^2) without overflow (?lapy2): single in double, double scaled."""
    if x.type == F32:
        dx, dy = b.fpext(x, F64), b.fpext(y, F64)
        s = small_lu._fmuladd(b, dx, dx, b.fmul(dy, dy))
        return b.fptrunc(intrinsic(b, "llvm.sqrt.f64", F64, [s]), F32)
    xa, ya = (intrinsic(b, "llvm.fabs.f64", F64, [v]) for v in (x, y))
    gt = b.fcmp_ordered(">", xa, ya)
    w, z = b.select(gt, xa, ya), b.select(gt, ya, xa)
    q = b.fdiv(z, w)
    r = b.fmul(w, intrinsic(b, "llvm.sqrt.f64", F64, [small_lu._fmuladd(
        b, q, q, ir.Constant(F64, 1.0))]))
    plain = b.or_(b.fcmp_ordered("==", z, ir.Constant(F64, 0.0)),
                  b.fcmp_ordered(">", w, ir.Constant(F64, float(np.finfo(np.float64).max))))
    r = b.select(plain, w, r)
    nan = b.fadd(x, y)
    return b.select(b.fcmp_unordered("uno", nan, nan), nan, r)


def _reflector(b: ir.IRBuilder, t: str, alpha: ir.Value, xs: list[ir.Value]
               ) -> tuple[ir.Value, ir.Value, list[ir.Value]]:
    """?larfg: (tau, beta, v's tail) of the reflector H with H (alpha, x) = (beta, 0)."""
    et = alpha.type
    safmin = small_lu._SFMIN[t] / _EPS[t]  # (a power of two: scaling by it is exact)

    def sign_beta(a: ir.Value, xnorm: ir.Value) -> ir.Value:
        return b.fneg(intrinsic(b, f"llvm.copysign.{sfx(et)}", et, [_lapy2(b, a, xnorm), a]))

    xnorm = _nrm2(b, t, xs)
    beta = sign_beta(alpha, xnorm)
    # |beta| below safmin: x and alpha scaled by 1 / safmin and beta taken again (one step
    # brings even a subnormal beta above safmin, where LAPACK's loop stops), beta scaled back
    small = b.fcmp_ordered("<", intrinsic(b, f"llvm.fabs.{sfx(et)}", et, [beta]),
                           ir.Constant(et, safmin))
    up = ir.Constant(et, 1.0 / safmin)
    xs2 = [b.select(small, b.fmul(x, up), x) for x in xs]
    alpha2 = b.select(small, b.fmul(alpha, up), alpha)
    beta2 = b.select(small, sign_beta(alpha2, _nrm2(b, t, xs2)), beta)
    tau = b.fdiv(b.fsub(beta2, alpha2), beta2)
    scal = b.fdiv(ir.Constant(et, 1.0), b.fsub(alpha2, beta2))
    zero = b.fcmp_ordered("==", xnorm, ir.Constant(et, 0.0))  # H = I: x and alpha kept
    vs = [b.select(zero, x, b.fmul(x2, scal)) for x, x2 in zip(xs, xs2)]
    beta3 = b.select(small, b.fmul(beta2, ir.Constant(et, safmin)), beta2)
    return (b.select(zero, ir.Constant(et, 0.0), tau), b.select(zero, alpha, beta3), vs)


def _apply(b: ir.IRBuilder, rows: list[ir.Value], i: int, vs: list[ir.Value], tau: ir.Value,
           n: int) -> None:
    """rows[i:] = H rows[i:] on the lanes after i (?larf from the left, v = (1, vs)): w the
    sum of the rows by v, each row less v_r tau w; nothing at tau = 0 (LAPACK skips it)."""
    et = tau.type
    w = rows[i]
    for r, v in enumerate(vs, i + 1):
        w = small_lu._fmuladd(b, broadcast(b, v, n), rows[r], w)
    tw = b.fmul(broadcast(b, b.fneg(tau), n), w)
    after = ir.Constant(ir.VectorType(I32, n), [n + k if k > i else k for k in range(n)])
    skip = b.fcmp_ordered("==", tau, ir.Constant(et, 0.0))
    for r in range(i, len(rows)):
        new = b.fadd(rows[r], tw) if r == i else \
            small_lu._fmuladd(b, broadcast(b, vs[r - i - 1], n), tw, rows[r])
        rows[r] = b.select(skip, rows[r], b.shuffle_vector(rows[r], new, after))


def geqrf_body(b: ir.IRBuilder, t: str, m: int, n: int, a: ir.Value, tau_at: ir.Value
               ) -> None:
    """Factor the m x n row-major matrix at `a` in place as ?geqr2 (R on and above the
    diagonal, the reflectors' tails below it); their taus to tau_at[0:min(m, n)]."""
    et = small_lu._TYPES[t][0]
    size = 4 if et == F32 else 8
    rows = small_lu._load_rows(b, a, m, n, ir.VectorType(et, n), size)
    for i in range(min(m, n)):
        if i == m - 1:  # a reflector of order 1: H = I
            b.store(ir.Constant(et, 0.0), b.gep(tau_at, [i64(i)]))
            break
        alpha = b.extract_element(rows[i], _lane(i))
        xs = [b.extract_element(rows[r], _lane(i)) for r in range(i + 1, m)]
        tau, beta, vs = _reflector(b, t, alpha, xs)
        b.store(tau, b.gep(tau_at, [i64(i)]))
        if i < n - 1:
            _apply(b, rows, i, vs, tau, n)
        rows[i] = b.insert_element(rows[i], beta, _lane(i))
        for r, v in enumerate(vs, i + 1):
            rows[r] = b.insert_element(rows[r], v, _lane(i))
    small_lu._store_rows(b, a, rows, n, size)


def orgqr_body(b: ir.IRBuilder, t: str, m: int, n: int, k: int, a: ir.Value,
               tau_at: ir.Value) -> None:
    """The m x n Q of the first k reflectors stored in the row-major matrix at `a` (as ?geqrf
    leaves them; taus at tau_at), in place, as ?org2r: columns k.. of the identity, then
    H_i applied from the last to the first."""
    et = small_lu._TYPES[t][0]
    size = 4 if et == F32 else 8
    vt = ir.VectorType(et, n)
    rows = small_lu._load_rows(b, a, m, n, vt, size)
    if k < n:  # columns k..n-1: the identity's
        keep = ir.Constant(ir.VectorType(I32, n), [c if c < k else n + c for c in range(n)])
        for r in range(m):
            unit = ir.Constant(vt, [1.0 if c == r else 0.0 for c in range(n)])
            rows[r] = b.shuffle_vector(rows[r], unit, keep)
    for i in range(k - 1, -1, -1):
        tau = b.load(b.gep(tau_at, [i64(i)]))
        vs = [b.extract_element(rows[r], _lane(i)) for r in range(i + 1, m)]
        if i < n - 1:
            _apply(b, rows, i, vs, tau, n)
        neg = b.fneg(tau)
        for r, v in enumerate(vs, i + 1):
            rows[r] = b.insert_element(rows[r], b.fmul(neg, v), _lane(i))
        rows[i] = b.insert_element(rows[i], b.fsub(ir.Constant(et, 1.0), tau), _lane(i))
        for r in range(i):
            rows[r] = b.insert_element(rows[r], ir.Constant(et, 0.0), _lane(i))
    small_lu._store_rows(b, a, rows, n, size)


def geqrf(t: str, m: int, n: int) -> Callable[..., tuple[np.ndarray, ...]] | None:
    """run(a [B.., m, n]) -> (the factored matrix, tau [B.., min(m, n)]) as
    lapack_batch.geqrf, or None where small_lu.takes does not take it."""
    if small_lu.takes("geqrf", t, [(m, n)], ()) is None:
        return None
    go = small_lu.runner("geqrf", t, (m, n), ())
    dt = small_lu._TYPES[t][1]

    def run(a: np.ndarray, threads: int = 1) -> tuple[np.ndarray, ...]:
        lead = a.shape[:-2]
        c = np.array(a, dtype=dt, order="C")  # (a copy: factored in place)
        tau = np.empty((*lead, min(m, n)), dt)
        go(int(np.prod(lead)), threads, (ptr(c), ptr(tau), 0))
        return c, tau

    run.every = True  # type: ignore[attr-defined]  (one matrix too: lapack._with_batch)
    return run


def orgqr(t: str, m: int, n: int, k: int) -> Callable[..., tuple[np.ndarray]] | None:
    """run(a [B.., m, n], tau [B.., k]) -> (q,) as lapack_batch.orgqr, or None where
    small_lu.takes does not take it."""
    if small_lu.takes("orgqr", t, [(m, n), (k,)], ()) is None:
        return None
    go = small_lu.runner("orgqr", t, (m, n, k), ())
    dt = small_lu._TYPES[t][1]

    def run(a: np.ndarray, tau: np.ndarray, threads: int = 1) -> tuple[np.ndarray]:
        lead = a.shape[:-2]
        q = np.array(a, dtype=dt, order="C")  # (a copy: overwritten by Q)
        taus = np.ascontiguousarray(np.broadcast_to(tau, (*lead, k)), dtype=dt)
        go(int(np.prod(lead)), threads, (ptr(q), ptr(taus), 0))
        return (q,)

    run.every = True  # type: ignore[attr-defined]
    return run


__all__ = ["geqrf", "orgqr", "geqrf_body", "orgqr_body"]
