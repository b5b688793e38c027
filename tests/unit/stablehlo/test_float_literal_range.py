"""Float literals that do not fit their element type are ParseErrors, never a silent inf/NaN.

A finite decimal that rounds (nearest, ties to even) past the type's largest finite value is
refused at the constant's location, naming the literal and the type; one that rounds to the
max, one that underflows to zero (MLIR and XLA accept it), `inf`/`nan` spellings and hex bit
patterns stay valid.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from xlapy.errors import ParseError
from xlapy.stablehlo import parse_module


def _const(value: str) -> np.ndarray:
    text = f"func.func @main() {{\n  %0 = stablehlo.constant {value}\n  func.return\n}}"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow warning either
        module = parse_module(text, "t.mlir")
    (inst,) = [i for c in module.computations for i in c.instructions if i.opcode == "constant"]
    return inst.attrs.literal.to_numpy()


@pytest.mark.parametrize("value, literal, type_name", [
    ("dense<1e308> : tensor<f32>", "1e308", "f32"),
    ("dense<-1e308> : tensor<f32>", "-1e308", "f32"),
    ("dense<[1.0, 3.5e38]> : tensor<2xf32>", "3.5e38", "f32"),
    ("dense<3.41e38> : tensor<f32>", "3.41e38", "f32"),
    ("dense<340282356779733661637539395458142568448.0> : tensor<f32>", "3402823567797", "f32"),
    ("dense<70000.0> : tensor<f16>", "70000.0", "f16"),
    ("dense<65520.0> : tensor<f16>", "65520.0", "f16"),
    ("dense<1e39> : tensor<bf16>", "1e39", "bf16"),
    ("dense<465.0> : tensor<f8E4M3FN>", "465.0", "f8E4M3FN"),
    ("dense<1e6> : tensor<f8E5M2>", "1e6", "f8E5M2"),
    ("dense<7.0> : tensor<f4E2M1FN>", "7.0", "f4E2M1FN"),
    ("dense<1e999> : tensor<f64>", "1e999", "f64"),
    ("dense<(1e39, 0.0)> : tensor<complex<f32>>", "1e39", "f32"),
    ("dense<[(0.0, 1.0), (0.0, -1e39)]> : tensor<2xcomplex<f32>>", "-1e39", "f32"),
    ("dense<[" + ", ".join(["1.5"] * 99 + ["1e39"]) + "]> : tensor<100xf32>", "1e39", "f32"),
])
def test_overflowing_literal_is_a_parse_error(value: str, literal: str, type_name: str) -> None:
    with pytest.raises(ParseError) as e:
        _const(value)
    msg = str(e.value)
    assert msg.startswith("t.mlir:2:")
    assert "out of range" in msg and literal in msg and f"for {type_name} " in msg


@pytest.mark.parametrize("value, expect", [
    ("dense<3.4028235e38> : tensor<f32>", np.float32(3.4028235e38)),
    ("dense<3.40282356e38> : tensor<f32>", np.finfo(np.float32).max),  # rounds to max
    # float64-rounds exactly onto f32's halfway point, but the decimal is below it: max
    ("dense<3.4028235677973366e38> : tensor<f32>", np.finfo(np.float32).max),
    ("dense<-3.4028235677973366e38> : tensor<f32>", -np.finfo(np.float32).max),
    ("dense<65519.0> : tensor<f16>", np.float16(65504)),
    ("dense<464.0> : tensor<f8E4M3FN>", 448.0),  # tie to even goes down to 448
    ("dense<6.9> : tensor<f4E2M1FN>", 6.0),
    ("dense<1.7976931348623157e308> : tensor<f64>", np.finfo(np.float64).max),
    ("dense<1e-50> : tensor<f32>", 0.0),  # underflow to zero is accepted (as MLIR does)
    ("dense<-1e-999> : tensor<f64>", -0.0),
    ("dense<1e-40> : tensor<f32>", np.float32(1e-40)),  # subnormal
    ("dense<inf> : tensor<f32>", np.inf),
    ("dense<-inf> : tensor<f16>", -np.inf),
    ("dense<0x7F800000> : tensor<f32>", np.inf),
    ('dense<"0x0000807F"> : tensor<f32>', np.inf),
    ("dense<(1e300, -1e300)> : tensor<complex<f64>>", complex(1e300, -1e300)),
    ("dense<(3.0e38, 0.0)> : tensor<complex<f32>>", complex(np.float32(3.0e38), 0)),
])
def test_literals_that_fit_stay_valid(value: str, expect: object) -> None:
    got = _const(value)
    assert got.item() == expect or (np.isnan(expect) and np.isnan(got.item()))  # type: ignore
    if expect == 0.0:
        assert np.signbit(got) == np.signbit(expect)


def test_nan_spelling_stays_valid() -> None:
    assert np.isnan(float(_const("dense<nan> : tensor<bf16>")))
