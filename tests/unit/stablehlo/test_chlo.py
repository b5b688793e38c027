"""chlo ops: JAX-style text vs scipy/numpy references, constraint labels, decompositions."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import xlapy
from xlapy.api import CompiledProgram
from xlapy.errors import ParseError, ShapeInferenceError
from xlapy.ops.base import infer_shape
from xlapy.stablehlo.chlo_ops import RaggedDotAttrs, ScanAttrs, TopKAttrs
from xlapy.types import ElementType, Shape

F32 = ElementType.F32


def _unary(op: str, t: str = "tensor<5xf32>", rt: str | None = None) -> CompiledProgram:
    rt = rt or t
    return xlapy.compile(f"func.func @main(%a: {t}) -> {rt} {{\n"
                         f"  %0 = chlo.{op} %a : {t} -> {rt}\n  return %0 : {rt}\n}}")


X = np.array([0.1, 0.5, 1.5, 2.5, 7.0], np.float32)


@pytest.mark.parametrize(("op", "ref"), [
    ("sinh", np.sinh), ("cosh", np.cosh), ("asin", lambda x: np.arcsin(x / 8)),
    ("acos", lambda x: np.arccos(x / 8)), ("atan", np.arctan), ("asinh", np.arcsinh),
    ("acosh", lambda x: np.arccosh(x + 1)), ("atanh", lambda x: np.arctanh(x / 8)),
    ("erf", scipy.special.erf), ("erfc", scipy.special.erfc),
    ("erf_inv", lambda x: scipy.special.erfinv(x / 8)), ("lgamma", scipy.special.gammaln),
    ("digamma", scipy.special.digamma), ("bessel_i1e", scipy.special.i1e),
    ("tan", np.tan), ("square", np.square)])
def test_unary_vs_scipy(op: str, ref: object) -> None:
    x = X.astype(np.float64)
    arg = {"asin": x / 8, "acos": x / 8, "atanh": x / 8, "erf_inv": x / 8,
           "acosh": x + 1}.get(op, x).astype(np.float32)
    got = _unary(op)(arg)
    want = ref(X.astype(np.float64))  # type: ignore[operator]
    np.testing.assert_allclose(got, want, rtol=2e-6)
    assert got.dtype == np.float32


def test_digamma_poles_are_nan() -> None:
    got = _unary("digamma")(np.array([0, -1, -2.5, 1, 2], np.float32))
    assert np.isnan(got[:2]).all() and np.isfinite(got[2:]).all()


def test_is_inf_family() -> None:
    x = np.array([np.inf, -np.inf, 1, np.nan, 0], np.float32)
    t, rt = "tensor<5xf32>", "tensor<5xi1>"
    assert _unary("is_inf", t, rt)(x).tolist() == [True, True, False, False, False]
    assert _unary("is_pos_inf", t, rt)(x).tolist() == [True, False, False, False, False]
    assert _unary("is_neg_inf", t, rt)(x).tolist() == [False, True, False, False, False]


def _binary(op: str, t: str) -> CompiledProgram:
    return xlapy.compile(f"func.func @main(%a: {t}, %b: {t}) -> {t} {{\n"
                         f"  %0 = chlo.{op} %a, %b : {t}, {t} -> {t}\n  return %0 : {t}\n}}")


def test_polygamma_zeta_next_after() -> None:
    n = np.array([0, 1, 2, 1.5, -1], np.float32)
    got = _binary("polygamma", "tensor<5xf32>")(n, X)
    np.testing.assert_allclose(got[:3], scipy.special.polygamma([0, 1, 2], X[:3]), rtol=1e-5)
    assert np.isnan(got[3:]).all()
    q = X + 1
    np.testing.assert_allclose(_binary("zeta", "tensor<5xf32>")(X + 2, q),
                               scipy.special.zeta(X + 2, q), rtol=1e-5)
    a = np.array([1, 0, -0.0, 5, np.nan], np.float32)
    b = np.array([2, -1, 1, 5, 0], np.float32)
    got = _binary("next_after", "tensor<5xf32>")(a, b)
    want = np.nextafter(a, b)
    assert got.view(np.uint32)[:4].tolist() == want.view(np.uint32)[:4].tolist()
    assert np.isnan(got[4])


@pytest.mark.parametrize("dt", [np.int8, np.uint16, np.int32, np.uint32, np.int64, np.uint64])
def test_mulhi(dt: type) -> None:
    info = np.iinfo(dt)
    rng = np.random.default_rng(1)
    a = rng.integers(info.min, info.max, 50, dtype=dt, endpoint=True)
    b = rng.integers(info.min, info.max, 50, dtype=dt, endpoint=True)
    name = {np.int8: "i8", np.uint16: "ui16", np.int32: "i32", np.uint32: "ui32",
            np.int64: "i64", np.uint64: "ui64"}[dt]
    got = _binary("mulhi", f"tensor<50x{name}>")(a, b)
    bits = info.bits
    want = [(int(x) * int(y)) >> bits for x, y in zip(a, b)]  # floor shift: signed high half
    assert got.tolist() == want


def test_top_k_jax_form() -> None:
    exe = xlapy.compile("""func.func @main(%a: tensor<2x5xf32>)
    -> (tensor<2x3xf32>, tensor<2x3xi32>) {
  %values, %indices = chlo.top_k(%a, k = 3) : tensor<2x5xf32>
    -> (tensor<2x3xf32>, tensor<2x3xi32>)
  return %values, %indices : tensor<2x3xf32>, tensor<2x3xi32>
}""")
    x = np.array([[1, 5, 5, np.nan, -1], [3, 2, 1, 0, -np.inf]], np.float32)
    v, i = exe(x)
    assert i.tolist() == [[3, 1, 2], [0, 1, 2]]
    assert np.isnan(v[0, 0]) and v[1].tolist() == [3, 2, 1]


def test_top_k_constraints() -> None:
    with pytest.raises(ShapeInferenceError, match="top_k_c2"):
        infer_shape("chlo.top_k", [Shape.array(F32, [4])], TopKAttrs(5))
    with pytest.raises(ShapeInferenceError, match="top_k_c1"):
        infer_shape("chlo.top_k", [Shape.array(F32, [])], TopKAttrs(1))


def test_ragged_dot_mode1_and_constraints() -> None:
    exe = xlapy.compile("""func.func @main(%l: tensor<5x2xf32>, %r: tensor<2x2x3xf32>,
    %g: tensor<2xi64>) -> tensor<5x3xf32> {
  %0 = "chlo.ragged_dot"(%l, %r, %g) {ragged_dot_dimension_numbers = #chlo.ragged_dot<
    lhs_batching_dimensions = [], rhs_batching_dimensions = [],
    lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1],
    lhs_ragged_dimensions = [0], rhs_group_dimensions = [0]>}
    : (tensor<5x2xf32>, tensor<2x2x3xf32>, tensor<2xi64>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}""")
    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((5, 2)).astype(np.float32)
    rhs = rng.standard_normal((2, 2, 3)).astype(np.float32)
    got = exe(lhs, rhs, np.array([2, 2]))
    want = np.concatenate([lhs[:2] @ rhs[0], lhs[2:4] @ rhs[1], np.zeros((1, 3))])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    a = RaggedDotAttrs((), (), (1,), (1,), (1,), ())
    with pytest.raises(ShapeInferenceError, match="ragged_dot_mode"):
        infer_shape("chlo.ragged_dot", [Shape.array(F32, [5, 2]), Shape.array(F32, [2, 2, 3]),
                                         Shape.array(ElementType.S64, [2])], a)


@pytest.mark.parametrize("t", ["bf16", "f16", "f8E4M3FN"])
def test_ragged_dot_small_floats(t: str) -> None:
    """bf16/f8 are numpy kind 'V': they were computed in int64 (all zeros)."""
    import ml_dtypes

    exe = xlapy.compile(f"""func.func @main(%l: tensor<4x2x{t}>, %r: tensor<2x2x3x{t}>,
    %g: tensor<2xi64>) -> tensor<4x3x{t}> {{
  %0 = "chlo.ragged_dot"(%l, %r, %g) {{ragged_dot_dimension_numbers = #chlo.ragged_dot<
    lhs_batching_dimensions = [], rhs_batching_dimensions = [],
    lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1],
    lhs_ragged_dimensions = [0], rhs_group_dimensions = [0]>}}
    : (tensor<4x2x{t}>, tensor<2x2x3x{t}>, tensor<2xi64>) -> tensor<4x3x{t}>
  return %0 : tensor<4x3x{t}>
}}""")
    dt = {"bf16": ml_dtypes.bfloat16, "f16": np.float16,
          "f8E4M3FN": ml_dtypes.float8_e4m3fn}[t]
    lhs = (np.arange(8).reshape(4, 2) / 4).astype(dt)
    rhs = (np.arange(12).reshape(2, 2, 3) / 8).astype(dt)
    got = np.asarray(exe(lhs, rhs, np.array([1, 3]))).astype(np.float64)
    l64, r64 = lhs.astype(np.float64), rhs.astype(np.float64)
    want = np.concatenate([l64[:1] @ r64[0], l64[1:] @ r64[1]]).astype(dt).astype(np.float64)
    np.testing.assert_array_equal(got, want)
    assert got.any()


def test_scan_constraints() -> None:
    class _R:
        parameter_shapes = [Shape.array(F32, []), Shape.array(F32, [])]
        result_shape = Shape.array(ElementType.S32, [])
        multi_result = False

    with pytest.raises(ShapeInferenceError, match="scan_c4"):
        infer_shape("chlo.scan", [Shape.array(F32, [4]), Shape.array(F32, [])],
                    ScanAttrs(0, 1), [_R()])
    with pytest.raises(ShapeInferenceError, match="scan_c2"):
        infer_shape("chlo.scan", [Shape.array(F32, [4]), Shape.array(F32, [])],
                    ScanAttrs(1, 1), [_R()])


def test_broadcast_ops_and_constant_like() -> None:
    exe = xlapy.compile("""func.func @main(%a: tensor<2x3xi32>, %b: tensor<3xi32>,
    %c: tensor<2xi32>)
    -> (tensor<2x3xi32>, tensor<2x3xi1>, tensor<2x3xi32>, tensor<2x3xi32>) {
  %0 = chlo.broadcast_subtract %a, %b : (tensor<2x3xi32>, tensor<3xi32>) -> tensor<2x3xi32>
  %1 = "chlo.broadcast_compare"(%a, %c) {broadcast_dimensions = array<i64: 0>,
    comparison_direction = #chlo<comparison_direction GT>}
    : (tensor<2x3xi32>, tensor<2xi32>) -> tensor<2x3xi1>
  %2 = "chlo.constant_like"(%a) {value = 7 : i32} : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %3 = chlo.broadcast_maximum %b, %a : (tensor<3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
  return %0, %1, %2, %3 : tensor<2x3xi32>, tensor<2x3xi1>, tensor<2x3xi32>, tensor<2x3xi32>
}""")
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.array([1, 2, 3], np.int32)
    c = np.array([1, 4], np.int32)
    d, e, f, g = exe(a, b, c)
    assert (d == a - b).all() and (e == (a > c[:, None])).all() and (f == 7).all()
    assert (g == np.maximum(a, b)).all()
    with pytest.raises(ParseError, match="not broadcast-compatible"):
        xlapy.compile("""func.func @main(%a: tensor<2x3xi32>, %b: tensor<2xi32>)
    -> tensor<2x3xi32> {
  %0 = chlo.broadcast_add %a, %b : (tensor<2x3xi32>, tensor<2xi32>) -> tensor<2x3xi32>
  return %0 : tensor<2x3xi32>
}""")
