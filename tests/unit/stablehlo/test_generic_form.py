# ruff: noqa: E501  (generic-form programs are written one op per line, as MLIR prints them)
"""The generic form JAX prints (`print_generic_op_form=True`): `"builtin.module"`,
`"func.func"` and generic terminators `"stablehlo.return"(%x) : (T) -> ()` in every
region-carrying op."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.errors import ParseError
from xlapy.stablehlo import parse_module, print_module
from xlapy.stablehlo.equality import modules_equal

F4 = "tensor<4xf32>"
F = "tensor<f32>"
ADD = f'''^bb0(%a: {F}, %b: {F}):
      %s = "stablehlo.add"(%a, %b) : ({F}, {F}) -> {F}
      "stablehlo.return"(%s) : ({F}) -> ()'''
MAX = ADD.replace("stablehlo.add", "stablehlo.maximum")


def module(body: str, args: str = f"%x: {F4}", ftype: str = f"({F4}) -> {F4}") -> str:
    """A generic module with one public function `main`."""
    return f'''"builtin.module"() <{{sym_name = "jit_f"}}> ({{
  "func.func"() <{{arg_attrs = [{{}}], function_type = {ftype}, res_attrs = [{{}}],
                  sym_name = "main", sym_visibility = "public"}}> ({{
  ^bb0({args}):
{body}
  }}) : () -> ()
}}) {{mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32}} : () -> ()'''


X = np.array([3.0, 1.0, 4.0, 2.0], np.float32)

CASES = {
    "reduce": (module(f'''    %z = "stablehlo.constant"() <{{value = dense<0.0> : {F}}}> : () -> {F}
    %r = "stablehlo.reduce"(%x, %z) <{{dimensions = array<i64: 0>}}> ({{
    {ADD}
    }}) : ({F4}, {F}) -> {F}
    "func.return"(%r) : ({F}) -> ()''', ftype=f"({F4}) -> {F}"), [X], 10.0),
    "while": (module(f'''    %c0 = "stablehlo.constant"() <{{value = dense<0> : tensor<i32>}}> : () -> tensor<i32>
    %w:2 = "stablehlo.while"(%c0, %x) ({{
    ^bb0(%i: tensor<i32>, %v: {F4}):
      %n = "stablehlo.constant"() <{{value = dense<3> : tensor<i32>}}> : () -> tensor<i32>
      %p = "stablehlo.compare"(%i, %n) <{{comparison_direction = #stablehlo<comparison_direction LT>}}> : (tensor<i32>, tensor<i32>) -> tensor<i1>
      "stablehlo.return"(%p) : (tensor<i1>) -> ()
    }}, {{
    ^bb0(%i: tensor<i32>, %v: {F4}):
      %one = "stablehlo.constant"() <{{value = dense<1> : tensor<i32>}}> : () -> tensor<i32>
      %j = "stablehlo.add"(%i, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
      %d = "stablehlo.add"(%v, %v) : ({F4}, {F4}) -> {F4}
      "stablehlo.return"(%j, %d) : (tensor<i32>, {F4}) -> ()
    }}) : (tensor<i32>, {F4}) -> (tensor<i32>, {F4})
    "func.return"(%w#1) : ({F4}) -> ()'''), [X], X * 8),
    "case": (module(f'''    %r = "stablehlo.case"(%k) ({{
      %n = "stablehlo.negate"(%x) : ({F4}) -> {F4}
      "stablehlo.return"(%n) : ({F4}) -> ()
    }}, {{
      "stablehlo.return"(%x) : ({F4}) -> ()
    }}) : (tensor<i32>) -> {F4}
    "func.return"(%r) : ({F4}) -> ()''', args=f"%k: tensor<i32>, %x: {F4}",
                    ftype=f"(tensor<i32>, {F4}) -> {F4}"), [np.int32(0), X], -X),
    "if": (module(f'''    %r = "stablehlo.if"(%k) ({{
      "stablehlo.return"(%x) : ({F4}) -> ()
    }}, {{
      %n = "stablehlo.negate"(%x) : ({F4}) -> {F4}
      "stablehlo.return"(%n) : ({F4}) -> ()
    }}) : (tensor<i1>) -> {F4}
    "func.return"(%r) : ({F4}) -> ()''', args=f"%k: tensor<i1>, %x: {F4}",
                  ftype=f"(tensor<i1>, {F4}) -> {F4}"), [np.bool_(False), X], -X),
    "sort": (module(f'''    %r = "stablehlo.sort"(%x) <{{dimension = 0 : i64, is_stable = true}}> ({{
    ^bb0(%a: {F}, %b: {F}):
      %p = "stablehlo.compare"(%a, %b) <{{comparison_direction = #stablehlo<comparison_direction GT>}}> : ({F}, {F}) -> tensor<i1>
      "stablehlo.return"(%p) : (tensor<i1>) -> ()
    }}) : ({F4}) -> {F4}
    "func.return"(%r) : ({F4}) -> ()'''), [X], np.sort(X)[::-1]),
    "map": (module(f'''    %r = "stablehlo.map"(%x, %x) <{{dimensions = array<i64: 0>}}> ({{
    {MAX.replace("maximum", "multiply")}
    }}) : ({F4}, {F4}) -> {F4}
    "func.return"(%r) : ({F4}) -> ()'''), [X], X * X),
    "scatter": (module(f'''    %i = "stablehlo.constant"() <{{value = dense<[[1], [3]]> : tensor<2x1xi32>}}> : () -> tensor<2x1xi32>
    %u = "stablehlo.constant"() <{{value = dense<10.0> : tensor<2xf32>}}> : () -> tensor<2xf32>
    %r = "stablehlo.scatter"(%x, %i, %u) <{{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}}> ({{
    {ADD}
    }}) : ({F4}, tensor<2x1xi32>, tensor<2xf32>) -> {F4}
    "func.return"(%r) : ({F4}) -> ()'''), [X], X + [0, 10, 0, 10]),
    "reduce_window": (module(f'''    %z = "stablehlo.constant"() <{{value = dense<0xFF800000> : {F}}}> : () -> {F}
    %r = "stablehlo.reduce_window"(%x, %z) <{{padding = dense<0> : tensor<1x2xi64>, window_dimensions = array<i64: 2>, window_strides = array<i64: 1>}}> ({{
    {MAX}
    }}) : ({F4}, {F}) -> tensor<3xf32>
    "func.return"(%r) : (tensor<3xf32>) -> ()''', ftype=f"({F4}) -> tensor<3xf32>"),
                      [X], np.array([3, 4, 4], np.float32)),
    "select_and_scatter": (module(f'''    %s = "stablehlo.constant"() <{{value = dense<1.0> : tensor<2xf32>}}> : () -> tensor<2xf32>
    %z = "stablehlo.constant"() <{{value = dense<0.0> : {F}}}> : () -> {F}
    %r = "stablehlo.select_and_scatter"(%x, %s, %z) <{{window_dimensions = array<i64: 2>, window_strides = array<i64: 2>}}> ({{
    ^bb0(%a: {F}, %b: {F}):
      %p = "stablehlo.compare"(%a, %b) <{{comparison_direction = #stablehlo<comparison_direction GE>}}> : ({F}, {F}) -> tensor<i1>
      "stablehlo.return"(%p) : (tensor<i1>) -> ()
    }}, {{
    {ADD}
    }}) : ({F4}, tensor<2xf32>, {F}) -> {F4}
    "func.return"(%r) : ({F4}) -> ()'''), [X], np.array([1, 0, 1, 0], np.float32)),
    "all_reduce": (module(f'''    %r = "stablehlo.all_reduce"(%x) <{{replica_groups = dense<[[0]]> : tensor<1x1xi64>}}> ({{
    {ADD}
    }}) : ({F4}) -> {F4}
    "func.return"(%r) : ({F4}) -> ()'''), [X], X),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_generic_terminators_in_regions(name: str) -> None:
    text, args, want = CASES[name]
    exe = xlapy.compile(text, backend="interpreter")
    np.testing.assert_array_equal(exe(*args), want)
    m = parse_module(text)
    again = parse_module(print_module(m, generic=True))  # printed fully generic
    assert modules_equal(m, again)


def test_generic_call_private_function_and_empty_return() -> None:
    text = f'''"builtin.module"() ({{
  "func.func"() <{{function_type = ({F4}) -> {F4}, sym_name = "main"}}> ({{
  ^bb0(%x: {F4}):
    %r = "func.call"(%x) <{{callee = @twice}}> : ({F4}) -> {F4}
    "func.return"(%r) : ({F4}) -> ()
  }}) : () -> ()
  "func.func"() <{{function_type = ({F4}) -> {F4}, sym_name = "twice",
                  sym_visibility = "private"}}> ({{
  ^bb0(%y: {F4}):
    %d = "stablehlo.add"(%y, %y) : ({F4}, {F4}) -> {F4}
    "func.return"(%d) : ({F4}) -> ()
  }}) : () -> ()
  "func.func"() <{{function_type = () -> (), sym_name = "nothing",
                  sym_visibility = "private"}}> ({{
    "func.return"() : () -> ()
  }}) : () -> ()
}}) : () -> ()'''
    np.testing.assert_array_equal(xlapy.compile(text, backend="interpreter")(X), 2 * X)


def test_generic_func_at_top_level_and_in_pretty_module() -> None:
    func = f'''"func.func"() <{{function_type = ({F4}) -> {F4}, sym_name = "main"}}> ({{
  ^bb0(%x: {F4}):
    "func.return"(%x) : ({F4}) -> ()
  }}) : () -> ()'''
    for text in (func, "module @m {\n" + func + "\n}"):
        np.testing.assert_array_equal(xlapy.compile(text, backend="interpreter")(X), X)


def test_generic_print_is_generic() -> None:
    out = print_module(parse_module(CASES["while"][0]), generic=True)
    assert out.startswith('"builtin.module"()')
    assert '"func.func"() <{function_type' in out
    assert '"func.return"(%' in out and '"stablehlo.return"(' in out
    assert "mhlo" not in out  # one replica, one partition: nothing to say


BAD = {
    "terminator_with_results": (
        f'"func.return"(%x) : ({F4}) -> {F4}', "is a terminator and has no results"),
    "terminator_type_mismatch": (
        f'"func.return"(%x) : ({F}) -> ()', r"do not match the declared \(tensor<f32>\)"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_generic_terminator_invalid(name: str) -> None:
    ret, message = BAD[name]
    text = module("    " + ret)
    with pytest.raises(ParseError, match=message) as info:
        xlapy.compile(text, backend="interpreter")
    assert ":5:5:" in str(info.value)  # the terminator's line


def test_generic_func_invalid() -> None:
    no_type = f'''"func.func"() <{{sym_name = "main"}}> ({{
  ^bb0(%x: {F4}):
    "func.return"(%x) : ({F4}) -> ()
  }}) : () -> ()'''
    with pytest.raises(ParseError, match="needs function_type"):
        parse_module(no_type)
    wrong_arg = no_type.replace('<{sym_name', '<{function_type = (tensor<f32>) -> (), sym_name')
    with pytest.raises(ParseError, match=r"block argument 0 \(%x\)"):
        parse_module(wrong_arg)
    two_regions = module(f'    "func.return"(%x) : ({F4}) -> ()').replace(
        '}) : () -> ()\n})', '}, {}) : () -> ()\n})')
    with pytest.raises(ParseError, match="exactly one region"):
        parse_module(two_regions)
