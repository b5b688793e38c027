"""f16 max, min, abs, negate, clamp, floor, ceil, the roundings and sign skip the per-op
rounding (exact on f16 values); f16 add,
subtract and multiply run as AVX512-FP16 instructions where the target
has them (native_half.py) with the bits of the f32-then-round form: every f16
value (all 65536 bit patterns: denormals, infinities, NaN, +-0) against operands that
round, overflow, underflow and cancel, in FTZ and IEEE modes, against the interpreter and
the f32 form compiled in the same process (divide too: it keeps the f32 form); chained
ops stay in half registers."""

from __future__ import annotations

import re

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import cache, native_half, target

OPS = ["add", "subtract", "multiply", "divide", "maximum", "minimum"]

BINARY = """
func.func public @main(%x: tensor<{n}xf16>, %y: tensor<{n}xf16>) -> tensor<{n}xf16> {{
  %r = stablehlo.{op} %x, %y : tensor<{n}xf16>
  return %r : tensor<{n}xf16>
}}
"""

CHAIN = """
func.func public @main(%x: tensor<4096xf16>) -> tensor<4096xf16> {
  %a = stablehlo.multiply %x, %x : tensor<4096xf16>
  %b = stablehlo.multiply %a, %x : tensor<4096xf16>
  %c = stablehlo.add %x, %b : tensor<4096xf16>
  %d = stablehlo.divide %c, %x : tensor<4096xf16>
  %e = stablehlo.tanh %d : tensor<4096xf16>
  %f = stablehlo.subtract %e, %x : tensor<4096xf16>
  return %f : tensor<4096xf16>
}
"""

#: Second operands: exact, rounding, huge (overflow), tiny (denormal results), specials.
_Y = [1.0, -1.0, 0.5, 3.0, -0.1, 0.333, 7.0e-5, -6.1e-5, 2.0 ** -24, 1.5e-7, 1.0e4, -65504.0,
      300.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 1.0009765625, 2047.0]


def _operands() -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    y = np.asarray(_Y, np.float16)
    return np.repeat(x, len(y)), np.tile(y, len(x))


def _bits(v: object) -> np.ndarray:
    """Bits, every NaN as one pattern (the interpreter's NaN payloads are NumPy's)."""
    a = np.asarray(v, np.float16)
    return np.where(np.isnan(a), np.float16(np.nan), a).view(np.uint16)


@pytest.mark.parametrize("mode", ["ftz", "ieee"])
@pytest.mark.parametrize("op", OPS)
def test_every_f16_value_has_the_f32_forms_bits(op: str, mode: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    x, y = _operands()
    text = BINARY.format(n=x.size, op=op)
    opts = {"num_threads": 2, "denormal": mode}
    cache.clear_memory()
    got = xlapy.compile(text, backend="cpu", options=opts)(x, y)
    with monkeypatch.context() as m:
        m.setattr(native_half, "emit", lambda *a: None)
        cache.clear_memory()
        f32_form = xlapy.compile(text, backend="cpu", options=opts)(x, y)
    ref = xlapy.compile(text, backend="interpreter", options=opts)(x, y)
    np.testing.assert_array_equal(_bits(got), _bits(f32_form))
    np.testing.assert_array_equal(_bits(got), _bits(ref))


UNARY = """
func.func public @main(%x: tensor<65536xf16>) -> (tensor<65536xf16>, tensor<65536xf16>) {
  %a = stablehlo.abs %x : tensor<65536xf16>
  %n = stablehlo.negate %x : tensor<65536xf16>
  %m = stablehlo.maximum %a, %n : tensor<65536xf16>
  %r = stablehlo.multiply %m, %n : tensor<65536xf16>
  return %m, %r : tensor<65536xf16>, tensor<65536xf16>
}
"""


ROUNDS = """
func.func public @main(%x: tensor<65536xf16>) -> (tensor<65536xf16>, tensor<65536xf16>) {
  %lo = stablehlo.constant dense<-3.5> : tensor<65536xf16>
  %hi = stablehlo.constant dense<1000.5> : tensor<65536xf16>
  %f = stablehlo.floor %x : tensor<65536xf16>
  %c = stablehlo.ceil %x : tensor<65536xf16>
  %a = stablehlo.round_nearest_afz %x : tensor<65536xf16>
  %e = stablehlo.round_nearest_even %x : tensor<65536xf16>
  %s = stablehlo.sign %x : tensor<65536xf16>
  %k = stablehlo.clamp %lo, %x, %hi : tensor<65536xf16>
  %0 = stablehlo.maximum %f, %c : tensor<65536xf16>
  %1 = stablehlo.minimum %a, %e : tensor<65536xf16>
  %2 = stablehlo.maximum %0, %1 : tensor<65536xf16>
  %3 = stablehlo.minimum %s, %k : tensor<65536xf16>
  return %2, %3 : tensor<65536xf16>, tensor<65536xf16>
}
"""


@pytest.mark.parametrize("mode", ["ftz", "ieee"])
@pytest.mark.parametrize("text", [UNARY, ROUNDS])
def test_exact_ops_of_every_f16_value(text: str, mode: str,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    x = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    opts = {"denormal": mode}
    cache.clear_memory()
    got = xlapy.compile(text, backend="cpu", options=opts)(x)
    ref = xlapy.compile(text, backend="interpreter", options=opts)(x)
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(_bits(g), _bits(r))


def test_a_chain_matches_the_f32_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    x = np.random.default_rng(3).standard_normal(4096).astype(np.float16)
    x[:6] = [0.0, -0.0, np.inf, np.nan, 6e-8, -65504.0]
    cache.clear_memory()
    got = xlapy.compile(CHAIN, backend="cpu")(x)
    with monkeypatch.context() as m:
        m.setattr(native_half, "emit", lambda *a: None)
        cache.clear_memory()
        f32_form = xlapy.compile(CHAIN, backend="cpu")(x)
    np.testing.assert_array_equal(_bits(got), _bits(f32_form))


@pytest.mark.parametrize("name, native", [("sapphirerapids", True), ("cooperlake", False),
                                          ("x86-64-v3", False)])
def test_half_instructions_only_with_avx512fp16(name: str, native: bool,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel's IR holds half arithmetic for an AVX512-FP16 target (compiled, not run:
    any machine), f32 arithmetic and conversions for the others."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    cache.clear_memory()
    with target.use(name):
        exe = xlapy.compile(CHAIN, backend="cpu")._exe
        text = exe.kernel_ir
    ops = [f"{o} <" for o in ("fmul", "fadd", "fsub", "fdiv")]
    half = [line for line in text.splitlines() if any(o in line for o in ops)
            and "x half>" in line]
    assert bool(half) == native, name
    if native:
        assert len(half) >= 4  # x*x, *x, +, - (the divide and the tanh in f32)
        assert not any("fdiv <" in line for line in half)


@pytest.mark.parametrize("name", ["cooperlake", "x86-64-v3"])
def test_exact_ops_are_not_rounded(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """abs, negate and maximum of f16 values narrow nothing: the only fptruncs left are the
    multiply's rounding and the two stores (there were six)."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    cache.clear_memory()
    with target.use(name):
        text = xlapy.compile(UNARY, backend="cpu")._exe.kernel_ir
    assert text.count("fptrunc") == 3


@pytest.mark.parametrize("name", ["cooperlake", "x86-64-v3"])
def test_roundings_sign_and_clamp_are_not_rounded(name: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """floor, ceil, both roundings, sign and clamp of f16 values (and the max / min that
    combine them) narrow nothing: the two stores' fptruncs are all (there were twelve)."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    cache.clear_memory()
    with target.use(name):
        text = xlapy.compile(ROUNDS, backend="cpu")._exe.kernel_ir
    assert text.count("fptrunc") == 2


def test_roundings_sign_and_clamp_in_half_with_avx512fp16(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """With AVX512-FP16 (compiled, not run: any machine) floor, ceil, the roundings and
    the clamp's max / min are half-vector intrinsics (vrndscaleph, vmaxph: no conversions
    around them; a chain of them ran at 1.8x XLA's time through f32)."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    cache.clear_memory()
    with target.use("sapphirerapids"):
        text = xlapy.compile(ROUNDS, backend="cpu")._exe.kernel_ir
    for name in ("floor", "ceil", "roundeven", "round", "maximum", "minimum", "copysign"):
        assert re.search(rf"@\"?llvm\.{name}\.v\d+f16\"?\(", text), name
