"""CondRootKernel: a while loop whose condition is a state element as it is (a `pred` the
body sets) gets a condition the native loop driver can run.

The driver reads the condition's result from a buffer fixed when the loop is prepared, so a
condition that only returns a state element, whose buffer the driver swaps or copies each
step, kept the loop on the Python path (native_loop.plan_native_while): JAX's GMRES
re-orthogonalizes in `while not_done: not_done = False` (its arithmetic hoisted out by
LICM), inside the Arnoldi loop, which then ran through Python as well: 3.5-4.6 ms a solve
against XLA's 0.55-0.7. Its root becomes `compare(p, false, NE)`, the same value in a
buffer of its own (a one-element kernel).
"""

from __future__ import annotations

from xlapy.ir import Module
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import Pass, sort_instructions
from xlapy.types import ElementType


class CondRootKernel(Pass):
    """Gives each while condition whose root is a parameter or get_tuple_element a compare."""

    name = "cond-root-kernel"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in module.computations:
            for w in comp.instructions:
                if w.opcode != "while":
                    continue
                cond = w.called[0]
                root = cond.root
                if root is None or root.opcode not in ("parameter", "get_tuple_element") or \
                        root.shape.rank != 0 or root.shape.element_type is not ElementType.PRED:
                    continue
                e = Emitter(cond)
                cond.root = e.cmp(root, e.const(False, ElementType.PRED), "NE")
                sort_instructions(cond)
                changed = True
        return changed


__all__ = ["CondRootKernel"]
