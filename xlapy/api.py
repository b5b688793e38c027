"""`xlapy.compile`: one call from StableHLO text, a file path, a Module or an XlaComputation
to an executable that takes and returns numpy arrays."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xlapy.backends import get_backend
from xlapy.errors import XlapyError
from xlapy.ir import Module
from xlapy.phases import Phases, no_gc, recording
from xlapy.types.literal import Token


class CompiledProgram:
    """`exe(*arrays)` runs the entry; several results come back as a tuple."""

    def __init__(self, module: Module, backend: str,
                 options: dict[str, Any] | None = None) -> None:
        self.module = module
        self.backend = backend
        #: Where the compile's time went (xlapy.phases; set by `compile`).
        self.phases: Phases | None = None
        self._exe = get_backend(backend).compile(module, options)

    def __call__(self, *args: Any) -> Any:
        entry = self.module.entry_computation()
        if len(args) != len(entry.parameters):
            raise XlapyError(f"{entry.name} takes {len(entry.parameters)} argument(s), got "
                             f"{len(args)}")
        # ndarrays as they are (a masked array keeps its mask for the argument check)
        # and the token as itself (np.asarray made it an object array nothing accepted)
        values = [a if isinstance(a, (tuple, np.ndarray, Token)) else np.asarray(a)
                  for a in args]
        return self._exe.run(values)

    def as_text(self, generic: bool = False) -> str:
        from xlapy.stablehlo import print_module

        return print_module(self.module, generic=generic)

    def __repr__(self) -> str:
        return f"<CompiledProgram {self.module.name} on {self.backend}>"


class PolymorphicProgram:
    """A module whose entry takes `?`-dimension arguments (JAX's shape-polymorphic export):
    imported and compiled once per argument-shape signature, on the first call with it."""

    def __init__(self, text: str, filename: str, entry: str | None, backend: str,
                 options: dict[str, Any] | None = None) -> None:
        self.options = options
        self.text = text
        self.filename = filename
        self.entry = entry
        self.backend = backend
        self._programs: dict[tuple[Any, ...], CompiledProgram] = {}

    def specialize(self, *args: Any) -> CompiledProgram:
        from xlapy.stablehlo import parse_module
        from xlapy.types import Shape

        arrays = [np.asarray(a) for a in args]
        key = tuple((a.dtype.str, a.shape) for a in arrays)
        prog = self._programs.get(key)
        if prog is None:
            shapes = [Shape.array(_element_type(a), a.shape) for a in arrays]
            module = parse_module(self.text, self.filename, self.entry, arg_shapes=shapes)
            prog = self._programs[key] = CompiledProgram(module, self.backend, self.options)
        return prog

    def __call__(self, *args: Any) -> Any:
        return self.specialize(*args)(*args)

    def as_text(self, generic: bool = False) -> str:
        return self.text


def _names_file(program: Any) -> bool:
    """A string is a path when it names an existing file, or when it does not look like a
    program yet ends like one (then reading it reports the missing file). Program text that
    ends in ".mlir" (a comment) is still text."""
    if not isinstance(program, str) or "\n" in program:
        return False
    try:
        if Path(program).is_file():
            return True
    except (OSError, ValueError):  # too long a name, a NUL byte: not a path
        return False
    looks_like_program = any(m in program for m in ("{", "(", "func", "module", "="))
    return not looks_like_program and program.endswith((".mlir", ".txt", ".hlo"))


def _polymorphic(text: str, entry: str | None) -> bool:
    from xlapy.stablehlo import has_dynamic_entry

    try:
        return has_dynamic_entry(text, entry)
    except XlapyError:
        return False  # parse errors are reported by parse_module


def _element_type(a: np.ndarray) -> Any:
    from xlapy.types import ElementType

    for t in ElementType:
        if t.is_array and t.dtype == a.dtype:
            return t
    raise XlapyError(f"no element type for numpy dtype {a.dtype}")


def compile(program: Any, backend: str | None = None, entry: str | None = None,
            options: dict[str, Any] | None = None) -> CompiledProgram:  # noqa: A001
    """Compile StableHLO text, a path to a .mlir file, a Module or an XlaComputation.

    Text (or a file) starting with `HloModule` is XLA's HLO text (`xlapy.hlo_text`).
    `options` go to the backend (cpu: `{"target": "x86-64-v3"}`, see backends/cpu/target.py).
    The result's `phases` say where the compile's time went (xlapy.phases)."""
    with recording() as rec, no_gc():
        prog = _compile(program, backend, entry, options)
    prog.phases = rec
    return prog


def _compile(program: Any, backend: str | None, entry: str | None,
             options: dict[str, Any] | None) -> CompiledProgram:
    from xlapy.backends import default_backend

    backend = backend or default_backend()
    from xlapy.hlo_text import is_hlo_text, parse_hlo_module
    from xlapy.stablehlo import parse_module, program_text, read_program

    if isinstance(program, Module):
        module = program
    elif hasattr(program, "module") and isinstance(program.module, Module):
        module = program.module
    elif isinstance(program, str) and is_hlo_text(program):
        module = parse_hlo_module(program, "<string>")
    elif isinstance(program, (Path, bytes, bytearray)) or _names_file(program):
        # a file, or a file's contents: text or a clear error
        raw = isinstance(program, (bytes, bytearray))
        where = "<bytes>" if raw else str(program)
        text = program_text(bytes(program), where) if raw else read_program(program)
        module = (parse_hlo_module(text, where) if is_hlo_text(text)
                  else parse_module(text, where, entry))
    elif isinstance(program, str) and _polymorphic(program, entry):
        return PolymorphicProgram(program, "<string>", entry, backend,  # type: ignore[return-value]
                                  options)
    elif isinstance(program, str):
        module = parse_module(program, "<string>", entry)
    else:
        raise XlapyError(f"cannot compile a {type(program).__name__}: expected StableHLO text "
                         "(str or bytes), a path, a Module or an XlaComputation")
    if module.entry is None:
        raise XlapyError(f"module {module.name} has no entry function (name one with entry=)")
    from xlapy.passes.spmd import has_shardings

    if has_shardings(module):  # GSPMD / Shardy shardings: partitioned, run on a grid
        from xlapy.distributed.sharded import ShardedProgram

        return ShardedProgram(module, backend, options)  # type: ignore[return-value]
    return CompiledProgram(module, backend, options)


__all__: Sequence[str] = ["CompiledProgram", "compile"]
