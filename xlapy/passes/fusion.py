"""Instruction fusion (loop, reduce-input, dot-output) and multi-output fusion.

Kernels grow from their roots (consumers first, as XLA's InstructionFusion visits them): a
kernel absorbs operands while `decide` allows it, preferring producers whose every user is
already inside (no duplication) and duplicating only cheap ones. Every decision is recorded
with its reason in `decisions` (and on the fusion instruction's `meta["fusion_reasons"]`).
Clusters then become `fusion` instructions calling a fused computation; originals that other
users still need stay (duplication) and DCE drops the rest. Because every kernel input is an
ancestor of the kernel's root in the original graph, no decision can create a cycle.

`MultiOutputFusion` then merges a producer kernel into a reduce kernel that reads it when
the producer has other users too (softmax's exp and its sum: one pass instead of two), and
sibling kernels that read the same large input.
"""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.ir import Computation, Instruction, Module
from xlapy.ops.core import GetTupleElementAttrs, ParameterAttrs
from xlapy.passes.dce import DeadCodeElimination
from xlapy.passes.fusion_decision import (
    EXPENSIVE,
    OUTPUT_OPS,
    REDUCE_OPS,
    FusionDecision,
    can_root,
    is_cheap,
    is_elementwise,
    is_fusible,
)
from xlapy.passes.fusion_op import FusionAttrs, FusionKind
from xlapy.passes.pass_base import Pass, sort_instructions
from xlapy.types import Shape

#: Ops whose called computations run like ordinary code (their bodies get fused too).
CONTROL_FLOW = frozenset({"while", "call", "case", "if"})


def kernel_computations(module: Module) -> list[Computation]:
    """The entry and the bodies it reaches through control flow (not reducers/comparators)."""
    if module.entry is None:
        return []
    out: list[Computation] = []
    stack = [module.entry]
    while stack:
        c = stack.pop()
        if c in out:
            continue
        out.append(c)
        for i in c.instructions:
            if i.opcode in CONTROL_FLOW:
                stack.extend(i.called)
    return out


class _Cluster:
    def __init__(self, root: Instruction) -> None:
        self.root = root
        self.members: list[Instruction] = [root]
        self.ids = {id(root)}
        self.duplicated: set[int] = set()
        self.has_reduce = root.opcode in REDUCE_OPS
        self.has_output = root.opcode in OUTPUT_OPS
        self.loop_elements = _loop_elements(root)
        self.reasons: list[FusionDecision] = []

    def add(self, p: Instruction, duplicated: bool) -> None:
        self.members.append(p)
        self.ids.add(id(p))
        if duplicated:
            self.duplicated.add(id(p))
        self.has_reduce |= p.opcode in REDUCE_OPS
        self.has_output |= p.opcode in OUTPUT_OPS
        self.loop_elements = max(self.loop_elements, _loop_elements(p))

    @property
    def kind(self) -> FusionKind:
        if self.has_reduce:
            return FusionKind.INPUT
        if self.has_output:
            return FusionKind.OUTPUT
        return FusionKind.LOOP


def _loop_elements(i: Instruction) -> int:
    """Elements the kernel's loop visits for `i`: a reduce loops over its input."""
    if i.opcode in REDUCE_OPS:
        return i.operands[0].shape.num_elements
    return i.shape.num_elements if i.shape.is_array else 0


def _epilogue_op(i: Instruction) -> bool:
    """Element-wise, a constant, or a splat (broadcast of a scalar): no data reuse."""
    if i.opcode == "broadcast_in_dim":
        return i.operands[0].shape.rank == 0
    return is_elementwise(i) or i.opcode == "constant"


def _dims(i: Instruction) -> tuple[int, ...]:
    return i.shape.dimensions if i.shape.is_array else ()


class InstructionFusion(Pass):
    """Forms loop / input / output fusions in the entry and control-flow bodies."""

    name = "fusion"

    def __init__(self) -> None:
        self.decisions: list[FusionDecision] = []

    def run(self, module: Module) -> bool:
        changed = False
        for comp in kernel_computations(module):
            changed |= self.fuse_computation(module, comp)
        if changed:
            DeadCodeElimination(remove_computations=False).run(module)
        return changed

    # ---- clustering -------------------------------------------------------------------------
    def fuse_computation(self, module: Module, comp: Computation) -> bool:
        member_of: dict[int, list[_Cluster]] = {}
        clusters: list[_Cluster] = []
        for instr in reversed(comp.post_order()):
            if not can_root(instr):
                continue
            if id(instr) in member_of and not self._outside_users(instr, None, member_of):
                continue  # fully absorbed by the kernels of its users
            k = _Cluster(instr)
            self._grow(k, member_of)
            if len(k.members) > 1:
                clusters.append(k)
                for m in k.members:
                    member_of.setdefault(id(m), []).append(k)
        for k in clusters:
            self._materialize(module, comp, k)
        if clusters:
            sort_instructions(comp)
        return bool(clusters)

    def _outside_users(self, p: Instruction, k: _Cluster | None,
                       member_of: dict[int, list[_Cluster]]) -> list[Instruction]:
        """Users of `p` that need its own value: not in `k`, nor in a kernel holding `p`."""
        out = []
        for u in p.users:
            if k is not None and id(u) in k.ids:
                continue
            if any(id(p) in c.ids for c in member_of.get(id(u), [])):
                continue
            out.append(u)
        if p.parent is not None and p.parent.root is p:
            out.append(p)
        return out

    def _grow(self, k: _Cluster, member_of: dict[int, list[_Cluster]]) -> None:
        final: dict[int, FusionDecision] = {}
        while True:
            cands: list[Instruction] = []
            seen: set[int] = set()
            for m in k.members:
                for o in m.operands:
                    if id(o) not in k.ids and id(o) not in seen:
                        seen.add(id(o))
                        cands.append(o)
            progressed = False
            for allow_dup in (False, True):
                for p in cands:
                    d = self.decide(p, k, member_of, allow_dup)
                    if d is None:
                        continue
                    final[id(p)] = d
                    if d.fused:
                        k.add(p, d.duplicated)
                        progressed = True
                        break
                if progressed:
                    break
            if not progressed:
                break
        k.reasons = list(final.values())
        self.decisions.extend(k.reasons)

    def decide(self, p: Instruction, k: _Cluster, member_of: dict[int, list[_Cluster]],
               allow_dup: bool) -> FusionDecision | None:
        """Fuse `p` into kernel `k`? None means "only by duplication; ask again later"."""
        c = k.root.name

        def no(reason: str) -> FusionDecision:
            return FusionDecision(p.name, c, False, reason)

        if p.opcode == "parameter":
            return no("a parameter is a kernel input")
        if not is_fusible(p):
            return no(f"{p.opcode} is not fusible")
        if any(m.opcode in OUTPUT_OPS and p in m.operands for m in k.members):
            return no("dot/convolution operands are materialized (each element is read many "
                      "times)")
        outside = self._outside_users(p, k, member_of)
        if p.opcode in REDUCE_OPS or p.opcode in OUTPUT_OPS:
            what = "reduce" if p.opcode in REDUCE_OPS else p.opcode
            if k.has_reduce or k.has_output:
                return no(f"the kernel already has a {'reduce' if k.has_reduce else 'dot'}; "
                          f"one {what} per kernel")
            if _dims(k.root) != _dims(p):
                return no(f"{what} result is broadcast or reshaped in the consumer; fusing "
                          "would recompute it per element")
            if not all(_epilogue_op(m) for m in k.members):
                return no(f"only an element-wise epilogue fuses with a {what}")
            if outside:
                return no(f"{what} has {len(outside)} user(s) outside the kernel and is never "
                          "duplicated")
            return FusionDecision(p.name, c, True, f"element-wise epilogue of the {what}")
        if p.opcode in EXPENSIVE and p.shape.num_elements < k.loop_elements:
            return no(f"expensive {p.opcode} would be recomputed for each of "
                      f"{k.loop_elements // max(p.shape.num_elements, 1)} broadcast elements")
        if not outside:
            return FusionDecision(p.name, c, True,
                                  f"all {len(p.users)} user(s) are inside the kernel")
        if not allow_dup:
            return None
        if is_cheap(p):
            return FusionDecision(p.name, c, True, f"cheap {p.opcode} duplicated for "
                                  f"{len(outside)} user(s) outside the kernel", True)
        return no(f"{p.opcode} is expensive and has {len(outside)} user(s) outside the "
                  "kernel; not duplicated")

    # ---- materialization ----------------------------------------------------------------------
    def _materialize(self, module: Module, comp: Computation, k: _Cluster) -> Instruction:
        position = {id(i): n for n, i in enumerate(comp.post_order())}
        members = sorted(k.members, key=lambda m: position.get(id(m), -1))
        fused, operands = clone_cluster(members, k.root, f"fused_{k.kind.value}")
        module.add_computation(fused)
        fusion = comp.add(Instruction("fusion", operands, k.root.shape, FusionAttrs(k.kind),
                                      [fused], "fusion"))
        fusion.meta["fusion_reasons"] = [str(d) for d in k.reasons]
        k.root.replace_all_uses_with(fusion)
        return fusion


def clone_cluster(members: Sequence[Instruction], root: Instruction | Sequence[Instruction],
                  name: str) -> tuple[Computation, list[Instruction]]:
    """A computation cloning `members` (topologically ordered); outside operands become
    parameters. Returns it and the outside operands (the fusion's operands)."""
    fused = Computation(name)
    ids = {id(m) for m in members}
    mapping: dict[int, Instruction] = {}
    params: dict[int, Instruction] = {}
    operands: list[Instruction] = []
    for m in members:
        ops = []
        for o in m.operands:
            if id(o) in ids:
                ops.append(mapping[id(o)])
                continue
            if id(o) not in params:
                n = len(operands)
                params[id(o)] = fused.add(Instruction("parameter", [], o.shape,
                                                      ParameterAttrs(n, o.shape), (),
                                                      f"param_{n}"))
                operands.append(o)
            ops.append(params[id(o)])
        mapping[id(m)] = fused.add(Instruction(m.opcode, ops, m.shape, m.attrs, m.called,
                                               m.name, m.meta))
    if isinstance(root, Instruction):
        fused.root = mapping[id(root)]
    else:
        elems = [mapping[id(r)] for r in root]
        fused.root = fused.add(Instruction("tuple", elems, Shape.tuple([e.shape for e in elems]),
                                           name="tuple"))
    return fused, operands


def count_kernels(comp: Computation) -> int:
    """Kernels a backend would launch: every instruction but parameters, constants, tuples,
    get_tuple_element and (free) reshapes."""
    free = {"parameter", "constant", "tuple", "get_tuple_element", "reshape", "after_all"}
    return sum(1 for i in comp.instructions if i.opcode not in free)


from xlapy.passes.fusion_multi import MultiOutputFusion  # noqa: E402,F401

__all__ = ["InstructionFusion", "MultiOutputFusion", "clone_cluster", "count_kernels",
           "kernel_computations", "memory_passes", "GetTupleElementAttrs"]


def memory_passes(comp: Computation, min_elements: int) -> int:
    """Kernels that read or write an array of at least `min_elements` elements: each is one
    pass over (big) memory."""
    free = {"parameter", "constant", "tuple", "get_tuple_element", "reshape", "after_all"}

    def big(s: Shape) -> bool:
        return any(leaf.is_array and leaf.num_elements >= min_elements for leaf in s.leaves())

    return sum(1 for i in comp.instructions if i.opcode not in free
               and (big(i.shape) or any(big(o.shape) for o in i.operands)))
