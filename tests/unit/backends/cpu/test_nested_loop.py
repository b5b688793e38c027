# ruff: noqa: E501  (HLO programs are kept on one line per op)
"""Loops inside native loops (nested_loop.py): the inner loop is a step of the outer loop's
driver, with the interpreter's values bit for bit, in both state forms, at any depth; an
inner run past its budget hands the rest to Python; the iteration limit names the inner
loop; Ctrl-C stops an endless inner loop."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import nested_loop

from .util import interrupted

ROOT = Path(__file__).resolve().parents[4]

#: An outer loop of 7 steps around an inner one (StableHLO form) running while j < {bound}
#: (a constant, or the parameter %m: trips known at run time only), whose state is
#: (j, u, xs): xs a pass-through the inner body reads (bound in place), u swapped.
SHLO = """
func.func @main(%x: tensor<16xf32>, %m: tensor<i32>, %xs: tensor<64x16xf32>) -> (tensor<16xf32>, tensor<i32>) {{
  %z = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %z, %v = %x, %t = %z) : tensor<i32>, tensor<16xf32>, tensor<i32>
    cond {{
      %n = stablehlo.constant dense<7> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }} do {{
      %s = stablehlo.constant dense<0> : tensor<i32>
      %q:3 = stablehlo.while(%j = %s, %u = %v, %w = %xs) : tensor<i32>, tensor<16xf32>, tensor<64x16xf32>
        cond {{
          %k = {bound}
          %c = stablehlo.compare LT, %j, %k, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
          stablehlo.return %c : tensor<i1>
        }} do {{
          %c0 = stablehlo.constant dense<0> : tensor<i32>
          %c63 = stablehlo.constant dense<63> : tensor<i32>
          %row = stablehlo.remainder %j, %c63 : tensor<i32>
          %ds = stablehlo.dynamic_slice %w, %row, %c0, sizes = [1, 16] : (tensor<64x16xf32>, tensor<i32>, tensor<i32>) -> tensor<1x16xf32>
          %f = stablehlo.reshape %ds : (tensor<1x16xf32>) -> tensor<16xf32>
          %h = stablehlo.constant dense<0.75> : tensor<16xf32>
          %a = stablehlo.multiply %u, %h : tensor<16xf32>
          %b = stablehlo.add %a, %f : tensor<16xf32>
          %one = stablehlo.constant dense<1> : tensor<i32>
          %j1 = stablehlo.add %j, %one : tensor<i32>
          stablehlo.return %j1, %b, %w : tensor<i32>, tensor<16xf32>, tensor<64x16xf32>
        }}
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      %t1 = stablehlo.add %t, %q#0 : tensor<i32>
      stablehlo.return %i1, %q#1, %t1 : tensor<i32>, tensor<16xf32>, tensor<i32>
    }}
  return %r#1, %r#2 : tensor<16xf32>, tensor<i32>
}}
"""

CONST = "stablehlo.constant dense<{n}> : tensor<i32>"


def _shlo(bound: str) -> str:
    return SHLO.format(bound=bound)


def _args(m: int) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.standard_normal(16).astype(np.float32), np.int32(m),
            rng.standard_normal((64, 16)).astype(np.float32)]


def _check(text: str, args: list[np.ndarray], inside: int = 1) -> xlapy.CompiledProgram:
    cpu = xlapy.compile(text, backend="cpu")
    report = cpu._exe.explain()
    assert f"({inside} native loop{'s' if inside > 1 else ''} inside)" in report, report
    want = xlapy.compile(text, backend="interpreter")(*args)
    for _ in range(2):  # the second call rebinds the inner tables
        got = cpu(*args)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    return cpu


@pytest.mark.parametrize("n", [17, 18, 40])  # odd/even: where the swapped element ends
def test_inner_loop_with_constant_bound(n: int) -> None:
    cpu = _check(_shlo(CONST.format(n=n)), _args(0))
    assert int(cpu(*_args(0))[1]) == 7 * n


HLO_NESTED = """
HloModule nested

%icond (s: (s32[], f32[8])) -> pred[] {
  %s = (s32[], f32[8]) parameter(0)
  %j = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(INNER)
  ROOT %p = pred[] compare(%j, %n), direction=LT
}

%ibody (s: (s32[], f32[8])) -> (s32[], f32[8]) {
  %s = (s32[], f32[8]) parameter(0)
  %j = s32[] get-tuple-element(%s), index=0
  %u = f32[8] get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %j1 = s32[] add(%j, %one)
  %h = f32[8] constant({0.5, 0.25, 1, 2, -1, 0.125, 3, -0.5})
  %a = f32[8] multiply(%u, %h)
  %f = f32[] convert(%j)
  %fb = f32[8] broadcast(%f), dimensions={}
  %b = f32[8] add(%a, %fb)
  ROOT %t = (s32[], f32[8]) tuple(%j1, %b)
}

%ocond (s: (s32[], f32[8])) -> pred[] {
  %s = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(5)
  ROOT %p = pred[] compare(%i, %n), direction=LT
}

%obody (s: (s32[], f32[8])) -> (s32[], f32[8]) {
  %s = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %v = f32[8] get-tuple-element(%s), index=1
  %zero = s32[] constant(0)
  %init = (s32[], f32[8]) tuple(%zero, %v)
  %w = (s32[], f32[8]) while(%init), condition=%icond, body=%ibody
  %r = f32[8] get-tuple-element(%w), index=1
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %c = f32[8] constant({1, 1, 1, 1, 1, 1, 1, 1})
  %r2 = f32[8] multiply(%r, %c)
  ROOT %t = (s32[], f32[8]) tuple(%i1, %r2)
}

ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8] parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[8]) tuple(%zero, %x)
  %w = (s32[], f32[8]) while(%init), condition=%ocond, body=%obody
  ROOT %r = f32[8] get-tuple-element(%w), index=1
}
"""


@pytest.mark.parametrize("inner", [20, 21])
def test_xla_style_tuple_state(inner: int) -> None:
    text = HLO_NESTED.replace("INNER", str(inner))
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    cpu = xlapy.compile(text, backend="cpu")
    assert "(1 native loop inside)" in cpu._exe.explain()
    want = xlapy.compile(text, backend="interpreter")(x)
    np.testing.assert_array_equal(cpu(x), want)
    np.testing.assert_array_equal(cpu(x), want)


def _three_deep() -> str:
    """The StableHLO loop nest of SHLO with one more loop (20 steps) around it."""
    inner = SHLO.format(bound=CONST.format(n=30))
    body = inner[inner.index("%z = "):inner.index("  return")]
    body = body.replace("%v = %x,", "%v = %vv,").replace("%r:3", "%rr:3").replace(
        "dense<7>", "dense<17>")  # (over the unroller's 16)
    return f"""
func.func @main(%x: tensor<16xf32>, %m: tensor<i32>, %xs: tensor<64x16xf32>) -> (tensor<16xf32>, tensor<i32>) {{
  %z0 = stablehlo.constant dense<0> : tensor<i32>
  %o:2 = stablehlo.while(%e = %z0, %vv = %x) : tensor<i32>, tensor<16xf32>
    cond {{
      %n = stablehlo.constant dense<20> : tensor<i32>
      %p = stablehlo.compare LT, %e, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }} do {{
      {body}
      %one = stablehlo.constant dense<1> : tensor<i32>
      %e1 = stablehlo.add %e, %one : tensor<i32>
      %hh = stablehlo.constant dense<0.125> : tensor<16xf32>
      %back = stablehlo.multiply %rr#1, %hh : tensor<16xf32>
      stablehlo.return %e1, %back : tensor<i32>, tensor<16xf32>
    }}
  return %o#1, %o#0 : tensor<16xf32>, tensor<i32>
}}
"""


def test_three_deep() -> None:
    text = _three_deep()
    cpu = _check(text, _args(0))
    sub = [e for _, e in cpu._exe.subexecs]
    assert any("(1 native loop inside)" in e.explain() for e in sub)


def test_budget_hands_the_rest_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _shlo(CONST.format(n=40))
    cpu = xlapy.compile(text, backend="cpu")
    want = xlapy.compile(text, backend="interpreter")(*_args(0))
    monkeypatch.setattr(nested_loop, "BUDGET", 39)  # every inner run stops short
    got = cpu(*_args(0))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    monkeypatch.setattr(nested_loop, "BUDGET", 40)  # exactly enough
    for g, w in zip(cpu(*_args(0)), want):
        np.testing.assert_array_equal(g, w)


def test_iteration_limit_names_the_inner_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _shlo(CONST.format(n=40))
    cpu = xlapy.compile(text, backend="cpu")
    inner = [i for _, e in cpu._exe.subexecs for i in e.comp.instructions
             if i.opcode == "while"][0]
    monkeypatch.setenv("XLAPY_MAX_WHILE_ITERATIONS", "40")
    assert int(cpu(*_args(0))[1]) == 280  # exactly the limit: fine
    monkeypatch.setenv("XLAPY_MAX_WHILE_ITERATIONS", "39")
    with pytest.raises(xlapy.errors.InterpreterError,
                       match=rf"while %{inner.name}: still running after 39 iteration"):
        cpu(*_args(0))
    monkeypatch.setenv("XLAPY_MAX_WHILE_ITERATIONS", "6")  # the outer loop's 7 steps
    with pytest.raises(xlapy.errors.InterpreterError, match="after 6 iteration"):
        cpu(*_args(0))


ENDLESS = f"""
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np
import xlapy
text = '''{SHLO.format(bound="stablehlo.constant dense<1> : tensor<i32>")}'''.replace(
    "%j1 = stablehlo.add %j, %one", "%j1 = stablehlo.multiply %j, %one")
fn = xlapy.compile(text, backend="cpu")
assert "(1 native loop inside)" in fn._exe.explain()
print("running", flush=True)
fn(np.zeros(16, np.float32), np.int32(0), np.zeros((64, 16), np.float32))  # j stays 0
"""


def test_ctrl_c_stops_an_endless_inner_loop() -> None:
    err = interrupted(ENDLESS, ROOT, grace=3.0)
    assert "KeyboardInterrupt" in err, err


MOVE_FROM_UNREAD = """
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %k0 = stablehlo.constant dense<0> : tensor<i32>
  %o:3 = stablehlo.while(%k = %k0, %p = %a, %q = %b) : tensor<i32>, tensor<4xf32>, tensor<4xf32>
    cond {
      %n = stablehlo.constant dense<4> : tensor<i32>
      %c = stablehlo.compare LT, %k, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %k1 = stablehlo.add %k, %one : tensor<i32>
      %t = stablehlo.constant dense<2.0> : tensor<4xf32>
      %p2 = stablehlo.multiply %p, %t : tensor<4xf32>
      %i0 = stablehlo.constant dense<0> : tensor<i32>
      %two = stablehlo.constant dense<2> : tensor<i32>
      %lim = stablehlo.remainder %k, %two : tensor<i32>
      %z = stablehlo.constant dense<0.0> : tensor<4xf32>
      %r:4 = stablehlo.while(%i = %i0, %l = %lim, %x = %p2, %y = %z) : tensor<i32>, tensor<i32>, tensor<4xf32>, tensor<4xf32>
        cond {
          %c = stablehlo.compare LT, %i, %l : (tensor<i32>, tensor<i32>) -> tensor<i1>
          stablehlo.return %c : tensor<i1>
        } do {
          %one2 = stablehlo.constant dense<1> : tensor<i32>
          %j = stablehlo.add %i, %one2 : tensor<i32>
          stablehlo.return %j, %l, %x, %x : tensor<i32>, tensor<i32>, tensor<4xf32>, tensor<4xf32>
        }
      %s = stablehlo.add %r#3, %q : tensor<4xf32>
      stablehlo.return %k1, %p2, %s : tensor<i32>, tensor<4xf32>, tensor<4xf32>
    }
  return %o#1, %o#2 : tensor<4xf32>, tensor<4xf32>
}
"""


def test_an_inner_move_from_an_unread_element_reads_the_operand() -> None:
    """An inner loop (i, l, x, y) -> (i + 1, l, x, x): x is never written and nobody reads
    it after the loop, so the step binds it to the outer operand in place; the move into y
    copied from the buffer bound at prepare time instead (y came out stale: q 10 a where the
    interpreter gives 30 a). A move's source is now copied in."""
    a = np.arange(4, dtype=np.float32) + 1
    prog = xlapy.compile(MOVE_FROM_UNREAD, backend="cpu")
    assert "1 native loop inside" in prog._exe.explain()
    want = xlapy.compile(MOVE_FROM_UNREAD, backend="interpreter")(a, a * 10)
    for _ in range(2):
        got = prog(a, a * 10)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(want[1], a * 30)
