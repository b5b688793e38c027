"""A bf16 rounding of a value known to hold no denormal is known to hold none either
(elementwise._bf16_round marks it), so the next op of a bf16 chain does not flush it again:
one flush per loaded input instead of one per op. The bits stay the interpreter's, in both
denormal modes, for values at the denormal boundary (2^-126 and its bf16 neighbours, f32
values that round up to it, denormals, specials)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from llvmlite import ir

import xlapy
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.llvm_util import F32
from xlapy.types import ElementType as ET

_CHAIN = """func.func @main(%x: tensor<512xbf16>, %y: tensor<512xbf16>) -> tensor<512xbf16> {
  %c = stablehlo.constant dense<0.99609375> : tensor<512xbf16>
  %0 = stablehlo.multiply %x, %c : tensor<512xbf16>
  %1 = stablehlo.subtract %0, %y : tensor<512xbf16>
  %2 = stablehlo.multiply %1, %c : tensor<512xbf16>
  %3 = stablehlo.add %2, %x : tensor<512xbf16>
  %4 = stablehlo.divide %3, %y : tensor<512xbf16>
  return %4 : tensor<512xbf16>
}"""


def _boundary_values(rng: np.random.Generator) -> np.ndarray:
    tiny = np.float32(2.0 ** -126)
    near = [tiny, -tiny, tiny * np.float32(1.0078125), tiny * np.float32(0.99609375),
            tiny * 3, tiny / 2, -tiny / 3, 1e-40, -1e-39, 0.0, -0.0, np.inf, -np.inf,
            np.nan, 1.0, -2.5, 3e38]
    x = rng.choice(np.array(near, np.float32), 512)
    x[::3] = (rng.standard_normal(171) * 2.0 ** -125).astype(np.float32)
    return x.astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("denormal", ["ftz", "ieee"])
def test_chain_at_the_denormal_boundary_matches_the_interpreter(denormal: str) -> None:
    rng = np.random.default_rng(7)
    x, y = _boundary_values(rng), _boundary_values(rng)
    opts = {"denormal": denormal}
    want = xlapy.compile(_CHAIN, backend="interpreter", options=opts)(x, y)
    got = xlapy.compile(_CHAIN, backend="cpu", options=opts)(x, y)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_rounding_keeps_the_flushed_mark() -> None:
    b = ir.IRBuilder(ir.Function(ir.Module(), ir.FunctionType(F32, [F32]), "f")
                     .append_basic_block())
    arg = b.function.args[0]
    assert not ew.is_flushed(ew.round_to(b, arg, ET.BF16))  # a loaded value may be denormal
    assert ew.is_flushed(ew.round_to(b, b.fmul(arg, arg), ET.BF16))  # FTZ arithmetic
    assert ew.is_flushed(ew.round_to(b, ew.flush(b, arg), ET.BF16))
