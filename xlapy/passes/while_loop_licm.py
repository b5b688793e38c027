"""While-loop invariant code motion (XLA's WhileLoopInvariantCodeMotion).

An instruction of a loop body is *invariant* when it has no side effects (nor anything it
calls) and every operand is a constant, a state element the body passes through unchanged,
or another invariant instruction. The pass computes the invariant values once, before the
loop, from the loop's initial state, and carries each one into the body as a new, passed
through state element.

Rules (as XLA's defaults, `hoist_constants=false`, `hoist_size_inflating_ops=false`):
* constants and the state elements themselves are never hoisted (nothing to save);
* a value is only carried into the loop when its bytes are not larger than the bytes of the
  state elements and constants it is computed from (a broadcast or pad that grows the loop
  state, or anything computed from broadcast constants alone, is recomputed inside
  instead; a broadcast is still hoisted when it only feeds other hoisted instructions),
  or when it is costly to compute (`COSTLY`: a transcendental, a divide, a reduction, a
  dot) from a state element: XLA's pass (jaxlib 0.10) has no size limit, and carries
  exp(1j t) as c64 from an f32 t, or exp(outer(t, t)) from a vector t;
* hoisted code runs even when the loop runs zero times. It is side-effect free, so results
  are unchanged; only work is wasted (XLA accepts the same trade).
Both the XLA form (one tuple-typed state) and the StableHLO form (N operands) are handled.
"""

from __future__ import annotations

from xlapy.ir import Computation, Instruction, Module
from xlapy.ops.core import GetTupleElementAttrs, ParameterAttrs
from xlapy.passes.fusion_decision import EXPENSIVE, OUTPUT_OPS, REDUCE_OPS
from xlapy.passes.pass_base import (
    Pass,
    array_bytes,
    op_has_side_effects,
    packed_state,
    pure_custom_call,
    region_callers,
    sort_instructions,
)
from xlapy.types import Shape

_NEVER = {"parameter", "constant", "after_all"}
#: Hoisted only with what they read: alone they save nothing.
_GLUE = {"get_tuple_element", "tuple"}
#: Carried even when larger than what they are computed from: reading the value each trip
#: costs less than computing it (a c64 exp(1j t) in a fori_loop: a sincos per element).
COSTLY = EXPENSIVE | REDUCE_OPS | OUTPUT_OPS | {"fft", "reduce_window", "sort"}


def _body_outputs(body: Computation, n: int, packed: bool) -> list[Instruction] | None:
    root = body.root
    if root is None:
        return None
    if packed or body.multi_result:
        return list(root.operands) if root.opcode == "tuple" else None
    return [root] if n == 1 else None


def _element_instrs(body: Computation, packed: bool) -> dict[int, int]:
    """id(instruction standing for state element k) -> k."""
    if packed:
        p = body.parameters[0]
        return {id(u): u.attrs.index for u in p.users if u.opcode == "get_tuple_element"}
    return {id(p): k for k, p in enumerate(body.parameters)}


def invariant_instructions(w: Instruction) -> tuple[list[Instruction], dict[int, int]]:
    """The body's invariant instructions in post order, and the unchanged state elements
    (id of the instruction that reads it -> element index)."""
    _, body = w.called
    packed = packed_state(w)
    n = len(w.operands[0].shape.tuple_shapes) if packed else len(w.operands)
    outs = _body_outputs(body, n, packed)
    if outs is None or len(outs) != n:
        return [], {}
    elems = _element_instrs(body, packed)
    unchanged = {i: k for i, k in elems.items() if id(outs[k]) == i}
    inv: set[int] = set(unchanged)
    order: list[Instruction] = []
    for instr in body.post_order():
        if id(instr) in inv:
            continue
        if instr.opcode == "constant":
            inv.add(id(instr))
            continue
        if instr.opcode in _NEVER or (op_has_side_effects(instr)
                                       and not pure_custom_call(instr)):
            continue
        if all(id(o) in inv for o in instr.operands):
            inv.add(id(instr))
            order.append(instr)
    return order, unchanged


def _carried(order: list[Instruction], body: Computation) -> list[Instruction]:
    """The hoisted values the loop must carry: used by a non-hoisted instruction or the root,
    and not size-inflating: larger than their operands, or than the state elements and
    constants they are computed from (those stay in the body, recomputed there). A value
    made only of broadcast constants (jnp.remainder's divisor select(c, bcast(2),
    bcast(-2))) carried as an array hid the constants from the body's kernels: an s32
    remainder by it was a scalar idiv per element, jax.scipy.special.betainc's 200-step loop
    1.4-2.1x XLA's time (XLA, per instruction: a broadcast is never hoisted, nor anything
    computed from one)."""
    chosen = {id(i) for i in order}
    while True:
        carried = [i for i in order if id(i) in chosen and (i is body.root or any(
            id(u) not in chosen for u in i.users))]
        bad = [i for i in carried if not i.shape.is_array or _too_big(i, chosen) or (
            i.opcode in _GLUE and not any(id(o) in chosen for o in i.operands))]
        if not bad:
            return carried
        for i in bad:
            chosen.discard(id(i))


def _too_big(instr: Instruction, chosen: set[int]) -> bool:
    """Whether `instr` is larger than its operands, or than the state elements and constants
    it is computed from, and not a COSTLY value computed from a state element."""
    inputs = _inputs(instr, chosen)
    if instr.opcode in COSTLY and any(o.opcode != "constant" for o in inputs):
        return False
    return array_bytes(instr.shape) > min(
        sum(array_bytes(o.shape) for o in instr.operands if o.opcode != "constant"),
        sum(array_bytes(o.shape) for o in inputs))


def _inputs(instr: Instruction, chosen: set[int]) -> list[Instruction]:
    """The values outside `chosen` (state elements, constants) `instr` is computed from
    through chosen instructions, each once."""
    seen: set[int] = set()
    found, stack = [], list(instr.operands)
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if id(o) in chosen:
            stack.extend(o.operands)
        else:
            found.append(o)
    return found


class WhileLoopInvariantCodeMotion(Pass):
    name = "while-loop-invariant-code-motion"

    def __init__(self) -> None:
        self.hoisted: list[str] = []

    def run(self, module: Module) -> bool:
        changed = False
        self._callers, reached = region_callers(module)
        for comp in module.post_order():
            if id(comp) not in reached:
                continue  # (left for DCE; its loops may share regions with a reached one's)
            for w in [i for i in comp.instructions if i.opcode == "while"]:
                changed |= self._hoist(module, comp, w)
        return changed

    def _hoist(self, module: Module, comp: Computation, w: Instruction) -> bool:
        order, unchanged = invariant_instructions(w)
        if not order:
            return False
        cond, body = w.called
        carried = _carried(order, body)
        if not carried:
            return False
        packed = packed_state(w)
        # the state elements, outside the loop
        if packed:
            init = w.operands[0]
            n = len(init.shape.tuple_shapes)
            outer = [init.operands[k] if init.opcode == "tuple" else comp.add(Instruction(
                "get_tuple_element", [init], init.shape.tuple_shapes[k],
                GetTupleElementAttrs(k), (), "gte")) for k in range(n)]
        else:
            outer = list(w.operands)
            n = len(outer)
        # clone what the carried values need into the outer computation
        needed: set[int] = set()
        stack = list(carried)
        while stack:
            i = stack.pop()
            if id(i) in needed or id(i) in unchanged:
                continue
            needed.add(id(i))
            stack.extend(i.operands)
        mapping: dict[int, Instruction] = {i: outer[k] for i, k in unchanged.items()}
        for i in body.post_order():
            if id(i) in needed:
                mapping[id(i)] = comp.add(Instruction(
                    i.opcode, [mapping[id(o)] for o in i.operands], i.shape, i.attrs,
                    i.called, i.name, i.meta))
        new_elems = [mapping[id(c)] for c in carried]
        self.hoisted += [c.name for c in carried]
        # cond/body changed in place; clones if another loop calls them (left unaffected)
        if any(self._callers.get(id(c), 0) > 1 for c in (cond, body)):
            for c in (cond, body):
                self._callers[id(c)] -= 1
            new_cond = module.add_computation(cond.clone(cond.name + ".licm"))
            new_body = module.add_computation(body.clone(body.name + ".licm"))
            self._callers[id(new_cond)] = self._callers[id(new_body)] = 1
            index = {id(i): pos for pos, i in enumerate(body.post_order())}
            body_order = list(new_body.instructions)  # clone() adds in body.post_order()
            olds = [body_order[index[id(c)]] for c in carried]
        else:  # (cloning every hoist's loop was a third of a large loop nest's passes)
            new_cond, new_body, olds = cond, body, carried
        shapes = [e.shape for e in new_elems]
        if packed:
            state = Shape.tuple(list(w.shape.tuple_shapes) + shapes)
            for region in (new_cond, new_body):
                p = region.parameters[0]
                p.shape = state
                p.attrs = ParameterAttrs(0, state)
            p = new_body.parameters[0]
            reads = [new_body.add(Instruction("get_tuple_element", [p], s,
                                              GetTupleElementAttrs(n + j), (), "licm"))
                     for j, s in enumerate(shapes)]
            new_w_operands = [comp.add(Instruction("tuple", outer + new_elems, state,
                                                   name="tuple"))]
        else:
            for region in (new_cond, new_body):
                reads = [region.add(Instruction("parameter", [], s, ParameterAttrs(n + j, s),
                                                (), f"licm{j}")) for j, s in enumerate(shapes)]
            state = Shape.tuple([o.shape for o in outer] + shapes)
            new_w_operands = outer + new_elems
        root = new_body.root
        assert root is not None
        for old, r in zip(olds, reads):
            old.replace_all_uses_with(r)
        if packed or new_body.multi_result:
            outs = list(root.operands) + reads
            new_root = new_body.add(Instruction("tuple", outs, state, name="tuple"))
        else:
            new_root = new_body.add(Instruction("tuple", [new_body.root] + reads, state,
                                                name="tuple"))
            new_body.multi_result = True
        new_body.root = new_root
        _drop_dead(new_body)
        sort_instructions(new_body)
        sort_instructions(new_cond)
        new_w = comp.add(Instruction("while", new_w_operands, state, w.attrs,
                                     [new_cond, new_body], w.name, w.meta))
        if packed or n > 1:
            parts = [comp.add(Instruction("get_tuple_element", [new_w], s,
                                          GetTupleElementAttrs(k), (), "gte"))
                     for k, s in enumerate(w.shape.tuple_shapes)]
            repl = comp.add(Instruction("tuple", parts, w.shape, name="tuple"))
        else:
            repl = comp.add(Instruction("get_tuple_element", [new_w], w.shape,
                                        GetTupleElementAttrs(0), (), "gte"))
        w.replace_all_uses_with(repl)
        comp.remove(w)
        sort_instructions(comp)
        return True


def _drop_dead(comp: Computation) -> None:
    """Remove the body instructions the hoisting left without users."""
    for instr in reversed(comp.post_order()):
        if (not instr.users and instr is not comp.root and instr.opcode != "parameter"
                and not op_has_side_effects(instr)):
            comp.remove(instr)
