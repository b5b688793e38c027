"""lgamma in f64 for x > 0: Taylor series around its zeros 1 and 2 and its minimum, shifted
there by the recurrence up to 16, Stirling's series beyond (issue 15).

Lanczos' form (XLA's, passes/chlo_lowering.py) and scipy's gammaln are accurate in absolute
terms: near the zeros (lgamma(1 + e) ~ -0.58 e) and the minimum (-0.12 at 1.4616) their
relative error grows without bound (cpu) or to 9 ulp (scipy). Here, in three pieces,
lgamma(c + t) = y + c1 t + sum_{k >= 2} c_k t^k with t = x - c exact (Sterbenz):

* [0.5, 1.2], c = 1: y = 0, c1 = -gamma, c_k = (-1)^k zeta(k) / k;
* (1.2, 1.75), c = the double nearest the minimum: y = lgamma(c) as hi + lo, c1 = psi(c)
  (-9.2e-17: c is not the exact minimum), c_k = psi^(k-1)(c) / k!;
* [1.75, 2.5], c = 2: y = 0, c1 = 1 - gamma, c_k = (-1)^k (zeta(k) - 1) / k.

The coefficients were computed once with mpmath at 300 bits (y, c1 to more than a double:
c1 = c1_hi + c1_lo, c1_hi of 26 bits) and terms kept while |c_k| span^k > 1e-20. Evaluated with
+, -, * only (HLO has no fma; the interpreter's numpy neither): t = t_hi + t_lo split
(Veltkamp), t_hi c1_hi exact, so y = (y_hi + t_hi c1_hi) + ((t_lo c1_hi + t c1_lo + y_lo) +
t^2 P(t)) rounds about once; the tail t^2 P(t) is below half of |y| on these pieces.
Below 0.5 and from 2.5 to 16 the recurrence shifts x (`pieces`): the log adds a rounding
(2 ulp at most measured, where Lanczos gave 21 at 0.36, 70 at 2.63, 20 at 3.8).
"""

from __future__ import annotations

import numpy as np

#: (lo, hi, center, c1_hi, c1_lo, y_hi, y_lo, (c_2, c_3, ...)); x in [lo, hi] (MIN: open).
SERIES: tuple[tuple[float, float, float, float, float, float, float, tuple[float, ...]], ...] = (
    # ONE: center 1.0, [0.5, 1.2], 55 terms from t^2
    (0.5, 1.2, 1.0, -0.5772156715393066, 6.637773780018488e-09, 0.0, 0.0, (
        0.8224670334241132, -0.40068563438653143, 0.27058080842778454, -0.20738555102867398,
        0.1695571769974082, -0.1440498967688461, 0.12550966952474304, -0.11133426586956469,
        0.1000994575127818, -0.09095401714582904, 0.083353840546109, -0.0769325164113522,
        0.07143294629536133, -0.06666870588242046, 0.06250095514121304, -0.058823978658684585,
        0.055555767627403614, -0.05263167937961666, 0.05000004769810169, -0.047619070330142226,
        0.04545455629320467, -0.04347826605304026, 0.04166666915034121, -0.04000000119214014,
        0.03846153903467518, -0.037037037312989324, 0.035714285847333355,
        -0.034482758684919304, 0.03333333336437758, -0.03225806453115042, 0.03125000000727597,
        -0.030303030306558044, 0.029411764707594344, -0.02857142857226011,
        0.027777777778181998, -0.027027027027223673, 0.02631578947377995,
        -0.025641025641072283, 0.025000000000022737, -0.024390243902450117,
        0.023809523809529224, -0.023255813953491015, 0.02272727272727402,
        -0.022222222222222855, 0.021739130434782917, -0.021276595744681003,
        0.02083333333333341, -0.02040816326530616, 0.020000000000000018, -0.019607843137254912,
        0.019230769230769235, -0.01886792452830189, 0.01851851851851852, -0.01818181818181818,
        0.017857142857142856,)),
    # MIN: center 1.4616321449683622, [1.2, 1.75], 25 terms from t^2
    (1.2, 1.75, 1.4616321449683622, 0.0, -9.241265521729427e-17, -0.12148629053584961,
     3.3649914684731424e-18, (
        0.4838361227238106, -0.14758772299453074, 0.06462494023891277, -0.03278854108848132,
        0.017970675115210402, -0.010314223036636393, 0.006100536020517891,
        -0.0036845696083163755, 0.002259764823221812, -0.0014022514459044518,
        0.000878232634717682, -0.0005541949527966826, 0.000351912956837847,
        -0.00022465344369595542, 0.00014407039542093313, -9.276098655471758e-05,
        5.9934733439794323e-05, -3.884583889452663e-05, 2.5247663291730135e-05,
        -1.6450858338395626e-05, 1.0743455256375948e-05, -7.0307052573803595e-06,
        4.609738653644762e-06, -3.027671832878031e-06, 1.991759921239265e-06,)),
    # TWO: center 2.0, [1.75, 2.5], 29 terms from t^2
    (1.75, 2.5, 2.0, 0.42278432846069336, 6.637773780018488e-09, 0.0, 0.0, (
        0.3224670334241132, -0.0673523010531981, 0.020580808427784546, -0.007385551028673986,
        0.0028905103307415234, -0.001192753911703261, 0.0005096695247430425,
        -0.00022315475845357939, 9.945751278180853e-05, -4.492623673813314e-05,
        2.050721277567069e-05, -9.439488275268397e-06, 4.374866789907488e-06,
        -2.039215753801366e-06, 9.55141213040742e-07, -4.492469198764566e-07,
        2.1207184805554665e-07, -1.0043224823968099e-07, 4.7698101693639804e-08,
        -2.2711094608943164e-08, 1.0838659214896955e-08, -5.183475041970047e-09,
        2.4836745438024785e-09, -1.1921401405860912e-09, 5.731367241678862e-10,
        -2.7595228851242334e-10, 1.330476437424449e-10, -6.4229645638381e-11,
        3.1044247747322276e-11,)),
)
_SPLIT = 134217729.0  # 2^27 + 1
CHUNK = 8  # `poly`'s chunk (a power of two)


#: x in (0, 0.5) takes ONE at t = x: lgamma(x) = lgamma(1 + x) - log x (t exact).
SMALL = (0.0, 0.5)
#: x in (2.5, 16] takes MIN / TWO at u = x - n, n = ceil(x - 2.5) <= 14: lgamma(x) =
#: lgamma(u) + log((x - 1) ... (x - n)), each factor exact, the product rounding n - 1 times
#: (an absolute error in the log far below lgamma(x)'s ulp but near 3.5).
SHIFT = (2.5, 32.0)
MAX_SHIFT = 30
#: Beyond 16, Stirling: (x - 1/2)(log x - 1) + W0 + sum_k B_2k / (2k (2k - 1) x^(2k - 1)),
#: W0 = log(2 pi) / 2 - 1/2; at 16 the 8th term is 2.5e-20.
W0 = 0.41893853320467274
STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156,
            -3617 / 122400)


def pieces(x: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per series: (mask of the x it serves, its t, the log term to add)."""
    with np.errstate(all="ignore"):
        small = (x > SMALL[0]) & (x < SMALL[1])
        shift = (x > SHIFT[0]) & (x <= SHIFT[1])
        n = np.where(shift, np.ceil(x - SHIFT[0]), 0.0)
        factors = [np.where(n >= j, x - j, 1.0) for j in range(1, MAX_SHIFT + 1)]
        while len(factors) > 1:  # balanced: the cpu lowering's expression stays shallow
            factors = [factors[i] * factors[i + 1] if i + 1 < len(factors) else factors[i]
                       for i in range(0, len(factors), 2)]
        prod = factors[0]
        u = x - n
        zero = np.zeros_like(x)
        log_p = np.where(shift, np.log(prod), zero)
        one = small | ((x >= SERIES[0][0]) & (x <= SERIES[0][1]))
        mid = (u > SERIES[1][0]) & (u < SERIES[1][1])
        two = (u >= SERIES[2][0]) & (u <= SERIES[2][1])
        return [(one, np.where(small, x, x - 1.0), np.where(small, -np.log(np.abs(x)), zero)),
                (mid, u - SERIES[1][2], log_p), (two, u - 2.0, log_p)]


def stirling(x: np.ndarray) -> np.ndarray:
    """lgamma for x > 16 (fdlibm's arrangement of Stirling's series)."""
    with np.errstate(all="ignore"):
        z = 1.0 / x
        y = z * z
        p = np.full_like(x, STIRLING[-1])
        for c in STIRLING[-2::-1]:
            p = p * y + c
        return (x - 0.5) * (np.log(x) - 1.0) + (W0 + z * p)  # type: ignore[no-any-return]


def poly(t: np.ndarray, cs: tuple[float, ...], chunk: int = 8) -> np.ndarray:
    """sum cs[i] t^i: Horner within chunks of `chunk` terms, then Horner over the chunks in
    t^chunk (the cpu lowering's order: a shallow expression fuses into one kernel)."""
    tc = t
    for _ in range(chunk.bit_length() - 1):
        tc = tc * tc
    acc = None
    for i in reversed(range(0, len(cs), chunk)):
        part = cs[i:i + chunk]
        q = np.full_like(t, part[-1])
        for v in part[-2::-1]:
            q = q * t + v
        acc = q if acc is None else acc * tc + q
    assert acc is not None
    return acc


def evaluate(t: np.ndarray, k: int) -> np.ndarray:
    """Series k at f64 t = x - center."""
    _, _, _, c1h, c1l, yh, yl, cs = SERIES[k]
    s = t * _SPLIT
    th = s - (s - t)
    tl = t - th
    rest = ((tl * c1h + t * c1l) + yl) + t * t * poly(t, cs, CHUNK)
    return (yh + th * c1h) + rest  # type: ignore[no-any-return]


def lgamma(x: np.ndarray, other: np.ndarray) -> np.ndarray:
    """`other` (an f64 lgamma for x <= 0) with this module's on x > 0."""
    out = np.array(other, dtype=np.float64, copy=True)
    for k, (m, t, extra) in enumerate(pieces(x)):
        if m.any():
            out[m] = evaluate(t[m], k) + extra[m]
    big = x > SHIFT[1]
    if big.any():
        out[big] = stirling(x[big])
    return out
