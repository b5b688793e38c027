"""ConditionalSimplifier: a `case`/`if` whose index is a constant becomes its taken branch
(an index outside [0, N) takes the last, as the op runs it), also once constant folding has
made the index constant (jnp.linalg.det's gradient: a case on another case's result); the
values are the op's."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.passes.conditional_simplifier import ConditionalSimplifier
from xlapy.passes.pass_base import run_passes
from xlapy.passes.pipelines import backend_pipeline
from xlapy.stablehlo import parse_module

CASE = """
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {{
  %i = stablehlo.constant dense<{index}> : tensor<i32>
  %r = "stablehlo.case"(%i) ({{
    %a = stablehlo.multiply %x, %x : tensor<8xf32>
    stablehlo.return %a : tensor<8xf32>
  }}, {{
    %b = stablehlo.negate %x : tensor<8xf32>
    stablehlo.return %b : tensor<8xf32>
  }}, {{
    %e = stablehlo.sine %x : tensor<8xf32>
    stablehlo.return %e : tensor<8xf32>
  }}) : (tensor<i32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}}
"""

# The index is a case's result on a literal: constant only after folding that one; the
# outer case's first branch holds a reduce, so ConditionalToSelect leaves it alone.
NESTED = """
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c = stablehlo.constant dense<1> : tensor<i32>
  %i = "stablehlo.case"(%c) ({
    %k0 = stablehlo.constant dense<0> : tensor<i32>
    stablehlo.return %k0 : tensor<i32>
  }, {
    %k1 = stablehlo.constant dense<1> : tensor<i32>
    stablehlo.return %k1 : tensor<i32>
  }) : (tensor<i32>) -> tensor<i32>
  %r = "stablehlo.case"(%i) ({
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %t = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0]
      : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
    %s = stablehlo.broadcast_in_dim %t, dims = [] : (tensor<f32>) -> tensor<8xf32>
    stablehlo.return %s : tensor<8xf32>
  }, {
    %n = stablehlo.negate %x : tensor<8xf32>
    stablehlo.return %n : tensor<8xf32>
  }) : (tensor<i32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}
"""

IF = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %p = stablehlo.constant dense<{pred}> : tensor<i1>
  %r = "stablehlo.if"(%p) ({{
    %a = stablehlo.exponential %x : tensor<4xf32>
    stablehlo.return %a : tensor<4xf32>
  }}, {{
    %b = stablehlo.abs %x : tensor<4xf32>
    stablehlo.return %b : tensor<4xf32>
  }}) : (tensor<i1>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}}
"""


def _opcodes(text: str, passes: list) -> list[str]:
    module = parse_module(text)
    run_passes(module, passes)
    return [i.opcode for i in module.entry.instructions]


def _same_as_interpreter(text: str, x: np.ndarray) -> None:
    want = xlapy.compile(text, backend="interpreter")(x)
    for backend in ("cpu", "interpreter"):  # (the interpreter runs no backend passes)
        np.testing.assert_array_equal(np.asarray(xlapy.compile(text, backend=backend)(x)),
                                      want)


@pytest.mark.parametrize("index", [0, 1, 2, 3, -1, 2147483647])
def test_a_constant_case_index_inlines_the_taken_branch(index: int) -> None:
    text = CASE.format(index=index)
    ops = _opcodes(text, [ConditionalSimplifier()])
    assert "case" not in ops
    want = {0: "multiply", 1: "negate"}.get(index, "sine")  # outside [0, 3): the last
    assert want in ops and not {"multiply", "negate", "sine"} - {want} & set(ops)
    _same_as_interpreter(text, np.linspace(-2, 2, 8, dtype=np.float32))


@pytest.mark.parametrize("pred", ["true", "false"])
def test_a_constant_if_inlines_its_branch(pred: str) -> None:
    text = IF.format(pred=pred)
    ops = _opcodes(text, [ConditionalSimplifier()])
    assert "if" not in ops and ("exponential" if pred == "true" else "abs") in ops
    _same_as_interpreter(text, np.array([-1.5, 0.0, 2.0, -0.25], np.float32))


def test_an_index_made_constant_by_folding_goes_too() -> None:
    """The backend pipeline folds the inner case, then inlines the outer one's branch: no
    conditional is left to run as sub-executables."""
    module = parse_module(NESTED)
    backend_pipeline().run(module)
    assert not {"case", "if"} & {i.opcode for i in module.entry.instructions}
    _same_as_interpreter(NESTED, np.linspace(-1, 1, 8, dtype=np.float32)[::-1].copy())


def test_a_computed_index_stays_a_conditional() -> None:
    text = CASE.format(index=0).replace(
        "%i = stablehlo.constant dense<0> : tensor<i32>",
        "%i = stablehlo.convert %x0 : (tensor<f32>) -> tensor<i32>").replace(
        "%x: tensor<8xf32>) ->", "%x: tensor<8xf32>, %x0: tensor<f32>) ->")
    assert "case" in _opcodes(text, [ConditionalSimplifier()])
