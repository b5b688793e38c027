"""The `interpreter` backend: verify, then evaluate the module with the reference interpreter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xlapy.backends import register_backend
from xlapy.interpreter import Interpreter, RuntimeState
from xlapy.ir import Module
from xlapy.verify import verify_module


class InterpreterExecutable:
    """A compiled program for the interpreter: the verified module, run per call."""

    backend_name = "interpreter"

    def __init__(self, module: Module) -> None:
        self.module = module

    def run(self, args: Sequence[Any], runtime: RuntimeState | None = None,
            process: Any = None) -> Any:
        """Evaluate the entry on interpreter values; returns an interpreter value."""
        return Interpreter(runtime, process).run_module(self.module, args)


class InterpreterBackend:
    name = "interpreter"

    def compile(self, module: Module, options: dict[str, Any] | None = None
                ) -> InterpreterExecutable:
        module = module.clone()
        verify_module(module)
        return InterpreterExecutable(module)


register_backend("interpreter", InterpreterBackend)
