"""optimization_barrier as the identity it is (XLA's OptimizationBarrierExpander, which XLA:CPU
runs before its simplifications).

JAX's jax.checkpoint (remat) passes a backward pass's residuals through a barrier so that the
recomputed forward values are not merged with the saved ones (the point is memory). A native
backend that keeps the barrier computes the forward dots twice: an MLP gradient under
checkpoint ran 7 products where XLA, its barrier removed and the duplicates merged by CSE,
ran 5 (2.5 ms against 2.2). The values are the same: a barrier's results are its operands.
"""

from __future__ import annotations

from xlapy.ir import Computation, Instruction
from xlapy.passes.pass_base import ComputationPass


class OptimizationBarrierExpander(ComputationPass):
    """Replaces each optimization_barrier by its operand (one operand of the result's shape)
    or by a tuple of its operands (TupleSimplifier then reads them through)."""

    name = "optimization-barrier-expander"

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for b in [i for i in comp.instructions if i.opcode == "optimization_barrier"]:
            ops = list(b.operands)
            if len(ops) == 1 and ops[0].shape == b.shape:
                new = ops[0]
            else:
                new = comp.add(Instruction("tuple", ops, b.shape, None, (), b.name))
            comp.replace_instruction(b, new)
            changed = True
        return changed
