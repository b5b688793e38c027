"""Malformed HLO text: a ParseError at file:line:col, never a raw Python exception."""

from __future__ import annotations

import pytest

from xlapy.errors import ParseError
from xlapy.hlo_text import parse_hlo_module


def _fails(text: str, where: str, match: str) -> None:
    with pytest.raises(ParseError, match=match) as info:
        parse_hlo_module(text, "t.hlo")
    assert str(info.value).startswith(f"t.hlo:{where}:"), str(info.value)


def test_dimension_over_int64() -> None:
    text = "HloModule m\nENTRY e {\n  ROOT p = pred[99999999999999999999] parameter(0)\n}"
    _fails(text, "3:17", "dimension size 99999999999999999999 does not fit in 64 bits")


def test_dimension_with_thousands_of_digits() -> None:
    text = "HloModule m\nENTRY e {\n  ROOT p = f32[" + "7" * 5000 + "] parameter(0)\n}"
    _fails(text, "3:16", "does not fit in 64 bits")


def test_negative_dimension() -> None:
    text = "HloModule m\nENTRY e {\n  ROOT p = f32[-3] parameter(0)\n}"
    _fails(text, "3:16", "dimension size -3 is negative")


def test_complex_constant_with_hex_part() -> None:
    text = "HloModule m\nENTRY e {\n  ROOT c = c64[] constant((0x7F800000, 1))\n}"
    _fails(text, "3:27", "bad constant value for c64\\[\\]")


def test_complex_constant_with_hex_imaginary_part() -> None:
    text = "HloModule m\nENTRY e {\n  ROOT c = c64[] constant((1, 0xFF))\n}"
    _fails(text, "3:27", "bad constant value for c64\\[\\]")


def test_complex_constants_still_parse() -> None:
    text = "HloModule m\nENTRY e {\n  ROOT c = c64[3] constant({(1, 2), (3.5, -inf), 4})\n}"
    lit = parse_hlo_module(text).entry_computation().root.attrs.literal
    assert list(lit.to_numpy()) == [1 + 2j, complex(3.5, float("-inf")), 4]
