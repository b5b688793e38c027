"""How a grid process runs its program: on the reference interpreter, or compiled by the cpu
backend once per distinct program and run by every process that has it (each run with its
own arena when they overlap: CpuExecutable takes a private state when its lock is held).
Collectives, channels and feeds are the executable's grid thunks: they call into the
process's grid handle as the interpreter's do."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xlapy.errors import XlapyError
from xlapy.interpreter import Interpreter, RuntimeState
from xlapy.ir import Computation

BACKENDS = ("interpreter", "cpu")


def program_runners(programs: Sequence[Computation], backend: str
                    ) -> list[Callable[[RuntimeState, Any, list[Any]], Any]]:
    """One `run(runtime, process, args)` per program; cpu compiles each distinct one once."""
    if backend not in BACKENDS:
        raise XlapyError(f"the process grid runs programs on {' or '.join(BACKENDS)}, "
                         f"not {backend!r}")
    if backend == "interpreter":
        return [lambda rt, proc, args, comp=comp: Interpreter(rt, proc).run(comp, args)
                for comp in programs]
    from xlapy.backends.cpu.executable import CpuExecutable

    compiled: dict[int, Any] = {}
    for comp in programs:
        if id(comp) not in compiled:
            compiled[id(comp)] = CpuExecutable(comp)
    exes = [compiled[id(comp)] for comp in programs]
    return [lambda rt, proc, args, exe=exe: exe.run_computation(args, rt, proc) for exe in exes]


__all__ = ["BACKENDS", "program_runners"]
