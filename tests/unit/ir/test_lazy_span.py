"""The StableHLO importer stamps each op with a LazySpan: made on first read, it reads as
the Span the lexer gives (str, fields), and copies and pickles as that Span."""

from __future__ import annotations

import copy
import pickle

from xlapy.errors import Span
from xlapy.ir.location import LazySpan, describe, location_of
from xlapy.stablehlo import parse_module
from xlapy.stablehlo.lexer import Lexer

TEXT = ("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
        "  %0 = stablehlo.exponential %a : tensor<2xf32>\n"
        "  return %0 : tensor<2xf32>\n}\n")


def test_made_once_on_first_read() -> None:
    calls: list[int] = []
    lex = Lexer(TEXT, "g.mlir")

    def make() -> Span:
        calls.append(1)
        return lex.span(TEXT.index("stablehlo"))

    lazy = LazySpan(make)
    assert not calls
    assert str(lazy) == "g.mlir:2:8" and lazy.line == 2 and lazy.col == 8
    assert lazy.source_line == "  %0 = stablehlo.exponential %a : tensor<2xf32>"
    assert lazy.resolve() == lex.span(TEXT.index("stablehlo")) and calls == [1]


def test_copies_and_pickles_as_the_span() -> None:
    lazy = LazySpan(lambda: Span("f", 3, 4, 1, "src"))
    for other in (copy.copy(lazy), copy.deepcopy(lazy), pickle.loads(pickle.dumps(lazy))):
        assert other == Span("f", 3, 4, 1, "src")


def test_imported_ops_name_their_place() -> None:
    m = parse_module(TEXT, "g.mlir")
    (exp,) = [i for i in m.entry.instructions if i.opcode != "parameter"]
    loc = location_of(exp)
    assert loc is not None and isinstance(loc.span, LazySpan)
    assert describe(exp) == "%0 = exponential at g.mlir:2:8"
