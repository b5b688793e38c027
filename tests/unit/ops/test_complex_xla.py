"""Complex multiply and divide as XLA CPU computes them (ops/complex_xla.py, and the cpu
backend's twins in backends/cpu/elementwise_complex.py), on both backends. Expected values
are jax.jit's (jaxlib 0.10, x86-64): the finite ones are where the textbook formula (or
Smith's division without FMA) differs from XLA by an ulp; the rest are inf / NaN / overflow
corners."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy

BACKENDS = ("interpreter", "cpu")
_BINARY = """
func.func public @main(%arg0: {t}, %arg1: {t}) -> {t} {{
  %0 = stablehlo.{op} %arg0, %arg1 : {t}
  return %0 : {t}
}}
"""
inf, nan = np.inf, np.nan
BIG = 3.4028235e38


def _run(op: str, x: np.ndarray, y: np.ndarray, backend: str) -> np.ndarray:
    p = "f32" if x.dtype == np.complex64 else "f64"
    text = _BINARY.format(t=f"tensor<{len(x)}xcomplex<{p}>>", op=op)
    exe = xlapy.compile(text, backend=backend)
    if backend == "cpu":
        assert not exe._exe.fallbacks()
    with np.errstate(all="ignore"):
        return np.asarray(exe(x, y))


def _check(got: np.ndarray, want: np.ndarray) -> None:
    for part in ("real", "imag"):
        g, w = getattr(got, part), getattr(want, part)
        ok = ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))
        assert ok.all(), (part, got[~ok], want[~ok])


_MUL = {
    np.complex64: [
        (-2.440866470336914 + 1.4838382005691528j, 0.2492712140083313 - 0.0051586199551820755j,
         -0.6007831692695618 + 0.38246965408325195j),
        (-2.788355588912964 - 2.63742733001709j, -2.118406057357788 - 2.487375259399414j,
         -0.6534019112586975 + 12.522829055786133j),
        (2.197272777557373 + 0.49510714411735535j, -0.23811811208724976 - 0.6818671822547913j,
         -0.18561314046382904 - 1.6161421537399292j),
        (complex(1e30, 1e30), complex(1e30, -1e30), complex(inf, -inf)),
        (complex(BIG, BIG), complex(0.5, 0.5), complex(0, 3.4028234663852886e+38)),
    ],
    np.complex128: [
        (-2.7883555200767094 - 2.6374273609000656j, -2.1184061432569594 - 2.487375354853376j,
         -0.6534023544038488 + 12.522829124932864j),
        (0.03199307049725686 - 0.7500120168262754j, -0.13242164786071475 + 1.1683905957112257j,
         0.8720704120148589 + 0.13669822988039468j),
        (-2.63234970931081 + 1.2638401618051027j, -0.7084607016924753 + 1.4153171939709273j,
         0.07618161072455938 - 4.620990891991537j),
        # the rounding error of 1e30 * -1e30, which the textbook formula cancels to 0
        (complex(1e30, 1e30), complex(1e30, -1e30), complex(2.0000000000000003e+60,
                                                           -8.8023847208007e+43)),
        (complex(BIG, BIG), complex(0.5, 0.5), complex(0, 3.4028235e+38)),
    ],
}
# No C99 recovery of inf * 0 NaNs (XLA's product is plain arithmetic).
_MUL_EDGE = [(complex(inf, 0), complex(inf, 0), complex(inf, nan)),
             (complex(inf, 1), complex(0, 0), complex(nan, nan)),
             (complex(inf, nan), complex(1, 0), complex(nan, nan)),
             (complex(0, 0), complex(inf, inf), complex(nan, nan))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_multiply_is_fused_as_xla(backend: str, dtype: type) -> None:
    rows = _MUL[dtype] + _MUL_EDGE
    x, y, want = (np.array([r[k] for r in rows], dtype) for k in range(3))
    _check(_run("multiply", x, y, backend), want)


_DIV = {
    np.complex64: [
        (-0.6460396647453308 - 2.8609914779663086j, -0.5204579830169678 - 2.114156484603882j,
         1.3468565940856934 + 0.025987988337874413j),
        (-2.788355588912964 - 2.63742733001709j, -2.118406057357788 - 2.487375259399414j,
         1.167917013168335 - 0.1263311505317688j),
        (2.197272777557373 + 0.49510714411735535j, -0.23811811208724976 - 0.6818671822547913j,
         -1.6501853466033936 + 2.6461658477783203j),
        (complex(BIG, BIG), complex(1e-30, 1e-30), complex(inf, 0)),
        (complex(3, 4), complex(1e38, 3e38), complex(1.500000042698307e-38, -0.0)),
    ],
    np.complex128: [
        (-2.4408664284709163 + 1.4838382509320027j, 0.24927121819048548 - 0.0051586198108344306j,
         -9.91095615682547 + 5.747600571608139j),
        (-0.9741074809239962 - 2.7816507296766853j, -0.5848731547809778 + 1.7856393520379639j,
         -1.2454866007800809 + 0.9534731391400703j),
        (2.197272896040082 + 0.4951071564984497j, -0.23811811131230298 - 0.681867191804296j,
         -1.6501853371894604 + 2.646166147778433j),
        (complex(BIG, BIG), complex(1e-30, 1e-30), complex(3.4028234999999997e+68, 0)),
        (complex(3, 4), complex(1e38, 3e38), complex(1.5e-38, -5.0000000000000005e-39)),
    ],
}
# C99 Annex G's recovery where Smith's algorithm gives NaN + NaN i.
_DIV_EDGE = [(complex(1, 1), complex(0, 0), complex(inf, inf)),
             (complex(-1, 0), complex(-0.0, 0), complex(inf, nan)),
             (complex(inf, 1), complex(1, 1), complex(inf, -inf)),
             (complex(1, -inf), complex(2, 3), complex(-inf, -inf)),
             (complex(1, 1), complex(inf, 0), complex(0, 0)),
             (complex(-2, 3), complex(-inf, inf), complex(0, -0.0)),
             (complex(nan, 1), complex(0, 0), complex(nan, inf)),
             (complex(inf, inf), complex(inf, 1), complex(nan, nan)),
             (complex(1, 2), complex(nan, 0), complex(nan, nan))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_divide_is_smith_fused_as_xla(backend: str, dtype: type) -> None:
    rows = _DIV[dtype] + _DIV_EDGE
    x, y, want = (np.array([r[k] for r in rows], dtype) for k in range(3))
    _check(_run("divide", x, y, backend), want)



_POW = {
    # c64: q's ln|z| is XLA's f32 log polynomial (the row with d = 1.2e20 amplifies its last
    # bit: libm's logf gives 0.9993515 + 0.036007725i there)
    np.complex64: [
        (complex(1.0, 0.0), complex(-inf, 0.0),
         complex(1.0, 0.0)),
        (complex(1.0, 0.0), complex(nan, 0.0),
         complex(1.0, 0.0)),
        (complex(1.0, 0.0), complex(nan, nan),
         complex(1.0, 0.0)),
        (complex(inf, 0.0), complex(2.0, 0.0),
         complex(inf, 0.0)),
        (complex(inf, 0.0), complex(0.5, 0.0),
         complex(inf, 0.0)),
        (complex(inf, 0.0), complex(-1.0, 0.0),
         complex(0.0, 0.0)),
        (complex(inf, 1.0), complex(2.0, 0.0),
         complex(nan, nan)),
        (complex(2.0, 0.0), complex(inf, 0.0),
         complex(nan, nan)),
        (complex(0.0, 0.0), complex(0.0, 1.0),
         complex(nan, nan)),
        (complex(0.0, 0.0), complex(2.0, 0.0),
         complex(0.0, 0.0)),
        (complex(0.0, 0.0), complex(0.0, 0.0),
         complex(1.0, 0.0)),
        (complex(nan, 0.0), complex(0.0, 0.0),
         complex(1.0, 0.0)),
        (complex(-2.0, 0.0), complex(0.5, 0.0),
         complex(-6.181723932741079e-08, 1.4142135381698608)),
        (complex(1.0000000150474662e+30, 1.0000000150474662e+30), complex(2.0, 0.0),
         complex(-inf, inf)),
        (complex(3.0, 4.0), complex(0.0, 1.0),
         complex(-0.015283683314919472, 0.39532700181007385)),
        (complex(1.0000000200408773e+20, 0.0), complex(1.0, 0.0),
         complex(1.0000000200408773e+20, 0.0)),
        (complex(-2.413811445236206, -1.5853296518325806),
         complex(2.404853343963623, 2.848964214324951),
         complex(-18864.9296875, -102.12075805664062)),
        (complex(1.7263079917182363e+24, 6.825083188097979e-23),
         complex(-2.4957147459758744e-10, 1.162928027989841e+20),
         complex(0.9565876126289368, 0.2914448380470276)),
        (complex(0.5, -0.25), complex(-3.5, 1.25),
         complex(8.54122257232666, 10.670882225036621)),
    ],
    np.complex128: [
        (complex(1.0, 0.0), complex(-inf, 0.0),
         complex(1.0, 0.0)),
        (complex(1.0, 0.0), complex(nan, 0.0),
         complex(1.0, 0.0)),
        (complex(1.0, 0.0), complex(nan, nan),
         complex(1.0, 0.0)),
        (complex(inf, 0.0), complex(2.0, 0.0),
         complex(inf, 0.0)),
        (complex(inf, 0.0), complex(0.5, 0.0),
         complex(inf, 0.0)),
        (complex(inf, 0.0), complex(-1.0, 0.0),
         complex(0.0, 0.0)),
        (complex(inf, 1.0), complex(2.0, 0.0),
         complex(nan, nan)),
        (complex(2.0, 0.0), complex(inf, 0.0),
         complex(nan, nan)),
        (complex(0.0, 0.0), complex(0.0, 1.0),
         complex(nan, nan)),
        (complex(0.0, 0.0), complex(2.0, 0.0),
         complex(0.0, 0.0)),
        (complex(0.0, 0.0), complex(0.0, 0.0),
         complex(1.0, 0.0)),
        (complex(nan, 0.0), complex(0.0, 0.0),
         complex(1.0, 0.0)),
        (complex(-2.0, 0.0), complex(0.5, 0.0),
         complex(8.659560562354934e-17, 1.4142135623730951)),
        (complex(1e+30, 1e+30), complex(2.0, 0.0),
         complex(1.2246467991473535e+44, 2.0000000000000006e+60)),
        (complex(3.0, 4.0), complex(0.0, 1.0),
         complex(-0.015283670216353499, 0.3953270073191184)),
        (complex(1e+20, 0.0), complex(1.0, 0.0),
         complex(1e+20, 0.0)),
        (complex(-2.4138114, -1.5853297), complex(2.4048533, 2.8489642),
         complex(-18864.928736576814, -102.12205370301832)),
        (complex(1.726308e+24, 6.825083e-23), complex(-2.4957147e-10, 1.162928e+20),
         complex(0.770218208305259, -0.6377804353685161)),
        (complex(0.5, -0.25), complex(-3.5, 1.25),
         complex(8.541222798633079, 10.670883301588903)),
    ],
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_power_is_xla_polar_form_with_its_special_cases(backend: str, dtype: type) -> None:
    """1 + 0i to any power (NaN too) is 1; inf + 0i to real c is inf (c > 0) or 0 (c < 0);
    z^0 is 1 (NaN z too); 0^c is 0 for c > 0, NaN for complex c; the polar form elsewhere,
    with XLA's exp (and f32 log) and libm's powf / atan2f / cosf / sinf."""
    rows = _POW[dtype]
    x, y, want = (np.array([r[k] for r in rows], dtype) for k in range(3))
    _check(_run("power", x, y, backend), want)
