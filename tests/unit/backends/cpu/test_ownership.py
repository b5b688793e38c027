"""Values the cpu executable hands to host code (outfeed entries, custom-call operands and
results) or returns never alias its reused arena of temporaries."""

from __future__ import annotations

import numpy as np

import xlapy
from xlapy.interpreter import RuntimeState
from xlapy.types.literal import TOKEN_VALUE

OUTFEEDS = """func.func @main(%x: tensor<64xf32>, %t: !stablehlo.token) -> !stablehlo.token {
  %a = stablehlo.multiply %x, %x : tensor<64xf32>
  %s = stablehlo.sine %a : tensor<64xf32>
  %tok = "stablehlo.outfeed"(%s, %t) {outfeed_config = ""}
      : (tensor<64xf32>, !stablehlo.token) -> !stablehlo.token
  %b = stablehlo.add %x, %x : tensor<64xf32>
  %e = stablehlo.exponential %b : tensor<64xf32>
  %tok2 = "stablehlo.outfeed"(%e, %tok) {outfeed_config = ""}
      : (tensor<64xf32>, !stablehlo.token) -> !stablehlo.token
  return %tok2 : !stablehlo.token
}"""
CUSTOM = """func.func @main(%x: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %a = stablehlo.multiply %x, %x : tensor<64xf32>
  %s = stablehlo.sine %a : tensor<64xf32>
  %c = stablehlo.custom_call @view(%s) : (tensor<64xf32>) -> tensor<64xf32>
  %n = stablehlo.negate %c : tensor<64xf32>
  %b = stablehlo.add %x, %x : tensor<64xf32>
  %e = stablehlo.exponential %b : tensor<64xf32>
  %d = stablehlo.custom_call @view(%e) : (tensor<64xf32>) -> tensor<64xf32>
  return %n, %d : tensor<64xf32>, tensor<64xf32>
}"""


def test_outfeed_entries_survive_the_next_call() -> None:
    exe = xlapy.compile(OUTFEEDS, backend="cpu")._exe
    x = np.linspace(0, 1, 64, dtype=np.float32)
    rt = RuntimeState()
    exe.run([x, TOKEN_VALUE], runtime=rt)
    first = [e.copy() for e in rt.outfeed]
    exe.run([x + 1, TOKEN_VALUE], runtime=rt)
    for got, want in zip(rt.outfeed[:2], first):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(first[0], np.sin(x * x), rtol=1e-5, atol=1e-6)


def test_custom_call_operands_and_view_results_are_not_the_arena() -> None:
    kept: list[np.ndarray] = []

    def view(operands: list[np.ndarray], shape: object, attrs: object) -> np.ndarray:
        kept.append(operands[0])
        return operands[0][...]  # a view of its operand

    exe = xlapy.compile(CUSTOM, backend="cpu")._exe
    x = np.linspace(0, 1, 64, dtype=np.float32)
    rt = RuntimeState(custom_calls={"view": view})
    n, d = exe.run([x], runtime=rt)
    n0, d0, k0 = n.copy(), d.copy(), [k.copy() for k in kept]
    exe.run([x + 1], runtime=rt)
    np.testing.assert_array_equal(n, n0)
    np.testing.assert_array_equal(d, d0)
    for got, want in zip(kept[:2], k0):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(d0, np.exp(x + x), rtol=1e-5)
