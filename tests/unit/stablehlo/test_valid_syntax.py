"""Valid StableHLO spellings that were not read: trailing commas in attribute structs,
result_accuracy, dictionary backend_config, #stablehlo.bounds encodings, chlo.erf printed
back as chlo.erf."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.errors import ParseError
from xlapy.ops.misc import register_custom_call, unregister_custom_call
from xlapy.stablehlo import parse_module, print_module
from xlapy.stablehlo.equality import modules_equal


def run(text: str, *args: np.ndarray) -> np.ndarray:
    return xlapy.compile(text, backend="interpreter")(*args)


def round_trips(text: str) -> None:
    m = parse_module(text)
    for generic in (False, True):
        assert modules_equal(m, parse_module(print_module(m, generic)))


GATHER = '''func.func @main(%a: tensor<3x2xf32>, %i: tensor<2x1xi32>) -> tensor<2x2xf32> {
  %0 = "stablehlo.gather"(%a, %i) {dimension_numbers = #stablehlo.gather<offset_dims = [1],
      collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1,>,
      slice_sizes = array<i64: 1, 2>} : (tensor<3x2xf32>, tensor<2x1xi32>) -> tensor<2x2xf32>
  func.return %0 : tensor<2x2xf32>
}'''


def test_struct_attr_trailing_comma_gather() -> None:
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(run(GATHER, a, np.array([[2], [0]], np.int32)), a[[2, 0]])
    round_trips(GATHER)


def test_struct_attr_trailing_comma_dot_and_scatter() -> None:
    text = '''func.func @main(%a: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = "stablehlo.dot_general"(%a, %a) {dot_dimension_numbers = #stablehlo.dot<
      lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0],>}
      : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %i = stablehlo.constant dense<[[1]]> : tensor<1x1xi32>
  %u = stablehlo.constant dense<[[5.0, 6.0]]> : tensor<1x2xf32>
  %1 = "stablehlo.scatter"(%0, %i, %u) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    stablehlo.return %y : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1],
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1,>}
      : (tensor<2x2xf32>, tensor<1x1xi32>, tensor<1x2xf32>) -> tensor<2x2xf32>
  func.return %1 : tensor<2x2xf32>
}'''
    a = np.array([[1, 2], [3, 4]], np.float32)
    np.testing.assert_array_equal(run(text, a), [[7, 10], [5, 6]])


def test_struct_attr_double_comma_is_an_error() -> None:
    with pytest.raises(ParseError, match=r"3:79: expected a field name in #stablehlo.gather"):
        parse_module(GATHER.replace("index_vector_dim = 1,>", "index_vector_dim = 1,,>"))


ACCURACY = '''func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.exponential %a {result_accuracy = #stablehlo.result_accuracy<atol = 0.000000e+00,
      rtol = 0.000000e+00, ulps = 0, mode = #stablehlo.result_accuracy_mode<DEFAULT>>}
      : tensor<2xf32>
  %1 = "stablehlo.tanh"(%0) <{result_accuracy = #stablehlo.result_accuracy<atol = 1.0e-05,
      rtol = 0.0, ulps = 2, mode = #stablehlo.result_accuracy_mode<TOLERANCE>>}>
      : (tensor<2xf32>) -> tensor<2xf32>
  func.return %1 : tensor<2xf32>
}'''


def test_result_accuracy_read_and_dropped() -> None:
    a = np.array([0.0, -1.0], np.float32)
    np.testing.assert_allclose(run(ACCURACY, a), np.tanh(np.exp(a)), rtol=1e-6)
    round_trips(ACCURACY)
    assert "result_accuracy" not in print_module(parse_module(ACCURACY))  # see attrmap


def test_custom_call_dictionary_backend_config() -> None:
    text = '''func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.custom_call @xlapy_test_scale(%a) {api_version = 4 : i32,
      backend_config = {bar = 3 : i32, s = "x"}} : (tensor<2xf32>) -> tensor<2xf32>
  func.return %0 : tensor<2xf32>
}'''
    m = parse_module(text)
    call = next(i for i in m.entry.instructions if i.opcode == "custom_call")
    assert dict(call.attrs.mhlo_backend_config) == {"bar": 3, "s": "x"}
    assert call.attrs.backend_config == ""
    round_trips(text)

    def scale(operands, shape, attrs):  # noqa: ANN001, ANN202
        return operands[0] * dict(attrs.mhlo_backend_config)["bar"]

    register_custom_call("xlapy_test_scale", scale)
    try:
        np.testing.assert_array_equal(run(text, np.ones(2, np.float32)), [3, 3])
    finally:
        unregister_custom_call("xlapy_test_scale")


BOUNDED = '''func.func @main(%a: tensor<?x3xf32, #stablehlo.bounds<4, ?>>)
    -> tensor<?x3xf32, #stablehlo.bounds<4, ?>> {
  %0 = stablehlo.add %a, %a : tensor<?x3xf32, #stablehlo.bounds<4, ?>>
  func.return %0 : tensor<?x3xf32, #stablehlo.bounds<4, ?>>
}'''


def test_bounded_dynamic_dimension() -> None:
    m = parse_module(BOUNDED)
    p = m.entry.parameters[0].shape
    assert p.dimensions == (4, 3) and p.dynamic == (True, False)
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(run(BOUNDED, a), 2 * a)


@pytest.mark.parametrize("bounds, message", [
    ("4", r"1:37: #stablehlo.bounds has 1 bounds for a rank-2 tensor"),
    ("4, 5", r"1:37: #stablehlo.bounds: dimension 1 is static \(3\) but has a bound \(5\)"),
])
def test_bounded_dynamic_dimension_invalid(bounds: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_module(BOUNDED.replace("bounds<4, ?>", f"bounds<{bounds}>"))


@pytest.mark.parametrize("form", ["chlo.erf %a : tensor<2xf32> -> tensor<2xf32>",
                                  "chlo.erf %a : tensor<2xf32>",
                                  '"chlo.erf"(%a) : (tensor<2xf32>) -> tensor<2xf32>'])
def test_chlo_erf_prints_as_chlo(form: str) -> None:
    text = f'''func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {{
  %0 = {form}
  func.return %0 : tensor<2xf32>
}}'''
    a = np.array([0.5, 1.0], np.float32)
    np.testing.assert_allclose(run(text, a), [0.5204999, 0.8427008], rtol=1e-6)
    m = parse_module(text)
    assert "chlo.erf %" in print_module(m) and '"chlo.erf"(' in print_module(m, True)
    assert "stablehlo.erf" not in print_module(m)
    round_trips(text)


def test_dense_constant_of_token_type_is_rejected() -> None:
    """MLIR's dense elements need a shaped type: no `dense<>` token; `dense<>` of an empty
    tensor is fine."""
    text = '''func.func @main() -> tensor<0xf32> {
  %t = stablehlo.constant dense<> : !stablehlo.token
  %0 = stablehlo.constant dense<> : tensor<0xf32>
  func.return %0 : tensor<0xf32>
}'''
    with pytest.raises(ParseError, match="2:33: dense literal needs a tensor type"):
        parse_module(text)
    assert run(text.replace("  %t = stablehlo.constant dense<> : !stablehlo.token\n", "")
               ).shape == (0,)


@pytest.mark.parametrize("form", ["stablehlo.create_token : !stablehlo.token",
                                  '"stablehlo.create_token"() : () -> !stablehlo.token'])
def test_deprecated_create_token_is_after_all(form: str) -> None:
    text = f'''func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {{
  %t = {form}
  %0:2 = stablehlo.optimization_barrier %a, %t : tensor<2xf32>, !stablehlo.token
  func.return %0#0 : tensor<2xf32>
}}'''
    m = parse_module(text)
    same = parse_module(text.replace(form, "stablehlo.after_all : !stablehlo.token"))
    assert modules_equal(m, same)
    assert any(i.opcode == "after_all" and not i.operands for i in m.entry.instructions)
    np.testing.assert_array_equal(run(text, np.ones(2, np.float32)), [1, 1])
    with pytest.raises(ParseError, match="2:8: stablehlo.create_token"):
        parse_module(text.replace(form, form.replace("-> !stablehlo.token", "-> tensor<2xf32>")
                                  .replace(": !stablehlo.token", ": tensor<2xf32>")))
