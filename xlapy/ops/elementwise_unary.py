"""Unary element-wise ops (spec §abs ... §tanh, plus XLA's erf) as table rows.

Rows compute in the compute dtype with XLA CPU's denormal flushing (see `elementwise`);
`raw` rows (negate, abs of reals, real/imag, is_finite, not, popcnt, clz) work on the stored
bits, as XLA's CPU code does, so they keep denormals.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.special

from xlapy.ops import libm
from xlapy.ops.elementwise import (
    BOOL,
    COMPLEX,
    FLOAT,
    INT,
    SINT,
    flush,
    from_bits,
    make_complex,
    to_bits,
    to_compute,
    unary,
    wrap_int,
)
from xlapy.ops.fma import two_prod
from xlapy.types import ElementType

_FC = FLOAT | COMPLEX


def _abs(x: np.ndarray, et: ElementType) -> np.ndarray:
    """abs: integers wrap (|INT_MIN| = INT_MIN); complex gives the component type."""
    if et.is_complex:
        c = to_compute(x, et)
        return flush(np.abs(c))
    if et.is_integer:
        return wrap_int(np.abs(x.astype(np.int64)), et)
    return np.abs(x)


def _negate(x: np.ndarray, et: ElementType) -> np.ndarray:
    if et.is_integer:
        return wrap_int(-x.astype(np.int64), et)
    return -x


def _sign(x: np.ndarray) -> np.ndarray:
    """-1/0/+1 keeping signed zeros and NaN; complex: XLA's (re / |z|, im / |z|), each part
    divided by the real |z| (one rounding; an infinite part gives NaN + 0i, as XLA), z itself
    where |z| is 0."""
    if x.dtype.kind == "c":
        a = np.abs(x)
        with np.errstate(all="ignore"):
            q = make_complex(x.real / a, x.imag / a, x.dtype)
        return np.where(a == 0, x, q)  # type: ignore[no-any-return]
    out = np.sign(x)
    if x.dtype.kind == "f":
        keep = np.abs(out) != 1  # zeros (np.sign drops the sign of -0) and NaN
        if keep.any():
            out[keep] = x[keep]
    return out  # type: ignore[no-any-return]


def _round_afz(x: np.ndarray) -> np.ndarray:
    """Round half away from zero: round-half-even, then move the ties rint took toward zero
    (no x + 0.5: 0.49999997 + 0.5 rounds to 1)."""
    r = np.rint(x)
    d = np.subtract(x, r)
    np.abs(d, out=d)
    ties = d == 0.5
    if ties.any():
        xt = x[ties]
        r[ties] = np.trunc(xt) + np.sign(xt)
    return r  # type: ignore[no-any-return]


def _cbrt(x: np.ndarray) -> np.ndarray:
    """Real cube root; complex: the principal root |z|^(1/3) e^(i arg(z)/3) (spec §cbrt;
    XLA itself rejects complex cbrt)."""
    if x.dtype.kind != "c":
        y = libm.wide("cbrt", x)  # the C library's, as the cpu kernels (not NumPy's)
        return cbrt_newton(x, y) if x.dtype == np.float64 else y
    r, th = np.cbrt(np.abs(x)), np.angle(x) / 3
    return make_complex(r * np.cos(th), r * np.sin(th), x.dtype)


def cbrt_newton(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """f64 cbrt within 1 ulp: one Newton step y - (y^3 - x) / (3 y^2) on libm's y (glibc's
    cbrt is 2 ulp off at times), with y^3 - x exact but for its smallest term (y^2 = a + al,
    a y = p + pl by exact products; p - x is exact, p and x being that close), so the only
    rounding that matters is the last. |x| below 2^-600 or above 2^900 is scaled by 2^+-600
    (y by 2^+-200) first: the low parts stay normal, y^3 stays finite. The cpu backend does
    the same with FMAs (backends/cpu/elementwise_libm.py)."""
    with np.errstate(all="ignore"):
        ax = np.abs(x)
        up, down = ax < 2.0 ** -600, ax > 2.0 ** 900
        xs = np.where(up, x * 2.0 ** 600, np.where(down, x * 2.0 ** -600, x))
        ys = np.where(up, y * 2.0 ** 200, np.where(down, y * 2.0 ** -200, y))
        a, al = two_prod(ys, ys)
        p, pl = two_prod(a, ys)
        y1 = ys - (((p - xs) + pl) + al * ys) / (3.0 * a)
        y1 = np.where(up, y1 * 2.0 ** -200, np.where(down, y1 * 2.0 ** 200, y1))
    return np.where(np.isfinite(x) & (x != 0), y1, y)  # type: ignore[no-any-return]


def _rsqrt(x: np.ndarray) -> np.ndarray:
    s = np.sqrt(x)
    return np.divide(np.ones((), x.dtype), s, out=s)  # type: ignore[no-any-return]


def in_f64(fn: Any) -> Any:
    """`fn` on f32 evaluated in float64 and rounded once: correctly rounded save for rare
    double-rounding ties, on every CPU (numpy's f32 exp, log, sin, tan, tanh, expm1, log1p
    are SIMD approximations within 2-3 ulp on AVX-512 machines; ulp table:
    test_ulp_table.py). Complex and f64 values pass through."""
    def f(x: np.ndarray) -> np.ndarray:
        if x.dtype == np.float32:
            return fn(x.astype(np.float64)).astype(np.float32)  # type: ignore[no-any-return]
        return fn(x)  # type: ignore[no-any-return]

    return f


def _logistic(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) (XLA's form), and exp(x) below -80 (f32; -700 f64), where the two
    agree to the last bit until exp(-x) overflows; past that XLA's form gives 0 where the
    true value is subnormal (the same 0 once flushed in the ftz mode)."""
    one = np.ones((), x.dtype)
    e = np.exp(np.negative(x))
    np.add(one, e, out=e)
    out = np.divide(one, e, out=e)
    if x.dtype.kind == "f":
        low = x < (-700.0 if x.dtype == np.float64 else -80.0)
        if low.any():
            out[low] = np.exp(x[low])
    return out  # type: ignore[no-any-return]


def _erf(x: np.ndarray) -> np.ndarray:
    return scipy.special.erf(x).astype(x.dtype)  # type: ignore[no-any-return]


def _real(x: np.ndarray, et: ElementType) -> np.ndarray:
    return x.real.copy() if et.is_complex else x


def _imag(x: np.ndarray, et: ElementType) -> np.ndarray:
    return x.imag.copy() if et.is_complex else np.zeros_like(x)


def _not(x: np.ndarray, et: ElementType) -> np.ndarray:
    if et.is_pred:
        return ~x
    return from_bits(~to_bits(x, et), et)


def _popcnt(x: np.ndarray, et: ElementType) -> np.ndarray:
    """Population count; XLA CPU counts sub-byte signed values sign-extended to 8 bits."""
    if et.is_signed and et.bits < 8:
        return wrap_int(np.bitwise_count(x.astype(np.int8).view(np.uint8)), et)
    return from_bits(np.bitwise_count(to_bits(x, et)).astype(np.uint64), et)


def _clz(x: np.ndarray, et: ElementType) -> np.ndarray:
    u = to_bits(x, et)
    length = np.zeros(u.shape, np.uint64)
    for i in range(et.bits):
        length = np.where((u >> np.uint64(i)) != 0, np.uint64(i + 1), length)
    return from_bits(np.uint64(et.bits) - length, et)


def _component(t: ElementType) -> ElementType:
    return t.component_type


# ---- rows (spec order) ---------------------------------------------------------------------
unary("abs", SINT | FLOAT | COMPLEX, _abs, raw=True, typed=True, result_type=_component,
      doc="stablehlo.abs: spec §abs; XLA Abs (complex -> component type).")
unary("cbrt", _FC, _cbrt, ftz_real=False, doc="stablehlo.cbrt: spec §cbrt; XLA Cbrt.")
unary("ceil", FLOAT, np.ceil, ftz_real=False, doc="stablehlo.ceil: spec §ceil; XLA Ceil.")
unary("cosine", _FC, in_f64(np.cos), daz_real=False, ftz_real=False,
      doc="stablehlo.cosine: spec §cosine; XLA Cos.")
unary("count_leading_zeros", INT, _clz, raw=True, typed=True,
      doc="stablehlo.count_leading_zeros: spec §count_leading_zeros; XLA Clz.")
unary("exponential", _FC, in_f64(np.exp), daz_real=False,
      doc="stablehlo.exponential: spec §exponential; XLA Exp.")
unary("exponential_minus_one", _FC, in_f64(np.expm1), ftz_real=False,
      doc="stablehlo.exponential_minus_one: spec §exponential_minus_one; XLA Expm1.")
unary("floor", FLOAT, np.floor, ftz_real=False, doc="stablehlo.floor: spec §floor; XLA Floor.")
unary("imag", _FC, _imag, raw=True, typed=True, result_type=_component,
      doc="stablehlo.imag: spec §imag; XLA Imag (zeros for real operands).")
unary("is_finite", FLOAT, np.isfinite, raw=True, result_type=lambda t: ElementType.PRED,
      doc="stablehlo.is_finite: spec §is_finite; XLA IsFinite.")
unary("log", _FC, in_f64(np.log), ftz_real=False, doc="stablehlo.log: spec §log; XLA Log.")
unary("log_plus_one", _FC, in_f64(np.log1p), ftz_real=False,
      doc="stablehlo.log_plus_one: spec §log_plus_one; XLA Log1p.")
unary("logistic", _FC, in_f64(_logistic), daz_real=False,
      doc="stablehlo.logistic: spec §logistic; XLA Logistic.")
unary("negate", INT | FLOAT | COMPLEX, _negate, raw=True, typed=True,
      doc="stablehlo.negate: spec §negate; XLA Neg (wraps; flips the sign bit of floats).")
unary("not", BOOL | INT, _not, raw=True, typed=True, doc="stablehlo.not: spec §not; XLA Not.")
unary("popcnt", INT, _popcnt, raw=True, typed=True,
      doc="stablehlo.popcnt: spec §popcnt; XLA PopulationCount.")
unary("real", _FC, _real, raw=True, typed=True, result_type=_component,
      doc="stablehlo.real: spec §real; XLA Real.")
unary("round_nearest_afz", FLOAT, _round_afz, daz_real=False, ftz_real=False,
      doc="stablehlo.round_nearest_afz: spec §round_nearest_afz; XLA Round.")
unary("round_nearest_even", FLOAT, np.rint, daz_real=False, ftz_real=False,
      doc="stablehlo.round_nearest_even: spec §round_nearest_even; XLA RoundNearestEven.")
unary("rsqrt", _FC, _rsqrt, ftz_real=False, doc="stablehlo.rsqrt: spec §rsqrt; XLA Rsqrt.")
unary("sign", SINT | FLOAT | COMPLEX, _sign, ftz_real=False,
      doc="stablehlo.sign: spec §sign; XLA Sign.")
unary("sine", _FC, in_f64(np.sin), ftz_real=False, doc="stablehlo.sine: spec §sine; XLA Sin.")
unary("sqrt", _FC, np.sqrt, ftz_real=False, doc="stablehlo.sqrt: spec §sqrt; XLA Sqrt.")
unary("tan", _FC, in_f64(np.tan), ftz_real=False, doc="stablehlo.tan: spec §tan; XLA Tan.")
unary("tanh", _FC, in_f64(np.tanh), ftz_real=False, doc="stablehlo.tanh: spec §tanh; XLA Tanh.")
unary("erf", FLOAT, _erf, ftz_real=False,
      doc="XLA erf (HLO `erf`, chlo.erf): seed 000 §Element-wise unary.")
