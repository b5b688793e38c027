"""The pretty printer emits JAX's forms, and parse(print(m)) == m in both forms."""

from __future__ import annotations

import numpy as np

import xlapy
from xlapy.stablehlo import parse_module, print_module
from xlapy.stablehlo.equality import modules_equal

JAX_STYLE = """module @jit_f attributes {mhlo.num_partitions = 1 : i32, \
mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<3xi32>) -> (tensor<3x2xf32>) {
    %0 = stablehlo.iota dim = 0 : tensor<3xi32>
    %1 = stablehlo.compare  GT, %arg1, %0,  SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %2 = stablehlo.broadcast_in_dim %1, dims = [1] : (tensor<3xi1>) -> tensor<2x3xi1>
    %3 = stablehlo.constant dense<0.000000e+00> : tensor<2x3xf32>
    %4 = stablehlo.select %2, %arg0, %3 : tensor<2x3xi1>, tensor<2x3xf32>
    %5 = stablehlo.transpose %4, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %6 = stablehlo.slice %5 [0:3, 0:2:1] : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %7 = stablehlo.dot_general %6, %4, contracting_dims = [1] x [0], precision = [DEFAULT, \
DEFAULT] : (tensor<3x2xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
    %c = stablehlo.constant dense<0.0> : tensor<f32>
    %9 = stablehlo.pad %7, %c, low = [0, 0], high = [0, -1], interior = [0, 0] \
: (tensor<3x3xf32>, tensor<f32>) -> tensor<3x2xf32>
    %10 = stablehlo.convert %arg1 : (tensor<3xi32>) -> tensor<3xf32>
    %11 = stablehlo.reshape %10 : (tensor<3xf32>) -> tensor<3x1xf32>
    %12 = stablehlo.concatenate %11, %11, dim = 1 : (tensor<3x1xf32>, tensor<3x1xf32>) \
-> tensor<3x2xf32>
    %13 = stablehlo.add %9, %12 : tensor<3x2xf32>
    return %13 : tensor<3x2xf32>
  }
}
""".replace("\\\n", "")


def test_pretty_forms_printed() -> None:
    m = parse_module(JAX_STYLE)
    out = print_module(m)
    for form in ("stablehlo.iota dim = 0", "stablehlo.compare  GT,", ",  SIGNED",
                 "stablehlo.broadcast_in_dim %", "dims = [1]", "stablehlo.transpose %",
                 "stablehlo.slice %", "[0:3, 0:2]", "contracting_dims = [1] x [0]",
                 "precision = [DEFAULT, DEFAULT]", "low = [0, 0], high = [0, -1]",
                 "stablehlo.convert %", "stablehlo.concatenate %", "dim = 1"):
        assert form in out, (form, out)
    assert '"stablehlo.' not in out  # nothing fell back to the generic form
    for generic in (False, True):
        assert modules_equal(m, parse_module(print_module(m, generic)))


def test_pretty_module_runs_the_same() -> None:
    text = JAX_STYLE
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([3, 0, 5], np.int32)
    want = xlapy.compile(text)(a, b)
    got = xlapy.compile(print_module(parse_module(text)))(a, b)
    np.testing.assert_array_equal(got, want)


def test_elided_gather_fields_and_index_type() -> None:
    text = """func.func @main(%x: tensor<8xf32>, %i: tensor<5x1xi32>) -> tensor<5xf32> {
  %0 = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<
      collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>,
      indices_are_sorted = false, slice_sizes = array<i64: 1>}>
      {operand_layouts = [dense<[0]> : tensor<1xindex>]}
      : (tensor<8xf32>, tensor<5x1xi32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}"""
    exe = xlapy.compile(text)
    x = np.arange(8, dtype=np.float32) * 2
    assert exe(x, np.array([[1], [7], [0], [3], [3]], np.int32)).tolist() == [2, 14, 0, 6, 6]


REGIONS = """func.func @main(%x: tensor<2x3xf32>) -> (tensor<2xf32>, tensor<f32>) {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1]
    : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
  %1 = stablehlo.reduce(%x init: %z) across dimensions = [0, 1]
    : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
   reducer(%a : tensor<f32>, %b : tensor<f32>)  {
    %m = stablehlo.multiply %a, %b : tensor<f32>
    %s = stablehlo.add %m, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }
  %c = stablehlo.constant dense<3> : tensor<i32>
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %w:2 = stablehlo.while(%i = %i0, %acc = %0) : tensor<i32>, tensor<2xf32>
   cond {
    %lt = stablehlo.compare  LT, %i, %c,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %n = stablehlo.add %i, %one : tensor<i32>
    %d = stablehlo.add %acc, %acc : tensor<2xf32>
    stablehlo.return %n, %d : tensor<i32>, tensor<2xf32>
  }
  return %w#1, %1 : tensor<2xf32>, tensor<f32>
}"""


def test_region_ops_pretty_and_round_trip() -> None:
    m = parse_module(REGIONS)
    out = print_module(m)
    assert "applies stablehlo.add across dimensions = [1]" in out
    assert "stablehlo.while(%" in out and " cond {" in out and "} do {" in out
    assert '"stablehlo.reduce"' in out  # the two-op reducer has no `applies` form
    for generic in (False, True):
        assert modules_equal(m, parse_module(print_module(m, generic)))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    a, b = xlapy.compile(out)(x)
    a0, b0 = xlapy.compile(REGIONS)(x)
    assert a.tolist() == a0.tolist() == [24.0, 96.0] and b == b0


def test_convolution_custom_call_check_pretty() -> None:
    text = """func.func @main(%x: tensor<1x6x6x2xf32>, %k: tensor<3x3x2x4xf32>)
    -> tensor<1x3x3x4xf32> {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
    window = {stride = [2, 1], pad = [[1, 0], [0, 1]], rhs_dilate = [1, 2]}
    {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
    : (tensor<1x6x6x2xf32>, tensor<3x3x2x4xf32>) -> tensor<1x3x3x4xf32>
  %1 = stablehlo.custom_call @my_target(%0) {backend_config = "cfg", has_side_effect = true}
    : (tensor<1x3x3x4xf32>) -> tensor<1x3x3x4xf32>
  check.expect_eq %0, %0 : tensor<1x3x3x4xf32>
  return %1 : tensor<1x3x3x4xf32>
}"""
    m = parse_module(text)
    out = print_module(m)
    assert "stablehlo.convolution(%" in out and "window = {stride = [2, 1]" in out
    assert "pad = [[1, 0], [0, 1]]" in out and "rhs_dilate = [1, 2]" in out
    assert 'stablehlo.custom_call @my_target(%' in out and 'backend_config = "cfg"' in out
    assert "check.expect_eq %" in out and '"' + "stablehlo." not in out
    for generic in (False, True):
        assert modules_equal(m, parse_module(print_module(m, generic)))


def test_builder_tuple_results_round_trip() -> None:
    """XlaBuilder computations print as StableHLO: a While over a tuple state (one
    tuple-valued result) and a tuple-shaped root (printed through `stablehlo.tuple`)."""
    from xlapy.builder import ops
    from xlapy.builder.xla_builder import XlaBuilder
    from xlapy.types import ElementType, Shape

    s32 = Shape.scalar(ElementType.S32)
    state = Shape.tuple([s32, s32])
    cb = XlaBuilder("cond")
    p = cb.parameter(0, state)
    cond = cb.build(ops.Lt(ops.GetTupleElement(p, 0), ops.ConstantR0(cb, 5)))
    bb = XlaBuilder("body")
    q = bb.parameter(0, state)
    i = ops.GetTupleElement(q, 0)
    body = bb.build(ops.Tuple(bb, [ops.Add(i, ops.ConstantR0(bb, 1)),
                                   ops.Add(ops.GetTupleElement(q, 1), i)]))
    b = XlaBuilder("main")
    x = b.parameter(0, s32)
    w = ops.While(cond, body, ops.Tuple(b, [x, x]))
    m = b.build(w).module
    for generic in (False, True):
        text = print_module(m, generic)
        assert modules_equal(m, parse_module(text)), text
    out = xlapy.compile(print_module(m))(np.int32(0))
    assert out == (5, 10)


def test_jaxlib_custom_call_attributes() -> None:
    """jaxlib's lapack calls: `mhlo.backend_config` is kept, `#sdy.op_sharding_rule<...>`
    (an arrow inside) parses, and the call round-trips."""
    text = """func.func @main(%a: tensor<3x3xf64>) -> tensor<3x3xf64> {
  %0:2 = stablehlo.custom_call @lapack_dpotrf_ffi(%a) {backend_config = "",
    mhlo.backend_config = {uplo = 76 : ui8}, mhlo.frontend_attributes = {num_batch_dims = "0"},
    operand_layouts = [dense<[0, 1]> : tensor<2xindex>],
    result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>],
    sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([k, l], [m]) {i=3, j=3}, custom>}
    : (tensor<3x3xf64>) -> (tensor<3x3xf64>, tensor<i32>)
  return %0#0 : tensor<3x3xf64>
}"""
    m = parse_module(text)
    call = next(i for i in m.entry.instructions if i.opcode == "custom_call")
    assert call.attrs.mhlo_backend_config == (("uplo", 76),)
    for generic in (False, True):
        assert modules_equal(m, parse_module(print_module(m, generic)))
    a = np.array([[4.0, 2, 0], [2, 5, 1], [0, 1, 3]])
    got = xlapy.compile(text, backend="interpreter")(a)  # potrf leaves the upper triangle
    np.testing.assert_allclose(np.tril(got), np.linalg.cholesky(a))
