"""The constants and fitted coefficients of math_poly.py's functions: range-reduction
splits (ln 2, pi/2, 2/sqrt(pi) as sums of floats), the f32 tanh rational and exp minimax
polynomial, and Chebyshev fits made once per process (float64 on Chebyshev nodes)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
import scipy.special

#: f32 tanh(x) = x P(x^2) / Q(x^2) on [0, 9.2]: a (4, 4) rational fit in float64 (linearized
#: least squares with Lawson reweighting toward minimax of the relative error, 6000 nodes,
#: long double reference; fit error 0.43 ulp), coefficients rounded to f32; at 9.2 the f32
#: evaluation is above 1 (so clamped |x| >= 9.2 give 1 exactly). Exhaustively
#: over [2^-20, 9.3] the f32 evaluation is within 5 ulp (the roundings of P, Q and the
#: division near tanh = 1); XLA's own f32 tanh (Eigen's rational) measures 5 ulp as well.
TANH_TOP32 = 9.2
TANH_P32 = [1.0, 0.13368183374404907, 0.0034803450107574463, 2.035870056715794e-05,
             1.300874874488045e-08]
TANH_Q32 = [1.0, 0.46701493859291077, 0.025818966329097748, 0.00032607250614091754,
             7.634753842467035e-07]
#: f64 erfcx(x) = exp(x^2) erfc(x) on [1, 6] (erf above |x| = 1): the Chebyshev projection
#: on 80 nodes with mpmath at 120 bits, kept while above 2^-58 of the first (31 terms).
#: fit("erfcx") in f64 had kept 41, the last ten its f64 reference's rounding noise (~1e-16).
ERFCX_F64 = (0.20196598791223083, -0.147884835533987, 0.05188222158351389, -0.017525709964867527,
             0.005721802417478219, -0.0018109803028142997, 0.0005570714353927344,
             -0.00016689473052528832, 4.878565911493746e-05, -1.3935932859822488e-05,
             3.895514595190115e-06, -1.0668392337070025e-06, 2.865502572057316e-07,
             -7.555861081756622e-08, 1.957586342968354e-08, -4.987110132992565e-09,
             1.2501871239431183e-09, -3.0858852312872416e-10, 7.504484747602075e-11,
             -1.7990193064432053e-11, 4.25347830122088e-12, -9.92315607537652e-13,
             2.285294689027943e-13, -5.197545128838963e-14, 1.1678402647273797e-14,
             -2.593300539647079e-15, 5.693144752523706e-16, -1.2360008955300707e-16,
             2.65449529106721e-17, -5.641103352342304e-18, 1.1865358108872195e-18)
ERF_TOP = {False: 4.0, True: 6.0}


def ln2_parts(is64: bool) -> tuple[float, float]:
    """ln 2 = hi + lo; fdlibm's split for f64 (hi has 32 significant bits, lo is ln 2 - hi to
    full precision), a 12-bit hi for f32."""
    if is64:
        return (float.fromhex("0x1.62e42feep-1"), float.fromhex("0x1.a39ef35793c76p-33"))
    return split(math.log(2.0), 12)


@functools.cache
def two_over_sqrt_pi(is64: bool) -> tuple[float, float]:
    """2/sqrt(pi) = hi + lo, hi rounded to the type, lo the rest (50 digits of decimal)."""
    import decimal

    with decimal.localcontext() as ctx:
        ctx.prec = 50
        k = 2 / decimal.Decimal("3.14159265358979323846264338327950288419716939937510").sqrt()
        hi = float(k) if is64 else float(np.float32(float(k)))
        return hi, float(k - decimal.Decimal(hi))


def split(v: float, bits: int) -> tuple[float, float]:
    """v = hi + lo with hi holding `bits` significant bits (so n * hi is exact)."""
    m, e = math.frexp(v)
    hi = math.ldexp(math.floor(math.ldexp(m, bits)), e - bits)
    return hi, v - hi


@functools.cache
def pio2_parts(n: int = 3) -> tuple[float, ...]:
    """pi/2 as n doubles, all but the last of 30 significant bits (exact products with
    |k| < 2^23), the last the rest rounded. f64 takes 4 (143 bits): doubles below 2^20 come
    as close as ~2^-60 to a multiple of pi/2, where 3 parts (113 bits) left cos
    11081.968085537996 (7055 pi/2 rounded) 6 ulp off."""
    from fractions import Fraction

    # pi/2 to 300 bits from a hard-coded hex expansion of pi.
    pi_hex = "3.243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89452821E638D"
    whole, frac = pi_hex.split(".")
    pi = Fraction(int(whole, 16)) + Fraction(int(frac, 16), 16 ** len(frac))
    rest = pi / 2
    parts: list[float] = []
    for _ in range(n):
        hi = float(rest)
        m, e = math.frexp(hi)
        hi = math.ldexp(math.floor(math.ldexp(m, 30)), e - 30) if len(parts) < n - 1 else hi
        parts.append(hi)
        rest -= Fraction(hi)
    return tuple(parts)


#: Below this every lane's n = round(x log2 e) is at most 127 (f32 exp's one-scale form).
EXP_ONE_SCALE_MAX = 88.3

#: f32 exp's e^r on |r| <= ln2/2: 1 + r + ... + c6 r^6, the minimax relative fit (Lawson's
#: iteration on 4001 Chebyshev nodes, c0 = c1 = 1 fixed): 3.7e-9 (0.06 ulp) with the
#: coefficients in f32, where the degree-7 Taylor series it replaces reached 5.3e-9 with
#: one more fma per vector (softmax's exp pass: 17 vector ops, was 18).
EXP_F32 = (1.0, 1.0, 0.4999999344379915, 0.16666520572392574, 0.041668388742391586,
           0.00836872407311626, 0.0013814583854395367)


#: (atan(t) / t - 1) / z with z = t^2 on |t| <= tan(pi/8), lowest power first (degree 7):
#: least squares on 400 Chebyshev nodes against mpmath at 120 bits; atan(t) = t + t z P(z)
#: in f64 is then within 2^-43 relative (f32 atan2, libm_f32.py).
ATAN_F32 = (-0.3333333333326845, 0.19999999951137026, -0.14285708228673485,
            0.11110823817253365, -0.09084169648188016, 0.07605375189514164,
            -0.060297299263982175, 0.032996898407339166)


def taylor_exp(n: int) -> list[float]:
    return [1.0 / math.factorial(k) for k in range(n)]


_FITS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], float, float]] = {
    # name: (function of the fit variable, lo, hi)
    "erfcx": (scipy.special.erfcx, 1.0, ERF_TOP[False]),
}


@functools.cache
def fit(name: str) -> np.ndarray:
    """Chebyshev coefficients for `name` on its interval, for an f32 result: the discrete
    projection on 400 Chebyshev nodes (where the T_k are orthogonal, it equals the
    least-squares fit; a matrix product, where lstsq took 150 ms on a cold first call),
    terms kept while above a quarter ulp of f32 / 8 of the first (the f64 reference's noise
    is far below that). f64 series are constants fitted with mpmath (ERFCX_F64):
    a fit against f64 references kept ten or more terms of their rounding noise."""
    fn, lo, hi = _FITS[name]
    target = 2.0 ** -24 / 4
    nodes = 400
    theta = np.pi * (np.arange(nodes) + 0.5) / nodes
    zs = lo + (np.cos(theta) + 1) * (hi - lo) / 2
    coeffs = (2.0 / nodes) * (np.cos(np.outer(np.arange(41), theta)) @ fn(zs))
    coeffs[0] /= 2
    keep = int(np.nonzero(np.abs(coeffs) > target * np.abs(coeffs[0]) / 8)[0][-1]) + 1
    coeffs = coeffs[:max(keep, 2)]
    return coeffs
