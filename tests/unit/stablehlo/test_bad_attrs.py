# ruff: noqa: E501  (programs are kept on one line each, as JAX prints them)
"""Malformed attributes inside otherwise valid ops: a ParseError at file:line:col, never a raw
Python exception (each case was a ValueError / TypeError / IndexError / AttributeError)."""

from __future__ import annotations

import pytest

from xlapy.errors import ParseError
from xlapy.stablehlo import parse_module

DOT = """func.func @main(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {{
  %0 = stablehlo.dot_general %a, %b, {dims} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}}"""


def _fails(text: str, where: str, match: str) -> None:
    with pytest.raises(ParseError, match=match) as info:
        parse_module(text, "t.mlir")
    assert str(info.value).startswith(f"t.mlir:{where}:"), str(info.value)


def test_array_attr_with_missing_element() -> None:
    text = """func.func @main(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = "stablehlo.transpose"(%a) {permutation = array<i64: , 1>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}"""
    _fails(text, "2:60", "expected a number, found ','")


def test_array_attr_unterminated() -> None:
    _fails('func.func @main() -> () {\n  "f"() {a = array<i64: 1', "2:26",
           "expected ',' between array elements, found end of input")
    _fails('func.func @main() -> () {\n  "f"() {a = array<i64: 1,', "2:27",
           "expected a number, found end of input")


def test_run_parallel_programs_not_symbols() -> None:
    text = """module {
func.func @main(%a: tensor<f32>) -> tensor<f32> {
  %r = "interpreter.run_parallel"(%a) {programs = [[@f], [7]]} : (tensor<f32>) -> tensor<f32>
  return %r : tensor<f32>
}
func.func @f(%a: tensor<f32>) -> tensor<f32> { return %a : tensor<f32> }
}"""
    _fails(text, "3:8", "programs = \\[\\[@f, ...\\]\\]")


def test_dot_general_empty_contracting_dims() -> None:
    _fails(DOT.format(dims="contracting_dims = []"), "2:57", "contracting_dims expects")


def test_dot_general_scalar_contracting_dims() -> None:
    _fails(DOT.format(dims="contracting_dims = 2"), "2:57", "contracting_dims expects")


def test_dot_general_batching_dims_of_symbols() -> None:
    _fails(DOT.format(dims="batching_dims = [@f] x [0], contracting_dims = [1] x [0]"), "2:54",
           "batching_dims expects")


def test_reduce_precision_format_without_mantissa() -> None:
    text = """func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.reduce_precision %a, format = e5 : tensor<2xf32>
  return %0 : tensor<2xf32>
}"""
    _fails(text, "2:48", "format expects eNmM")
    _fails(text.replace("e5", "e5m99999999999"), "2:48", "format expects eNmM")


def test_quant_scale_hex_too_long() -> None:
    text = """func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.uniform_quantize %a : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32, 0xFFFFFFFFFFFFFFFFFFFF:3>>
  %1 = stablehlo.uniform_dequantize %0 : (tensor<2x!quant.uniform<i8:f32, 0xFFFFFFFFFFFFFFFFFFFF:3>>) -> tensor<2xf32>
  return %1 : tensor<2xf32>
}"""
    _fails(text, "2:8", "bad scale '0xFFFFFFFFFFFFFFFFFFFF'")


def test_quant_bad_argument_type() -> None:
    text = """func.func @main(%a: tensor<2x!quant.uniform<i8:f32, 1e:3>>) -> tensor<2xf32> {
  %1 = stablehlo.uniform_dequantize %a : (tensor<2x!quant.uniform<i8:f32, 1e:3>>) -> tensor<2xf32>
  return %1 : tensor<2xf32>
}"""
    _fails(text, "1:17", "bad scale '1e'")


def test_quant_zero_point_too_large() -> None:
    text = """func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.uniform_quantize %a : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32, 0.5:99999999999999999999>>
  %1 = stablehlo.uniform_dequantize %0 : (tensor<2x!quant.uniform<i8:f32, 0.5:99999999999999999999>>) -> tensor<2xf32>
  return %1 : tensor<2xf32>
}"""
    _fails(text, "2:8", "zero point 99999999999999999999 does not fit")


def test_number_with_too_many_digits() -> None:
    text = """func.func @main() -> tensor<i64> {
  %0 = "stablehlo.constant"() {value = dense<1> : tensor<i64>, x = DIGITS} : () -> tensor<i64>
  return %0 : tensor<i64>
}""".replace("DIGITS", "7" * 5000)
    _fails(text, "2:68", "number '7777.* is out of range")


def test_tensor_dimension_over_int64() -> None:
    text = """func.func @main(%a: tensor<99999999999999999999xf32>) -> tensor<f32> {
  %0 = stablehlo.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}"""
    _fails(text, "1:28", "dimension 99999999999999999999 does not fit in 64 bits")
    _fails(text.replace("99999999999999999999", "7" * 5000), "1:28", "does not fit in 64 bits")


def test_slice_bound_not_an_integer() -> None:
    text = """func.func @main(%a: tensor<4xf32>) -> tensor<2xf32> {
  %0 = stablehlo.slice %a [1.5:3] : (tensor<4xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}"""
    _fails(text, "2:28", "expected a slice bound \\(an integer\\), found '1.5'")


def test_conv_dims_unterminated_is_an_error_not_a_hang() -> None:
    from tests.fuzz.deadline import deadline

    text = ('func.func @main() -> () {\n  "f"() {dimension_numbers = '
            '#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1,')
    with deadline(5):
        _fails(text, "2:82", "expected a convolution dimension .*, found end of input")
