"""widen_dots.py: bf16/f16 dot_generals become f32 dots between converts on the cpu backend,
the same bits as the interpreter's narrow dot (specials and denormals included, both
denormal modes), and the converts fuse into the kernels around the dot."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.widen_dots import WidenNarrowDots, widens
from xlapy.stablehlo import parse_module

_TYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32,
          "f64": np.float64}
_DOT = """func.func @main(%a: tensor<2x7x33x{a}>, %b: tensor<2x33x9x{b}>) -> tensor<2x7x9x{r}> {{
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      : (tensor<2x7x33x{a}>, tensor<2x33x9x{b}>) -> tensor<2x7x9x{r}>
  return %0 : tensor<2x7x9x{r}>
}}"""
#: A narrow dot between element-wise ops: the converts have kernels to join.
_CHAIN = """func.func @main(%a: tensor<64x32xbf16>, %b: tensor<32x48xbf16>) -> tensor<64x48xbf16> {
  %0 = stablehlo.exponential %a : tensor<64x32xbf16>
  %1 = stablehlo.dot_general %0, %b, contracting_dims = [1] x [0]
      : (tensor<64x32xbf16>, tensor<32x48xbf16>) -> tensor<64x48xbf16>
  %2 = stablehlo.tanh %1 : tensor<64x48xbf16>
  return %2 : tensor<64x48xbf16>
}"""


def _values(shape: tuple[int, ...], dtype: type, rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal(shape).astype(np.float32) * 3
    flat = x.reshape(-1)
    specials = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-39, -3e-40, 6e4, -6e4]
    flat[rng.integers(0, flat.size, 12)] = rng.choice(specials, 12)
    return x.astype(dtype)


@pytest.mark.parametrize("denormal", ["ftz", "ieee"])
@pytest.mark.parametrize("a,b,r", [("bf16", "bf16", "bf16"), ("f16", "f16", "f16"),
                                   ("bf16", "bf16", "f32"), ("bf16", "f32", "f32"),
                                   ("f16", "f16", "f32"), ("bf16", "f16", "f16")])
def test_widened_dot_matches_the_interpreter_bit_for_bit(a: str, b: str, r: str,
                                                          denormal: str) -> None:
    rng = np.random.default_rng(3)
    x, y = _values((2, 7, 33), _TYPES[a], rng), _values((2, 33, 9), _TYPES[b], rng)
    text = _DOT.format(a=a, b=b, r=r)
    opts = {"denormal": denormal}
    want = xlapy.compile(text, backend="interpreter", options=opts)(x, y)
    got = xlapy.compile(text, backend="cpu", options=opts)(x, y)
    assert got.dtype == want.dtype == _TYPES[r]
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_pass_rewrites_narrow_dots_only() -> None:
    mod = parse_module(_DOT.format(a="bf16", b="bf16", r="bf16"))
    dot = next(i for i in mod.entry_computation().instructions if i.opcode == "dot_general")
    assert widens(dot)
    assert WidenNarrowDots().run(mod)
    ops = [(i.opcode, str(i.shape.element_type)) for i in mod.entry_computation().instructions
           if i.opcode != "parameter"]
    assert ops.count(("convert", "f32")) == 2 and ("dot_general", "f32") in ops
    assert mod.entry_computation().root.opcode == "convert"
    for a, b, r in (("f32", "f32", "f32"), ("f64", "f64", "f64"), ("bf16", "bf16", "f64")):
        wide = parse_module(_DOT.format(a=a, b=b, r=r))
        assert not WidenNarrowDots().run(wide), (a, b, r)


def test_converts_fuse_into_the_neighbouring_kernels() -> None:
    # x86-64-v3: no AMX-BF16, whose dots take bf16 operands as they are (test_gemm_bf16.py)
    prog = xlapy.compile(_CHAIN, backend="cpu", options={"target": "x86-64-v3"})
    lines = prog._exe.explain().splitlines()
    kernels = [ln for ln in lines if " kernel " in ln]
    # exp stored as f32 for the dot (a convert kernel with the exp in it), the parameter b
    # widened, and tanh rounding the f32 product first: no kernel for exp or the rounding alone
    assert sorted(ln.split()[1] for ln in kernels) == ["convert", "convert", "tanh"], lines
    assert not any(ln.split()[0].endswith(".round") for ln in kernels), lines
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((64, 32)) * 0.5).astype(ml_dtypes.bfloat16)
    y = (rng.standard_normal((32, 48)) * 0.5).astype(ml_dtypes.bfloat16)
    want = xlapy.compile(_CHAIN, backend="interpreter")(x, y)
    np.testing.assert_array_equal(prog(x, y).view(np.uint16), want.view(np.uint16))
