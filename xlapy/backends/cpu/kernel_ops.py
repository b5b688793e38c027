"""Which instructions a fused kernel computes (KernelEmitter: per output index, or as its
reduce root): the fusion plan's and the GPU backend's test of what joins a kernel."""

from __future__ import annotations

import numpy as np

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import elementwise_bits as ewb
from xlapy.backends.cpu import elementwise_complex as ewc
from xlapy.backends.cpu import elementwise_convert as ewconv
from xlapy.backends.cpu.index_emit import INDEX_OPS
from xlapy.backends.cpu.reduce_emit import reducer_op
from xlapy.ir import Instruction

#: Producers a kernel can generate per index (besides the element-wise table).
PRODUCERS = frozenset({"broadcast_in_dim", "reshape", "transpose", "slice", "reverse", "iota",
                       "convert", "compare", "select", "clamp", "constant"}) | INDEX_OPS


def _types_ok(instr: Instruction) -> bool:
    shapes = [instr.shape] + [o.shape for o in instr.operands]
    return all(s.is_array and s.element_type in ew.SUPPORTED for s in shapes)


def fusible(instr: Instruction) -> bool:
    """Whether a kernel can compute this instruction per output index (or as a reduce root)."""
    if ewc.involved(instr):
        return ewc.fusible(instr)
    if not _types_ok(instr):
        return False
    op = instr.opcode
    if op in PRODUCERS and op != "convert":
        return True
    if op == "convert":
        return ewconv.convert_supported(instr.operands[0].shape.element_type,
                                    instr.shape.element_type)
    if op == "reduce":
        return reducer_op(instr) is not None
    if op == "dynamic_iota":
        return static_dynamic_iota(instr)
    if op in ewb.OPS:
        return ewb.fusible(instr)
    return ew.supports(op, instr.operands[0].shape.element_type) if instr.operands else False


def static_dynamic_iota(instr: Instruction) -> bool:
    """A dynamic_iota whose output shape operand is a constant equal to its static result
    shape: an iota (any other shape is the interpreter's "dynamic shape" error, kept)."""
    size = instr.operands[0]
    if size.opcode != "constant":
        return False
    dims = np.asarray(size.attrs.literal.to_numpy()).reshape(-1)
    return tuple(int(d) for d in dims) == tuple(instr.shape.dimensions)


def row_reduce(instr: Instruction) -> bool:
    """A reduce over the last dimension (of a rank >= 2 value) with a simple reducer: a
    kernel can compute it per row, inside the loops over the leading dimensions
    (KernelEmitter's `rows`; softmax over the last axis of [B, H, L, L] scores)."""
    rank = instr.operands[0].shape.rank if instr.opcode == "reduce" else 0
    return (rank >= 2 and reducer_op(instr) is not None
            and tuple(instr.attrs.dimensions) == (rank - 1,))


def is_scalar_constant(instr: Instruction) -> bool:
    return instr.opcode == "constant" and instr.shape.is_array and instr.shape.num_elements == 1


__all__ = ["PRODUCERS", "fusible", "is_scalar_constant", "row_reduce",
           "static_dynamic_iota"]
