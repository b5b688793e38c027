"""Scheduling: an instruction order that lowers peak memory (XLA's list scheduler).

The list scheduler repeatedly picks, among ready instructions, the one that frees the most
bytes (operands whose last unscheduled user it is) net of the bytes it allocates; side-effecting
instructions keep their relative order. The pass keeps whichever of the list schedule and the
current order has the smaller peak of live bytes (as buffer assignment measures it).
"""

from __future__ import annotations

from xlapy.ir import Computation, Instruction, Module
from xlapy.passes.buffer_assignment import VIEW_OPS, assign_buffers
from xlapy.passes.fusion import kernel_computations
from xlapy.passes.pass_base import Pass, array_bytes, op_has_side_effects


def peak_bytes(comp: Computation, order: list[Instruction]) -> int:
    return assign_buffers(comp, order, in_place=False).peak_live_bytes


def list_schedule(comp: Computation) -> list[Instruction]:
    instrs = comp.post_order()
    index = {id(i): n for n, i in enumerate(instrs)}
    deps: dict[int, set[int]] = {id(i): {id(o) for o in i.operands} for i in instrs}
    last_effect = None
    for i in instrs:
        if op_has_side_effects(i) and i.opcode != "parameter":
            if last_effect is not None:
                deps[id(i)].add(id(last_effect))
            last_effect = i
    users_left = {id(i): len({id(u) for u in i.users if id(u) in index}) for i in instrs}
    waiting = {id(i): len(deps[id(i)]) for i in instrs}
    dependents: dict[int, list[Instruction]] = {id(i): [] for i in instrs}
    for i in instrs:
        for d in deps[id(i)]:
            dependents[d].append(i)
    ready = [i for i in instrs if waiting[id(i)] == 0]
    order: list[Instruction] = []

    def score(i: Instruction) -> tuple[int, int]:
        freed = sum(array_bytes(o.shape) for o in set(i.operands)
                    if users_left[id(o)] == 1 and o.opcode not in ("parameter", "constant")
                    and o.opcode not in VIEW_OPS and o is not comp.root)
        alloc = 0 if i.opcode in VIEW_OPS | {"parameter", "constant"} else array_bytes(i.shape)
        return (freed - alloc, -index[id(i)])

    while ready:
        best = max(ready, key=score)
        ready.remove(best)
        order.append(best)
        for o in set(best.operands):
            users_left[id(o)] -= 1
        for d in dependents[id(best)]:
            waiting[id(d)] -= 1
            if waiting[id(d)] == 0:
                ready.append(d)
    return order


class MemorySchedule(Pass):
    """Reorders each kernel computation by the list scheduler when that lowers peak memory."""

    name = "schedule"

    def __init__(self) -> None:
        self.peaks: dict[str, tuple[int, int]] = {}

    def run(self, module: Module) -> bool:
        changed = False
        for comp in kernel_computations(module):
            current = list(comp.instructions)
            candidate = list_schedule(comp)
            before, after = peak_bytes(comp, current), peak_bytes(comp, candidate)
            self.peaks[comp.name] = (before, min(before, after))
            if after < before:
                comp.instructions = candidate
                changed = True
        return changed
