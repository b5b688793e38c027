"""Attributes written `#name<...>`: enums, struct attributes, convolution layouts, bounds.

* `#stablehlo<precision HIGH>`: an enum (`EnumAttr(kind, value)`).
* `#stablehlo.result_accuracy_mode<DEFAULT>`: a named enum (`EnumAttr(name, value)`).
* `#stablehlo.gather<offset_dims = [1], ...>`: a struct; a trailing comma before `>` is
  accepted (MLIR's struct printer never emits one, but its parser and hand-written tests do).
* `#stablehlo.bounds<4, ?>`: a tensor encoding, `StructAttr("stablehlo.bounds",
  {"bounds": (4, None)})`.
* `#stablehlo.conv<[b, 0, f]x[0, i, o]->[b, 0, f]>` (or `raw ...` fields): `ConvDims`.
* Another dialect's attribute (`#sdy.op_sharding_rule<...>`): kept as raw text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xlapy.stablehlo.nodes import ConvDims, EnumAttr, StructAttr

if TYPE_CHECKING:
    from xlapy.stablehlo.lexer import Token
    from xlapy.stablehlo.parser import Parser

_DIM_LISTS = ("lhs_batching_dimensions", "rhs_batching_dimensions",
              "lhs_contracting_dimensions", "rhs_contracting_dimensions")


def parse_hash_body(p: Parser, name: str, tok: Token) -> Any:
    """After `#name<` (consumed): the attribute up to and including its `>`."""
    if name in ("#stablehlo", "#chlo"):
        kind = p.next().text
        value = p.next().text
        p.expect(">")
        return EnumAttr(kind, value)
    if name.endswith(".conv") and p.at("["):
        dims = parse_conv_dims(p)
        p.expect(">")
        return dims
    if name.endswith(".bounds"):
        return StructAttr(name[1:], {"bounds": _bounds(p, name)})
    if name.endswith(".conv") and p.at("raw"):
        p.next()
    if name.startswith(("#stablehlo.", "#chlo.")) and p.peek().kind == "ident" and \
            _followed_by(p, ">"):
        value = p.next().text  # `#stablehlo.result_accuracy_mode<DEFAULT>`
        p.expect(">")
        return EnumAttr(name[1:], value)
    if not name.startswith(("#stablehlo", "#chlo")) and not (
            p.peek().kind == "ident" and _followed_by(p, "=")):
        # Another dialect's attribute (`#sdy.op_sharding_rule<([i])->([j]) {...}>`):
        # kept as raw text; xlapy does not interpret it.
        body, _ = p.lex.raw_until(">")
        p.expect(">")
        return StructAttr(name[1:], {"raw": body})
    fields: dict[str, Any] = {}
    if p.accept(">"):
        return StructAttr(name[1:], fields)
    while True:
        key = p.next()
        if key.kind != "ident":
            raise p.error(key, f"expected a field name in {name}, found '{key.text}'")
        p.expect("=")
        if key.text in _DIM_LISTS or not p.at("<"):
            fields[key.text] = p.parse_attr()
        else:
            p.next()
            body, _ = p.lex.raw_until(">")
            p.expect(">")
            fields[key.text] = body
        if p.accept(">"):
            return StructAttr(name[1:], fields)
        p.expect(",", f"between fields of {name}")
        if p.accept(">"):  # a trailing comma
            return StructAttr(name[1:], fields)


def _bounds(p: Parser, name: str) -> tuple[int | None, ...]:
    """`4, ?>`: one bound per dimension, `?` for a dimension without one."""
    out: list[int | None] = []
    if p.accept(">"):
        return ()
    while True:
        if p.accept("?"):
            out.append(None)
        else:
            value = p.integer(f"a bound in {name}")
            if value < 0:
                raise p.error(p.peek(), f"{name}: a bound cannot be negative ({value})")
            out.append(value)
        if p.accept(">"):
            return tuple(out)
        p.expect(",", f"between the bounds of {name}")


def _followed_by(p: Parser, text: str) -> bool:
    """Is the token after the next one `text` (nothing consumed)?"""
    lex = p.lex
    save_pos, save_peek = lex.pos, lex._peeked
    lex.next()
    ok = lex.peek().text == text
    lex.pos, lex._peeked = save_pos, save_peek
    return ok


def parse_conv_dims(p: Parser) -> ConvDims:
    """`[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]`: every dimension exactly once per group
    (b and f for input and output, i and o for the kernel, spatial 0..N-1), the same spatial
    count in the three groups; a ParseError at the offending letter otherwise."""
    def group(what: str, letters: str, label: str) -> tuple[str, ...]:
        start = p.expect("[")
        out: list[str] = []
        while True:
            end = p.peek()
            if p.accept("]"):
                break
            tok = p.next()
            if tok.kind not in ("ident", "number"):
                found = "end of input" if tok.kind == "eof" else f"'{tok.text}'"
                raise p.error(tok, f"expected a convolution dimension (b, f, i, o, 0, "
                                   f"1, ...), found {found}")
            if tok.text in out:
                raise p.error(tok, f"{label}: convolution {what} dimension '{tok.text}' "
                                   "appears twice")
            if not (tok.text in letters or tok.text.isdigit()):
                raise p.error(tok, f"{label}: '{tok.text}' is not a convolution {what} "
                                   f"dimension (expected {', '.join(letters)} or a spatial "
                                   "number)")
            if tok.text.isdigit() and len(tok.text) > 6:  # no tensor has a million dims
                raise p.error(tok, f"{label}: convolution {what} spatial dimension "
                                   f"{tok.text[:12]}... is out of range")
            out.append(tok.text)
            p.accept(",")
        for letter in letters:
            if letter not in out:
                raise p.error(end, f"{label}: convolution {what} dimensions "
                                   f"[{', '.join(out)}] lack '{letter}'")
        spatial = sorted(int(d) for d in out if d.isdigit())
        if spatial != list(range(len(spatial))):
            raise p.error(start, f"{label}: convolution {what} spatial dimensions {spatial} "
                                 f"are not 0..{len(spatial) - 1}")
        return tuple(out)

    lhs = group("input", "bf", "convolution_c14")
    x = p.next()
    if x.text != "x" and not x.text.startswith("x"):
        raise p.error(x, "expected 'x' between convolution dimension groups")
    rhs = group("kernel", "io", "convolution_c19")
    p.expect("->")
    out_tok = p.peek()
    out = group("output", "bf", "convolution_c21")
    if not len(lhs) == len(rhs) == len(out):
        raise p.error(out_tok, f"convolution_c18: convolution dimension groups differ in "
                               f"rank: input {len(lhs)}, kernel {len(rhs)}, output {len(out)}")
    return ConvDims(lhs, rhs, out)


def bounded_dims(p: Parser, tok: Token, dims: list[int | None], encoding: Any
                 ) -> tuple[list[int | None], tuple[bool, ...]]:
    """`tensor<?x3xf32, #stablehlo.bounds<4, ?>>`: each `?` with a bound becomes the bound,
    marked dynamic (`Shape.dynamic`, as XLA's bounded dynamic shapes); other encodings are
    ignored."""
    if not (isinstance(encoding, StructAttr) and encoding.name == "stablehlo.bounds"):
        return dims, ()
    bounds = encoding.fields["bounds"]
    if len(bounds) != len(dims):
        raise p.error(tok, f"#stablehlo.bounds has {len(bounds)} bounds for a rank-{len(dims)} "
                           f"tensor")
    out: list[int | None] = []
    for i, (d, b) in enumerate(zip(dims, bounds)):
        if b is not None and d is not None:
            raise p.error(tok, f"#stablehlo.bounds: dimension {i} is static ({d}) but has a "
                               f"bound ({b}); only '?' dimensions take one")
        out.append(b if d is None else d)
    return out, tuple(d is None and b is not None for d, b in zip(dims, bounds))
