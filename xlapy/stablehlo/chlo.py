"""chlo ops JAX emits, evaluated directly as OpDefs named `chlo.<op>` (CHLO dialect reference).

Element-wise ones are table rows of `xlapy.ops.elementwise` (compute dtype, DAZ/FTZ as the
CPU backend); special functions follow `scipy.special` (XLA's own polynomial approximations
differ by a few ulps in f32). `chlo.erf` and `chlo.tan` import as the stablehlo/XLA ops of
the same name. `top_k`, `ragged_dot` and `scan` live in `chlo_ops`; the broadcasting binary
ops (`chlo.broadcast_add`, ...) and `chlo.constant_like` decompose at import (`chlo_import`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.special

from xlapy.ops import complex_chlo, complex_xla, erfcx_cheb, lgamma_series
from xlapy.ops.elementwise import (
    COMPLEX,
    FLOAT,
    INT,
    SINT,
    UINT,
    binary,
    flush,
    from_bits,
    make_complex,
    to_bits,
    unary,
    wrap_int,
)
from xlapy.ops.elementwise_unary import in_f64
from xlapy.types import ElementType

_FC = FLOAT | COMPLEX


def _digamma(x: np.ndarray) -> np.ndarray:
    """psi(x); NaN at the poles (non-positive integers), as XLA's chlo decomposition."""
    out = scipy.special.digamma(x)
    return np.where((x <= 0) & (x == np.floor(x)), np.nan, out)  # type: ignore[no-any-return]


def _lgamma(x: np.ndarray) -> np.ndarray:
    """log |Gamma(x)| (XLA's lgamma is the log of the absolute value); +inf at -inf, as C's
    lgamma and XLA (scipy's gammaln gives -inf); -log|x| below 2^-60, where scipy's
    overflows (inf at subnormal x) and the next term, -0.577 x, is below an ulp."""
    with np.errstate(divide="ignore"):
        out = scipy.special.gammaln(x)
        out = np.where(np.abs(x) < 2.0 ** -60, -np.log(np.abs(x)), out)
        if x.dtype == np.float64:  # 9 ulp (unbounded at 1 - 2^-53) on [0.5, 2.5]: series
            out = lgamma_series.lgamma(x, out)
    return np.where(x == -np.inf, np.inf, out).astype(out.dtype)  # type: ignore[no-any-return]


def _erf_inv(x: np.ndarray) -> np.ndarray:
    """scipy's erfinv; f64 above |x| = 0.7 with a Newton step on erfc (ops/erfcx_cheb.py,
    as the cpu lowering: 3 ulp -> 2). erf_inv(-0) is -0 (scipy: +0; XLA's p x: -0)."""
    out = np.where(x == 0, x, scipy.special.erfinv(x))
    if x.dtype == np.float64:
        up = np.abs(x) > 0.7
        if up.any():
            out[up] = np.where(np.abs(x[up]) < 1, erfcx_cheb.newton_upper(out[up], x[up]),
                               out[up])
    return out  # type: ignore[no-any-return]


def _polygamma(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    """psi^(n)(x); NaN for a non-integer or negative order `n`, as XLA."""
    ok = (n == np.floor(n)) & (n >= 0)
    safe_n = np.where(ok, n, 0)
    out = np.where(safe_n == 0, _digamma(x), scipy.special.polygamma(safe_n.astype(np.int64), x))
    return np.where(ok, out, np.nan).astype(x.dtype)  # type: ignore[no-any-return]


def _zeta(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The Hurwitz zeta function sum_k (k + q)^-x."""
    return scipy.special.zeta(x, q)  # type: ignore[no-any-return]


def _next_after(x: np.ndarray, y: np.ndarray, et: ElementType) -> np.ndarray:
    """XLA's decomposition (chlo legalization) step for step: integer steps on the stored
    bits, zero tests on the magnitude bits; only `x == y` is a float compare, so with the
    CPU's DAZ (the ftz denormal mode) a denormal x equal to a zero y gives y (XLA: nextafter
    of 1e-40 towards 0 is 0, towards -inf 9.9998e-41)."""
    ux, uy = to_bits(x, et), to_bits(y, et)
    sign = np.uint64(1 << (et.bits - 1))
    ax, ay = ux & ~sign, uy & ~sign
    wide = np.float64 if et.bits == 64 else np.float32  # as the CPU compares them
    xf, yf = (flush(v.astype(wide)) for v in (x, y))
    away = (ax <= ay) & ((ux & sign) == (uy & sign))  # the magnitude grows
    step = np.where(away, ux + np.uint64(1), ux - np.uint64(1))
    out = np.where(ax == 0, np.where(ay == 0, uy, (uy & sign) | np.uint64(1)), step)
    out = np.where(xf == yf, uy, out)
    res = from_bits(out, et)
    return np.where(np.isnan(xf) | np.isnan(yf), np.array(np.nan).astype(et.dtype), res)  # type: ignore[no-any-return]


def _mulhi(a: np.ndarray, b: np.ndarray, et: ElementType) -> np.ndarray:
    """The high half of the double-width product (chlo.mulhi), signed or unsigned."""
    if et.bits <= 32:
        wide = a.astype(np.int64) * b.astype(np.int64) if et.is_signed else \
            a.astype(np.uint64) * b.astype(np.uint64)
        return wrap_int(wide >> (et.bits if et.is_signed else np.uint64(et.bits)), et)
    ua = a.view(np.uint64)
    ub = b.view(np.uint64)
    m32 = np.uint64(0xFFFF_FFFF)
    s32 = np.uint64(32)
    al, ah, bl, bh = ua & m32, ua >> s32, ub & m32, ub >> s32
    ll = al * bl
    lh = al * bh
    hl = ah * bl
    hh = ah * bh
    mid = (ll >> s32) + (lh & m32) + (hl & m32)
    hi = hh + (lh >> s32) + (hl >> s32) + (mid >> s32)
    if et.is_signed:
        hi = hi - np.where(a < 0, ub, np.uint64(0)) - np.where(b < 0, ua, np.uint64(0))
        return hi.view(np.int64)  # type: ignore[no-any-return]
    return hi  # type: ignore[no-any-return]


def _is_inf(x: np.ndarray) -> np.ndarray:
    return np.isinf(x.astype(np.float32))  # type: ignore[no-any-return]


def _is_neg_inf(x: np.ndarray) -> np.ndarray:
    return np.isneginf(x.astype(np.float32))  # type: ignore[no-any-return]


def _is_pos_inf(x: np.ndarray) -> np.ndarray:
    return np.isposinf(x.astype(np.float32))  # type: ignore[no-any-return]


def _conj(x: np.ndarray) -> np.ndarray:
    return np.conj(x)  # type: ignore[no-any-return]


def _square(x: np.ndarray, et: ElementType) -> np.ndarray:
    """x * x; complex as XLA's chlo decomposition: (re - im)(re + im) (0 where |re| = |im|
    and re is finite) + i 2 (re im), each step rounded and flushed (no inf - inf:
    square(-inf - 3.4e38i) is inf + inf i)."""
    if et.is_integer:
        return wrap_int(x.astype(np.int64) * x.astype(np.int64), et) if et.bits < 64 else x * x
    if et.is_complex:
        re, im = x.real, x.imag
        with np.errstate(all="ignore"):
            out_re = np.where(np.isfinite(re) & (np.abs(re) == np.abs(im)), re.dtype.type(0),
                              flush(re - im) * flush(re + im))
            return make_complex(out_re, flush(re * im) * re.dtype.type(2), x.dtype)
    return x * x  # type: ignore[no-any-return]


def _sinh_cosh(sub: bool) -> Any:
    """sinh / cosh; complex: XLA's exp(z - ln 2) -+ exp(-ln 2 - z) with XLA's complex exp
    (ops/complex_xla.exp; not numpy's: XLA's real part of sinh(1e-8 + 0.06i) in f32 is 0,
    numpy's 1e-8)."""
    def f(x: np.ndarray) -> np.ndarray:
        if x.dtype.kind != "c":
            return in_f64(np.sinh if sub else np.cosh)(x)  # type: ignore[no-any-return]
        ln2 = x.dtype.type(complex(-math.log(2), 0))
        with np.errstate(all="ignore"):
            p, m = complex_xla.exp(flush(x + ln2)), complex_xla.exp(flush(ln2 - x))
            return p - m if sub else p + m  # type: ignore[no-any-return]
    return f


def _pred(t: ElementType) -> ElementType:
    return ElementType.PRED


_DOC = "chlo.{0}: CHLO dialect §{0}; {1}."
for _name, _types, _fn, _what in (
        ("sinh", _FC, _sinh_cosh(True), "hyperbolic sine"),
        ("cosh", _FC, _sinh_cosh(False), "hyperbolic cosine"),
        ("asin", _FC, in_f64(np.arcsin), "inverse sine"),
        ("acos", _FC, in_f64(np.arccos), "inverse cosine"),
        ("atan", _FC, in_f64(np.arctan), "inverse tangent"),
        ("asinh", _FC, in_f64(np.arcsinh), "inverse hyperbolic sine"),
        ("acosh", _FC, in_f64(np.arccosh), "inverse hyperbolic cosine"),
        ("atanh", _FC, in_f64(np.arctanh), "inverse hyperbolic tangent"),
        ("erfc", FLOAT, in_f64(scipy.special.erfc), "complementary error function"),
        ("erf_inv", FLOAT, in_f64(_erf_inv), "inverse error function"),
        ("lgamma", FLOAT, in_f64(_lgamma), "log |Gamma|"),
        ("digamma", FLOAT, _digamma, "psi = Gamma'/Gamma"),
        ("bessel_i1e", FLOAT, scipy.special.i1e, "exponentially scaled Bessel I1")):
    unary(f"chlo.{_name}", _types, complex_chlo.dispatch(_name, _fn),
          doc=_DOC.format(_name, _what))

unary("chlo.square", INT | _FC, _square, typed=True,
      doc=_DOC.format("square", "x * x (wrapping for integers)"))
unary("chlo.conj", _FC, _conj, raw=True, doc=_DOC.format("conj", "complex conjugate"))
for _name, _fn in (("is_inf", _is_inf), ("is_neg_inf", _is_neg_inf),
                   ("is_pos_inf", _is_pos_inf)):
    unary(f"chlo.{_name}", FLOAT, _fn, raw=True, result_type=_pred,
          doc=_DOC.format(_name, "infinity test on the stored value"))
binary("chlo.polygamma", FLOAT, _polygamma, doc=_DOC.format("polygamma", "psi^(n)(x)"))
binary("chlo.zeta", FLOAT, _zeta, doc=_DOC.format("zeta", "Hurwitz zeta(x, q)"))
binary("chlo.next_after", FLOAT, _next_after, raw=True, typed=True,
       doc=_DOC.format("next_after", "nextafter on the stored bits (no flushing)"))
binary("chlo.mulhi", SINT | UINT, _mulhi, raw=True, typed=True,
       doc=_DOC.format("mulhi", "high half of the double-width integer product"))

from xlapy.stablehlo import chlo_ops  # noqa: E402,F401
