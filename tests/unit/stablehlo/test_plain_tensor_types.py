"""parse_type's one-match path for plain static tensor types (parser._PLAIN_TENSOR, compile
time): the same Shapes as the token path, and every other spelling still reaches the token
path with its own errors and locations."""

from __future__ import annotations

import pytest

from xlapy.errors import ParseError
from xlapy.stablehlo.parser import Parser
from xlapy.types import ElementType as ET
from xlapy.types import Shape


def _type(text: str) -> object:
    return Parser(text).parse_type()


@pytest.mark.parametrize("plain, spaced", [
    ("tensor<32x64x64x32xf32>", "tensor< 32x64x64x32x f32 >"),
    ("tensor<f32>", "tensor< f32>"),
    ("tensor<0x2xi8>", "tensor< 0x2xi8 >"),
    ("tensor<007x1xbf16>", "tensor< 7x1xbf16>"),
    ("tensor<3xi1>", "tensor<3x i1>"),
    ("tensor<2xf8E4M3FN>", "tensor< 2xf8E4M3FN>"),
    ("tensor<4xindex>", "tensor< 4xindex>"),
    ("tensor<1234567890123456789xf32>", "tensor< 1234567890123456789xf32>"),
])
def test_plain_and_spaced_types_are_the_same_shape(plain: str, spaced: str) -> None:
    assert _type(plain) == _type(spaced)


def test_a_repeated_type_is_one_shape_and_the_parser_moves_past_it() -> None:
    p = Parser("tensor<2x3xf32>, tensor<2x3xf32>) tensor<2x3xf32>")
    a = p.parse_type()
    p.expect(",")
    b = p.parse_type()
    p.expect(")")
    assert a is b and a == Shape.array(ET.F32, (2, 3))
    assert p.parse_type() is a


@pytest.mark.parametrize("text, where, message", [
    ("tensor<2x3xfoo>", "1:12", "unknown element type 'foo'"),
    ("tensor<99999999999999999999xf32>", "1:8", "does not fit in 64 bits"),
    ("tensor<9999999999999999999xf32>", "1:8", "does not fit in 64 bits"),
    ("tensor<1234567890123456789xf32,>", "1:32", "expected an attribute"),
])
def test_other_spellings_keep_their_errors(text: str, where: str, message: str) -> None:
    with pytest.raises(ParseError, match=message) as e:
        _type(text)
    assert f"{e.value.span.line}:{e.value.span.col}" == where


def test_dynamic_and_encoded_types_take_the_token_path() -> None:
    assert "?" in str(_type("tensor<?x3xf32>"))
    got = _type("tensor<?xf32, #stablehlo.bounds<8>>")
    assert isinstance(got, Shape) and got.dimensions == (8,) and got.dynamic == (True,)
