"""chlo lowering (XLA's chlo-legalize-to-stablehlo): `chlo.<op>` instructions as plain HLO.

The StableHLO front door registers chlo ops as OpDefs that evaluate directly (scipy / numpy);
this pass rewrites the ones with an exact-enough decomposition, per element type:

* exact (bit for bit): is_inf / is_pos_inf / is_neg_inf (compares with +-inf), conj
  (complex(real, -imag); identity on reals), square (x * x; complex (re - im)(re + im), 0 where
  |re| = |im| and re is finite, + i 2 (re im), as XLA), next_after (integer steps on the
  bits), mulhi (8/16/32 bits: the product in 64 bits, shifted; 64 bits: from 32-bit
  halves), top_k (a stable
  sort of (x, iota) by a total-order GT / LT comparator, then slices);
* approximate (f16/bf16 computed in f32 and rounded back; f32 sinh, asin, acos, erf_inv and
  lgamma in f64 (`_IN_F64`); the rest in their own type),
  tolerance stated in the tests, the same formulas as XLA's chlo decompositions:
  sinh = |x| < 1 ? (e + e / (e + 1)) / 2 with e = expm1(x) : sign(x) (E / 2 - 1 / (2 E))
  with E = exp(|x|) (f32 in f64: chlo_refine.sinh_wide); cosh = E / 2 + 1 / (2 E) (XLA:
  exp(x - ln 2) +- exp(-x - ln 2), whose rounding of x - ln 2 costs up to 458 ulp);
  asinh = sign(x) * (|x| large ? ln|x| + ln 2 : log1p(|x| + x^2 / (1 + sqrt(1 + x^2))));
  acosh = x large ? ln x + ln 2 : log1p(y + sqrt(y * (x + 1))) with y = x - 1;
  atanh = (log1p(x) - log1p(-x)) / 2;
  asin = 2 atan2(x, 1 + sqrt((1 - x)(1 + x))); acos = x == -1 ? pi : 2 atan2(sqrt((1 - x)
  (1 + x)), 1 + x) (f32: chlo_refine.asin_wide, acos_wide); atan = atan2(x, 1);
  erfc (f16/bf16/f32 only) = |x| < 1 ? 1 - erf(x) (a degree-7 fit in x^2 in f64, rounded once) :
  Cephes' erfcf rational forms in 1/x^2 (ops/erf_f32.py; the cpu backend keeps the op, its
  kernels compute it with fused multiply-adds: `native`);
  erf_inv = Giles' single-precision polynomials (f16/bf16; f32 and f64: his double-precision
  ones with w = -(log1p(-|x|) + log1p(|x|)) (f32: -log((1 - |x|)(1 + |x|)) in f64), not
  XLA's -log1p(-x^2), and a Newton step on erf up to |x| = 0.7, on erfc above:
  ops/erfcx_cheb.py; f32 on the cpu backend: kept, its kernels compute it); lgamma = for x > 0
  ops/lgamma_series.py (Taylor series around 1, the minimum and 2, the recurrence,
  Stirling), else Lanczos (g = 7, 9 terms) with log(pi / |sin(pi x)|) - lgamma(1 - x);
  digamma = the Lanczos form's derivative with psi(1 - x) - pi cot(pi x) below 1/2, NaN at
  the poles.
Complex sinh / cosh are XLA's exp(z - ln 2) -+ exp(-ln 2 - z) on the complex exponential op
(XLA's formula on both backends: ops/complex_xla.exp).
Complex asin/acos/... and ragged_dot stay chlo ops here (their direct evaluation is the
reference); f64 erfc, polygamma, zeta and bessel_i1e lower in passes/chlo_special.py and scan
in passes/scan_lowering.py, which the cpu backend runs (passes/native_forms.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from xlapy.ir import Computation, Instruction, Module
from xlapy.ops.attrs import ComparisonType
from xlapy.ops.base import OPS
from xlapy.ops.erf_f32 import ERF_SMALL, ERFC_P, ERFC_R, ERFINV32_A, ERFINV32_B
from xlapy.passes import chlo_narrow, chlo_refine, lgamma_wide
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.lgamma_wide import LANCZOS as _LANCZOS
from xlapy.passes.lgamma_wide import LANCZOS_BASE as _LANCZOS_BASE
from xlapy.passes.lgamma_wide import LANCZOS_G as _LANCZOS_G
from xlapy.passes.pass_base import Pass, sort_instructions
from xlapy.types import ElementType, Shape

I = Instruction  # noqa: E741
LN2 = math.log(2.0)

_ERFINV_SMALL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                 0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_LARGE = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                 0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


class _G(Emitter):
    """Emitter with splat-aware arithmetic on one shape."""

    def k(self, v: float, like: I) -> I:
        return self.splat(v, like)

    def poly(self, x: I, coeffs: tuple[float, ...]) -> I:
        """Horner: coeffs[0] x^(n-1) + ... + coeffs[-1]."""
        acc = self.k(coeffs[0], x)
        for c in coeffs[1:]:
            acc = self.add(self.multiply(acc, x), self.k(c, x))
        return acc


def _half_exps(g: _G, x: I, sub: bool) -> I:
    """exp(|x|) / 2 -+ exp(-|x|) / 2 for |x| >= 1. XLA's exp(|x| - ln 2) rounds |x| - ln 2
    first, an error growing with |x| (24 ulp in f32, 458 in f64); e / 2 is exact. Where e
    overflows and the result does not (|x| just below the type's largest log + ln 2), the
    square of h = exp(|x| / 2): (h / 2) h."""
    a = g.abs(x)
    e = g.exponential(a)
    half = g.k(0.5, x)
    inv = g.divide(half, e)
    body = g.subtract(g.multiply(half, e), inv) if sub else g.add(g.multiply(half, e), inv)
    h = g.exponential(g.multiply(a, half))
    top = g.multiply(g.multiply(half, h), h)
    log_max = math.log(float(np.finfo(x.shape.element_type.dtype).max))
    return g.select(g.cmp(a, g.k(log_max, x), "LT"), body, top)


def _sinh(g: _G, x: I) -> I:
    em1 = g.exponential_minus_one(x)
    small = g.divide(g.add(em1, g.divide(em1, g.add(em1, g.k(1, x)))), g.k(2, x))
    large = _half_exps(g, x, True)
    large = g.select(g.cmp(x, g.k(0, x), "LT"), g.negate(large), large)
    return g.select(g.cmp(g.abs(x), g.k(1, x), "LT"), small, large)


def _cosh(g: _G, x: I) -> I:
    return _half_exps(g, x, False)


def _big(x: I) -> float:
    return math.sqrt(float(np.finfo(x.shape.element_type.dtype).max))


def _asinh(g: _G, x: I) -> I:
    a = g.abs(x)
    aa = g.multiply(a, a)
    small = g.log_plus_one(g.add(a, g.divide(aa, g.add(g.k(1, x), g.sqrt(g.add(g.k(1, x), aa))))))
    large = g.add(g.log(a), g.k(LN2, x))
    r = g.select(g.cmp(a, g.k(_big(x), x), "GT"), large, small)
    return g.multiply(g.sign(x), r)


def _acosh(g: _G, x: I) -> I:
    y = g.subtract(x, g.k(1, x))
    small = g.log_plus_one(g.add(y, g.sqrt(g.multiply(y, g.add(x, g.k(1, x))))))
    large = g.add(g.log(x), g.k(LN2, x))
    r = g.select(g.cmp(x, g.k(_big(x), x), "GT"), large, small)
    # x < 1 is outside the domain: NaN (the formula gives finite values or -inf below -1)
    return g.select(g.cmp(x, g.k(1, x), "LT"), g.k(math.nan, x), r)


def _atanh(g: _G, x: I) -> I:
    return g.multiply(g.subtract(g.log_plus_one(x), g.log_plus_one(g.negate(x))), g.k(0.5, x))


def _one_minus_sq(g: _G, x: I) -> I:
    return g.multiply(g.subtract(g.k(1, x), x), g.add(g.k(1, x), x))


def _asin(g: _G, x: I) -> I:
    t = g.atan2(x, g.add(g.k(1, x), g.sqrt(_one_minus_sq(g, x))))
    return g.multiply(g.k(2, x), t)


def _acos(g: _G, x: I) -> I:
    t = g.multiply(g.k(2, x), g.atan2(g.sqrt(_one_minus_sq(g, x)), g.add(g.k(1, x), x)))
    return g.select(g.cmp(x, g.k(-1, x), "EQ"), g.k(math.pi, x), t)


def _atan(g: _G, x: I) -> I:
    return g.atan2(x, g.k(1, x))


def _erfc_small(g: _G, x: I) -> I:
    """erfc(x) = 1 - erf(x) for |x| < 1, evaluated in f64 and rounded once (within 0.51
    ulp). It was 1 - erf(x) on the erf op, whose |x| >= 1 half (an exp and an erfcx
    series) the select then threw away: JAX's exact GELU, x/2 erfc(-x/sqrt 2), ran 1.7x
    XLA's time."""
    xd = g.convert(x, new_element_type=ElementType.F64)
    erf = g.multiply(xd, g.poly(g.multiply(xd, xd), ERF_SMALL))
    return g.convert(g.subtract(g.k(1, xd), erf), new_element_type=x.shape.element_type)


def _erfc(g: _G, x: I) -> I:
    a = g.abs(x)
    z = g.exponential(g.negate(g.multiply(x, x)))
    q = g.divide(g.k(1, x), a)
    w = g.multiply(q, q)
    p = g.select(g.cmp(a, g.k(2, x), "LT"), g.poly(w, ERFC_P), g.poly(w, ERFC_R))
    y = g.multiply(g.multiply(z, q), p)
    y = g.select(g.cmp(x, g.k(0, x), "LT"), g.subtract(g.k(2, x), y), y)
    return g.select(g.cmp(a, g.k(1, x), "LT"), _erfc_small(g, x), y)


def _erf_inv(g: _G, x: I) -> I:
    w = g.negate(g.log(g.multiply(g.subtract(g.k(1, x), x), g.add(g.k(1, x), x))))
    lt = g.cmp(w, g.k(5, x), "LT")
    ws = g.subtract(g.select(lt, w, g.k(5, x)), g.k(2.5, x))
    wl = g.subtract(g.sqrt(g.select(lt, g.k(5, x), w)), g.k(3, x))
    p = g.select(lt, g.poly(ws, _ERFINV_SMALL), g.poly(wl, _ERFINV_LARGE))
    edge = g.cmp(g.abs(x), g.k(1, x), "EQ")
    return g.select(edge, g.multiply(x, g.k(math.inf, x)), g.multiply(p, x))


def _lanczos_z(g: _G, x: I) -> tuple[I, I]:
    """(x < 0.5, z): z = -x where the reflection formula applies, else x - 1."""
    reflect = g.cmp(x, g.k(0.5, x), "LT")
    return reflect, g.select(reflect, g.negate(x), g.subtract(x, g.k(1, x)))


def _log_t(g: _G, z: I) -> tuple[I, I]:
    """(t, log t) with t = z + g + 1/2, log t = log(g + 1/2) + log1p(z / (g + 1/2))."""
    gh = _LANCZOS_G + 0.5
    t = g.add(z, g.k(gh, z))
    return t, g.add(g.k(math.log(gh), z), g.log_plus_one(g.divide(z, g.k(gh, z))))


def _lgamma(g: _G, x: I, refine: bool = True) -> I:
    """XLA's lgamma: Lanczos for x >= 0.5, reflection log(pi / |sin(pi x)|) - lgamma(1 - x)
    below; +inf at +-inf and at the poles."""
    reflect, z = _lanczos_z(g, x)
    if not refine:  # (an f32 result in f64)
        return lgamma_wide.lgamma(g, x, reflect, z)
    acc = g.k(_LANCZOS_BASE, x)
    for i, c in enumerate(_LANCZOS):
        acc = g.add(acc, g.divide(g.k(c, x), g.add(z, g.k(i + 1, x))))
    t, log_t = _log_t(g, z)
    log_y = g.add(g.add(g.k(math.log(math.sqrt(2 * math.pi)), x),
                        g.multiply(g.subtract(g.add(z, g.k(0.5, x)), g.divide(t, log_t)),
                                   log_t)),
                  g.log(acc))
    ax = g.abs(x)
    frac = g.subtract(ax, g.floor(ax))
    red = g.select(g.cmp(frac, g.k(0.5, x), "GT"), g.subtract(g.k(1, x), frac), frac)
    denom = g.log(g.sine(g.multiply(g.k(math.pi, x), red)))
    refl = g.select(g.is_finite(denom),
                    g.subtract(g.subtract(g.k(math.log(math.pi), x), denom), log_y),
                    g.negate(denom))
    out = g.select(reflect, refl, log_y)
    if x.shape.element_type is ElementType.F64:
        out = chlo_refine.lgamma_series(g, x, out)
    return g.select(g.cmp(ax, g.k(math.inf, x), "EQ"), g.k(math.inf, x), out)


def _digamma(g: _G, x: I) -> I:
    """XLA's digamma: the derivative of the Lanczos form for x >= 0.5, the reflection
    psi(1 - x) - pi cot(pi x) below; NaN at 0 and the negative integers."""
    reflect, z = _lanczos_z(g, x)
    num = g.k(0, x)
    den = g.k(_LANCZOS_BASE, x)
    for i, c in enumerate(_LANCZOS):
        zi = g.add(z, g.k(i + 1, x))
        num = g.subtract(num, g.divide(g.k(c, x), g.multiply(zi, zi)))
        den = g.add(den, g.divide(g.k(c, x), zi))
    t, log_t = _log_t(g, z)
    y = g.subtract(g.add(log_t, g.divide(num, den)), g.divide(g.k(_LANCZOS_G, x), t))
    red = g.add(x, g.abs(g.floor(g.add(x, g.k(0.5, x)))))
    pr = g.multiply(g.k(math.pi, x), red)
    refl = g.subtract(y, g.divide(g.multiply(g.k(math.pi, x), g.cosine(pr)), g.sine(pr)))
    out = g.select(reflect, refl, y)
    pole = g.op("and", g.cmp(x, g.k(0, x), "LE"), g.cmp(x, g.floor(x), "EQ"))
    return g.select(pole, g.k(math.nan, x), out)


#: Giles' double-precision erf_inv, as XLA's chlo legalization (w < 6.25, < 16, >= 16).
_ERFINV64_A = (-3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
               1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
               6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
               2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
               1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
               4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
               0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
               0.24015818242558961693, 1.6536545626831027356)
_ERFINV64_B = (2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
               1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
               2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
               6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
               0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
               -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
               3.0838856104922207635)
_ERFINV64_C = (-2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
               -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
               2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
               -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
               7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
               1.0103004648645343977, 4.8499064014085844221)


def _erf_inv_f64(g: _G, x: I, refine: bool = True) -> I:
    """Giles' polynomials in w = -log(1 - x^2), w taken as -(log1p(-|x|) + log1p(|x|)):
    XLA's -log1p(-x x) rounds x^2 first, a relative error of w growing as 1 / (1 - x^2)
    (erf_inv(0.9999999926727005) was 490447 ulp off, XLA's too)."""
    a = g.abs(x)
    if refine:
        w = g.negate(g.add(g.log_plus_one(g.negate(a)), g.log_plus_one(a)))
    else:  # f32 x: one log, not two log1p (1.4x the rest); exact in f64 from a = 0.5 on
        w = g.negate(g.log(g.multiply(g.subtract(g.k(1, x), a), g.add(g.k(1, x), a))))
    lt625 = g.cmp(w, g.k(6.25, x), "LT")
    edge = g.cmp(a, g.k(1, x), "EQ")
    if not refine:  # an f32 result: the shorter fits, one select (ERFINV32_A)
        pa = g.poly(g.subtract(w, g.k(3.125, x)), ERFINV32_A)
        wb = g.select(lt625, g.k(6.25, x), w)
        pb = g.poly(g.subtract(g.sqrt(wb), g.k(3.25, x)), ERFINV32_B)
        return g.select(edge, g.multiply(x, g.k(math.inf, x)),
                        g.multiply(g.select(lt625, pa, pb), x))
    lt16 = g.cmp(w, g.k(16, x), "LT")

    def coeff(i: int) -> I:  # Horner order (highest first); B and C start later
        na, nb, nc = len(_ERFINV64_A), len(_ERFINV64_B), len(_ERFINV64_C)
        c = g.k(_ERFINV64_A[i], x)
        if i < nb or refine:
            vb = _ERFINV64_B[i - (na - nb)] if refine and i >= na - nb else \
                _ERFINV64_B[i] if not refine else 0.0
            c = g.select(lt625, c, g.k(vb, x))
        if i < nc or refine:
            vc = _ERFINV64_C[i - (na - nc)] if refine and i >= na - nc else \
                _ERFINV64_C[i] if not refine else 0.0
            c = g.select(lt16, c, g.k(vc, x))
        return c

    shift = g.select(lt16, g.k(3.25, x), g.k(5.0, x))
    w = g.select(lt625, g.subtract(w, g.k(3.125, x)), g.subtract(g.sqrt(w), shift))
    if refine:  # per-lane coefficients, the shorter series led by zeros, chunked (shallow)
        p = _chunked_lanes(g, w, [coeff(i) for i in range(len(_ERFINV64_A))][::-1])
    else:
        p = coeff(0)
        for i in range(1, len(_ERFINV64_A)):
            step = g.add(coeff(i), g.multiply(p, w))
            p = step if i < len(_ERFINV64_C) else \
                g.select(lt16 if i < len(_ERFINV64_B) else lt625, step, p)
    x0 = g.multiply(p, x)
    # One Newton step on erf(x0) = x where |x| <= 0.7 (3 ulp -> 1): there erf's rounding
    # moves x1 by at most ~1.5 of its ulps; above, erf rounds the residual away (its ulp is
    # 1's): the step on erfc = exp(-x^2) erfcx (chlo_refine.erfcx_step).
    x1 = g.subtract(x0, g.multiply(g.subtract(g.erf(x0), x), g.multiply(
        g.k(math.sqrt(math.pi) / 2, x), g.exponential(g.multiply(x0, x0)))))
    x0 = g.select(g.cmp(a, g.k(0.7, x), "LE"), x1, chlo_refine.erfcx_step(g, x0, a))
    return g.select(edge, g.multiply(x, g.k(math.inf, x)), x0)


def _chunked_lanes(g: _G, w: I, cs: list[I], chunk: int = 8) -> I:
    """sum cs[i] w^i (cs ascending, per-lane values) by Horner within chunks, then over the
    chunks in w^chunk: a chain of ~2 chunk + 2 len / chunk, not 2 len."""
    wc = w
    for _ in range(chunk.bit_length() - 1):
        wc = g.multiply(wc, wc)
    acc = None
    for j in reversed(range(0, len(cs), chunk)):
        part = cs[j:j + chunk]
        q = part[-1]
        for c in part[-2::-1]:
            q = g.add(g.multiply(q, w), c)
        acc = q if acc is None else g.add(g.multiply(acc, wc), q)
    assert acc is not None
    return acc


def _erf_inv_any(g: _G, x: I) -> I:
    return _erf_inv_f64(g, x) if x.shape.element_type is ElementType.F64 else _erf_inv(g, x)


_REAL_FNS: dict[str, tuple[Callable[[_G, I], I], bool]] = {
    # name: (lowering, also for f64)
    "chlo.sinh": (_sinh, True), "chlo.cosh": (_cosh, True), "chlo.asinh": (_asinh, True),
    "chlo.acosh": (_acosh, True), "chlo.atanh": (_atanh, True), "chlo.asin": (_asin, True),
    "chlo.acos": (_acos, True), "chlo.atan": (_atan, True), "chlo.erfc": (_erfc, False),
    "chlo.erf_inv": (_erf_inv_any, True), "chlo.lgamma": (_lgamma, True),
    "chlo.digamma": (_digamma, True),
}


def _complex_sinh_cosh(g: _G, i: I) -> I:
    """XLA's complex sinh / cosh: exp(z - ln 2) -+ exp(-ln 2 - z) (chlo.py's twin), the
    complex exponential op being XLA's formula on both backends (ops/complex_xla.exp)."""
    (x,) = i.operands
    ln2 = g.k(complex(-LN2, 0), x)
    p, m = g.exponential(g.add(x, ln2)), g.exponential(g.subtract(ln2, x))
    return g.subtract(p, m) if i.opcode == "chlo.sinh" else g.add(p, m)


#: f32 ops computed in f64 and rounded once: within 1 ulp, where the f32 formulas measured
#: 2 (asin, acos: atan2 of a rounded square root), 3 (sinh below 1: expm1's error through
#: (e + e / (e + 1)) / 2; erf_inv: Giles' f32 polynomials) and 39 (lgamma: Lanczos' sums)
#: (tests/unit/backends/cpu/test_ulp_table.py). The rest are within 1 ulp in f32 already.
_IN_F64 = frozenset({"chlo.sinh", "chlo.asin", "chlo.acos", "chlo.erf_inv", "chlo.lgamma"})


def _lower_real(g: _G, i: I, fn: Callable[[_G, I], I], f64: bool) -> I | None:
    (x,) = i.operands
    et = x.shape.element_type
    if et.is_complex and i.opcode in ("chlo.sinh", "chlo.cosh"):
        return _complex_sinh_cosh(g, i)
    if not et.is_float or et.bits not in (16, 32, 64) or (et.bits == 64 and not f64):
        return None
    wide = ElementType.F64 if et.bits == 32 and i.opcode in _IN_F64 else \
        ElementType.F32 if et.bits == 16 else None
    if wide is ElementType.F64:
        fn = _WIDE.get(i.opcode, fn)
    if wide is not None:
        return g.convert(fn(g, g.convert(x, new_element_type=wide)), new_element_type=et)
    return fn(g, x)


#: f32 ops computed in f64 without the steps only an f64 result needs (Newton, series).
_WIDE: dict[str, Callable[[_G, I], I]] = {
    "chlo.lgamma": lambda g, x: _lgamma(g, x, refine=False),
    "chlo.erf_inv": lambda g, x: _erf_inv_f64(g, x, refine=False),
    "chlo.sinh": chlo_refine.sinh_wide,
    "chlo.asin": chlo_refine.asin_wide, "chlo.acos": chlo_refine.acos_wide,
}


def _inf_test(g: _G, i: I) -> I | None:
    (x,) = i.operands
    if not x.shape.element_type.is_float:
        return None
    if i.opcode == "chlo.is_inf":
        return g.cmp(g.abs(x), g.k(math.inf, x), "EQ")
    return g.cmp(x, g.k(math.inf if i.opcode == "chlo.is_pos_inf" else -math.inf, x), "EQ")


def _conj(g: _G, i: I) -> I | None:
    (x,) = i.operands
    if not x.shape.element_type.is_complex:
        return x
    return g.complex(g.real(x), g.negate(g.imag(x)))


_UINT = {4: ElementType.U4, 8: ElementType.U8, 16: ElementType.U16, 32: ElementType.U32,
         64: ElementType.U64}


def _next_after(g: _G, i: I) -> I | None:
    """XLA's decomposition step for step: integer steps and zero tests on the bits; only
    x == y compares floats (so it sees denormals flushed where the CPU flushes them)."""
    x, y = i.operands
    et = x.shape.element_type
    if not et.is_float or et.bits not in _UINT:
        return None
    ut = _UINT[et.bits]
    ux, uy = (g.bitcast_convert(v, new_element_type=ut) for v in (x, y))
    sign, mag = g.splat(1 << (et.bits - 1), ux), g.splat((1 << (et.bits - 1)) - 1, ux)
    one, nothing = g.splat(1, ux), g.splat(0, ux)
    ax, ay = g.op("and", ux, mag), g.op("and", uy, mag)
    sx, sy = g.op("and", ux, sign), g.op("and", uy, sign)
    grows = g.op("and", g.cmp(ax, ay, "LE"), g.cmp(sx, sy, "EQ"))
    step = g.select(grows, g.add(ux, one), g.subtract(ux, one))
    tiny = g.op("or", sy, one)
    bits = g.select(g.cmp(ax, nothing, "EQ"),
                    g.select(g.cmp(ay, nothing, "EQ"), uy, tiny), step)
    bits = g.select(g.cmp(x, y, "EQ"), uy, bits)
    nan = g.op("or", g.cmp(x, x, "NE"), g.cmp(y, y, "NE"))
    return g.select(nan, g.k(math.nan, x), g.bitcast_convert(bits, new_element_type=et))


def _mulhi64(g: _G, a: I, b: I) -> I:
    """The high 64 bits of a 64 x 64-bit product from 32-bit halves (u64 arithmetic); signed:
    the unsigned high part minus b where a < 0 and minus a where b < 0 (mod 2^64)."""
    et = a.shape.element_type
    u64 = ElementType.U64
    ua, ub = (g.convert(v, new_element_type=u64) if et.is_signed else v for v in (a, b))
    k32, mask = g.splat(32, ua), g.splat(0xFFFFFFFF, ua)
    al, ah = g.op("and", ua, mask), g.shift_right_logical(ua, k32)
    bl, bh = g.op("and", ub, mask), g.shift_right_logical(ub, k32)
    ll, hl = g.multiply(al, bl), g.multiply(ah, bl)
    lh, hh = g.multiply(al, bh), g.multiply(ah, bh)
    cross = g.add(g.add(g.shift_right_logical(ll, k32), g.op("and", hl, mask)),
                  g.op("and", lh, mask))
    hi = g.add(g.add(g.add(hh, g.shift_right_logical(hl, k32)),
                     g.shift_right_logical(lh, k32)), g.shift_right_logical(cross, k32))
    if not et.is_signed:
        return hi
    zero = g.splat(0, a)
    hi = g.subtract(hi, g.select(g.cmp(a, zero, "LT"), ub, g.splat(0, ub)))
    hi = g.subtract(hi, g.select(g.cmp(b, zero, "LT"), ua, g.splat(0, ua)))
    return g.convert(hi, new_element_type=et)


def _mulhi(g: _G, i: I) -> I | None:
    a, b = i.operands
    et = a.shape.element_type
    if not et.is_integer:
        return None
    if et.bits == 64:
        return _mulhi64(g, a, b)
    wt = ElementType.S64 if et.is_signed else ElementType.U64
    wa, wb = (g.convert(v, new_element_type=wt) for v in (a, b))
    prod = g.multiply(wa, wb)
    shift = g.splat(et.bits, prod)
    hi = g.shift_right_arithmetic(prod, shift) if et.is_signed else \
        g.shift_right_logical(prod, shift)
    return g.convert(hi, new_element_type=et)


def _square(g: _G, i: I) -> I | None:
    """x * x; complex as XLA: (re - im)(re + im) + i 2 re im (no inf - inf)."""
    (x,) = i.operands
    if not x.shape.element_type.is_complex:
        return g.multiply(x, x)
    re, im = g.real(x), g.imag(x)
    diff = g.multiply(g.subtract(re, im), g.add(re, im))
    same = g.op("and", g.is_finite(re), g.cmp(g.abs(re), g.abs(im), "EQ"))
    out_re = g.select(same, g.k(0, re), diff)
    return g.complex(out_re, g.multiply(g.multiply(re, im), g.k(2, re)))


def _top_k(g: _G, i: I, module: Module) -> I | None:
    (x,) = i.operands
    et = x.shape.element_type
    dims = tuple(x.shape.dimensions)
    last = len(dims) - 1
    cmp = Emitter(Computation(f"top_k_cmp_{et.hlo_name}"))
    a, b = cmp.param(Shape.scalar(et)), cmp.param(Shape.scalar(et))
    cmp.param(Shape.scalar(ElementType.S32))
    cmp.param(Shape.scalar(ElementType.S32))
    direction = "GT" if i.attrs.largest else "LT"
    from xlapy.ops.attrs import ComparisonDirection

    ctype = ComparisonType.TOTALORDER if et.is_float else None
    cmp.comp.root = cmp.op("compare", a, b, comparison_direction=ComparisonDirection[direction],
                           compare_type=ctype)
    module.add_computation(cmp.comp)
    idx = g.iota(shape=Shape.array(ElementType.S32, dims), iota_dimension=last)
    s = g.op("sort", x, idx, called=[cmp.comp], dimension=last, is_stable=True)
    start = (0,) * len(dims)
    limit = dims[:-1] + (i.attrs.k,)
    strides = (1,) * len(dims)
    vals = g.slice(g.get_tuple_element(s, index=0), start_indices=start, limit_indices=limit,
                   strides=strides)
    ids = g.slice(g.get_tuple_element(s, index=1), start_indices=start, limit_indices=limit,
                  strides=strides)
    return g.tuple(vals, ids)


_SIMPLE: dict[str, Callable[[_G, I], I | None]] = {
    "chlo.is_inf": _inf_test, "chlo.is_pos_inf": _inf_test, "chlo.is_neg_inf": _inf_test,
    "chlo.conj": _conj, "chlo.next_after": _next_after, "chlo.mulhi": _mulhi,
    "chlo.square": _square,
}

#: The chlo ops this pass can lower (for some element types).
LOWERED = tuple(sorted(set(_REAL_FNS) | set(_SIMPLE) | {"chlo.top_k"}))


class ChloLowering(Pass):
    name = "chlo-lowering"
    reassociating = True

    def __init__(self, exact_only: bool = False,
                 native: Callable[[I], bool] | None = None) -> None:
        self.exact_only = exact_only
        #: The chlo ops the backend computes itself, left as they are (the cpu backend's
        #: f32 erfc: backends/cpu/elementwise.native_chlo).
        self.native = native
        self.lowered: list[str] = []

    def lower(self, module: Module, comp: Computation, i: I) -> I | None:
        g = _G(comp)
        if chlo_narrow.in_f32(i):  # f8: in f32, rounded back
            return chlo_narrow.widen(g, i, lambda w: self.lower(module, comp, w))
        if self.native is not None and self.native(i):
            return None
        if i.opcode in _SIMPLE:
            return _SIMPLE[i.opcode](g, i)
        if i.opcode == "chlo.top_k":
            return _top_k(g, i, module)
        if i.opcode in _REAL_FNS and not self.exact_only:
            return _lower_real(g, i, *_REAL_FNS[i.opcode])
        return None

    def run(self, module: Module) -> bool:
        changed = False
        for comp in list(module.post_order()):
            touched = False
            for i in [i for i in comp.instructions if i.opcode.startswith("chlo.")]:
                if i.opcode not in OPS:
                    continue
                new = self.lower(module, comp, i)
                if new is None:
                    continue
                i.replace_all_uses_with(new)
                if i is not comp.root and not i.users:
                    comp.remove(i)
                self.lowered.append(i.opcode)
                touched = True
            if touched:
                sort_instructions(comp)
                changed = True
        return changed
