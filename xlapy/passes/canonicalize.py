"""Reshape/transpose/broadcast canonicalization: ops that only add or move size-1 dimensions
become reshapes (a bitcast in row-major layout), which later passes treat as free."""

from __future__ import annotations

from xlapy.ir import Computation, Instruction
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass


def _transpose_is_reshape(i: Instruction) -> bool:
    dims = i.operands[0].shape.dimensions
    moved = [p for p in i.attrs.permutation if dims[p] != 1]
    return moved == sorted(moved)


def _broadcast_is_reshape(i: Instruction) -> bool:
    op = i.operands[0].shape
    bd = i.attrs.broadcast_dimensions
    return (op.num_elements == i.shape.num_elements and list(bd) == sorted(bd)
            and all(op.dimensions[k] == i.shape.dimensions[d] for k, d in enumerate(bd)))


class ReshapeCanonicalizer(ComputationPass):
    """transpose / broadcast_in_dim that keep the element order => reshape."""

    name = "reshape-canonicalizer"

    def run_on_computation(self, comp: Computation) -> bool:
        e = Emitter(comp)
        changed = False
        for instr in list(comp.instructions):
            if not instr.shape.is_array:
                continue
            is_t = (instr.opcode == "transpose" and _transpose_is_reshape(instr)
                    and list(instr.attrs.permutation) != list(range(instr.shape.rank)))
            is_b = (instr.opcode == "broadcast_in_dim" and _broadcast_is_reshape(instr)
                    and instr.shape.rank != instr.operands[0].shape.rank)
            if not (is_t or is_b):
                continue
            new = e.reshape(instr.operands[0], shape=instr.shape.dimensions)
            instr.replace_all_uses_with(new)
            if instr is not comp.root and not instr.users:
                comp.remove(instr)
            changed = True
        return changed
