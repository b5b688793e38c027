"""HloCSE: one instruction for each (opcode, operands, attrs, callees, shape) computed twice.

Constants match on their exact bytes (so +0 and -0, or two NaN payloads, stay apart);
side-effecting ops (rng, custom calls, feeds) are never merged.
"""

from __future__ import annotations

from typing import Any

from xlapy.ir import Computation, Instruction
from xlapy.passes.pass_base import ComputationPass, op_has_side_effects
from xlapy.types import Shape


def cse_key(instr: Instruction) -> Any:
    """A hashable identity of what `instr` computes, or None when it must not be merged."""
    if instr.opcode == "parameter" or op_has_side_effects(instr):
        return None
    if instr.opcode == "constant":
        lit = instr.attrs.literal
        if not lit.shape.is_array:
            return None
        arr = lit.to_numpy()
        return ("constant", str(lit.shape), arr.dtype.str, arr.tobytes())
    try:
        hash(instr.attrs)
    except TypeError:
        return None
    return (instr.opcode, _shape_key(instr.shape), tuple([id(o) for o in instr.operands]),
            instr.attrs, tuple([id(c) for c in instr.called]))


def _shape_key(shape: Shape) -> Any:
    """The shape with its layout: a plain array shape itself (Shape equality is all there is
    to it then; its printed form, the key before, cost CSE a third of its time), any other
    its printed form (which shows the layouts, nested ones too)."""
    return shape if shape.layout is None and not shape.tuple_shapes else str(shape)


class CommonSubexpressionElimination(ComputationPass):
    """Replaces each instruction identical to an earlier one by that one."""

    name = "cse"

    def run_on_computation(self, comp: Computation) -> bool:
        seen: dict[Any, Instruction] = {}
        changed = False
        for instr in list(comp.post_order()):
            key = cse_key(instr)
            if key is None:
                continue
            try:
                first = seen.get(key)
            except TypeError:
                continue
            if first is None:
                seen[key] = instr
                continue
            instr.replace_all_uses_with(first)
            if instr is not comp.root and not instr.users:
                comp.remove(instr)
            changed = True
        return changed
