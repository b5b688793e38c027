"""One fuzz input through a front door: parse, verify, run on the interpreter; classified.

Outcomes: `ok` (ran), `error` (an XlapyError: the contract for bad input), `skipped` (parsed
and verified, not run: a process grid, `?` dimensions, parameters that are not arrays, or
values over RUN_LIMIT_BYTES), `run_timeout` (a program that legitimately runs long, e.g. a
mutated loop bound), and failures `fail:<Kind>(<phase>)`: any other exception, a
RecursionError, a MemoryError, or a parse/verify taking longer than the parse deadline.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.fuzz.deadline import Hang, deadline
from xlapy.cli.main import entry_functions, verify_module_lenient
from xlapy.errors import XlapyError
from xlapy.ir import Module
from xlapy.types import Shape

ROOT = Path(__file__).parents[3] / "shared" / "conformance" / "stablehlo-interpret"
RUN_LIMIT_BYTES = 1 << 26
_CHECK_LINE = re.compile(r"^\s*check\.[^\n]*$", re.M)


@dataclass
class Outcome:
    kind: str
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.kind.startswith("fail:")


def stablehlo_corpus() -> list[str]:
    from xlapy.stablehlo import split_chunks

    out = []
    for path in sorted(ROOT.glob("*.mlir")):
        out += [c.text for c in split_chunks(path.read_text()) if "func.func" in c.text]
    return out


def hlo_corpus() -> list[str]:
    """The conformance programs printed as HLO text by xlapy (those that import and print)."""
    from xlapy.hlo_text import print_hlo_module
    from xlapy.stablehlo import parse_module

    out = []
    for text in stablehlo_corpus():
        text = _CHECK_LINE.sub("", text)  # check ops have no HLO form
        try:
            module = parse_module(text)
            names = entry_functions(module, None)
            if module.entry is None and names:  # test files: the first test function
                module.entry = module.get(names[0])
                module.remove_unreachable()
            out.append(print_hlo_module(module))
        except XlapyError:
            continue
    return out


def parse(front: str, text: str) -> Module:
    if front == "hlo_text":
        from xlapy.hlo_text import parse_hlo_module

        return parse_hlo_module(text, "fuzz.hlo")
    from xlapy.hlo_text import is_hlo_text
    from xlapy.stablehlo import parse_module

    is_hlo_text(text)
    return parse_module(text, "fuzz.mlir")


def _bytes(shape: Shape) -> int:
    if shape.is_tuple:
        return sum(_bytes(s) for s in shape.tuple_shapes)
    if shape.is_token:
        return 0
    return shape.num_elements * max(1, shape.dtype.itemsize)


def _runnable(module: Module) -> bool:
    if module.num_replicas * module.num_partitions > 1:
        return False
    for comp in module.computations:
        for inst in comp.instructions:
            if not inst.shape.is_token and _bytes(inst.shape) > RUN_LIMIT_BYTES:
                return False
            if any(d is None for s in [inst.shape] if s.is_array for d in s.dimensions):
                return False
            if getattr(inst.shape, "dynamic", None):
                return False
    return True


def _run(module: Module) -> None:
    from xlapy.interpreter import Interpreter, RuntimeState

    for name in entry_functions(module, None):
        comp = module.get(name)
        args = [np.zeros(p.shape.dimensions, p.shape.dtype) for p in comp.parameters]
        runtime = RuntimeState()
        runtime.hooks["print"] = lambda text: None
        Interpreter(runtime).run(comp, args)


def check(front: str, text: str, parse_s: float = 10, run_s: float = 2) -> Outcome:
    phase = "parse"
    try:
        with deadline(parse_s):
            module = parse(front, text)
            phase = "verify"
            verify_module_lenient(module)
        if not _runnable(module) or any(
                not p.shape.is_array for n in entry_functions(module, None)
                for p in module.get(n).parameters):
            return Outcome("skipped")
        phase = "run"
        try:
            with deadline(run_s):
                _run(module)
        except Hang:
            return Outcome("run_timeout")
    except XlapyError as e:
        return Outcome("error", f"{type(e).__name__}: {str(e).splitlines()[0]}")
    except Hang:
        return Outcome(f"fail:Hang({phase})")
    except Exception as e:  # noqa: BLE001 - every other exception is what the fuzzer hunts
        return Outcome(f"fail:{type(e).__name__}({phase})",
                       "".join(traceback.format_exception(e, limit=-6)))
    return Outcome("ok")
