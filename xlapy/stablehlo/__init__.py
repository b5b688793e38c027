"""The StableHLO front door: parse MLIR text (generic and pretty forms), import it into the
HLO IR, print modules back as StableHLO, and the check / interpreter dialects."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from xlapy.ir import Module
from xlapy.phases import phase
from xlapy.stablehlo import check as _check  # noqa: F401  (registers check.* / interpreter.*)
from xlapy.stablehlo import chlo as _chlo  # noqa: F401  (registers chlo.*)
from xlapy.stablehlo import sdy as _sdy
from xlapy.stablehlo.importer import import_module
from xlapy.stablehlo.parser import Parser, parse_text
from xlapy.stablehlo.symbols import check_called_computations
from xlapy.types import Shape

_sdy.register_syntax()

_SPLIT = re.compile(r"^// -----[ \t]*$", re.M)


def parse_module(text: str, filename: str = "<input>", entry: str | None = None,
                 line_offset: int = 0, arg_shapes: list[Shape] | None = None) -> Module:
    """Parse and import one module (raises ParseError with file:line:col on bad input).

    `arg_shapes` gives the entry's `?` argument dimensions (shape-polymorphic modules)."""
    with phase("parse"):
        p = Parser(text, filename, line_offset)
        node = p.parse_module()
        check_called_computations(node, p.lex)
    with phase("import"):
        return import_module(node, p.lex, entry, arg_shapes)


#: The first bytes of MLIR's bytecode format (jax.export's `mlir_module_serialized`).
MLIR_BYTECODE_MAGIC = b"ML\xefR"


def program_text(data: bytes, where: str) -> str:
    """A program file's bytes as text: MLIR bytecode and bytes that are not UTF-8 are clear
    errors (they had surfaced as a UnicodeDecodeError from deep inside)."""
    from xlapy.errors import XlapyError

    if data.startswith(MLIR_BYTECODE_MAGIC):
        raise XlapyError(f"{where}: MLIR bytecode, which xlapy does not read: give it the text "
                         "form (jax.export: exported.mlir_module(), not "
                         "mlir_module_serialized; or `stablehlo-translate --deserialize`)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise XlapyError(f"{where}: not UTF-8 text (byte {e.start}: {data[e.start]:#04x}); "
                         "expected StableHLO or HLO text") from None


def read_program(path: str | Path) -> str:
    """The text of a StableHLO / HLO file (program_text), or a clear error naming it."""
    from xlapy.errors import XlapyError

    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise XlapyError(f"cannot read program file {str(path)!r}: {e.strerror}") from e
    return program_text(data, str(path))


def has_dynamic_entry(text: str, entry: str | None = None) -> bool:
    """Does the module's entry function take `?`-dimension arguments?"""
    from xlapy.stablehlo.specialize import has_dynamic_args

    if "?" not in text:  # a `?` dimension is written with one; no second parse of a big module
        return False
    node = Parser(text).parse_module()
    names = {f.name: f for f in node.funcs}
    name = entry or ("main" if "main" in names else
                     node.funcs[0].name if len(node.funcs) == 1 else None)
    return name in names and has_dynamic_args(names[name])


@dataclass(frozen=True)
class Chunk:
    """One `// -----`-separated part of a file: its text and first line (0-based offset)."""

    text: str
    line_offset: int
    index: int


def split_chunks(text: str) -> list[Chunk]:
    out: list[Chunk] = []
    pos, line = 0, 0
    for i, m in enumerate(_SPLIT.finditer(text)):
        part = text[pos:m.start()]
        out.append(Chunk(part, line, i))
        line += part.count("\n")
        pos = m.end()
    out.append(Chunk(text[pos:], line, len(out)))
    return out


def print_module(module: Module, generic: bool = False) -> str:
    from xlapy.stablehlo.printer import print_module as _print

    return _print(module, generic=generic)


__all__ = ["Chunk", "parse_module", "parse_text", "print_module", "split_chunks"]
