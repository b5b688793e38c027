"""CallInliner and map inlining: callee bodies pasted into the caller.

`call` (and `composite`, via its decomposition) become the callee's instructions with the
parameters replaced by the operands; a call of a several-result function becomes its root
tuple, whose get_tuple_element users TupleSimplifier folds (JAX's scan bodies call such
functions: inlined, the whole loop can run natively on cpu). A `map` whose computation is
scalar element-wise code becomes the same ops over whole arrays (constants broadcast to the
map's shape).

`fusion` instructions (XLA's optimized HLO: kLoop, kInput, kOutput and kCustom such as
`__ynn_fusion`, whose called computation is ordinary HLO) are inlined too: the backend's own
fusion planning then re-fuses the pasted ops as it fuses any other program, so XLA's fusion
boundaries never become interpreter calls. Every pipeline that forms fusions (cpu_pipeline)
runs this pass before its fusion passes.
"""

from __future__ import annotations

from xlapy.ir import Computation, Instruction, make_instruction
from xlapy.ops.shape import BroadcastInDimAttrs
from xlapy.passes.fusion_decision import is_elementwise
from xlapy.passes.pass_base import ComputationPass


def inline_body(caller: Computation, callee: Computation,
                args: list[Instruction]) -> Instruction:
    """Clone `callee` into `caller` with parameters bound to `args`; returns its root."""
    mapping = {id(p): args[p.parameter_number] for p in callee.parameters}
    for i in callee.post_order():
        if i.opcode == "parameter":
            continue
        mapping[id(i)] = caller.add(Instruction(i.opcode, [mapping[id(o)] for o in i.operands],
                                                i.shape, i.attrs, i.called, i.name, i.meta))
    assert callee.root is not None
    return mapping[id(callee.root)]


def _map_inlinable(comp: Computation) -> bool:
    return all(i.opcode in ("parameter", "constant") or (is_elementwise(i) and i.shape.rank == 0)
               for i in comp.instructions) and comp.root is not None and comp.root.shape.is_array


#: Opcodes whose called computation is pasted in place of the instruction.
INLINED = ("call", "composite", "fusion")


class CallInliner(ComputationPass):
    """Inlines `call`, `composite` (its decomposition), `fusion` and element-wise `map`
    instructions."""

    name = "call-inliner"

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        work = list(comp.instructions)
        while work:
            instr = work.pop()
            if instr.opcode not in INLINED and instr.opcode != "map":
                continue  # (before any walk: the ids below are taken per inlining, not per op)
            before = {id(i) for i in comp.instructions}
            if instr.opcode in INLINED:
                new = inline_body(comp, instr.called[0], list(instr.operands))
            elif instr.opcode == "map" and _map_inlinable(instr.called[0]):
                new = self._inline_map(comp, instr)
            else:
                continue
            instr.replace_all_uses_with(new)
            if instr is not comp.root and not instr.users:
                comp.remove(instr)
            # A pasted body may hold calls or fusions of its own (fused computations are not
            # rewritten by computation passes).
            work += [i for i in comp.instructions if id(i) not in before]
            changed = True
        return changed

    def _inline_map(self, comp: Computation, instr: Instruction) -> Instruction:
        return lift_elementwise(comp, instr.called[0], list(instr.operands),
                                tuple(instr.shape.dimensions))[0]


def lift_elementwise(comp: Computation, body: Computation, args: list[Instruction],
                     dims: tuple[int, ...]) -> list[Instruction]:
    """Scalar computation `body` (element-wise ops, constants) applied to arrays `args` of
    shape dims, pasted into `comp` (constants broadcast): its results, one per element of a
    tuple root (a variadic reducer's: short_reduce.unroll_variadic), else the root's."""
    mapping = {id(p): args[p.parameter_number] for p in body.parameters}
    for i in body.post_order():
        if i.opcode in ("parameter", "tuple"):
            continue
        if i.opcode == "constant":
            c = comp.add(Instruction("constant", [], i.shape, i.attrs, (), i.name))
            mapping[id(i)] = comp.add(make_instruction(
                "broadcast_in_dim", [c], BroadcastInDimAttrs(dims, ())))
            continue
        mapping[id(i)] = comp.add(make_instruction(
            i.opcode, [mapping[id(o)] for o in i.operands], i.attrs, (), i.name))
    root = body.root
    assert root is not None
    return [mapping[id(o)] for o in root.operands] if root.opcode == "tuple" else \
        [mapping[id(root)]]
