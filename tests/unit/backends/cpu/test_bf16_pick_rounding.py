"""bf16 roundings of values that pick among loaded bf16s (a max / min / select / abs of
them: bf16_exact.is_bf16(signaling=True)) only quiet a NaN: the bits of the same kernels
with the whole rounding, signaling NaNs of both signs included, in both denormal modes;
quiet NaNs and the interpreter's bits elsewhere."""

from __future__ import annotations

import numpy as np
import pytest
from llvmlite import ir

from xlapy.backends.cpu import bf16_exact
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.llvm_util import F32
from xlapy.types import ElementType as ET

from .test_bf16_quiet_rounding import bf16_inputs, same_bits_fewer_lines

_T = "tensor<64x256xbf16>"
_R = "tensor<64xbf16>"
_PROGRAM = f"""
func.func public @main(%a: {_T}, %b: {_T}) -> ({_T}, {_T}, {_T}, {_T}, {_R}) {{
  %mx = stablehlo.maximum %a, %b : {_T}
  %zero = stablehlo.constant dense<0.0> : tensor<bf16>
  %zb = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<bf16>) -> {_T}
  %relu = stablehlo.maximum %b, %zb : {_T}
  %mn = stablehlo.minimum %a, %b : {_T}
  %ab = stablehlo.abs %a : {_T}
  %ninf = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %row = stablehlo.reduce(%mx init: %ninf) applies stablehlo.maximum across dimensions = [1]
    : ({_T}, tensor<bf16>) -> {_R}
  return %mx, %relu, %mn, %ab, %row : {_T}, {_T}, {_T}, {_T}, {_R}
}}
"""


def _inputs() -> list[np.ndarray]:
    xs = bf16_inputs(11)
    for k, x in enumerate(xs):
        x.view(np.uint16)[62, 3 + k] = 0xFF81  # one in a row of numbers (the row max's)
    return xs


@pytest.mark.parametrize("mode", ["ftz", "ieee"])
def test_picks_of_loaded_bf16s_only_quiet_their_nans(mode: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    whole = bf16_exact.is_bf16
    same_bits_fewer_lines(_PROGRAM, _inputs(), mode, monkeypatch, bf16_exact, "is_bf16",
                          lambda x, depth=6, signaling=False: not signaling and whole(x, depth))


def test_what_counts_as_a_pick_of_bf16s() -> None:
    vt = ir.VectorType(F32, 8)
    it = ir.VectorType(ir.IntType(16), 8)
    fn = ir.Function(ir.Module(), ir.FunctionType(vt, [vt, it, it]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    x, y = (ew.from_storage(b, a, ET.BF16) for a in fn.args[1:])
    mx = b.call(ir.Function(fn.module, ir.FunctionType(vt, [vt, vt]), "llvm.maximum.v8f32"),
                [x, y])
    assert not bf16_exact.is_bf16(mx)  # (a signaling NaN would pass through)
    assert bf16_exact.is_bf16(mx, signaling=True)
    assert bf16_exact.is_bf16(b.select(ir.Constant(ir.IntType(1), 1), mx, x), signaling=True)
    assert not bf16_exact.is_bf16(b.fadd(x, y), signaling=True)  # arithmetic rounds
    assert not bf16_exact.is_bf16(fn.args[0], signaling=True)  # an f32
    before = len(b.block.instructions)
    r = ew.round_to(b, mx, ET.BF16)
    assert bf16_exact.is_bf16(r)  # quieted: a bf16, and known as one
    assert len(b.block.instructions) - before == 5  # bitcast, fcmp, or, select, bitcast
