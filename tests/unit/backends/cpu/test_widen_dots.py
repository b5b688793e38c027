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


_TINY = {"f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E5M2": ml_dtypes.float8_e5m2,
         "f8E4M3FNUZ": ml_dtypes.float8_e4m3fnuz, "f4E2M1FN": ml_dtypes.float4_e2m1fn,
         "f8E8M0FNU": ml_dtypes.float8_e8m0fnu}


@pytest.mark.parametrize("a,b,r,widened", [
    ("f8E4M3FN", "f8E4M3FN", "f32", True), ("f8E5M2", "f8E4M3FN", "bf16", True),
    ("f8E4M3FN", "f8E4M3FN", "f8E4M3FN", True), ("f8E4M3FNUZ", "f32", "f32", True),
    ("f4E2M1FN", "f4E2M1FN", "f32", True), ("f8E5M2", "f8E5M2", "f8E5M2", True),
    ("f4E2M1FN", "f4E2M1FN", "f4E2M1FN", False),  # saturating: the convert makes NaN -0
    ("f8E8M0FNU", "f8E8M0FNU", "f32", False)])  # 2^-127: an f32 denormal
def test_tiny_float_dots_widen_with_the_same_bits(a: str, b: str, r: str,
                                                   widened: bool) -> None:
    """8-, 6- and 4-bit float operands widen to f32 like bf16 (exact), converts in kernels:
    the library thunk widened them with ml_dtypes' casts, an element at a time (a 256 x 512
    @ 512 x 512 f8e4m3fn product 3.4 ms, XLA 1.4)."""
    types = {**_TYPES, **_TINY}
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 7, 33)) * 2).astype(np.float32)
    y = (rng.standard_normal((2, 33, 9)) * 2).astype(np.float32)
    x[0, 0, :4] = [np.nan, np.inf, -0.0, 1e-3]
    if "M0" in a:  # (no sign, no zero: powers of two from 2^-127)
        x, y = np.abs(x) + 2.0 ** -127, np.abs(y) + 2.0 ** -120
    x, y = x.astype(types[a]), y.astype(types[b])
    text = _DOT.format(a=a, b=b, r=r)
    dot = next(i for i in parse_module(text).entry_computation().instructions
               if i.opcode == "dot_general")
    assert widens(dot) == widened
    want = xlapy.compile(text, backend="interpreter")(x, y)
    got = xlapy.compile(text, backend="cpu")(x, y)
    assert got.dtype == want.dtype == types[r]
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


_CONV = """func.func @main(%x: tensor<2x9x11x{c}x{t}>, %w: tensor<3x3x{c}x16x{t}>)
    -> tensor<2x{h}x11x16x{t}> {{
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
      window = {{stride = [{s}, 1], pad = [[1, 1], [1, 1]], rhs_dilate = [1, 1]}}
      {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}}
      : (tensor<2x9x11x{c}x{t}>, tensor<3x3x{c}x16x{t}>) -> tensor<2x{h}x11x16x{t}>
  return %0 : tensor<2x{h}x11x16x{t}>
}}"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("t,c,s", [("f16", 8, 1), ("bf16", 8, 1), ("f16", 5, 2)])
def test_a_narrow_convolution_runs_in_f32_with_the_same_bits(
        monkeypatch: pytest.MonkeyPatch, t: str, c: int, s: int, threads: int) -> None:
    """Its nest read a padded f32 copy NumPy converted per call on one thread (f16 8x32x32x32
    3x3: 2.5 ms, widened 1.0): widened, the same sums round once as before."""
    from xlapy.backends.cpu import widen_dots

    text = _CONV.format(t=t, c=c, s=s, h=9 // s + (s > 1))
    rng = np.random.default_rng(5)
    x = _values((2, 9, 11, c), _TYPES[t], rng)
    w = (_values((3, 3, c, 16), np.float32, rng) * 0.3).astype(_TYPES[t])
    opts = {"num_threads": threads}
    prog = xlapy.compile(text, backend="cpu", options=opts)
    hows = {op: how for _, op, how in prog._exe.report}
    assert hows["convolution"] == "library conv-direct" and "convert" in hows
    with monkeypatch.context() as m:
        m.setattr(widen_dots, "widens", lambda i: i.opcode == "dot_general")
        narrow = xlapy.compile(text, backend="cpu", options=opts)
    assert "convert" not in {op for _, op, _ in narrow._exe.report}
    got, want = prog(x, w), narrow(x, w)
    assert got.dtype == _TYPES[t]
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    ref = xlapy.compile(text, backend="interpreter")(x, w).astype(np.float32)
    np.testing.assert_allclose(got.astype(np.float32), ref, rtol=1e-2, atol=1e-2)


def test_a_channels_first_narrow_convolution_is_left() -> None:
    """Widened it would take conv.py's kernel, which sums in another order."""
    text = """func.func @main(%x: tensor<2x8x12x12xf16>, %w: tensor<16x8x3x3xf16>)
        -> tensor<2x16x12x12xf16> {
      %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1],
          window = {stride = [1, 1], pad = [[1, 1], [1, 1]]}
          {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
          : (tensor<2x8x12x12xf16>, tensor<16x8x3x3xf16>) -> tensor<2x16x12x12xf16>
      return %0 : tensor<2x16x12x12xf16>
    }"""
    mod = parse_module(text)
    conv = next(i for i in mod.entry_computation().instructions if i.opcode == "convolution")
    assert not widens(conv) and not WidenNarrowDots().run(mod)
