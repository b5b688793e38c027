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


class CompiledProgram:
    """`exe(*arrays)` runs the entry; several results come back as a tuple."""

    def __init__(self, module: Module, backend: str) -> None:
        self.module = module
        self.backend = backend
        self._exe = get_backend(backend).compile(module, None)

    def __call__(self, *args: Any) -> Any:
        entry = self.module.entry_computation()
        if len(args) != len(entry.parameters):
            raise XlapyError(f"{entry.name} takes {len(entry.parameters)} argument(s), got "
                             f"{len(args)}")
        values = [a if isinstance(a, tuple) else np.asarray(a) for a in args]
        return self._exe.run(values)

    def as_text(self, generic: bool = False) -> str:
        from xlapy.stablehlo import print_module

        return print_module(self.module, generic=generic)

    def __repr__(self) -> str:
        return f"<CompiledProgram {self.module.name} on {self.backend}>"


def compile(program: Any, backend: str = "interpreter", entry: str | None = None
            ) -> CompiledProgram:  # noqa: A001 - the public name
    """Compile StableHLO text, a path to a .mlir file, a Module or an XlaComputation.

    Text (or a file) starting with `HloModule` is XLA's HLO text (`xlapy.hlo_text`)."""
    from xlapy.hlo_text import is_hlo_text, parse_hlo_module
    from xlapy.stablehlo import parse_module

    if isinstance(program, Module):
        module = program
    elif hasattr(program, "module") and isinstance(program.module, Module):
        module = program.module
    elif isinstance(program, str) and is_hlo_text(program):
        module = parse_hlo_module(program, "<string>")
    elif isinstance(program, Path) or (isinstance(program, str) and "\n" not in program
                                       and program.endswith((".mlir", ".txt", ".hlo"))):
        path = Path(program)
        text = path.read_text()
        module = (parse_hlo_module(text, str(path)) if is_hlo_text(text)
                  else parse_module(text, str(path), entry))
    elif isinstance(program, str):
        module = parse_module(program, "<string>", entry)
    else:
        raise XlapyError(f"cannot compile a {type(program).__name__}: expected StableHLO text, "
                         "a path, a Module or an XlaComputation")
    if module.entry is None:
        raise XlapyError(f"module {module.name} has no entry function (name one with entry=)")
    return CompiledProgram(module, backend)


__all__: Sequence[str] = ["CompiledProgram", "compile"]
