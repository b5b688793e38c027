"""Complex unary ops as XLA computes them (ops/complex_xla.py and their cpu twins in
backends/cpu/elementwise_complex.py), on both backends, on infinite / NaN / huge / tiny
parts and branch cuts. Expected values are jax.jit's (jaxlib 0.10, x86-64). Non-finite and
zero parts must match exactly, finite ones within ULP[op] ulp (0: bit-exact).
exp, tanh, tan and expm1 are XLA's to the bit (its own exp, tanh, cos-1); log's, log1p's
f32 log and sqrt's contractions may differ from XLA's in the last bits; XLA's rsqrt refines
x86's rsqrtss (CPU-dependent), here 1 / sqrt."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy

inf, nan = np.inf, np.nan
#: op -> the ulp bound on finite nonzero parts (0: bit-exact).
ULP = {"exponential": 0, "tanh": 0, "exponential_minus_one": 0, "log": 2, "sqrt": 2,
       "log_plus_one": 2, "rsqrt": 4, "tan": 0}

_INPUTS = [
    complex(inf, inf), complex(inf, -inf), complex(-inf, inf), complex(inf, nan),
    complex(-inf, nan), complex(nan, inf), complex(nan, -inf), complex(nan, 0.0), complex(0.0, inf),
    complex(-0.0, -inf), complex(0.0, nan), complex(inf, 0.0), complex(-inf, -0.0),
    complex(inf, 1.0), complex(-inf, 2.0), complex(-1.0, -0.0), complex(-1.0, 0.0),
    complex(-3e+38, -0.0), complex(1e-30, 1e-30), complex(100.0, 1.0), complex(-90.0, 0.5),
    complex(0.5, 0.25), complex(-2.0, 3.0), complex(1.5, -10000000000.0), complex(3e+38, 3e+38),
    complex(1e-20, -1.0),
]
_WANT = {
    ('exponential', np.complex64): [
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(nan, 0.0),
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(inf, 0.0),
        complex(0.0, 0.0), complex(inf, inf), complex(-0.0, 0.0), complex(0.3678794503211975, 0.0),
        complex(0.3678794503211975, 0.0), complex(0.0, 0.0), complex(1.0, 1.0000000031710769e-30),
        complex(inf, inf), complex(0.0, 0.0), complex(1.5974664688110352, 0.4079001545906067),
        complex(-0.1339809149503708, 0.019098514690995216),
        complex(3.913050651550293, 2.1848504543304443), complex(-inf, inf),
        complex(0.5403022766113281, -0.8414709568023682),
    ],
    ('exponential', np.complex128): [
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(nan, 0.0),
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(inf, 0.0),
        complex(0.0, 0.0), complex(inf, inf), complex(-0.0, 0.0), complex(0.3678794411714423, 0.0),
        complex(0.3678794411714423, 0.0), complex(0.0, 0.0), complex(1.0, 1e-30),
        complex(1.4523958901669313e+43, 2.2619725786030117e+43),
        complex(7.190922590723652e-40, 3.9284189155862916e-40),
        complex(1.5974665191199127, 0.4079001700783598),
        complex(-0.13398091492954262, 0.019098516261135196),
        complex(3.9130506700485608, 2.184850424358651), complex(inf, -inf),
        complex(0.5403023058681398, -0.8414709848078965),
    ],
    ('tanh', np.complex64): [
        complex(1.0, 0.0), complex(1.0, 0.0), complex(-1.0, 0.0), complex(1.0, 0.0),
        complex(-1.0, 0.0), complex(nan, nan), complex(nan, nan), complex(nan, 0.0),
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(1.0, 0.0),
        complex(-1.0, 0.0), complex(1.0, 0.0), complex(-1.0, -0.0),
        complex(-0.7615941762924194, 0.0), complex(-0.7615941762924194, 0.0), complex(-1.0, 0.0),
        complex(1.0000000031710769e-30, 1.0000000031710769e-30), complex(1.0, 0.0),
        complex(-1.0, 0.0), complex(0.48548728227615356, 0.1980554610490799),
        complex(-0.965385913848877, -0.009884374216198921),
        complex(0.9457660913467407, 0.08036962151527405), complex(1.0, -0.0),
        complex(3.425519060234891e-20, -1.5574077367782593),
    ],
    ('tanh', np.complex128): [
        complex(1.0, 0.0), complex(1.0, 0.0), complex(-1.0, 0.0), complex(1.0, 0.0),
        complex(-1.0, 0.0), complex(nan, nan), complex(nan, nan), complex(nan, 0.0),
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(1.0, 0.0),
        complex(-1.0, 0.0), complex(1.0, 0.0), complex(-1.0, -0.0),
        complex(-0.761594155955765, 0.0), complex(-0.761594155955765, 0.0), complex(-1.0, 0.0),
        complex(1e-30, 1e-30), complex(1.0, 2.516747101509427e-87),
        complex(-1.0, 1.129958253036623e-78), complex(0.4854872810241354, 0.19805544995134955),
        complex(-0.965385879022133, -0.009884375038322494),
        complex(0.9457661912688725, 0.08036961940839073), complex(1.0, -0.0),
        complex(3.425518820814759e-20, -1.557407724654902),
    ],
    ('exponential_minus_one', np.complex64): [
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(nan, 0.0),
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(inf, 0.0),
        complex(-1.0, 0.0), complex(inf, inf), complex(-1.0, 0.0),
        complex(-0.6321205496788025, 0.0), complex(-0.6321205496788025, 0.0), complex(-1.0, 0.0),
        complex(1.0000000031710769e-30, 1.0000000031710769e-30), complex(inf, inf),
        complex(-1.0, 0.0), complex(0.5974665284156799, 0.4079001545906067),
        complex(-1.1339808702468872, 0.019098512828350067),
        complex(2.913050651550293, 2.1848504543304443), complex(-inf, inf),
        complex(-0.4596977233886719, -0.8414709568023682),
    ],
    ('exponential_minus_one', np.complex128): [
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(nan, 0.0),
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(inf, 0.0),
        complex(-1.0, 0.0), complex(inf, inf), complex(-1.0, 0.0),
        complex(-0.6321205588285577, 0.0), complex(-0.6321205588285577, 0.0), complex(-1.0, 0.0),
        complex(1e-30, 1e-30), complex(1.4523958901669313e+43, 2.2619725786030117e+43),
        complex(-1.0, 0.0), complex(0.5974665191199126, 0.4079001700783598),
        complex(-1.1339809149295426, 0.019098516261135196),
        complex(2.9130506700485608, 2.184850424358651), complex(inf, -inf),
        complex(-0.45969769413186023, -0.8414709848078965),
    ],
    ('log', np.complex64): [
        complex(inf, 0.7853981852531433), complex(inf, -0.7853981852531433),
        complex(inf, 2.356194496154785), complex(nan, nan), complex(nan, nan), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(inf, 1.5707963705062866),
        complex(inf, -1.5707963705062866), complex(nan, nan), complex(inf, 0.0),
        complex(inf, -3.1415927410125732), complex(inf, 0.0), complex(inf, 3.1415927410125732),
        complex(0.0, -3.1415927410125732), complex(0.0, 3.1415927410125732),
        complex(88.59684753417969, -3.1415927410125732),
        complex(-68.7309799194336, 0.7853981852531433),
        complex(4.605220317840576, 0.00999966636300087),
        complex(4.4998250007629395, 3.1360371112823486),
        complex(-0.5815753936767578, 0.46364760398864746),
        complex(1.2824747562408447, 2.158798933029175),
        complex(23.025850296020508, -1.5707963705062866),
        complex(88.94342041015625, 0.7853981852531433), complex(0.0, -1.5707963705062866),
    ],
    ('log', np.complex128): [
        complex(inf, 0.7853981633974483), complex(inf, -0.7853981633974483),
        complex(inf, 2.356194490192345), complex(nan, nan), complex(nan, nan), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(inf, 1.5707963267948966),
        complex(inf, -1.5707963267948966), complex(nan, nan), complex(inf, 0.0),
        complex(inf, -3.141592653589793), complex(inf, 0.0), complex(inf, 3.141592653589793),
        complex(0.0, -3.141592653589793), complex(0.0, 3.141592653589793),
        complex(88.59684582244185, -3.141592653589793),
        complex(-68.7309791995414, 0.7853981633974483),
        complex(4.6052201834882585, 0.009999666686665238),
        complex(4.4998251021908855, 3.1360371551891006),
        complex(-0.5815754049028404, 0.4636476090008061),
        complex(1.2824746787307684, 2.158798930342464),
        complex(23.025850929940457, -1.5707963266448965),
        complex(88.94341941272182, 0.7853981633974483), complex(5e-41, -1.5707963267948966),
    ],
    ('sqrt', np.complex64): [
        complex(inf, inf), complex(inf, -inf), complex(inf, inf), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(nan, nan),
        complex(inf, inf), complex(inf, -inf), complex(nan, nan), complex(inf, 0.0),
        complex(0.0, inf), complex(inf, 0.0), complex(0.0, inf), complex(0.0, 1.0),
        complex(0.0, 1.0), complex(0.0, 1.7320507716308828e+19),
        complex(1.098684106542948e-15, 4.550898914338502e-16),
        complex(10.00012493133545, 0.04999937489628792),
        complex(0.026352213695645332, 9.486868858337402),
        complex(0.727673351764679, 0.17178037762641907),
        complex(0.8959774374961853, 1.6741492748260498), complex(70710.6796875, -70710.6796875),
        complex(1.9029766711407542e+19, 7.882387314654052e+18),
        complex(0.7071067690849304, -0.7071067690849304),
    ],
    ('sqrt', np.complex128): [
        complex(inf, inf), complex(inf, -inf), complex(inf, inf), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(nan, nan),
        complex(inf, inf), complex(inf, -inf), complex(nan, nan), complex(inf, 0.0),
        complex(0.0, inf), complex(inf, 0.0), complex(0.0, inf), complex(0.0, 1.0),
        complex(0.0, 1.0), complex(0.0, 1.7320508075688774e+19),
        complex(1.0986841134678098e-15, 4.550898605622274e-16),
        complex(10.000124996093955, 0.049999375027342134),
        complex(0.026352212168231852, 9.486869580588012),
        complex(0.7276733451126774, 0.17178037486125622),
        complex(0.8959774761298381, 1.6741492280355401),
        complex(70710.67812395806, -70710.67811335145),
        complex(1.902976705995016e+19, 7.882387605032137e+18),
        complex(0.7071067811865476, -0.7071067811865475),
    ],
    ('log_plus_one', np.complex64): [
        complex(inf, 0.7853981852531433), complex(inf, -0.7853981852531433),
        complex(inf, 2.356194496154785), complex(nan, nan), complex(nan, nan), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(inf, 1.5707963705062866),
        complex(inf, -1.5707963705062866), complex(nan, nan), complex(inf, 0.0),
        complex(inf, -3.1415927410125732), complex(inf, 0.0), complex(inf, 3.1415927410125732),
        complex(-inf, -0.0), complex(-inf, 0.0), complex(88.59684753417969, -3.1415927410125732),
        complex(1.0000000031710769e-30, 1.0000000031710769e-30),
        complex(4.615169525146484, 0.009900666773319244),
        complex(4.488652229309082, 3.135974645614624),
        complex(0.41916459798812866, 0.16514867544174194),
        complex(1.1512925624847412, 1.8925468921661377),
        complex(23.025850296020508, -1.5707963705062866),
        complex(88.94342041015625, 0.7853981852531433),
        complex(0.3465735912322998, -0.7853981852531433),
    ],
    ('log_plus_one', np.complex128): [
        complex(inf, 0.7853981633974483), complex(inf, -0.7853981633974483),
        complex(inf, 2.356194490192345), complex(nan, nan), complex(nan, nan), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(inf, 1.5707963267948966),
        complex(inf, -1.5707963267948966), complex(nan, nan), complex(inf, 0.0),
        complex(inf, -3.141592653589793), complex(inf, 0.0), complex(inf, 3.141592653589793),
        complex(-inf, -0.0), complex(-inf, 0.0), complex(88.59684582244185, -3.141592653589793),
        complex(1e-30, 1e-30), complex(4.615169529241436, 0.009900666587988573),
        complex(4.488652150318863, 3.135974735164838),
        complex(0.4191645952022216, 0.16514867741462683),
        complex(1.151292546497023, 1.892546881191539),
        complex(23.025850929940457, -1.5707963265448965),
        complex(88.94341941272182, 0.7853981633974483),
        complex(0.34657359027997264, -0.7853981633974483),
    ],
    ('rsqrt', np.complex64): [
        complex(0.0, -0.0), complex(0.0, 0.0), complex(-0.0, -0.0), complex(0.0, -0.0),
        complex(-0.0, -0.0), complex(0.0, -0.0), complex(0.0, 0.0), complex(nan, nan),
        complex(0.0, -0.0), complex(0.0, 0.0), complex(nan, nan), complex(0.0, -0.0),
        complex(-0.0, 0.0), complex(0.0, -0.0), complex(-0.0, -0.0),
        complex(-4.371138828673793e-08, 1.0), complex(-4.371138828673793e-08, -1.0),
        complex(-2.5236783175177745e-27, 5.773502894474484e-20),
        complex(776886972055552.0, -321797136318464.0),
        complex(0.09999624639749527, -0.0004999687080271542),
        complex(0.00029280013404786587, -0.10540802776813507),
        complex(1.3017016649246216, -0.30729004740715027),
        complex(0.24849943816661835, -0.4643254280090332),
        complex(7.071067557262722e-06, 7.071067557262722e-06),
        complex(4.4853590834700896e-20, -1.8578967696429705e-20),
        complex(0.7071067690849304, 0.7071067690849304),
    ],
    ('rsqrt', np.complex128): [
        complex(0.0, -0.0), complex(0.0, 0.0), complex(-0.0, -0.0), complex(0.0, -0.0),
        complex(-0.0, -0.0), complex(0.0, -0.0), complex(0.0, 0.0), complex(nan, nan),
        complex(0.0, -0.0), complex(0.0, 0.0), complex(nan, nan), complex(0.0, -0.0),
        complex(-0.0, 0.0), complex(0.0, -0.0), complex(-0.0, -0.0),
        complex(6.123233995736766e-17, 1.0), complex(6.123233995736766e-17, -1.0),
        complex(3.535250795749689e-36, 5.773502691896257e-20),
        complex(776886987015018.6, -321797126452791.3),
        complex(0.09999625027341494, -0.000499968752460728),
        complex(0.00029279783897449184, -0.10540803535187249),
        complex(1.3017016520692888, -0.30729007631213195),
        complex(0.24849944091130338, -0.4643254526508149),
        complex(7.071067812395806e-06, 7.071067811335145e-06),
        complex(4.4853591108303824e-20, -1.857896575819671e-20),
        complex(0.7071067811865476, 0.7071067811865475),
    ],
    ('tan', np.complex64): [
        complex(0.0, 1.0), complex(0.0, -1.0), complex(0.0, 1.0), complex(nan, nan),
        complex(nan, nan), complex(0.0, 1.0), complex(0.0, -1.0), complex(nan, nan),
        complex(0.0, 1.0), complex(0.0, -1.0), complex(0.0, nan), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(-1.5574077367782593, -0.0),
        complex(-1.5574077367782593, 0.0), complex(1.8065544366836548, -0.0),
        complex(1.0000000031710769e-30, 1.0000000031710769e-30),
        complex(-0.20551154017448425, 0.8535027503967285),
        complex(0.848121166229248, 1.2440987825393677),
        complex(0.5045007467269897, 0.31242069602012634),
        complex(0.0037640256341546774, 1.0032386779785156), complex(0.0, -1.0), complex(-0.0, 1.0),
        complex(4.199743392257689e-21, -0.7615941762924194),
    ],
    ('tan', np.complex128): [
        complex(0.0, 1.0), complex(0.0, -1.0), complex(0.0, 1.0), complex(nan, nan),
        complex(nan, nan), complex(0.0, 1.0), complex(0.0, -1.0), complex(nan, nan),
        complex(0.0, 1.0), complex(0.0, -1.0), complex(0.0, nan), complex(nan, nan),
        complex(nan, nan), complex(nan, nan), complex(nan, nan), complex(-1.557407724654902, -0.0),
        complex(-1.557407724654902, 0.0), complex(0.023685100581946564, -0.0),
        complex(1e-30, 1e-30), complex(-0.20551153472825254, 0.8535027544910996),
        complex(0.8481211025629911, 1.2440986743725393),
        complex(0.504500702698564, 0.31242069250258875),
        complex(0.003764025641504249, 1.0032386273536098), complex(0.0, -1.0), complex(-0.0, 1.0),
        complex(4.19974341614026e-21, -0.761594155955765),
    ],
}


def _run(op: str, x: np.ndarray, backend: str) -> np.ndarray:
    t = f"tensor<{len(x)}xcomplex<{'f32' if x.dtype == np.complex64 else 'f64'}>>"
    text = (f"func.func @main(%a: {t}) -> {t} {{\n"
            f"  %r = stablehlo.{op} %a : {t}\n  return %r : {t}\n}}")
    exe = xlapy.compile(text, backend=backend)
    if backend == "cpu":
        assert not exe._exe.fallbacks()
    with np.errstate(all="ignore"):
        return np.asarray(exe(x))


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
