"""HloDCE: drop instructions nobody uses (keeping effects) and computations nobody calls."""

from __future__ import annotations

from xlapy.ir import Computation, Module
from xlapy.passes.pass_base import ComputationPass, op_has_side_effects, pure_custom_call


class DeadCodeElimination(ComputationPass):
    """Removes unused, effect-free instructions; then unreachable computations."""

    name = "dce"

    def __init__(self, remove_computations: bool = True) -> None:
        self.remove_computations = remove_computations

    def run(self, module: Module) -> bool:
        changed = super().run(module)
        if self.remove_computations and module.entry is not None:
            changed |= module.remove_unreachable()
        return changed

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for instr in reversed(list(comp.instructions)):
            if (instr.users or instr is comp.root or instr.opcode == "parameter"
                    or (op_has_side_effects(instr) and not pure_custom_call(instr))):
                continue
            comp.remove(instr)
            changed = True
        return changed
