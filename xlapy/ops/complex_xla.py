"""Complex arithmetic as XLA CPU computes it (jax.jit's results are the expectation).

XLA's elemental IR emitter writes complex multiply and divide as plain real arithmetic, and
LLVM, allowed to contract (XLA CPU's default), fuses `x * y + z` into one FMA. Which
product of a pair gets fused was read off jax.jit's results (jaxlib 0.10, x86-64 with FMA:
tests/differential/jax_ulp_complex.py); every other formula (the textbook product,
Smith's division without FMA, numpy's) differs from XLA by an ulp on about 15% of inputs.
The cpu backend emits the same steps with `llvm.fma` (backends/cpu/elementwise_complex.py),
so both backends give XLA's bits on any x86-64 (an FMA instruction or libm's fma).

Intermediates are flushed (FTZ, as the kernels' MXCSR); the callers flush inputs (DAZ) and
results.
"""

from __future__ import annotations

import numpy as np

from xlapy.ops import libm, xla_math
from xlapy.ops.elementwise import flush, make_complex
from xlapy.ops.fma import fma


def multiply(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(a + bi)(c + di) = fma(a, c, -(b d)) + fma(b, c, a d) i: each product rounded
    before the fused one (XLA: no C99 recovery of inf * 0 NaNs; (inf + 0i)(inf + 0i) is
    inf + NaN i, as jax gives)."""
    a, b, c, d = x.real, x.imag, y.real, y.imag
    bd, ad = flush(b * d), flush(a * d)
    return make_complex(fma(a, c, -bd), fma(b, c, ad), x.dtype)


def _unit(v: np.ndarray) -> np.ndarray:
    """copysign(isinf(v) ? 1 : 0, v)."""
    return np.copysign(np.where(np.isinf(v), 1, 0).astype(v.dtype), v)


def divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """XLA's EmitComplexDivide: Smith's algorithm, both branches computed and one selected
    (|c| < |d|: r = c / d, else r = d / c; a NaN part takes the second), each `u v + w`
    fused; then, where both parts came out NaN, C99 Annex G's recovery of zero
    denominators, infinite numerators and infinite denominators (its sums fused too)."""
    a, b, c, d = x.real, x.imag, y.real, y.imag
    lt = np.abs(c) < np.abs(d)
    r1, r2 = flush(c / d), flush(d / c)
    den1, den2 = flush(fma(r1, c, d)), flush(fma(r2, d, c))
    re = np.where(lt, flush(fma(r1, a, b)) / den1, flush(fma(r2, b, a)) / den2)
    im = np.where(lt, flush(fma(r1, b, -a)) / den1, flush(fma(-r2, a, b)) / den2)
    zero = np.zeros((), a.dtype)
    inf = np.asarray(np.inf, a.dtype)
    both_nan = np.isnan(re) & np.isnan(im)
    # Zero denominator, numerator not NaN: infinities signed by c's sign and a, b.
    zero_den = (c == 0) & (d == 0) & (~np.isnan(a) | ~np.isnan(b)) & both_nan
    sinf = np.copysign(inf, c)
    # Infinite numerator over a finite denominator.
    inf_num = (np.isinf(a) | np.isinf(b)) & np.isfinite(c) & np.isfinite(d) & both_nan
    ai, bi, ci, di = _unit(a), _unit(b), _unit(c), _unit(d)
    # Finite numerator over an infinite denominator.
    inf_den = np.isfinite(a) & np.isfinite(b) & (np.isinf(c) | np.isinf(d)) & both_nan
    re = np.where(zero_den, sinf * a, np.where(
        inf_num, inf * fma(ai, c, flush(bi * d)),
        np.where(inf_den, zero * fma(a, ci, flush(b * di)), re)))
    im = np.where(zero_den, sinf * b, np.where(
        inf_num, inf * fma(bi, c, -flush(ai * d)),
        np.where(inf_den, zero * fma(b, ci, -flush(a * di)), im)))
    return make_complex(re, im, x.dtype)


def _abs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """XLA's |a + bi| (EmitComplexAbs): M sqrt(fma(r, r, 1)), r = m / M with M, m the
    larger and smaller |part| (NaN-propagating max / min); where that is NaN (0 / 0,
    inf / inf, a NaN part) the smaller part m."""
    x, y = np.abs(a), np.abs(b)
    big, small = np.maximum(x, y), np.minimum(x, y)
    r = flush(small / big)
    out = big * np.sqrt(flush(fma(r, r, np.ones((), r.dtype))))
    return flush(np.where(np.isnan(out), small, out))


def power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """XLA's EmitComplexPower, as XLA CPU's IR computes it: (a + bi)^(c + di) =
    |z|^c e^(-d t) (cos q, sin q), t = atan2(b, a), q = c t + d ln|z| (fused:
    fma(c, t, d ln|z|)); pow, atan2, cos and sin are libm's in the part type (powf... for
    c64), exp XLA's own (ops/xla_math.py), log XLA's own for c64 and libm's for c128.
    Then, in this order of precedence: z = inf + 0i with d = 0 gives inf + 0i for c > 0
    and 0 for c < 0; z = 1 + 0i gives 1 (any exponent, NaN too); c = d = 0 gives 1;
    |z| = 0 with d = 0 and c >= 0 gives 0 (c > 0) or 1 (c = 0). Elsewhere 0^c is NaN, and
    so is (2 + 0i)^inf (q = inf * 0): XLA's results, kept."""
    a, b, c, d = x.real, x.imag, y.real, y.imag
    m = _abs(a, b)
    t = flush(libm.call("atan2", b, a))
    coeff = flush(xla_math.exp(flush(t * -d)) * flush(libm.call("power", m, c)))
    log_m = xla_math.log32(m) if m.dtype == np.float32 else libm.call("log", m)
    q = flush(fma(c, t, flush(d * flush(log_m))))
    re = flush(coeff * flush(libm.call("cos", q)))
    im = flush(coeff * flush(libm.call("sin", q)))
    one, zero = (np.asarray(v, a.dtype) for v in (1, 0))
    d0 = d == 0
    out_re = np.where((m == 0) & d0 & (c >= 0), np.where(c == 0, one, zero), re)
    out_im = np.where((m == 0) & d0 & (c >= 0), zero, im)
    unit = ((c == 0) & d0) | ((a == 1) & (b == 0))
    out_re, out_im = np.where(unit, one, out_re), np.where(unit, zero, out_im)
    inf_base = (a == np.inf) & (b == 0) & d0
    out_re = np.where(inf_base & (c > 0), np.inf, np.where(inf_base & (c < 0), zero, out_re))
    out_im = np.where(inf_base & (c != 0), zero, out_im)
    return make_complex(out_re, out_im, x.dtype)
