"""Pretty (custom-assembly) forms: a table of per-op parsers producing generic `OpNode`s.

Most ops use the default form `op %a, %b, kw = value, ... {attrs} : types`; keyword names
map to the spec's attribute names through `KEYWORDS`. Ops with their own syntax (compare,
slice, reduce, while, convolution, custom_call, ...) have a function here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from xlapy.stablehlo.nodes import (
    BlockArg,
    DenseArray,
    EnumAttr,
    OpNode,
    RegionNode,
    StructAttr,
    SymbolRef,
)

if TYPE_CHECKING:
    from xlapy.stablehlo.lexer import Token
    from xlapy.stablehlo.parser import Parser

#: (op, pretty keyword) -> spec attribute name; ("*", kw) applies to every op.
KEYWORDS: dict[tuple[str, str], str] = {
    ("stablehlo.iota", "dim"): "iota_dimension",
    ("stablehlo.dynamic_iota", "dim"): "iota_dimension",
    ("stablehlo.concatenate", "dim"): "dimension",
    ("stablehlo.get_dimension_size", "dim"): "dimension",
    ("stablehlo.set_dimension_size", "dim"): "dimension",
    ("stablehlo.broadcast_in_dim", "dims"): "broadcast_dimensions",
    ("stablehlo.dynamic_broadcast_in_dim", "dims"): "broadcast_dimensions",
    ("stablehlo.transpose", "dims"): "permutation",
    ("stablehlo.reverse", "dims"): "dimensions",
    ("stablehlo.dynamic_slice", "sizes"): "slice_sizes",
    ("stablehlo.fft", "type"): "fft_type",
    ("stablehlo.fft", "length"): "fft_length",
    ("stablehlo.pad", "low"): "edge_padding_low",
    ("stablehlo.pad", "high"): "edge_padding_high",
    ("stablehlo.pad", "interior"): "interior_padding",
    ("stablehlo.rng", "distribution"): "rng_distribution",
    ("stablehlo.rng_bit_generator", "algorithm"): "rng_algorithm",
    ("stablehlo.dot_general", "precision"): "precision_config",
    # deprecated ops (legalized on import: legalize.py)
    ("stablehlo.dot", "precision"): "precision_config",
    ("stablehlo.broadcast", "sizes"): "broadcast_sizes",
    ("stablehlo.einsum", "config"): "einsum_config",
    ("stablehlo.unary_einsum", "config"): "einsum_config",
}

#: Attributes that the generic form holds as `array<i64: ...>`.
_ARRAY_ATTRS = {"broadcast_dimensions", "broadcast_sizes", "permutation", "dimensions",
                "slice_sizes", "fft_length", "edge_padding_low", "edge_padding_high",
                "interior_padding", "start_indices", "limit_indices", "strides"}

#: Enum-valued pretty keywords and their `#stablehlo<kind ...>` kind.
_ENUM_KINDS = {"fft_type": "fft_type", "rng_distribution": "rng_distribution",
               "rng_algorithm": "rng_algorithm", "comparison_direction": "comparison_direction",
               "compare_type": "comparison_type"}


def parse_pretty(p: Parser, name: str, tok: Token) -> OpNode:
    fn = PRETTY.get(name, parse_default)
    return fn(p, name, tok)


# ---- helpers ------------------------------------------------------------------------------------
def _kw_value(p: Parser, op: str, key: str) -> Any:
    if p.at("<"):  # dot algorithm
        t = p.next()
        return p.parse_hash_body("#stablehlo.dot_algorithm", t)
    tok = p.peek()
    value = p.parse_attr()
    if p.peek().text == "x" and isinstance(value, list):  # `[0] x [1]`
        p.next()
        value = (value, p.parse_attr())
    problem = _kw_problem(op, key, value)
    if problem:
        raise p.error(tok, f"{op}: {key} {problem}")
    return value


_FORMAT = re.compile(r"e([0-9]{1,9})m([0-9]{1,9})")


def _kw_problem(op: str, key: str, value: Any) -> str:
    """What is wrong with a pretty keyword's value ('' when nothing)."""
    if key == "format" and isinstance(value, EnumAttr) and not _FORMAT.fullmatch(value.value):
        return f"expects eNmM (like e5m10), found '{value.value}'"
    if op == "stablehlo.dot_general" and key in ("batching_dims", "contracting_dims") and not (
            isinstance(value, tuple) and len(value) == 2
            and all(isinstance(v, list) and all(isinstance(d, int) for d in v) for v in value)):
        return "expects [lhs dims] x [rhs dims], like [1] x [0]"
    return ""


def _normalize(p: Parser, tok: Token, op: str, attrs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        name = KEYWORDS.get((op, key), key)
        problem = _kw_problem(op, key, value)  # also for keywords given in the `{...}` dict
        if problem:
            raise p.error(tok, f"{op}: {key} {problem}")
        if name in _ARRAY_ATTRS and isinstance(value, list):
            value = DenseArray("i64", tuple(value))
        if name in _ENUM_KINDS and isinstance(value, EnumAttr) and not value.kind:
            value = EnumAttr(_ENUM_KINDS[name], value.value)
        if name == "format" and isinstance(value, EnumAttr):  # reduce_precision e5m10
            e, m = _FORMAT.fullmatch(value.value).groups()  # type: ignore[union-attr]
            out["exponent_bits"], out["mantissa_bits"] = int(e), int(m)
            continue
        if op == "stablehlo.dot_general" and key in ("batching_dims", "contracting_dims"):
            dn = out.setdefault("dot_dimension_numbers", StructAttr("stablehlo.dot", {}))
            side = "batching" if key == "batching_dims" else "contracting"
            dn.fields[f"lhs_{side}_dimensions"] = value[0]
            dn.fields[f"rhs_{side}_dimensions"] = value[1]
            continue
        if name == "precision_config" and isinstance(value, list):
            value = [EnumAttr("precision", v.value) if isinstance(v, EnumAttr) else v
                     for v in value]
        out[name] = value
    return out


def _finish(p: Parser, name: str, tok: Token, operands: list[Any], attrs: dict[str, Any],
            regions: list[RegionNode] | None = None, typed: bool = True) -> OpNode:
    if p.at("{"):
        attrs.update(p.parse_attr_dict())
    operand_types: list[Any] | None = None
    result_types: list[Any] | None = None
    if typed and p.accept(":"):
        operand_types, result_types = p.parse_trailing_types()
    return OpNode(name, [], operands, _normalize(p, tok, name, attrs), regions or [], operand_types,
                  result_types, tok.pos)


def _keywords(p: Parser, name: str, attrs: dict[str, Any], leading: bool) -> None:
    """`, kw = value` pairs (or `kw = value` first when `leading`)."""
    first = leading
    while True:
        if first:
            if not (p.peek().kind == "ident" and _followed_by(p, "=")):
                return
        elif not (p.at(",") and _kw_after_comma(p)):
            return
        else:
            p.next()
        first = False
        key = p.next().text
        p.expect("=")
        attrs[key] = _kw_value(p, name, key)


def _followed_by(p: Parser, text: str) -> bool:
    lex = p.lex
    save = lex.pos, lex._peeked
    lex.next()
    ok = lex.peek().text == text
    lex.pos, lex._peeked = save
    return ok


def _kw_after_comma(p: Parser) -> bool:
    lex = p.lex
    save = lex.pos, lex._peeked
    lex.next()
    ok = lex.peek().kind == "ident"
    if ok:
        lex.next()
        ok = lex.peek().text == "="
    lex.pos, lex._peeked = save
    return ok


# ---- forms -------------------------------------------------------------------------------
def parse_default(p: Parser, name: str, tok: Token) -> OpNode:
    """`op %a, %b, kw = v, ... {attrs} : types` (also ops with no operands)."""
    operands = p.parse_operand_list(None) if p.peek().kind == "value" else []
    attrs: dict[str, Any] = {}
    _keywords(p, name, attrs, leading=not operands)
    return _finish(p, name, tok, operands, attrs)


def parse_constant(p: Parser, name: str, tok: Token) -> OpNode:
    attrs: dict[str, Any] = {}
    if p.at("{"):
        attrs.update(p.parse_attr_dict())
    value = p.parse_attr()
    attrs["value"] = value
    typ = getattr(value, "type", None)
    return OpNode(name, [], [], attrs, [], [], [typ] if typ is not None else None, tok.pos)


def parse_compare(p: Parser, name: str, tok: Token) -> OpNode:
    direction = p.expect_kind("ident", "a comparison direction (EQ, LT, ...)").text
    p.expect(",")
    operands = p.parse_operand_list(None)
    attrs: dict[str, Any] = {"comparison_direction": EnumAttr("comparison_direction", direction)}
    if p.accept(","):
        attrs["compare_type"] = EnumAttr("comparison_type",
                                         p.expect_kind("ident", "a comparison type").text)
    return _finish(p, name, tok, operands, attrs)


def parse_get_tuple_element(p: Parser, name: str, tok: Token) -> OpNode:
    operands = p.parse_operand_list(None)
    p.expect("[")
    index = p.integer("a tuple index")
    p.expect("]")
    return _finish(p, name, tok, operands, {"index": index})


def parse_slice(p: Parser, name: str, tok: Token) -> OpNode:
    operands = p.parse_operand_list(None)
    p.expect("[", "to open the slice ranges")
    starts: list[int] = []
    limits: list[int] = []
    strides: list[int] = []
    while not p.accept("]"):
        parts = [p.integer("a slice bound")]
        while p.accept(":"):
            parts.append(p.integer("a slice bound"))
        if len(parts) not in (2, 3):
            raise p.error(tok, "a slice range is start:limit or start:limit:stride")
        starts.append(parts[0])
        limits.append(parts[1])
        strides.append(parts[2] if len(parts) == 3 else 1)
        p.accept(",")
    attrs = {"start_indices": DenseArray("i64", tuple(starts)),
             "limit_indices": DenseArray("i64", tuple(limits)),
             "strides": DenseArray("i64", tuple(strides))}
    return _finish(p, name, tok, operands, attrs)


def parse_custom_call(p: Parser, name: str, tok: Token) -> OpNode:
    target = p.expect_kind("symbol", "a call target (@name)").text[1:].strip('"')
    p.expect("(")
    operands = p.parse_operand_list(")")
    return _finish(p, name, tok, operands, {"call_target_name": target})


def parse_call(p: Parser, name: str, tok: Token) -> OpNode:
    callee = p.expect_kind("symbol", "a function name (@name)").text[1:].strip('"')
    p.expect("(")
    operands = p.parse_operand_list(")")
    return _finish(p, name, tok, operands, {"callee": SymbolRef(callee)})


def parse_composite(p: Parser, name: str, tok: Token) -> OpNode:
    cname = p.expect_kind("string", "a composite name").text[1:-1]
    operands = p.parse_operand_list(None) if p.peek().kind == "value" else []
    return _finish(p, name, tok, operands, {"name": cname})


def parse_return(p: Parser, name: str, tok: Token) -> OpNode:
    operands = p.parse_operand_list(None) if p.peek().kind == "value" else []
    return _finish(p, name, tok, operands, {}, typed=bool(operands))


def parse_check_const(p: Parser, name: str, tok: Token) -> OpNode:
    operands = p.parse_operand_list(None)
    p.expect(",")
    attrs: dict[str, Any] = {"value": p.parse_attr()}
    return _finish(p, name, tok, operands, attrs, typed=False)


def parse_while(p: Parser, name: str, tok: Token) -> OpNode:
    p.expect("(")
    args: list[BlockArg] = []
    operands = []
    if not p.accept(")"):
        while True:
            at = p.expect_kind("value", "a loop variable (%name)")
            p.expect("=")
            from xlapy.stablehlo.parser import value_ref

            operands.append(value_ref(p.expect_kind("value", "an initial value")))
            args.append(BlockArg(at.text, None, at.pos))
            if p.accept(")"):
                break
            p.expect(",")
    types: list[Any] = []
    if p.accept(":"):
        _, types = p.parse_trailing_types()
    attrs: dict[str, Any] = {}
    if p.accept("attributes"):
        attrs.update(p.parse_attr_dict())
    p.expect("cond", "before the while condition")
    cond = p.parse_region()
    p.expect("do", "before the while body")
    body = p.parse_region()
    for i, a in enumerate(args):
        a.type = types[i] if i < len(types) else None
    cond.args = [BlockArg(a.name, a.type, a.pos) for a in args]
    body.args = [BlockArg(a.name, a.type, a.pos) for a in args]
    return OpNode(name, [], operands, attrs, [cond, body], list(types), list(types), tok.pos)


def parse_reduce(p: Parser, name: str, tok: Token) -> OpNode:
    """`reduce(%a init: %b) applies stablehlo.add across dimensions = [1] : ...` or the region
    form `... across dimensions = [1] : ... reducer(%x : t, %y : t) (...) { ... }`."""
    from xlapy.stablehlo.parser import value_ref

    inputs: list[Any] = []
    inits: list[Any] = []
    while True:
        p.expect("(")
        inputs.append(value_ref(p.expect_kind("value", "a reduce input")))
        p.expect("init")
        p.expect(":")
        inits.append(value_ref(p.expect_kind("value", "a reduce init value")))
        p.expect(")")
        if not p.accept(","):
            break
    body_op = None
    if p.accept("applies"):
        body_op = p.expect_kind("ident", "the reducer op").text
    p.expect("across")
    p.expect("dimensions")
    p.expect("=")
    dims = p.parse_attr()
    attrs: dict[str, Any] = {"dimensions": DenseArray("i64", tuple(dims))}
    if p.at("{"):
        attrs.update(p.parse_attr_dict())
    p.expect(":")
    operand_types, result_types = p.parse_trailing_types()
    if body_op is not None:
        region = _applies_region(name, body_op, operand_types or [], len(inputs))
    else:
        p.expect("reducer")
        lhs: list[BlockArg] = []
        rhs: list[BlockArg] = []
        while p.accept("("):
            for side in (lhs, rhs):
                vt = p.expect_kind("value", "a reducer argument")
                p.expect(":")
                side.append(BlockArg(vt.text, p.parse_type(), vt.pos))
                p.skip_loc()
                if side is lhs:
                    p.expect(",")
            p.expect(")")
        region = p.parse_region()
        region.args = lhs + rhs
    return OpNode(name, [], inputs + inits, attrs, [region], operand_types, result_types, tok.pos)


def _applies_region(op: str, body_op: str, operand_types: list[Any], n: int) -> RegionNode:
    from xlapy.stablehlo.nodes import ValueRef
    from xlapy.types import Shape

    scalars = []
    for t in operand_types[n:2 * n]:
        scalars.append(Shape.scalar(t.element_type) if isinstance(t, Shape) else t)
    args = [BlockArg(f"%lhs{i}", s) for i, s in enumerate(scalars)]
    args += [BlockArg(f"%rhs{i}", s) for i, s in enumerate(scalars)]
    ops = [OpNode(body_op, [(f"%r{i}", 1)], [ValueRef(f"%lhs{i}", None, 0),
                                            ValueRef(f"%rhs{i}", None, 0)], {})
           for i in range(n)]
    ops.append(OpNode("stablehlo.return", [], [ValueRef(f"%r{i}", None, 0) for i in range(n)],
                      {}))
    return RegionNode(args, ops)


def parse_convolution(p: Parser, name: str, tok: Token) -> OpNode:
    p.expect("(")
    operands = p.parse_operand_list(")")
    attrs: dict[str, Any] = {}
    p.expect("dim_numbers")
    p.expect("=")
    attrs["dimension_numbers"] = p.parse_conv_dims()
    if p.accept(","):
        p.expect("window")
        p.expect("=")
        window = p.parse_attr_dict()
        names = {"stride": "window_strides", "pad": "padding", "lhs_dilate": "lhs_dilation",
                 "rhs_dilate": "rhs_dilation", "reverse": "window_reversal"}
        for key, value in window.items():
            attrs[names.get(key, key)] = value
    return _finish(p, name, tok, operands, attrs)


def parse_top_k(p: Parser, name: str, tok: Token) -> OpNode:
    """`chlo.top_k(%x, k = 2) : t -> (t, t)`."""
    p.expect("(")
    operands = p.parse_operand_list(None)
    attrs: dict[str, Any] = {}
    _keywords(p, name, attrs, leading=False)
    p.expect(")")
    return _finish(p, name, tok, operands, attrs)


def parse_scan(p: Parser, name: str, tok: Token) -> OpNode:
    """`chlo.scan(%in, ...) inits(%c, ...) dimension=0 attributes {...} { region } : type`."""
    p.expect("(")
    inputs = p.parse_operand_list(")")
    p.expect("inits")
    p.expect("(")
    inits = p.parse_operand_list(")")
    attrs: dict[str, Any] = {"num_inputs": len(inputs)}
    while p.peek().kind == "ident" and p.peek().text != "attributes":
        key = p.next().text
        p.expect("=")
        attrs[key] = p.parse_attr()
    if p.accept("attributes"):
        attrs.update(p.parse_attr_dict())
    region = p.parse_region()
    return _finish(p, name, tok, inputs + inits, attrs, [region])


PRETTY: dict[str, Callable[[Parser, str, Token], OpNode]] = {
    "chlo.top_k": parse_top_k,
    "chlo.scan": parse_scan,
    "stablehlo.constant": parse_constant,
    "stablehlo.compare": parse_compare,
    "stablehlo.get_tuple_element": parse_get_tuple_element,
    "stablehlo.slice": parse_slice,
    "stablehlo.custom_call": parse_custom_call,
    "stablehlo.composite": parse_composite,
    "stablehlo.while": parse_while,
    "stablehlo.reduce": parse_reduce,
    "stablehlo.convolution": parse_convolution,
    "stablehlo.return": parse_return,
    "func.return": parse_return,
    "return": parse_return,
    "func.call": parse_call,
    "call": parse_call,
    "check.expect_eq_const": parse_check_const,
    "check.expect_almost_eq_const": parse_check_const,
}
