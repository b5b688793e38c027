"""reduce_window of complex elements under an adding reducer (jnp.cumsum of a complex array,
a complex average pool) as reduce_windows of its real and imaginary parts, joined by
`complex`.

Complex addition adds the parts, each on its own, so every output's parts are the parts'
windows folded in the same order: the same bits as the complex fold (XLA CPU's too, its
cumulative order included: backends/cpu/cumulative_emit.py). The cpu backend compiles
real windows; a complex one ran on the interpreter.
"""

from __future__ import annotations

from xlapy.ir import Computation, Instruction
from xlapy.passes.algebraic_rules_shape import single_op
from xlapy.passes.hlo_builder import Emitter, scalar_reducer
from xlapy.passes.pass_base import ComputationPass
from xlapy.types import ElementType

_PART = {ElementType.C64: ElementType.F32, ElementType.C128: ElementType.F64}


def splits(instr: Instruction) -> bool:
    """Whether `instr` is a reduce_window of one complex operand under an adding reducer."""
    red = single_op(instr) if instr.opcode == "reduce_window" else None
    return red is not None and red[0] == "add" and instr.shape.element_type in _PART


class ComplexWindows(ComputationPass):
    """reduce_window(x: complex, init, add) => complex(reduce_window(real x, real init, add),
    reduce_window(imag x, imag init, add))."""

    name = "complex-windows"

    def run_on_computation(self, comp: Computation) -> bool:
        assert self.module is not None
        changed = False
        for instr in [i for i in comp.instructions if splits(i)]:
            e = Emitter(comp)
            x, init = instr.operands
            part = _PART[instr.shape.element_type]
            add = scalar_reducer(self.module, "add", part, f"complex_windows_add_{part.hlo_name}")
            halves = [e.op("reduce_window", e.op(p, x), e.op(p, init), called=[add],
                           **vars(instr.attrs)) for p in ("real", "imag")]
            comp.replace_instruction(instr, e.op("complex", *halves))
            changed = True
        return changed


__all__ = ["ComplexWindows", "splits"]
