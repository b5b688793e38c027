"""Max ulp error per function and dtype against a correctly rounded reference, on both
backends, printed as a table and bounded (issue 15).

References: f32, the float64 numpy/scipy result rounded once to f32 (float64 carries 29 more
bits, so the rounding is correct save for ties this sample does not meet); f64, mpmath at 60
digits rounded to f64 (mpmath is a test dependency for this reason alone).
Samples (fixed seeds): f32, a stride through all 2^32 bit patterns (every sign, binade, zero,
subnormal, inf and NaN; 2^15 values) plus 2^14 values in each function's working range; f64,
96 values per function (specials, a log-uniform spread, the working range). Runs in the `ieee`
denormal mode so that the reference needs no flushing: the bounds are IEEE accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import mpmath
import numpy as np
import pytest
import scipy.special

from tests.unit.backends.cpu.util import module, op
from xlapy import denormal
from xlapy.backends.cpu import CpuBackend
from xlapy.backends.interpreter import InterpreterBackend
from xlapy.stablehlo.check import UNBOUNDED, ulp_difference
from xlapy.types import ElementType as ET
from xlapy.types import Shape

mpmath.mp.prec = 200


def _mp_real(f):  # noqa: ANN001, ANN202
    """An mpmath function of floats to a float64, NaN where the result is not real."""
    def g(*xs: float) -> float:
        if any(math.isnan(x) for x in xs):
            return math.nan
        try:
            r = f(*(mpmath.mpf(x) for x in xs))
        except (ValueError, ZeroDivisionError, OverflowError):
            return math.nan
        if isinstance(r, mpmath.mpc):
            if r.imag != 0:
                return math.nan
            r = r.real
        return float(r) if mpmath.isfinite(r) else float(r)
    return g


def _mp_pow(x: mpmath.mpf, y: mpmath.mpf) -> mpmath.mpf:
    if x < 0 and y != mpmath.floor(y):
        return mpmath.mpf("nan")
    if x == 0:
        return mpmath.mpf(0) if y > 0 else mpmath.mpf(1) if y == 0 else mpmath.inf
    return mpmath.power(x, y)


def _mp_lgamma(x: mpmath.mpf) -> mpmath.mpf:
    if x <= 0 and x == mpmath.floor(x):
        return mpmath.inf
    return mpmath.log(abs(mpmath.gamma(x)))


#: opcode -> (float64 reference for f32, mpmath reference for f64, working range).
FUNCTIONS = {
    "exponential": (np.exp, mpmath.exp, (-90, 90)),
    "exponential_minus_one": (np.expm1, mpmath.expm1, (-5, 5)),
    "log": (np.log, mpmath.log, (1e-3, 1e3)),
    "log_plus_one": (np.log1p, mpmath.log1p, (-0.9, 5)),
    "sine": (np.sin, mpmath.sin, (-10, 10)),
    "cosine": (np.cos, mpmath.cos, (-10, 10)),
    "tan": (np.tan, mpmath.tan, (-10, 10)),
    "tanh": (np.tanh, mpmath.tanh, (-10, 10)),
    "logistic": (lambda x: 1 / (1 + np.exp(-x)), lambda x: 1 / (1 + mpmath.exp(-x)), (-20, 20)),
    "cbrt": (np.cbrt, lambda x: mpmath.sign(x) * mpmath.cbrt(abs(x)), (-100, 100)),
    "sqrt": (np.sqrt, mpmath.sqrt, (0, 100)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), lambda x: 1 / mpmath.sqrt(x), (0, 100)),
    "erf": (scipy.special.erf, mpmath.erf, (-5, 5)),
    "chlo.erf_inv": (scipy.special.erfinv, mpmath.erfinv, (-1, 1)),
    "chlo.lgamma": (lambda x: np.where(x == -np.inf, np.inf, scipy.special.gammaln(x)),
                    _mp_lgamma, (0.1, 30)),  # lgamma(-inf) = +inf (C; scipy: -inf)
    "chlo.acos": (np.arccos, mpmath.acos, (-1, 1)),
    "chlo.asin": (np.arcsin, mpmath.asin, (-1, 1)),
    "chlo.atan": (np.arctan, mpmath.atan, (-20, 20)),
    "chlo.acosh": (np.arccosh, mpmath.acosh, (1, 100)),
    "chlo.asinh": (np.arcsinh, mpmath.asinh, (-100, 100)),
    "chlo.atanh": (np.arctanh, mpmath.atanh, (-1, 1)),
    "chlo.sinh": (np.sinh, mpmath.sinh, (-20, 20)),
    "chlo.cosh": (np.cosh, mpmath.cosh, (-20, 20)),
    "power": (np.power, _mp_pow, (-10, 10)),
    "atan2": (np.arctan2, mpmath.atan2, (-10, 10)),
}
BINARY = {"power", "atan2"}


def _inputs(name: str, t: ET, rng: np.random.Generator) -> list[np.ndarray]:
    lo, hi = FUNCTIONS[name][2]
    nargs = 2 if name in BINARY else 1
    if t is ET.F32:
        sweep = (np.arange(2 ** 15, dtype=np.uint64) * 131071 % 2 ** 32).astype(np.uint32)
        xs = [np.concatenate([sweep.view(np.float32), rng.uniform(lo, hi, 2 ** 14)
                              .astype(np.float32)]) for _ in range(nargs)]
    else:
        special = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, math.inf, -math.inf, math.nan, 1e-310,
                   -1e-310, 1e-300, 1e300, 700.0, -700.0, 0.1]
        spread = np.exp(rng.uniform(-700, 700, 30)) * rng.choice([-1, 1], 30)
        xs = [np.concatenate([special, spread, rng.uniform(lo, hi, 50)]) for _ in range(nargs)]
    if nargs == 2:  # pairs: shuffled, plus small integer exponents of negative bases
        xs[1] = rng.permutation(xs[1])
        k = xs[0].size // 4
        xs[0][:k] = -np.abs(rng.uniform(0.1, 10, k))
        xs[1][:k] = rng.integers(-12, 13, k)
    return [x.astype(t.dtype) for x in xs]


def _reference(name: str, t: ET, xs: list[np.ndarray]) -> np.ndarray:
    if t is ET.F32:
        with np.errstate(all="ignore"):
            return np.asarray(FUNCTIONS[name][0](*(x.astype(np.float64) for x in xs))
                              ).astype(np.float32)
    f = _mp_real(FUNCTIONS[name][1])
    out = np.array([f(*map(float, v)) for v in zip(*xs)], np.float64)
    # IEEE special cases (an infinite or zero argument) are exact in libm: numpy's float64
    # function gives them (mpmath has no signed zero and complex answers at infinity).
    edge = np.zeros(out.shape, bool)
    for x in xs:
        edge |= ~np.isfinite(x) | (x == 0)
    with np.errstate(all="ignore"):
        out[edge] = np.asarray(FUNCTIONS[name][0](*(x[edge] for x in xs)), np.float64)
    return out


def _run(name: str, t: ET, xs: list[np.ndarray]) -> dict[str, np.ndarray]:
    mod = module([Shape.array(t, xs[0].shape)] * len(xs), lambda c, p: op(c, name, p))
    opts = {"denormal": denormal.IEEE}
    with np.errstate(all="ignore"):
        return {"interpreter": np.asarray(InterpreterBackend().compile(mod, opts).run(xs)),
                "cpu": np.asarray(CpuBackend().compile(mod, opts).run(xs))}


def _max_ulp(got: np.ndarray, ref: np.ndarray) -> tuple[int, int]:
    """(max ulp difference over pairs with finite ulp distance, count of pairs whose
    non-finite values differ: an inf or NaN where the reference has another value)."""
    d = ulp_difference(got, ref)
    bad = d == UNBOUNDED
    return int(d[~bad].max(initial=0)), int(bad.sum())


#: What the table must stay within: (function, dtype, backend) -> max ulp; every function
#: not listed is within 1 ulp. f32 functions that were over (sin/cos/tan, logistic, erf,
#: sinh, asin/acos, erf_inv, lgamma on cpu; expm1, log1p, sin/cos/tan, tanh, logistic and the
#: chlo functions on the interpreter, whose numpy f32 loops are SIMD approximations on
#: AVX-512 machines) now evaluate in f64 and round once; f64 sin/cos/tan on cpu use
#: double-doubles (trig_dd.py; tan measured 2); f64 cbrt takes a Newton step on glibc's
#: (which measured 2; 3 on a 40k sample). Why each exception is there:
#: - cpu tanh 4 (f32): a (4, 4) rational in f32 like XLA's (whose own measures 5). A (4, 5)
#:   rational evaluated in f64 is within 1 ulp (measured), but it costs twice the f32 form
#:   and the GELU chain benchmark (seven tanh) went from 0.48 to 0.89 of XLA's time
#:   (issue 14 needs <= 0.5): speed is the constraint.
#: - cpu tanh 2 (f64): one expm1 series, -m / (2 + m), where a series below 0.5 and
#:   1 - 2 / (e^2x + 1) above measured 1 at 1.5x the time (XLA's rational measures 6); the
#:   last bit goes where m = expm1(-2|x|) rounds in a lower binade than tanh (near 0.17).
#: - chlo erf_inv f64, 2 on both: Giles' double-precision polynomials (cpu; XLA's, with w made
#:   accurate near 1) or scipy's erfinv (interpreter), then one Newton step: on erf up to
#:   |x| = 0.7 (cpu: 1 ulp there), on erfc = exp(-x^2) erfcx above (ops/erfcx_cheb.py, both
#:   backends). The step's residual carries the erfcx fit's and exp's roundings (~1 ulp of
#:   erfc) into x1 (about 1 case in 1000 at 2 ulp on mpmath samples).
#: - lgamma f64, not bounded here because this sample measures 1: for x > 0 both backends
#:   compute ops/lgamma_series.py (Taylor series around 1, the minimum and 2, shifted there
#:   by the recurrence below 0.5 and up to 32, Stirling beyond): 1 ulp on [0.5, 2.5], 2
#:   where a log of the shift adds its rounding (2.5-3.5) and in Stirling's (log x - 1) (a
#:   few in 1000 above 32). Below 0 the reflection formula (cpu: Lanczos, XLA's; the
#:   interpreter: scipy) cancels at lgamma's zeros there (-2.457..., -2.747...): 960 / 76
#:   ulp near -2.745, unbounded at the zeros (a real limit of log(pi / |sin(pi x)|) -
#:   lgamma(1 - x) in doubles: both terms ~1, their difference ~0).
BOUNDS: dict[tuple[str, str, str], int] = {
    ("tanh", "f32", "cpu"): 4, ("tanh", "f64", "cpu"): 2,
    ("chlo.erf_inv", "f64", "cpu"): 2, ("chlo.erf_inv", "f64", "interpreter"): 2,
}
#: (function, dtype, backend) -> (which inputs the bound covers, why): outside it the error
#: is printed, not bounded.
WHERE: dict[tuple[str, str, str], Callable[[list[np.ndarray], np.ndarray], np.ndarray]] = {}
#: (function, dtype, backend) -> allowed count of non-finite mismatches, with the reason.
NONFINITE: dict[tuple[str, str, str], int] = {}

TABLE: list[str] = []


@pytest.mark.parametrize("t", [ET.F32, ET.F64], ids=str)
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_ulp_table(name: str, t: ET) -> None:
    rng = np.random.default_rng(15)
    xs = _inputs(name, t, rng)
    ref = _reference(name, t, xs)
    got = _run(name, t, xs)
    row = []
    fails = []
    for backend, g in got.items():
        worst, nonfinite = _max_ulp(g, ref)
        row.append(f"{backend} {worst}" + (f" ({nonfinite} non-finite)" if nonfinite else ""))
        key = (name, str(t), backend)
        where = WHERE.get(key)
        if where is not None:
            keep = where(xs, ref)
            xs, g, ref_b = [x[keep] for x in xs], g[keep], ref[keep]
            worst, nonfinite = _max_ulp(g, ref_b)
            row[-1] += f" [{worst} where covered]"
        else:
            ref_b = ref
        if worst > BOUNDS.get(key, 1) or nonfinite > NONFINITE.get(key, 0):
            d = ulp_difference(g, ref_b)
            k = int(np.argmax(np.where(d == UNBOUNDED, np.uint64(0), d))) if not nonfinite \
                else int(np.flatnonzero(d == UNBOUNDED)[0])
            fails.append(f"{backend}: {worst} ulp, {nonfinite} non-finite; e.g. x="
                         f"{[x[k] for x in xs]} got {g[k]} ref {ref_b[k]}")
    print(f"\nulp {name:24s} {str(t):4s} " + " | ".join(row))
    assert not fails, fails


def test_log_plus_one_of_a_large_f32_is_finite_on_both_backends() -> None:
    """log1p(4.7e36) overflowed to inf on cpu (lg * x / d: lg * x passes f32's max)."""
    x = np.array([4.7e36, 3e38, -0.5], np.float32)
    got = _run("log_plus_one", ET.F32, [x])
    for g in got.values():
        assert np.array_equal(g, np.log1p(x.astype(np.float64)).astype(np.float32))


def test_sine_of_huge_arguments() -> None:
    """Beyond 2^20 the cpu reduction is Payne-Hanek (trig_reduce.py): sin(1e22) =
    -0.8522008497671888 (the classic test), f32's and f64's largest values."""
    x = np.array([1e22, 1.7976931348623157e308, -1e300, 2.0 ** 1000, 1e6], np.float64)
    ref = _reference("sine", ET.F64, [x])
    assert ref[0] == -0.8522008497671888
    for g in _run("sine", ET.F64, [x]).values():
        assert int(ulp_difference(g, ref).max()) <= 1
    x32 = np.array([3.4028235e38, 1e20, -1.1864192e20, 2.4189437e20], np.float32)
    ref32 = _reference("sine", ET.F32, [x32])
    for g in _run("sine", ET.F32, [x32]).values():
        assert int(ulp_difference(g, ref32).max()) <= 1


@pytest.mark.parametrize("name", ["sine", "cosine", "tan"])
@pytest.mark.parametrize("t", [ET.F32, ET.F64])
def test_huge_arguments_across_wide_vectors(name: str, t: ET) -> None:
    """Payne-Hanek on vectors wider than the target's registers runs a register's worth at
    a time (trig_reduce.reduce_wide): each lane's bits those of the lane computed alone
    (a one-element kernel), within 1 ulp, huge and small arguments mixed across 64 lanes."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-4, 4, 64) * 10.0 ** rng.integers(0, 30 if t is ET.F32 else 300, 64)
    x[::7] = rng.uniform(-3, 3, x[::7].size)
    x = x.astype(t.dtype)
    got = _run(name, t, [x])["cpu"]
    alone = np.array([_run(name, t, [x[i:i + 1]])["cpu"][0] for i in range(0, 64, 5)])
    np.testing.assert_array_equal(got[::5].copy().view(np.uint8), alone.view(np.uint8))
    assert int(ulp_difference(got, _reference(name, t, [x])).max()) <= 1


@pytest.mark.parametrize("name", ["sine", "cosine", "tan"])
def test_f64_trig_near_multiples_of_pi_over_2(name: str) -> None:
    """Doubles next to k pi/2 reduce to a tiny r whose relative accuracy needs more than a
    3-part pi/2 (113 bits): cos(11081.968085537996) (7055 pi/2 rounded) was 6 ulp off and
    tan 4 on cpu; now 4 parts and double-double sums (trig_dd.py)."""
    rng = np.random.default_rng(5)
    k = np.concatenate([[7055.0], np.round(rng.uniform(-2 ** 20, 2 ** 20, 300))])
    x = np.concatenate([k * (math.pi / 2), rng.uniform(-1e5, 1e5, 300)])
    ref = _reference(name, ET.F64, [x])
    for backend, g in _run(name, ET.F64, [x]).items():
        assert int(ulp_difference(g, ref).max()) <= 1, backend


def test_f64_erf_inv_near_one() -> None:
    """XLA's w = -log1p(-x^2) rounds x^2: cpu erf_inv(0.9999999926727005) was 490447 ulp
    off (XLA's too); w = -(log1p(-|x|) + log1p(|x|)) keeps Giles' 4 ulp up to 1, and the
    Newton step on erfc (ops/erfcx_cheb.py) makes it 2 on both backends."""
    rng = np.random.default_rng(9)
    y = np.concatenate([[0.9999999926727005, -(1 - 1e-15)], 1 - np.exp(rng.uniform(-36, -1, 300))])
    ref = _reference("chlo.erf_inv", ET.F64, [y])
    got = _run("chlo.erf_inv", ET.F64, [y])
    assert int(ulp_difference(got["cpu"], ref).max()) <= BOUNDS[("chlo.erf_inv", "f64", "cpu")]
    assert int(ulp_difference(got["interpreter"], ref).max()) <= 2


def test_f64_lgamma_near_its_zeros_and_minimum() -> None:
    """lgamma on [0.5, 2.5] within 1 ulp on both backends, elsewhere above 0 within 2: cpu
    (Lanczos) gave 8.9e-16 for lgamma(2), unbounded relative error near 1 and 2, 21 ulp at
    0.36, 70 at 2.63, 20 at 3.8; the interpreter (scipy) 9 ulp near 1, 3 elsewhere."""
    rng = np.random.default_rng(4)
    x = np.concatenate([[1.0, 2.0, 1 - 2.0 ** -53, 1 + 2.0 ** -52, 2 - 2.0 ** -52, 0.5, 2.5,
                         1.4616321449683622, 1.2, 1.75],
                        1 + rng.uniform(-1e-6, 1e-6, 100), 2 + rng.uniform(-1e-6, 1e-6, 100),
                        rng.uniform(0.5, 2.5, 300)])
    ref = _reference("chlo.lgamma", ET.F64, [x])
    for backend, g in _run("chlo.lgamma", ET.F64, [x]).items():
        assert int(ulp_difference(g, ref).max()) <= 1, backend
    x = np.concatenate([[0.3559876412495035, 2.63, 3.8, 1e-300, 5e-324, 3.5, 32.0, 1e300],
                        rng.uniform(0, 0.5, 200), rng.uniform(2.5, 3.5, 200),
                        rng.uniform(3.5, 100, 200), np.exp(rng.uniform(4.6, 700, 100))])
    ref = _reference("chlo.lgamma", ET.F64, [x])
    for backend, g in _run("chlo.lgamma", ET.F64, [x]).items():
        assert int(ulp_difference(g, ref).max()) <= 2, backend


def test_erf_inv_of_minus_zero_is_minus_zero() -> None:
    """erf_inv is odd: -0 gives -0 on both backends (the interpreter's scipy gave +0; the
    cpu lowering, XLA's p x, -0), in both denormal modes (a negative subnormal flushes
    to -0 under ftz)."""
    for t in (ET.F32, ET.F64):
        x = np.array([-0.0, 0.0, -1e-40 if t is ET.F32 else -1e-310], t.dtype)
        mod = module([Shape.array(t, x.shape)], lambda c, p: op(c, "chlo.erf_inv", p))
        for mode in denormal.MODES:
            for be in (InterpreterBackend(), CpuBackend()):
                got = np.asarray(be.compile(mod, {"denormal": mode}).run([x]))
                assert np.signbit(got).tolist() == [True, False, True], (t, mode, be)


def test_f32_lgamma_through_the_reflection() -> None:
    """f32 lgamma in f64 (passes/lgamma_wide.py): below 0.5 log(pi / |sin(pi x)|) -
    lgamma(1 - x) with sin(pi r) a polynomial on [0, 1/2] and one log for the Lanczos sum
    and the sine together, the Lanczos sum one fraction, log t itself: within half an ulp
    of scipy's f64 gammaln (but at its zeros, where neighbours of 1 and 2 take 0.502), on
    negative x, around 1 and 2 and up to 1e36."""
    import xlapy

    rng = np.random.default_rng(1)
    one, two = np.float32(2 ** -23), np.float32(2 ** -22)
    x = np.concatenate([rng.uniform(-30, 0.5, 1 << 16), rng.uniform(-3, 0.5, 1 << 16),
                        -np.arange(1, 20) + 1e-3, -np.arange(1, 20) - 1e-3,
                        np.linspace(0.5, 3, 1 << 16), np.exp(rng.uniform(4, 83, 1 << 12)),
                        1 + np.arange(-200, 200) * one, 2 + np.arange(-200, 200) * two]
                       ).astype(np.float32)
    x = x[(np.abs(x - np.round(x)) > 1e-6) | (x > 0)]
    n = x.size
    text = (f"func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{\n"
            f"  %y = chlo.lgamma %x : tensor<{n}xf32> -> tensor<{n}xf32>\n"
            f"  return %y : tensor<{n}xf32>\n}}")
    got = np.asarray(xlapy.compile(text, backend="cpu")(x)).astype(np.float64)
    ref = scipy.special.gammaln(x.astype(np.float64))
    fin = ref != 0
    ulp = np.abs(got - ref)[fin] / np.spacing(np.abs(ref[fin]).astype(np.float32))
    assert ulp.max() <= 0.51, (ulp.max(), x[fin][ulp.argmax()])
