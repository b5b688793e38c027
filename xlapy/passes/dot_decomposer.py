"""Dot decomposition (XLA's DotDecomposer): every dot_general in the canonical form

    lhs [batch..., M, K] x rhs [batch..., K, N] -> [batch..., M, N]

batch dimensions first and in order, all contracting dimensions collapsed into one K (the
last lhs / first non-batch rhs dimension), all free dimensions collapsed into one M (lhs) and
one N (rhs), each omitted when the operand has no free dimensions; a dot with no contracting
dimension gets K = 1. The operands are transposed to (batch, free, contracting) /
(batch, contracting, free) order and reshaped; the result is reshaped back to the original
dimensions. The same products are summed in the same order (row-major K), so results are
bit-exact with the interpreter, which computes every dot_general through this very form.
"""

from __future__ import annotations

import dataclasses
import math

from xlapy.ir import Computation, Instruction
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass


def is_canonical(instr: Instruction) -> bool:
    a = instr.attrs
    lhs, rhs = (o.shape for o in instr.operands)
    nb = len(a.lhs_batching_dimensions)
    batch = tuple(range(nb))
    if a.lhs_batching_dimensions != batch or a.rhs_batching_dimensions != batch:
        return False
    if len(a.lhs_contracting_dimensions) != 1 or len(a.rhs_contracting_dimensions) != 1:
        return False
    return (lhs.rank in (nb + 1, nb + 2) and rhs.rank in (nb + 1, nb + 2)
            and a.lhs_contracting_dimensions == (lhs.rank - 1,)
            and a.rhs_contracting_dimensions == (nb,))


def _arrange(e: Emitter, x: Instruction, order: list[int], dims: list[int]) -> Instruction:
    if order != list(range(len(order))):
        x = e.transpose(x, permutation=tuple(order))
    if tuple(dims) != tuple(x.shape.dimensions):
        x = e.reshape(x, shape=tuple(dims))
    return x


class DotDecomposer(ComputationPass):
    name = "dot-decomposer"

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for instr in [i for i in comp.instructions if i.opcode == "dot_general"]:
            if is_canonical(instr):
                continue
            self._canonicalize(comp, instr)
            changed = True
        return changed

    def _canonicalize(self, comp: Computation, instr: Instruction) -> None:
        a = instr.attrs
        lhs, rhs = instr.operands
        ls, rs = lhs.shape.dimensions, rhs.shape.dimensions
        lb, rb = list(a.lhs_batching_dimensions), list(a.rhs_batching_dimensions)
        lc, rc = list(a.lhs_contracting_dimensions), list(a.rhs_contracting_dimensions)
        lfree = [d for d in range(len(ls)) if d not in lb and d not in lc]
        rfree = [d for d in range(len(rs)) if d not in rb and d not in rc]
        batch = [ls[d] for d in lb]
        k = math.prod(ls[d] for d in lc)
        m, n = math.prod(ls[d] for d in lfree), math.prod(rs[d] for d in rfree)
        e = Emitter(comp)
        new_l = _arrange(e, lhs, lb + lfree + lc, batch + ([m] if lfree else []) + [k])
        new_r = _arrange(e, rhs, rb + rc + rfree, batch + [k] + ([n] if rfree else []))
        nb = len(batch)
        attrs = dataclasses.replace(
            a, lhs_batching_dimensions=tuple(range(nb)), rhs_batching_dimensions=tuple(range(nb)),
            lhs_contracting_dimensions=(new_l.shape.rank - 1,), rhs_contracting_dimensions=(nb,))
        dot = e.op("dot_general", new_l, new_r, **{f.name: getattr(attrs, f.name)
                                                  for f in dataclasses.fields(attrs)})
        out = dot if dot.shape.dimensions == instr.shape.dimensions else \
            e.reshape(dot, shape=tuple(instr.shape.dimensions))
        instr.replace_all_uses_with(out)
        if instr is not comp.root and not instr.users:
            comp.remove(instr)
