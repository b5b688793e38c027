"""Dynamic-shape ops whose sizes are known at compile time, as their static forms.

StableHLO's dynamic ops (dynamic_broadcast_in_dim, dynamic_reshape, dynamic_iota,
dynamic_pad, dynamic_gather, dynamic_conv, real_dynamic_slice) take sizes as operands; in
practice those operands are constants (or fold to constants: get_dimension_size of a static
dimension, arithmetic on them). Where every size operand folds and the static op they
describe yields exactly the declared result type, the op becomes that static op
(broadcast_in_dim, reshape, iota, pad, gather, convolution, slice), which backends compile;
get_dimension_size of a dimension that no set_dimension_size made dynamic becomes a constant.
Sizes known only at run time, or sizes that contradict the result type (the interpreter's
loud "dynamic shape not supported" error), keep the dynamic op.
"""

from __future__ import annotations

import numpy as np

from xlapy.ir import Computation, Instruction, make_instruction
from xlapy.ops.dynamic import DYNAMIC_OPS
from xlapy.passes.pass_base import ComputationPass, constant_like
from xlapy.stablehlo.specialize import fold

#: The opcodes this pass may rewrite.
REWRITTEN = frozenset(DYNAMIC_OPS) | {"get_dimension_size"}


def _static_form(instr: Instruction) -> Instruction | None:
    """The static op an all-constant-sizes dynamic op stands for (not yet added), else None."""
    op = DYNAMIC_OPS[instr.opcode]
    memo: dict[int, object] = {}
    sizes = [fold(instr.operands[i], memo) for i in op.size_operands]
    if any(s is None for s in sizes):
        return None
    shapes = [o.shape for o in instr.operands]
    try:
        static, shape = op.resolve(shapes, sizes, instr.attrs)
    except Exception:  # noqa: BLE001 - sizes the op rejects: keep it (its error at run time)
        return None
    if shape != instr.shape:
        return None
    data = [instr.operands[i] for i in op.data_operands]
    return make_instruction(op.static_op, data, static, name=op.static_op)


def _dimension_size(comp: Computation, instr: Instruction) -> Instruction | None:
    """get_dimension_size of a static dimension: the size as an s32 constant."""
    value = fold(instr)
    if value is None:
        return None
    return constant_like(comp, np.asarray(value).reshape(-1)[0], instr.shape)


class StaticShapes(ComputationPass):
    """dynamic_<op>(data, constant sizes) => <op>(data) where the sizes give the result type;
    get_dimension_size(static dimension) => constant."""

    name = "static-shapes"

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for instr in list(comp.instructions):
            if instr.opcode in DYNAMIC_OPS:
                new = _static_form(instr)
                if new is not None:
                    new = comp.add(new)
            elif instr.opcode == "get_dimension_size":
                new = _dimension_size(comp, instr)
            else:
                continue
            if new is None:
                continue
            comp.replace_instruction(instr, new)
            changed = True
        return changed


__all__ = ["REWRITTEN", "StaticShapes"]
