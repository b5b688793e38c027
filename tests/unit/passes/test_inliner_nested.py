"""CallInliner looks at call / composite / fusion / map instructions only (it used to take
the ids of every instruction of the computation for each instruction it looked at, inlined or
not: quadratic in the computation's size); bodies pasted in are still searched for calls."""

from __future__ import annotations

import numpy as np

import xlapy
from xlapy.interpreter import Interpreter
from xlapy.passes.dce import DeadCodeElimination
from xlapy.passes.inliner import CallInliner
from xlapy.passes.pass_base import run_passes

TEXT = """func.func private @inner(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = stablehlo.multiply %a, %a : tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func private @outer(%a: tensor<4xf32>) -> tensor<4xf32> {
  %c = func.call @inner(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %r = stablehlo.add %c, %a : tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.negate %x : tensor<4xf32>
  %1 = func.call @outer(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "stablehlo.map"(%1, %x) ({
  ^bb0(%p: tensor<f32>, %q: tensor<f32>):
    %s = stablehlo.subtract %p, %q : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {dimensions = array<i64: 0>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = stablehlo.abs %2 : tensor<4xf32>
  return %3 : tensor<4xf32>
}"""


def test_nested_calls_and_maps_are_all_inlined() -> None:
    m = xlapy.compile(TEXT).module
    x = np.array([1.0, -2.0, 3.0, 0.5], np.float32)
    before = np.asarray(Interpreter().run_module(m, [x]))
    assert run_passes(m, [CallInliner(), DeadCodeElimination()])
    ops = [i.opcode for i in m.entry.instructions]
    assert "call" not in ops and "map" not in ops
    np.testing.assert_array_equal(np.asarray(Interpreter().run_module(m, [x])), before)
    np.testing.assert_allclose(before, np.abs((-x) * (-x) + (-x) - x))


def test_nothing_to_inline_is_no_change() -> None:
    m = xlapy.compile("""func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.negate %x : tensor<4xf32>
  %1 = stablehlo.add %0, %x : tensor<4xf32>
  return %1 : tensor<4xf32>
}""").module
    assert not run_passes(m, [CallInliner()])
