"""Verifier constraints added for issue 16: each has a valid program that imports and an
invalid one rejected with the constraint's label at its line:col.

Covered here: dynamic_* operand ranks and sizes, quantized element types, quantized
dot_general / convolution, dot_general's `algorithm`, `#stablehlo.conv` dimension letters and
infeed layouts. docs/verifier.md lists what is still unchecked.
"""

from __future__ import annotations

import pytest

import xlapy  # noqa: F401  (fills the op registry)
from xlapy.errors import ParseError, ShapeInferenceError
from xlapy.ops.base import infer_shape
from xlapy.ops.quantization import QuantParams, UniformDequantizeAttrs
from xlapy.stablehlo import parse_module
from xlapy.types import ElementType, Shape


def rejects(text: str, label: str, loc: str) -> None:
    """`text` fails to import with `label` in the message, located at `loc` (line:col)."""
    with pytest.raises(ParseError) as e:
        parse_module(text)
    message = str(e.value)
    assert label in message, message
    assert message.startswith(f"<input>:{loc}:"), message


def at(text: str, needle: str, nth: int = 0) -> str:
    """line:col (1-based) of the nth occurrence of `needle` in `text`."""
    pos = -1
    for _ in range(nth + 1):
        pos = text.index(needle, pos + 1)
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"{line}:{col}"


def one_op(args: str, op: str, result: str) -> str:
    """A function whose body is `%0 = <op>` returning %0 (the op sits at 2:8)."""
    return (f"func.func @main({args}) -> {result} {{\n  %0 = {op}\n"
            f"  return %0 : {result}\n}}")


# ---- dynamic ops ---------------------------------------------------------------------------------
IOTA = one_op("%s: tensor<2xi64>",
              "stablehlo.dynamic_iota %s, dim = 0 : (tensor<2xi64>) -> tensor<4x2xf32>",
              "tensor<4x2xf32>")
RESHAPE = one_op("%a: tensor<4xf32>, %s: tensor<2xi64>",
                 "stablehlo.dynamic_reshape %a, %s : (tensor<4xf32>, tensor<2xi64>) -> "
                 "tensor<2x2xf32>", "tensor<2x2xf32>")
BCAST = one_op("%a: tensor<4xf32>, %s: tensor<2xi64>",
               '"stablehlo.dynamic_broadcast_in_dim"(%a, %s) {broadcast_dimensions = '
               "array<i64: 1>, known_expanding_dimensions = array<i64: 0>} : "
               "(tensor<4xf32>, tensor<2xi64>) -> tensor<2x4xf32>", "tensor<2x4xf32>")
PAD = one_op("%a: tensor<3xf32>, %v: tensor<f32>, %l: tensor<1xi64>",
             "stablehlo.dynamic_pad %a, %v, %l, %l, %l : (tensor<3xf32>, tensor<f32>, "
             "tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<7xf32>", "tensor<7xf32>")
SLICE = one_op("%a: tensor<3xf32>, %l: tensor<1xi64>",
               "stablehlo.real_dynamic_slice %a, %l, %l, %l : (tensor<3xf32>, tensor<1xi64>, "
               "tensor<1xi64>, tensor<1xi64>) -> tensor<2xf32>", "tensor<2xf32>")
GATHER = one_op(
    "%a: tensor<3x4x2xi64>, %i: tensor<2x3x2xi64>, %s: tensor<3xi64>",
    '"stablehlo.dynamic_gather"(%a, %i, %s) {dimension_numbers = #stablehlo.gather<'
    "offset_dims = [2, 3], collapsed_slice_dims = [0], start_index_map = [1, 0], "
    "index_vector_dim = 2>, indices_are_sorted = false} : (tensor<3x4x2xi64>, "
    "tensor<2x3x2xi64>, tensor<3xi64>) -> tensor<2x3x2x2xi64>", "tensor<2x3x2x2xi64>")
CONV = one_op(
    "%a: tensor<1x4x4x1xi64>, %k: tensor<3x3x1x1xi64>, %p: tensor<2x2xi64>",
    '"stablehlo.dynamic_conv"(%a, %k, %p) {window_strides = array<i64: 4, 4>, '
    "lhs_dilation = array<i64: 2, 2>, dimension_numbers = #stablehlo.conv<[b, 0, 1, f]x"
    "[0, 1, i, o]->[b, 0, 1, f]>, batch_group_count = 1 : i64, feature_group_count = 1 : i64}"
    " : (tensor<1x4x4x1xi64>, tensor<3x3x1x1xi64>, tensor<2x2xi64>) -> tensor<1x2x2x1xi64>",
    "tensor<1x2x2x1xi64>")

DYNAMIC_VALID = [IOTA, RESHAPE, BCAST, PAD, SLICE, GATHER, CONV]

DYNAMIC_INVALID = [
    # (program, replace, with, label)
    (IOTA, "dim = 0", "dim = 2", "dynamic_iota_c1"),
    (IOTA, "tensor<2xi64>", "tensor<2x1xi64>", "dynamic_iota_c1"),
    (IOTA, "tensor<2xi64>", "tensor<3xi64>", "dynamic_iota_c2"),
    (RESHAPE, "tensor<2xi64>", "tensor<3xi64>", "dynamic_reshape_c3"),
    (BCAST, "tensor<2xi64>", "tensor<3xi64>", "dynamic_broadcast_in_dim_c7"),
    (BCAST, "known_expanding_dimensions = array<i64: 0>",
     "known_expanding_dimensions = array<i64: 1>", "dynamic_broadcast_in_dim_c9"),
    (PAD, "tensor<f32>", "tensor<f16>", "dynamic_pad_c1"),
    (PAD, "tensor<f32>", "tensor<1xf32>", "dynamic_pad_c1"),
    (PAD, "tensor<1xi64>", "tensor<2xi64>", "dynamic_pad_c2"),
    (PAD, "tensor<7xf32>", "tensor<7x1xf32>", "dynamic_pad_c4"),
    (SLICE, "tensor<2xf32>", "tensor<2xi32>", "real_dynamic_slice_c1"),
    (SLICE, "tensor<1xi64>", "tensor<2xi64>", "real_dynamic_slice_c2"),
    (SLICE, "tensor<2xf32>", "tensor<2x1xf32>", "real_dynamic_slice_c5"),
    (GATHER, "tensor<3xi64>", "tensor<2xi64>", "dynamic_gather_c20"),
    (GATHER, "tensor<2x3x2x2xi64>", "tensor<2x3x2xi64>", "dynamic_gather_c5"),
    (GATHER, "offset_dims = [2, 3]", "offset_dims = [3, 2]", "gather_c4"),
    (CONV, "tensor<2x2xi64>", "tensor<2x3xi64>", "dynamic_conv_c4"),
    (CONV, "tensor<2x2xi64>", "tensor<4xi64>", "dynamic_conv_c1"),
    (CONV, "tensor<1x2x2x1xi64>", "tensor<1x2x2xi64>", "dynamic_conv_c27"),
    (CONV, "feature_group_count = 1", "feature_group_count = 0", "convolution_c22"),
]


@pytest.mark.parametrize("text", DYNAMIC_VALID)
def test_dynamic_valid(text: str) -> None:
    parse_module(text)


@pytest.mark.parametrize("text,old,new,label", DYNAMIC_INVALID,
                         ids=[f"{c[3]}-{i}" for i, c in enumerate(DYNAMIC_INVALID)])
def test_dynamic_invalid(text: str, old: str, new: str, label: str) -> None:
    assert old in text
    rejects(text.replace(old, new), label, "2:8")


def test_dynamic_gather_runs_after_the_static_checks() -> None:
    """The zero-size probe of the gather checks does not change what the op computes."""
    import numpy as np

    text = GATHER.replace("%s: tensor<3xi64>", "%unused: tensor<3xi64>").replace(
        "(%a, %i, %s)", "(%a, %i, %c)").replace(
        "  %0 =", "  %c = stablehlo.constant dense<[1, 2, 2]> : tensor<3xi64>\n  %0 =")
    a = np.arange(24, dtype=np.int64).reshape(3, 4, 2)
    i = np.zeros((2, 3, 2), np.int64)
    out = xlapy.compile(text)(a, i, np.zeros(3, np.int64))
    assert out.shape == (2, 3, 2, 2) and (out == a[0, 0:2, 0:2]).all()


# ---- quantized element types ---------------------------------------------------------------------
def quantize(qtype: str) -> str:
    return one_op("%a: tensor<4xf32>", f"stablehlo.uniform_quantize %a : (tensor<4xf32>) -> "
                  f"tensor<4x{qtype}>", f"tensor<4x{qtype}>")


@pytest.mark.parametrize("qtype", [
    "!quant.uniform<i8:f32, 0.5:-128>", "!quant.uniform<i8<-8:7>:f32, 0.5:7>",
    "!quant.uniform<u8:f32, 0.5:255>", "!quant.uniform<i4:f32, 2.0:-8>",
    "!quant.uniform<i32:f32, 0.5:0>"])
def test_quant_type_valid(qtype: str) -> None:
    parse_module(quantize(qtype))


@pytest.mark.parametrize("qtype,label", [
    ("!quant.uniform<i8<-200:10>:f32, 0.5:3>", "quant_type_c4"),
    ("!quant.uniform<i8<5:5>:f32, 0.5:5>", "quant_type_c4"),
    ("!quant.uniform<u8<0:300>:f32, 0.5:3>", "quant_type_c4"),
    ("!quant.uniform<i8:f32, -0.5:3>", "quant_type_c6"),
    ("!quant.uniform<i8:f32, 0.0:3>", "quant_type_c6"),
    ("!quant.uniform<i8:f32, 0.5:300>", "quant_type_c8"),
    ("!quant.uniform<i8<-8:7>:f32, 0.5:8>", "quant_type_c8"),
    ("!quant.uniform<i4:f32, 0.5:8>", "quant_type_c8"),
])
def test_quant_type_invalid(qtype: str, label: str) -> None:
    rejects(quantize(qtype), label, "2:8")


def test_quant_type_negative_axis_from_the_builder() -> None:
    ok = QuantParams(ElementType.S8, ElementType.F32, (0.5,), (0,), -128, 127)
    x = Shape.array(ElementType.S8, [4])
    assert infer_shape("uniform_dequantize", [x], UniformDequantizeAttrs(ok)) == \
        Shape.array(ElementType.F32, [4])
    bad = QuantParams(ElementType.S8, ElementType.F32, (0.5,), (0,), -128, 127, -2)
    with pytest.raises(ShapeInferenceError, match="quant_type_c12"):
        infer_shape("uniform_dequantize", [x], UniformDequantizeAttrs(bad))


# ---- quantized dot_general / convolution ---------------------------------------------------------
Q = "!quant.uniform<i8:f32, 0.5:0>"
Q_AXIS1 = "!quant.uniform<i8:f32:1, {0.5:0, 0.25:0}>"


def dot(lhs: str, rhs: str, result: str) -> str:
    return one_op(f"%a: {lhs}, %b: {rhs}", f"stablehlo.dot_general %a, %b, contracting_dims = "
                  f"[1] x [0] : ({lhs}, {rhs}) -> {result}", result)


@pytest.mark.parametrize("lhs,rhs,result", [
    (f"tensor<2x3x{Q}>", f"tensor<3x2x{Q_AXIS1}>", f"tensor<2x2x{Q_AXIS1}>"),
    (f"tensor<2x3x{Q}>", f"tensor<3x2x{Q}>", f"tensor<2x2x{Q}>"),
    ("tensor<2x3xf32>", f"tensor<3x2x{Q_AXIS1}>", "tensor<2x2xf32>"),
])
def test_quantized_dot_general_valid(lhs: str, rhs: str, result: str) -> None:
    parse_module(dot(lhs, rhs, result))


@pytest.mark.parametrize("lhs,rhs,result,label", [
    (f"tensor<2x3x{Q}>", "tensor<3x2xf32>", f"tensor<2x2x{Q}>", "dot_general_c14"),
    ("tensor<2x3xf32>", f"tensor<3x2x{Q}>", f"tensor<2x2x{Q}>", "dot_general_c14"),
    (f"tensor<2x3x{Q}>", "tensor<3x2x!quant.uniform<i8:f32, 0.5:3>>", f"tensor<2x2x{Q}>",
     "dot_general_c15"),
    (f"tensor<2x3x{Q}>", "tensor<3x2x!quant.uniform<i8:f32:0, {0.5:0, 0.5:0, 0.5:0}>>",
     f"tensor<2x2x{Q}>", "dot_general_c16"),
    (f"tensor<2x3x{Q}>", "tensor<3x2x!quant.uniform<i16:f32, 0.5:0>>", f"tensor<2x2x{Q}>",
     "dot_general_c17"),
    (f"tensor<2x3x{Q}>", "tensor<3x2x!quant.uniform<i8:f16, 0.5:0>>", f"tensor<2x2x{Q}>",
     "dot_general_c18"),
    (f"tensor<2x3x{Q}>", f"tensor<3x2x{Q}>", f"tensor<2x2x{Q_AXIS1}>", "dot_general_c19"),
    ("tensor<2x3xf32>", "tensor<3x2x!quant.uniform<i8:f32, 0.5:0>>", "tensor<2x2xf16>",
     "dot_general_c20"),
])
def test_quantized_dot_general_invalid(lhs: str, rhs: str, result: str, label: str) -> None:
    rejects(dot(lhs, rhs, result), label, "2:8")


QCONV_RHS = "!quant.uniform<i8:f32:3, {0.5:0, 0.25:0}>"


def qconv(rhs: str = QCONV_RHS, result: str = QCONV_RHS, lhs: str = Q) -> str:
    lt, rt, ot = (f"tensor<1x4x4x1x{lhs}>", f"tensor<3x3x1x2x{rhs}>",
                  f"tensor<1x2x2x2x{result}>")
    return one_op(f"%a: {lt}, %k: {rt}", "stablehlo.convolution(%a, %k) dim_numbers = "
                  "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {} {batch_group_count = "
                  f"1 : i64, feature_group_count = 1 : i64}} : ({lt}, {rt}) -> {ot}", ot)


def test_quantized_convolution_valid() -> None:
    parse_module(qconv())
    parse_module(qconv(Q, Q))


@pytest.mark.parametrize("kwargs,label", [
    ({"rhs": "!quant.uniform<i8:f32:0, {0.5:0, 0.5:0, 0.5:0}>"}, "convolution_c29"),
    ({"result": "!quant.uniform<i8:f32:1, {0.5:0, 0.5:0}>"}, "convolution_c30"),
    ({"lhs": "!quant.uniform<i16:f32, 0.5:0>"}, "convolution_c31"),
    ({"result": "!quant.uniform<i8:f16:3, {0.5:0, 0.25:0}>"}, "convolution_c32"),
    ({"rhs": Q}, "convolution_c33"),
])
def test_quantized_convolution_invalid(kwargs: dict[str, str], label: str) -> None:
    rejects(qconv(**kwargs), label, "2:8")


# ---- dot_general algorithm -----------------------------------------------------------------------
def dot_algorithm(algorithm: str, precision: str = "") -> str:
    t = "(tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>"
    return one_op("%a: tensor<2x3xf32>, %b: tensor<3x4xf32>",
                  f"stablehlo.dot_general %a, %b, contracting_dims = [1] x [0],{precision} "
                  f"algorithm = <{algorithm}> : {t}", "tensor<2x4xf32>")


def alg(lhs: str = "tf32", rhs: str = "tf32", acc: str = "f32", lc: int = 1, rc: int = 1,
        ops: int = 1, imprecise: str = "false") -> str:
    return (f"lhs_precision_type = {lhs}, rhs_precision_type = {rhs}, accumulation_type = "
            f"{acc}, lhs_component_count = {lc}, rhs_component_count = {rc}, "
            f"num_primitive_operations = {ops}, allow_imprecise_accumulation = {imprecise}")


@pytest.mark.parametrize("algorithm,precision", [
    (alg(), ""), (alg(ops=3), ""), (alg("bf16", "bf16", ops=6), ""),
    (alg("bf16", "bf16", ops=9), ""), (alg("f32", "f32"), " precision = [DEFAULT, DEFAULT],"),
    (alg("f8E4M3FN", "f8E5M2", imprecise="true"), ""), (alg("f16", "f16", "f16"), ""),
    (alg("f64", "f64", "f64"), ""),
])
def test_dot_algorithm_valid(algorithm: str, precision: str) -> None:
    parse_module(dot_algorithm(algorithm, precision))


@pytest.mark.parametrize("algorithm,precision,label", [
    (alg(), " precision = [HIGHEST, DEFAULT],", "dot_general_c21"),
    (alg(lc=0), "", "dot_general_c22"),
    (alg(rc=-1), "", "dot_general_c23"),
    (alg(ops=0), "", "dot_general_c24"),
    (alg(lc=2), "", "dot_general_c25"),
    (alg(ops=2), "", "dot_general_c25"),
    (alg("f32", "f32", "f16"), "", "dot_general_c25"),
    (alg("bf16", "bf16", imprecise="true"), "", "dot_general_c25"),
    (alg("f8E4M3FN", "f8E5M2", "bf16"), "", "dot_general_c25"),
])
def test_dot_algorithm_invalid(algorithm: str, precision: str, label: str) -> None:
    rejects(dot_algorithm(algorithm, precision), label, "2:8")


def test_dot_algorithm_prints_and_reparses() -> None:
    from xlapy.stablehlo import print_module

    module = parse_module(dot_algorithm(alg("bf16", "bf16", ops=3)))
    text = print_module(module)
    assert "lhs_precision_type = bf16," in text
    again = parse_module(text)
    assert again.entry.root.attrs.algorithm == module.entry.root.attrs.algorithm


# ---- #stablehlo.conv dimension letters (parse time) ---------------------------------------------
def conv(layout: str) -> str:
    t = "(tensor<1x4x4x2xf32>, tensor<3x3x2x5xf32>) -> tensor<1x2x2x5xf32>"
    return one_op("%a: tensor<1x4x4x2xf32>, %b: tensor<3x3x2x5xf32>",
                  f"stablehlo.convolution(%a, %b) dim_numbers = {layout}, window = {{}} "
                  f"{{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : {t}",
                  "tensor<1x2x2x5xf32>")


def test_conv_layout_valid() -> None:
    parse_module(conv("[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]"))
    parse_module(conv("[b, 1, 0, f]x[1, 0, i, o]->[b, 1, 0, f]"))


@pytest.mark.parametrize("layout,needle,label", [
    ("[b, 0, 1, b]x[0, 1, i, o]->[b, 0, 1, f]", "b]x", "convolution_c14"),
    ("[b, 0, 0, f]x[0, 1, i, o]->[b, 0, 1, f]", "0, f]x", "convolution_c14"),
    ("[b, 0, 2, f]x[0, 1, i, o]->[b, 0, 1, f]", "[b, 0, 2", "convolution_c14"),
    ("[b, 0, 1, f]x[0, 1, i, i]->[b, 0, 1, f]", "i]->", "convolution_c19"),
    ("[b, 0, 1, f]x[0, 1, 2, i]->[b, 0, 1, f]", "]->", "convolution_c19"),
    ("[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, z]", "z]", "convolution_c21"),
    ("[b, 0, 1, f]x[0, 1, i, o]->[b, 0, f]", "[b, 0, f]", "convolution_c18"),
    # a 5000-digit spatial number was a raw ValueError (Python's int digit limit): fuzzer
    ("[b, 0, 1, f]x[0, 1, i, o]->[b, " + "7" * 5000 + ", 1, f]", "777", "convolution_c21"),
])
def test_conv_layout_invalid(layout: str, needle: str, label: str) -> None:
    text = conv(layout)
    rejects(text, label, at(text, needle))


# ---- infeed layout -------------------------------------------------------------------------------
def infeed(layout: str) -> str:
    return ("func.func @main(%t: !stablehlo.token) -> tensor<2x3xf32> {\n"
            '  %0, %1, %2 = "stablehlo.infeed"(%t) {infeed_config = "", layout = '
            f"{layout}}} : (!stablehlo.token) -> (tensor<2x3xf32>, tensor<4xi32>, "
            "!stablehlo.token)\n  return %0 : tensor<2x3xf32>\n}")


@pytest.mark.parametrize("layout", ["[[1, 0], [0]]", "[[0, 1], [0]]"])
def test_infeed_layout_valid(layout: str) -> None:
    from xlapy.stablehlo import print_module

    text = print_module(parse_module(infeed(layout)))
    assert f"layout = {layout}" in text
    parse_module(text)


@pytest.mark.parametrize("layout", ["[[1, 0]]", "[[1, 0], [0], []]", "[[1, 1], [0]]",
                                    "[[1, 0], [1]]"])
def test_infeed_layout_invalid(layout: str) -> None:
    rejects(infeed(layout), "infeed_layout", "2:16")


# ---- uniform_quantize / uniform_dequantize result types -----------------------------------------
QF32 = "!quant.uniform<i8:f32, 0.5:1>"


def test_uniform_quantize_dequantize_results_valid() -> None:
    parse_module(one_op(f"%a: tensor<4x{QF32}>", f"stablehlo.uniform_quantize %a : "
                        f"(tensor<4x{QF32}>) -> tensor<4x!quant.uniform<i8:f32, 0.25:-3>>",
                        "tensor<4x!quant.uniform<i8:f32, 0.25:-3>>"))
    parse_module(one_op(f"%a: tensor<4x{QF32}>", f"stablehlo.uniform_dequantize %a : "
                        f"(tensor<4x{QF32}>) -> tensor<4xf32>", "tensor<4xf32>"))


@pytest.mark.parametrize("text,label", [
    (one_op(f"%a: tensor<4x{QF32}>", f"stablehlo.uniform_quantize %a : (tensor<4x{QF32}>) -> "
            "tensor<4x!quant.uniform<i8:f16, 0.5:1>>", "tensor<4x!quant.uniform<i8:f16, 0.5:1>>"),
     "uniform_quantize_c2"),
    (one_op("%a: tensor<4xf32>", f"stablehlo.uniform_quantize %a : (tensor<4xf32>) -> "
            f"tensor<5x{QF32}>", f"tensor<5x{QF32}>"), "uniform_quantize_c1"),
    (one_op(f"%a: tensor<4x{QF32}>", f"stablehlo.uniform_dequantize %a : (tensor<4x{QF32}>) -> "
            "tensor<4xf16>", "tensor<4xf16>"), "uniform_dequantize_c2"),
])
def test_uniform_quantize_dequantize_results_invalid(text: str, label: str) -> None:
    rejects(text, label, "2:8")


# ---- custom_call output_operand_aliases ----------------------------------------------------------
def aliased(alias: str, results: str = "(tensor<2xf32>, tensor<i32>)") -> str:
    return ("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
            "  %0:2 = stablehlo.custom_call @foo(%a) {output_operand_aliases = "
            f"[#stablehlo.output_operand_alias<{alias}>]}} : (tensor<2xf32>) -> {results}\n"
            "  return %0#0 : tensor<2xf32>\n}")


def test_custom_call_alias_valid_and_printed() -> None:
    from xlapy.stablehlo import print_module

    alias = "output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []"
    text = print_module(parse_module(aliased(alias)))
    assert f"#stablehlo.output_operand_alias<{alias}>" in text
    parse_module(text)


@pytest.mark.parametrize("alias", [
    "output_tuple_indices = [0], operand_index = 1, operand_tuple_indices = []",
    "output_tuple_indices = [1], operand_index = 0, operand_tuple_indices = []",
    "output_tuple_indices = [2], operand_index = 0, operand_tuple_indices = []",
    "output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = [0]",
])
def test_custom_call_alias_invalid(alias: str) -> None:
    rejects(aliased(alias), "custom_call_alias", "2:10")


# ---- result-type constraints: the spec label of a declared result type that is wrong -----------
RESULT_CASES = [
    # (args, op with {R} for the result type, valid result, invalid result, label)
    ("%a: tensor<2xf32>", "stablehlo.add %a, %a : (tensor<2xf32>, tensor<2xf32>) -> {R}",
     "tensor<2xf32>", "tensor<2xf16>", "add_c1"),
    ("%a: tensor<2x3xf32>", "stablehlo.reshape %a : (tensor<2x3xf32>) -> {R}",
     "tensor<3x2xf32>", "tensor<3x2xf64>", "reshape_c1"),
    ("%a: tensor<2x3xf32>", "stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> {R}",
     "tensor<3x2xf32>", "tensor<2x3xf32>", "transpose_c3"),
    ("%a: tensor<4xf32>", "stablehlo.slice %a [1:3] : (tensor<4xf32>) -> {R}",
     "tensor<2xf32>", "tensor<3xf32>", "slice_c5"),
    ("%a: tensor<2xf32>", "stablehlo.concatenate %a, %a, dim = 0 : (tensor<2xf32>, "
     "tensor<2xf32>) -> {R}", "tensor<4xf32>", "tensor<5xf32>", "concatenate_c6"),
    ("%a: tensor<2x3xf32>, %b: tensor<3x4xf32>", "stablehlo.dot_general %a, %b, "
     "contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3x4xf32>) -> {R}",
     "tensor<2x4xf32>", "tensor<4x2xf32>", "dot_general_c13"),
    ("%a: tensor<2xf32>", "stablehlo.convert %a : (tensor<2xf32>) -> {R}", "tensor<2xi32>",
     "tensor<3xi32>", "convert_c1"),
    ("%a: tensor<2xf32>", "stablehlo.compare LT, %a, %a : (tensor<2xf32>, tensor<2xf32>) -> {R}",
     "tensor<2xi1>", "tensor<3xi1>", "compare_c2"),
    ("%a: tensor<2xcomplex<f32>>", "stablehlo.real %a : (tensor<2xcomplex<f32>>) -> {R}",
     "tensor<2xf32>", "tensor<2xf64>", "real_c2"),
]


@pytest.mark.parametrize("args,op,good,bad,label", RESULT_CASES,
                         ids=[c[4] for c in RESULT_CASES])
def test_result_type_label(args: str, op: str, good: str, bad: str, label: str) -> None:
    parse_module(one_op(args, op.replace("{R}", good), good))
    rejects(one_op(args, op.replace("{R}", bad), bad), f"({label})", "2:8")


def test_verify_module_names_the_result_type_constraint() -> None:
    from xlapy.errors import VerificationError
    from xlapy.verify import verify_module

    module = parse_module(one_op("%a: tensor<2x3xf32>", "stablehlo.reshape %a : "
                                 "(tensor<2x3xf32>) -> tensor<3x2xf32>", "tensor<3x2xf32>"))
    verify_module(module)
    reshape = next(i for i in module.entry.instructions if i.opcode == "reshape")
    reshape.shape = Shape.array(ElementType.F32, [5])
    with pytest.raises(VerificationError, match="reshape_c2") as e:
        verify_module(module)
    assert e.value.constraint == "reshape_c2"


# ---- attributes StableHLO declares as i64 --------------------------------------------------------
I64_CASES = [
    ("", '"stablehlo.iota"() {{iota_dimension = 0{T}}} : () -> tensor<4xf32>', "tensor<4xf32>",
     "iota_dimension"),
    ("%a: tensor<2xf32>", '"stablehlo.concatenate"(%a, %a) {{dimension = 0{T}}} : '
     "(tensor<2xf32>, tensor<2xf32>) -> tensor<4xf32>", "tensor<4xf32>", "dimension"),
    ("%a: tensor<2x3xf32>", '"stablehlo.get_dimension_size"(%a) {{dimension = 1{T}}} : '
     "(tensor<2x3xf32>) -> tensor<i32>", "tensor<i32>", "dimension"),
]


@pytest.mark.parametrize("args,op,result,key", I64_CASES, ids=[c[3] for c in I64_CASES])
def test_i64_attribute_width(args: str, op: str, result: str, key: str) -> None:
    parse_module(one_op(args, op.format(T=""), result))
    parse_module(one_op(args, op.format(T=" : i64"), result))
    text = one_op(args, op.format(T=" : i32"), result)
    with pytest.raises(ParseError, match=f"'{key}' must be a 64-bit signless integer") as e:
        parse_module(text)
    assert str(e.value).startswith("<input>:2:8:")


# ---- quantized elementwise / data-movement ops keep one baseline type ---------------------------
QB = "!quant.uniform<i8:f32, 0.5:1>"
QB2 = "!quant.uniform<i8:f32, 0.25:-2>"


@pytest.mark.parametrize("args,op,result", [
    (f"%a: tensor<2x{QB}>, %b: tensor<2x{QB2}>",
     f"stablehlo.add %a, %b : (tensor<2x{QB}>, tensor<2x{QB2}>) -> tensor<2x{QB2}>",
     f"tensor<2x{QB2}>"),
    (f"%p: tensor<2xi1>, %a: tensor<2x{QB}>", f"stablehlo.select %p, %a, %a : (tensor<2xi1>, "
     f"tensor<2x{QB}>, tensor<2x{QB}>) -> tensor<2x{QB}>", f"tensor<2x{QB}>"),
    (f"%a: tensor<4x{QB}>, %i: tensor<i32>", f"stablehlo.dynamic_slice %a, %i, sizes = [2] : "
     f"(tensor<4x{QB}>, tensor<i32>) -> tensor<2x{QB}>", f"tensor<2x{QB}>"),
    (f"%a: tensor<4x{QB}>", f"stablehlo.reshape %a : (tensor<4x{QB}>) -> tensor<2x2x{QB}>",
     f"tensor<2x2x{QB}>"),
])
def test_quantized_same_baseline_valid(args: str, op: str, result: str) -> None:
    parse_module(one_op(args, op, result))


@pytest.mark.parametrize("args,op,result,label", [
    (f"%a: tensor<2x{QB}>, %b: tensor<2xf32>",
     f"stablehlo.add %a, %b : (tensor<2x{QB}>, tensor<2xf32>) -> tensor<2x{QB}>",
     f"tensor<2x{QB}>", "add_c1"),
    (f"%a: tensor<2x{QB}>", f"stablehlo.abs %a : (tensor<2x{QB}>) -> tensor<2xf32>",
     "tensor<2xf32>", "abs_c2"),
    (f"%a: tensor<2x{QB}>", f"stablehlo.abs %a : (tensor<2x{QB}>) -> "
     "tensor<2x!quant.uniform<i8<-100:100>:f32, 0.5:1>>",
     "tensor<2x!quant.uniform<i8<-100:100>:f32, 0.5:1>>", "abs_c2"),
    (f"%a: tensor<4x{QB}>", f"stablehlo.reshape %a : (tensor<4x{QB}>) -> "
     "tensor<2x2x!quant.uniform<i16:f32, 0.5:1>>",
     "tensor<2x2x!quant.uniform<i16:f32, 0.5:1>>", "reshape_c1"),
])
def test_quantized_same_baseline_invalid(args: str, op: str, result: str, label: str) -> None:
    rejects(one_op(args, op, result), label, "2:8")


# ---- custom_call called_computations name functions of the module --------------------------------
def called(name: str) -> str:
    return ("func.func private @f(%x: tensor<f32>) -> tensor<f32> {\n"
            "  return %x : tensor<f32>\n}\n"
            "func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
            f"  %0 = stablehlo.custom_call @foo(%a) {{called_computations = [@{name}]}} : "
            "(tensor<2xf32>) -> tensor<2xf32>\n  return %0 : tensor<2xf32>\n}")


def test_custom_call_called_computations() -> None:
    parse_module(called("f"))
    with pytest.raises(ParseError, match="called_computations names @g") as e:
        parse_module(called("g"))
    assert str(e.value).startswith("<input>:5:8:")


def test_dot_algorithm_generic_form() -> None:
    t = "(tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>"

    def generic(ops: int) -> str:
        return one_op("%a: tensor<2x3xf32>, %b: tensor<3x4xf32>",
                      '"stablehlo.dot_general"(%a, %b) {dot_dimension_numbers = #stablehlo.dot<'
                      "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, "
                      f"algorithm = #stablehlo.dot_algorithm<{alg('bf16', 'bf16', ops=ops)}>}} "
                      f": {t}", "tensor<2x4xf32>")

    module = parse_module(generic(9))
    assert module.entry.root.attrs.algorithm.num_primitive_operations == 9
    rejects(generic(4), "dot_general_c25", "2:8")
