"""Conditionals whose index is a constant become their taken branch, inlined (XLA's
ConditionalSimplifier does the same).

JAX lowers some static choices as conditionals on constants: the gradient of
jnp.linalg.det picks a branch with `case` on the result of another `case` on a literal. Once
constant folding has turned the inner one's result into a constant, the outer one still ran
as a call into sub-executables (~10 us of Python a call on the cpu backend, and a loop
around it could not run natively). The taken branch is the one the op would run (a `case`
index outside [0, N) runs the last branch; an `if` runs branch 0 when true), so the values
are the same, side effects included (the branch runs once, the others never).
"""

from __future__ import annotations

import numpy as np

from xlapy.ir import Computation, Instruction
from xlapy.passes.inliner import inline_body
from xlapy.passes.pass_base import ComputationPass


def taken(instr: Instruction) -> int | None:
    """The branch a `case`/`if` with a constant index or predicate runs, else None."""
    sel = instr.operands[0] if instr.operands else None
    if instr.opcode not in ("case", "if") or sel is None or sel.opcode != "constant" or \
            not instr.called:
        return None
    value = np.asarray(sel.attrs.literal.to_numpy()).reshape(-1)
    if value.size != 1:
        return None
    if instr.opcode == "if":
        return 0 if bool(value[0]) else 1
    k = int(value[0])
    return k if 0 <= k < len(instr.called) else len(instr.called) - 1


class ConditionalSimplifier(ComputationPass):
    """Inlines the taken branch of each conditional with a constant index."""

    name = "conditional-simplifier"

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for instr in list(comp.instructions):
            k = taken(instr)
            if k is None:
                continue
            extra = list(instr.operands[1:])  # (branch k's operand, as the op passes it)
            new = inline_body(comp, instr.called[k], [extra[k]] if extra else [])
            instr.replace_all_uses_with(new)  # (the root too)
            comp.remove(instr)
            changed = True
        return changed


__all__ = ["ConditionalSimplifier", "taken"]
