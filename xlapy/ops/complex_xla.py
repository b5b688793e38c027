"""Complex arithmetic as XLA CPU computes it (jax.jit's results are the expectation).

XLA's elemental IR emitter writes complex multiply and divide as plain real arithmetic, and
LLVM, allowed to contract (XLA CPU's default), fuses `x * y + z` into one FMA. Which
product of a pair gets fused was read off jax.jit's results (jaxlib 0.10, x86-64 with FMA:
tests/differential/jax_ulp_complex.py); every other formula (the textbook product,
Smith's division without FMA, numpy's) differs from XLA by an ulp on about 15% of inputs.
The cpu backend emits the same steps with `llvm.fma` (backends/cpu/elementwise_complex.py),
so both backends give XLA's bits on any x86-64 (an FMA instruction or libm's fma).

Intermediates are flushed (FTZ, as the kernels' MXCSR); the callers flush inputs (DAZ) and
results.
"""

from __future__ import annotations

import math

import numpy as np

from xlapy.ops import libm, xla_math
from xlapy.ops.elementwise import flush, make_complex
from xlapy.ops.fma import fma


def multiply(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(a + bi)(c + di) = fma(a, c, -(b d)) + fma(b, c, a d) i: each product rounded
    before the fused one (XLA: no C99 recovery of inf * 0 NaNs; (inf + 0i)(inf + 0i) is
    inf + NaN i, as jax gives)."""
    a, b, c, d = x.real, x.imag, y.real, y.imag
    with np.errstate(all="ignore"):
        bd, ad = flush(b * d), flush(a * d)
        return make_complex(fma(a, c, -bd), fma(b, c, ad), x.dtype)


def _unit(v: np.ndarray) -> np.ndarray:
    """copysign(isinf(v) ? 1 : 0, v)."""
    return np.copysign(np.where(np.isinf(v), 1, 0).astype(v.dtype), v)


def divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """XLA's EmitComplexDivide: Smith's algorithm, both branches computed and one selected
    (|c| < |d|: r = c / d, else r = d / c; a NaN part takes the second), each `u v + w`
    fused; then, where both parts came out NaN, C99 Annex G's recovery of zero
    denominators, infinite numerators and infinite denominators (its sums fused too)."""
    with np.errstate(all="ignore"):  # (inf * 0 and the like are the values)
        a, b, c, d = x.real, x.imag, y.real, y.imag
        lt = np.abs(c) < np.abs(d)
        r1, r2 = flush(c / d), flush(d / c)
        den1, den2 = flush(fma(r1, c, d)), flush(fma(r2, d, c))
        re = np.where(lt, flush(fma(r1, a, b)) / den1, flush(fma(r2, b, a)) / den2)
        im = np.where(lt, flush(fma(r1, b, -a)) / den1, flush(fma(-r2, a, b)) / den2)
        zero = np.zeros((), a.dtype)
        inf = np.asarray(np.inf, a.dtype)
        both_nan = np.isnan(re) & np.isnan(im)
        # Zero denominator, numerator not NaN: infinities signed by c's sign and a, b.
        zero_den = (c == 0) & (d == 0) & (~np.isnan(a) | ~np.isnan(b)) & both_nan
        sinf = np.copysign(inf, c)
        # Infinite numerator over a finite denominator.
        inf_num = (np.isinf(a) | np.isinf(b)) & np.isfinite(c) & np.isfinite(d) & both_nan
        ai, bi, ci, di = _unit(a), _unit(b), _unit(c), _unit(d)
        # Finite numerator over an infinite denominator.
        inf_den = np.isfinite(a) & np.isfinite(b) & (np.isinf(c) | np.isinf(d)) & both_nan
        re = np.where(zero_den, sinf * a, np.where(
            inf_num, inf * fma(ai, c, flush(bi * d)),
            np.where(inf_den, zero * fma(a, ci, flush(b * di)), re)))
        im = np.where(zero_den, sinf * b, np.where(
            inf_num, inf * fma(bi, c, -flush(ai * d)),
            np.where(inf_den, zero * fma(b, ci, -flush(a * di)), im)))
    return make_complex(re, im, x.dtype)


def _abs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """XLA's |a + bi| (EmitComplexAbs): M sqrt(fma(r, r, 1)), r = m / M with M, m the
    larger and smaller |part| (NaN-propagating max / min); where that is NaN (0 / 0,
    inf / inf, a NaN part) the smaller part m."""
    x, y = np.abs(a), np.abs(b)
    big, small = np.maximum(x, y), np.minimum(x, y)
    r = flush(small / big)
    out = big * np.sqrt(flush(fma(r, r, np.ones((), r.dtype))))
    return flush(np.where(np.isnan(out), small, out))


def power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """XLA's EmitComplexPower, as XLA CPU's IR computes it: (a + bi)^(c + di) =
    |z|^c e^(-d t) (cos q, sin q), t = atan2(b, a), q = c t + d ln|z| (fused:
    fma(c, t, d ln|z|)); pow, atan2, cos and sin are libm's in the part type (powf... for
    c64), exp XLA's own (ops/xla_math.py), log XLA's own for c64 and libm's for c128.
    Then, in this order of precedence: z = inf + 0i with d = 0 gives inf + 0i for c > 0
    and 0 for c < 0; z = 1 + 0i gives 1 (any exponent, NaN too); c = d = 0 gives 1;
    |z| = 0 with d = 0 and c >= 0 gives 0 (c > 0) or 1 (c = 0). Elsewhere 0^c is NaN, and
    so is (2 + 0i)^inf (q = inf * 0): XLA's results, kept."""
    a, b, c, d = x.real, x.imag, y.real, y.imag
    m = _abs(a, b)
    t = flush(libm.call("atan2", b, a))
    coeff = flush(xla_math.exp(flush(t * -d)) * flush(libm.call("power", m, c)))
    log_m = xla_math.log32(m) if m.dtype == np.float32 else libm.call("log", m)
    q = flush(fma(c, t, flush(d * flush(log_m))))
    re = flush(coeff * flush(libm.call("cos", q)))
    im = flush(coeff * flush(libm.call("sin", q)))
    one, zero = (np.asarray(v, a.dtype) for v in (1, 0))
    d0 = d == 0
    out_re = np.where((m == 0) & d0 & (c >= 0), np.where(c == 0, one, zero), re)
    out_im = np.where((m == 0) & d0 & (c >= 0), zero, im)
    unit = ((c == 0) & d0) | ((a == 1) & (b == 0))
    out_re, out_im = np.where(unit, one, out_re), np.where(unit, zero, out_im)
    inf_base = (a == np.inf) & (b == 0) & d0
    out_re = np.where(inf_base & (c > 0), np.inf, np.where(inf_base & (c < 0), zero, out_re))
    out_im = np.where(inf_base & (c != 0), zero, out_im)
    return make_complex(out_re, out_im, x.dtype)


def exp(z: np.ndarray) -> np.ndarray:
    """XLA's complex exp (its HLO): e^a (cos b, sin b) with e^a XLA's own exp
    (ops/xla_math.py) and libm's cos / sin; where e^a overflows, (h cos b) h with
    h = e^(a / 2); the imaginary part is 0 where b is 0. No C99 special cases:
    exp(inf + inf i) is NaN + NaN i, as XLA's."""
    a, b = z.real, z.imag
    e = xla_math.exp(a)
    h = xla_math.exp(flush(a * a.dtype.type(0.5)))
    big = e == np.inf
    cos_b, sin_b = flush(libm.call("cos", b)), flush(libm.call("sin", b))
    with np.errstate(all="ignore"):
        re = np.where(big, flush(flush(h * cos_b) * h), flush(e * cos_b))
        im = np.where(big, flush(flush(h * sin_b) * h), flush(e * sin_b))
    return make_complex(re, np.where(b == 0, a.dtype.type(0), im), z.dtype)


def _expm1(v: np.ndarray) -> np.ndarray:
    """XLA's inline expm1 (in its complex tanh): e - 1 for |v| > 1/2, else tanh(v / 2)
    (e + 1) (v where v / 2 is 0), e = exp(v) and tanh XLA's own (ops/xla_math.py)."""
    t = v.dtype.type
    e = xla_math.exp(v)
    half = flush(v * t(0.5))
    small = flush(xla_math.tanh(half) * flush(e + t(1)))
    out = np.where(np.abs(v) > t(0.5), flush(e - t(1)), small)
    return np.where(half == 0, v, out)


def tanh(z: np.ndarray) -> np.ndarray:
    """XLA's complex tanh (EmitComplexTanh, from its IR): with p = expm1(2a), m =
    expm1(-2a) (XLA's expm1 above), c = cos b, s = sin b: ((p - m) + 4 c s i) / ((p + m) +
    4 c^2); real part sign(a) 1 where p + m overflows; where 4 c s is NaN (b infinite or
    NaN) the real part is NaN unless a is infinite, and the imaginary part is 0 where b = 0
    or a is infinite. tanh(0 + inf i) is NaN + NaN i (C99: 0 + NaN i), as XLA's."""
    a, b = z.real, z.imag
    t = a.dtype.type
    with np.errstate(all="ignore"):
        a2 = flush(a + a)
        p, m = _expm1(a2), _expm1(-a2)
        c, s = flush(libm.call("cos", b)), flush(libm.call("sin", b))
        four_cs = flush(flush(c * s) * t(4))
        pm = flush(p + m)
        den = flush(pm + flush(flush(c * c) * t(4)))
        re = np.where(pm == np.inf, np.copysign(t(1), a), flush(flush(p - m) / den))
        im = flush(four_cs / den)
        a_inf = np.abs(a) == np.inf
        nan_cs = np.isnan(four_cs)
        re = np.where(nan_cs & ~a_inf, t(np.nan), re)
        im = np.where((b == 0) | (a_inf & nan_cs), t(0), im)
    return make_complex(re, im, z.dtype)


#: XLA's cos(x) - 1 polynomial in x^2 (highest degree first): f32, f64.
COSM1 = {np.dtype(np.float32): (0x29555E8C, 0xAD49C992, 0x310F76C6, 0xB493F27E, 0x37D00D01,
                                0xBAB60B61, 0x3D2AAAAB),
         np.dtype(np.float64): (0x3D2AABD1874DF32F, 0xBDA9393241EB1E86, 0x3E21EED8C90CB3CA,
                                0xBE927E4FB75EB8CA, 0x3EFA01A01A018CCA, 0xBF56C16C16C16C0F,
                                0x3FA5555555555555)}


def _bits(v: int, dt: np.dtype) -> np.floating:
    ints = np.uint32 if dt == np.float32 else np.uint64
    return np.array([v], ints).view(dt)[0]  # type: ignore[no-any-return]


def _cosm1(b: np.ndarray) -> np.ndarray:
    """XLA's cos(b) - 1: cos b - 1 for b^2 >= 0.61685, else b^4 P(b^2) - b^2 / 2 (fused)."""
    t = b.dtype.type
    b2 = flush(b * b)
    c = [_bits(v, b.dtype) for v in COSM1[b.dtype]]
    p = fma(c[0], b2, c[1])
    for k in c[2:]:
        p = fma(p, b2, k)
    small = fma(flush(b2 * b2), p, flush(b2 * t(-0.5)))
    return np.where(b2 >= t(0.61685), flush(flush(libm.call("cos", b)) - t(1)), flush(small))


def expm1(z: np.ndarray) -> np.ndarray:
    """XLA's complex expm1 (EmitComplexExpm1, from its IR): with m = expm1(a) (XLA's inline
    expm1) and c = cos(b) - 1 (XLA's polynomial), (m (c + 1) + c (fused), (m + 1) sin b),
    the imaginary part 0 where b = 0. expm1(inf + inf i) is NaN + NaN i, as XLA's."""
    a, b = z.real, z.imag
    t = a.dtype.type
    with np.errstate(all="ignore"):
        m = _expm1(a)
        c = _cosm1(b)
        re = fma(m, flush(c + t(1)), c)
        im = flush(flush(m + t(1)) * flush(libm.call("sin", b)))
    return make_complex(re, np.where(b == 0, t(0), im), z.dtype)


def _sq_err(v: np.ndarray) -> np.ndarray:
    """v^2 - RN(v^2) exactly (Dekker: v split at 2^12 + 1 (f32) or 2^27 + 1 (f64))."""
    t = v.dtype.type
    vv = flush(v * v)
    big = flush(v * t(4097.0 if v.dtype == np.float32 else 134217729.0))
    hi = flush(big + flush(v - big))
    lo = flush(v - hi)
    hl = flush(hi * lo)
    e = flush(flush(flush(-vv + flush(hi * hi)) + hl) + hl)
    return flush(e + flush(lo * lo))


def log(z: np.ndarray) -> np.ndarray:
    """XLA's complex log (StableHLO's complex math expander, from XLA's HLO): the real part
    is log1p(s) / 2 with s = x^2 + y^2 - 1 summed exactly (Dekker squares, compensated)
    where |s| < 1/2, else log(M) + log1p((m / M)^2) / 2 (M, m = max, min of |x|, |y|;
    NaN-propagating); the imaginary part atan2(y, x). log, log1p XLA's f32 log / libm's,
    atan2 libm's. A NaN part gives NaN + NaN i (C99: inf for an infinite other part)."""
    x, y = z.real, z.imag
    t = x.dtype.type
    with np.errstate(all="ignore"):
        xx, yy = flush(x * x), flush(y * y)
        gt = yy > xx
        mx, mn = np.where(gt, yy, xx), np.where(gt, xx, yy)
        s1 = flush(mx + t(-1))
        s2 = flush(s1 + mn)
        ey, ex = _sq_err(y), _sq_err(x)
        s3 = flush(s2 + ey)
        s4 = flush(s3 + ex)
        c = flush(flush(mx - flush(s1 - t(-1))) + flush(mn - flush(s2 - s1)))
        c = flush(c + flush(ey - flush(s3 - s2)))
        c = flush(c + flush(ex - flush(s4 - s3)))
        s = flush(s4 + c)
        ax, ay = np.abs(x), np.abs(y)
        big = np.fmax(ax, ay)
        big = np.where(np.isnan(ax) | np.isnan(ay), t(np.nan), big)
        small = np.where(np.isnan(ax) | np.isnan(ay), t(np.nan), np.fmin(ax, ay))
        r = np.where(small == big, t(1), flush(small / big))
        log_big = xla_math.log32(big) if x.dtype == np.float32 else libm.call("log", big)
        far = flush(flush(log_big) + flush(xla_math.log1p(flush(r * r)) * t(0.5)))
        near = flush(xla_math.log1p(s) * t(0.5))
        re = np.where(np.abs(s) < t(0.5), near, far)
        im = flush(libm.call("atan2", y, x))
    return make_complex(re, im, z.dtype)


def _hypot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """functional_algorithms' hypot (in XLA's complex sqrt): M sqrt(fma(r, r, 1)), r = m / M;
    sqrt(2) M where m = M; M + M r^2 / 2 where the root rounds to 1."""
    t = a.dtype.type
    mx, mn = np.maximum(a, b), np.minimum(a, b)
    r = flush(mn / mx)
    r2 = flush(r * r)
    sq = np.sqrt(flush(r2 + t(1)))
    out = np.where((sq == 1) & (r2 > 0), flush(mx + flush(flush(mx * r2) / t(2))),
                   flush(mx * sq))
    return np.where(mx == mn, flush(mx * t(math.sqrt(2))), out)


_SQRT_1P_SQRT2 = 1.5537739740300374  # sqrt(1 + sqrt(2))
_SQRT_2P_2SQRT2 = 2.19736822693562  # sqrt(2 + 2 sqrt(2)), as XLA's constant


def sqrt(z: np.ndarray) -> np.ndarray:
    """XLA's complex sqrt (StableHLO's expander, from XLA's HLO): R = sqrt((|z| + |x|) / 2)
    (XLA's optimized HLO: fma(|x|, 1/2, |z| / 2), so a denormal |x| / 2 counts; divisions
    by constants as products by their reciprocals) and
    I = |y| / (2 R), each through scaled forms where R underflows or overflows (by
    sqrt|x| or sqrt|y| and the hypot of their ratio and 1); (R, +-I) for x >= 0, (I, +-R)
    otherwise (a NaN x too), the sign from y < 0: sqrt(-1 - 0i) is +i (C99: -i), as
    XLA's."""
    x, y = z.real, z.imag
    t = x.dtype.type
    s2 = t(math.sqrt(2))
    with np.errstate(all="ignore"):
        ax, ay = np.abs(x), np.abs(y)
        eq, gt, lt = ax == ay, ax > ay, ax < ay
        sq_ax, sq_ay = np.sqrt(ax), np.sqrt(ay)
        u = np.sqrt(flush(fma(ax, t(0.5), flush(_hypot(ax, ay) * t(0.5)))))
        bad = (u == 0) | (u == np.inf)
        q = np.where(eq, t(1), np.where(lt, flush(ax / ay), flush(ay / ax)))
        h2 = _hypot(np.abs(q), np.ones_like(q))
        r1 = np.sqrt(flush(h2 + t(1)))
        r2 = np.sqrt(flush(q + h2))
        # XLA's simplifier folds the constant divisions into products by reciprocals
        inv_s2 = t(1) / s2
        big = np.where(gt, flush(sq_ax * flush(r1 * inv_s2)), flush(sq_ay * flush(r2 * inv_s2)))
        re_big = np.where(eq, flush(sq_ax * (t(_SQRT_1P_SQRT2) / s2)),
                          np.where(bad, big, u))
        ratio = np.where(eq, t(1), np.where(lt, flush(sq_ax / sq_ay), flush(sq_ay / sq_ax)))
        small = np.where(gt, flush(flush(sq_ay * ratio) / flush(r1 * s2)),
                         flush(sq_ay / flush(r2 * s2)))
        re_small = np.where(eq, flush(sq_ay * (t(1) / t(_SQRT_2P_2SQRT2))),
                            np.where(bad, small, flush(ay / flush(u * t(2)))))
        neg_y = y < 0
        re = np.where(x >= 0, re_big, re_small)
        im = np.where(x < 0, np.where(neg_y, -re_big, re_big),
                      np.where(neg_y, -re_small, re_small))
    return make_complex(re, im, z.dtype)


def _two_sum_err(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """a + b - s exactly, s = RN(a + b) (Knuth's TwoSum, as XLA's HLO writes it)."""
    bv = flush(s - a)
    return flush(flush(a - flush(s - bv)) + flush(b - bv))


def log1p(z: np.ndarray) -> np.ndarray:
    """XLA's complex log1p (StableHLO's expander, from XLA's HLO): past max(|x|, |y|) >
    sqrt(largest) / 100, log(M) + log1p((m / M)^2) / 2; near z = -1 (|x + 1| + |y| < 0.2)
    log((x + 1)^2 + y^2) / 2 (fused); else log1p(2x + y^2 + x^2) / 2 with the sum
    compensated (TwoSum errors, Dekker squares). Imaginary part atan2(y, x + 1). log,
    log1p as in `log`."""
    x, y = z.real, z.imag
    t = x.dtype.type
    big_cut = t(math.sqrt(float(np.finfo(x.dtype).max)) / 100)
    with np.errstate(all="ignore"):
        ax, ay = np.abs(x), np.abs(y)
        mx, mn = np.maximum(ax, ay), np.minimum(ax, ay)
        r2 = np.where(mn == mx, t(1), flush(flush(mn / mx) ** 2))
        log_mx = xla_math.log32(mx) if x.dtype == np.float32 else libm.call("log", mx)
        re_big = flush(flush(log_mx) + flush(xla_math.log1p(r2) * t(0.5)))
        xp1 = flush(x + t(1))
        yy = flush(y * y)
        sq = flush(fma(xp1, xp1, yy))
        log_sq = xla_math.log32(sq) if x.dtype == np.float32 else libm.call("log", sq)
        re_near = flush(flush(log_sq) * t(0.5))
        x2, xx = flush(x + x), flush(x * x)
        s1 = flush(x2 + yy)
        s2 = flush(s1 + xx)
        ey, ex = _sq_err(y), _sq_err(x)
        s3 = flush(s2 + ey)
        s4 = flush(s3 + ex)
        c = flush(_two_sum_err(x2, yy, s1) + _two_sum_err(s1, xx, s2))
        c = flush(c + _two_sum_err(s2, ey, s3))
        c = flush(c + _two_sum_err(s3, ex, s4))
        re_mid = flush(xla_math.log1p(flush(s4 + c)) * t(0.5))
        near = flush(np.abs(xp1) + ay) < t(0.2)
        re = np.where(mx > big_cut, re_big, np.where(near, re_near, re_mid))
        im = flush(libm.call("atan2", y, xp1))
    return make_complex(re, im, z.dtype)


def rsqrt(z: np.ndarray) -> np.ndarray:
    """XLA's complex rsqrt (EmitComplexRsqrt, from its IR): the polar form |z|^(-1/2)
    (cos(-t/2), sin(-t/2)), t = atan2(y, x), |z|^(-1/2) = rsqrt(M) sqrt(rsqrt(fma(r, r, 1)))
    (M, m = max, min of |x|, |y|, r = m / M; rsqrt(m) where that is NaN); 0 - 0i (signed
    from x, -y) for an infinite x or an infinite y with NaN x; inf + NaN i at 0. XLA's
    rsqrt is an approximation refined by Newton's step (x86 rsqrtss, CPU-dependent); here
    1 / sqrt, which the cpu kernels compute alike."""
    x, y = z.real, z.imag
    t = x.dtype.type

    def rs(v: np.ndarray) -> np.ndarray:
        return flush(t(1) / np.sqrt(v))

    with np.errstate(all="ignore"):
        ax, ay = np.abs(x), np.abs(y)
        mx, mn = np.maximum(ax, ay), np.minimum(ax, ay)
        r = flush(mn / mx)
        m = flush(rs(mx) * np.sqrt(rs(flush(fma(r, r, t(1))))))
        m = np.where(np.isnan(m), rs(mn), m)
        h = flush(flush(libm.call("atan2", y, x)) * t(-0.5))
        re = flush(m * flush(libm.call("cos", h)))
        im = flush(m * flush(libm.call("sin", h)))
        inf_x = (ax == np.inf) | ((ay == np.inf) & np.isnan(x))
        re = np.where(inf_x, np.copysign(t(0), x), re)
        im = np.where(inf_x, -np.copysign(t(0), y), im)
        zero = (x == 0) & (y == 0)
        re, im = np.where(zero, t(np.inf), re), np.where(zero, t(np.nan), im)
    return make_complex(re, im, z.dtype)


def tan(z: np.ndarray) -> np.ndarray:
    """XLA's complex tan (EmitComplexTan): -i tanh(i z), tanh as above on (-y, x); so
    tan(inf + 0i) is NaN + NaN i (C99: NaN + 0i), as XLA's."""
    w = tanh(make_complex(-z.imag, z.real, z.dtype))
    return make_complex(w.imag, -w.real, z.dtype)


#: Unary ops whose complex evaluation is XLA's formula here (ElementwiseOp takes it).
UNARY = {"exponential": exp, "tanh": tanh, "exponential_minus_one": expm1, "log": log,
         "sqrt": sqrt, "log_plus_one": log1p, "rsqrt": rsqrt,
         "tan": tan}
