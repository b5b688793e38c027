"""The op spellings that make most of a JAX-lowered module, each read by one regex match.

JAX prints most ops in a few forms, one op per line:

    %3 = stablehlo.add %0, %2 : tensor<32x64xf32>                (the default form)
    %4 = stablehlo.reshape %3 : (tensor<32x64xf32>) -> tensor<2048xf32>   (with a function type)
    %1 = stablehlo.broadcast_in_dim %0, dims = [1] : (tensor<64xf32>) -> tensor<32x64xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0], precision = [DEFAULT,
         DEFAULT] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>    (one line)
    %6 = stablehlo.reduce(%3 init: %cst) applies stablehlo.add across dimensions = [1] :
         (tensor<32x64xf32>, tensor<f32>) -> tensor<32xf32>                    (one line)

Read token by token they cost the parser ten to forty lexer calls each (most of a cold
compile's parse). `match_line` reads one of them in a single match and builds the very
`OpNode` the token path builds (tests/unit/stablehlo/test_line_forms.py compares them over
every workload and tricky spellings). Anything else, or anything a little different (other
spacing, a `loc(...)`, a comment, types continued on the next line, an op with its own pretty
parser), does not match and takes the token path, with its errors and locations.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from xlapy.stablehlo.nodes import (
    ConvDims,
    DenseArray,
    DenseAttr,
    EnumAttr,
    OpNode,
    StructAttr,
    TypedNumber,
    ValueRef,
)
from xlapy.types import ElementType, Shape

if TYPE_CHECKING:
    from xlapy.stablehlo.parser import Parser

_VALUE = r"%[A-Za-z0-9_$.\-]+"  # the lexer's value token, without a `#i` result index
_REF = _VALUE + r"(?:\#[0-9]+)?"
_TENSOR = r"tensor<(?:[0-9]{1,18}x)*[A-Za-z0-9_]+>"  # a plain static tensor (parser.py)
#: The end of the op's line; the next line starts another op or closes the block. Not a
#: `loc(...)`, a comment or a continuation (`, type`, `-> type`): those take the token path.
_END = r"[ \t]*\n(?=\s*(?:[%}\"]|(?!loc\b)[A-Za-z_]))"

_INTS = r"\[((?:[0-9]{1,18}(?:, [0-9]{1,18})*)?)\]"  # `[1, 0]`, `[]`: a list of int64s
#: `: (a, b) -> r` (group 1 the operand types, 2 the result type).
_FUNCTION_TYPE = rf" : \(({_TENSOR}(?:, {_TENSOR})*)\) -> ({_TENSOR}){_END}"

#: `%r = name` (the lexer's ident token for the name), then a space or `(`; whitespace
#: before it is skipped (the parser may ask before it has read the op's first token).
_HEAD = re.compile(rf"\s*({_VALUE}) = ([A-Za-z_][A-Za-z0-9_$.]*)(?=[ (])")
#: Operands, then one type for all (group 2) or a function type (groups 3, 4).
_DEFAULT = re.compile(rf" ({_REF}(?:, {_REF})*) : (?:({_TENSOR})|\(({_TENSOR}(?:, {_TENSOR})*)\)"
                      rf" -> ({_TENSOR})){_END}")
#: `%x, dims = [..] : (a) -> r`: broadcast_in_dim, transpose, reverse (a dims keyword naming
#: an array attribute).
_DIMS = re.compile(rf" ({_REF}), dims = {_INTS}{_FUNCTION_TYPE}")
#: One-input reduce by a named op: `(%x init: %c) applies stablehlo.add across dimensions =
#: [1] : (a, c) -> r`.
_REDUCE = re.compile(rf"\(({_REF}) init: ({_REF})\) applies ([A-Za-z_][A-Za-z0-9_$.]*) across "
                     rf"dimensions = {_INTS}{_FUNCTION_TYPE}")
#: dot_general: `%a, %b, [batching_dims = [..] x [..], ]contracting_dims = [..] x [..][,
#: precision = [P, P]] : (a, b) -> r`.
_PRECISION = r"(?:DEFAULT|HIGH|HIGHEST)"
_DOT = re.compile(
    rf" ({_REF}, {_REF})(?:, batching_dims = {_INTS} x {_INTS})?, contracting_dims = {_INTS} x "
    rf"{_INTS}(?:, precision = \[({_PRECISION}(?:, {_PRECISION})*)\])?{_FUNCTION_TYPE}")
#: convolution: `(%x, %k) dim_numbers = [..]x[..]->[..], window = {..} {..} : (a, k) -> r`
#: (groups: operands, the three dimension groups, the window and attribute dict bodies).
_CONV = re.compile(
    rf"\(({_REF}), ({_REF})\) dim_numbers = \[([^\[\]\n]*)\]x\[([^\[\]\n]*)\]->"
    rf"\[([^\[\]\n]*)\](?:, window = \{{([^{{}}\n]*)\}})? \{{([^{{}}\n]*)\}}{_FUNCTION_TYPE}")
#: One `key = value` of a convolution window: int lists, [[lo, hi], ...] pads, bool lists.
_WINDOW_ITEM = re.compile(r"(stride|pad|lhs_dilate|rhs_dilate|reverse) = "
                          r"(\[(?:\[[0-9]{1,18}, [0-9]{1,18}\](?:, \[[0-9]{1,18}, [0-9]{1,18}\])*|"
                          r"[0-9]{1,18}(?:, [0-9]{1,18})*|(?:true|false)(?:, (?:true|false))*)?\])"
                          r"(?:, |$)")
_WINDOW_NAMES = {"stride": "window_strides", "pad": "padding", "lhs_dilate": "lhs_dilation",
                 "rhs_dilate": "rhs_dilation", "reverse": "window_reversal"}
_CONV_ATTR = re.compile(
    r"(batch_group_count|feature_group_count) = ([0-9]{1,18}) : i64(?:, |$)|precision_config = "
    r"\[(#stablehlo<precision (?:DEFAULT|HIGH|HIGHEST)>(?:, #stablehlo<precision "
    r"(?:DEFAULT|HIGH|HIGHEST)>)*)\](?:, |$)")
_CONV_DIM = re.compile(r"[bfio]|[0-9]{1,6}")
_S64 = Shape.scalar(ElementType.S64)
#: A splat or hex body: no brackets, quotes or nesting, not ending in '-' (an arrow).
_CONSTANT = re.compile(
    rf" dense<([^<>\"(){{}}\[\]\n]*[^<>\"(){{}}\[\]\n\-])> : ({_TENSOR}){_END}")


#: Ops whose `dims = [..]` keyword is an array attribute (syntax.KEYWORDS, _ARRAY_ATTRS).
_DIMS_ATTRS = {"stablehlo.broadcast_in_dim": "broadcast_dimensions",
               "stablehlo.transpose": "permutation", "stablehlo.reverse": "dimensions"}


def match_line(p: Parser, pos: int) -> OpNode | None:
    """The op starting at `pos` (its first result, or whitespace before it) when it is one
    of the line forms, the lexer moved past it; None (nothing consumed) otherwise."""
    from xlapy.stablehlo.syntax import PRETTY

    text = p.lex.text
    head = _HEAD.match(text, pos)
    if head is None:
        return None
    name = head.group(2)
    at = head.end()
    if name in _DIMS_ATTRS:
        op = _dims(p, text, at, name, head.start(2))
    elif name == "stablehlo.dot_general":
        op = _dot(p, text, at, name, head.start(2))
    elif name == "stablehlo.constant":
        op = _constant(p, text, at, name, head.start(2))
    elif name == "stablehlo.reduce":
        op = _reduce(p, text, at, name, head.start(2))
    elif name == "stablehlo.convolution":
        op = _convolution(p, text, at, name, head.start(2))
    elif name in PRETTY:
        return None
    else:
        op = _default(p, text, at, name, head.start(2))
    if op is None:
        return None
    op.results = [(head.group(1), 1)]
    return op


def _refs(text: str, start: int) -> list[ValueRef]:
    """`%a, %b#1` (at `start` in the source) as the token path's ValueRefs."""
    out: list[ValueRef] = []
    for part in text.split(", "):
        name, _, idx = part.partition("#")
        out.append(ValueRef(name, int(idx) if idx else None, start))
        start += len(part) + 2
    return out


def _done(p: Parser, end: int) -> None:
    lex = p.lex
    lex._peeked = None
    lex.pos = end


def _types(p: Parser, texts: str) -> list[Shape] | None:
    """`tensor<..>, tensor<..>` as Shapes (None when one is not a known plain tensor)."""
    out = []
    for t in texts.split(", "):
        shape = p.plain_tensor(t)
        if shape is None:
            return None
        out.append(shape)
    return out


def _ints(text: str) -> list[int]:
    return [int(d) for d in text.split(", ")] if text else []


def _default(p: Parser, text: str, at: int, name: str, pos: int) -> OpNode | None:
    m = _DEFAULT.match(text, at)
    if m is None:
        return None
    operand_types: list[Shape] | None = None
    if m.group(2) is not None:
        result = p.plain_tensor(m.group(2))
    else:
        operand_types, result = _types(p, m.group(3)), p.plain_tensor(m.group(4))
        if operand_types is None:
            return None
    if result is None:
        return None
    _done(p, m.end())
    return OpNode(name, [], _refs(m.group(1), m.start(1)), {}, [], operand_types, [result], pos)


def _dims(p: Parser, text: str, at: int, name: str, pos: int) -> OpNode | None:
    m = _DIMS.match(text, at)
    if m is None:
        return None
    operand_types, result = _types(p, m.group(3)), p.plain_tensor(m.group(4))
    if operand_types is None or result is None:
        return None
    _done(p, m.end())
    dims = DenseArray("i64", tuple(_ints(m.group(2))))
    return OpNode(name, [], _refs(m.group(1), m.start(1)), {_DIMS_ATTRS[name]: dims}, [],
                  operand_types, [result], pos)


def _dot(p: Parser, text: str, at: int, name: str, pos: int) -> OpNode | None:
    m = _DOT.match(text, at)
    if m is None:
        return None
    operand_types, result = _types(p, m.group(7)), p.plain_tensor(m.group(8))
    if operand_types is None or result is None:
        return None
    _done(p, m.end())
    fields: dict[str, Any] = {}
    if m.group(2) is not None:
        fields["lhs_batching_dimensions"] = _ints(m.group(2))
        fields["rhs_batching_dimensions"] = _ints(m.group(3))
    fields["lhs_contracting_dimensions"] = _ints(m.group(4))
    fields["rhs_contracting_dimensions"] = _ints(m.group(5))
    attrs: dict[str, Any] = {"dot_dimension_numbers": StructAttr("stablehlo.dot", fields)}
    if m.group(6) is not None:
        attrs["precision_config"] = [EnumAttr("precision", v) for v in m.group(6).split(", ")]
    return OpNode(name, [], _refs(m.group(1), m.start(1)), attrs, [], operand_types, [result],
                  pos)


def _reduce(p: Parser, text: str, at: int, name: str, pos: int) -> OpNode | None:
    from xlapy.stablehlo.syntax import _applies_region

    m = _REDUCE.match(text, at)
    if m is None:
        return None
    operand_types, result = _types(p, m.group(5)), p.plain_tensor(m.group(6))
    if operand_types is None or result is None:
        return None
    _done(p, m.end())
    operands = _refs(m.group(1), m.start(1)) + _refs(m.group(2), m.start(2))
    region = _applies_region(name, m.group(3), operand_types, 1)
    return OpNode(name, [], operands, {"dimensions": DenseArray("i64", tuple(_ints(m.group(4))))},
                  [region], operand_types, [result], pos)


def _convolution(p: Parser, text: str, at: int, name: str, pos: int) -> OpNode | None:
    m = _CONV.match(text, at)
    if m is None:
        return None
    dims = _conv_dims(m.group(3), m.group(4), m.group(5))
    window = _items(_WINDOW_ITEM, m.group(6) or "")
    extra = _items(_CONV_ATTR, m.group(7))
    operand_types, result = _types(p, m.group(8)), p.plain_tensor(m.group(9))
    if dims is None or window is None or extra is None or operand_types is None or \
            result is None:
        return None
    attrs: dict[str, Any] = {"dimension_numbers": dims}
    for im in window:
        attrs[_WINDOW_NAMES[im.group(1)]] = _list_value(im.group(2))
    for im in extra:
        if im.group(1) is not None:
            attrs[im.group(1)] = TypedNumber(int(im.group(2)), _S64)
        else:
            attrs["precision_config"] = [EnumAttr("precision", v.split(" ")[1][:-1])
                                         for v in im.group(3).split(", ")]
    _done(p, m.end())
    return OpNode(name, [], _refs(m.group(1), m.start(1)) + _refs(m.group(2), m.start(2)),
                  attrs, [], operand_types, [result], pos)


def _items(item: re.Pattern[str], body: str) -> list[re.Match[str]] | None:
    """`body` as consecutive `item` matches, each key once (None: anything else)."""
    out: list[re.Match[str]] = []
    keys: set[str] = set()
    at = 0
    while at < len(body):
        m = item.match(body, at)
        if m is None:
            return None
        key = m.group(1) or "precision_config"
        if key in keys:
            return None
        keys.add(key)
        out.append(m)
        at = m.end()
    return out


def _list_value(text: str) -> list[Any]:
    """`[1, 2]`, `[[1, 1], [0, 0]]`, `[false, true]`: what parse_attr makes of them."""
    inner = text[1:-1]
    if not inner:
        return []
    if inner.startswith("["):
        return [_list_value(part if part.endswith("]") else part + "]")
                for part in inner.split("], ")]
    return [v == "true" if v in ("true", "false") else int(v) for v in inner.split(", ")]


def _conv_dims(lhs: str, rhs: str, out: str) -> ConvDims | None:
    """The three groups as parse_conv_dims reads them, when each is valid (every letter once,
    spatial 0..n-1, the same rank): None otherwise (the token path says what is wrong)."""
    groups = []
    for text, letters in ((lhs, "bf"), (rhs, "io"), (out, "bf")):
        items = tuple(text.split(", "))
        if not all(_CONV_DIM.fullmatch(d) and (d.isdigit() or d in letters) for d in items):
            return None
        if len(set(items)) != len(items) or not all(c in items for c in letters):
            return None
        spatial = sorted(int(d) for d in items if d.isdigit())
        if spatial != list(range(len(spatial))):
            return None
        groups.append(items)
    if not len(groups[0]) == len(groups[1]) == len(groups[2]):
        return None
    return ConvDims(groups[0], groups[1], groups[2])


def _constant(p: Parser, text: str, at: int, name: str, pos: int) -> OpNode | None:
    m = _CONSTANT.match(text, at)
    if m is None:
        return None
    shape = p.plain_tensor(m.group(2))
    if shape is None:
        return None
    _done(p, m.end())
    value = DenseAttr(m.group(1).strip(), shape, m.start(1))
    return OpNode(name, [], [], {"value": value}, [], [], [shape], pos)
