"""LAPACK 3.12's zlahqr (eigenvalues only: wantt = wantz = false) as loop code, for the
complex geev of lapack_geev.py: single-shift complex QR (Wilkinson's shift, exceptional
shifts every 10 iterations without a deflation) on the upper Hessenberg rows / columns
ilo..ihi, whose subdiagonal is kept real, deflating from the bottom. Indices are 0-based;
blocks follow the Fortran statement labels they name.
"""

from __future__ import annotations

from llvmlite import ir

from xlapy.aot.lapack_hqr import DAT1, FALSE, KEXSH, TRUE, Real
from xlapy.aot.lapack_kit import I32, Kit, Var
from xlapy.backends.cpu.llvm_util import i64


def csqrt(k: Kit, r: Real, z: ir.Value) -> ir.Value:
    """The principal square root of z."""
    b = k.b
    x, y = k.re(z), k.im(z)
    mod = k.sqrt(k.abs2(z))
    t = k.sqrt(b.fmul(r.c(0.5), b.fadd(r.abs(x), mod)))
    tiny = r.eq(t, r.c(0.0))
    q = b.fdiv(y, b.fmul(r.c(2.0), b.select(tiny, r.c(1.0), t)))
    pos = b.fcmp_ordered(">=", x, r.c(0.0))
    re = b.select(pos, t, r.abs(q))
    im = b.select(pos, q, k.copysign(t, y))
    return b.select(tiny, k.c(0.0), k.of_parts(re, im))


def zlarfg2(k: Kit, r: Real, alpha: ir.Value, x: ir.Value) -> tuple[ir.Value, ...]:
    """zlarfg for n = 2: (beta as complex, tau, scaled x); tau = 0 when x = 0 and alpha is
    real."""
    b = k.b
    ar, ai = k.re(alpha), k.im(alpha)
    xn2 = k.abs2(x)
    trivial = b.and_(r.eq(xn2, r.c(0.0)), r.eq(ai, r.c(0.0)))
    beta = b.fneg(k.copysign(k.sqrt(b.fadd(k.abs2(alpha), xn2)), ar))
    tau = k.of_parts(b.fdiv(b.fsub(beta, ar), beta), b.fdiv(b.fneg(ai), beta))
    scal = k.div(k.c(1.0), k.sub(alpha, k.of_real(beta)))
    return (b.select(trivial, alpha, k.of_real(beta)), b.select(trivial, k.c(0.0), tau),
            b.select(trivial, x, k.mul(x, scal)))


def zlahqr(k: Kit, h: ir.Value, n: int, lo: ir.Value, hi: ir.Value, w: ir.Value,
           info: Var) -> None:
    """Eigenvalues of the Hessenberg rows / columns lo..hi of h (n x n, complex) into w."""
    b, r = k.b, Real(k)

    def at(i: ir.Value, j: ir.Value) -> ir.Value:
        return k.at(i64(0), i, n, j)

    def hv(i: ir.Value, j: ir.Value) -> ir.Value:
        return k.ld(h, at(i, j))

    def mul_at(i: ir.Value, j: ir.Value, f: ir.Value) -> None:
        p = at(i, j)
        k.st(h, p, k.mul(k.ld(h, p), f))

    def cabs(z: ir.Value) -> ir.Value:
        return k.sqrt(k.abs2(z))

    def re_abs(z: ir.Value) -> ir.Value:
        return r.abs(k.re(z))

    ulp, zero = r.eps, r.c(0.0)
    with k.when(b.icmp_signed("==", lo, hi)):
        k.st(w, lo, hv(lo, lo))
    live0 = b.icmp_signed("<", lo, hi)
    with k.when(live0):  # label 20: make the subdiagonal real
        with k.loop(b.add(lo, i64(1)), b.add(hi, i64(1)), name="zr") as i:
            sub = hv(i, b.sub(i, i64(1)))
            with k.when(r.ne(k.im(sub), zero)):
                sc = k.div(sub, k.of_real(k.cabs1(sub)))
                sc = k.div(k.conj(sc), k.of_real(cabs(sc)))
                k.st(h, at(i, b.sub(i, i64(1))), k.of_real(cabs(sub)))
                with k.loop(i, b.add(hi, i64(1)), name="zrr") as j:
                    mul_at(i, j, sc)
                top = b.add(i, i64(1))
                top = b.select(b.icmp_signed("<", hi, top), hi, top)
                with k.loop(lo, b.add(top, i64(1)), name="zrc") as j:
                    mul_at(j, i, k.conj(sc))
    nh = b.add(b.sub(hi, lo), i64(1))
    smlnum = b.fmul(r.c(r.safmin), b.fdiv(b.sitofp(nh, k.r), r.c(ulp)))
    itmax = b.mul(i64(30), b.select(b.icmp_signed(">", nh, i64(10)), nh, i64(10)))
    iv, lv, kdefl = k.var(hi, "zq_i"), k.var(lo, "zq_l"), k.var(i64(0), "zkdefl")
    conv, failed, found = k.var(FALSE, "zconv"), k.var(FALSE, "zfailed"), k.var(FALSE, "zf")
    kf, mf = k.var(i64(0), "zkf"), k.var(i64(0), "zmf")
    v1, v2, t = k.var(k.c(0.0), "zv1"), k.var(k.c(0.0), "zv2"), k.var(k.c(0.0), "zt")
    tst = k.var(zero, "ztst")
    with k.loop(0, n + 1, name="zq_outer"):  # label 30
        live = b.and_(live0, b.and_(b.icmp_signed(">=", iv.get(), lo), b.not_(failed.get())))
        with k.when(live):
            i = iv.get()
            lv.set(lo)
            conv.set(FALSE)
            with k.loop(i64(0), b.add(itmax, i64(1)), name="zq_its"):  # DO 130 ITS
                with k.when(b.not_(conv.get())):
                    l_ = lv.get()
                    found.set(FALSE)
                    kf.set(l_)
                    with k.down(b.add(l_, i64(1)), b.add(i, i64(1)), name="zq_k") as kk:
                        with k.when(b.not_(found.get())):  # DO 40
                            km1 = b.sub(kk, i64(1))
                            sub = hv(kk, km1)
                            with k.branches(r.le(k.cabs1(sub), smlnum)) as (tiny, other):
                                with tiny:
                                    found.set(TRUE)
                                    kf.set(kk)
                                with other:
                                    _small(k, r, hv, kk, lo, hi, smlnum, tst, found, kf)
                    l_ = kf.get()  # label 50
                    lv.set(l_)
                    with k.when(b.icmp_signed(">", l_, lo)):
                        k.st(h, at(l_, b.sub(l_, i64(1))), k.c(0.0))
                    with k.branches(b.icmp_signed(">=", l_, i)) as (split, more):
                        with split:
                            conv.set(TRUE)
                        with more:
                            kdefl.set(b.add(kdefl.get(), i64(1)))
                            _shift(k, r, hv, i, l_, kdefl.get(), t)
                            m = _start(k, r, hv, i, l_, t.get(), (v1, v2), mf, found)
                            _step(k, r, h, at, hv, mul_at, i, l_, m, (v1, v2))
                            _real_subdiagonal(k, r, h, at, mul_at, i, l_)
            with k.branches(conv.get()) as (ok, bad):
                with ok:  # label 140
                    k.st(w, i, hv(i, i))
                    kdefl.set(i64(0))
                    iv.set(b.sub(lv.get(), i64(1)))
                with bad:
                    info.set(b.trunc(b.add(i, i64(1)), I32))
                    failed.set(TRUE)


def _small(k: Kit, r: Real, hv: object, kk: ir.Value, lo: ir.Value, hi: ir.Value,
           smlnum: ir.Value, tst: Var, found: Var, kf: Var) -> None:
    b = k.b
    km1 = b.sub(kk, i64(1))
    tst.set(b.fadd(k.cabs1(hv(km1, km1)), k.cabs1(hv(kk, kk))))
    with k.when(r.eq(tst.get(), r.c(0.0))):
        with k.when(b.icmp_signed(">=", b.sub(kk, i64(2)), lo)):
            tst.set(b.fadd(tst.get(), r.abs(k.re(hv(km1, b.sub(kk, i64(2)))))))
        with k.when(b.icmp_signed("<=", b.add(kk, i64(1)), hi)):
            tst.set(b.fadd(tst.get(), r.abs(k.re(hv(b.add(kk, i64(1)), kk)))))
    with k.when(r.le(r.abs(k.re(hv(kk, km1))), b.fmul(r.c(r.eps), tst.get()))):
        x, y = k.cabs1(hv(kk, km1)), k.cabs1(hv(km1, kk))
        ab, ba = r.max(x, y), r.min(x, y)
        x, y = k.cabs1(hv(kk, kk)), k.cabs1(k.sub(hv(km1, km1), hv(kk, kk)))
        aa, bb = r.max(x, y), r.min(x, y)
        s = b.fadd(aa, ab)
        with k.when(r.le(b.fmul(ba, b.fdiv(ab, s)),
                         r.max(smlnum, b.fmul(r.c(r.eps), b.fmul(bb, b.fdiv(aa, s)))))):
            found.set(TRUE)
            kf.set(kk)


def _shift(k: Kit, r: Real, hv: object, i: ir.Value, l_: ir.Value, kdefl: ir.Value,
           t: Var) -> None:
    """The shift T: exceptional every KEXSH iterations without a deflation, else
    Wilkinson's."""
    b = k.b
    im1 = b.sub(i, i64(1))
    ex2 = b.icmp_signed("==", b.srem(kdefl, i64(2 * KEXSH)), i64(0))
    ex1 = b.icmp_signed("==", b.srem(kdefl, i64(KEXSH)), i64(0))
    with k.branches(ex2) as (e2, not2):
        with e2:
            s = b.fmul(r.c(DAT1), r.abs(k.re(hv(i, im1))))
            t.set(k.add(k.of_real(s), hv(i, i)))
        with not2, k.branches(ex1) as (e1, wilkinson):
            with e1:
                s = b.fmul(r.c(DAT1), r.abs(k.re(hv(b.add(l_, i64(1)), l_))))
                t.set(k.add(k.of_real(s), hv(l_, l_)))
            with wilkinson:
                t.set(hv(i, i))
                u = k.mul(csqrt(k, r, hv(im1, i)), csqrt(k, r, hv(i, im1)))
                su = k.cabs1(u)
                with k.when(r.ne(su, r.c(0.0))):
                    x = k.scale(r.c(0.5), k.sub(hv(im1, im1), t.get()))
                    sx = k.cabs1(x)
                    s = r.max(su, sx)
                    xs, us = k.div(x, k.of_real(s)), k.div(u, k.of_real(s))
                    y = k.scale(s, csqrt(k, r, k.add(k.mul(xs, xs), k.mul(us, us))))
                    xn = k.div(x, k.of_real(b.select(r.lt(r.c(0.0), sx), sx, r.c(1.0))))
                    dot = b.fadd(b.fmul(k.re(xn), k.re(y)), b.fmul(k.im(xn), k.im(y)))
                    flip = b.and_(r.lt(r.c(0.0), sx), r.lt(dot, r.c(0.0)))
                    y = b.select(flip, k.sub(k.c(0.0), y), y)
                    t.set(k.sub(t.get(), k.mul(u, k.div(u, k.add(x, y)))))


def _start(k: Kit, r: Real, hv: object, i: ir.Value, l_: ir.Value, t: ir.Value,
           v: tuple[Var, Var], mf: Var, found: Var) -> ir.Value:
    """DO 60: the row M to start the single-shift step at, and v = (h11s, h21)."""
    b = k.b
    found.set(FALSE)
    mf.set(l_)
    with k.down(l_, i, name="zq_m") as m:
        with k.when(b.not_(found.get())):
            m1 = b.add(m, i64(1))
            h11, h22 = hv(m, m), hv(m1, m1)
            h11s = k.sub(h11, t)
            h21 = k.re(hv(m1, m))
            s = b.fadd(k.cabs1(h11s), r.abs(h21))
            h11s = k.div(h11s, k.of_real(s))
            h21 = b.fdiv(h21, s)
            v[0].set(h11s)
            v[1].set(k.of_real(h21))
            with k.branches(b.icmp_signed("==", m, l_)) as (first, other):
                with first:
                    found.set(TRUE)
                    mf.set(m)
                with other:
                    h10 = k.re(hv(m, b.sub(m, i64(1))))
                    lhs = b.fmul(r.abs(h10), r.abs(h21))
                    rhs = b.fmul(r.c(r.eps), b.fmul(k.cabs1(h11s), b.fadd(k.cabs1(h11),
                                                                          k.cabs1(h22))))
                    with k.when(r.le(lhs, rhs)):
                        found.set(TRUE)
                        mf.set(m)
    return mf.get()


def _step(k: Kit, r: Real, h: ir.Value, at: object, hv: object, mul_at: object,
          i: ir.Value, l_: ir.Value, m: ir.Value, v: tuple[Var, Var]) -> None:
    """DO 120: the single-shift QR step from row M to row I (i1 = l, i2 = i)."""
    b = k.b
    sm = k.var(k.c(0.0), "zsum")
    with k.loop(m, i, name="zq_sw") as kk:
        k1 = b.add(kk, i64(1))
        later = b.icmp_signed(">", kk, m)
        with k.when(later):
            v[0].set(hv(kk, b.sub(kk, i64(1))))
            v[1].set(hv(k1, b.sub(kk, i64(1))))
        beta, t1, x2 = zlarfg2(k, r, v[0].get(), v[1].get())
        with k.when(later):
            k.st(h, at(kk, b.sub(kk, i64(1))), beta)
            k.st(h, at(k1, b.sub(kk, i64(1))), k.c(0.0))
        t2 = k.re(k.mul(t1, x2))
        with k.loop(kk, b.add(i, i64(1)), name="zq_left") as j:  # J = K .. I2
            sm.set(k.add(k.mul(k.conj(t1), hv(kk, j)), k.scale(t2, hv(k1, j))))
            k.st(h, at(kk, j), k.sub(hv(kk, j), sm.get()))
            k.st(h, at(k1, j), k.sub(hv(k1, j), k.mul(sm.get(), x2)))
        top = b.add(kk, i64(2))
        top = b.select(b.icmp_signed("<", top, i), top, i)
        with k.loop(l_, b.add(top, i64(1)), name="zq_right") as j:  # J = I1 .. MIN(K+2, I)
            sm.set(k.add(k.mul(t1, hv(j, kk)), k.scale(t2, hv(j, k1))))
            k.st(h, at(j, kk), k.sub(hv(j, kk), sm.get()))
            k.st(h, at(j, k1), k.sub(hv(j, k1), k.mul(sm.get(), k.conj(x2))))
        first = b.and_(b.icmp_signed("==", kk, m), b.icmp_signed(">", m, l_))
        with k.when(first):  # keep H(M, M-1) real
            temp = k.sub(k.c(1.0), t1)
            temp = k.div(temp, k.of_real(k.sqrt(k.abs2(temp))))
            m1 = b.add(m, i64(1))
            mul_at(m1, m, k.conj(temp))
            with k.when(b.icmp_signed("<=", b.add(m, i64(2)), i)):
                mul_at(b.add(m, i64(2)), m1, temp)
            with k.loop(m, b.add(i, i64(1)), name="zq_fix") as j:
                with k.when(b.icmp_signed("!=", j, m1)):
                    with k.loop(b.add(j, i64(1)), b.add(i, i64(1)), name="zq_fr") as c:
                        mul_at(j, c, temp)
                    with k.loop(l_, j, name="zq_fc") as rr:
                        mul_at(rr, j, k.conj(temp))


def _real_subdiagonal(k: Kit, r: Real, h: ir.Value, at: object, mul_at: object,
                      i: ir.Value, l_: ir.Value) -> None:
    """Ensure H(I, I-1) is real (after label 120)."""
    b = k.b
    p = at(i, b.sub(i, i64(1)))
    temp = k.ld(h, p)
    with k.when(r.ne(k.im(temp), r.c(0.0))):
        rt = k.sqrt(k.abs2(temp))
        k.st(h, p, k.of_real(rt))
        unit = k.div(temp, k.of_real(rt))
        # (row I right of I2 = I: nothing when only eigenvalues are computed)
        with k.loop(l_, i, name="zq_ic") as rr:
            mul_at(rr, i, unit)


__all__ = ["zlahqr", "csqrt"]
