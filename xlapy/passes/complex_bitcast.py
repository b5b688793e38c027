"""bitcast_convert between complex types as bit casts of their parts.

A complex element is stored as its two parts, real first (numpy's and XLA's layout), so a
complex tensor of shape S holds the same bits as a part-type tensor of shape S + [2]. A
complex-to-complex bitcast_convert (the spec allows one; complex <-> real is rejected by the
verifier, C2) is therefore: the parts stacked on a new minor dimension (real, imag: bit
exact), a bitcast_convert of that real tensor to the result's part type (which splits or
joins the minor dimension, little-endian), and the result rebuilt with `complex` from the
two halves of its minor dimension. Every step is one the cpu backend compiles.
"""

from __future__ import annotations

from xlapy.ir import Computation, Instruction
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass
from xlapy.types import ElementType

_PART = {ElementType.C64: ElementType.F32, ElementType.C128: ElementType.F64}


def _pairs(e: Emitter, x: Instruction) -> Instruction:
    """x: c[S] -> its parts as f[S, 2] (real, imag)."""
    dims = x.shape.dimensions
    cols = [e.reshape(e.op(op, x), shape=dims + (1,)) for op in ("real", "imag")]
    return e.concatenate(*cols, dimension=len(dims))


def _from_pairs(e: Emitter, f: Instruction) -> Instruction:
    """f[S, 2] -> complex(f[..., 0], f[..., 1]) : c[S]."""
    dims = f.shape.dimensions
    rank = len(dims)

    def half(k: int) -> Instruction:
        s = e.slice(f, start_indices=(0,) * (rank - 1) + (k,), limit_indices=dims[:-1] + (k + 1,),
                    strides=(1,) * rank)
        return e.reshape(s, shape=dims[:-1])

    return e.complex(half(0), half(1))


def lower_complex_bitcast(comp: Computation, instr: Instruction) -> Instruction:
    """The part-wise form of a complex bitcast_convert (added to `comp`)."""
    e = Emitter(comp)
    (x,) = instr.operands
    if x.shape == instr.shape:
        return x
    part = _PART[instr.shape.element_type]
    return _from_pairs(e, e.bitcast_convert(_pairs(e, x), new_element_type=part))


def is_complex_bitcast(instr: Instruction) -> bool:
    return instr.opcode == "bitcast_convert" and instr.shape.is_array \
        and instr.shape.element_type in _PART and instr.operands[0].shape.element_type in _PART


class ComplexBitcast(ComputationPass):
    """bitcast_convert(c -> c') => complex(halves of bitcast_convert(parts of c))."""

    name = "complex-bitcast"

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for instr in [i for i in comp.instructions if is_complex_bitcast(i)]:
            comp.replace_instruction(instr, lower_complex_bitcast(comp, instr))
            changed = True
        return changed


__all__ = ["ComplexBitcast", "is_complex_bitcast", "lower_complex_bitcast"]
