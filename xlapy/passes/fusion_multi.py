"""Multi-output fusion: one kernel computing several results that share a loop.

* producer-consumer: a reduce kernel C reading kernel P, where P also has other users, takes
  P in and outputs P's value too (P's loop is C's loop; memory is read once, not twice);
* siblings: two kernels reading the same large operand and with the same loop size merge.
A merge is skipped when any other path joins the two kernels (it would make a cycle).
"""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.ir import Computation, Instruction, Module
from xlapy.ops.core import GetTupleElementAttrs, ParameterAttrs
from xlapy.passes.fusion_decision import REDUCE_OPS, FusionDecision, is_loop_fusible
from xlapy.passes.fusion_op import FusionAttrs, FusionKind
from xlapy.passes.pass_base import Pass, sort_instructions
from xlapy.types import Shape


def outputs(f: Instruction) -> list[Instruction]:
    """The fused computation's results (a multi-output fusion's root tuple elements)."""
    root = f.called[0].root
    assert root is not None
    if f.attrs.kind is FusionKind.MULTI_OUTPUT:
        return list(root.operands)
    return [root]


def loop_elements(f: Instruction) -> int:
    n = 0
    for i in f.called[0].instructions if f.opcode == "fusion" else [f]:
        if i.opcode in REDUCE_OPS:
            n = max(n, i.operands[0].shape.num_elements)
        elif i.shape.is_array:
            n = max(n, i.shape.num_elements)
    return n


def is_kernel(i: Instruction) -> bool:
    if i.opcode == "fusion":
        return True
    return (i.opcode in REDUCE_OPS or is_loop_fusible(i)) and i.opcode != "constant"


def has_reduce(i: Instruction) -> bool:
    body = i.called[0].instructions if i.opcode == "fusion" else [i]
    return any(x.opcode in REDUCE_OPS for x in body)


def ancestors(roots: Sequence[Instruction]) -> set[int]:
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        stack.extend(x.operands)
    return seen


def wrap(module: Module, comp: Computation, i: Instruction) -> Instruction:
    """`i` as a one-instruction fusion (so merging only deals with fusions)."""
    if i.opcode == "fusion":
        return i
    from xlapy.passes.fusion import clone_cluster

    fused, operands = clone_cluster([i], i, f"fused_{i.opcode}")
    module.add_computation(fused)
    kind = FusionKind.INPUT if i.opcode in REDUCE_OPS else FusionKind.LOOP
    f = comp.add(Instruction("fusion", operands, i.shape, FusionAttrs(kind), [fused], "fusion"))
    i.replace_all_uses_with(f)
    comp.remove(i)
    sort_instructions(comp)
    return f


class MultiOutputFusion(Pass):
    """Producer-consumer and sibling multi-output fusion (see the module docstring)."""

    name = "multi-output-fusion"

    def __init__(self, max_outputs: int = 4) -> None:
        self.max_outputs = max_outputs
        self.decisions: list[FusionDecision] = []

    def run(self, module: Module) -> bool:
        from xlapy.passes.fusion import kernel_computations

        changed = False
        for comp in kernel_computations(module):
            while self._one_merge(module, comp):
                changed = True
        return changed

    def _one_merge(self, module: Module, comp: Computation) -> bool:
        for c in comp.post_order():
            if not (is_kernel(c) and has_reduce(c)):
                continue
            for p in dict.fromkeys(c.operands):
                if not is_kernel(p) or len(p.users) < 2 or not self._gte_only(p):
                    continue
                if loop_elements(p) != loop_elements(c) or has_reduce(p):
                    continue
                others = [o for o in c.operands if o is not p]
                if id(p) in ancestors(others):
                    continue
                self._merge(module, comp, p, c, "producer-consumer: the reduce reads the "
                            "producer, which has other users; one pass over memory")
                return True
        for x in comp.post_order():
            users = [u for u in dict.fromkeys(x.users) if is_kernel(u) and self._gte_only(u)]
            if x.shape.is_array and x.shape.num_elements < 1024:
                continue
            for a_i, a in enumerate(users):
                for b in users[a_i + 1:]:
                    if loop_elements(a) != loop_elements(b):
                        continue
                    if id(a) in ancestors([b]) or id(b) in ancestors([a]):
                        continue
                    self._merge(module, comp, a, b, f"siblings reading %{x.name}")
                    return True
        return False

    def _gte_only(self, f: Instruction) -> bool:
        if f.opcode == "fusion" and f.attrs.kind is FusionKind.MULTI_OUTPUT:
            return all(u.opcode == "get_tuple_element" for u in f.users)
        return True

    def _merge(self, module: Module, comp: Computation, a: Instruction, b: Instruction,
               reason: str) -> Instruction:
        """One fusion computing b's outputs then a's; b may read a."""
        a, b = wrap(module, comp, a), wrap(module, comp, b)
        if len(outputs(a)) + len(outputs(b)) > self.max_outputs:
            return b
        self.decisions.append(FusionDecision(a.name, b.name, True, "multi-output " + reason))
        fused = Computation("fused_multi_output")
        params: dict[int, Instruction] = {}
        operands: list[Instruction] = []

        def param_for(o: Instruction) -> Instruction:
            if id(o) not in params:
                n = len(operands)
                params[id(o)] = fused.add(Instruction("parameter", [], o.shape,
                                                      ParameterAttrs(n, o.shape), (),
                                                      f"param_{n}"))
                operands.append(o)
            return params[id(o)]

        a_out = _clone_body(fused, a, [param_for(o) for o in a.operands])
        b_args = []
        for o in b.operands:
            if o is a:
                b_args.append(a_out[0])
            elif o.opcode == "get_tuple_element" and o.operands[0] is a:
                b_args.append(a_out[o.attrs.index])
            else:
                b_args.append(param_for(o))
        b_out = _clone_body(fused, b, b_args)
        outs = b_out + a_out
        fused.root = fused.add(Instruction("tuple", outs, Shape.tuple([o.shape for o in outs]),
                                           name="tuple"))
        module.add_computation(fused)
        f = comp.add(Instruction("fusion", operands, fused.root.shape,
                                 FusionAttrs(FusionKind.MULTI_OUTPUT), [fused], "fusion"))
        f.meta["fusion_reasons"] = (list(a.meta.get("fusion_reasons", []))
                                    + list(b.meta.get("fusion_reasons", [])) + [reason])
        for old, offset in ((b, 0), (a, len(b_out))):
            if old.attrs.kind is FusionKind.MULTI_OUTPUT:
                for u in list(old.users):
                    if u.parent is None:
                        continue
                    g = comp.add(Instruction("get_tuple_element", [f], u.shape,
                                             GetTupleElementAttrs(offset + u.attrs.index)))
                    u.replace_all_uses_with(g)
                    comp.remove(u)
            else:
                g = comp.add(Instruction("get_tuple_element", [f], old.shape,
                                         GetTupleElementAttrs(offset)))
                old.replace_all_uses_with(g)
            if old is b:
                comp.remove(b)
        if not a.users:
            comp.remove(a)
        sort_instructions(comp)
        return f


def _clone_body(dst: Computation, f: Instruction, args: list[Instruction]) -> list[Instruction]:
    """Clone fusion `f`'s body into `dst` with its parameters bound to `args`; its outputs."""
    body = f.called[0]
    mapping: dict[int, Instruction] = {id(p): args[p.parameter_number] for p in body.parameters}
    for i in body.instructions:
        if i.opcode == "parameter":
            continue
        ops = [mapping[id(o)] for o in i.operands]
        mapping[id(i)] = dst.add(Instruction(i.opcode, ops, i.shape, i.attrs, i.called, i.name,
                                             i.meta))
    return [mapping[id(o)] for o in outputs(f)]
