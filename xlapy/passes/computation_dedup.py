"""HloComputationDeduplicator: calls of structurally identical computations share one.

JAX lowers a function called twice (two `jax.random.gamma` draws in a beta sample) to one
private function, which inlining and the loop passes turn into two copies of every loop
body and condition; each copy was planned, emitted and compiled to the same machine code
again. Sharing one computation lets the cpu backend build it once (branch_loop.sharing).
Computations compare as CSE compares reducers (`cse.computation_key`: opcodes, shapes,
attributes, operand positions, callees by structure; side effects never merge), with their
`multi_result` flag and the instructions' meta (but source locations) besides.
"""

from __future__ import annotations

from typing import Any

from xlapy.ir import Computation, Module
from xlapy.passes.cse import computation_key
from xlapy.passes.pass_base import Pass


class ComputationDeduplicator(Pass):
    """Points each call at the first computation identical to its callee."""

    name = "computation-deduplicator"

    def run(self, module: Module) -> bool:
        memo: dict[int, Any] = {}
        first: dict[Any, Computation] = {}
        chosen: dict[int, Computation] = {}  # (a callee's key built once, however often called)
        changed = False
        for comp in module.post_order():
            for instr in comp.instructions:
                if not instr.called:
                    continue
                called = [chosen.get(id(c)) or chosen.setdefault(id(c), _shared(c, memo, first))
                          for c in instr.called]
                if any(a is not b for a, b in zip(called, instr.called)):
                    instr.called = called
                    changed = True
        if changed:
            module.remove_unreachable()
        return changed


def _shared(comp: Computation, memo: dict[int, Any], first: dict[Any, Computation]
            ) -> Computation:
    """The first computation seen with `comp`'s key (`comp` itself if none, or unkeyed)."""
    key = computation_key(comp, memo)
    if key is None:
        return comp
    try:
        meta = tuple((n, k, repr(v)) for n, i in enumerate(comp.post_order())
                     for k, v in sorted(i.meta.items()) if k != "loc")
    except TypeError:  # (keys that do not sort: left alone)
        return comp
    return first.setdefault((key, comp.multi_result, meta), comp)


__all__ = ["ComputationDeduplicator"]
