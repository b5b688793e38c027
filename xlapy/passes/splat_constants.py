"""Splat constants as broadcasts, so that a backend computes them instead of storing them.

A `dense<1.0> : tensor<800000000xf32>` is held as one element (`Literal.is_splat`); a backend
that gives every array constant a buffer would materialize it at compile time (3.2 GB here).
As `broadcast_in_dim` of a scalar constant the cpu backend fuses it into its consumers (or
writes it once per call when it is a result), and no compile-time buffer exists.
"""

from __future__ import annotations

from xlapy.ir import Computation
from xlapy.passes.pass_base import ComputationPass, constant_like


class SplatToBroadcast(ComputationPass):
    """constant(splat v : T[dims]) => broadcast_in_dim(constant(v : T[]))."""

    name = "splat-to-broadcast"

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for instr in list(comp.instructions):
            if instr.opcode != "constant" or not instr.shape.is_array:
                continue
            lit = instr.attrs.literal
            if not lit.is_splat:
                continue
            new = constant_like(comp, lit.to_numpy().reshape(-1)[0], instr.shape)
            comp.replace_instruction(instr, new)
            changed = True
        return changed


__all__ = ["SplatToBroadcast"]
