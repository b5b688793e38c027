"""The `interpreter` backend: verify, then evaluate the module with the reference interpreter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xlapy.backends import register_backend
from xlapy.backends.ownership import CHECK, COPY, own, result_plan
from xlapy.interpreter import Interpreter, RuntimeState
from xlapy.ir import Instruction, Module
from xlapy.verify import verify_module


class InterpreterExecutable:
    """A compiled program for the interpreter: the verified module, run per call."""

    backend_name = "interpreter"

    def __init__(self, module: Module) -> None:
        self.module = module
        #: Results the caller owns (ownership.py): op kernels may return views of their
        #: operands, constants are the module's own literals.
        self._plan = (result_plan(module.entry_computation().root, _mode)
                      if module.entry is not None else None)
        self._constants = [i.attrs.literal.to_value() for c in module.computations
                           for i in c.instructions if i.opcode == "constant"]

    def run(self, args: Sequence[Any], runtime: RuntimeState | None = None,
            process: Any = None) -> Any:
        """Evaluate the entry on interpreter values; returns an interpreter value."""
        value = Interpreter(runtime, process).run_module(self.module, args)
        return own(value, self._plan, lambda: [*args, *self._constants])


def _mode(instr: Instruction) -> str:
    return COPY if instr.opcode in ("parameter", "constant") else CHECK


class InterpreterBackend:
    name = "interpreter"

    def compile(self, module: Module, options: dict[str, Any] | None = None
                ) -> InterpreterExecutable:
        module = module.clone()
        verify_module(module)
        return InterpreterExecutable(module)


register_backend("interpreter", InterpreterBackend)
