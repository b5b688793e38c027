"""Dot canonicalization: transposes folded into dot_general's dimension numbers.

dot_general(transpose(A, p), B) reads A directly with its batch/contracting dimensions
renumbered through p, when p keeps A's free dimensions in order (so the result is the same
array, bit for bit: the same products summed in the same order).
"""

from __future__ import annotations

import dataclasses

from xlapy.ir import Computation, Instruction
from xlapy.passes.pass_base import ComputationPass


def _fold(t: Instruction, batch: tuple[int, ...], contract: tuple[int, ...]
          ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    if t.opcode != "transpose":
        return None
    p = t.attrs.permutation
    free = [p[d] for d in range(t.shape.rank) if d not in batch and d not in contract]
    if free != sorted(free):
        return None
    return tuple(p[d] for d in batch), tuple(p[d] for d in contract)


class DotCanonicalizer(ComputationPass):
    name = "dot-canonicalizer"

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for instr in list(comp.instructions):
            if instr.opcode != "dot_general":
                continue
            a = instr.attrs
            lhs, rhs = instr.operands
            fl = _fold(lhs, a.lhs_batching_dimensions, a.lhs_contracting_dimensions)
            fr = _fold(rhs, a.rhs_batching_dimensions, a.rhs_contracting_dimensions)
            if fl is None and fr is None:
                continue
            if fl is not None:
                a = dataclasses.replace(a, lhs_batching_dimensions=fl[0],
                                        lhs_contracting_dimensions=fl[1])
                lhs = lhs.operands[0]
            if fr is not None:
                a = dataclasses.replace(a, rhs_batching_dimensions=fr[0],
                                        rhs_contracting_dimensions=fr[1])
                rhs = rhs.operands[0]
            new = comp.add(Instruction("dot_general", [lhs, rhs], instr.shape, a, (),
                                       instr.name))
            instr.replace_all_uses_with(new)
            if instr is not comp.root and not instr.users:
                comp.remove(instr)
            changed = True
        return changed
