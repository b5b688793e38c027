"""Expanders: ops the CPU backend does not implement, rewritten as plain HLO.

* logistic(x) => 1 / (1 + exp(-x))  (XLA's LogisticExpander; not bit-exact: the rounding of
  the expansion differs from a fused logistic by a few ulps, tolerance 1e-6 relative);
* batch_norm_inference => (x - mean) * (scale * rsqrt(var + eps)) + offset with the
  per-feature vectors broadcast along `feature_index` (tolerance 1e-5 relative).
Expanders declare `reassociating = True`: semantics tests compare with those tolerances.
"""

from __future__ import annotations

from xlapy.ir import Computation, Instruction
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass


class LogisticExpander(ComputationPass):
    name = "logistic-expander"
    reassociating = True

    def run_on_computation(self, comp: Computation) -> bool:
        e = Emitter(comp)
        changed = False
        for i in [i for i in comp.instructions if i.opcode == "logistic"]:
            if i.shape.element_type.is_complex:
                continue
            x = i.operands[0]
            one = e.splat(1, i.shape)
            new = e.divide(one, e.add(e.splat(1, i.shape), e.exponential(e.negate(x))))
            _replace(comp, i, new)
            changed = True
        return changed


class BatchNormExpander(ComputationPass):
    name = "batchnorm-expander"
    reassociating = True

    def run_on_computation(self, comp: Computation) -> bool:
        e = Emitter(comp)
        changed = False
        for i in [i for i in comp.instructions if i.opcode == "batch_norm_inference"]:
            x, scale, offset, mean, var = i.operands
            dims, f = x.shape.dimensions, i.attrs.feature_index
            eps = e.splat(i.attrs.epsilon, var.shape)
            factor = e.multiply(scale, e.rsqrt(e.add(var, eps)))

            bm, bf, bo = (e.bcast(v, dims, (f,)) for v in (mean, factor, offset))
            new = e.add(e.multiply(e.subtract(x, bm), bf), bo)
            _replace(comp, i, new)
            changed = True
        return changed


def _replace(comp: Computation, old: Instruction, new: Instruction) -> None:
    old.replace_all_uses_with(new)
    if old is not comp.root and not old.users:
        comp.remove(old)
