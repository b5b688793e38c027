"""NestedLoopUnroller: a small constant-trip loop in another loop's body is unrolled (the
same values; the outer loop then runs natively on the cpu backend); big, unknown-trip and
top-level loops stay loops."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.interpreter import Interpreter
from xlapy.passes import while_loop_unroller
from xlapy.passes.pass_base import run_passes
from xlapy.passes.while_loop_unroller import NestedLoopUnroller
from xlapy.stablehlo import parse_module

#: An outer loop of 7 steps around an inner one of {inner} steps from {start} (two state
#: elements, the StableHLO form), whose bound may be a parameter ({bound}).
NESTED = """
func.func @main(%x: tensor<16xf32>, %m: tensor<i32>) -> tensor<16xf32> {{
  %z = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %z, %v = %x) : tensor<i32>, tensor<16xf32>
    cond {{
      %n = stablehlo.constant dense<7> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }} do {{
      %s = stablehlo.constant dense<{start}> : tensor<i32>
      %q:2 = stablehlo.while(%j = %s, %u = %v) : tensor<i32>, tensor<16xf32>
        cond {{
          %k = {bound}
          %c = stablehlo.compare LT, %j, %k, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
          stablehlo.return %c : tensor<i1>
        }} do {{
          %f0 = stablehlo.convert %j : (tensor<i32>) -> tensor<f32>
          %f = stablehlo.broadcast_in_dim %f0, dims = [] : (tensor<f32>) -> tensor<16xf32>
          %h = stablehlo.constant dense<0.75> : tensor<16xf32>
          %a = stablehlo.multiply %u, %h : tensor<16xf32>
          %b = stablehlo.add %a, %f : tensor<16xf32>
          %one = stablehlo.constant dense<1> : tensor<i32>
          %j1 = stablehlo.add %j, %one : tensor<i32>
          stablehlo.return %j1, %b : tensor<i32>, tensor<16xf32>
        }}
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %i1, %q#1 : tensor<i32>, tensor<16xf32>
    }}
  return %r#1 : tensor<16xf32>
}}
"""


def _text(inner: int, start: int = 0, bound: str = "") -> str:
    return NESTED.format(start=start, bound=bound or
                         f"stablehlo.constant dense<{inner}> : tensor<i32>")


def _whiles(module: object) -> int:
    return sum(i.opcode == "while" for c in module.post_order()  # type: ignore[attr-defined]
               for i in c.instructions)


@pytest.mark.parametrize(("inner", "start"), [(10, 0), (5, 3), (16, 0), (1, 0)])
def test_small_inner_loops_unroll_to_the_same_values(inner: int, start: int) -> None:
    text = _text(inner, start)
    before, after = parse_module(text), parse_module(text)
    assert run_passes(after, [NestedLoopUnroller()])
    assert _whiles(after) < _whiles(before)
    x = np.linspace(-3, 3, 16, dtype=np.float32)
    args = [x, np.int32(0)]
    np.testing.assert_array_equal(np.asarray(Interpreter().run_module(after, args)),
                                  np.asarray(Interpreter().run_module(before, args)))
    prog = xlapy.compile(text, "cpu")
    report = prog._exe.explain()  # type: ignore[attr-defined]
    assert "native while loop" in report and "sub-executables" not in report
    np.testing.assert_array_equal(np.asarray(prog(*args)),
                                  np.asarray(xlapy.compile(text, "interpreter")(*args)))


@pytest.mark.parametrize("text", [
    _text(17),  # over MAX_TRIP
    _text(0, bound="stablehlo.add %m, %m : tensor<i32>"),  # a run-time bound: trips unknown
])
def test_other_inner_loops_stay_loops(text: str) -> None:
    module = parse_module(text)
    assert not run_passes(module, [NestedLoopUnroller()])


def test_big_bodies_and_top_level_loops_stay_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(while_loop_unroller, "MAX_INSTRUCTIONS", 20)
    assert not run_passes(parse_module(_text(10)), [NestedLoopUnroller()])
    top = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %z = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %z, %v = %x) : tensor<i32>, tensor<4xf32>
    cond {
      %n = stablehlo.constant dense<3> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %a = stablehlo.add %v, %v : tensor<4xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %i1, %a : tensor<i32>, tensor<4xf32>
    }
  return %r#1 : tensor<4xf32>
}
"""
    assert not run_passes(parse_module(top), [NestedLoopUnroller()])


@pytest.mark.parametrize("form", ["stablehlo", "outer"])
def test_single_trip_loops_are_inlined(form: str) -> None:
    """A loop with trip count 1 (jnp.polyval's scan: 16 steps unrolled per trip) becomes its
    body, at the top level too (WhileLoopSimplifier), with the same values."""
    from xlapy.passes.while_loop_simplifier import WhileLoopSimplifier, trip_count

    text = _text(1) if form == "stablehlo" else _text(3).replace("dense<7>", "dense<1>")
    before, after = parse_module(text), parse_module(text)
    while run_passes(after, [WhileLoopSimplifier()]):
        pass
    loops = [i for i in after.entry_computation().instructions if i.opcode == "while"]
    # the inner loop inlined into the outer body / the outer loop inlined into main
    assert [trip_count(w) for w in loops] == ([7] if form == "stablehlo" else [3])
    if form == "stablehlo":
        assert not any(i.opcode == "while" for i in loops[0].called[1].instructions)
    x = np.linspace(-3, 3, 16, dtype=np.float32)
    args = [x, np.int32(0)]
    np.testing.assert_array_equal(np.asarray(Interpreter().run_module(after, args)),
                                  np.asarray(Interpreter().run_module(before, args)))
    np.testing.assert_array_equal(np.asarray(xlapy.compile(text, "cpu")(*args)),
                                  np.asarray(xlapy.compile(text, "interpreter")(*args)))


def test_inner_loops_of_steps_that_fuse_with_nothing_stay_loops() -> None:
    """A scatter per step (jnp.linalg.solve's pivot permutation): unrolled, each copy was a
    kernel of its own (~80 for 16 steps, 3.5x the cold compile); the driver runs the loop."""
    jax = pytest.importorskip("jax")

    def f(x: object) -> object:
        def outer(i: object, v: object) -> object:
            return jax.lax.fori_loop(0, 6, lambda j, u: u.at[j].set(u[j + 1] * 0.5 + 1.0), v)
        return jax.lax.fori_loop(0, 4, outer, x)

    x = np.linspace(-3, 3, 16, dtype=np.float32)
    text = jax.jit(f).lower(x).as_text()
    module = parse_module(text)
    n = _whiles(module)
    assert "scatter" in text and n == 2
    run_passes(module, [NestedLoopUnroller()])
    assert _whiles(module) == n
    prog = xlapy.compile(text, "cpu")
    report = prog._exe.explain()  # type: ignore[attr-defined]
    assert "(1 native loop inside)" in report
    np.testing.assert_array_equal(np.asarray(prog(x)),
                                  np.asarray(xlapy.compile(text, "interpreter")(x)))
