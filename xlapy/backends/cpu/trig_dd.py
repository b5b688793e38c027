"""f64 sin, cos and tan within 1 ulp: the reduced argument and sin, cos as double-doubles.

tan as sin(r) / cos(r) of doubles rounds three times (sin, cos, the quotient): 2 ulp
measured. Here r = x - k pi/2 keeps its rounding error (r + rl, TwoSum on the Cody-Waite
steps), sin(r) = r + t and cos(r) = 1 - z/2 + w are summed exactly (Fast2Sum), and the
quotient of the two double-doubles is q0 + (rho + n_lo - q0 d_lo) / d_hi with rho the exact
residual of q0 = n_hi / d_hi (an FMA). What is left: the rounding of t and w (|t| <= 0.11 |s|,
|w| <= 0.02 |c|: about 0.1 ulp) and the final one (0.5 ulp). sin and cos round hi + lo once
(one Taylor sum of doubles, whose roundings of r and of r S(z) add up: 2 ulp measured).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from llvmlite import ir

if TYPE_CHECKING:
    from xlapy.backends.cpu.math_poly import Math


def two_sum(m: Math, a: ir.Value, c: ir.Value) -> tuple[ir.Value, ir.Value]:
    """a + c = s + err exactly (Knuth's TwoSum)."""
    b = m.b
    s = b.fadd(a, c)
    cc = b.fsub(s, a)
    return s, b.fadd(b.fsub(a, b.fsub(s, cc)), b.fsub(c, cc))


def fast_two_sum(m: Math, a: ir.Value, c: ir.Value) -> tuple[ir.Value, ir.Value]:
    """a + c = s + err exactly, for |a| >= |c| (Dekker)."""
    b = m.b
    s = b.fadd(a, c)
    return s, b.fsub(c, b.fsub(s, a))


def cody_waite(m: Math, x: ir.Value, k: ir.Value, parts: tuple[float, ...]
               ) -> tuple[ir.Value, ir.Value]:
    """x - k pi/2 as r + rl, pi/2 = p1 + ... + pn (30 bits each, the last 53) and
    |k| < 2^20: x - k p1 is exact (Sterbenz), k p_i exact but the last, k pn = h + e exactly
    (an FMA); each subtraction keeps its error (TwoSum)."""
    b = m.b
    r = m.fma(k, m.c(-parts[0]), x)
    errs = []
    for p in parts[1:-1]:
        r, e = two_sum(m, r, b.fmul(k, m.c(-p)))
        errs.append(e)
    h = b.fmul(k, m.c(-parts[-1]))
    errs.append(m.fma(k, m.c(-parts[-1]), b.fneg(h)))
    r, e = two_sum(m, r, h)
    lo = e
    for e in errs:
        lo = b.fadd(lo, e)
    return fast_two_sum(m, r, lo)


def sin_cos(m: Math, r: ir.Value, rl: ir.Value
            ) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """sin(r + rl) = s_hi + s_lo and cos(r + rl) = c_hi + c_lo (|r| <= pi/4), each to about
    0.1 ulp (the roundings of t and w)."""
    b = m.b
    z = b.fmul(r, r)
    zl = b.fadd(m.fma(r, r, b.fneg(z)), b.fmul(b.fmul(m.c(2.0), r), rl))
    # sin(r) = r + r z S(z); cos(r) = 1 - z/2 + z^2 C(z) (Taylor, 11 and 10 terms)
    t = b.fmul(b.fmul(r, z), m.horner([(-1) ** i / math.factorial(2 * i + 1)
                                       for i in range(1, 12)], z))
    w = b.fsub(b.fmul(b.fmul(z, z), m.horner([(-1) ** i / math.factorial(2 * i)
                                              for i in range(2, 12)], z)),
               b.fmul(m.c(0.5), zl))
    c1, e1 = fast_two_sum(m, m.c(1.0), b.fmul(m.c(-0.5), z))
    c_hi, e2 = fast_two_sum(m, c1, w)
    c_lo = b.fadd(e1, e2)
    s_hi, e3 = fast_two_sum(m, r, t)
    s_lo = b.fadd(e3, b.fmul(rl, c_hi))  # d sin = cos dr
    return s_hi, s_lo, c_hi, c_lo


def tan(m: Math, r: ir.Value, rl: ir.Value, odd: ir.Value) -> ir.Value:
    """tan(r + rl) (odd: -cot) for |r| <= pi/4, to about 0.2 ulp before the last rounding:
    q0 = n_hi / d_hi, then q0 + (rho + n_lo - q0 d_lo) / d_hi, rho = n_hi - q0 d_hi exactly
    (both divisions as products with 1 / d_hi: q0 is within an ulp or two of the quotient,
    rho stays exact, and the correction's relative error is an ulp of a term ~2^-52 q0)."""
    b = m.b
    s_hi, s_lo, c_hi, c_lo = sin_cos(m, r, rl)
    n_hi = b.select(odd, b.fneg(c_hi), s_hi)
    n_lo = b.select(odd, b.fneg(c_lo), s_lo)
    d_hi = b.select(odd, s_hi, c_hi)
    d_lo = b.select(odd, s_lo, c_lo)
    inv = b.fdiv(m.c(1.0), d_hi)  # one division: q0 need not be the rounded quotient
    q0 = b.fmul(n_hi, inv)
    rho = m.fma(b.fneg(q0), d_hi, n_hi)
    corr = b.fmul(b.fsub(b.fadd(rho, n_lo), b.fmul(q0, d_lo)), inv)
    return b.fadd(q0, corr)
