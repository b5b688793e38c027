"""TupleSimplifier: tuple(gte(T, 0), ..., gte(T, n-1)) => T; gte(tuple(A...), k) => A_k."""

from __future__ import annotations

from xlapy.ir import Computation, Instruction
from xlapy.passes.pass_base import ComputationPass


def _whole_tuple(t: Instruction) -> Instruction | None:
    ops = t.operands
    if not ops or any(o.opcode != "get_tuple_element" for o in ops):
        return None
    src = ops[0].operands[0]
    if len(src.shape.tuple_shapes) != len(ops) or src.shape != t.shape:
        return None
    ok = all(o.operands[0] is src and o.attrs.index == k for k, o in enumerate(ops))
    return src if ok else None


class TupleSimplifier(ComputationPass):
    name = "tuple-simplifier"

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for instr in list(comp.post_order()):
            if instr.parent is not comp:
                continue
            new = None
            if instr.opcode == "tuple" and not (instr is comp.root and comp.multi_result):
                new = _whole_tuple(instr)
            elif instr.opcode == "get_tuple_element" and instr.operands[0].opcode == "tuple":
                new = instr.operands[0].operands[instr.attrs.index]
            if new is None:
                continue
            instr.replace_all_uses_with(new)
            if instr is not comp.root and not instr.users:
                comp.remove(instr)
            changed = True
        return changed
