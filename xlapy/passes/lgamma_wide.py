"""lgamma of f32 values in f64 (chlo_lowering lowers chlo.lgamma on f32 to it, rounding
once): XLA's Lanczos form (g = 7, 9 terms) rearranged for fewer f64 logs and divisions,
each of which costs about as much as the rest (jax.scipy.stats.poisson.logpmf of 1M: 5.38
-> 3.45 ms on Zen 4, XLA's f32 form 2.5 at up to 39 ulp; here within 0.502 ulp of
scipy's gammaln). The constants are chlo_lowering's too (its f64 form and digamma)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from xlapy.ir import Instruction

#: Lanczos approximation (g = 7, 9 terms) as XLA's chlo legalization uses it.
LANCZOS_G = 7.0
LANCZOS_BASE = 0.99999999999980993227684700473478
LANCZOS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283,
           771.3234287776530788486528258894, -176.61502916214059906584551354,
           12.507343278686904814458936853, -0.13857109526572011689554707,
           9.984369578019570859563e-6, 1.50563273514931155834e-7)


#: The Lanczos sum's fractions over one denominator, sum c_i / (z + i) = N(z) / D(z): D =
#: prod (z + i) (integers), N = sum c_i prod_{j != i} (z + j) (all positive: no
#: cancellation), rounded from exact arithmetic; within 8e-16 of the sum's exact value on
#: z in [-0.5, 1e38] where the eight f64 divisions' sum was within 7e-15.
LANCZOS_N = (10579290.099076, 11137345.484659942, 5092745.01776085, 1312212.2658786816,
             205786.21549971832, 19629.510665030335, 1053.042534722145, 24.458333333348744)
LANCZOS_D = (40320.0, 109584.0, 118124.0, 67284.0, 22449.0, 4536.0, 546.0, 36.0, 1.0)
#: Past this z the sum is below f64's resolution of the base (and D(z) ~ z^8 would overflow).
LANCZOS_ZMAX = 1e20


def horner(g: Any, cs: Sequence[float], z: Instruction) -> Instruction:
    """sum cs[k] z^k by Horner's rule."""
    acc = g.k(cs[-1], z)
    for c in reversed(cs[:-1]):
        acc = g.add(g.multiply(acc, z), g.k(c, z))
    return acc


#: sin(pi r) = r sum_k SIN_PI[k] r^2k on r in [0, 1/2]: Taylor's terms to (pi r)^23 / 23!
#: (the next under 1e-18 of the result).
SIN_PI = tuple((-1) ** k * math.pi ** (2 * k + 1) / math.factorial(2 * k + 1)
               for k in range(12))


def sin_pi(g: Any, r: Instruction) -> Instruction:
    """sin(pi r) for r in [0, 1/2] (the reflection's, in f64 for an f32 lgamma): a
    polynomial, no range reduction (the generic sine was a sixth of jax.scipy.special
    .gammaln's time)."""
    return g.multiply(r, horner(g, SIN_PI, g.multiply(r, r)))


def lgamma(g: Any, x: Instruction, reflect: Instruction, z: Instruction) -> Instruction:
    """chlo_lowering._lgamma's f64 evaluation for an f32 result (Lanczos' 1e-16 is enough
    but at its zeros 1 and 2, set there): one log for the Lanczos sum and the reflection's
    sine together, log(acc |sin(pi x)|) where reflected (+inf at the poles: a zero sine);
    the base term (z + 1/2) log t - t as one multiply-add, where XLA's form divides t by log
    t; log t itself (t = z + 7.5 >= 7 rounds within 2^-53) for log(g + 1/2) + log1p(z / (g +
    1/2)); the Lanczos sum as one fraction (LANCZOS_N / LANCZOS_D) for its eight: two f64
    logs and nine divisions fewer. `reflect`, z: chlo_lowering._lanczos_z."""
    zc = g.minimum(z, g.k(LANCZOS_ZMAX, x))
    acc = g.add(g.k(LANCZOS_BASE, x), g.divide(horner(g, LANCZOS_N, zc),
                                               horner(g, LANCZOS_D, zc)))
    t = g.add(z, g.k(LANCZOS_G + 0.5, x))
    log_t = g.log(t)
    base = g.subtract(g.add(g.k(math.log(math.sqrt(2 * math.pi)), x),
                            g.multiply(g.add(z, g.k(0.5, x)), log_t)), t)
    ax = g.abs(x)
    frac = g.subtract(ax, g.floor(ax))
    red = g.select(g.cmp(frac, g.k(0.5, x), "GT"), g.subtract(g.k(1, x), frac), frac)
    both = g.log(g.select(reflect, g.multiply(acc, sin_pi(g, red)), acc))
    out = g.select(reflect, g.subtract(g.subtract(g.k(math.log(math.pi), x), base), both),
                   g.add(base, both))
    one_or_two = g.op("or", g.cmp(x, g.k(1.0, x), "EQ"), g.cmp(x, g.k(2.0, x), "EQ"))
    out = g.select(one_or_two, g.k(0.0, x), out)
    return g.select(g.cmp(ax, g.k(math.inf, x), "EQ"), g.k(math.inf, x), out)


__all__ = ["LANCZOS", "LANCZOS_BASE", "LANCZOS_D", "LANCZOS_G", "LANCZOS_N", "LANCZOS_ZMAX",
           "SIN_PI", "horner", "lgamma", "sin_pi"]
