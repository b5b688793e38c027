"""MLIR locations (`loc(...)` after an op, `#locN = loc(...)` aliases) resolved to a SourceLoc.

JAX prints them with `lowered.as_text(debug_info=True)`: a name (`"jit(f)/sin"`) around a call
site (`callsite(callee at caller)`) whose callee is a file location (`"x.py":3:8 to :18`). The
outermost name and the callee's file position are kept; `fused[...]` takes its first part that
resolves; `unknown` resolves to nothing. Unreadable location text is ignored (it never changes
what the program computes), never an error.
"""

from __future__ import annotations

import re
from dataclasses import replace

from xlapy.errors import Span
from xlapy.ir.location import LazySpan, SourceLoc

_FILE = re.compile(r'^"((?:[^"\\]|\\.)*)"\s*:\s*(\d+)\s*:\s*(\d+)')
_NAME = re.compile(r'^"((?:[^"\\]|\\.)*)"\s*(?:\((.*)\))?$', re.S)
_MAX_DEPTH = 64


def resolve(text: str | None, aliases: dict[str, str], span: Span | LazySpan | None
            ) -> SourceLoc:
    found = _resolve(text.strip(), aliases, 0) if text else None
    return replace(found, span=span) if found is not None else SourceLoc(span=span)


def _resolve(text: str, aliases: dict[str, str], depth: int) -> SourceLoc | None:
    if depth > _MAX_DEPTH or not text or text == "unknown":
        return None
    if text.startswith("#"):
        target = aliases.get(text)
        return _resolve(target.strip(), aliases, depth + 1) if target else None
    if m := _FILE.match(text):
        return SourceLoc(file=m.group(1), line=int(m.group(2)), col=int(m.group(3)))
    if text.startswith("callsite(") and text.endswith(")"):
        callee = _split_top(text[len("callsite("):-1], " at ")
        return _resolve(callee[0].strip(), aliases, depth + 1) if callee else None
    if text.startswith("fused"):
        start = text.find("[")
        if start >= 0 and text.endswith("]"):
            for part in _split_top(text[start + 1:-1], ","):
                if (got := _resolve(part.strip(), aliases, depth + 1)) is not None:
                    return got
        return None
    if m := _NAME.match(text):
        inner = _resolve(m.group(2).strip(), aliases, depth + 1) if m.group(2) else None
        if inner is None:
            return SourceLoc(name=m.group(1))
        return replace(inner, name=m.group(1))  # the outer name: the op's, not its function's
    return None


def _split_top(text: str, sep: str) -> list[str]:
    """Split at `sep` outside brackets and strings."""
    parts, depth, start, i, n = [], 0, 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts
