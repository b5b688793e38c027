"""Small loops inside loops, unrolled: a `while` with a known trip count of at most MAX_TRIP
(while_loop_simplifier.trip_count: `i < N`, i from a constant, +1 a step) in the body or
condition of another loop (or in a branch of a conditional there) becomes its body inlined
that many times.

A loop in a loop body made the outer loop a call into sub-executables on the cpu backend
(the native driver runs kernels, GEMMs and regions only), so the outer loop ran through
Python: a 100-step fori_loop around a 10-step one took 3.0 ms against XLA's 0.036, a
lax.scan of 8 steps inside a fori_loop 1.6 ms against 0.018. Unrolled, the outer body is
kernels and the outer loop native. The values are unchanged (the same ops in the same
order; the condition, which the trip count answers, is dropped). Bodies of more than
MAX_INSTRUCTIONS instructions in all once unrolled are left alone (compile time), as are
loops at the top level (the native driver runs those) and bodies with ops that fuse with
nothing (APART), which unrolling only copies.
"""

from __future__ import annotations

from xlapy.ir import Computation, Instruction, Module
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.inliner import inline_body
from xlapy.passes.pass_base import Pass, packed_state, sort_instructions
from xlapy.passes.while_loop_simplifier import trip_count

#: Most iterations unrolled.
MAX_TRIP = 16
#: Most body instructions times iterations.
MAX_INSTRUCTIONS = 1024
#: Ops every copy of an unrolled body keeps as a step of its own (nothing fuses across the
#: copies): a body with one stays a loop, which the native driver runs as a nested loop.
#: jnp.linalg.solve's pivot-permutation loop (16 steps of two scatters) unrolled into ~80
#: kernels: ~480 ms of a fori_loop's cold compile against ~130, the same run time.
APART = frozenset({"scatter", "custom_call", "sort", "fft"})


def inside_loops(module: Module) -> set[int]:
    """The computations run by a loop: its condition and body and whatever they call."""
    inside: set[int] = set()
    stack = [c for comp in module.post_order() for i in comp.instructions
             if i.opcode == "while" for c in i.called]
    while stack:
        c = stack.pop()
        if id(c) in inside:
            continue
        inside.add(id(c))
        stack.extend(cc for i in c.instructions for cc in i.called)
    return inside


def unrollable(w: Instruction) -> int | None:
    """The trip count of `w` if it is small and its body's root gives the next state."""
    n = trip_count(w)
    body = w.called[1]
    if n is None or not 0 < n <= MAX_TRIP or body.root is None or \
            len(body.instructions) * n > MAX_INSTRUCTIONS or \
            _has_apart(body):
        return None
    packed = packed_state(w)
    if (packed or len(w.operands) > 1) and body.root.opcode != "tuple":
        return None
    return n


def _has_apart(comp: Computation) -> bool:
    """Whether `comp` or a computation it calls has an APART op."""
    return any(i.opcode in APART or any(_has_apart(c) for c in i.called)
               for i in comp.instructions)


def unroll(comp: Computation, w: Instruction, n: int) -> Instruction:
    """The value of loop `w` (in `comp`) as n copies of its body, each fed the last's."""
    body = w.called[1]
    packed = packed_state(w)
    state = list(w.operands)
    for _ in range(n):
        root = inline_body(comp, body, state)
        spread = not packed and root.opcode == "tuple" and \
            (body.multi_result or len(w.operands) > 1)
        state = list(root.operands) if spread else [root]
    if packed or not w.shape.is_tuple:
        return state[0]
    return Emitter(comp).tuple(*state)


class NestedLoopUnroller(Pass):
    """Unrolls the small loops that loops run (module docstring)."""

    name = "nested-loop-unroller"

    def run(self, module: Module) -> bool:
        changed = False
        inside = inside_loops(module)
        for comp in module.post_order():
            if id(comp) not in inside:
                continue
            for w in [i for i in comp.instructions if i.opcode == "while"]:
                n = unrollable(w)
                if n is None:
                    continue
                w.replace_all_uses_with(unroll(comp, w, n))  # (the root too)
                if not w.users:
                    comp.remove(w)
                sort_instructions(comp)
                changed = True
        return changed


__all__ = ["NestedLoopUnroller", "unroll", "unrollable", "inside_loops", "MAX_TRIP",
           "MAX_INSTRUCTIONS"]
