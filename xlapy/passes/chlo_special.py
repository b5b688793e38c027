"""chlo special functions as plain HLO, as XLA's chlo-legalize-to-stablehlo writes them.

chlo_lowering.py covers the elementary chlo ops; these are the special functions whose
decompositions are longer (f16/bf16 computed in f32 and rounded back, f32 and f64 in
their own type):

* bessel_i1e: Cephes' Chebyshev series (i1.c; chbevl's Clenshaw recurrence):
  |x| <= 8: |x| chbevl(|x| / 2 - 2, A); beyond: chbevl(32 / |x| - 2, B) / sqrt(|x|); the
  sign of x. f32 uses Cephes' single-precision sets (the tails of the double ones: 17 and 7
  terms), f64 the double sets (29 and 25 terms).
* erfc (f64; f32 and narrower are chlo_lowering's): |x| < 1: 1 - x T(x^2) / U(x^2); else
  exp(-x^2) P(|x|) / Q(|x|) below 8 and exp(-x^2) R(|x|) / S(|x|) above (Cephes ndtr.c),
  0 where -x^2 < -MAXLOG, 2 - erfc(-x) for x < 0.
* zeta (Hurwitz, zeta(x, q) = sum_k (k + q)^-x): the Euler-Maclaurin expansion of
  Johansson (2015), formula (5), with XLA's fixed sizes: 10 terms of the direct sum, 12
  Bernoulli terms in Horner form; NaN for x < 1 and for q <= 0 with non-integer x, the
  pole at integer q <= 0 (+inf for even integer x, NaN otherwise), +inf at x = 1.
* polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) (n! as exp(lgamma(n + 1))), digamma(x)
  for n = 0, NaN for a negative or non-integer n (lgamma and digamma are chlo ops that
  chlo_lowering then lowers).

The interpreter evaluates the chlo ops with scipy; these decompositions are XLA's, so the
cpu backend matches what JAX computes (tests/unit/backends/cpu/test_chlo_special.py states
the measured errors).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from xlapy.ir import Computation, Instruction, Module
from xlapy.passes.chlo_lowering import _G, ChloLowering
from xlapy.passes.pass_base import Pass, sort_instructions
from xlapy.types import ElementType

I = Instruction  # noqa: E741

#: Cephes i1.c: Chebyshev coefficients of exp(-x) I1(x) / x on [0, 8] ...
_I1E_A64 = (
    2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
    -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14,
    3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11,
    -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
    9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7,
    -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5,
    4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4,
    -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
    2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1,
    -1.76416518357834055153E-1, 2.52587186443633654823E-1)
#: ... and of exp(-x) sqrt(x) I1(x) in 32 / x beyond 8.
_I1E_B64 = (
    7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17,
    -3.20952592199342395980E-17, 2.96262899764595013876E-16, 3.30820231092092828324E-16,
    -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
    4.27244001671195135429E-14, -2.10154184277266431302E-14, -4.08355111109219731823E-13,
    -7.19855177624590851209E-13, 2.03562854414708950722E-12, 1.41258074366137813316E-11,
    3.25260358301548823856E-11, -1.89749581235054123450E-11, -5.58974346219658380687E-10,
    -3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
    -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
    7.78576235018280120474E-1)
#: Cephes i1f.c: the single-precision sets are the tails of the double ones.
_I1E_A32 = _I1E_A64[-17:]
_I1E_B32 = _I1E_B64[-7:]

#: Cephes ndtr.c (highest degree first; Q, S and U with their leading 1).
_ERF_T = (9.60497373987051638749E0, 9.00260197203842689217E1, 2.23200534594684319226E3,
          7.00332514112805075473E3, 5.55923013010394962768E4)
_ERF_U = (1.0, 3.35617141647503099647E1, 5.21357949780152679795E2, 4.59432382970980127987E3,
          2.26290000613890934246E4, 4.92673942608635921086E4)
_ERFC_P = (2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
           4.86371970985681366614E1, 1.96520832956077098242E2, 5.26445194995477358631E2,
           9.34528527171957607540E2, 1.02755188689515710272E3, 5.57535335369399327526E2)
_ERFC_Q = (1.0, 1.32281951154744992508E1, 8.67072140885989742329E1, 3.54937778887819891062E2,
           9.75708501743205489753E2, 1.82390916687909736289E3, 2.24633760818710981792E3,
           1.65666309194161350182E3, 5.57535340817727675546E2)
_ERFC_R = (5.64189583547755073984E-1, 1.27536670759978104416E0, 5.01905042251180477414E0,
           6.16021097993053585195E0, 7.40974269950448939160E0, 2.97886665372100240670E0)
_ERFC_S = (1.0, 2.26052863220117276590E0, 9.39603524938001434673E0, 1.20489539808096656605E1,
           1.70814450747565897222E1, 9.60896809063285878198E0, 3.36907645100081516050E0)
_MAXLOG = 7.09782712893383996843E2

#: Johansson's Euler-Maclaurin coefficients (2k)! / B_2k, as XLA's zeta.
_ZETA = (-7.1661652561756670113e18, 1.8152105401943546773e17, -4.5979787224074726105e15,
         1.1646782814350067249e14, -2.950130727918164224e12, 7.47242496e10,
         -1.8924375803183791606e9, 47900160.0, -1209600.0, 30240.0, -720.0, 12.0)


def _chbevl(g: _G, x: I, coeffs: tuple[float, ...]) -> I:
    """Cephes chbevl: b0 = x b1 - b2 + c over the coefficients, then (b0 - b2) / 2."""
    b0 = g.k(0, x)
    b1 = b2 = b0
    for c in coeffs:
        b2, b1 = b1, b0
        b0 = g.add(g.subtract(g.multiply(x, b1), b2), g.k(c, x))
    return g.multiply(g.k(0.5, x), g.subtract(b0, b2))


def _bessel_i1e(g: _G, x: I) -> I:
    f64 = x.shape.element_type is ElementType.F64
    a, b = (_I1E_A64, _I1E_B64) if f64 else (_I1E_A32, _I1E_B32)
    z = g.abs(x)
    small = g.multiply(_chbevl(g, g.subtract(g.multiply(g.k(0.5, x), z), g.k(2, x)), a), z)
    large = g.divide(_chbevl(g, g.subtract(g.divide(g.k(32, x), z), g.k(2, x)), b), g.sqrt(z))
    out = g.select(g.cmp(z, g.k(8, x), "LE"), small, large)
    return g.select(g.cmp(x, g.k(0, x), "LT"), g.negate(out), out)


def _erfc_f64(g: _G, x: I) -> I:
    z = g.multiply(x, x)
    erf = g.divide(g.multiply(x, g.poly(z, _ERF_T)), g.poly(z, _ERF_U))
    a = g.abs(x)
    e = g.exponential(g.negate(z))
    below8 = g.divide(g.multiply(e, g.poly(a, _ERFC_P)), g.poly(a, _ERFC_Q))
    above8 = g.divide(g.multiply(e, g.poly(a, _ERFC_R)), g.poly(a, _ERFC_S))
    big = g.select(g.cmp(a, g.k(8, x), "LT"), below8, above8)
    big = g.select(g.cmp(g.negate(z), g.k(-_MAXLOG, x), "LT"), g.k(0, x), big)
    big = g.select(g.cmp(x, g.k(0, x), "LT"), g.subtract(g.k(2, x), big), big)
    return g.select(g.cmp(a, g.k(1, x), "LT"), g.subtract(g.k(1, x), erf), big)


def _is_int(g: _G, v: I) -> I:
    return g.cmp(v, g.floor(v), "EQ")


def _zeta(g: _G, x: I, q: I) -> I:
    one, zero, nan, inf = g.k(1, x), g.k(0, x), g.k(math.nan, x), g.k(math.inf, x)
    neg_x = g.negate(x)
    a = q
    initial = g.power(q, neg_x)
    for _ in range(9):
        a = g.add(a, one)
        initial = g.add(initial, g.power(a, neg_x))
    a = g.add(a, one)
    neg_power = g.power(a, neg_x)
    s = g.add(initial, g.divide(g.multiply(neg_power, a), g.subtract(x, one)))
    a_inv_sq = g.divide(one, g.multiply(a, a))
    horner = zero
    for i in range(11):
        factor = g.multiply(g.add(x, g.k(22 - 2 * i, x)), g.add(x, g.k(21 - 2 * i, x)))
        horner = g.multiply(factor, g.multiply(a_inv_sq,
                                               g.add(horner, g.k(1 / _ZETA[i], x))))
    tail = g.multiply(g.divide(x, a), g.add(g.k(1 / _ZETA[11], x), horner))
    s = g.add(s, g.multiply(neg_power, g.add(g.k(0.5, x), tail)))
    eps = float(np.finfo(x.shape.element_type.dtype).eps)
    converged = g.cmp(g.abs(neg_power), g.multiply(g.abs(initial), g.k(eps, x)), "LT")
    out = g.select(converged, initial, s)
    out = g.select(g.cmp(x, one, "LT"), nan, out)
    q_le_zero = g.cmp(q, zero, "LE")
    out = g.select(g.op("and", q_le_zero, g.op("not", _is_int(g, x))), nan, out)
    even = g.op("and", _is_int(g, x), g.cmp(g.remainder(x, g.k(2, x)), zero, "EQ"))
    out = g.select(g.op("and", q_le_zero, _is_int(g, q)), g.select(even, inf, nan), out)
    return g.select(g.cmp(x, one, "EQ"), inf, out)


def _polygamma(g: _G, n: I, x: I) -> I:
    one = g.k(1, x)
    sign = g.subtract(g.multiply(g.k(2, x), g.remainder(n, g.k(2, x))), one)
    n1 = g.add(n, one)
    out = g.multiply(g.multiply(sign, g.exponential(g.op("chlo.lgamma", n1))), _zeta(g, n1, x))
    out = g.select(g.cmp(n, g.k(0, x), "EQ"), g.op("chlo.digamma", x), out)
    bad = g.op("or", g.op("not", _is_int(g, n)), g.cmp(n, g.k(0, x), "LT"))
    return g.select(bad, g.k(math.nan, x), out)


_FNS: dict[str, Callable[..., I]] = {
    "chlo.bessel_i1e": _bessel_i1e, "chlo.erfc": _erfc_f64, "chlo.zeta": _zeta,
    "chlo.polygamma": _polygamma,
}

#: The chlo ops this pass lowers.
LOWERED = frozenset(_FNS)


def lower_special(comp: Computation, i: I) -> I | None:
    """The HLO for special-function instruction `i` (added to `comp`), None where not
    lowered (another element type; erfc below f64 is chlo_lowering's)."""
    g = _G(comp)
    et = i.operands[0].shape.element_type
    if not et.is_float or et.bits not in (16, 32, 64):
        return None
    if i.opcode == "chlo.erfc" and et is not ElementType.F64:
        return None
    fn = _FNS[i.opcode]
    if et.bits == 16:
        args = [g.convert(o, new_element_type=ElementType.F32) for o in i.operands]
        return g.convert(fn(g, *args), new_element_type=et)
    return fn(g, *i.operands)


class ChloSpecialLowering(Pass):
    """chlo.bessel_i1e / erfc (f64) / zeta / polygamma => HLO (XLA's decompositions);
    nothing when `exact_only` (these change the values the interpreter's scipy gives)."""

    name = "chlo-special-lowering"
    reassociating = True

    def __init__(self, exact_only: bool = False) -> None:
        self.exact_only = exact_only

    def run(self, module: Module) -> bool:
        if self.exact_only:
            return False
        changed = False
        for comp in list(module.post_order()):
            touched = False
            for i in [i for i in comp.instructions if i.opcode in LOWERED]:
                new = lower_special(comp, i)
                if new is not None:
                    comp.replace_instruction(i, new)
                    touched = True
            if touched:
                sort_instructions(comp)
                changed = True
        if changed:  # polygamma's lgamma / digamma
            ChloLowering().run(module)
        return changed


__all__ = ["ChloSpecialLowering", "LOWERED", "lower_special"]
