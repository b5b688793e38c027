"""widened_rows.py: in a bf16 softmax (`exp` summed through an f32 convert, then divided), the
divide reads the exp back from the f32 copy, so the row kernel keeps that row once (its row
cache) instead of computing the exp chain twice - with the interpreter's bits; users that
would see a signaling NaN's payload are left alone."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.widened_rows import ShareWidenedRows, shared_widening
from xlapy.stablehlo import parse_module

_SOFTMAX = """func.func @main(%x: tensor<6x70x{t}>) -> tensor<6x70x{t}> {{
  %c = stablehlo.constant dense<0xFF80> : tensor<{t}>
  %m = stablehlo.reduce(%x init: %c) applies stablehlo.maximum across dimensions = [1]
      : (tensor<6x70x{t}>, tensor<{t}>) -> tensor<6x{t}>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<6x{t}>) -> tensor<6x70x{t}>
  %d = stablehlo.subtract %x, %mb : tensor<6x70x{t}>
  %e = stablehlo.exponential %d : tensor<6x70x{t}>
  %w = stablehlo.convert %e : (tensor<6x70x{t}>) -> tensor<6x70xf32>
  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = stablehlo.reduce(%w init: %z) applies stablehlo.add across dimensions = [1]
      : (tensor<6x70xf32>, tensor<f32>) -> tensor<6xf32>
  %sn = stablehlo.convert %s : (tensor<6xf32>) -> tensor<6x{t}>
  %sb = stablehlo.broadcast_in_dim %sn, dims = [0] : (tensor<6x{t}>) -> tensor<6x70x{t}>
  %r = stablehlo.{user} %e, %sb : tensor<6x70x{t}>
  return %r : tensor<6x70x{t}>
}}"""
_TYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}


def _text(t: str = "bf16", user: str = "divide") -> str:
    return _SOFTMAX.format(t=t, user=user)


def _input(t: str) -> np.ndarray:
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((6, 70)) * 4).astype(np.float32)
    x[1, 3], x[2, 0], x[3, 69], x[4, 10] = np.inf, -np.inf, np.nan, 1e-40
    return x.astype(_TYPES[t])


@pytest.mark.parametrize("t", ["bf16", "f16"])
@pytest.mark.parametrize("user", ["divide", "multiply"])
def test_one_kernel_keeps_the_row_and_matches_the_interpreter(t: str, user: str) -> None:
    text = _text(t, user)
    prog = xlapy.compile(text, backend="cpu")
    kernels = [ln for ln in prog._exe.explain().splitlines() if " kernel " in ln]
    assert len(kernels) == 1, kernels
    assert "rowbuf." in prog._exe.kernel_ir  # the exp row is computed once, kept on the stack
    x = _input(t)
    want = xlapy.compile(text, backend="interpreter")(x)
    np.testing.assert_array_equal(prog(x).view(np.uint16), want.view(np.uint16))


def test_pass_rewrites_arithmetic_users_only() -> None:
    mod = parse_module(_text())
    comp = mod.entry_computation()
    assert ShareWidenedRows().run(mod)
    div = comp.root
    assert div.operands[0].opcode == "convert" and div.operands[0].name.endswith(".back")
    assert div.operands[0].operands[0].opcode == "convert"  # the f32 copy the sum reads
    # a user that keeps the bits (a signaling NaN would be quieted by the round trip)
    keep = parse_module(_text().replace(
        "%r = stablehlo.divide %e, %sb : tensor<6x70xbf16>",
        "%r = stablehlo.bitcast_convert %e : (tensor<6x70xbf16>) -> tensor<6x70xi16>").replace(
        "-> tensor<6x70xbf16> {\n", "-> tensor<6x70xi16> {\n").replace(
        "return %r : tensor<6x70xbf16>", "return %r : tensor<6x70xi16>"))
    conv = next(i for i in keep.entry_computation().instructions
                if i.opcode == "convert" and i.shape.element_type.name == "F32"
                and i.shape.rank == 2)
    assert shared_widening(conv) is None
    assert not ShareWidenedRows().run(keep)
