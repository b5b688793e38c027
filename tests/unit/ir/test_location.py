"""Instructions keep where they came from (issue 16), and run-time errors name it: the op's
place in the text read and the source line its debug info names."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.errors import InterpreterError
from xlapy.hlo_text import parse_hlo_module as parse_hlo
from xlapy.ir.location import describe, location_of
from xlapy.stablehlo import parse_module

JAX_STYLE = '''module @jit_f {
  func.func public @main(%arg0: tensor<4xf32> loc("x")) -> tensor<4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<4xf32> loc(#loc12)
    %1 = stablehlo.custom_call @no_such_target(%0) : (tensor<4xf32>) -> tensor<4xf32> loc(#loc13)
    return %1 : tensor<4xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc3 = loc("/src/model.py":3:8 to :18)
#loc4 = loc("/src/model.py":9:6 to :76)
#loc5 = loc("/src/model.py":4:11 to :16)
#loc6 = loc("f"(#loc3))
#loc7 = loc("<module>"(#loc4))
#loc8 = loc("f"(#loc5))
#loc9 = loc(callsite(#loc6 at #loc7))
#loc10 = loc(callsite(#loc8 at #loc7))
#loc12 = loc("jit(f)/sin"(#loc9))
#loc13 = loc(fused[unknown, "jit(f)/foo"(#loc10)])
'''


def test_stablehlo_debug_locations_resolve_through_aliases() -> None:
    m = parse_module(JAX_STYLE, "f.mlir")
    sine, call = (i for i in m.entry.instructions if i.opcode != "parameter")
    assert describe(sine) == "%0 = sine at f.mlir:3:10 (jit(f)/sin at /src/model.py:3:8)"
    loc = location_of(call)
    assert loc is not None and (loc.name, loc.file, loc.line, loc.col) == (
        "jit(f)/foo", "/src/model.py", 4, 11)


def test_stablehlo_without_debug_info_keeps_the_text_position() -> None:
    m = parse_module("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
                     "  %0 = stablehlo.exponential %a : tensor<2xf32>\n"
                     "  %1 = stablehlo.add %0, %a : tensor<2xf32>\n"
                     "  return %1 : tensor<2xf32>\n}\n", "g.mlir")
    assert [str(location_of(i)) for i in m.entry.instructions if i.opcode != "parameter"] == [
        "g.mlir:2:8", "g.mlir:3:8"]


@pytest.mark.parametrize("text", ["loc(", 'loc("a"(#nowhere))', "loc(callsite(#x at))"])
def test_unreadable_locations_are_ignored(text: str) -> None:
    body = ("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
            f"  %0 = stablehlo.negate %a : tensor<2xf32> {text}\n"
            "  return %0 : tensor<2xf32>\n}\n")
    if text == "loc(":
        with pytest.raises(xlapy.errors.ParseError):
            parse_module(body)
        return
    m = parse_module(body, "h.mlir")
    neg = m.entry.root
    assert str(location_of(neg)).startswith("h.mlir:2:")


HLO = '''HloModule m

ENTRY main {
  p = f32[4] parameter(0)
  s = f32[4] sine(p), metadata={op_name="jit(f)/sin" source_file="model.py" source_line=7}
  ROOT c = f32[4] custom-call(s), custom_call_target="no_such_target"
}
'''


def test_hlo_metadata_becomes_the_location() -> None:
    m = parse_hlo(HLO, "m.hlo")
    sine = next(i for i in m.entry.instructions if i.opcode == "sine")
    assert describe(sine) == "%s = sine at m.hlo:5:3 (jit(f)/sin at model.py:7)"


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("text, where", [
    (JAX_STYLE, "in %1 = custom_call at <string>:4:10 (jit(f)/foo at /src/model.py:4:11)"),
    (HLO, "in %c = custom_call at <string>:6:8"),
])
def test_run_time_errors_name_the_instruction_and_its_source(backend: str, text: str,
                                                             where: str) -> None:
    prog = xlapy.compile(text, backend=backend)
    with pytest.raises(InterpreterError, match="no target named 'no_such_target'") as e:
        prog(np.ones(4, np.float32))
    assert str(e.value).endswith(where)


def test_an_error_inside_a_loop_body_names_the_body_op_once() -> None:
    text = '''func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c, %x = %a) : tensor<i32>, tensor<2xf32>
    cond {
      %n = stablehlo.constant dense<2> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %y = stablehlo.custom_call @no_such_target(%x)
        : (tensor<2xf32>) -> tensor<2xf32> loc("loop.py":5:1)
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %j, %y : tensor<i32>, tensor<2xf32>
    }
  return %r#1 : tensor<2xf32>
}
'''
    with pytest.raises(InterpreterError) as e:
        xlapy.compile(text, backend="interpreter")(np.ones(2, np.float32))
    msg = str(e.value)
    assert msg.count("\n  in ") == 1 and msg.endswith("(loop.py:5:1)") and "%y = custom_call" in msg
