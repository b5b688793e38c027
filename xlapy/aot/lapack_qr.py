"""QR inside the object: jaxlib's `lapack_?geqrf_ffi` and `lapack_?orgqr_ffi` /
`lapack_?ungqr_ffi` as LAPACK's unblocked reference loops (geqr2, org2r / ung2r), so the
reflectors, tau and R follow LAPACK's conventions (jnp.linalg.qr's R diagonal has the signs
LAPACK gives it):

- reflector j (larfg): alpha = A[j, j], x = A[j+1:, j]; tau = 0 when x = 0 and alpha is
  real, else beta = -sign(re alpha) * sqrt(|alpha|^2 + |x|^2),
  tau = ((beta - re alpha) / beta, -im alpha / beta), x /= (alpha - beta), A[j, j] = beta;
  then H^H = I - conj(tau) v v^H (v = (1, x)) is applied to the columns right of j;
- orgqr: Q = H(0) ... H(k-1), built from the last reflector back, into the operand's m x n.

The blocked LAPACK routines jaxlib calls do the same arithmetic in another order: results
agree to rounding. (LAPACK's larfg also rescales when |beta| is below its safe minimum;
these loops do not, so a column of norm below ~1e-292 (f64) / 1e-36 (f32) loses accuracy.)
"""

from __future__ import annotations

from math import prod

from llvmlite import ir

from xlapy.aot.lapack import batch_of, copy_matrix
from xlapy.aot.lapack_kit import Kit
from xlapy.backends.cpu.llvm_util import i64
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET


def apply_reflector(k: Kit, w: ir.Value, base: ir.Value, n: int, j: ir.Value, m: int,
                    cols: tuple[ir.Value, ir.Value], tau: ir.Value) -> None:
    """A[j:m, c] -= tau * v * (v^H A[j:m, c]) for c in cols, v = (1, A[j+1:m, j])."""
    b = k.b
    s = k.var(k.c(0.0), "s")
    with k.loop(cols[0], cols[1], name="rc") as c:
        s.set(k.ld(w, k.at(base, j, n, c)))
        with k.loop(b.add(j, i64(1)), i64(m), name="rd") as i:
            s.set(k.add(s.get(), k.mul(k.conj(k.ld(w, k.at(base, i, n, j))),
                                       k.ld(w, k.at(base, i, n, c)))))
        ts = k.mul(tau, s.get())
        top = k.at(base, j, n, c)
        k.st(w, top, k.sub(k.ld(w, top), ts))
        with k.loop(b.add(j, i64(1)), i64(m), name="ru") as i:
            at = k.at(base, i, n, c)
            k.st(w, at, k.sub(k.ld(w, at), k.mul(k.ld(w, k.at(base, i, n, j)), ts)))


def geqrf(mod: ir.Module, name: str, instr: Instruction, et: ET) -> tuple[ir.Function, int]:
    a = instr.operands[0].shape
    m, n = a.dimensions[-2:]
    kmin = min(m, n)
    k = Kit(mod, name, et)
    b = k.b
    src, qr, tau_out = k.operand(0, et), k.result(0, et), k.result(1, et)
    copy_matrix(k, src, qr, prod(a.dimensions))
    xnorm2, tau = k.var(k.rc(0.0), "xn"), k.var(k.c(0.0), "tau")
    zero = k.rc(0.0)
    with k.loop(0, batch_of(a), name="batch") as bi:
        base = b.mul(bi, i64(m * n))
        with k.loop(0, kmin, name="j") as j:
            alpha = k.ld(qr, k.at(base, j, n, j))
            xnorm2.set(zero)
            with k.loop(b.add(j, i64(1)), i64(m), name="nx") as i:
                xnorm2.set(b.fadd(xnorm2.get(), k.abs2(k.ld(qr, k.at(base, i, n, j)))))
            ar, ai = k.re(alpha), k.im(alpha)
            trivial = b.and_(b.fcmp_ordered("==", xnorm2.get(), zero),
                             b.fcmp_ordered("==", ai, zero))
            with k.branches(trivial) as (no, yes):
                with no:
                    tau.set(k.c(0.0))
                with yes:
                    beta = b.fneg(k.copysign(
                        k.sqrt(b.fadd(k.abs2(alpha), xnorm2.get())), ar))
                    tau.set(k.of_parts(b.fdiv(b.fsub(beta, ar), beta),
                                       b.fdiv(b.fneg(ai), beta)))
                    scal = k.div(k.c(1.0), k.sub(alpha, k.of_real(beta)))
                    with k.loop(b.add(j, i64(1)), i64(m), name="sx") as i:
                        at = k.at(base, i, n, j)
                        k.st(qr, at, k.mul(k.ld(qr, at), scal))
                    k.st(qr, k.at(base, j, n, j), k.of_real(beta))
            t = tau.get()
            k.st(tau_out, k.idx(b.mul(bi, i64(kmin)), j), t)
            # H^H = I - conj(tau) v v^H on the columns right of j (v[0] = 1, not stored)
            beta_at = k.at(base, j, n, j)
            saved = k.ld(qr, beta_at)
            k.st(qr, beta_at, k.c(1.0))
            apply_reflector(k, qr, base, n, j, m, (b.add(j, i64(1)), i64(n)), k.conj(t))
            k.st(qr, beta_at, saved)
    return k.done(), 0


def orgqr(mod: ir.Module, name: str, instr: Instruction, et: ET) -> tuple[ir.Function, int]:
    a, taus = (o.shape for o in instr.operands)
    m, n = a.dimensions[-2:]
    kr = taus.dimensions[-1]
    k = Kit(mod, name, et)
    b = k.b
    src, tau_in, q = k.operand(0, et), k.operand(1, et), k.result(0, et)
    copy_matrix(k, src, q, prod(a.dimensions))
    with k.loop(0, batch_of(a), name="batch") as bi:
        base = b.mul(bi, i64(m * n))
        with k.loop(kr, n, name="ej") as j, k.loop(0, m, name="ei") as i:  # columns k..n: e_j
            k.st(q, k.at(base, i, n, j),
                 b.select(b.icmp_signed("==", i, j), k.c(1.0), k.c(0.0)))
        with k.down(0, kr, name="h") as j:
            t = k.ld(tau_in, k.idx(b.mul(bi, i64(kr)), j))
            k.st(q, k.at(base, j, n, j), k.c(1.0))
            apply_reflector(k, q, base, n, j, m, (b.add(j, i64(1)), i64(n)), t)
            neg = k.sub(k.c(0.0), t)
            with k.loop(b.add(j, i64(1)), i64(m), name="sv") as i:
                at = k.at(base, i, n, j)
                k.st(q, at, k.mul(k.ld(q, at), neg))
            k.st(q, k.at(base, j, n, j), k.sub(k.c(1.0), t))
            with k.loop(i64(0), j, name="zu") as i:
                k.st(q, k.at(base, i, n, j), k.c(0.0))
    return k.done(), 0


__all__ = ["geqrf", "orgqr"]
