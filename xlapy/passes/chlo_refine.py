"""HLO for the f64 refinements of chlo_lowering (issue 15): lgamma's series for x > 0
(ops/lgamma_series.py) and erf_inv's Newton step on erfc (ops/erfcx_cheb.py), evaluated in
the same order as the interpreter's numpy twins; f32 sinh's, asin's and acos's f64 forms.
Expressions stay shallow (chunked polynomials, balanced products and sums): the cpu fusion
cuts a kernel past 100 ops deep, and a 55-term Horner chain split lgamma into 49 passes over
memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlapy.ir import Instruction
from xlapy.ops import erfcx_cheb
from xlapy.ops import lgamma_series as lgamma_series_ops

if TYPE_CHECKING:
    from xlapy.passes.chlo_lowering import _G

I = Instruction  # noqa: E741


def pairwise_sum(g: _G, terms: list[I]) -> I:
    """A balanced sum (erfcx_cheb.pairwise_sum's order)."""
    while len(terms) > 1:
        terms = [g.add(terms[i], terms[i + 1]) if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


def cheb_sum(g: _G, t: I, c: tuple[float, ...]) -> I:
    """sum c_k T_k(t), T_k by the doubling identities (a chain of log k, where Clenshaw's
    recurrence is 3 ops deep a term), then a balanced sum (erfcx_cheb.cheb_sum's order)."""
    k = g.k
    ts = [k(1.0, t), t]
    for n in range(2, len(c)):  # T_2m = 2 T_m^2 - 1, T_2m+1 = 2 T_m T_m+1 - t: log depth
        m = n // 2
        ts.append(g.subtract(g.multiply(k(2.0, t), g.multiply(ts[m], ts[m])), k(1.0, t))
                  if n % 2 == 0 else
                  g.subtract(g.multiply(k(2.0, t), g.multiply(ts[m], ts[m + 1])), t))
    return pairwise_sum(g, [g.multiply(k(ck, t), tk) for ck, tk in zip(c, ts)])


def poly_chunked(g: _G, t: I, cs: tuple[float, ...], chunk: int = lgamma_series_ops.CHUNK) -> I:
    """sum cs[i] t^i as ops/lgamma_series.poly evaluates it: Horner within chunks of `chunk`
    terms, then Horner over the chunks in t^chunk. A 55-term Horner chain is 110 ops deep,
    past the cpu fusion's depth limit (100): the kernel split into 49 passes over memory."""
    tc = t
    for _ in range(chunk.bit_length() - 1):
        tc = g.multiply(tc, tc)
    parts = [cs[i:i + chunk] for i in range(0, len(cs), chunk)]
    acc = None
    for part in reversed(parts):
        q = g.poly(t, part[::-1])
        acc = q if acc is None else g.add(g.multiply(acc, tc), q)
    assert acc is not None
    return acc


def lgamma_series(g: _G, x: I, other: I) -> I:
    """For x > 0 ops/lgamma_series.py's lgamma (the interpreter's), as it evaluates it:
    Taylor series around 1, the minimum and 2, shifted there by the recurrence below 0.5
    and up to 32, Stirling beyond. Lanczos (XLA's form) is accurate in absolute terms: its
    relative error was unbounded at the zeros 1 and 2 (8.9e-16 for lgamma(2)), 21 ulp at
    0.36, 70 at 2.63, 20 at 3.8, 12 at 4-30."""
    L = lgamma_series_ops
    S = L.SERIES
    k = g.k

    def within(v: I, lo: float, hi: float, open_: bool = False) -> I:
        return g.op("and", g.cmp(v, k(lo, x), "GT" if open_ else "GE"),
                    g.cmp(v, k(hi, x), "LT" if open_ else "LE"))

    small = within(x, *L.SMALL, open_=True)
    shift = g.op("and", g.cmp(x, k(L.SHIFT[0], x), "GT"), g.cmp(x, k(L.SHIFT[1], x), "LE"))
    n = g.select(shift, g.ceil(g.subtract(x, k(L.SHIFT[0], x))), k(0.0, x))
    factors = [g.select(g.cmp(n, k(j, x), "GE"), g.subtract(x, k(j, x)), k(1.0, x))
               for j in range(1, L.MAX_SHIFT + 1)]
    while len(factors) > 1:  # a balanced product (lgamma_series.pieces' order)
        factors = [g.multiply(factors[i], factors[i + 1]) if i + 1 < len(factors)
                   else factors[i] for i in range(0, len(factors), 2)]
    prod = factors[0]
    u = g.subtract(x, n)
    zero = k(0.0, x)
    log_p = g.select(shift, g.log(prod), zero)
    neg_log_x = g.negate(g.log(g.clamp(k(2.0 ** -1074, x), x, k(1.0, x))))
    args = [(g.op("or", small, within(x, S[0][0], S[0][1])),
             g.select(small, x, g.subtract(x, k(1.0, x))), g.select(small, neg_log_x, zero)),
            (within(u, S[1][0], S[1][1], open_=True), g.subtract(u, k(S[1][2], x)), log_p),
            (within(u, S[2][0], S[2][1]), g.subtract(u, k(2.0, x)), log_p)]
    out = other
    for (inside, t, extra), (_, _, _, c1h, c1l, yh, yl, cs) in zip(args, S):
        t = g.clamp(k(-1.0, x), t, k(1.0, x))  # finite arithmetic in the other lanes
        s = g.multiply(t, k(134217729.0, x))  # 2^27 + 1: t = th + tl (Veltkamp)
        th = g.subtract(s, g.subtract(s, t))
        tl = g.subtract(t, th)
        rest = g.add(g.add(g.add(g.multiply(tl, k(c1h, x)), g.multiply(t, k(c1l, x))),
                           k(yl, x)), g.multiply(g.multiply(t, t), poly_chunked(g, t, cs)))
        y = g.add(g.add(g.add(k(yh, x), g.multiply(th, k(c1h, x))), rest), extra)
        out = g.select(inside, y, out)
    big = g.cmp(x, k(L.SHIFT[1], x), "GT")
    xb = g.select(big, x, k(64.0, x))
    z = g.divide(k(1.0, x), xb)
    st = g.add(g.multiply(g.subtract(xb, k(0.5, x)), g.subtract(g.log(xb), k(1.0, x))),
               g.add(k(L.W0, x), g.multiply(z, g.poly(g.multiply(z, z), L.STIRLING[::-1]))))
    return g.select(big, st, out)



def erfcx_step(g: _G, x0: I, a: I) -> I:
    """ops/erfcx_cheb.newton_upper in HLO (|y| = a > 0.7; Giles' 4 ulp -> 2)."""
    E = erfcx_cheb
    k = g.k
    ax = g.clamp(k(E.EDGES[0], x0), g.abs(x0), k(E.EDGES[-1], x0))
    h = None
    for c, lo, hi in zip(E.FITS, E.EDGES[:-1], E.EDGES[1:]):
        t = g.divide(g.subtract(g.multiply(k(2.0, x0), g.clamp(k(lo, x0), ax, k(hi, x0))),
                                k(hi + lo, x0)), k(hi - lo, x0))
        v = cheb_sum(g, t, c)
        h = v if h is None else g.select(g.cmp(ax, k(lo, x0), "GE"), v, h)
    sp = g.multiply(ax, k(E.SPLIT, x0))
    hi_ = g.subtract(sp, g.subtract(sp, ax))
    lo_ = g.subtract(ax, hi_)
    p = g.multiply(ax, ax)
    pe = g.add(g.add(g.subtract(g.multiply(hi_, hi_), p),
                     g.multiply(g.multiply(k(2.0, x0), hi_), lo_)), g.multiply(lo_, lo_))
    e = g.multiply(g.exponential(p), g.add(k(1.0, x0), pe))
    corr = g.multiply(k(E.HALF_SQRT_PI, x0),
                      g.subtract(h, g.multiply(g.subtract(k(1.0, x0), a), e)))
    return g.select(g.cmp(x0, k(0.0, x0), "LT"), g.negate(g.add(ax, corr)), g.add(ax, corr))


#: Below this |x| an f32 sinh computed in f64 is x + x^3 / 6 (the next term is x^4 / 20,
#: 2^-52 relative); from it (E - 1 / E) / 2 with E = exp(x) loses at most 2^-41 to
#: cancellation: far inside an f32 ulp.
SINH_SERIES = 2.0 ** -12


def sinh_wide(g: _G, x: I) -> I:
    """sinh of f32 values held in f64 (rounded to f32 once, within 0.5 ulp and a hair): one
    f64 exp and a division, where the f64 formula (expm1, and exp twice for the overflow
    guard f64 needs) took 2.2x XLA's time (1M floats: 2.24 ms, XLA 1.03 at 6.8 ulp)."""
    e = g.exponential(x)
    big = g.multiply(g.subtract(e, g.divide(g.k(1, x), e)), g.k(0.5, x))
    small = g.add(x, g.multiply(x, g.multiply(g.multiply(x, x), g.k(1 / 6, x))))
    return g.select(g.cmp(g.abs(x), g.k(SINH_SERIES, x), "LT"), small, big)


#: (asin(u) / u - 1) / u^2 as a polynomial in u^2 on u in [0, 1/2], lowest power first
#: (degree 8: least squares on 400 Chebyshev nodes against mpmath at 120 bits; asin(u) =
#: u + u^3 P(u^2) within 2^-42 relative in f64).
ASIN_P = (0.16666666666743427, 0.07499999950943637, 0.044642908586019985,
          0.03037987703757832, 0.022413496950017053, 0.016893417193429353,
          0.016908128573800325, 0.0009586095123368995, 0.02845607470625467)


def _asin_parts(g: _G, x: I) -> tuple[I, I]:
    """(p, small) for f32 values held in f64: p = asin(u) with u = |x| up to 1/2 (`small`),
    else u = sqrt((1 - |x|) / 2), where asin(|x|) = pi/2 - 2 asin(u) (fdlibm's reduction:
    1 - |x| is exact). One polynomial either way; NaN beyond 1 (the square root's)."""
    a = g.abs(x)
    small = g.cmp(a, g.k(0.5, x), "LE")
    u2 = g.select(small, g.multiply(a, a),
                  g.multiply(g.subtract(g.k(1, x), a), g.k(0.5, x)))
    u = g.select(small, a, g.sqrt(u2))
    return g.add(u, g.multiply(g.multiply(u, u2), g.poly(u2, ASIN_P[::-1]))), small


def asin_wide(g: _G, x: I) -> I:
    """asin of f32 values held in f64 (rounded once, within 1 ulp): a polynomial after
    fdlibm's reduction, where 2 atan2(x, 1 + sqrt((1 - x)(1 + x))) in f64 called libm's
    atan2 a lane (jnp.arcsin of 1M floats: 8.4 ms, as XLA's own)."""
    p, small = _asin_parts(g, x)
    r = g.select(small, p, g.subtract(g.k(1.5707963267948966, x), g.add(p, p)))
    return g.multiply(g.sign(x), r)


def acos_wide(g: _G, x: I) -> I:
    """acos of f32 values held in f64: pi/2 - asin(x) up to |x| = 1/2, 2 asin(u) above 1/2
    and pi - 2 asin(u) below -1/2 (u as in `_asin_parts`)."""
    p, small = _asin_parts(g, x)
    two_p = g.add(p, p)
    big = g.select(g.cmp(x, g.k(0, x), "LT"), g.subtract(g.k(3.141592653589793, x), two_p),
                   two_p)
    return g.select(small, g.subtract(g.k(1.5707963267948966, x), g.multiply(g.sign(x), p)),
                    big)
