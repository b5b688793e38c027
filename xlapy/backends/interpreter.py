"""The `interpreter` backend: verify, then evaluate the module with the reference interpreter.

Options: `denormal` (`ftz`, the default, or `ieee`: xlapy.denormal), the mode every run uses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xlapy import denormal
from xlapy.backends import register_backend
from xlapy.backends.ownership import CHECK, COPY, own, result_plan
from xlapy.interpreter import Interpreter, RuntimeState
from xlapy.ir import Instruction, Module
from xlapy.verify import verify_module


class InterpreterExecutable:
    """A compiled program for the interpreter: the verified module, run per call."""

    backend_name = "interpreter"

    def __init__(self, module: Module, denormal_mode: str = denormal.FTZ) -> None:
        self.module = module
        self.denormal = denormal_mode
        #: Results the caller owns (ownership.py): op kernels may return views of their
        #: operands, constants are the module's own literals.
        self._plan = (result_plan(module.entry_computation().root, _mode)
                      if module.entry is not None else None)
        self._constants = [i.attrs.literal.to_value() for c in module.computations
                           for i in c.instructions if i.opcode == "constant"]

    def run(self, args: Sequence[Any], runtime: RuntimeState | None = None,
            process: Any = None) -> Any:
        """Evaluate the entry on interpreter values; returns an interpreter value."""
        with denormal.use(self.denormal):
            value = Interpreter(runtime, process).run_module(self.module, args)
        return own(value, self._plan, lambda: [*args, *self._constants])


def _mode(instr: Instruction) -> str:
    return COPY if instr.opcode in ("parameter", "constant") else CHECK


class InterpreterBackend:
    name = "interpreter"

    def compile(self, module: Module, options: dict[str, Any] | None = None
                ) -> InterpreterExecutable:
        mode = denormal.from_options(options)
        module = module.clone()
        verify_module(module)
        return InterpreterExecutable(module, mode)


register_backend("interpreter", InterpreterBackend)
