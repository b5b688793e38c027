"""Polynomial math accuracy: max ulp error per function and dtype, printed and bounded.

References: float64 numpy/scipy for f32; long double numpy (scipy f64 for erf) for f64.
Denormal references are flushed (the kernels run with FTZ, as XLA CPU does).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

from tests.unit.backends.cpu.util import module, op, run_both, ulp_error
from xlapy.backends.cpu import CpuBackend
from xlapy.stablehlo.check import ulp_difference
from xlapy.types import ElementType as ET
from xlapy.types import Shape

REF = {"exponential": np.exp, "log": np.log, "log_plus_one": np.log1p,
       "exponential_minus_one": np.expm1, "tanh": np.tanh,
       "logistic": lambda x: 1 / (1 + np.exp(-x)), "erf": scipy.special.erf,
       "sine": np.sin, "cosine": np.cos}
#: Documented bounds (math_poly's table), f32 and f64.
#: f32: within 1 ulp (logistic, erf below 1, sin and cos evaluate in f64), save tanh: a
#: rational form like XLA's (5 ulp exhaustively over [2^-20, 9.3]; XLA's measures 5 too;
#: the f64 evaluation costs 2x, see math_poly).
BOUND = {ET.F32: 1.0, ET.F64: 20.0}
FN_BOUND = {("tanh", ET.F32): 5.0}


def _inputs(name: str, rng: np.random.Generator) -> np.ndarray:
    n = 20000
    if name == "log":
        return np.exp(rng.uniform(-80, 80, 3 * n))
    if name == "log_plus_one":
        return np.concatenate([rng.uniform(-1, 1, n), np.exp(rng.uniform(-30, 30, 2 * n))])
    if name in ("sine", "cosine"):
        return np.concatenate([rng.uniform(-10, 10, 2 * n), rng.uniform(-1e5, 1e5, n)])
    return np.concatenate([rng.uniform(-5, 5, n), rng.uniform(-80, 80, n),
                           10.0 ** rng.uniform(-10, 0, n)])


@pytest.mark.parametrize("t", [ET.F32, ET.F64], ids=str)
def test_max_ulp(t: ET) -> None:
    rng = np.random.default_rng(7)
    names = list(REF)
    xs = {n: _inputs(n, rng).astype(t.dtype) for n in names}
    size = len(next(iter(xs.values())))
    mod = module([Shape.array(t, (size,))] * len(names),
                 lambda c, p: [op(c, n, [q]) for n, q in zip(names, p)])
    _, got, _ = run_both(mod, [xs[n] for n in names])
    report = []
    for name, g in zip(names, got):
        x = xs[name]
        if t is ET.F64 and name != "erf" and name != "logistic":
            ref = REF[name](x.astype(np.longdouble))
        else:
            with np.errstate(all="ignore"):
                ref = REF[name](x.astype(np.float64))
        with np.errstate(all="ignore"):
            ref = ref.astype(t.dtype)
        tiny = np.finfo(t.dtype).tiny
        ref = np.where(np.abs(ref) < tiny, ref * 0, ref)
        err = ulp_error(g, ref)
        report.append(f"{name}:{err:.2f}")
        assert err <= FN_BOUND.get((name, t), BOUND[t]), f"{name} {t}: {err} ulp"
    print(f"\nmax ulp {t}: " + ", ".join(report))


def test_tanh_f32_edges() -> None:
    """The f32 rational tanh: tiny normals give x itself, huge and infinite inputs +-1
    exactly (never above 1), -0 stays -0, NaN stays NaN, odd symmetry exact."""
    x = np.array([0.0, -0.0, 2.0 ** -126, -(2.0 ** -126), 1e-20, 2.0 ** -13, 9.2, 9.3, 20.0,
                  -20.0, 1e30, np.inf, -np.inf, np.nan], np.float32)
    rng = np.random.default_rng(3)
    x = np.concatenate([x, rng.uniform(-12, 12, 5000).astype(np.float32)])
    mod = module([Shape.array(ET.F32, x.shape)], lambda c, p: op(c, "tanh", p))
    got = run_both(mod, [x])[1]
    neg = run_both(mod, [-x])[1]
    assert np.array_equal(got[:6], x[:6]) and np.signbit(got[1])
    assert got[6:13].tolist() == [1.0, 1.0, 1.0, -1.0, 1.0, 1.0, -1.0] and np.isnan(got[13])
    assert np.all(np.abs(got[np.isfinite(got)]) <= 1.0)
    assert np.array_equal(neg[~np.isnan(x)], -got[~np.isnan(x)])


_ODD = ["sine", "tan", "erf", "tanh", "chlo.sinh", "chlo.asin", "chlo.atan", "chlo.asinh",
        "chlo.atanh", "chlo.erf_inv", "exponential_minus_one", "log_plus_one", "cbrt", "sqrt"]


@pytest.mark.parametrize("t", [ET.F32, ET.F64, ET.F16, ET.BF16], ids=str)
def test_odd_functions_keep_the_sign_of_zero(t: ET) -> None:
    """f(-0) = -0 for the functions odd at 0 (IEEE, jax.jit(jnp.sin)(-0.) is -0): the cpu
    gave +0 for sine, tan and erf (their polynomials add +0 terms), the interpreter -0."""
    x = np.array([-0.0, 0.0], np.float64).astype(t.dtype)
    mod = module([Shape.array(t, x.shape)], lambda c, p: [op(c, n, p) for n in _ODD])
    ref, got, exe = run_both(mod, [x])
    assert not exe.fallbacks(), exe.explain()
    for n, r, g in zip(_ODD, ref, got):
        for backend, v in (("interpreter", r), ("cpu", g)):
            v = v.astype(np.float64)
            assert (v == 0).all() and list(np.signbit(v)) == [True, False], (n, backend, v)


@pytest.mark.parametrize("name", ["logistic", "tan"])
def test_f32_result_does_not_depend_on_the_lane(name: str) -> None:
    """The same values in the vector lanes (the head) and in the scalar tail of one array give
    the same bits (an AVX-512-only reciprocal estimate in the vector lanes made 11-12 of 3000
    differ)."""
    vals = np.random.default_rng(4).uniform(-20, 20, 3000).astype(np.float32)
    n, k = 1039, 15  # 1039 = 64 * 16 + 15: a tail of scalars after the vector lanes
    exe = CpuBackend().compile(module([Shape.array(ET.F32, (n,))], lambda c, p: op(c, name, p)))
    head, tail = [], []
    for i in range(0, vals.size, k):
        x = np.ones(n, np.float32)
        x[:k] = x[-k:] = vals[i:i + k]
        out = np.asarray(exe.run([x]))
        head.append(out[:k])
        tail.append(out[-k:])
    assert np.array_equal(np.concatenate(head).view(np.uint32),
                          np.concatenate(tail).view(np.uint32))


def test_erf_f32_is_within_one_ulp_in_f32() -> None:
    """f32 erf in f32 arithmetic (erf_f32.py): within 1 ulp of the correctly rounded value
    on a dense grid, under 6% of it 1 ulp off (XLA's rational: 24%, up to 5 ulp), +-1 from
    3.92 on, -0 and NaN kept, no f64 in the kernel (the f64 polynomial took 1.6x its time)."""
    import xlapy

    n = 1 << 21
    x = np.concatenate([np.linspace(-6, 6, n - 8), [0.0, -0.0, 1e-30, -1e-30, 0.99999994,
                                                    1.0, 3.92, np.inf]]).astype(np.float32)
    text = f"""
func.func @main(%x: tensor<{x.size}xf32>) -> tensor<{x.size}xf32> {{
  %y = chlo.erf %x : tensor<{x.size}xf32> -> tensor<{x.size}xf32>
  return %y : tensor<{x.size}xf32>
}}
"""
    prog = xlapy.compile(text, "cpu")
    got = np.asarray(prog(x))
    ref = scipy.special.erf(x.astype(np.float64)).astype(np.float32)
    big = np.abs(x) >= 1.2e-38  # (a denormal input flushes, as XLA's kernels do)
    d = ulp_difference(got[big], ref[big])
    assert d.max() <= 1 and (d > 0).mean() < 0.06, (d.max(), (d > 0).mean())
    assert np.array_equal(np.signbit(got[-8:-6]), [False, True])
    assert np.array_equal(got[-2:], [1.0, 1.0]) and got[0] == -1.0
    assert "x double>" not in prog._exe.kernel_ir  # type: ignore[attr-defined]
    nan = np.asarray(xlapy.compile(text.replace(f"{x.size}x", "1x"), "cpu")(
        np.array([np.nan], np.float32)))
    assert np.isnan(nan).all()


def test_erfc_f32_is_a_native_kernel_op() -> None:
    """chlo.erfc on f32 (f16, bf16: computed in f32) stays a chlo op on the cpu backend
    (elementwise.native_chlo; the chlo lowering, which the gpu backend runs, still lowers
    it) and its kernel evaluates Math.erfc: within 0.51 ulp of scipy's f64 erfc below 1,
    5 above (x^2 carried exactly into exp: the lowering's f32 x^2 made it 64 ulp at 9.04,
    as XLA's formula), the edges exact."""
    import ml_dtypes

    import xlapy
    from xlapy.backends.cpu.elementwise import native_chlo
    from xlapy.passes.chlo_lowering import ChloLowering
    from xlapy.stablehlo import parse_module

    def text(n: int, t: str) -> str:
        return f"""
func.func @main(%x: tensor<{n}x{t}>) -> tensor<{n}x{t}> {{
  %y = chlo.erfc %x : tensor<{n}x{t}> -> tensor<{n}x{t}>
  return %y : tensor<{n}x{t}>
}}
"""
    edges = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 2.0, -2.0, 10.0, -10.0, 0.5],
                     np.float32)
    x = np.concatenate([np.linspace(1, 9.1, 200_000), np.linspace(-9.1, -1, 200_000),
                        np.linspace(-1, 1, 100_000), edges]).astype(np.float32)
    exe = xlapy.compile(text(x.size, "f32"), "cpu")
    assert any("chlo.erfc" in ln and "kernel" in ln for ln in exe._exe.explain().splitlines())
    got = np.asarray(exe(x)).astype(np.float64)
    ref = scipy.special.erfc(x.astype(np.float64))
    normal = ref >= 2.0 ** -126  # (a denormal result flushes, as XLA's kernels do)
    ulp = np.abs(got - ref)[normal] / np.spacing(ref[normal].astype(np.float32))
    small = np.abs(x[normal]) < 1
    assert ulp[small].max() <= 0.51, (ulp[small].max(), x[normal][small][ulp[small].argmax()])
    assert ulp[~small].max() <= 5.0, ulp[~small].max()
    assert list(got[-11:-7]) == [1.0, 1.0, 0.0, 2.0] and got[-3] == 0.0 and got[-2] == 2.0
    nan = xlapy.compile(text(1, "f32"), "cpu")(np.array([np.nan], np.float32))
    assert np.isnan(np.asarray(nan)).all()
    for t, dt in (("bf16", ml_dtypes.bfloat16), ("f16", np.float16)):  # f32, rounded once
        xs = x[::97].astype(dt)
        want = np.asarray(exe(np.pad(xs.astype(np.float32), (0, x.size - xs.size))))
        got_t = np.asarray(xlapy.compile(text(xs.size, t), "cpu")(xs))
        assert np.array_equal(got_t.view(np.uint16), want[:xs.size].astype(dt).view(np.uint16))
    for native, kept in ((native_chlo, True), (None, False)):
        m = parse_module(text(8, "f32"))
        ChloLowering(native=native).run(m)
        ops = {i.opcode for c in m.computations for i in c.instructions}
        assert ("chlo.erfc" in ops) == kept, ops


def test_erf_inv_f32_is_a_native_kernel_op() -> None:
    """chlo.erf_inv on f32 stays a chlo op on the cpu backend (Math.erf_inv, its f64 fits
    with fused multiply-adds) within 0.51 ulp of scipy's erfinv; the fit above w = 6.25
    (|x| > 0.998), taken only by a vector with such a lane, gives each lane the same bits
    wherever it sits (a vector of mixed lanes, all-near, the scalar tail); +-1 -> +-inf,
    past 1 and NaN -> NaN, -0 -> -0."""
    import xlapy

    n = 4099  # (a scalar tail after the vector lanes)
    text = f"""
func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %y = chlo.erf_inv %x : tensor<{n}xf32> -> tensor<{n}xf32>
  return %y : tensor<{n}xf32>
}}
"""
    exe = xlapy.compile(text, "cpu")
    assert any("chlo.erf_inv" in ln and "kernel" in ln for ln in exe._exe.explain().splitlines())
    rng = np.random.default_rng(11)
    near = (1 - np.exp(rng.uniform(-16, -6.3, n))).astype(np.float32) * \
        rng.choice([-1, 1], n).astype(np.float32)
    mixed = rng.uniform(-1, 1, n).astype(np.float32)
    mixed[::5] = near[::5]
    for x in (mixed, near, np.roll(mixed, 3)):
        got = np.asarray(exe(x)).astype(np.float64)
        ref = scipy.special.erfinv(x.astype(np.float64))
        ulp = np.abs(got - ref) / np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
        assert ulp.max() <= 0.51, (ulp.max(), x[ulp.argmax()])
    a, b = np.asarray(exe(mixed)), np.asarray(exe(np.roll(mixed, 3)))
    assert np.array_equal(np.roll(a, 3).view(np.uint32), b.view(np.uint32))
    edges = np.zeros(n, np.float32)
    edges[:6] = [1.0, -1.0, 1.5, np.nan, -0.0, 0.0]
    e = np.asarray(exe(edges))
    assert list(e[:2]) == [np.inf, -np.inf] and np.isnan(e[2:4]).all()
    assert np.signbit(e[4]) and not np.signbit(e[5]) and e[4] == 0 == e[5]


def test_tanh_f64_is_one_series_within_two_ulp() -> None:
    """f64 tanh is -m / (2 + m), m = expm1(-2|x|) by one Taylor series on |r| <= ln2/2:
    the series below 0.5 plus 1 - 2 / (e^2x + 1) above emitted 61 instructions (2M f64:
    1.5 ms, XLA 0.85-1.0), this 38 (1.0 ms). Within 2 ulp of mpmath on both sides of 0.5 and
    out to where tanh rounds to 1; x itself below 2^-27; NaN, +-inf, +-0 kept."""
    import mpmath
    from llvmlite import ir

    import xlapy
    from xlapy.backends.cpu.math_poly import Math

    vt = ir.VectorType(ir.DoubleType(), 4)
    fn = ir.Function(ir.Module(), ir.FunctionType(vt, [vt]), "tanh4")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(Math(b, vt).tanh(fn.args[0]))
    assert len(fn.blocks[0].instructions) <= 40, len(fn.blocks[0].instructions)

    rng = np.random.default_rng(5)
    x = np.concatenate([np.linspace(-0.6, 0.6, 4001), np.linspace(0.45, 3.0, 2001),
                        np.exp(rng.uniform(np.log(1e-8), np.log(25.0), 4000)),
                        [2.0 ** -30, 2.0 ** -1022, 20.0, -np.inf, np.nan, -0.0]])
    text = f"""
func.func @main(%x: tensor<{x.size}xf64>) -> tensor<{x.size}xf64> {{
  %y = stablehlo.tanh %x : tensor<{x.size}xf64>
  return %y : tensor<{x.size}xf64>
}}
"""
    got = np.asarray(xlapy.compile(text, "cpu")(x))
    with mpmath.workprec(80):  # (the module-wide precision is test_ulp_table's)
        ref = np.array([float(mpmath.tanh(mpmath.mpf(v))) for v in x[:-2]])
    nz = ref != 0
    ulp = np.abs(got[:-2] - ref)[nz] / np.spacing(np.abs(ref[nz]))
    assert ulp.max() <= 2.0, (ulp.max(), x[:-2][nz][ulp.argmax()])
    assert list(got[-6:-2]) == [2.0 ** -30, 2.0 ** -1022, 1.0, -1.0]
    assert np.isnan(got[-2]) and got[-1] == 0 and np.signbit(got[-1])


def test_erf_f64_erfcx_series_is_31_clean_terms() -> None:
    """f64 erf above |x| = 1 sums erfcx's Chebyshev series on [1, 6]
    (math_coeffs.ERFCX_F64, projected with mpmath): 31 terms, where the f64 fit kept 41 (its
    last ten the reference's rounding noise, ~1e-16): the whole f64 erf emits under 180
    instructions (197 before; 1024^2 f64 erf 4.9 -> 3.8 ms on Zen 3), within 1 ulp of
    mpmath on [1, 6] and correctly rounded on over 96% of it (94% before)."""
    import mpmath
    from llvmlite import ir

    import xlapy
    from xlapy.backends.cpu.math_poly import Math

    vt = ir.VectorType(ir.DoubleType(), 4)
    fn = ir.Function(ir.Module(), ir.FunctionType(vt, [vt]), "erf4")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(Math(b, vt).erf(fn.args[0]))
    assert len(fn.blocks[0].instructions) < 180, len(fn.blocks[0].instructions)
    x = np.concatenate([np.linspace(1, 6, 6000), -np.linspace(1, 6, 1000)])
    text = f"""
func.func @main(%x: tensor<{x.size}xf64>) -> tensor<{x.size}xf64> {{
  %y = chlo.erf %x : tensor<{x.size}xf64> -> tensor<{x.size}xf64>
  return %y : tensor<{x.size}xf64>
}}
"""
    got = np.asarray(xlapy.compile(text, "cpu")(x))
    with mpmath.workprec(100):
        ref = np.array([float(mpmath.erf(mpmath.mpf(v))) for v in x])
    ulp = np.abs(got - ref) / np.spacing(np.abs(ref))
    assert ulp.max() <= 1.0 and (ulp <= 0.5).mean() > 0.96, (ulp.max(), (ulp <= 0.5).mean())


@pytest.mark.parametrize("name", ["sine", "cosine", "tan"])
def test_latency_bound_trig_keeps_the_bits(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Estrin's scheme (latency.py: a loop body's few elements) gives sin and tan
    the bits of Horner's rule for every f32 input (measured over all 2^32: also the bits
    before the two-part reduction), cos all but a handful; here a dense sample, and cos
    within 1 ulp of the default."""
    from xlapy.backends.cpu import latency

    rng = np.random.default_rng(11)
    x = np.concatenate([rng.uniform(-4, 4, 200000), rng.uniform(-1e6, 1e6, 100000),
                        10.0 ** rng.uniform(-30, 0, 50000), [0.0, -0.0, np.inf, np.nan]]
                       ).astype(np.float32)
    mod = module([Shape.array(ET.F32, x.shape)], lambda c, p: op(c, name, p))
    plain = np.asarray(CpuBackend().compile(mod).run([x]))
    monkeypatch.setattr(latency, "in_loop", lambda env, n: latency.latency_bound(True))
    fast = np.asarray(CpuBackend().compile(mod).run([x]))
    if name == "cosine":
        assert np.all(np.abs(fast.view(np.int32) - plain.view(np.int32)) <= 1)
    else:
        np.testing.assert_array_equal(fast.view(np.int32), plain.view(np.int32))


def test_loop_body_sin_is_latency_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A native loop's body kernel over a few floats evaluates sin by Estrin's scheme (its
    carry waits on the polynomial); a top-level kernel, or a loop body over many elements,
    by Horner's (throughput)."""
    jax = pytest.importorskip("jax")
    import xlapy
    from xlapy.backends.cpu import math_poly

    calls: list[int] = []
    real = math_poly.Math.estrin
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    monkeypatch.setattr(math_poly.Math, "estrin",
                        lambda self, c, x: calls.append(1) or real(self, c, x))

    def loop(x):  # type: ignore[no-untyped-def]
        return jax.lax.fori_loop(0, 50, lambda i, v: v * 0.9 + jax.numpy.sin(v) * 0.1, x)

    for n, estrin in [(8, True), (4096, False)]:
        calls.clear()
        x = np.linspace(-3, 3, n, dtype=np.float32)
        text = jax.jit(loop).lower(x).as_text()
        exe = xlapy.compile(text, backend="cpu")
        assert bool(calls) is estrin
        np.testing.assert_allclose(exe(x), xlapy.compile(text)(x), rtol=1e-5, atol=1e-6)
    calls.clear()
    xlapy.compile(jax.jit(jax.numpy.sin).lower(np.zeros(8, np.float32)).as_text(), backend="cpu")
    assert not calls


@pytest.mark.parametrize(("dt", "top"), [(np.float32, 89.5), (np.float64, 711.0)])
def test_expm1_reaches_overflow_without_an_exp(dt: type, top: float) -> None:
    """expm1 past 20 was exp(x) - 1, a whole exp on every lane beside the (2^n - 1) + 2^n q
    form (jax.nn.elu 1.07x XLA's time; expm1 of 2M floats 0.94 -> 0.65 ms): that form now
    runs to the overflow, n past the largest exponent doubled after. Within 1 ulp up to
    it, inf past it, as the reference."""
    import xlapy

    lo = 15.0 if dt == np.float32 else 30.0
    x = np.concatenate([np.linspace(lo, top, 199996), [np.inf, -np.inf, 1.0, -1.0]]).astype(dt)
    ref = np.expm1(x.astype(np.longdouble)).astype(dt)
    t = "f32" if dt == np.float32 else "f64"
    text = f"""
func.func @main(%x: tensor<{x.size}x{t}>) -> tensor<{x.size}x{t}> {{
  %y = stablehlo.exponential_minus_one %x : tensor<{x.size}x{t}>
  return %y : tensor<{x.size}x{t}>
}}
"""
    prog = xlapy.compile(text, "cpu")
    got = np.asarray(prog(x))
    fin = np.isfinite(ref)
    assert np.array_equal(np.isinf(got), ~fin)
    assert ulp_difference(got[fin], ref[fin]).max() <= 1
    assert prog._exe.kernel_ir.count("llvm.fma") <= (23 if dt == np.float32 else 38)
