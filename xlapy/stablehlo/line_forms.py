"""The op spellings that make most of a JAX-lowered module, each read by one regex match.

JAX prints most ops in three forms, one op per line:

    %3 = stablehlo.add %0, %2 : tensor<32x64xf32>                (the default form)
    %1 = stablehlo.broadcast_in_dim %0, dims = [1] : (tensor<64xf32>) -> tensor<32x64xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>

Read token by token they cost the parser about ten lexer calls each (a third of a cold
compile's parse). `match_line` reads one of them in a single match and builds the very
`OpNode` the token path builds (tests/unit/stablehlo/test_line_forms.py compares them over
every workload and tricky spellings). Anything else, or anything a little different (other
spacing, a `loc(...)`, a comment, types continued on the next line, an op with its own pretty
parser), does not match and takes the token path, with its errors and locations.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from xlapy.stablehlo.nodes import DenseArray, DenseAttr, OpNode, ValueRef

if TYPE_CHECKING:
    from xlapy.stablehlo.parser import Parser

_VALUE = r"%[A-Za-z0-9_$.\-]+"  # the lexer's value token, without a `#i` result index
_REF = _VALUE + r"(?:\#[0-9]+)?"
_TENSOR = r"tensor<(?:[0-9]{1,18}x)*[A-Za-z0-9_]+>"  # a plain static tensor (parser.py)
#: The end of the op's line; the next line starts another op or closes the block. Not a
#: `loc(...)`, a comment or a continuation (`, type`, `-> type`): those take the token path.
_END = r"[ \t]*\n(?=\s*(?:[%}\"]|(?!loc\b)[A-Za-z_]))"

#: `%r = name ` (the lexer's ident token for the name).
_HEAD = re.compile(rf"({_VALUE}) = ([A-Za-z_][A-Za-z0-9_$.]*) ")
_DEFAULT = re.compile(rf"({_REF}(?:, {_REF})*) : ({_TENSOR}){_END}")
_BROADCAST = re.compile(
    rf"({_REF}), dims = \[((?:[0-9]{{1,18}}(?:, [0-9]{{1,18}})*)?)\] : \(({_TENSOR})\) -> "
    rf"({_TENSOR}){_END}")
#: A splat or hex body: no brackets, quotes or nesting, not ending in '-' (an arrow).
_CONSTANT = re.compile(
    rf"dense<([^<>\"(){{}}\[\]\n]*[^<>\"(){{}}\[\]\n\-])> : ({_TENSOR}){_END}")


def match_line(p: Parser, pos: int) -> OpNode | None:
    """The op starting at `pos` (its first result) when it is one of the line forms, the
    lexer moved past it; None (nothing consumed) otherwise."""
    from xlapy.stablehlo.syntax import PRETTY

    text = p.lex.text
    head = _HEAD.match(text, pos)
    if head is None:
        return None
    name = head.group(2)
    at = head.end()
    if name == "stablehlo.broadcast_in_dim":
        op = _broadcast(p, text, at, name, head.start(2))
    elif name == "stablehlo.constant":
        op = _constant(p, text, at, name, head.start(2))
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


def _default(p: Parser, text: str, at: int, name: str, pos: int) -> OpNode | None:
    m = _DEFAULT.match(text, at)
    if m is None:
        return None
    shape = p.plain_tensor(m.group(2))
    if shape is None:
        return None
    _done(p, m.end())
    return OpNode(name, [], _refs(m.group(1), m.start(1)), {}, [], None, [shape], pos)


def _broadcast(p: Parser, text: str, at: int, name: str, pos: int) -> OpNode | None:
    m = _BROADCAST.match(text, at)
    if m is None:
        return None
    operand, result = p.plain_tensor(m.group(3)), p.plain_tensor(m.group(4))
    if operand is None or result is None:
        return None
    _done(p, m.end())
    dims = tuple(int(d) for d in m.group(2).split(", ")) if m.group(2) else ()
    return OpNode(name, [], _refs(m.group(1), m.start(1)),
                  {"broadcast_dimensions": DenseArray("i64", dims)}, [], [operand], [result],
                  pos)


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
