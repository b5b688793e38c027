"""Adversarial input must not make a front-door regex backtrack (each call is time-bounded)."""

from __future__ import annotations

import time

import pytest

import xlapy
from tests.fuzz.deadline import deadline
from xlapy.errors import XlapyError
from xlapy.hlo_text import is_hlo_text, parse_hlo_module
from xlapy.hlo_text.cursor import Cursor
from xlapy.stablehlo import parse_module

SHLO = """func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}"""
HLO = """HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT a = f32[2] add(p, p)
}"""
BLANKS = " " * 10_000
LONG = BLANKS * 10  # quadratic backtracking takes minutes on this


def _fast(fn: object, *args: object, limit: float = 1.0) -> object:
    start = time.perf_counter()
    with deadline(limit + 4):  # a regression fails here instead of hanging the suite
        out = fn(*args)  # type: ignore[operator]
    assert time.perf_counter() - start < limit
    return out


def test_leading_blanks_before_stablehlo() -> None:
    exe = _fast(xlapy.compile, BLANKS + SHLO)
    assert exe is not None


@pytest.mark.parametrize("blanks", [BLANKS, "\n\t " * 5000, "/* c */ " * 2000])
def test_is_hlo_text_on_blanks_and_comments(blanks: str) -> None:
    assert _fast(is_hlo_text, blanks + SHLO) is False
    assert _fast(is_hlo_text, blanks + HLO) is True
    assert _fast(is_hlo_text, blanks + "/* unterminated") is False


def test_hlo_cursor_skips_blanks_linearly() -> None:
    cur = Cursor(BLANKS * 10 + "x")
    assert _fast(cur.skip) == len(BLANKS) * 10
    assert _fast(parse_hlo_module, HLO.replace("\n", "\n" + BLANKS)) is not None


def test_quant_type_with_long_blank_runs() -> None:
    text = SHLO.replace(
        "stablehlo.add %a, %a : tensor<2xf32>",
        "stablehlo.uniform_quantize %a : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32, "
        f"0.5{LONG}y>>")
    with pytest.raises(XlapyError):
        _fast(parse_module, text)
    text = text.replace(f"0.5{LONG}y", f"0.5:1{LONG}x")
    with pytest.raises(XlapyError):
        _fast(parse_module, text)


def test_complex_dense_with_long_blank_run() -> None:
    text = f"""func.func @main() -> tensor<1xcomplex<f32>> {{
  %0 = stablehlo.constant dense<[( 1{LONG}y)]> : tensor<1xcomplex<f32>>
  return %0 : tensor<1xcomplex<f32>>
}}"""
    with pytest.raises(XlapyError):
        _fast(parse_module, text)
