"""Where an instruction came from, so run-time errors can point at the user's source.

Front doors stamp `instr.meta["loc"]` with a `SourceLoc`: the position of the op in the text
that was read (StableHLO or HLO text) and, when the text carries debug info (MLIR `loc(...)`,
HLO `metadata={op_name=... source_file=... source_line=...}`), the frame it names: what JAX
records as the Python line that made the op. Passes that rewrite an instruction may drop it;
an error then names the instruction alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xlapy.errors import Span

if TYPE_CHECKING:
    from xlapy.ir.instruction import Instruction


class LazySpan:
    """A Span made when first read: the StableHLO importer stamps every op with its place in
    the text, and only an error message ever reads one (making each Span up front was a
    tenth of the import). Reads as the Span (`str`, `.line`, `.col`, ...)."""

    __slots__ = ("_make", "_span")

    def __init__(self, make: Callable[[], Span]) -> None:
        self._make: Callable[[], Span] | None = make
        self._span: Span | None = None

    def resolve(self) -> Span:
        if self._span is None:
            assert self._make is not None
            self._span, self._make = self._make(), None
        return self._span

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # (its own slots, before they are set: copy, pickle)
            raise AttributeError(name)
        return getattr(self.resolve(), name)

    def __reduce__(self) -> tuple[Any, ...]:
        """Copied or pickled as the Span itself (not the lexer and text it would be made from)."""
        return _same, (self.resolve(),)

    def __str__(self) -> str:
        return str(self.resolve())

    def __repr__(self) -> str:
        return repr(self.resolve())


def _same(span: Span) -> Span:
    return span


@dataclass(frozen=True)
class SourceLoc:
    """`span`: the op in the text read; `name`/`file`/`line`/`col`: its debug location."""

    span: Span | LazySpan | None = None
    name: str | None = None
    file: str | None = None
    line: int | None = None
    col: int | None = None

    def debug(self) -> str:
        """The debug location as `name at file:line:col` (empty when there is none)."""
        where = ""
        if self.file:
            where = self.file + "".join(f":{v}" for v in (self.line, self.col) if v)
        if self.name and where:
            return f"{self.name} at {where}"
        return self.name or where

    def __str__(self) -> str:
        parts = [str(self.span)] if self.span is not None else []
        if d := self.debug():
            parts.append(d)
        return "; ".join(parts)


def location_of(instr: Instruction) -> SourceLoc | None:
    loc = instr.meta.get("loc")
    return loc if isinstance(loc, SourceLoc) else None


def describe(instr: Instruction) -> str:
    """`%name = opcode at file:line:col (source)`, as far as known: for error messages."""
    text = f"%{instr.name} = {instr.opcode}"
    loc = location_of(instr)
    if loc is None:
        return text
    if loc.span is not None:
        text += f" at {loc.span}"
    if d := loc.debug():
        text += f" ({d})"
    return text


def locate_error(error: Exception, instr: Instruction) -> Exception:
    """`error` (raised while running `instr`) with the instruction named once, at the end of
    its message: the innermost instruction wins, so an error inside a while body names the
    body's op, not the loop."""
    if getattr(error, "instruction", None) is not None:
        return error
    where = f"in {describe(instr)}"
    if len(error.args) == 1 and isinstance(error.args[0], str):
        error.args = (f"{error.args[0]}\n  {where}",)
    else:
        error.add_note(where)
    error.instruction = instr  # type: ignore[attr-defined]
    return error


def stamp(instrs: list[Instruction], loc: SourceLoc) -> None:
    """Give `loc` to each of `instrs` that has none (what one source op expanded into)."""
    for instr in instrs:
        instr.meta.setdefault("loc", loc)
