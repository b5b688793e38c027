"""Complex asin, acos, asinh, acosh, atanh and atan as XLA computes them (its chlo legalization:
StableHLO's ChloDecompositionPatternsMath, generated from the `functional_algorithms`
package), read off XLA's HLO for jax.jit(jnp.arcsin) & co. (`XLA_FLAGS=--xla_dump_to`).

These are Kahan / Hull et al.'s algorithms: one kernel gives, for x = |Re w|, y = |Im w|,
the real part's cosine-like quantity (re_k) and the |imaginary part| (im_k) of asin(w),
each overflow- and cancellation-safe; the functions place them:
* asin(z) = atan2(Re z, re_k) + i (Im z < 0 ? -im_k : im_k), kernel on z;
* acos(z) = atan2(re_k, Re z) + i (Im z < 0 ? im_k : -im_k), kernel on z;
* asinh(z) = (Re z < 0 ? -im_k : im_k) + i atan2(Im z, re_k), kernel on (|Im z|, |Re z|);
* acosh(z) = im_k + i (Im z < 0 ? -1 : 1) atan2(re_k, Re z), kernel on z (jnp.arccosh
  negates the result where its real part is negative, in its own StableHLO);
* atanh(z): sign(x) log1p(4 |x| / ((1 - |x|)^2 + y^2)) / 4 + i atan2(2y, (1 - |x|)(1 + |x|)
  - y^2) / 2 for moderate |x|, |y|; 1/|x| or 1/(x/y + y/x)/y (0 for infinite parts) in its
  place for large ones, with i sign(y) pi / 2 there (sign(-0) = +1);
* atan(z) = -i atanh(i z): atanh on (-Im z, Re z), parts swapped, the new imaginary negated.
Signs test `< 0` (or `>= 0`), so a -0 part counts as positive: asin(inf - 0i) is
pi/2 + inf i, where C99's (numpy's) is pi/2 - inf i. XLA's results, kept (jax users see
them). The real functions are XLA's where it has its own (log1p, f32 log: ops/xla_math.py), libm's
(atan2, f64 log) and correctly rounded sqrt; XLA CPU's FMA contractions are followed where
found (atanh), not everywhere: results may differ from XLA's in the last bits (within 4
ulp on 5,000 inputs), not in the branches.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from xlapy.ops import libm, xla_math
from xlapy.ops.elementwise import flush, make_complex
from xlapy.ops.fma import fma


def _f(fn: np.ufunc, *xs: np.ndarray) -> np.ndarray:
    """`fn` on f32 values evaluated in f64 and rounded once (f64 as is); flushed (FTZ)."""
    dt = xs[0].dtype
    if dt == np.float32:
        return flush(fn(*(x.astype(np.float64) for x in xs)).astype(np.float32))
    return flush(fn(*xs))


def _log(x: np.ndarray) -> np.ndarray:
    """XLA's log: its own f32 polynomial, libm's for f64."""
    return flush(xla_math.log32(x) if x.dtype == np.float32 else libm.call("log", x))


def _atan2(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    return flush(libm.call("atan2", y, x))


def _hypot(a: np.ndarray, y: np.ndarray, t: type) -> np.ndarray:
    """XLA's hypot(a, y): mx sqrt(1 + (mn / mx)^2), sqrt(2) mx where equal, mx + mx r / 2
    where the square root rounds to 1."""
    mx, mn = np.maximum(a, y), np.minimum(a, y)
    r = flush(flush(mn / mx) ** 2)
    sqa = _f(np.sqrt, flush(r + t(1)))
    near = (sqa == 1) & (r > 0)
    out = np.where(near, mx + flush(flush(mx * r) / t(2)), flush(mx * sqa))
    return np.where(mx == mn, flush(mx * t(math.sqrt(2))), out)


def _kernel(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(re_k, im_k) for x, y >= 0: asin(x + iy) = atan2(x, re_k) + i im_k."""
    t = x.dtype.type
    info = np.finfo(x.dtype)
    safe_max = t(math.sqrt(float(info.max)) / 8)
    safe_min = t(math.sqrt(float(info.tiny)) * 4)
    one, half = t(1), t(0.5)
    xp1, xm1 = flush(x + one), flush(x - one)
    r = _hypot(np.abs(xp1), y, t)
    s = _hypot(np.abs(xm1), y, t)
    a = flush(flush(r + s) * half)
    half_apx = flush(flush(a + x) * half)
    yy = flush(y * y)
    rpxp1 = flush(r + xp1)
    smxm1, spxm1 = flush(s - xm1), flush(s + xm1)
    small_x = _f(np.sqrt, flush(half_apx * flush(flush(yy / rpxp1) + smxm1)))
    big_x = flush(y * _f(np.sqrt, flush(flush(half_apx / rpxp1) + flush(half_apx / spxm1))))
    re_k = np.where(np.maximum(x, y) >= safe_max, y, np.where(x <= one, small_x, big_x))
    opt = np.where(x < t(float(safe_max) * 1e12), t(float(safe_max) * 1e-6),
                   t(float(safe_max) * 1e2))
    y_big = y >= opt
    mx = np.where(y_big, y, x)
    xoy = np.where(y_big & (y != np.inf), flush(x / y), t(0))
    huge = flush(flush(_log(mx) + t(math.log(2))) + flush(xla_math.log1p(flush(xoy * xoy)) * half))
    tiny_y = (y < safe_min) & (x < one)
    ap1 = flush(a + one)
    half_yy = flush(yy * half)
    d = flush(half_yy / rpxp1)
    am1 = np.where(tiny_y, -flush(flush(xp1 * xm1) / ap1),
                   np.where(x >= one, flush(d + flush(spxm1 * half)),
                            np.where(a <= t(1.5), flush(d + flush(half_yy / smxm1)),
                                     flush(a - one))))
    sq = _f(np.sqrt, flush(am1 * ap1))
    im_k = np.where(mx >= np.where(y_big, opt, safe_max), huge,
                    np.where(tiny_y, flush(y / sq), xla_math.log1p(flush(am1 + sq))))
    return re_k, im_k


def _neg_where(cond: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.where(cond, -v, v)


def asin(z: np.ndarray) -> np.ndarray:
    re, im = z.real, z.imag
    re_k, im_k = _kernel(np.abs(re), np.abs(im))
    return make_complex(_atan2(re, re_k), _neg_where(im < 0, im_k), z.dtype)


def acos(z: np.ndarray) -> np.ndarray:
    re, im = z.real, z.imag
    re_k, im_k = _kernel(np.abs(re), np.abs(im))
    return make_complex(_atan2(re_k, re), _neg_where(~(im < 0), im_k), z.dtype)


def asinh(z: np.ndarray) -> np.ndarray:
    re, im = z.real, z.imag
    re_k, im_k = _kernel(np.abs(im), np.abs(re))
    return make_complex(_neg_where(re < 0, im_k), _atan2(im, re_k), z.dtype)


def acosh(z: np.ndarray) -> np.ndarray:
    re, im = z.real, z.imag
    re_k, im_k = _kernel(np.abs(re), np.abs(im))
    return make_complex(im_k, _neg_where(im < 0, _atan2(re_k, re)), z.dtype)


def atanh(z: np.ndarray) -> np.ndarray:
    x, y = z.real, z.imag
    t = x.dtype.type
    one = t(1)
    big = t(2.0 ** 48 if x.dtype == np.float32 else 2.0 ** 106)
    eps_big = t(2.0 ** 24 + 2 if x.dtype == np.float32 else 2.0 ** 53 + 2)
    ax, ay = np.abs(x), np.abs(y)
    moderate = (ax < big) & (np.abs(y) < big)
    one_m = flush(one - ax)
    yy = flush(y * y)
    q_mod = flush(ax / flush(fma(one_m, one_m, yy)))  # (XLA CPU fuses these)
    inf_part = np.isinf(x) | np.isinf(y)
    q_big = flush(flush(one / flush(flush(ax / y) + flush(y / ax))) / y)
    q = np.where(moderate, q_mod, np.where(flush(ay * eps_big) < ax, flush(one / ax),
                                           np.where(inf_part, t(0), q_big)))
    sign_x = np.where(x >= 0, one, -one)
    re = flush(flush(sign_x * xla_math.log1p(flush(q * t(4)))) * t(0.25))
    arg = _atan2(flush(y + y), flush(fma(one_m, flush(ax + one), -yy)))
    im = np.where(moderate, arg, flush(np.where(y >= 0, one, -one) * t(math.pi)))
    return make_complex(re, flush(im * t(0.5)), z.dtype)


def atan(z: np.ndarray) -> np.ndarray:
    """-i atanh(i z), as XLA (its HLO negates Im z and swaps the parts; no multiply)."""
    a = atanh(make_complex(-z.imag, z.real, z.dtype))
    return make_complex(a.imag, -a.real, z.dtype)


#: chlo op name -> XLA's complex formula.
FUNCTIONS = {"asin": asin, "acos": acos, "asinh": asinh, "acosh": acosh, "atanh": atanh,
             "atan": atan}


def dispatch(name: str, real: Callable[[np.ndarray], np.ndarray]
             ) -> Callable[[np.ndarray], np.ndarray]:
    """The chlo op `name`'s evaluation: XLA's complex formula for complex operands (where
    FUNCTIONS has one), `real` otherwise."""
    fn = FUNCTIONS.get(name)
    if fn is None:
        return real

    def evaluate(x: np.ndarray) -> np.ndarray:
        return fn(x) if x.dtype.kind == "c" else real(x)
    return evaluate
