"""Parser, importer, printer and error reporting of the StableHLO front door."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import xlapy
from xlapy.errors import ParseError, XlapyError
from xlapy.stablehlo import parse_module, print_module, split_chunks
from xlapy.stablehlo.equality import modules_equal
from xlapy.stablehlo.lexer import Lexer

ROOT = Path(__file__).parents[4] / "shared" / "conformance" / "stablehlo-interpret"

ADD = """func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %b : tensor<2xf32>
  return %0 : tensor<2xf32>
}"""


def test_lexer_dims_and_hex() -> None:
    lex = Lexer("tensor<0x2xi8>")
    assert lex.next().text == "tensor"
    assert lex.next().text == "<"
    assert lex.scan_dims() == [0, 2]
    assert lex.next().text == "i8"


def test_pretty_and_generic_forms_run() -> None:
    generic = ADD.replace("stablehlo.add %a, %b : tensor<2xf32>",
                          '"stablehlo.add"(%a, %b) : (tensor<2xf32>, tensor<2xf32>) -> '
                          "tensor<2xf32>")
    for text in (ADD, generic):
        out = xlapy.compile(text)(np.ones(2, np.float32), np.full(2, 2, np.float32))
        assert out.tolist() == [3.0, 3.0]


def test_dense_forms() -> None:
    text = """func.func @main() -> (tensor<2x2xi32>, tensor<3xf32>, tensor<2xcomplex<f32>>,
                                    tensor<2xi1>, tensor<i64>) {
  %0 = stablehlo.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>
  %1 = stablehlo.constant dense<1.5> : tensor<3xf32>
  %2 = stablehlo.constant dense<[(1.0, 2.0), (3.0, -4.0)]> : tensor<2xcomplex<f32>>
  %3 = stablehlo.constant dense<[true, false]> : tensor<2xi1>
  %4 = stablehlo.constant dense<0x10> : tensor<i64>
  return %0, %1, %2, %3, %4 : tensor<2x2xi32>, tensor<3xf32>, tensor<2xcomplex<f32>>,
    tensor<2xi1>, tensor<i64>
}"""
    a, b, c, d, e = xlapy.compile(text)()
    assert a.tolist() == [[1, 2], [3, 4]] and b.tolist() == [1.5] * 3
    assert c.tolist() == [1 + 2j, 3 - 4j] and d.tolist() == [True, False] and int(e) == 16


def test_while_captures_and_multi_results() -> None:
    text = """func.func @main(%n: tensor<i64>) -> tensor<i64> {
  %zero = stablehlo.constant dense<0> : tensor<i64>
  %one = stablehlo.constant dense<1> : tensor<i64>
  %r:2 = stablehlo.while(%i = %zero, %s = %zero) : tensor<i64>, tensor<i64>
  cond {
    %c = stablehlo.compare LT, %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %i2 = stablehlo.add %i, %one : tensor<i64>
    %s2 = stablehlo.add %s, %i : tensor<i64>
    stablehlo.return %i2, %s2 : tensor<i64>, tensor<i64>
  }
  return %r#1 : tensor<i64>
}"""
    exe = xlapy.compile(text)
    assert int(exe(np.int64(5))) == 10
    again = parse_module(exe.as_text())
    assert modules_equal(exe.module, again)


@pytest.mark.parametrize(("text", "needle"), [
    ("func.func @main() {\n  %0 = stablehlo.constant dense<1> : tensor<i32>\n",
     "unterminated"),
    ("func.func @main() {\n  %0 = stablehlo.frobnicate %x : tensor<i32>\n  return\n}",
     "undefined value %x"),
    ("func.func @main(%a: tensor<f32>) {\n  %0 = stablehlo.frobnicate %a : tensor<f32>\n"
     "  return\n}", "unknown op"),
    ("func.func @main(%a: tensor<f32>, %b: tensor<i32>) {\n"
     "  %0 = stablehlo.add %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>\n  return\n}",
     "operand 1"),
    ("func.func @main(%a: tensor<f32>) -> tensor<i32> {\n  return %a : tensor<f32>\n}",
     "signature"),
    ("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
     "  %0 = stablehlo.transpose %a, dims = [\"x\"] : (tensor<4xf32>) -> tensor<4xf32>\n"
     "  return %0 : tensor<4xf32>\n}", "bad value for attribute"),
    ("func.func @main(%a: tensor<?xf32>) -> tensor<?xf32> {\n  return %a : tensor<?xf32>\n}",
     "dynamic shape not supported"),
    ("func.func @main() {\n  %0 = stablehlo.constant dense<[1, 2, 3]> : tensor<2xi32>\n"
     "  return\n}", "3 element"),
])
def test_bad_input_has_clear_errors(text: str, needle: str) -> None:
    with pytest.raises(XlapyError, match=needle) as info:
        parse_module(text, "bad.mlir")
    if isinstance(info.value, ParseError) and info.value.span is not None:
        assert str(info.value).startswith("bad.mlir:")
        assert "^" in str(info.value)


def test_missing_entry_function() -> None:
    with pytest.raises(XlapyError, match="no function named @nope"):
        parse_module(ADD, "x.mlir", entry="nope")


def test_split_chunks_line_offsets() -> None:
    chunks = split_chunks("a\n// -----\nb\nc\n// -----\nd")
    assert [c.line_offset for c in chunks] == [0, 1, 4]


def test_print_builder_computation() -> None:
    b = xlapy.XlaBuilder("f")
    from xlapy.builder import ops

    x = ops.Parameter(b, 0, xlapy.Shape.array(xlapy.ElementType.F32, (2,)), "x")
    ops.Add(x, x)
    comp = b.build()
    text = comp.as_stablehlo_text()
    assert "stablehlo.add" in text
    assert modules_equal(comp.module, parse_module(text))


def test_round_trip_conformance_files() -> None:
    """parse(print(m)) == m, generic and pretty, on every chunk that imports."""
    assert ROOT.is_dir(), f"conformance files not found at {ROOT} (../shared beside the repo)"
    bad = []
    for path in sorted(ROOT.rglob("*.mlir")):
        for c in split_chunks(path.read_text()):
            try:
                m = parse_module(c.text, path.name)
            except XlapyError:
                continue
            for generic in (False, True):
                m2 = parse_module(print_module(m, generic=generic), "printed")
                if not modules_equal(m, m2):
                    bad.append(f"{path.name}:{c.line_offset + 1}")
    assert bad == []


def test_parse_speed_smoke() -> None:
    lines = ["func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {"]
    prev = "%a"
    for i in range(2000):
        lines.append(f"  %v{i} = stablehlo.add {prev}, %a : tensor<4xf32>")
        prev = f"%v{i}"
    lines.append(f"  return {prev} : tensor<4xf32>\n}}")
    m = parse_module("\n".join(lines))
    assert len(m.entry_computation().instructions) > 2000


class _CountingText(str):
    """A source text that counts its rstrip copies."""

    calls = 0

    def rstrip(self, chars: str | None = None) -> str:
        type(self).calls += 1
        return str(self).rstrip(chars)


def test_spans_strip_the_text_once() -> None:
    """The importer asks a span per op; each used to copy the whole text twice (rstrip), a
    quadratic import of big modules (issue 14: 4000 ops, 225 KB: 213 -> 185 ms)."""
    text = _CountingText("%a = stablehlo.add\n%b = stablehlo.add\n  \n")
    lex = Lexer(text, "f.mlir")
    spans = [lex.span(p) for p in (0, 5, 19, len(text) - 1)]
    assert _CountingText.calls == 1
    assert [(s.line, s.col) for s in spans] == [(1, 1), (1, 6), (2, 1), (2, 19)]
