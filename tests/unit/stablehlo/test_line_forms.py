"""line_forms.py reads JAX's most common op lines in one match: the nodes must be exactly
what the token path builds, and anything a little different must take the token path (same
nodes, same errors with the same line:column)."""

from __future__ import annotations

from typing import Any

import pytest

from xlapy.stablehlo import split_chunks
from xlapy.stablehlo.parser import Parser

HEAD = ("func.func @main(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>, %v: tensor<3xf32>, "
        "%k: tensor<3x3x2x2xf32>) -> ")


def _parse(text: str, line_forms: bool) -> tuple[str, Any, int]:
    """(outcome, nodes or error text, ops read by a line form)."""
    p = Parser(text)
    p.line_forms = line_forms
    hits = 0
    if line_forms:
        from xlapy.stablehlo import line_forms as lf

        real = lf.match_line

        def counted(parser: Parser, pos: int) -> Any:
            nonlocal hits
            got = real(parser, pos)
            hits += got is not None
            return got

        import xlapy.stablehlo.parser as parser_module

        parser_module.match_line = counted  # type: ignore[assignment]
    try:
        return "ok", p.parse_module(), hits
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return "error", f"{type(e).__name__}: {e}", hits
    finally:
        if line_forms:
            parser_module.match_line = real  # type: ignore[assignment]


def _same(text: str) -> int:
    """Both paths agree on `text`; returns how many ops the line forms read."""
    slow, fast = _parse(text, False), _parse(text, True)
    assert fast[:2] == slow[:2]
    return fast[2]


def _body(*lines: str, result: str = "tensor<2x3xf32>") -> str:
    return HEAD + f"{result} {{\n" + "".join(f"  {ln}\n" for ln in lines) + "}\n"


FAST = [
    "%0 = stablehlo.add %x, %y : tensor<2x3xf32>",
    "%0 = stablehlo.exponential %x : tensor<2x3xf32>",
    "%0 = stablehlo.select %x, %y, %x : tensor<2x3xf32>",
    "%0 = stablehlo.broadcast_in_dim %v, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>",
    "%0 = stablehlo.constant dense<0.000000e+00> : tensor<2x3xf32>",
    "%0 = stablehlo.constant dense<0xFF800000> : tensor<2x3xf32>",
    "%0 = stablehlo.constant dense<-1.5> : tensor<2x3xf32>",
    "%0 = stablehlo.constant dense<  2.0 > : tensor<2x3xf32>",
    "%0 = chlo.erf %x : tensor<2x3xf32>",
    "%0 = stablehlo.reshape %x : (tensor<2x3xf32>) -> tensor<3x2xf32>",
    "%0 = stablehlo.convert %x : (tensor<2x3xf32>) -> tensor<2x3xbf16>",
    "%0 = stablehlo.add %x, %y : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>",
    "%0 = stablehlo.transpose %x, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>",
    "%0 = stablehlo.reverse %x, dims = [] : (tensor<2x3xf32>) -> tensor<2x3xf32>",
    "%0 = stablehlo.broadcast_in_dim %v, dims = [] : (tensor<3xf32>) -> tensor<2x3xf32>",
    "%0 = stablehlo.dot_general %x, %y, contracting_dims = [1] x [1], precision = [DEFAULT, "
    "DEFAULT] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>",
    "%0 = stablehlo.dot_general %x, %y, batching_dims = [0] x [0], contracting_dims = [1] x "
    "[1] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2xf32>",
    "%0 = stablehlo.dot_general %x, %y, batching_dims = [] x [], contracting_dims = [] x [], "
    "precision = [HIGHEST, HIGH] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3x2x3xf32>",
    "%c = stablehlo.constant dense<0.0> : tensor<f32>\n  %0 = stablehlo.reduce(%x init: %c) "
    "applies stablehlo.add across dimensions = [1] : (tensor<2x3xf32>, tensor<f32>) -> "
    "tensor<2xf32>",
    "%0 = stablehlo.add %x, %y : tensor<2x3xf32>\t ",
]


@pytest.mark.parametrize("line", FAST)
def test_fast_lines_give_the_token_paths_nodes(line: str) -> None:
    assert _same(_body(line, "return %0 : tensor<2x3xf32>")) == 1 + line.count("\n")


SLOW = [
    "%0 = stablehlo.add %x, %y : tensor<2x3xf32> loc(\"a.py\":1:2)",
    "%0 = stablehlo.add %x, %y : tensor<2x3xf32>\n  loc(\"a.py\":1:2)",
    "%0 = stablehlo.add %x, %y : tensor<2x3xf32>\n  // a comment",
    "%0 = stablehlo.add %x, %y : tensor<2x3xf32>, tensor<2x3xf32>",
    "%0 = stablehlo.add %x, %y : tensor<2x3xf32>\n  , tensor<2x3xf32>",
    "%0 = stablehlo.add %x,  %y : tensor<2x3xf32>",
    "%0 = stablehlo.add %x, %y : tensor<2x3xf32> {a = 1 : i64}",
    "%0 = stablehlo.add %x, %y {a = 1 : i64} : tensor<2x3xf32>",
    "%0 = stablehlo.add %x, %y : tensor<2x3xf32, #stablehlo.bounds<?, ?>>",
    "%0 = stablehlo.add %x, %y : tensor<2x?xf32>",
    "%0 = stablehlo.add %x, %y : tensor<2x3xf99>",
    "%0 = stablehlo.add %x, %y : tensor<2x3xcomplex<f32>>",
    "%0 = stablehlo.add %x, %y : tensor<1234567890123456789x3xf32>",
    "%0:2 = stablehlo.add %x, %y : tensor<2x3xf32>",
    "%0#1 = stablehlo.add %x, %y : tensor<2x3xf32>",
    "%0 = stablehlo.add %x, %y : tensor<2x3xf32>\r",
    "%0 = stablehlo.compare GT, %x, %y : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>",
    "%0 = stablehlo.slice %x [0:2, 0:3] : (tensor<2x3xf32>) -> tensor<2x3xf32>",
    "%0 = stablehlo.broadcast_in_dim %v, dims = [0x1] : (tensor<3xf32>) -> tensor<2x3xf32>",
    "%0 = stablehlo.broadcast_in_dim %v, dims = [-1] : (tensor<3xf32>) -> tensor<2x3xf32>",
    "%0 = stablehlo.broadcast_in_dim %v, dims = [1, 1] : (tensor<3xf32>) -> tensor<2x3xf32> "
    "loc(#loc1)",
    "%0 = stablehlo.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>",
    "%0 = stablehlo.constant dense<\"0x0000803F0000803F0000803F0000803F0000803F0000803F\"> "
    ": tensor<2x3xf32>",
    "%0 = stablehlo.constant dense<1.0-> : tensor<2x3xf32>",
    "%0 = stablehlo.constant {a = 1} dense<1.0> : tensor<2x3xf32>",
    "%0 = \"stablehlo.add\"(%x, %y) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>",
    "%0 = stablehlo.reshape %x : (tensor<2x3xf32>) -> (tensor<3x2xf32>)",
    "%0 = stablehlo.reshape %x : (tensor<2x3xf32>) -> tensor<3x2xf32>, tensor<3x2xf32>",
    "%0 = stablehlo.iota dim = 0 : tensor<2x3xf32>",
    "%0 = stablehlo.concatenate %x, %y, dim = 0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> "
    "tensor<4x3xf32>",
    "%0 = stablehlo.dot_general %x, %y, contracting_dims = [1] x [1], precision = [true, "
    "DEFAULT] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>",
    "%0 = stablehlo.dot_general %x, %y, contracting_dims = [1] x [1], precision = [f32, "
    "DEFAULT] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>",
    "%0 = stablehlo.dot_general %x, %y, contracting_dims = [1] x [1], algorithm = <lhs_"
    "precision_type = f32, rhs_precision_type = f32, accumulation_type = f32, lhs_component_"
    "count = 1, rhs_component_count = 1, num_primitive_operations = 1, allow_imprecise_"
    "accumulation = false> : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>",
    "%0 = stablehlo.dot_general %x, %y, contracting_dims = [1] x [1] : (tensor<2x3xf32>, "
    "tensor<2x3xf32>) -> tensor<2x2xf32> loc(#loc3)",
    "%0 = stablehlo.transpose %x, dims = [1, 0] : tensor<2x3xf32>",
    "%0:2 = stablehlo.reduce(%x init: %x), (%y init: %y) applies stablehlo.add across "
    "dimensions = [1] : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) "
    "-> (tensor<2xf32>, tensor<2xf32>)",
    "%0 = stablehlo.reduce(%x init: %y) across dimensions = [1] : (tensor<2x3xf32>, "
    "tensor<2x3xf32>) -> tensor<2xf32>\n   reducer(%a: tensor<f32>, %b: tensor<f32>)  {\n"
    "    %s = \"stablehlo.add\"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
    "    stablehlo.return %s : tensor<f32>\n  }",
    "%0 = stablehlo.reduce (%x init: %y) applies stablehlo.add across dimensions = [1] : "
    "(tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>",
]


@pytest.mark.parametrize("line", SLOW)
def test_other_spellings_take_the_token_path(line: str) -> None:
    assert _same(_body(line, "return %0 : tensor<2x3xf32>")) == 0


ERRORS = [
    "%0 = stablehlo.add %x, %y : tensor<2x3xf32>\n  %1 = stablehlo.add %0, %nope : tensor<2x3xf32>",
    "%0 = stablehlo.add %x, %y : tensor<2x3xf32>\n  %1 = stablehlo.add %0, %y : tensor<2x3xf99>",
    "%0 = stablehlo.add %x, %y : tensor<2x3xf32>\n  %1 = stablehlo.frobnicate %0 : tensor<2x3xf32>",
    "%0 = stablehlo.broadcast_in_dim %v, dims = [7] : (tensor<3xf32>) -> tensor<2x3xf32>",
    "%0 = stablehlo.add %x, %v : tensor<2x3xf32>",
]


@pytest.mark.parametrize("line", ERRORS)
def test_errors_and_their_locations_are_the_same(line: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Parse errors agree (the nodes carry the token path's positions, so the importer's
    errors, checked by compiling, point at the same line:column)."""
    import xlapy
    from xlapy.errors import XlapyError

    text = _body(line, "return %0 : tensor<2x3xf32>")
    _same(text)
    messages = []
    for lf in (False, True):
        monkeypatch.setattr(Parser, "line_forms", lf)
        with pytest.raises(XlapyError) as e:
            xlapy.compile(text)
        messages.append(str(e.value))
    assert messages[0] == messages[1]
    assert ":2:" in messages[0] or ":3:" in messages[0]  # a line:column in the source


def test_positions_of_operands_and_dense_bodies() -> None:
    text = _body("%0 = stablehlo.select %x, %y, %x#0 : tensor<2x3xf32>",
                 "%c = stablehlo.constant dense<1.0> : tensor<2x3xf32>",
                 "return %0 : tensor<2x3xf32>")
    ok, node, hits = _parse(text, True)
    assert ok == "ok" and hits == 2
    sel, const = node.funcs[0].body[:2]
    assert [text[r.pos:r.pos + len(r.name)] for r in sel.operands] == ["%x", "%y", "%x"]
    assert sel.operands[2].index == 0 and text[sel.pos:].startswith("stablehlo.select")
    body = const.attrs["value"]
    assert text[body.pos:].startswith("1.0>")


def test_conformance_corpus_parses_the_same() -> None:
    """Every chunk of the StableHLO conformance files (when present) and the AOT examples."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    files = sorted((root.parent / "shared" / "conformance").rglob("*.mlir"))
    files += sorted((root / "examples").rglob("*.mlir"))
    if not files:
        pytest.skip("no corpus here")
    hits = 0
    for f in files:
        for chunk in split_chunks(f.read_text()):
            hits += _same(chunk.text)
    assert hits > 0


def test_jax_lowered_programs_parse_the_same() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    import numpy as np

    def layer(x: Any, w: Any, b: Any) -> Any:
        h = jnp.tanh(x @ w + b)
        q = h.reshape(2, 2, 8).astype(jnp.bfloat16)
        s = jnp.einsum("bij,bkj->bik", q, q).astype(jnp.float32).reshape(4, 2)
        return jax.nn.softmax(h * 0.5 - jnp.max(h), axis=-1).T, s

    x = np.ones((4, 8), np.float32)
    w = np.ones((8, 8), np.float32)
    b = np.ones((8,), np.float32)
    text = jax.jit(layer).lower(x, w, b).as_text()
    assert _same(text) > 5
    assert _same(jax.jit(layer).lower(x, w, b).as_text(debug_info=True)) >= 0


CONV = ("%0 = stablehlo.convolution(%x, %k) dim_numbers = {dims}, window = {{{window}}} "
        "{{{attrs}}} : (tensor<1x4x4x2xf32>, tensor<3x3x2x2xf32>) -> tensor<1x4x4x2xf32>")
DIMS = "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]"
WINDOW = ("stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], "
          "reverse = [false, false]")
ATTRS = ("batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = "
         "[#stablehlo<precision DEFAULT>, #stablehlo<precision HIGHEST>]")


@pytest.mark.parametrize(("dims", "window", "attrs", "fast"), [
    (DIMS, WINDOW, ATTRS, True),  # what JAX prints
    (DIMS, "stride = [2, 1], pad = [[0, 0], [2, 1]]",
     "batch_group_count = 1 : i64, feature_group_count = 2 : i64", True),
    ("[b, 1, 0, f]x[1, 0, o, i]->[f, 1, 0, b]", "reverse = [true, false]",
     "feature_group_count = 1 : i64, batch_group_count = 1 : i64", True),
    (DIMS, WINDOW, ATTRS.replace("1 : i64, f", "1 : i32, f"), False),
    (DIMS, WINDOW + ", stride = [1, 1]", ATTRS, False),
    (DIMS, "stride = [1, 1], foo = [1]", ATTRS, False),
    (DIMS, WINDOW, ATTRS + ", lhs_shape = 1", False),
    (DIMS, WINDOW.replace("[false, false]", "[0, 1]"), ATTRS, True),  # (the import says)
    ("[b, 0, 0, f]x[0, 1, i, o]->[b, 0, 1, f]", WINDOW, ATTRS, False),
    ("[b, 0, 1, f]x[0, 1, i, o, 2]->[b, 0, 1, f]", WINDOW, ATTRS, False),
    ("[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 2, f]", WINDOW, ATTRS, False),
    ("[b, 0, 1]x[0, 1, i, o]->[b, 0, 1, f]", WINDOW, ATTRS, False),
    ("[b, 0, 1, f, ]x[0, 1, i, o]->[b, 0, 1, f]", WINDOW, ATTRS, False),
])
def test_convolutions(dims: str, window: str, attrs: str, fast: bool) -> None:
    line = CONV.format(dims=dims, window=window, attrs=attrs)
    assert _same(_body(line, "return %0 : tensor<2x3xf32>")) == int(fast)
