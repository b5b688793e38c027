"""The exceptions users see. Every user-facing failure is one of these, never a bare traceback."""

from __future__ import annotations

from dataclasses import dataclass


class XlapyError(Exception):
    """Base class of every error xlapy raises on purpose."""


@dataclass(frozen=True)
class Span:
    """A source range: file name, 1-based line and column, and the length to underline."""

    file: str
    line: int
    col: int
    length: int = 1
    source_line: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class ParseError(XlapyError):
    """Malformed text; prints `file:line:col: message`, the source line and a caret."""

    def __init__(self, span: Span | None, message: str) -> None:
        self.span = span
        self.message = message
        super().__init__(self.render())

    def render(self) -> str:
        if self.span is None:
            return self.message
        text = f"{self.span}: {self.message}"
        if self.span.source_line:
            caret = " " * (self.span.col - 1) + "^" * max(1, self.span.length)
            text += f"\n{self.span.source_line}\n{caret}"
        return text


class ShapeInferenceError(XlapyError, TypeError):
    """An op's operands or attributes violate one of the spec's constraints.

    The message starts with the constraint label (`concatenate_c4: ...`) and shows every shape.
    """

    def __init__(self, label: str, message: str) -> None:
        self.label = label
        super().__init__(f"{label}: {message}")


class VerificationError(XlapyError):
    """The IR is structurally broken or an instruction fails shape inference."""

    def __init__(self, op: str, constraint: str, message: str) -> None:
        self.op = op
        self.constraint = constraint
        super().__init__(f"{constraint}: {message}" if constraint else message)


class BuilderError(XlapyError):
    """An XlaBuilder op failed; raised from build() or immediately (die-immediately mode)."""


class InterpreterError(XlapyError):
    """Evaluation failed at run time (bad argument, failed check, missing custom call...)."""


class Unimplemented(XlapyError, NotImplementedError):
    """A feature that is declared but not built yet; always names the op or feature."""


class CompileError(XlapyError):
    """A backend could not compile a module."""


class CollectiveError(XlapyError):
    """A collective could not complete: missing participant, timeout, mismatched shapes."""


class CheckFailure(XlapyError):
    """A `check.expect_*` op found a mismatch."""
