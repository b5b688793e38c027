"""Complex chlo.asin / acos / asinh / acosh / atanh / atan as XLA computes them
(ops/complex_chlo.py) and chlo.sinh / cosh (exp(z - ln 2) -+ exp(-ln 2 - z) on XLA's
complex exp), on both backends: infinite, NaN, huge and tiny parts and the branch cuts (a
-0 imaginary part counts as positive, as in XLA). Expected values are jax.jit's (jaxlib
0.10, x86-64); non-finite and zero parts must match exactly, finite ones within ULP[op]
ulp (the inverse functions' real functions are correctly rounded here, XLA's
approximations there; sinh and cosh are XLA's to the bit)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy

inf, nan = np.inf, np.nan
#: op -> the ulp bound on finite nonzero parts (0: bit-exact).
ULP = {"asin": 4, "acos": 4, "asinh": 4, "acosh": 4, "atanh": 4, "atan": 4, "sinh": 0,
       "cosh": 0}

_INPUTS = [
    complex(inf, -0.0), complex(-inf, -0.0), complex(0.0, nan), complex(3e+38, nan),
    complex(nan, 0.0), complex(nan, 1.0), complex(-inf, nan), complex(-1.0, -0.0),
    complex(1.0, 1e-30), complex(1e+30, -1e-30), complex(-0.0, inf), complex(0.5, 0.25),
    complex(-2.0, 3.0), complex(nan, 3e+38), complex(-1.0, 1e-38),
]
_WANT = {
    ('asin', np.complex64): [
        complex(1.5707963705062866, inf), complex(-1.5707963705062866, inf), complex(nan, nan),
        complex(nan, 89.28999328613281), complex(nan, nan), complex(nan, nan), complex(nan, inf),
        complex(-1.5707963705062866, 0.0), complex(1.5707963705062866, 1.0000000036274937e-15),
        complex(1.5707963705062866, -69.77069854736328), complex(-0.0, inf),
        complex(0.5016088485717773, 0.2813960611820221),
        complex(-0.5706527233123779, 1.9833871126174927), complex(nan, nan),
        complex(-1.5707963705062866, 0.0),
    ],
    ('asin', np.complex128): [
        complex(1.5707963267948966, inf), complex(-1.5707963267948966, inf), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(nan, inf),
        complex(-1.5707963267948966, 0.0), complex(1.5707963267948957, 1e-15),
        complex(1.5707963267948966, -69.77069997038132), complex(-0.0, inf),
        complex(0.5016088532755009, 0.2813960562452928),
        complex(-0.5706527843210994, 1.9833870299165355), complex(nan, nan),
        complex(-1.5707963267948966, 1e-19),
    ],
    ('acos', np.complex64): [
        complex(0.0, -inf), complex(3.1415927410125732, -inf), complex(nan, nan),
        complex(nan, -89.28999328613281), complex(nan, nan), complex(nan, nan), complex(nan, -inf),
        complex(3.1415927410125732, -0.0), complex(1.0000000036274937e-15, -1.0000000036274937e-15),
        complex(0.0, 69.77069854736328), complex(1.5707963705062866, -inf),
        complex(1.0691875219345093, -0.2813960611820221),
        complex(2.141448974609375, -1.9833871126174927), complex(nan, nan),
        complex(3.1415927410125732, -0.0),
    ],
    ('acos', np.complex128): [
        complex(0.0, -inf), complex(3.141592653589793, -inf), complex(nan, nan), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(nan, -inf), complex(3.141592653589793, -0.0),
        complex(1e-15, -1e-15), complex(1.0000000000000001e-60, 69.77069997038132),
        complex(1.5707963267948966, -inf), complex(1.0691874735193958, -0.2813960562452928),
        complex(2.141449111115996, -1.9833870299165355), complex(nan, nan),
        complex(3.141592653589793, -1e-19),
    ],
    ('asinh', np.complex64): [
        complex(inf, -0.0), complex(-inf, -0.0), complex(nan, nan), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(-inf, nan),
        complex(-0.8813736438751221, -0.0), complex(0.8813736438751221, 7.071067777540908e-31),
        complex(69.77069854736328, -0.0), complex(inf, 1.5707963705062866),
        complex(0.4926757216453552, 0.22432845830917358),
        complex(-1.9686379432678223, 0.9646584987640381), complex(89.28999328613281, nan),
        complex(-0.8813736438751221, 0.0),
    ],
    ('asinh', np.complex128): [
        complex(inf, -0.0), complex(-inf, -0.0), complex(nan, nan), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(-inf, nan),
        complex(-0.8813735870195429, -0.0), complex(0.8813735870195429, 7.071067811865475e-31),
        complex(69.77069997038132, -1.0000000000000001e-60), complex(inf, 1.5707963267948966),
        complex(0.4926756834207705, 0.2243284526346675),
        complex(-1.9686379257930964, 0.9646585044076028), complex(nan, nan),
        complex(-0.8813735870195429, 7.071067811865475e-39),
    ],
    ('acosh', np.complex64): [
        complex(inf, 0.0), complex(inf, 3.1415927410125732), complex(nan, nan),
        complex(89.28999328613281, nan), complex(nan, nan), complex(nan, nan), complex(inf, nan),
        complex(0.0, 3.1415927410125732), complex(1.0000000036274937e-15, 1.0000000036274937e-15),
        complex(69.77069854736328, -0.0), complex(inf, 1.5707963705062866),
        complex(0.2813960611820221, 1.0691875219345093),
        complex(1.9833871126174927, 2.141448974609375), complex(nan, nan),
        complex(0.0, 3.1415927410125732),
    ],
    ('acosh', np.complex128): [
        complex(inf, 0.0), complex(inf, 3.141592653589793), complex(nan, nan), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(inf, nan), complex(0.0, 3.141592653589793),
        complex(1e-15, 1e-15), complex(69.77069997038132, -1.0000000000000001e-60),
        complex(inf, 1.5707963267948966), complex(0.2813960562452928, 1.0691874735193958),
        complex(1.9833870299165355, 2.141449111115996), complex(nan, nan),
        complex(1e-19, 3.141592653589793),
    ],
    ('atanh', np.complex64): [
        complex(0.0, 1.5707963705062866), complex(-0.0, 1.5707963705062866),
        complex(nan, -1.5707963705062866), complex(nan, -1.5707963705062866),
        complex(nan, 1.5707963705062866), complex(nan, 1.5707963705062866),
        complex(-0.0, -1.5707963705062866), complex(-inf, -0.0), complex(inf, 0.7853981852531433),
        complex(1.0000000031710769e-30, -1.5707963705062866), complex(0.0, 1.5707963705062866),
        complex(0.5003700256347656, 0.3143981695175171),
        complex(-0.14694665372371674, 1.338972568511963), complex(nan, 1.5707963705062866),
        complex(-inf, 0.0),
    ],
    ('atanh', np.complex128): [
        complex(0.0, 1.5707963267948966), complex(-0.0, 1.5707963267948966),
        complex(nan, -1.5707963267948966), complex(nan, -1.5707963267948966),
        complex(nan, 1.5707963267948966), complex(nan, 1.5707963267948966),
        complex(-0.0, -1.5707963267948966), complex(-inf, -0.0),
        complex(34.88534998519066, 0.7853981633974483),
        complex(9.999999999999999e-31, -1.5707963267948966), complex(0.0, 1.5707963267948966),
        complex(0.5003700000525311, 0.3143981432077165),
        complex(-0.14694666622552977, 1.3389725222944935), complex(nan, 1.5707963267948966),
        complex(-44.09569035716684, 0.7853981633974483),
    ],
    ('sinh', np.complex64): [
        complex(inf, 0.0), complex(-inf, 0.0), complex(nan, nan), complex(nan, nan),
        complex(nan, 0.0), complex(nan, nan), complex(nan, nan), complex(-1.175201177597046, 0.0),
        complex(1.175201177597046, 1.5430806502001273e-30), complex(inf, -inf), complex(nan, nan),
        complex(0.5048956871032715, 0.2789791226387024),
        complex(3.590564727783203, 0.5309211015701294), complex(nan, nan),
        complex(-1.175201177597046, 0.0),
    ],
    ('sinh', np.complex128): [
        complex(inf, 0.0), complex(-inf, 0.0), complex(nan, nan), complex(nan, nan),
        complex(nan, 0.0), complex(nan, nan), complex(nan, nan), complex(-1.1752011936438016, 0.0),
        complex(1.1752011936438016, 1.5430806348152441e-30), complex(inf, -inf), complex(nan, nan),
        complex(0.5048957143879951, 0.27897912835026156),
        complex(3.5905645899857794, 0.5309210862485197), complex(nan, nan),
        complex(-1.1752011936438016, 1.543080634815244e-38),
    ],
    ('cosh', np.complex64): [
        complex(inf, 0.0), complex(inf, 0.0), complex(nan, nan), complex(nan, nan),
        complex(nan, 0.0), complex(nan, nan), complex(nan, nan), complex(1.5430805683135986, 0.0),
        complex(1.5430805683135986, 1.1752011355114184e-30), complex(inf, -inf), complex(nan, nan),
        complex(1.0925707817077637, 0.1289210319519043),
        complex(-3.724545478820801, -0.5118225812911987), complex(nan, nan),
        complex(1.5430805683135986, 0.0),
    ],
    ('cosh', np.complex128): [
        complex(inf, 0.0), complex(inf, 0.0), complex(nan, nan), complex(nan, nan),
        complex(nan, 0.0), complex(nan, nan), complex(nan, nan), complex(1.543080634815244, 0.0),
        complex(1.543080634815244, 1.1752011936438017e-30), complex(inf, -inf), complex(nan, nan),
        complex(1.0925708047319176, 0.12892104172809826),
        complex(-3.7245455049153224, -0.5118225699873845), complex(nan, nan),
        complex(1.543080634815244, -1.1752011936438017e-38),
    ],
    ('atan', np.complex64): [
        complex(1.5707963705062866, -0.0), complex(-1.5707963705062866, -0.0),
        complex(1.5707963705062866, nan), complex(1.5707963705062866, nan),
        complex(-1.5707963705062866, nan), complex(-1.5707963705062866, nan),
        complex(-1.5707963705062866, 0.0), complex(-0.7853981852531433, -0.0),
        complex(0.7853981852531433, 5.000000015855384e-31), complex(1.5707963705062866, -0.0),
        complex(1.5707963705062866, 0.0), complex(0.48425450921058655, 0.20058661699295044),
        complex(-1.4099210500717163, 0.2290726900100708), complex(-1.5707963705062866, nan),
        complex(-0.7853981852531433, -0.0),
    ],
    ('atan', np.complex128): [
        complex(1.5707963267948966, -0.0), complex(-1.5707963267948966, -0.0),
        complex(1.5707963267948966, nan), complex(1.5707963267948966, nan),
        complex(-1.5707963267948966, nan), complex(-1.5707963267948966, nan),
        complex(-1.5707963267948966, 0.0), complex(-0.7853981633974483, -0.0),
        complex(0.7853981633974483, 5e-31), complex(1.5707963267948966, -1e-90),
        complex(1.5707963267948966, 0.0), complex(0.4842544903299662, 0.20058661813123432),
        complex(-1.4099210495965755, 0.22907268296853878), complex(-1.5707963267948966, nan),
        complex(-0.7853981633974483, 5e-39),
    ],

}


def _run(op: str, x: np.ndarray, backend: str) -> np.ndarray:
    t = f"tensor<{len(x)}xcomplex<{'f32' if x.dtype == np.complex64 else 'f64'}>>"
    text = (f"func.func @main(%a: {t}) -> {t} {{\n"
            f"  %r = chlo.{op} %a : {t} -> {t}\n  return %r : {t}\n}}")
    with np.errstate(all="ignore"):
        return np.asarray(xlapy.compile(text, backend=backend)(x))


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("key", list(_WANT), ids=lambda k: f"{k[0]}-{np.dtype(k[1]).name}")
def test_matches_xla(backend: str, key: tuple[str, type]) -> None:
    op, dt = key
    x = np.array(_INPUTS, dt)
    got, want = _run(op, x, backend), np.array(_WANT[key], dt)
    for part in ("real", "imag"):
        g, w = getattr(got, part), getattr(want, part)
        exact = ~np.isfinite(w) | (w == 0) | ~np.isfinite(g) | (g == 0)
        same = ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))
        with np.errstate(invalid="ignore"):
            close = np.abs(g - w) <= ULP[op] * np.spacing(np.abs(w))
        ok = np.where(exact, same, same | close)
        assert ok.all(), (op, part, x[~ok], g[~ok], w[~ok])
