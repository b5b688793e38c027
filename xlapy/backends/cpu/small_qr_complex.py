"""small_qr's geqrf and ungqr on complex matrices (c64, c128): jnp.linalg.qr of batches of
small complex matrices, which paid LAPACK's per-call cost per matrix (4096 4 x 4 c64: 1.9x
XLA's time).

Rows are (real, imaginary) vector pairs as in small_lu_complex.py. The arithmetic is
unblocked LAPACK's: cgeqr2 with clarfg's reflectors (H = I whenever x = 0 and alpha is
real, so even an order-1 reflector makes a complex diagonal element real: beta = -sign(
alpha_r) |(alpha, x)|, tau = ((beta - alpha_r) / beta, -alpha_i / beta), v = x / (alpha -
beta), the rescaling when |beta| is below safmin) applied as clarf with conj(tau) (w =
C^H v, C -= tau v w^H); cung2r's backward accumulation with tau. Norms as small_qr's
(single precision in double).
"""

from __future__ import annotations

from llvmlite import ir

from xlapy.backends.cpu import small_lu, small_qr
from xlapy.backends.cpu.llvm_util import I32, broadcast, i64, intrinsic, sfx
from xlapy.backends.cpu.small_lu_complex import (
    Pair,
    fabs,
    fmuladd,
    load_rows,
    multiply,
    reciprocal,
    store_rows,
)


def _real(t: str) -> str:
    return "s" if t == "c" else "d"


def _reflector(b: ir.IRBuilder, t: str, alpha: Pair, xs: list[Pair]
               ) -> tuple[Pair, Pair, list[Pair]]:
    """clarfg: (tau, beta (real unless H = I), v's tail) of H^H (alpha, x) = (beta, 0)."""
    et = alpha[0].type
    r = _real(t)
    safmin = small_lu._SFMIN[r] / small_qr._EPS[r]
    zero = ir.Constant(et, 0.0)

    def norm(v: list[ir.Value]) -> ir.Value:
        return small_qr._nrm2(b, r, v) if v else zero

    def sign_beta(ar: ir.Value, ai: ir.Value, xnorm: ir.Value) -> ir.Value:
        n3 = small_qr._nrm2(b, r, [ar, ai, xnorm])
        return b.fneg(intrinsic(b, f"llvm.copysign.{sfx(et)}", et, [n3, ar]))

    parts = [p for x in xs for p in x]
    xnorm = norm(parts)
    ar, ai = alpha
    beta = sign_beta(ar, ai, xnorm)
    small = b.fcmp_ordered("<", fabs(b, beta),
                           ir.Constant(et, safmin))
    up = ir.Constant(et, 1.0 / safmin)
    xs2 = [(b.select(small, b.fmul(x, up), x), b.select(small, b.fmul(y, up), y))
           for x, y in xs]
    ar2, ai2 = b.select(small, b.fmul(ar, up), ar), b.select(small, b.fmul(ai, up), ai)
    beta2 = b.select(small, sign_beta(ar2, ai2, norm([p for x in xs2 for p in x])), beta)
    tau = (b.fdiv(b.fsub(beta2, ar2), beta2), b.fdiv(b.fneg(ai2), beta2))
    scal = reciprocal(b, (b.fsub(ar2, beta2), ai2))
    ident = b.and_(b.fcmp_ordered("==", xnorm, zero), b.fcmp_ordered("==", ai, zero))
    vs = []
    for x, x2 in zip(xs, xs2):
        v = multiply(b, x2, scal)
        vs.append((b.select(ident, x[0], v[0]), b.select(ident, x[1], v[1])))
    beta3 = b.select(small, b.fmul(beta2, ir.Constant(et, safmin)), beta2)
    return ((b.select(ident, zero, tau[0]), b.select(ident, zero, tau[1])),
            (b.select(ident, ar, beta3), b.select(ident, ai, zero)), vs)


def _apply(b: ir.IRBuilder, rows: list[Pair], i: int, vs: list[Pair], tau: Pair,
           n: int) -> None:
    """rows[i:] = (I - tau v v^H) rows[i:] on the lanes after i (clarf from the left, v =
    (1, vs)): u = v^H C (the conjugate of C^H v), each row less v_r tau u; nothing at tau
    = 0 (LAPACK skips it)."""
    et = tau[0].type
    ur, ui = rows[i]
    for r, (vr, vi) in enumerate(vs, i + 1):  # u += conj(v_r) row_r
        br, bi = broadcast(b, vr, n), broadcast(b, vi, n)
        cr, ci = rows[r]
        ur, ui = (fmuladd(b, br, cr, fmuladd(b, bi, ci, ur)),
                  fmuladd(b, br, ci, fmuladd(b, b.fneg(bi), cr, ui)))
    nt = (broadcast(b, b.fneg(tau[0]), n), broadcast(b, b.fneg(tau[1]), n))
    tw = multiply(b, nt, (ur, ui))  # -tau u
    after = ir.Constant(ir.VectorType(I32, n), [n + k if k > i else k for k in range(n)])
    zero = ir.Constant(et, 0.0)
    skip = b.and_(b.fcmp_ordered("==", tau[0], zero), b.fcmp_ordered("==", tau[1], zero))
    for r in range(i, len(rows)):
        if r == i:
            new = (b.fadd(rows[r][0], tw[0]), b.fadd(rows[r][1], tw[1]))
        else:  # row_r + v_r (-tau u)
            vr, vi = (broadcast(b, p, n) for p in vs[r - i - 1])
            cr, ci = rows[r]
            new = (fmuladd(b, vr, tw[0], fmuladd(b, b.fneg(vi), tw[1], cr)),
                   fmuladd(b, vr, tw[1], fmuladd(b, vi, tw[0], ci)))
        rows[r] = tuple(b.select(skip, rows[r][h], b.shuffle_vector(rows[r][h], new[h], after))
                        for h in range(2))  # type: ignore[assignment]


def _set(b: ir.IRBuilder, row: Pair, value: Pair, lane: int) -> Pair:
    at = ir.Constant(I32, lane)
    return b.insert_element(row[0], value[0], at), b.insert_element(row[1], value[1], at)


def _get(b: ir.IRBuilder, row: Pair, lane: int) -> Pair:
    at = ir.Constant(I32, lane)
    return b.extract_element(row[0], at), b.extract_element(row[1], at)


def geqrf_body(b: ir.IRBuilder, t: str, m: int, n: int, a: ir.Value, tau_at: ir.Value
               ) -> None:
    """small_qr.geqrf_body for a complex m x n row-major matrix at `a` (its parts' type);
    the taus as (real, imaginary) pairs from tau_at."""
    rows = load_rows(b, a, m, n)
    for i in range(min(m, n)):
        alpha = _get(b, rows[i], i)
        xs = [_get(b, rows[r], i) for r in range(i + 1, m)]
        tau, beta, vs = _reflector(b, t, alpha, xs)
        for h in range(2):
            b.store(tau[h], b.gep(tau_at, [i64(2 * i + h)]))
        if i < n - 1:
            _apply(b, rows, i, vs, (tau[0], b.fneg(tau[1])), n)  # (H^H: conj(tau))
        rows[i] = _set(b, rows[i], beta, i)
        for r, v in enumerate(vs, i + 1):
            rows[r] = _set(b, rows[r], v, i)
    store_rows(b, a, rows, n)


def orgqr_body(b: ir.IRBuilder, t: str, m: int, n: int, k: int, a: ir.Value,
               tau_at: ir.Value) -> None:
    """small_qr.orgqr_body as cung2r for a complex matrix (H_i applied with tau itself)."""
    et = a.type.pointee
    vt = ir.VectorType(et, n)
    rows = load_rows(b, a, m, n)
    zero_v = ir.Constant(vt, [0.0] * n)
    if k < n:  # columns k..n-1: the identity's
        keep = ir.Constant(ir.VectorType(I32, n), [c if c < k else n + c for c in range(n)])
        for r in range(m):
            unit = ir.Constant(vt, [1.0 if c == r else 0.0 for c in range(n)])
            rows[r] = (b.shuffle_vector(rows[r][0], unit, keep),
                       b.shuffle_vector(rows[r][1], zero_v, keep))
    zero = ir.Constant(et, 0.0)
    for i in range(k - 1, -1, -1):
        tau = (b.load(b.gep(tau_at, [i64(2 * i)])), b.load(b.gep(tau_at, [i64(2 * i + 1)])))
        vs = [_get(b, rows[r], i) for r in range(i + 1, m)]
        if i < n - 1:
            _apply(b, rows, i, vs, tau, n)
        neg = (b.fneg(tau[0]), b.fneg(tau[1]))
        for r, v in enumerate(vs, i + 1):
            rows[r] = _set(b, rows[r], multiply(b, neg, v), i)
        rows[i] = _set(b, rows[i], (b.fsub(ir.Constant(et, 1.0), tau[0]), neg[1]), i)
        for r in range(i):
            rows[r] = _set(b, rows[r], (zero, zero), i)
    store_rows(b, a, rows, n)


__all__ = ["geqrf_body", "orgqr_body"]
