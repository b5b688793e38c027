"""XLA CPU's complex formulas as IR (the twins of ops/complex_xla.py): multiply and divide
with LLVM's FMA contraction made explicit, pow, exp, expm1, tanh and log as XLA's IR has
them (its own exp, log, log1p: xla_math_emit.py; libm's pow, atan2, sin, cos, tanh, log in
the part type), plus the small IR helpers elementwise_complex.py shares. Each fused step is
an explicit `llvm.fma`, so the bits do not depend on the target's FMA instruction."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import xla_math_emit
from xlapy.backends.cpu.llvm_util import F32, F64, intrinsic

Parts = tuple[ir.Value, ir.Value]


def _select(b: ir.IRBuilder, p: ir.Value, x: Parts, y: Parts) -> Parts:
    return b.select(p, x[0], y[0]), b.select(p, x[1], y[1])


def fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    """x * y + z rounded once (an FMA instruction, or libm's fma where the target has none)."""
    return intrinsic(b, f"llvm.fma.{sfx(x)}", x.type, [x, y, z])


def mul(b: ir.IRBuilder, x: Parts, y: Parts) -> Parts:
    """XLA CPU's product (ops/complex_xla.multiply): fma(a, c, -(b d)) + fma(b, c, a d) i,
    as LLVM contracts XLA's textbook formula; no C99 infinity recovery."""
    (a, c), (d, e) = x, y
    return (fma(b, a, d, b.fneg(b.fmul(c, e))), fma(b, c, d, b.fmul(a, e)))


def isnan(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    return b.fcmp_unordered("uno", v, v)


def isinf(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    return b.fcmp_ordered("==", fabs(b, v), ir.Constant(v.type, float("inf")))


def isfinite(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    return b.fcmp_ordered("<", fabs(b, v), ir.Constant(v.type, float("inf")))


def fabs(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    return intrinsic(b, f"llvm.fabs.{sfx(v)}", v.type, [v])


def copysign(b: ir.IRBuilder, m: ir.Value, s: ir.Value) -> ir.Value:
    return intrinsic(b, f"llvm.copysign.{sfx(m)}", m.type, [m, s])


def sfx(v: ir.Value) -> str:
    return "f32" if v.type == F32 else "f64"


def div(b: ir.IRBuilder, x: Parts, y: Parts) -> Parts:
    """XLA's complex division as the interpreter writes it (ops/complex_xla.divide): Smith's
    algorithm (both branches computed, one selected: |c| < |d| takes r = c / d), each
    `u v + w` fused, then C99 Annex G's recovery of a NaN + NaN i result for zero
    denominators, infinite numerators and infinite denominators."""
    (a, bb), (c, d) = x, y
    t = a.type

    def k(v: float) -> ir.Constant:
        return ir.Constant(t, v)

    one, zero, inf = k(1.0), k(0.0), k(float("inf"))
    lt = b.fcmp_ordered("<", fabs(b, c), fabs(b, d))
    r1, r2 = b.fdiv(c, d), b.fdiv(d, c)
    den1, den2 = fma(b, r1, c, d), fma(b, r2, d, c)
    re = b.select(lt, b.fdiv(fma(b, r1, a, bb), den1), b.fdiv(fma(b, r2, bb, a), den2))
    im = b.select(lt, b.fdiv(fma(b, r1, bb, b.fneg(a)), den1),
                  b.fdiv(fma(b, b.fneg(r2), a, bb), den2))
    not_nan_num = b.or_(b.not_(isnan(b, a)), b.not_(isnan(b, bb)))
    zero_den = b.and_(b.and_(b.fcmp_ordered("==", c, zero), b.fcmp_ordered("==", d, zero)),
                      not_nan_num)
    sinf = copysign(b, inf, c)
    inf_num = b.and_(b.or_(isinf(b, a), isinf(b, bb)),
                     b.and_(isfinite(b, c), isfinite(b, d)))

    def unit(v: ir.Value) -> ir.Value:  # copysign(isinf(v) ? 1 : 0, v)
        return copysign(b, b.select(isinf(b, v), one, zero), v)

    ai, bi, ci, di = unit(a), unit(bb), unit(c), unit(d)
    inf_den = b.and_(b.and_(isfinite(b, a), isfinite(b, bb)),
                     b.or_(isinf(b, c), isinf(b, d)))
    both_nan = b.and_(isnan(b, re), isnan(b, im))
    zero_den = b.and_(zero_den, both_nan)
    inf_num = b.and_(inf_num, both_nan)
    inf_den = b.and_(inf_den, both_nan)
    re_num = b.fmul(inf, fma(b, ai, c, b.fmul(bi, d)))
    im_num = b.fmul(inf, fma(b, bi, c, b.fneg(b.fmul(ai, d))))
    re_den = b.fmul(zero, fma(b, a, ci, b.fmul(bb, di)))
    im_den = b.fmul(zero, fma(b, bb, ci, b.fneg(b.fmul(a, di))))
    re = b.select(zero_den, b.fmul(sinf, a),
                  b.select(inf_num, re_num, b.select(inf_den, re_den, re)))
    im = b.select(zero_den, b.fmul(sinf, bb),
                  b.select(inf_num, im_num, b.select(inf_den, im_den, im)))
    return re, im


def declare(b: ir.IRBuilder, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(ret, list(args)), name=name)
        fn.attributes.add("nounwind")
    return fn


#: libm functions called through their LLVM intrinsic (lowered to the same libm call, one
#: per lane): the loop vectorizer widens a loop around an intrinsic (the call itself stays
#: scalar per lane, the rest of the element's arithmetic goes vector), not around a call.
_INTRINSICS = frozenset({"sin", "cos", "log", "pow", "atan2"})


def real_call(b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    """libm's real function `name` (float: `name`f) on scalar parts."""
    t = args[0].type
    if name in _INTRINSICS:
        return intrinsic(b, f"llvm.{name}.{sfx(args[0])}", t, list(args))
    full = name + ("f" if t == F32 else "")
    return b.call(declare(b, full, t, [t] * len(args)), list(args))


def xla_exp(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    return xla_math_emit.exp32(b, v) if v.type == F32 else xla_math_emit.exp64(b, v)


def cexp(b: ir.IRBuilder, re: ir.Value, im: ir.Value) -> Parts:
    """XLA's complex exp (ops/complex_xla.exp): e^a (cos b, sin b), (h cos b) h with
    h = e^(a / 2) where e^a overflows, 0 imaginary part where b is 0."""
    t = re.type
    e = xla_exp(b, re)
    h = xla_exp(b, b.fmul(re, ir.Constant(t, 0.5)))
    big = b.fcmp_ordered("==", e, ir.Constant(t, float("inf")))
    cos_b, sin_b = real_call(b, "cos", im), real_call(b, "sin", im)
    out_re = b.select(big, b.fmul(b.fmul(h, cos_b), h), b.fmul(e, cos_b))
    out_im = b.select(big, b.fmul(b.fmul(h, sin_b), h), b.fmul(e, sin_b))
    zero = ir.Constant(t, 0.0)
    return out_re, b.select(b.fcmp_ordered("==", im, zero), zero, out_im)


def xla_expm1(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """ops/complex_xla._expm1: XLA's inline expm1 (its own exp and tanh)."""
    t = v.type
    e = xla_exp(b, v)
    half = b.fmul(v, ir.Constant(t, 0.5))
    small = b.fmul(xla_math_emit.tanh(b, half), b.fadd(e, ir.Constant(t, 1.0)))
    big = b.fcmp_ordered(">", fabs(b, v), ir.Constant(t, 0.5))
    out = b.select(big, b.fsub(e, ir.Constant(t, 1.0)), small)
    return b.select(b.fcmp_ordered("==", half, ir.Constant(t, 0.0)), v, out)


def ctanh(b: ir.IRBuilder, re: ir.Value, im: ir.Value) -> Parts:
    """XLA's complex tanh (ops/complex_xla.tanh)."""
    t = re.type

    def k(v: float) -> ir.Constant:
        return ir.Constant(t, v)

    a2 = b.fadd(re, re)
    p, m = xla_expm1(b, a2), xla_expm1(b, b.fneg(a2))
    c, s = real_call(b, "cos", im), real_call(b, "sin", im)
    four_cs = b.fmul(b.fmul(c, s), k(4.0))
    pm = b.fadd(p, m)
    den = b.fadd(pm, b.fmul(b.fmul(c, c), k(4.0)))
    out_re = b.select(b.fcmp_ordered("==", pm, k(float("inf"))), copysign(b, k(1.0), re),
                      b.fdiv(b.fsub(p, m), den))
    out_im = b.fdiv(four_cs, den)
    a_inf = isinf(b, re)
    nan_cs = isnan(b, four_cs)
    out_re = b.select(b.and_(nan_cs, b.not_(a_inf)), k(float("nan")), out_re)
    zero_im = b.or_(b.fcmp_ordered("==", im, k(0.0)), b.and_(a_inf, nan_cs))
    return out_re, b.select(zero_im, k(0.0), out_im)


def cexpm1(b: ir.IRBuilder, re: ir.Value, im: ir.Value) -> Parts:
    """XLA's complex expm1 (ops/complex_xla.expm1): (m (c + 1) + c, (m + 1) sin b) with
    m = XLA's expm1(a), c = XLA's cos(b) - 1 polynomial; 0 imaginary part where b = 0."""
    from xlapy.ops.complex_xla import COSM1

    t = re.type

    def k(v: float) -> ir.Constant:
        return ir.Constant(t, v)

    m = xla_expm1(b, re)
    b2 = b.fmul(im, im)
    bits = COSM1[np.dtype(np.float32 if t == F32 else np.float64)]
    cs = [xla_math_emit.c32(v) if t == F32 else xla_math_emit.c64(v) for v in bits]
    p = fma(b, cs[0], b2, cs[1])
    for c in cs[2:]:
        p = fma(b, p, b2, c)
    small = fma(b, b.fmul(b2, b2), p, b.fmul(b2, k(-0.5)))
    cm1 = b.select(b.fcmp_ordered(">=", b2, k(0.61685)),
                   b.fsub(real_call(b, "cos", im), k(1.0)), small)
    out_re = fma(b, m, b.fadd(cm1, k(1.0)), cm1)
    out_im = b.fmul(b.fadd(m, k(1.0)), real_call(b, "sin", im))
    return out_re, b.select(b.fcmp_ordered("==", im, k(0.0)), k(0.0), out_im)


def sq_err(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """ops/complex_xla._sq_err: v^2 - RN(v^2), exactly (Dekker)."""
    t = v.type
    vv = b.fmul(v, v)
    big = b.fmul(v, ir.Constant(t, 4097.0 if t == F32 else 134217729.0))
    hi = b.fadd(big, b.fsub(v, big))
    lo = b.fsub(v, hi)
    hl = b.fmul(hi, lo)
    e = b.fadd(b.fadd(b.fadd(b.fneg(vv), b.fmul(hi, hi)), hl), hl)
    return b.fadd(e, b.fmul(lo, lo))


def clog(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> Parts:
    """XLA's complex log (ops/complex_xla.log)."""
    t = x.type

    def k(v: float) -> ir.Constant:
        return ir.Constant(t, v)

    xx, yy = b.fmul(x, x), b.fmul(y, y)
    gt = b.fcmp_ordered(">", yy, xx)
    mx, mn = b.select(gt, yy, xx), b.select(gt, xx, yy)
    s1 = b.fadd(mx, k(-1.0))
    s2 = b.fadd(s1, mn)
    ey, ex = sq_err(b, y), sq_err(b, x)
    s3 = b.fadd(s2, ey)
    s4 = b.fadd(s3, ex)
    c = b.fadd(b.fsub(mx, b.fsub(s1, k(-1.0))), b.fsub(mn, b.fsub(s2, s1)))
    c = b.fadd(c, b.fsub(ey, b.fsub(s3, s2)))
    c = b.fadd(c, b.fsub(ex, b.fsub(s4, s3)))
    s = b.fadd(s4, c)
    ax, ay = fabs(b, x), fabs(b, y)
    big = intrinsic(b, f"llvm.maximum.{sfx(x)}", t, [ax, ay])
    small = intrinsic(b, f"llvm.minimum.{sfx(x)}", t, [ax, ay])
    r = b.select(b.fcmp_ordered("==", small, big), k(1.0), b.fdiv(small, big))
    log_big = xla_math_emit.log32(b, big) if t == F32 else real_call(b, "log", big)
    far = b.fadd(log_big, b.fmul(xla_log1p(b, b.fmul(r, r)), k(0.5)))
    near = b.fmul(xla_log1p(b, s), k(0.5))
    re = b.select(b.fcmp_ordered("<", fabs(b, s), k(0.5)), near, far)
    return re, real_call(b, "atan2", y, x)


def xla_log1p(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    return xla_math_emit.log1p(b, v, declare(b, "log", F64, [F64]))


def xla_abs(b: ir.IRBuilder, re: ir.Value, im: ir.Value) -> ir.Value:
    """XLA's |z| (ops/complex_xla._abs): M sqrt(fma(r, r, 1)), r = m / M (NaN-propagating
    max / min of |re|, |im|); m where that is NaN."""
    x, y = fabs(b, re), fabs(b, im)
    big = intrinsic(b, f"llvm.maximum.{sfx(x)}", x.type, [x, y])
    small = intrinsic(b, f"llvm.minimum.{sfx(x)}", x.type, [x, y])
    r = b.fdiv(small, big)
    root = intrinsic(b, f"llvm.sqrt.{sfx(x)}", x.type, [fma(b, r, r, ir.Constant(x.type, 1.0))])
    out = b.fmul(big, root)
    return b.select(isnan(b, out), small, out)


def power(b: ir.IRBuilder, x: Parts, y: Parts) -> Parts:
    """XLA's complex pow as the interpreter writes it (ops/complex_xla.power):
    |z|^c e^(-d t) (cos q, sin q), t = atan2(b, a), q = fma(c, t, d ln|z|), pow, atan2,
    cos, sin libm's in the part type, exp XLA's (xla_math_emit), log XLA's for c64 and
    libm's for c128; then inf + 0i with d = 0 (inf + 0i for c > 0, 0 for c < 0),
    1 + 0i (1), z^0 (1), 0^c with d = 0, c >= 0 (0, or 1 for c = 0)."""
    (a, bb), (c, d) = x, y
    t = a.type

    def k(v: float) -> ir.Constant:
        return ir.Constant(t, v)

    m = xla_abs(b, a, bb)
    arg = real_call(b, "atan2", bb, a)
    coeff = b.fmul(xla_exp(b, b.fmul(arg, b.fneg(d))), real_call(b, "pow", m, c))
    log_m = xla_math_emit.log32(b, m) if t == F32 else real_call(b, "log", m)
    q = fma(b, c, arg, b.fmul(d, log_m))
    re, im = b.fmul(coeff, real_call(b, "cos", q)), b.fmul(coeff, real_call(b, "sin", q))
    zero, one = k(0.0), k(1.0)
    d0 = b.fcmp_ordered("==", d, zero)
    c0 = b.fcmp_ordered("==", c, zero)
    zero_base = b.and_(b.and_(b.fcmp_ordered("==", m, zero), d0), b.fcmp_ordered(">=", c, zero))
    re = b.select(zero_base, b.select(c0, one, zero), re)
    im = b.select(zero_base, zero, im)
    b_zero = b.fcmp_ordered("==", bb, zero)
    unit = b.or_(b.and_(c0, d0), b.and_(b.fcmp_ordered("==", a, one), b_zero))
    re, im = b.select(unit, one, re), b.select(unit, zero, im)
    inf_base = b.and_(b.and_(b.fcmp_ordered("==", a, k(float("inf"))), b_zero), d0)
    pos = b.and_(inf_base, b.fcmp_ordered(">", c, zero))
    neg = b.and_(inf_base, b.fcmp_ordered("<", c, zero))
    re = b.select(pos, k(float("inf")), b.select(neg, zero, re))
    im = b.select(b.or_(pos, neg), zero, im)
    return re, im


def _hypot(b: ir.IRBuilder, a: ir.Value, c: ir.Value) -> ir.Value:
    """ops/complex_xla._hypot."""
    t = a.type
    mx = intrinsic(b, f"llvm.maximum.{sfx(a)}", t, [a, c])
    mn = intrinsic(b, f"llvm.minimum.{sfx(a)}", t, [a, c])
    r = b.fdiv(mn, mx)
    r2 = b.fmul(r, r)
    sq = intrinsic(b, f"llvm.sqrt.{sfx(a)}", t, [b.fadd(r2, ir.Constant(t, 1.0))])
    near = b.and_(b.fcmp_ordered("==", sq, ir.Constant(t, 1.0)),
                  b.fcmp_ordered(">", r2, ir.Constant(t, 0.0)))
    out = b.select(near, b.fadd(mx, b.fdiv(b.fmul(mx, r2), ir.Constant(t, 2.0))), b.fmul(mx, sq))
    eq = b.fcmp_ordered("==", mx, mn)
    return b.select(eq, b.fmul(mx, ir.Constant(t, _typed(t, math.sqrt(2)))), out)


def _typed(t: ir.Type, v: float) -> float:
    return float(np.float32(v)) if t == F32 else v


def csqrt(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> Parts:
    """XLA's complex sqrt (ops/complex_xla.sqrt)."""
    from xlapy.ops.complex_xla import _SQRT_1P_SQRT2, _SQRT_2P_2SQRT2

    t = x.type
    nt = np.float32 if t == F32 else np.float64

    def k(v: float) -> ir.Constant:
        return ir.Constant(t, float(nt(v)))

    def sqrt(v: ir.Value) -> ir.Value:
        return intrinsic(b, f"llvm.sqrt.{sfx(v)}", t, [v])

    s2 = nt(math.sqrt(2))
    ax, ay = fabs(b, x), fabs(b, y)
    eq, gt = b.fcmp_ordered("==", ax, ay), b.fcmp_ordered(">", ax, ay)
    lt = b.fcmp_ordered("<", ax, ay)
    sq_ax, sq_ay = sqrt(ax), sqrt(ay)
    u = sqrt(fma(b, ax, k(0.5), b.fmul(_hypot(b, ax, ay), k(0.5))))
    bad = b.or_(b.fcmp_ordered("==", u, k(0.0)), b.fcmp_ordered("==", u, k(float("inf"))))
    q = b.select(eq, k(1.0), b.select(lt, b.fdiv(ax, ay), b.fdiv(ay, ax)))
    h2 = _hypot(b, fabs(b, q), k(1.0))
    r1, r2 = sqrt(b.fadd(h2, k(1.0))), sqrt(b.fadd(q, h2))
    inv_s2 = k(nt(1) / s2)
    big = b.select(gt, b.fmul(sq_ax, b.fmul(r1, inv_s2)), b.fmul(sq_ay, b.fmul(r2, inv_s2)))
    re_big = b.select(eq, b.fmul(sq_ax, k(nt(_SQRT_1P_SQRT2) / s2)), b.select(bad, big, u))
    ratio = b.select(eq, k(1.0), b.select(lt, b.fdiv(sq_ax, sq_ay), b.fdiv(sq_ay, sq_ax)))
    small = b.select(gt, b.fdiv(b.fmul(sq_ay, ratio), b.fmul(r1, k(s2))),
                     b.fdiv(sq_ay, b.fmul(r2, k(s2))))
    re_small = b.select(eq, b.fmul(sq_ay, k(nt(1) / nt(_SQRT_2P_2SQRT2))),
                        b.select(bad, small, b.fdiv(ay, b.fmul(u, k(2.0)))))
    neg_y = b.fcmp_ordered("<", y, k(0.0))
    re = b.select(b.fcmp_ordered(">=", x, k(0.0)), re_big, re_small)
    im = b.select(b.fcmp_ordered("<", x, k(0.0)), b.select(neg_y, b.fneg(re_big), re_big),
                  b.select(neg_y, b.fneg(re_small), re_small))
    return re, im


def _two_sum_err(b: ir.IRBuilder, a: ir.Value, c: ir.Value, s: ir.Value) -> ir.Value:
    bv = b.fsub(s, a)
    return b.fadd(b.fsub(a, b.fsub(s, bv)), b.fsub(c, bv))


def clog1p(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> Parts:
    """XLA's complex log1p (ops/complex_xla.log1p)."""
    t = x.type
    nt = np.float32 if t == F32 else np.float64

    def k(v: float) -> ir.Constant:
        return ir.Constant(t, float(nt(v)))

    def log(v: ir.Value) -> ir.Value:
        return xla_math_emit.log32(b, v) if t == F32 else real_call(b, "log", v)

    big_cut = k(math.sqrt(float(np.finfo(nt).max)) / 100)
    ax, ay = fabs(b, x), fabs(b, y)
    mx = intrinsic(b, f"llvm.maximum.{sfx(x)}", t, [ax, ay])
    mn = intrinsic(b, f"llvm.minimum.{sfx(x)}", t, [ax, ay])
    r = b.fdiv(mn, mx)
    r2 = b.select(b.fcmp_ordered("==", mn, mx), k(1.0), b.fmul(r, r))
    re_big = b.fadd(log(mx), b.fmul(xla_log1p(b, r2), k(0.5)))
    xp1 = b.fadd(x, k(1.0))
    yy = b.fmul(y, y)
    re_near = b.fmul(log(fma(b, xp1, xp1, yy)), k(0.5))
    x2, xx = b.fadd(x, x), b.fmul(x, x)
    s1 = b.fadd(x2, yy)
    s2 = b.fadd(s1, xx)
    ey, ex = sq_err(b, y), sq_err(b, x)
    s3 = b.fadd(s2, ey)
    s4 = b.fadd(s3, ex)
    c = b.fadd(_two_sum_err(b, x2, yy, s1), _two_sum_err(b, s1, xx, s2))
    c = b.fadd(c, _two_sum_err(b, s2, ey, s3))
    c = b.fadd(c, _two_sum_err(b, s3, ex, s4))
    re_mid = b.fmul(xla_log1p(b, b.fadd(s4, c)), k(0.5))
    near = b.fcmp_ordered("<", b.fadd(fabs(b, xp1), ay), k(0.2))
    re = b.select(b.fcmp_ordered(">", mx, big_cut), re_big, b.select(near, re_near, re_mid))
    return re, real_call(b, "atan2", y, xp1)


def crsqrt(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> Parts:
    """XLA's complex rsqrt (ops/complex_xla.rsqrt)."""
    t = x.type

    def k(v: float) -> ir.Constant:
        return ir.Constant(t, v)

    def sqrt(v: ir.Value) -> ir.Value:
        return intrinsic(b, f"llvm.sqrt.{sfx(v)}", t, [v])

    def rs(v: ir.Value) -> ir.Value:
        return b.fdiv(k(1.0), sqrt(v))

    ax, ay = fabs(b, x), fabs(b, y)
    mx = intrinsic(b, f"llvm.maximum.{sfx(x)}", t, [ax, ay])
    mn = intrinsic(b, f"llvm.minimum.{sfx(x)}", t, [ax, ay])
    r = b.fdiv(mn, mx)
    m = b.fmul(rs(mx), sqrt(rs(fma(b, r, r, k(1.0)))))
    m = b.select(isnan(b, m), rs(mn), m)
    h = b.fmul(real_call(b, "atan2", y, x), k(-0.5))
    re, im = b.fmul(m, real_call(b, "cos", h)), b.fmul(m, real_call(b, "sin", h))
    inf_x = b.or_(isinf(b, x), b.and_(isinf(b, y), isnan(b, x)))
    re = b.select(inf_x, copysign(b, k(0.0), x), re)
    im = b.select(inf_x, b.fneg(copysign(b, k(0.0), y)), im)
    zero = b.and_(b.fcmp_ordered("==", x, k(0.0)), b.fcmp_ordered("==", y, k(0.0)))
    return b.select(zero, k(float("inf")), re), b.select(zero, k(float("nan")), im)
