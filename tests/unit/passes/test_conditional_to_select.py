"""ConditionalToSelect: small pure `case`/`if` become selects with the taken branch's bits
(out-of-range case indices pick the last branch), anything else stays a conditional; a
`lax.cond` in a loop body leaves the loop native on the cpu backend."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import target
from xlapy.interpreter import Interpreter
from xlapy.passes.conditional_to_select import (
    MAX_DOT_FLOPS,
    MAX_ELEMENTS,
    MAX_GUARDED_FLOPS,
    ConditionalToSelect,
)
from xlapy.passes.pass_base import run_passes
from xlapy.stablehlo import parse_module

CASE3 = """
func.func @main(%i: tensor<i32>, %x: tensor<8xf32>, %y: tensor<8xi32>)
    -> (tensor<8xf32>, tensor<8xi32>) {
  %r:2 = "stablehlo.case"(%i) ({
    %a = stablehlo.multiply %x, %x : tensor<8xf32>
    stablehlo.return %a, %y : tensor<8xf32>, tensor<8xi32>
  }, {
    %b = stablehlo.negate %x : tensor<8xf32>
    %c = stablehlo.add %y, %y : tensor<8xi32>
    stablehlo.return %b, %c : tensor<8xf32>, tensor<8xi32>
  }, {
    %z = stablehlo.constant dense<0> : tensor<8xi32>
    %d = stablehlo.divide %y, %z : tensor<8xi32>
    %e = stablehlo.sqrt %x : tensor<8xf32>
    stablehlo.return %e, %d : tensor<8xf32>, tensor<8xi32>
  }) : (tensor<i32>) -> (tensor<8xf32>, tensor<8xi32>)
  return %r#0, %r#1 : tensor<8xf32>, tensor<8xi32>
}
"""

IF = """
func.func @main(%p: tensor<i1>, %x: tensor<4x3xf64>) -> tensor<4x3xf64> {
  %r = "stablehlo.if"(%p) ({
    %a = stablehlo.exponential %x : tensor<4x3xf64>
    stablehlo.return %a : tensor<4x3xf64>
  }, {
    %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<4x3xf64>) -> tensor<3x4xf64>
    %b = stablehlo.reshape %t : (tensor<3x4xf64>) -> tensor<4x3xf64>
    stablehlo.return %b : tensor<4x3xf64>
  }) : (tensor<i1>) -> tensor<4x3xf64>
  return %r : tensor<4x3xf64>
}
"""


def _converted(text: str) -> tuple[object, object, bool]:
    before = parse_module(text)
    after = parse_module(text)
    changed = run_passes(after, [ConditionalToSelect()])
    return before, after, changed


def _opcodes(module: object) -> set[str]:
    return {i.opcode for i in module.entry.instructions}  # type: ignore[attr-defined]


@pytest.mark.parametrize("i", [-5, 0, 1, 2, 3, 2**31 - 1])
def test_case_selects_the_taken_branch_bit_for_bit(i: int) -> None:
    before, after, changed = _converted(CASE3)
    assert changed and "case" not in _opcodes(after) and "select" in _opcodes(after)
    x = np.array([-2.0, -0.0, 0.0, 1.5, np.nan, np.inf, -np.inf, 1e-40], np.float32)
    y = np.arange(-4, 4, dtype=np.int32)
    args = [np.int32(i), x, y]
    want = Interpreter().run_module(before, args)
    got = Interpreter().run_module(after, args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint32),
                                      np.asarray(w).view(np.uint32))


@pytest.mark.parametrize("p", [True, False])
def test_if_selects_on_its_pred(p: bool) -> None:
    before, after, changed = _converted(IF)
    assert changed and "if" not in _opcodes(after)
    x = np.random.default_rng(1).standard_normal((4, 3))
    args = [np.bool_(p), x]
    np.testing.assert_array_equal(np.asarray(Interpreter().run_module(after, args)),
                                  np.asarray(Interpreter().run_module(before, args)))


@pytest.mark.parametrize("body", [
    # a reduce (a called computation)
    "%z = stablehlo.constant dense<0.0> : tensor<f32>\n"
    "    %a = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0] : "
    "(tensor<8xf32>, tensor<f32>) -> tensor<f32>\n"
    "    %b = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<8xf32>",
])
def test_branches_with_other_ops_stay_conditionals(body: str) -> None:
    text = f"""
func.func @main(%i: tensor<i32>, %x: tensor<8xf32>) -> tensor<8xf32> {{
  %r = "stablehlo.case"(%i) ({{
    {body}
    stablehlo.return %b : tensor<8xf32>
  }}, {{
    stablehlo.return %x : tensor<8xf32>
  }}) : (tensor<i32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}}
"""
    _, after, changed = _converted(text)
    assert not changed and "case" in _opcodes(after)


def test_big_branches_stay_conditionals() -> None:
    n = MAX_ELEMENTS
    text = IF.replace("4x3", f"{n}x2").replace("3x4", f"2x{n}")
    _, after, changed = _converted(text)
    assert not changed and "if" in _opcodes(after)


def test_a_cond_in_a_fori_loop_runs_natively() -> None:
    """JAX's fori_loop over a lax.cond: the body is kernels only, so the loop is native."""
    text = """
func.func @main(%x: tensor<256xf32>) -> tensor<256xf32> {
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %i0, %v = %x) : tensor<i32>, tensor<256xf32>
    cond {
      %n = stablehlo.constant dense<1000> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %two = stablehlo.constant dense<2> : tensor<i32>
      %m = stablehlo.remainder %i, %two : tensor<i32>
      %w = "stablehlo.case"(%m) ({
        %h = stablehlo.constant dense<0.5> : tensor<256xf32>
        %a = stablehlo.multiply %v, %h : tensor<256xf32>
        stablehlo.return %a : tensor<256xf32>
      }, {
        %q = stablehlo.constant dense<0.25> : tensor<256xf32>
        %b = stablehlo.add %v, %q : tensor<256xf32>
        stablehlo.return %b : tensor<256xf32>
      }) : (tensor<i32>) -> tensor<256xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %i1, %w : tensor<i32>, tensor<256xf32>
    }
  return %r#1 : tensor<256xf32>
}
"""
    x = np.random.default_rng(2).standard_normal(256).astype(np.float32)
    prog = xlapy.compile(text, "cpu")
    assert "native while loop" in prog._exe.explain()  # type: ignore[attr-defined]
    np.testing.assert_array_equal(np.asarray(prog(x)),
                                  np.asarray(xlapy.compile(text, "interpreter")(x)))


#: lax.fori_loop(0, 5, lambda i, w: lax.switch(i % 3, [w * 0.5, w + 1, tanh(w)])) on 65536
#: floats: 3 x 65536 elements of arithmetic, and as many again of parameters, broadcast
#: constants and results that a fused kernel does not compute.
SWITCH = """
func.func @main(%x: tensor<65536xf32>) -> tensor<65536xf32> {
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %i0, %v = %x) : tensor<i32>, tensor<65536xf32>
    cond {
      %n = stablehlo.constant dense<5> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %three = stablehlo.constant dense<3> : tensor<i32>
      %m = stablehlo.remainder %i, %three : tensor<i32>
      %w = "stablehlo.case"(%m) ({
        %h = stablehlo.constant dense<0.5> : tensor<65536xf32>
        %a = stablehlo.multiply %v, %h : tensor<65536xf32>
        stablehlo.return %a : tensor<65536xf32>
      }, {
        %q = stablehlo.constant dense<1.0> : tensor<65536xf32>
        %b = stablehlo.add %v, %q : tensor<65536xf32>
        stablehlo.return %b : tensor<65536xf32>
      }, {
        %t = stablehlo.tanh %v : tensor<65536xf32>
        stablehlo.return %t : tensor<65536xf32>
      }) : (tensor<i32>) -> tensor<65536xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %i1, %w : tensor<i32>, tensor<65536xf32>
    }
  return %r#1 : tensor<65536xf32>
}
"""


def test_only_computed_elements_count() -> None:
    """Parameters, broadcast constants and tuples are free in a fused kernel: the switch's
    3 x 65536 elements of arithmetic fit the budget and its loop runs natively (it was a
    call per branch each iteration: 2.4x XLA's time)."""
    assert 3 * 65536 <= MAX_ELEMENTS < 6 * 65536
    x = np.random.default_rng(5).standard_normal(65536).astype(np.float32)
    prog = xlapy.compile(SWITCH, "cpu")
    explained = prog._exe.explain()  # type: ignore[attr-defined]
    assert "native while loop" in explained and "case" not in explained
    np.testing.assert_array_equal(np.asarray(prog(x)), np.asarray(prog(x)))
    np.testing.assert_allclose(np.asarray(prog(x)),
                               np.asarray(xlapy.compile(SWITCH, "interpreter")(x)),
                               rtol=2e-6, atol=0)


#: A fori_loop whose body squares the matrix while the step is below a bound (the squaring
#: loop of jax.scipy.linalg.expm): a cond between x @ x and x.
SQUARING = """
func.func @main(%x: tensor<{n}x{n}xf32>, %k: tensor<i32>) -> tensor<{n}x{n}xf32> {{
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %i0, %v = %x) : tensor<i32>, tensor<{n}x{n}xf32>
    cond {{
      %n = stablehlo.constant dense<8> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }} do {{
      %q = stablehlo.compare LT, %i, %k, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c = stablehlo.convert %q : (tensor<i1>) -> tensor<i32>
      %w = "stablehlo.case"(%c) ({{
        stablehlo.return %v : tensor<{n}x{n}xf32>
      }}, {{
        %s = stablehlo.dot_general %v, %v, contracting_dims = [1] x [0]
          : (tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32>
        stablehlo.return %s : tensor<{n}x{n}xf32>
      }}) : (tensor<i32>) -> tensor<{n}x{n}xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %i1, %w : tensor<i32>, tensor<{n}x{n}xf32>
    }}
  return %r#1 : tensor<{n}x{n}xf32>
}}
"""


@pytest.mark.parametrize("k", [0, 3, 8])
def test_a_small_dot_branch_becomes_a_select_and_its_loop_runs_natively(k: int) -> None:
    """A branch of a few dot flops is computed for nothing cheaper than it is dispatched:
    the loop around it was a Python loop of sub-executables (expm on 6 x 6: 750 us)."""
    text = SQUARING.format(n=6)
    _, after, changed = _converted(text)
    assert changed
    x = (np.random.default_rng(3).standard_normal((6, 6)) * 0.5).astype(np.float32)
    prog = xlapy.compile(text, "cpu")
    assert "native while loop" in prog._exe.explain()  # type: ignore[attr-defined]
    ref = xlapy.compile(text, "interpreter")
    want = np.asarray(ref(x, np.int32(k)))
    # (a target without FMA, x86-64-v2, rounds each product: not BLAS's bits, and where
    # 8 squarings overflow, other infinities and NaNs)
    fma = target.current().has("fma")
    if fma or np.isfinite(want).all():
        np.testing.assert_allclose(np.asarray(prog(x, np.int32(k))), want,
                                   rtol=0 if fma else 1e-5, atol=0)


def test_a_big_dot_branch_stays_a_conditional() -> None:
    """In a loop body a dot that is only a branch's result counts against
    MAX_GUARDED_FLOPS (the cpu backend skips it when not picked: guarded_dots.py), any
    other dot against MAX_DOT_FLOPS."""
    n = 8
    while 2 * n ** 3 <= MAX_DOT_FLOPS:
        n *= 2
    assert _converted(SQUARING.format(n=n))[2]
    while 2 * n ** 3 <= MAX_GUARDED_FLOPS:
        n *= 2
    _, after, changed = _converted(SQUARING.format(n=n))
    assert not changed
