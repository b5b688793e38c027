"""HLO `constant(...)` float values out of range for their type are ParseErrors (as XLA's
"value ... is out of range for literal's primitive type"), never a silent inf/NaN."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from xlapy.errors import ParseError
from xlapy.hlo_text import parse_hlo_module


def _const(shape: str, value: str) -> np.ndarray:
    text = f"HloModule m\nENTRY e {{\n  ROOT c = {shape} constant({value})\n}}\n"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = parse_hlo_module(text, "t.hlo")
    return module.entry.root.attrs.literal.to_numpy()


@pytest.mark.parametrize("shape, value, literal", [
    ("f32[]", "1e308", "1e308"),
    ("f32[]", "-3.5e38", "-3.5e38"),
    ("f32[2]", "{1, 1e39}", "1e39"),
    ("f16[]", "70000", "70000"),
    ("bf16[]", "1e39", "1e39"),
    ("f8e4m3fn[]", "500", "500"),
    ("f4e2m1fn[]", "7", "7"),
    ("f64[]", "1e999", "1e999"),
    ("c64[]", "(1e39, 0)", "1e39"),
    ("c128[]", "(1, -1e999)", "-1e999"),
])
def test_overflowing_constant_is_a_parse_error(shape: str, value: str, literal: str) -> None:
    with pytest.raises(ParseError) as e:
        _const(shape, value)
    msg = str(e.value)
    assert msg.startswith("t.hlo:3:")
    assert "out of range" in msg and f"literal {literal} " in msg
    assert f"for {shape.split('[')[0]} " in msg


@pytest.mark.parametrize("shape, value, expect", [
    ("f32[]", "3.40282356e38", np.finfo(np.float32).max),
    ("f32[]", "3.4028235677973366e38", np.finfo(np.float32).max),
    ("f16[]", "65519", 65504.0),
    ("f8e4m3fn[]", "464", 448.0),
    ("f32[]", "1e-50", 0.0),
    ("f32[]", "inf", np.inf),
    ("f32[]", "-inf", -np.inf),
    ("c64[]", "(inf, 1)", complex(np.inf, 1)),
    ("c64[]", "(3e38, -3e38)", complex(np.float32(3e38), np.float32(-3e38))),
])
def test_constants_that_fit_stay_valid(shape: str, value: str, expect: object) -> None:
    assert _const(shape, value).item() == expect


def test_nan_constants_stay_valid() -> None:
    assert np.isnan(_const("f32[]", "-nan(0x7fffff)").item())
    got = _const("c64[]", "(nan, 2)").item()
    assert np.isnan(got.real) and got.imag == 2  # a NaN part does not spill into the other
