"""XLA CPU's own exp and log (not libm's), bit for bit, for the complex functions built on
them (ops/complex_xla.py: complex pow).

XLA CPU inlines these as polynomial IR (Eigen's / Cephes' forms) instead of calling libm;
what follows is that IR as LLVM's x86-64 backend runs it (read from XLA's IR dump:
`XLA_FLAGS=--xla_dump_to`, jaxlib 0.10), each `u v + w` whose product has one use fused
into an FMA (log's choices checked in the object code too). exp equals jax.jit(jnp.exp)
on every input tested (tests/unit/ops/test_xla_math.py); log equals XLA's through complex
pow (real jnp.log calls a function instead). Within 1-2 ulp of correctly rounded, not
correctly rounded: the real exp / log ops keep their own reference; these serve only where
XLA's composite formula is the expectation.
"""

from __future__ import annotations

import numpy as np

from xlapy.ops.elementwise import flush
from xlapy.ops.fma import fma


def _f32(bits: int) -> np.float32:
    return np.array([bits], np.uint32).view(np.float32)[0]


def _f64(bits: int) -> np.float64:
    return np.array([bits], np.uint64).view(np.float64)[0]


_LN2_HI32, _LN2_LO32 = _f32(0x3F318000), _f32(0xB95E8083)
_EXP32 = tuple(_f32(v) for v in (0x39506967, 0x3AB743CE, 0x3C088908, 0x3D2AA9C1, 0x3E2AAAAA))
_LOG32 = tuple(_f32(v) for v in (0x3D9021BB, 0xBDEBD1B8, 0x3DEF251A, 0xBDFE5D4F, 0x3E11E9BF,
                                 0xBE2AAE50, 0x3E4CCEAC, 0xBE7FFFFC, 0x3EAAAAAA))


def _exp32(x: np.ndarray) -> np.ndarray:
    """x clamped to [-87.8, 88.8]; n = floor(x log2 e + 1/2) clamped to +-127; r = x - n ln2
    (ln2 in two parts); 1 + r + r^2 P(r); times 2^n built from bits (n = -127: 0)."""
    f = np.float32
    x = np.where(x < f(-87.8), f(-87.8), np.where(x > f(88.8), f(88.8), x))
    n = np.floor(fma(x, _f32(0x3FB8AA3B), f(0.5)))
    n = np.clip(n, f(-127), f(127))
    r = fma(-_LN2_HI32, n, x)
    r = fma(-_LN2_LO32, n, r)
    p = fma(r, _EXP32[0], _EXP32[1])
    for c in (*_EXP32[2:], f(0.5)):
        p = fma(p, r, c)
    y = f(1) + fma(p, flush(r * r), r)
    scale = ((np.nan_to_num(n).astype(np.int32) + 127) << 23).view(np.float32)
    return flush(y * scale)


_EXP64_P = (_f64(0x3F2089CDD5E44BE8), _f64(0x3F9F06D10CCA2C7E))
_EXP64_Q = (_f64(0x3EC92EB6BC365FA0), _f64(0x3F64AE39B508B6C0), _f64(0x3FCD17099887E074))
_EXP64_LO, _EXP64_HI = _f64(0xC086232BDD7ABCD2), _f64(0x40862E42FEFA39EF)


def _exp64(x: np.ndarray) -> np.ndarray:
    """Cephes' exp: n = floor(x log2 e + 1/2), g = x - n ln2 (two parts), e^g = 1 + 2 g P /
    (Q - g P) (P, Q in g^2); scaled by 2^b three times and 2^(n - 3b), b = n >> 2; inf
    above 709.78, 0 below -708.40 (NaN-propagating clamps)."""
    f = np.float64
    xc = np.fmax(np.fmin(x, _EXP64_HI), _EXP64_LO)
    xc = np.where(np.isnan(x), x, xc)
    n = np.floor(fma(xc, _f64(0x3FF71547652B82FE), f(0.5)))
    g = fma(-_f64(0x3FE62E4000000000), n, xc)
    g = fma(-_f64(0x3EB7F7D1CF79ABCA), n, g)
    gg = flush(g * g)
    p = fma(gg, _EXP64_P[0], _EXP64_P[1])
    pg = flush(fma(p, gg, f(1)) * g)
    q = fma(gg, _EXP64_Q[0], _EXP64_Q[1])
    q = fma(q, gg, _EXP64_Q[2])
    q = fma(q, gg, f(2))
    e = fma(flush(pg / flush(q - pg)), f(2), f(1))
    ni = np.clip(np.nan_to_num(n), -2099, 2099).astype(np.int64)
    b = ni >> 2
    s = ((b << 52) + 0x3FF0000000000000).view(np.float64)
    t = ((((ni - 3 * b) & 0xFFF) << 52) + 0x3FF0000000000000).view(np.float64)
    out = flush(flush(flush(flush(e * s) * s) * s) * t)
    return np.where(x > _EXP64_HI, np.inf, np.where(x < _EXP64_LO, f(0), out))


def exp(x: np.ndarray) -> np.ndarray:
    """XLA CPU's exp on f32 or f64 values."""
    with np.errstate(all="ignore"):
        return _exp32(x) if x.dtype == np.float32 else _exp64(x)


def log32(x: np.ndarray) -> np.ndarray:
    """XLA CPU's f32 log (Cephes' logf): x = m 2^e with m in [sqrt(1/2), sqrt(2)), u = m - 1,
    log = u - u^2 / 2 + u^3 P(u) + e ln2 (two parts); -inf at 0, inf at inf, NaN below 0."""
    f = np.float32
    with np.errstate(all="ignore"):
        xc = np.where(~(x > _f32(0x00800000)), _f32(0x00800000), x)  # NaN too
        bits = xc.view(np.uint32)
        e = ((bits >> 23).astype(np.int32) - 127).astype(f) + f(1)
        m = ((bits & 0x807FFFFF) | 0x3F000000).view(np.float32)
        small = m < _f32(0x3F3504F3)
        e = e - np.where(small, f(1), f(0))
        u = (m - f(1)) + np.where(small, m, f(0))
        u2 = flush(u * u)
        u3 = flush(u2 * u)
        p = _LOG32
        y = fma(fma(u, p[0], p[1]), u, p[2])
        y1 = fma(fma(u, p[3], p[4]), u, p[5])
        y2 = fma(fma(u, p[6], p[7]), u, p[8])
        y = fma(fma(y, u3, y1), u3, y2)
        y = fma(y, u3, flush(_LN2_LO32 * e))
        out = fma(_LN2_HI32, e, flush(fma(-f(0.5), u2, u) + y))
        out = np.where(x == 0, -np.inf, np.where(x == np.inf, np.inf, out))
        return np.where((x < 0) | np.isnan(x), np.nan, out).astype(f)


#: Cephes' log1p: x - x^2 / 2 + x^3 P(x) / Q(x) (P, Q highest degree first; Q monic).
LOG1P_P = (4.5270000862445199635215e-5, 4.9854102823193375972212e-1, 6.5787325942061044846969,
           2.9911919328553073277375e1, 6.0949667980987787057556e1, 5.7112963590585538103336e1,
           2.0039553499201281259648e1)
LOG1P_Q = (1.0, 1.5062909083469192043167e1, 8.3047565967967209469434e1,
           2.2176239823732856465394e2, 3.0909872225312059774938e2, 2.1642788614495947685003e2,
           6.0118660497603843919306e1)
#: Below this |x| log1p takes the rational form: sqrt(2) - 1 (f64: 0x3FDA827999FCEF32).
LOG1P_CUT = {np.dtype(np.float32): _f32(0x3ED413CD), np.dtype(np.float64): _f64(0x3FDA827999FCEF32)}


def log1p(x: np.ndarray) -> np.ndarray:
    """XLA CPU's log1p (its IR): Cephes' rational form where |x| < sqrt(2) - 1, each
    Horner step fused and started from 0 x (NaN at infinities), else log(1 + x) with XLA's
    f32 log (f32) or libm's log (f64)."""
    from xlapy.ops import libm

    t = x.dtype.type
    with np.errstate(all="ignore"):
        zero_x = flush(x * t(0))
        p, q = zero_x + t(LOG1P_P[0]), zero_x + t(1)
        for c in LOG1P_P[1:]:
            p = fma(p, x, t(c))
        for c in LOG1P_Q[1:]:
            q = fma(q, x, t(c))
        z = flush(x * x)
        rat = flush(flush(flush(x * z) * flush(p / q)) + flush(z * t(-0.5)))
        small = flush(x + rat)
        u = flush(x + t(1))
        large = log32(u) if x.dtype == np.float32 else flush(libm.call("log", u))
        return np.where(np.abs(x) < LOG1P_CUT[x.dtype], small, large)


#: XLA CPU's tanh: x P(x^2) / Q(x^2) on x clamped to +-CLAMP (f32: 0 x^0-free P; bits,
#: highest degree first; the f64 P and Q end in 1), x itself below TINY (f32 only), sign(x)
#: at |x| >= 20.
TANH = {
    np.dtype(np.float32): dict(
        clamp=0x40FFF644, tiny=4e-4,
        p=(0xA59F25C0, 0x2A61337E, 0xAEBD37FF, 0x335C0041, 0x3779434A, 0x3A270DED, 0x3BA059DC),
        q=(0x35A0D3D8, 0x38F895D6, 0x3B14AA05, 0x3BA059DD)),
    np.dtype(np.float64): dict(
        clamp=0x4031B6D58F246197, tiny=0.0,
        p=(0x3B3F9F82E5D782DF, 0x3C2C3C836C04B4C8, 0x3CEC3379F905E662, 0x3D929AFF6C8EDD96,
           0x3E2525A389DCE7C2, 0x3EA708819BE51CD9, 0x3F18996F4026A7FA, 0x3F787F80B957ED00,
           0x3FC36FBA9B450E5A, 0x3FF0000000000000),
        q=(0x3BBE8630CF903250, 0x3C90AABCA9A5FEA0, 0x3D4232981AA2BBA8, 0x3DDEE2F015EA8065,
           0x3E681F1947C52304, 0x3EE26C82AB46D140, 0x3F4B2E7C4D488C04, 0x3FA1998830265B50,
           0x3FDF0D32A2F7DC79, 0x3FF0000000000000)),
}


def bits(v: int, dt: np.dtype) -> np.floating:
    return _f32(v) if dt == np.float32 else _f64(v)


def tanh(x: np.ndarray) -> np.ndarray:
    """XLA CPU's tanh (its IR: the rational form of `TANH`, each Horner step fused)."""
    c = TANH[x.dtype]
    t = x.dtype.type
    with np.errstate(all="ignore"):
        lim = bits(c["clamp"], x.dtype)
        xc = np.where(x < -lim, -lim, np.where(x > lim, lim, x))
        x2 = flush(xc * xc)
        p = [bits(v, x.dtype) for v in c["p"]]
        q = [bits(v, x.dtype) for v in c["q"]]
        num = fma(x2, p[0], p[1])
        for k in p[2:]:
            num = fma(x2, num, k)
        den = fma(x2, q[0], q[1])
        for k in q[2:]:
            den = fma(x2, den, k)
        out = flush(flush(xc * num) / den)
        out = np.where(np.abs(x) < t(c["tiny"]), x, out)
        return np.where(np.abs(x) >= t(20), np.copysign(t(1), x), out)
