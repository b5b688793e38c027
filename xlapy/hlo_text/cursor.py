"""A character cursor over HLO text: whitespace and `/* */` comments, names, numbers, strings,
balanced groups, and spans (file:line:col with the source line) for ParseError.

HLO text is line-oriented but not line-sensitive, and attribute values have many small
syntaxes (`1_2x0_1`, `b01f_01io->b01f`, `{[0:2:1]}`), so the parser reads characters rather than
a fixed token stream; each attribute keeps its raw text and position for its own sub-parser.
"""

from __future__ import annotations

import bisect
import re

from xlapy.errors import ParseError, Span

_WS = re.compile(r"(?:\s|/\*.*?\*/)*+", re.S)  # possessive: no backtracking over blanks
_NAME = re.compile(r"%?[A-Za-z_$][A-Za-z0-9_.\-$]*")
_INT = re.compile(r"-?[0-9]+")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


class Cursor:
    """Position in `text`; every read skips leading whitespace and comments first."""

    def __init__(self, text: str, filename: str = "<input>") -> None:
        self.text = text
        self.filename = filename
        self.pos = 0
        self._line_starts: list[int] | None = None

    # ---- locations ----------------------------------------------------------------------------
    def end_pos(self) -> int:
        """The last non-blank character (where "unexpected end of input" points)."""
        return max(0, len(self.text.rstrip()) - 1)

    def span(self, pos: int, length: int = 1) -> Span:
        if self._line_starts is None:
            self._line_starts = [0] + [i + 1 for i, c in enumerate(self.text) if c == "\n"]
        pos = max(0, min(pos, len(self.text)))
        line = bisect.bisect_right(self._line_starts, pos) - 1
        start = self._line_starts[line]
        end = self.text.find("\n", start)
        source = self.text[start:end if end >= 0 else len(self.text)]
        return Span(self.filename, line + 1, pos - start + 1, max(1, length), source)

    def error(self, pos: int, message: str, length: int = 1) -> ParseError:
        return ParseError(self.span(pos, length), message)

    # ---- reading ------------------------------------------------------------------------------
    def skip(self) -> int:
        m = _WS.match(self.text, self.pos)
        assert m is not None  # the pattern matches the empty string
        self.pos = m.end()
        return self.pos

    def at_end(self) -> bool:
        return self.skip() >= len(self.text)

    def peek(self, s: str) -> bool:
        self.skip()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, what: str = "") -> int:
        pos = self.skip()
        if not self.text.startswith(s, pos):
            found = self.text[pos:pos + 12].split("\n")[0] or "end of input"
            raise self.error(pos, f"expected '{s}'{' ' + what if what else ''}, found "
                                  f"'{found}'")
        self.pos += len(s)
        return pos

    def name(self, what: str = "a name") -> tuple[str, int]:
        """An HLO identifier (`%add.1`, `get-tuple-element.3`); the `%` is dropped."""
        pos = self.skip()
        m = _NAME.match(self.text, pos)
        if m is None:
            raise self.error(pos, f"expected {what}")
        self.pos = m.end()
        return m.group().lstrip("%"), pos

    def peek_name(self) -> str | None:
        m = _NAME.match(self.text, self.skip())
        return m.group() if m else None

    def integer(self, what: str = "an integer") -> int:
        pos = self.skip()
        m = _INT.match(self.text, pos)
        if m is None:
            raise self.error(pos, f"expected {what}")
        digits = m.group()
        if len(digits.lstrip("-")) > 19 or not -(1 << 63) <= int(digits) < (1 << 63):
            raise self.error(pos, f"{what} {digits[:24]} does not fit in 64 bits", len(digits))
        self.pos = m.end()
        return int(digits)

    def string(self) -> str:
        pos = self.skip()
        m = _STRING.match(self.text, pos)
        if m is None:
            raise self.error(pos, "expected a string")
        self.pos = m.end()
        return m.group()

    def balanced(self, stops: str = ",") -> tuple[str, int]:
        """Raw text up to a `stops` character (or a closing bracket) at depth 0; strings skipped.

        Used for attribute values and constant literals, which have their own sub-parsers.
        """
        start = self.skip()
        stack: list[tuple[str, int]] = []
        i, text = start, self.text
        pairs = {"}": "{", ")": "(", "]": "["}
        while i < len(text):
            c = text[i]
            if c == '"':
                m = _STRING.match(text, i)
                if m is None:
                    raise self.error(i, "unterminated string")
                i = m.end()
                continue
            if c in "{([":
                stack.append((c, i))
            elif c in "})]":
                if not stack:
                    break
                if stack[-1][0] != pairs[c]:
                    raise self.error(i, f"'{c}' does not match '{stack[-1][0]}'")
                stack.pop()
            elif not stack and (c in stops or c == "\n"):
                break
            i += 1
        if stack:
            raise self.error(stack[-1][1], f"'{stack[-1][0]}' is not closed")
        self.pos = i
        return text[start:i].strip(), start

    def rest_of_line(self) -> str:
        end = self.text.find("\n", self.pos)
        end = len(self.text) if end < 0 else end
        out = self.text[self.pos:end]
        self.pos = end
        return out
