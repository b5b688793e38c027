"""Programs for the AOT tests: conformance chunks with their check ops turned into results
(the checked values are what the object computes), compiled and compared against the
interpreter on the same rewritten function."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xlapy.ir import Computation, Instruction, Module
from xlapy.types import Shape


@dataclass
class Case:
    """One function to compile: its id, module, computation (rewritten) and arguments."""

    cid: str
    module: Module
    comp: Computation
    args: list[Any]
    #: check.expect_serialized_eq as (result index of its operand, probe_id, iteration):
    #: the object's results for that probe (xlapy/aot/probe.py) must hold that value.
    serialized: list[tuple[int, str, int]] = field(default_factory=list)

    @property
    def probe_capacity(self) -> int:
        """Values kept per probe: enough for every iteration a check reads."""
        return 1 + max((it for _, _, it in self.serialized), default=0)


def checks_as_results(comp: Computation,
                      serialized: list[tuple[int, str, int]] | None = None) -> bool:
    """Rewrite `comp` in place: every check.* op is dropped and its operands become the
    function's results (a root tuple). False when there is nothing to check. Each
    expect_serialized_eq is appended to `serialized` (see Case)."""
    checked: list[Instruction] = []
    for instr in list(comp.instructions):
        if instr.opcode == "check.expect_serialized_eq" and serialized is not None:
            serialized.append((len(checked), instr.attrs.probe_id, instr.attrs.iteration))
        if instr.opcode.startswith("check."):
            checked.extend(o for o in instr.operands if o.shape.is_array)
    if not checked:
        return False
    for instr in reversed(list(comp.instructions)):
        if instr.opcode.startswith("check.") and not instr.users:
            if instr is comp.root:
                comp.root = None
            comp.remove(instr)
    old = comp.root
    root = comp.add(Instruction("tuple", checked, Shape.tuple([o.shape for o in checked]),
                                name="aot_results"))
    comp.root = root
    comp.multi_result = True
    if old is not None and not old.users and old.opcode == "tuple" and not old.operands:
        comp.remove(old)
    return True


def conformance_cases(chunks: list[tuple[str, str, int]]) -> list[Case]:
    """Every entry function of the chunks that checks something, rewritten."""
    from xlapy.cli.main import entry_functions, parse_module, verify_module_lenient

    out = []
    for cid, text, offset in chunks:
        try:
            module = parse_module(text, cid.split(":")[0], None, offset, None)
            verify_module_lenient(module)
        except Exception:  # noqa: BLE001 - chunks that are expected not to parse
            continue
        for name in entry_functions(module, None):
            comp = module.get(name)
            serialized: list[tuple[int, str, int]] = []
            if checks_as_results(comp, serialized):
                out.append(Case(f"{cid}@{name}", module, comp, [], serialized))
    return out
