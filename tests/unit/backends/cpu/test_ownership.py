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


_NATIVE_WHILE_TWICE = """HloModule m

cond {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x2 = f32[4] add(x, x)
  ROOT t = (s32[], f32[4]) tuple(i2, x2)
}

ENTRY main {
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, x)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  a = f32[4] get-tuple-element(w), index=1
  b = f32[4] get-tuple-element(w), index=1
  ROOT r = (f32[4], f32[4]) tuple(a, b)
}
"""


def test_native_while_results_are_kept_and_two_reads_of_one_element_are_two_arrays() -> None:
    """A native while's state buffers are fresh per call, so its elements need no per-call
    check (fori_loop: 30 -> 21 us a call); two get_tuple_elements of one element (no CSE on
    this path) are still two arrays."""
    from xlapy.backends import get_backend
    from xlapy.hlo_text import parse_hlo_module

    m = parse_hlo_module(_NATIVE_WHILE_TWICE, "m")
    exe = get_backend("cpu").compile_function(m, m.entry_computation())
    assert "native while loop" in exe.explain()
    assert exe._own == ("keep", "copy")
    a, b = exe.run([np.ones(4, np.float32)])
    assert a is not b and not np.shares_memory(a, b)
    a[...] = 7
    np.testing.assert_array_equal(b, np.full(4, 8, np.float32))
