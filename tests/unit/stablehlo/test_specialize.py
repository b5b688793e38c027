"""Shape-polymorphic modules (`?` argument dimensions) specialized to the argument shapes."""

from __future__ import annotations

import io

import numpy as np
import pytest

import xlapy
from xlapy.cli.main import main
from xlapy.errors import ParseError

POLY = """module @jit_f attributes {jax.uses_shape_polymorphism = true} {
  func.func public @main(%arg0: tensor<?x3xf32>) -> (tensor<?xf32>) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<?x3xf32>) -> tensor<i32>
    %1 = stablehlo.compare  GE, %0, %c,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.custom_call @shape_assertion(%1, %0) {api_version = 2 : i32,
      error_message = "Expected value >= 1 for dimension variable 'b' (got {0})",
      has_side_effect = true} : (tensor<i1>, tensor<i32>) -> ()
    %2 = call @wrapped(%0, %arg0) : (tensor<i32>, tensor<?x3xf32>) -> tensor<?xf32>
    return %2 : tensor<?xf32>
  }
  func.func private @wrapped(%arg0: tensor<i32>, %arg1: tensor<?x3xf32>) -> tensor<?xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %two = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %c3 = stablehlo.constant dense<3> : tensor<1xi32>
    %0 = stablehlo.reshape %arg0 : (tensor<i32>) -> tensor<1xi32>
    %1 = stablehlo.concatenate %0, %c3, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %2 = stablehlo.dynamic_broadcast_in_dim %two, %1, dims = []
      : (tensor<f32>, tensor<2xi32>) -> tensor<?x3xf32>
    %3 = stablehlo.multiply %arg1, %2 : tensor<?x3xf32>
    %4 = stablehlo.reduce(%3 init: %cst) applies stablehlo.add across dimensions = [1]
      : (tensor<?x3xf32>, tensor<f32>) -> tensor<?xf32>
    %5 = stablehlo.dynamic_iota %0, dim = 0 : (tensor<1xi32>) -> tensor<?xf32>
    %6 = stablehlo.add %4, %5 : tensor<?xf32>
    return %6 : tensor<?xf32>
  }
}"""


def _ref(x: np.ndarray) -> np.ndarray:
    return (x * 2).sum(axis=1) + np.arange(x.shape[0], dtype=np.float32)


def test_polymorphic_compile_specializes_per_shape() -> None:
    exe = xlapy.compile(POLY)
    for n in (1, 4):
        x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
        np.testing.assert_array_equal(exe(x), _ref(x))


def test_shape_assertion_fails_at_import() -> None:
    exe = xlapy.compile(POLY)
    with pytest.raises(ParseError, match=r"shape assertion failed: .*'b' \(got 0\)"):
        exe(np.zeros((0, 3), np.float32))


def test_wrong_static_dimension_is_an_error() -> None:
    exe = xlapy.compile(POLY)
    with pytest.raises(ParseError, match="argument %arg0 of @main has type"):
        exe(np.zeros((2, 4), np.float32))


def test_cli_specializes_to_the_inputs(tmp_path: object) -> None:
    from pathlib import Path

    f = Path(str(tmp_path)) / "poly.mlir"
    f.write_text(POLY)
    out = io.StringIO()
    code = main(["run", str(f), "--input", "2x3xf32=[1 2 3][4 5 6]", "--backend",
                 "interpreter"], out)
    assert code == 0 and "[12.0, 31.0]" in out.getvalue()


def test_without_shapes_dynamic_args_are_reported() -> None:
    from xlapy.stablehlo import parse_module

    with pytest.raises(ParseError, match="dynamic shape not supported: argument %arg0"):
        parse_module(POLY)


def test_jax_export_cumsum() -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax import export

    def f(x: object) -> object:
        return jnp.cumsum(x, axis=0) * x.shape[0]  # type: ignore[attr-defined]

    shape = export.symbolic_shape("b, 2")
    text = export.export(jax.jit(f))(jax.ShapeDtypeStruct(shape, np.float32)).mlir_module()
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_allclose(xlapy.compile(text, backend="interpreter")(x),
                               np.cumsum(x, axis=0) * 3)
