"""LAPACK 3.12's dlahqr (eigenvalues only: wantt = wantz = false) and dlanv2 as loop code,
for lapack_geev.py: Francis double-shift QR on the upper Hessenberg rows / columns
ilo..ihi, deflating from the bottom. Indices are 0-based here; each block is commented with
the Fortran statement labels it follows.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from xlapy.aot.lapack_kit import I32, Kit, Var
from xlapy.backends.cpu.llvm_util import i64
from xlapy.types import ElementType as ET

KEXSH = 10  # iterations without a deflation before an exceptional shift
DAT1, DAT2 = 0.75, -0.4375
I1 = ir.IntType(1)
TRUE, FALSE = ir.Constant(I1, 1), ir.Constant(I1, 0)


class Real:
    """Scalar helpers on real values of the kit's type (Fortran's MAX, MIN, SIGN, ...)."""

    def __init__(self, k: Kit) -> None:
        self.k, self.b = k, k.b
        fi = np.finfo(np.float32 if k.rt is ET.F32 else np.float64)
        self.eps = float(fi.eps)  # dlamch('P'): eps * base
        self.safmin = float(fi.tiny)

    def c(self, v: float) -> ir.Constant:
        return self.k.rc(v)

    def abs(self, x: ir.Value) -> ir.Value:
        return self.k.fabs(x)

    def max(self, *xs: ir.Value) -> ir.Value:
        out = xs[0]
        for x in xs[1:]:
            out = self.b.select(self.b.fcmp_ordered(">", x, out), x, out)
        return out

    def min(self, *xs: ir.Value) -> ir.Value:
        out = xs[0]
        for x in xs[1:]:
            out = self.b.select(self.b.fcmp_ordered("<", x, out), x, out)
        return out

    def sign(self, mag: ir.Value, s: ir.Value) -> ir.Value:
        return self.k.copysign(self.abs(mag), s)

    def lt(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered("<", x, y)

    def le(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered("<=", x, y)

    def eq(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered("==", x, y)

    def ne(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.fcmp_unordered("!=", x, y)

    def add(self, *xs: ir.Value) -> ir.Value:
        out = xs[0]
        for x in xs[1:]:
            out = self.b.fadd(out, x)
        return out


def larfg(k: Kit, r: Real, alpha: ir.Value, xs: list[ir.Value]) -> list[ir.Value]:
    """dlarfg on values: [beta, tau, scaled xs...]; x = 0 gives tau = 0 and leaves them."""
    b = k.b
    xn2 = r.c(0.0)
    for x in xs:
        xn2 = b.fadd(xn2, b.fmul(x, x))
    trivial = r.eq(xn2, r.c(0.0))
    beta = b.fneg(k.copysign(k.sqrt(b.fadd(b.fmul(alpha, alpha), xn2)), alpha))
    tau = b.fdiv(b.fsub(beta, alpha), beta)
    scal = b.fdiv(r.c(1.0), b.fsub(alpha, beta))
    return [b.select(trivial, alpha, beta), b.select(trivial, r.c(0.0), tau),
            *(b.select(trivial, x, b.fmul(x, scal)) for x in xs)]


def lanv2(k: Kit, r: Real, a0: ir.Value, b0: ir.Value, c0: ir.Value, d0: ir.Value
          ) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """dlanv2's eigenvalues of [[a, b], [c, d]]: (rt1r, rt1i, rt2r, rt2i). (Its rescaling
    of sigma / temp beyond 2^+-511 is not done.)"""
    b = k.b
    a, bb, c, d = (k.var(x, nm) for x, nm in ((a0, "la"), (b0, "lb"), (c0, "lc"), (d0, "ld")))
    zero, one = r.c(0.0), r.c(1.0)

    def sgn(x: ir.Value) -> ir.Value:
        return k.copysign(one, x)

    c_zero = r.eq(c.get(), zero)
    b_zero = r.eq(bb.get(), zero)
    equal = b.and_(r.eq(b.fsub(a.get(), d.get()), zero), r.ne(sgn(bb.get()), sgn(c.get())))
    with k.branches(c_zero) as (yes, no):
        with yes:
            pass
        with no, k.branches(b_zero) as (swap, rest):
            with swap:
                t = d.get()
                d.set(a.get())
                a.set(t)
                bb.set(b.fneg(c.get()))
                c.set(zero)
            with rest, k.when(b.not_(equal)):
                _lanv2_general(k, r, a, bb, c, d)
    rt1i = b.select(r.eq(c.get(), zero), zero,
                    b.fmul(k.sqrt(r.abs(bb.get())), k.sqrt(r.abs(c.get()))))
    return a.get(), rt1i, d.get(), b.fneg(rt1i)


def _lanv2_general(k: Kit, r: Real, a: Var, bb: Var, c: Var, d: Var) -> None:
    b = k.b
    zero, one, half = r.c(0.0), r.c(1.0), r.c(0.5)
    temp = b.fsub(a.get(), d.get())
    p = b.fmul(half, temp)
    bcmax = r.max(r.abs(bb.get()), r.abs(c.get()))
    bcmis = b.fmul(b.fmul(r.min(r.abs(bb.get()), r.abs(c.get())), k.copysign(one, bb.get())),
                   k.copysign(one, c.get()))
    scale = r.max(r.abs(p), bcmax)
    z = b.fadd(b.fmul(b.fdiv(p, scale), p), b.fmul(b.fdiv(bcmax, scale), bcmis))
    with k.branches(b.fcmp_ordered(">=", z, r.c(4 * r.eps))) as (real, cplx):
        with real:  # real eigenvalues
            z2 = b.fadd(p, r.sign(b.fmul(k.sqrt(scale), k.sqrt(z)), p))
            a.set(b.fadd(d.get(), z2))
            d.set(b.fsub(d.get(), b.fmul(b.fdiv(bcmax, z2), bcmis)))
            bb.set(b.fsub(bb.get(), c.get()))
            c.set(zero)
        with cplx:  # complex or almost equal real eigenvalues: equal diagonal
            sigma = b.fadd(bb.get(), c.get())
            tau = k.sqrt(b.fadd(b.fmul(sigma, sigma), b.fmul(temp, temp)))
            cs = k.sqrt(b.fmul(half, b.fadd(one, b.fdiv(r.abs(sigma), tau))))
            sn = b.fmul(b.fneg(b.fdiv(p, b.fmul(tau, cs))), k.copysign(one, sigma))
            av, bv, cv, dv = a.get(), bb.get(), c.get(), d.get()
            aa = b.fadd(b.fmul(av, cs), b.fmul(bv, sn))
            bb2 = b.fadd(b.fmul(b.fneg(av), sn), b.fmul(bv, cs))
            cc = b.fadd(b.fmul(cv, cs), b.fmul(dv, sn))
            dd = b.fadd(b.fmul(b.fneg(cv), sn), b.fmul(dv, cs))
            a.set(b.fadd(b.fmul(aa, cs), b.fmul(cc, sn)))
            bb.set(b.fadd(b.fmul(bb2, cs), b.fmul(dd, sn)))
            c.set(b.fadd(b.fmul(b.fneg(aa), sn), b.fmul(cc, cs)))
            d.set(b.fadd(b.fmul(b.fneg(bb2), sn), b.fmul(dd, cs)))
            t = b.fmul(half, b.fadd(a.get(), d.get()))
            a.set(t)
            d.set(t)
            with k.when(r.ne(c.get(), zero)):
                with k.branches(r.ne(bb.get(), zero)) as (nz, z0):
                    with nz, k.when(r.eq(k.copysign(one, bb.get()), k.copysign(one, c.get()))):
                        sab, sac = k.sqrt(r.abs(bb.get())), k.sqrt(r.abs(c.get()))
                        pp = r.sign(b.fmul(sab, sac), c.get())
                        a.set(b.fadd(t, pp))
                        d.set(b.fsub(t, pp))
                        bb.set(b.fsub(bb.get(), c.get()))
                        c.set(zero)
                    with z0:
                        bb.set(b.fneg(c.get()))
                        c.set(zero)


def lahqr(k: Kit, h: ir.Value, n: int, lo: ir.Value, hi: ir.Value, wr: ir.Value,
          wi: ir.Value, info: Var) -> None:
    """Eigenvalues of the Hessenberg rows / columns lo..hi of h (n x n) into wr / wi."""
    b, r = k.b, Real(k)

    def at(i: ir.Value, j: ir.Value) -> ir.Value:
        return k.at(i64(0), i, n, j)

    def hv(i: ir.Value, j: ir.Value) -> ir.Value:
        return k.ld(h, at(i, j))

    def one_less(x: ir.Value, d: int = 1) -> ir.Value:
        return b.sub(x, i64(d))

    def plus(x: ir.Value, d: int = 1) -> ir.Value:
        return b.add(x, i64(d))

    ulp, zero = r.eps, r.c(0.0)
    nh = b.add(b.sub(hi, lo), i64(1))
    smlnum = b.fmul(r.c(r.safmin), b.fdiv(b.sitofp(nh, k.r), r.c(ulp)))
    itmax = b.mul(i64(30), b.select(b.icmp_signed(">", nh, i64(10)), nh, i64(10)))
    with k.when(b.icmp_signed("==", lo, hi)):
        k.st(wr, lo, hv(lo, lo))
        k.st(wi, lo, zero)
    iv, lv, kdefl = k.var(hi, "hq_i"), k.var(lo, "hq_l"), k.var(i64(0), "kdefl")
    conv, failed, found = k.var(FALSE, "conv"), k.var(FALSE, "failed"), k.var(FALSE, "found")
    kf, mf = k.var(i64(0), "kf"), k.var(i64(0), "mf")
    v1, v2, v3 = (k.var(zero, f"v{j}") for j in (1, 2, 3))
    tst = k.var(zero, "tst")
    with k.loop(0, n + 1, name="hq_outer"):  # label 20: I from IHI down to ILO
        live = b.and_(b.icmp_signed("<", lo, hi), b.and_(
            b.icmp_signed(">=", iv.get(), lo), b.not_(failed.get())))
        with k.when(live):
            i = iv.get()
            lv.set(lo)
            conv.set(FALSE)
            with k.loop(i64(0), plus(itmax), name="hq_its"):  # DO 140 ITS
                with k.when(b.not_(conv.get())):
                    l_ = lv.get()
                    # DO 30: a single small subdiagonal element
                    found.set(FALSE)
                    kf.set(l_)
                    with k.down(plus(l_), plus(i), name="hq_k") as kk:
                        with k.when(b.not_(found.get())):
                            sub = r.abs(hv(kk, one_less(kk)))
                            with k.branches(r.le(sub, smlnum)) as (tiny, other):
                                with tiny:
                                    found.set(TRUE)
                                    kf.set(kk)
                                with other:
                                    _small_subdiagonal(k, r, hv, kk, lo, hi, sub, smlnum, tst,
                                                       found, kf)
                    l_ = kf.get()  # label 40
                    lv.set(l_)
                    with k.when(b.icmp_signed(">", l_, lo)):
                        k.st(h, at(l_, one_less(l_)), zero)
                    with k.branches(b.icmp_signed(">=", l_, one_less(i))) as (split, more):
                        with split:
                            conv.set(TRUE)
                        with more:
                            kdefl.set(plus(kdefl.get()))
                            shifts = _shifts(k, r, hv, i, l_, kdefl.get())
                            m = _start_row(k, r, hv, i, l_, shifts, (v1, v2, v3), mf, found)
                            _sweep(k, r, h, at, hv, i, l_, m, (v1, v2, v3))
            with k.branches(conv.get()) as (ok, bad):
                with ok:  # label 150
                    l_ = lv.get()
                    with k.branches(b.icmp_signed("==", l_, i)) as (single, pair):
                        with single:
                            k.st(wr, i, hv(i, i))
                            k.st(wi, i, zero)
                        with pair:
                            j = one_less(i)
                            e1r, e1i, e2r, e2i = lanv2(k, r, hv(j, j), hv(j, i), hv(i, j),
                                                       hv(i, i))
                            k.st(wr, j, e1r)
                            k.st(wi, j, e1i)
                            k.st(wr, i, e2r)
                            k.st(wi, i, e2i)
                    kdefl.set(i64(0))
                    iv.set(one_less(l_))
                with bad:
                    info.set(b.trunc(plus(i), I32))
                    failed.set(TRUE)


def _small_subdiagonal(k: Kit, r: Real, hv: object, kk: ir.Value, lo: ir.Value,
                       hi: ir.Value, sub: ir.Value, smlnum: ir.Value, tst: Var, found: Var,
                       kf: Var) -> None:
    """DO 30's test of H(K, K-1) against its neighbours (Ahues and Kressner)."""
    b = k.b
    km1 = b.sub(kk, i64(1))
    tst.set(b.fadd(r.abs(hv(km1, km1)), r.abs(hv(kk, kk))))
    with k.when(r.eq(tst.get(), r.c(0.0))):
        with k.when(b.icmp_signed(">=", b.sub(kk, i64(2)), lo)):
            tst.set(b.fadd(tst.get(), r.abs(hv(km1, b.sub(kk, i64(2))))))
        with k.when(b.icmp_signed("<=", b.add(kk, i64(1)), hi)):
            tst.set(b.fadd(tst.get(), r.abs(hv(b.add(kk, i64(1)), kk))))
    with k.when(r.le(sub, b.fmul(r.c(r.eps), tst.get()))):
        up = r.abs(hv(km1, kk))
        ab, ba = r.max(sub, up), r.min(sub, up)
        diff = r.abs(b.fsub(hv(km1, km1), hv(kk, kk)))
        aa, bb = r.max(r.abs(hv(kk, kk)), diff), r.min(r.abs(hv(kk, kk)), diff)
        s = b.fadd(aa, ab)
        lhs = b.fmul(ba, b.fdiv(ab, s))
        rhs = r.max(smlnum, b.fmul(r.c(r.eps), b.fmul(bb, b.fdiv(aa, s))))
        with k.when(r.le(lhs, rhs)):
            found.set(TRUE)
            kf.set(kk)


def _shifts(k: Kit, r: Real, hv: object, i: ir.Value, l_: ir.Value, kdefl: ir.Value
            ) -> tuple[ir.Value, ...]:
    """(rt1r, rt1i, rt2r, rt2i): Francis' double shift or an exceptional one."""
    b = k.b
    h11, h12, h21, h22 = (k.var(r.c(0.0), f"h{x}") for x in ("11", "12", "21", "22"))
    im1 = b.sub(i, i64(1))
    ex2 = b.icmp_signed("==", b.srem(kdefl, i64(2 * KEXSH)), i64(0))
    ex1 = b.icmp_signed("==", b.srem(kdefl, i64(KEXSH)), i64(0))

    def exceptional(s: ir.Value, corner: ir.Value) -> None:
        h11.set(b.fadd(b.fmul(r.c(DAT1), s), corner))
        h12.set(b.fmul(r.c(DAT2), s))
        h21.set(s)
        h22.set(h11.get())

    with k.branches(ex2) as (e2, not2):
        with e2:
            exceptional(b.fadd(r.abs(hv(i, im1)), r.abs(hv(im1, b.sub(i, i64(2))))), hv(i, i))
        with not2, k.branches(ex1) as (e1, francis):
            with e1:
                lp = b.add(l_, i64(1))
                exceptional(b.fadd(r.abs(hv(lp, l_)), r.abs(hv(b.add(l_, i64(2)), lp))),
                            hv(l_, l_))
            with francis:
                h11.set(hv(im1, im1))
                h21.set(hv(i, im1))
                h12.set(hv(im1, i))
                h22.set(hv(i, i))
    out = [k.var(r.c(0.0), f"rt{x}") for x in ("1r", "1i", "2r", "2i")]
    s = r.add(*(r.abs(x.get()) for x in (h11, h12, h21, h22)))
    with k.when(r.ne(s, r.c(0.0))):
        a11, a21, a12, a22 = (b.fdiv(x.get(), s) for x in (h11, h21, h12, h22))
        tr = b.fdiv(b.fadd(a11, a22), r.c(2.0))
        det = b.fsub(b.fmul(b.fsub(a11, tr), b.fsub(a22, tr)), b.fmul(a12, a21))
        rtdisc = k.sqrt(r.abs(det))
        with k.branches(b.fcmp_ordered(">=", det, r.c(0.0))) as (cplx, real):
            with cplx:
                out[0].set(b.fmul(tr, s))
                out[2].set(out[0].get())
                out[1].set(b.fmul(rtdisc, s))
                out[3].set(b.fneg(out[1].get()))
            with real:  # use only the real shift nearer h22
                x1, x2 = b.fadd(tr, rtdisc), b.fsub(tr, rtdisc)
                near1 = r.le(r.abs(b.fsub(x1, a22)), r.abs(b.fsub(x2, a22)))
                pick = b.fmul(b.select(near1, x1, x2), s)
                out[0].set(pick)
                out[2].set(pick)
                out[1].set(r.c(0.0))
                out[3].set(r.c(0.0))
    return tuple(x.get() for x in out)


def _start_row(k: Kit, r: Real, hv: object, i: ir.Value, l_: ir.Value,
               shifts: tuple[ir.Value, ...], v: tuple[Var, Var, Var], mf: Var, found: Var
               ) -> ir.Value:
    """DO 50: the row M to start the double-shift step at, and its first reflector v."""
    b = k.b
    rt1r, rt1i, rt2r, rt2i = shifts
    found.set(FALSE)
    mf.set(l_)
    with k.down(l_, b.sub(i, i64(1)), name="hq_m") as m:
        with k.when(b.not_(found.get())):
            m1, m2 = b.add(m, i64(1)), b.add(m, i64(2))
            hmm = hv(m, m)
            s = r.add(r.abs(b.fsub(hmm, rt2r)), r.abs(rt2i), r.abs(hv(m1, m)))
            h21s = b.fdiv(hv(m1, m), s)
            x1 = b.fsub(b.fadd(b.fmul(h21s, hv(m, m1)),
                               b.fmul(b.fsub(hmm, rt1r), b.fdiv(b.fsub(hmm, rt2r), s))),
                        b.fmul(rt1i, b.fdiv(rt2i, s)))
            x2 = b.fmul(h21s, b.fsub(b.fsub(b.fadd(hmm, hv(m1, m1)), rt1r), rt2r))
            x3 = b.fmul(h21s, hv(m2, m1))
            s2 = r.add(r.abs(x1), r.abs(x2), r.abs(x3))
            for var, x in zip(v, (x1, x2, x3)):
                var.set(b.fdiv(x, s2))
            with k.branches(b.icmp_signed("==", m, l_)) as (first, other):
                with first:
                    found.set(TRUE)
                    mf.set(m)
                with other:
                    mm1 = b.sub(m, i64(1))
                    h00 = b.fmul(r.abs(hv(m, mm1)), b.fadd(r.abs(v[1].get()),
                                                           r.abs(v[2].get())))
                    h01 = b.fmul(b.fmul(r.c(r.eps), r.abs(v[0].get())),
                                 r.add(r.abs(hv(mm1, mm1)), r.abs(hmm), r.abs(hv(m1, m1))))
                    with k.when(r.le(h00, h01)):
                        found.set(TRUE)
                        mf.set(m)
    return mf.get()


def _sweep(k: Kit, r: Real, h: ir.Value, at: object, hv: object, i: ir.Value,
           l_: ir.Value, m: ir.Value, v: tuple[Var, Var, Var]) -> None:
    """DO 130: the double-shift step from row M, chasing the bulge down to row I (i1 = l,
    i2 = i: only the active block, as for eigenvalues only)."""
    b = k.b
    sm = k.var(r.c(0.0), "sum")
    with k.loop(m, i, name="hq_sw") as kk:
        km1, k1, k2 = b.sub(kk, i64(1)), b.add(kk, i64(1)), b.add(kk, i64(2))
        nr3 = b.icmp_signed("<", kk, b.sub(i, i64(1)))
        later = b.icmp_signed(">", kk, m)
        with k.when(later):
            v[0].set(hv(kk, km1))
            v[1].set(hv(k1, km1))
            with k.when(nr3):
                v[2].set(hv(k2, km1))
        with k.branches(nr3) as (three, two):
            for block, width in ((three, 3), (two, 2)):
                with block:
                    got = larfg(k, r, v[0].get(), [x.get() for x in v[1:width]])
                    beta, t1, xs = got[0], got[1], got[2:]
                    with k.branches(later) as (chase, start):
                        with chase:
                            k.st(h, at(kk, km1), beta)
                            k.st(h, at(k1, km1), r.c(0.0))
                            if width == 3:
                                with k.when(b.icmp_signed("<", kk, b.sub(i, i64(1)))):
                                    k.st(h, at(k2, km1), r.c(0.0))
                        with start, k.when(b.icmp_signed(">", m, l_)):
                            p = at(kk, km1)
                            k.st(h, p, b.fmul(k.ld(h, p), b.fsub(r.c(1.0), t1)))
                    ts = [t1] + [b.fmul(t1, x) for x in xs]
                    vs = [None] + list(xs)
                    rows = [kk, k1, k2][:width]
                    with k.loop(kk, b.add(i, i64(1)), name="hq_left") as j:  # J = K .. I2
                        sm.set(hv(kk, j))
                        for q in range(1, width):
                            sm.set(b.fadd(sm.get(), b.fmul(vs[q], hv(rows[q], j))))
                        for q in range(width):
                            p = at(rows[q], j)
                            k.st(h, p, b.fsub(k.ld(h, p), b.fmul(sm.get(), ts[q])))
                    top = b.select(b.icmp_signed("<", b.add(kk, i64(3)), i), b.add(kk, i64(3)),
                                   i) if width == 3 else i
                    with k.loop(l_, b.add(top, i64(1)), name="hq_right") as j:  # J = I1 ..
                        sm.set(hv(j, kk))
                        for q in range(1, width):
                            sm.set(b.fadd(sm.get(), b.fmul(vs[q], hv(j, rows[q]))))
                        for q in range(width):
                            p = at(j, rows[q])
                            k.st(h, p, b.fsub(k.ld(h, p), b.fmul(sm.get(), ts[q])))


__all__ = ["lahqr", "lanv2", "larfg", "Real"]
