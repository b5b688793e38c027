"""erfcx(x) = exp(x^2) erfc(x) on [0.7, 6] for erf_inv's Newton step above |y| = 0.7
(issue 15), in f64 to about 2 ulp.

erf_inv's upper range needs a residual erfc(x0) - (1 - |y|) accurate relative to erfc: erf
rounds it away (its ulp is 1's), and chlo.erfc f64 (Cephes' form) measures 35 ulp. Here
erfc = exp(-x^2) erfcx(x): erfcx as three Chebyshev series ([0.7, 1.5], [1.5, 3], [3, 6];
coefficients projected once with mpmath at 100 bits on 48 nodes, kept while above 2^-62 of
the first: a single series on [0.7, 6] needed 60 terms and Clenshaw's rounding then cost 78
ulp; summed by the forward recurrence and a balanced sum, a shallow expression for the cpu
fusion), and the step written as

    |x1| = |x0| + sqrt(pi)/2 (erfcx(|x0|) - (1 - |y|) exp(x0^2))

with x0^2 = p + pe exactly (Dekker's product: HLO and numpy have no fma) and exp(x0^2) =
exp(p)(1 + pe). 1 - |y| is exact. Both backends evaluate it the same way (the interpreter
here, the cpu backend's chlo lowering in passes/chlo_lowering.py).
"""

from __future__ import annotations

import math

import numpy as np

EDGES = (0.7, 1.5, 3.0, 6.0)
#: Chebyshev coefficients of erfcx per interval of EDGES.
FITS: tuple[tuple[float, ...], ...] = (
    # [0.7, 1.5]: 17 terms
    (0.4126433558354835, -0.10106921033217438, 0.011012998177953835, -0.001094492445985374,
     0.00010080884808164457, -8.702293425806994e-06, 7.099347939899674e-07,
     -5.5083790336726425e-08, 4.0855373105531114e-09, -2.908596066527221e-10,
     1.9943919250986843e-11, -1.3209361335152145e-12, 8.47163241190161e-14,
     -5.272196607064002e-15, 3.1898013960057816e-16, -1.8792980529026648e-17,
     1.0797429729001172e-18,),
    # [1.5, 3.0]: 20 terms
    (0.24053480758125906, -0.07002344166079719, 0.009600878679433074, -0.0012498980008193367,
     0.00015543814890469813, -1.855313555400582e-05, 2.133592307604103e-06,
     -2.371402766692384e-07, 2.55413451244302e-08, -2.6717820267380714e-09,
     2.7196732086441914e-10, -2.69849922254067e-11, 2.6137310637536914e-12,
     -2.4745867372775445e-13, 2.2927500854638512e-14, -2.0810401517313844e-15,
     1.8521975554736987e-16, -1.6179040867167105e-17, 1.3880960917457183e-18,
     -1.170581377577141e-19,),
    # [3.0, 6.0]: 22 terms
    (0.12902689965474168, -0.0420426781395118, 0.006698487121092753, -0.0010450916791743758,
     0.00015985899884949414, -2.3998261587238652e-05, 3.53906410506357e-06,
     -5.131303200649095e-07, 7.320268611264974e-08, -1.0282193129248155e-08,
     1.4229088707596404e-09, -1.9411157958365732e-10, 2.611796346594898e-11,
     -3.4677962235781513e-12, 4.5456029570973385e-13, -5.884864531875017e-14,
     7.527649782554211e-15, -9.517437650707848e-16, 1.1897836910873295e-16,
     -1.471105478545143e-17, 1.7996151024804176e-18, -2.178713234385663e-19,),
)
SPLIT = 134217729.0  # 2^27 + 1 (Veltkamp)
HALF_SQRT_PI = math.sqrt(math.pi) / 2


def pairwise_sum(terms: list[np.ndarray]) -> np.ndarray:
    """A balanced sum (the cpu lowering's order: its expression stays shallow)."""
    while len(terms) > 1:
        terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


def cheb_sum(c: tuple[float, ...], t: np.ndarray) -> np.ndarray:
    """sum c_k T_k(t): T_k by the doubling identities, then a balanced sum (the cpu
    lowering's order: its expression stays shallow)."""
    ts = [np.ones_like(t), t]
    for n in range(2, len(c)):  # T_2m = 2 T_m^2 - 1, T_2m+1 = 2 T_m T_m+1 - t
        m = n // 2
        ts.append(2.0 * (ts[m] * ts[m]) - 1.0 if n % 2 == 0 else 2.0 * (ts[m] * ts[m + 1]) - t)
    return pairwise_sum([ck * tk for ck, tk in zip(c, ts)])


def erfcx(x: np.ndarray) -> np.ndarray:
    """erfcx on [0.7, 6] (x clamped into it)."""
    x = np.clip(x, EDGES[0], EDGES[-1])
    out = np.zeros_like(x)
    for c, lo, hi in zip(FITS, EDGES[:-1], EDGES[1:]):
        t = (2.0 * np.clip(x, lo, hi) - (hi + lo)) / (hi - lo)
        out = np.where(x >= lo, cheb_sum(c, t), out)
    return out


def newton_upper(x0: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x0 (an erf_inv(y) within a few ulp, |y| > 0.7) after one Newton step on erfc."""
    with np.errstate(all="ignore"):
        a, ax = np.abs(y), np.abs(x0)
        c = ax * SPLIT
        h = c - (c - ax)
        lo = ax - h
        p = ax * ax
        pe = ((h * h - p) + 2.0 * h * lo) + lo * lo
        e = np.exp(p) * (1.0 + pe)
        return np.copysign(ax + HALF_SQRT_PI * (erfcx(ax) - (1.0 - a) * e), x0)
