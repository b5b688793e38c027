"""dynamic_* ops (static after propagation) and uniform quantization through StableHLO text."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.errors import ParseError, ShapeInferenceError, Unimplemented
from xlapy.ops.base import infer_shape
from xlapy.ops.dynamic import DynamicBroadcastInDimAttrs, DynamicIotaAttrs, DynamicReshapeAttrs
from xlapy.ops.quantization import QuantParams, UniformDequantizeAttrs, UniformQuantizeAttrs
from xlapy.stablehlo import parse_module, print_module
from xlapy.stablehlo.equality import modules_equal
from xlapy.types import ElementType, Shape

I64 = ElementType.S64
F32 = ElementType.F32

DYN = """func.func @main(%x: tensor<3xf32>, %s: tensor<2xi64>) -> (tensor<2x3xf32>, tensor<?x3xi64>,
    tensor<3x1xf32>, tensor<5xf32>, tensor<2xf32>) {
  %c = stablehlo.constant dense<[2, 3]> : tensor<2xi64>
  %0 = stablehlo.dynamic_broadcast_in_dim %x, %s, dims = [1]
    : (tensor<3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %1 = stablehlo.dynamic_iota %c, dim = 1 : (tensor<2xi64>) -> tensor<?x3xi64>
  %r = stablehlo.constant dense<[3, 1]> : tensor<2xi64>
  %2 = stablehlo.dynamic_reshape %x, %r : (tensor<3xf32>, tensor<2xi64>) -> tensor<3x1xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %l = stablehlo.constant dense<1> : tensor<1xi64>
  %i = stablehlo.constant dense<0> : tensor<1xi64>
  %3 = stablehlo.dynamic_pad %x, %z, %l, %l, %i
    : (tensor<3xf32>, tensor<f32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xf32>
  %st = stablehlo.constant dense<2> : tensor<1xi64>
  %4 = stablehlo.real_dynamic_slice %x, %i, %st, %l
    : (tensor<3xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xf32>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<?x3xi64>, tensor<3x1xf32>, tensor<5xf32>,
    tensor<2xf32>
}"""


def test_dynamic_ops_run_and_round_trip() -> None:
    exe = xlapy.compile(DYN)
    x = np.array([1, 2, 3], np.float32)
    b, io, r, p, s = exe(x, np.array([2, 3]))
    assert b.tolist() == [[1, 2, 3]] * 2 and io.tolist() == [[0, 1, 2]] * 2
    assert r.tolist() == [[1], [2], [3]] and p.tolist() == [0, 1, 2, 3, 0]
    assert s.tolist() == [1, 2]
    m = parse_module(DYN)
    for generic in (False, True):
        assert modules_equal(m, parse_module(print_module(m, generic)))


def test_dynamic_size_mismatch_at_run_time() -> None:
    exe = xlapy.compile(DYN)
    with pytest.raises(Unimplemented, match="dynamic shape not supported"):
        exe(np.ones(3, np.float32), np.array([4, 3]))


def test_dynamic_result_from_non_constant_is_an_error() -> None:
    with pytest.raises(ParseError, match="dynamic shape not supported"):
        xlapy.compile(DYN.replace("dynamic_iota %c", "dynamic_iota %s"))


def test_dynamic_constraints() -> None:
    s2 = Shape.array(I64, [2])
    with pytest.raises(ShapeInferenceError, match="broadcast_in_dim_c"):
        infer_shape("dynamic_broadcast_in_dim", [Shape.array(F32, [3]), s2],
                    DynamicBroadcastInDimAttrs(Shape.array(F32, [2, 4]), (1,)))
    with pytest.raises(ShapeInferenceError, match="dynamic_broadcast_in_dim_c8"):
        infer_shape("dynamic_broadcast_in_dim", [Shape.array(F32, [3]), s2],
                    DynamicBroadcastInDimAttrs(Shape.array(F32, [2, 3]), (1,), (0,), (0,)))
    with pytest.raises(ShapeInferenceError, match="dynamic_iota_c1"):
        infer_shape("dynamic_iota", [Shape.array(F32, [2])],
                    DynamicIotaAttrs(Shape.array(F32, [2, 3]), 0))
    with pytest.raises(ShapeInferenceError, match="reshape_c"):
        infer_shape("dynamic_reshape", [Shape.array(F32, [3]), s2],
                    DynamicReshapeAttrs(Shape.array(F32, [2, 2])))


QT = "tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>"


def test_quantize_dequantize_per_axis() -> None:
    exe = xlapy.compile(f"""func.func @main(%x: tensor<2xf32>) -> (tensor<2xi8>, tensor<2xf32>) {{
  %q = "stablehlo.uniform_quantize"(%x) : (tensor<2xf32>) -> {QT}
  %b = "stablehlo.bitcast_convert"(%q) : ({QT}) -> tensor<2xi8>
  %d = "stablehlo.uniform_dequantize"(%q) : ({QT}) -> tensor<2xf32>
  return %b, %d : tensor<2xi8>, tensor<2xf32>
}}""")
    b, d = exe(np.array([4.0, 1000.0], np.float32))
    assert b.tolist() == [10, 127]  # clamped to the storage range
    np.testing.assert_allclose(d, [4.0, 73.5])


def test_quantized_add_and_storage_range() -> None:
    q1 = "tensor<2x!quant.uniform<i8<-8:7>:f32, 1.0>>"
    exe = xlapy.compile(f"""func.func @main(%x: tensor<2xf32>) -> tensor<2xi8> {{
  %q = "stablehlo.uniform_quantize"(%x) : (tensor<2xf32>) -> {q1}
  %s = stablehlo.add %q, %q : {q1}
  %b = "stablehlo.bitcast_convert"(%s) : ({q1}) -> tensor<2xi8>
  return %b : tensor<2xi8>
}}""")
    assert exe(np.array([2.5, 3.0], np.float32)).tolist() == [4, 6]  # rint(2.5) = 2; 2 + 2
    assert exe(np.array([6.0, -6.0], np.float32)).tolist() == [7, -8]


def test_quantization_constraints() -> None:
    p = QuantParams(ElementType.S8, F32, (0.1, 0.5), (0, 0), -128, 127, 0)
    with pytest.raises(ShapeInferenceError, match="uniform_quantize_c1"):
        infer_shape("uniform_quantize", [Shape.array(F32, [3])], UniformQuantizeAttrs(p))
    with pytest.raises(ShapeInferenceError, match="uniform_dequantize_c1"):
        infer_shape("uniform_dequantize", [Shape.array(F32, [2])], UniformDequantizeAttrs(p))
