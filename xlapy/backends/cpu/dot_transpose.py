"""transpose(dot_general(A, B)) as dot_general(B, A): the dot writes the transposed value.

A training step's weight gradients come out of JAX as `transpose(dot_general(g, x))`
(contracting the batch): the dot wrote a 16 MB [1024, 4096] result that a transpose kernel
then read and wrote again. With the operands swapped, dot_general(B, A) (B's batch and
contracting dimensions first) has the result dimensions [batch, B's free, A's free]: exactly
the transpose's when its permutation keeps the batch dimensions and swaps the two free
groups. XLA's CPU compiler rewrites the same way (its optimized HLO has `dot(x, g)`).

The values are the same products summed over the same contraction; the order in which a
GEMM adds them may differ with the operand roles (OpenBLAS picks its kernels by shape), the
same freedom the backend's own GEMM routes take (gemm_f32, gemm_small, gemm_skinny), so this
is a backend pass, not one of the bit-exact simplifier's rules. Dots with a `dot_algorithm`
(whose operand precisions may differ) and dots read by others than the transpose stay.
"""

from __future__ import annotations

import dataclasses

from xlapy.ir import Computation, Instruction
from xlapy.passes.pass_base import ComputationPass


def swapped(t: Instruction) -> Instruction | None:
    """The dot_general(B, A) that computes transpose `t` of dot_general(A, B), or None."""
    if t.opcode != "transpose":
        return None
    d = t.operands[0]
    if d.opcode != "dot_general" or d.attrs.algorithm is not None or len(d.users) != 1:
        return None
    a = d.attrs
    lhs, rhs = d.operands
    nb = len(a.lhs_batching_dimensions)
    nl = lhs.shape.rank - nb - len(a.lhs_contracting_dimensions)
    nr = rhs.shape.rank - nb - len(a.rhs_contracting_dimensions)
    want = (*range(nb), *range(nb + nl, nb + nl + nr), *range(nb, nb + nl))
    if nl == 0 or nr == 0 or tuple(t.attrs.permutation) != want:
        return None
    attrs = dataclasses.replace(
        a, lhs_batching_dimensions=a.rhs_batching_dimensions,
        rhs_batching_dimensions=a.lhs_batching_dimensions,
        lhs_contracting_dimensions=a.rhs_contracting_dimensions,
        rhs_contracting_dimensions=a.lhs_contracting_dimensions,
        precision_config=tuple(reversed(a.precision_config)))
    return Instruction("dot_general", [rhs, lhs], t.shape, attrs, (), d.name)


class FoldDotTranspose(ComputationPass):
    """Rewrites transpose(dot_general(A, B)) as dot_general(B, A) (module docstring)."""

    name = "fold-dot-transpose"

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for t in [i for i in comp.instructions if i.opcode == "transpose"]:
            new = swapped(t)
            if new is None:
                continue
            dot = t.operands[0]
            comp.add(new)
            t.replace_all_uses_with(new)  # (the root too)
            for old in (t, dot):
                if old is not comp.root and not old.users:
                    comp.remove(old)
            changed = True
        return changed  # (ComputationPass sorts a changed computation)


__all__ = ["FoldDotTranspose", "swapped"]
