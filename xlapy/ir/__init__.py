"""Layer 3: the op-agnostic HLO graph: Module > Computation > Instruction."""

from xlapy.ir.computation import Computation, make_instruction
from xlapy.ir.instruction import Instruction
from xlapy.ir.module import Module

__all__ = ["Computation", "Instruction", "Module", "make_instruction"]
