"""f32 atan2, power and cbrt as f64 vector code (libm_f32.py) against the interpreter
(ops/libm.py `wide`: the f64 libm function rounded once): bit for bit on C99's special
cases, on every binade and in both denormal modes, with no libm call left in the kernel;
f32 asin / acos lower to a polynomial (chlo_refine.asin_wide), not to an f64 atan2."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.util import module, op
from xlapy import denormal
from xlapy.backends.cpu import CpuBackend
from xlapy.backends.interpreter import InterpreterBackend
from xlapy.passes.hlo_builder import HloBuilder
from xlapy.types import ElementType as ET
from xlapy.types import Shape

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0,
                    -3.0, 1.5, -1.5, 0.25, 1e-45, -1e-45, 1e-40, 1.2e-38, 3.4e38, -3.4e38,
                    16777216.0, -16777217.0, 4097 / 4096, 88.7, -103.9, 126.5],
                   np.float32)


def _sample(nargs: int, seed: int) -> list[np.ndarray]:
    """Every pair of SPECIAL values, a stride through all bit patterns, normal values with
    small integer exponents."""
    rng = np.random.default_rng(seed)
    n = SPECIAL.size
    sweep = (np.arange(1 << 14, dtype=np.uint64) * 262147 % 2 ** 32).astype(np.uint32)
    x = np.concatenate([np.repeat(SPECIAL, n), sweep.view(np.float32),
                        rng.standard_normal(4096).astype(np.float32) * 4])
    if nargs == 1:
        return [x]
    y = np.concatenate([np.tile(SPECIAL, n), rng.permutation(sweep).view(np.float32),
                        rng.integers(-9, 10, 4096).astype(np.float32)])
    return [x, y]


def _run(name: str, xs: list[np.ndarray], mode: str) -> tuple[np.ndarray, np.ndarray, str]:
    mod = module([Shape.array(ET.F32, xs[0].shape)] * len(xs), lambda c, p: op(c, name, p))
    opts = {"denormal": mode}
    with np.errstate(all="ignore"):
        want = np.asarray(InterpreterBackend().compile(mod, opts).run(xs))
        exe = CpuBackend().compile(mod, opts)
        got = np.asarray(exe.run(xs))
    assert not exe.fallbacks()
    return got, want, exe.kernel_ir


def _same_bits(got: np.ndarray, want: np.ndarray, xs: list[np.ndarray], what: str) -> None:
    bad = ~((got == want) & (np.signbit(got) == np.signbit(want))
            | (np.isnan(got) & np.isnan(want)))
    if bad.any():
        i = int(np.argmax(bad))
        raise AssertionError(f"{what}: {int(bad.sum())} differ; e.g. {[x[i] for x in xs]}: "
                             f"got {got[i]!r}, interpreter {want[i]!r}")


@pytest.mark.parametrize("mode", [denormal.IEEE, denormal.FTZ])
@pytest.mark.parametrize("name,nargs", [("atan2", 2), ("power", 2), ("cbrt", 1)])
def test_f32_libm_functions_are_vector_code_with_the_interpreters_bits(
        name: str, nargs: int, mode: str) -> None:
    xs = _sample(nargs, 3)
    got, want, ir = _run(name, xs, mode)
    _same_bits(got, want, xs, f"{name} {mode}")
    for fn in ("atan2f", "powf", "cbrtf", "@atan2(", "@pow(", "@cbrt("):
        assert fn not in ir, f"{name}: a libm call ({fn}) is left in the kernel"


def test_f32_power_special_cases() -> None:
    """C99's table (what glibc's powf returns), checked against literal values. (Not 2^-150:
    an exact tie, which exp(y log x) to 2^-45 may round either way; libm_f32.py.)"""
    inf, nan = np.inf, np.nan
    cases = [(nan, 0.0, 1.0), (1.0, nan, 1.0), (-1.0, inf, 1.0), (-1.0, -inf, 1.0),
             (-0.0, -3.0, -inf), (-0.0, -2.0, inf), (0.0, -0.5, inf), (-0.0, 3.0, -0.0),
             (-0.0, 0.5, 0.0), (-inf, 3.0, -inf), (-inf, 0.5, inf), (-inf, -3.0, -0.0),
             (-inf, -2.0, 0.0), (0.5, -inf, inf), (2.0, -inf, 0.0), (0.5, inf, 0.0),
             (-2.0, inf, inf), (-8.0, 1 / 3, nan), (-2.0, 3.0, -8.0), (-2.0, -2.0, 0.25),
             (2.0, 128.0, inf), (2.0, -151.0, 0.0), (2.0, -149.0, 1e-45),
             (-16777216.0, 16777217.0, inf)]
    x, y, want = (np.array(c, np.float32) for c in zip(*cases))
    got, ref, _ = _run("power", [x, y], denormal.IEEE)
    _same_bits(got, want, [x, y], "power vs C99")
    _same_bits(ref, want, [x, y], "interpreter power vs C99")


ROW_POWER = """
func.func @main(%x: tensor<{n}xf32>, %e: tensor<{c}xf32>) -> tensor<{n}x{c}xf32> {{
  %xb = stablehlo.broadcast_in_dim %x, dims = [0] : (tensor<{n}xf32>) -> tensor<{n}x{c}xf32>
  %eb = stablehlo.broadcast_in_dim %e, dims = [1] : (tensor<{c}xf32>) -> tensor<{n}x{c}xf32>
  %p = stablehlo.power %xb, %eb : tensor<{n}x{c}xf32>
  return %p : tensor<{n}x{c}xf32>
}}
"""


@pytest.mark.parametrize("mode", [denormal.IEEE, denormal.FTZ])
@pytest.mark.parametrize("c", [16, 40, 6])
def test_a_base_uniform_along_the_row_takes_its_log_once(mode: str, c: int) -> None:
    """x[:, None] ** e[None, :]: the base's log computed once per row (power_base, hoisted
    out of the row's loop), each lane's exponent applied to it (power_of); rows of 6 run
    flat, each lane's base its own. The interpreter's bits on every special pair."""
    e = np.resize(SPECIAL, c)
    text = ROW_POWER.format(n=SPECIAL.size, c=c)
    with np.errstate(all="ignore"):
        got = np.asarray(xlapy.compile(text, backend="cpu", options={"denormal": mode})(
            SPECIAL, e))
        want = np.asarray(xlapy.compile(text, backend="interpreter",
                                        options={"denormal": mode})(SPECIAL, e))
    xs = np.broadcast_arrays(SPECIAL[:, None], e[None, :])
    _same_bits(got.ravel(), want.ravel(), [v.ravel() for v in xs], f"row power {mode}")


@pytest.mark.parametrize("t", ["f32", "bf16"])
@pytest.mark.parametrize("name", ["chlo.asin", "chlo.acos"])
def test_f32_asin_acos_lower_to_a_polynomial(name: str, t: str) -> None:
    """No atan2 (an f64 libm call a lane) in the lowered kernel; the ends and the branch
    point of the reduction, signed zeros and out-of-domain values; within 1 ulp of the f64
    result rounded once."""
    g = HloBuilder()
    x = g.param(f"{t}[64]")
    m = g.build(g.op(name, x))
    v = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, np.nextafter(0.5, 1), 1.0000001, -2.0, np.nan,
                  1e-30, -1e-30, 0.99999994, -0.99999994] + list(np.linspace(-1, 1, 50)),
                 np.float32)
    arg = v.astype(np.float32 if t == "f32" else "bfloat16")
    exe = xlapy.compile(m, backend="cpu")
    assert not exe._exe.fallbacks()
    assert "atan2" not in exe._exe.kernel_ir and "@atan2(" not in exe._exe.kernel_ir
    got = np.asarray(exe(arg), np.float64)
    fn = np.arcsin if name == "chlo.asin" else np.arccos
    with np.errstate(invalid="ignore"):
        ref = fn(arg.astype(np.float64)).astype(arg.dtype).astype(np.float64)
    ok = (got == ref) | (np.isnan(got) & np.isnan(ref))
    ulp = np.spacing(np.abs(ref).astype(arg.dtype)).astype(np.float64)
    ok |= np.abs(got - ref) <= ulp
    assert ok.all(), (arg[~ok], got[~ok], ref[~ok])
    assert np.array_equal(np.signbit(got[:2]), np.signbit(ref[:2]))  # (acos(+-0) = +pi/2)


@pytest.mark.parametrize("mode", [denormal.IEEE, denormal.FTZ])
def test_f32_fmod_exact_in_f64(mode: str) -> None:
    """fmod's vector path (quotients below 2^29) and its exact fallback lanes in one vector:
    exact multiples and their neighbours (the f64 quotient rounding up to an integer),
    quotients around 2^29, subnormal remainders (kept in the ftz mode too: fmod does not
    flush), signed zeros, inf / NaN / zero divisors; the interpreter's bits."""
    rng = np.random.default_rng(5)
    y = rng.uniform(0.01, 100, 4096).astype(np.float32) * rng.choice([-1, 1], 4096)
    k = rng.integers(1, 1 << 20, 4096).astype(np.float32)
    x = (k.astype(np.float64) * y).astype(np.float32)
    x[1::3] = np.nextafter(x[1::3], np.float32(np.inf))
    x[2::3] = np.nextafter(x[2::3], np.float32(-np.inf))
    x[:64] = y[:64] * np.float32(2.0 ** 29) * rng.uniform(0.99, 1.01, 64).astype(np.float32)
    x[64:128] = (rng.integers(1, 1 << 23, 64).astype(np.uint32)).view(np.float32)  # subnormal
    y[64:96] = np.float32(3e-39) * rng.uniform(0.5, 1.0, 32).astype(np.float32)
    x[128:140] = [0.0, -0.0, np.inf, -np.inf, np.nan, 5.0, -5.0, 1e30, -7.0, 7.0, 3.0, -3.0]
    y[128:140] = [3.0, 3.0, 2.0, 2.0, 2.0, 0.0, np.inf, 1e-30, -np.inf, np.nan, 1.5, -1.5]
    got, want, _ = _run("remainder", [x, y], mode)
    _same_bits(got, want, [x, y], f"remainder {mode}")
    assert (got[64:128] != 0).sum() > 32  # subnormal remainders survive the ftz mode
