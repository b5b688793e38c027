"""Reductions over a short last dimension as element-wise folds (the interpreter's order).

An image's channels (max - min over [16, 224, 224, 3]: hsv's value range) made a row kernel
whose rows are 3 elements long: per row a loop and its setup, 4.2 ms against XLA's 1.9. A
reduce over a last dimension of at most SHORT elements is written as the fold the
interpreter computes for it (ops/reduction.fold_last_axis: init, then each element left to
right), one slice per element: an element-wise kernel over the result's shape, vectorized
along its own last dimension, with the same bits. Dots contracting at most SHORT elements
(jnp.dot(image, [0.299, 0.587, 0.114]): BLAS with k = 3, 1.95x XLA's time) become such a
reduce of a broadcast product first (small_dots.rewrite), f32/f64 only as there.
"""

from __future__ import annotations

import math

from xlapy.backends.cpu import small_dots
from xlapy.backends.cpu.reduce_emit import reducer_op
from xlapy.ir import Computation, Instruction, Module
from xlapy.passes.fusion_decision import EXPENSIVE
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass, replace_each
from xlapy.types import ElementType

#: The longest last dimension (contraction) folded element by element.
SHORT = 8


def short_reduce(instr: Instruction) -> bool:
    """A single-input reduce of its operand's last dimension only, at most SHORT long."""
    if instr.opcode != "reduce" or reducer_op(instr) is None:
        return False
    x = instr.operands[0]
    r = x.shape.rank
    return r >= 2 and tuple(instr.attrs.dimensions) == (r - 1,) and \
        0 < x.shape.dimensions[-1] <= SHORT and instr.shape.is_array and \
        not broadcast_back(instr)


def broadcast_back(instr: Instruction, depth: int = 8) -> bool:
    """Whether the reduce's result (through ops on its elements) is broadcast back over its
    operand's shape: a normalization (softmax's max and sum), which the row kernel computes
    once per row and the fold would recompute per element. Not through a transcendental op
    (an n-body step's r2 ** 1.5 broadcast back over [n, n, 3]: the row kernel computed the
    pow once per row of 3 in scalar code, 1.1 ms for 256 bodies; folded, the pow gets a
    buffer in lanes, fusion_plan.SHORT_ROW, 0.2 ms)."""
    full = tuple(instr.operands[0].shape.dimensions)
    n = instr.shape.num_elements
    seen: set[int] = set()
    todo = [(instr, 0)]
    while todo:
        v, d = todo.pop()
        for u in v.users:
            if id(u) in seen or not u.shape.is_array:
                continue
            seen.add(id(u))
            if u.opcode == "broadcast_in_dim" and tuple(u.shape.dimensions) == full:
                return True
            if u.shape.num_elements == n and d < depth and u.opcode not in EXPENSIVE:
                todo.append((u, d + 1))
    return False


def narrow_dot(d: Instruction) -> bool:
    """An f32/f64 dot of an array with a vector of at most SHORT elements (the weighted sum
    of each row) into at least 1024 outputs; other narrow dots keep their routes (outer
    products, skinny GEMMs, batch chains)."""
    if d.opcode != "dot_general" or d.attrs.algorithm is not None or not d.shape.is_array:
        return False
    lhs, rhs = d.operands
    et = d.shape.element_type
    k = math.prod(lhs.shape.dimensions[c] for c in d.attrs.lhs_contracting_dimensions)
    vector = (rhs.shape.rank == 1 and not d.attrs.rhs_batching_dimensions) or (
        lhs.shape.rank == 1 and not d.attrs.lhs_batching_dimensions)
    return (lhs.shape.element_type == rhs.shape.element_type == et
            and et in (ElementType.F32, ElementType.F64) and 0 < k <= SHORT and vector
            and len(d.attrs.lhs_contracting_dimensions) == 1
            and d.shape.num_elements >= 1024)


def unroll(comp: Computation, instr: Instruction) -> Instruction:
    """init op x[..., 0] op x[..., 1] ... (left to right) in the reduce's shape."""
    e = Emitter(comp)
    x, init = instr.operands
    op = reducer_op(instr)
    assert op is not None
    dims = list(instr.shape.dimensions)
    n = x.shape.dimensions[-1]
    acc = e.bcast(init, dims, [])
    for c in range(n):
        part = e.slice(x, start_indices=(0,) * (len(dims)) + (c,),
                       limit_indices=(*dims, c + 1), strides=(1,) * (len(dims) + 1))
        acc = e.op(op, acc, e.reshape(part, shape=tuple(dims)))
    return acc


class ShortReductions(ComputationPass):
    """Dots with a short contraction as reduces, reduces of a short last dimension as
    element-wise folds (module docstring)."""

    name = "short-reductions"

    def run_on_computation(self, comp: Computation) -> bool:
        module: Module | None = self.module
        assert module is not None
        changed = replace_each(comp, [i for i in comp.instructions if narrow_dot(i)],
                               lambda d: small_dots.rewrite(module, comp, d))
        return replace_each(comp, [i for i in comp.instructions if short_reduce(i)],
                            lambda i: unroll(comp, i)) or changed


__all__ = ["SHORT", "ShortReductions", "narrow_dot", "short_reduce", "unroll"]
