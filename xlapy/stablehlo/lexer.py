"""A hand-written MLIR lexer: one compiled master regex, tokens produced on demand with spans.

The lexer is lazy (the parser pulls tokens) because MLIR's shaped types need a different
tokenization: in `tensor<0x2xi8>` the `0x2` is not a hex number. `scan_dims` handles that.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from xlapy.errors import ParseError, Span
from xlapy.types.limits import MAX_NESTING

F = TypeVar("F", bound=Callable[..., Any])

# Order matters: longer / more specific alternatives first.
_MASTER = re.compile(r"""
  (?:\s|//[^\n]*)*+       # leading whitespace and comments (possessive: no backtracking)
  (?:
  (?P<value>%[A-Za-z0-9_$.\-]+(?:\#[0-9]+)?)
| (?P<symbol>@(?:[A-Za-z_$.\-][A-Za-z0-9_$.\-]*|"(?:[^"\\]|\\.)*"))
| (?P<block>\^[A-Za-z0-9_$.\-]+)
| (?P<hash>\#[A-Za-z_$.\-][A-Za-z0-9_$.\-]*)
| (?P<bang>![A-Za-z_$.\-][A-Za-z0-9_$.\-]*)
| (?P<string>"(?:[^"\\]|\\.)*")
| (?P<arrow>->)
| (?P<number>-?(?:0x[0-9A-Fa-f]+|[0-9]+(?:\.[0-9]*)?(?:[eE][+\-]?[0-9]+)?))
| (?P<ident>[A-Za-z_][A-Za-z0-9_$.]*)
| (?P<punct>[()\[\]{}<>,:=?*+\-|])
| (?P<eof>\Z)
  )""", re.VERBOSE)

_WS = re.compile(r"(?:\s|//[^\n]*)*+")
_DIMS = re.compile(r"\s*((?:(?:[0-9]+|\?)x)*)")


@dataclass(slots=True)
class Token:
    kind: str  # value, symbol, block, hash, bang, string, arrow, number, ident, punct, eof
    text: str
    pos: int


class Lexer:
    """Pulls tokens from `text`; `peek`/`next` with one token of lookahead; spans on demand."""

    def __init__(self, text: str, filename: str = "<input>", line_offset: int = 0) -> None:
        self.text = text
        self.filename = filename
        self.line_offset = line_offset
        self.pos = 0
        self._peeked: Token | None = None
        self._line_starts: list[int] | None = None
        self._end: int | None = None  # the end of the last non-blank character

    # ---- tokens -------------------------------------------------------------------------------
    def _scan(self) -> Token:
        m = _MASTER.match(self.text, self.pos)
        if m is None:
            pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]
            raise ParseError(self.span(pos), f"unexpected character {self.text[pos]!r}")
        kind = m.lastgroup
        self.pos = m.end()
        return Token(kind, m.group(kind), m.start(kind))  # type: ignore[arg-type]

    def peek(self) -> Token:
        if self._peeked is None:
            self._peeked = self._scan()
        return self._peeked

    def next(self) -> Token:
        tok = self._peeked
        if tok is None:
            return self._scan()
        self._peeked = None
        return tok

    def scan_dims(self) -> list[int | None]:
        """Read `2x?x3x` (the dims prefix of a shaped type) directly from the text."""
        start = self._peeked.pos if self._peeked is not None else self.pos
        self._peeked = None
        m = _DIMS.match(self.text, start)
        assert m is not None
        self.pos = m.end()
        dims: list[int | None] = []
        pos = m.start(1)
        for part in m.group(1).split("x")[:-1]:
            if part != "?" and (len(part) > 19 or int(part) >= 1 << 63):
                raise ParseError(self.span(pos, len(part)),
                                 f"dimension {part[:24]} does not fit in 64 bits")
            dims.append(None if part == "?" else int(part))
            pos += len(part) + 1
        return dims

    def raw_until(self, stop: str, start: int | None = None) -> tuple[str, int]:
        """Raw text from `start` to the next top-level `stop` char (nesting of ([{< tracked)."""
        pos = start if start is not None else (self._peeked.pos if self._peeked else self.pos)
        self._peeked = None
        depth = 0
        text = self.text
        i = pos
        n = len(text)
        while i < n:
            c = text[i]
            if c == '"':
                i += 1
                while i < n and text[i] != '"':
                    i += 2 if text[i] == "\\" else 1
            elif c == ">" and i > pos and text[i - 1] == "-":
                pass  # an arrow `->`, never a closing bracket
            elif depth == 0 and c == stop:
                self.pos = i
                return text[pos:i], pos
            elif c in "([{<":
                depth += 1
            elif c in ")]}>":
                if c == ">" and i > 0 and text[i - 1] == "-":
                    pass  # an arrow
                else:
                    depth -= 1
            i += 1
        raise ParseError(self.span(pos), f"unterminated input: expected '{stop}'")

    # ---- spans --------------------------------------------------------------------------------
    def span(self, pos: int, length: int = 1) -> Span:
        if self._end is None:  # once: rstrip copies the text (the importer asks per op)
            self._end = len(self.text.rstrip())
        if pos >= self._end and self._end:  # at the end: point after the last real character
            pos = self._end
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        line = bisect.bisect_right(self._line_starts, pos) - 1
        start = self._line_starts[line]
        end = self.text.find("\n", start)
        source = self.text[start:end if end >= 0 else len(self.text)]
        return Span(self.filename, line + 1 + self.line_offset, pos - start + 1, max(1, length),
                    source)

    def error(self, tok: Token, message: str) -> ParseError:
        return ParseError(self.span(tok.pos, len(tok.text) or 1), message)


def nested(method: F) -> F:
    """A parser method that may recurse: at most MAX_NESTING levels, then a ParseError."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.depth >= MAX_NESTING:
            raise self.error(self.peek(), f"nested more than {MAX_NESTING} levels deep "
                                          f"(types, attributes or regions)")
        self.depth += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            self.depth -= 1

    return wrapper  # type: ignore[return-value]


def _symbol_name(text: str) -> str:
    return text[2:-1] if text.startswith('@"') else text[1:]


def _number(text: str) -> int | float:
    if text.startswith(("0x", "-0x")):
        return int(text, 16)
    if any(c in text for c in ".eE"):
        return float(text)
    return int(text)


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    return s.encode("latin-1", "backslashreplace").decode("unicode_escape")
