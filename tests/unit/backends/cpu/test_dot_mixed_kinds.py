"""dot_general with operands of different kinds (issue 15: bf16 x c128, f16 x c64, int x
complex, int x float): accepted, computed in the result type (XLA's operand upcasting) on
both backends, natively on cpu; a result type of a lower kind than an operand is refused."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.errors import XlapyError

_TYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32, "i8": np.int8,
          "i32": np.int32, "complex<f32>": np.complex64, "complex<f64>": np.complex128}
_TEXT = """func.func @main(%a: tensor<3x5x{a}>, %b: tensor<5x4x{b}>) -> tensor<3x4x{r}> {{
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<3x5x{a}>, tensor<5x4x{b}>) -> tensor<3x4x{r}>
  return %0 : tensor<3x4x{r}>
}}"""


def _operand(name: str, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    x = np.round(rng.standard_normal(shape) * 4)  # small integers: every type holds them
    if name.startswith("complex"):
        x = x + 1j * np.round(rng.standard_normal(shape) * 4)
    return x.astype(_TYPES[name])


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("a,b,r", [("bf16", "complex<f64>", "complex<f64>"),
                                   ("complex<f32>", "f16", "complex<f32>"),
                                   ("i32", "complex<f32>", "complex<f32>"),
                                   ("i8", "complex<f64>", "complex<f64>"),
                                   ("i8", "f32", "f32"), ("f32", "complex<f32>", "complex<f32>")])
def test_mixed_kind_dot_computes_in_the_result_type(backend: str, a: str, b: str,
                                                     r: str) -> None:
    rng = np.random.default_rng(7)
    x, y = _operand(a, (3, 5), rng), _operand(b, (5, 4), rng)
    exe = xlapy.compile(_TEXT.format(a=a, b=b, r=r), backend=backend)
    if backend == "cpu":
        assert not exe._exe.fallbacks()
    got = np.asarray(exe(x, y))
    want = x.astype(_TYPES[r]) @ y.astype(_TYPES[r])  # exact: small integer parts
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_result_of_a_lower_kind_is_refused() -> None:
    with pytest.raises(XlapyError, match="dot_general_c1"):
        xlapy.compile(_TEXT.format(a="i8", b="complex<f32>", r="f32"))
