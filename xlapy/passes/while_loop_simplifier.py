"""While-loop simplifications: dead loops, trip counts, constant sinking.

* dead loop removal: a loop whose condition is the constant false (or whose trip count is 0)
  becomes its initial state;
* single-trip loops: a loop with trip count 1 becomes its body inlined once (jnp.polyval's
  scan, unrolled 16 steps a trip, has one trip for a degree-19 polynomial: as a loop its 1M
  element state was copied in and out around one body run, 3.2x XLA's time);
* trip count: `i < N` over an integer counter that starts at a constant and the body adds 1 to, is
  recorded on the loop as `meta["trip_count"]` (the cost model and `xlapy opt` print it);
* constant sinking: a state element that starts as a constant, an iota or a broadcast of a
  scalar constant (XLA's WhileLoopConstantSinking, sink_broadcast_of_constants=true) and the
  body passes through unchanged is replaced by a copy of that value inside the body and the
  condition, so folding and the simplifier see it (a condition or body another loop calls
  too is cloned first);
* dead state: an element only passed through, read by no one inside or after the loop, is
  dropped from the state (while_loop_dead_state.py; XLA's TryRemoveDeadWhileParams). JAX's
  scan over `jnp.ones((64, 256))` in a fori_loop broadcast and carried the 64x256 array in
  every outer trip; after sinking, the scan body folds its slice of it and the element goes.
Both the XLA form (one tuple-typed state) and the StableHLO form (N operands) are handled.
"""

from __future__ import annotations

from xlapy.ir import Computation, Instruction, Module
from xlapy.ops.attrs import ComparisonDirection
from xlapy.passes.pass_base import Pass, packed_state, region_callers, sort_instructions
from xlapy.passes.while_loop_dead_state import remove_dead_state


def _state_elements(w: Instruction) -> list[Instruction] | None:
    """The initial state element instructions (None when a tuple state is not a tuple op)."""
    if packed_state(w):
        init = w.operands[0]
        return list(init.operands) if init.opcode == "tuple" else None
    return list(w.operands)


def element_uses(comp: Computation, k: int, packed: bool) -> list[Instruction]:
    """Instructions in `comp` that stand for state element k."""
    if packed:
        p = comp.parameters[0]
        return [u for u in p.users if u.opcode == "get_tuple_element" and u.attrs.index == k]
    return [comp.parameters[k]]


def _body_output(body: Computation, k: int, packed: bool) -> Instruction | None:
    root = body.root
    if root is None:
        return None
    if packed or body.multi_result:
        return root.operands[k] if root.opcode == "tuple" else None
    return root if k == 0 else None


def passes_through(body: Computation, k: int, packed: bool) -> bool:
    """Whether the body's result element k is its state element k as it came."""
    out = _body_output(body, k, packed)
    return out is not None and out in element_uses(body, k, packed)


def trip_count(w: Instruction) -> int | None:
    cond, body = w.called
    packed = packed_state(w)
    init = _state_elements(w)
    root = cond.root
    if init is None or root is None or root.opcode != "compare":
        return None
    if root.attrs.comparison_direction is not ComparisonDirection.LT:
        return None
    lhs, rhs = root.operands
    if rhs.opcode != "constant":
        return None
    for k in range(len(init)):
        if lhs not in element_uses(cond, k, packed) or init[k].opcode != "constant":
            continue
        if not init[k].shape.element_type.is_integer:
            return None  # a float counter: `N - start` is not the count (0 < 0.5 runs once)
        step = _body_output(body, k, packed)
        if step is None or step.opcode != "add":
            return None
        a, b = step.operands
        if a not in element_uses(body, k, packed) or b.opcode != "constant":
            return None
        if int(b.attrs.literal.to_numpy()) != 1:
            return None
        start = int(init[k].attrs.literal.to_numpy())
        return max(0, int(rhs.attrs.literal.to_numpy()) - start)
    return None


class WhileLoopSimplifier(Pass):
    name = "while-loop-simplifier"

    def run(self, module: Module) -> bool:
        changed = False
        self._callers, reached = region_callers(module)
        for comp in module.post_order():
            if id(comp) not in reached:
                continue  # (left for DCE: it may share loop regions with a reached one)
            for w in [i for i in comp.instructions if i.opcode == "while"]:
                changed |= self._simplify(module, comp, w)
        return changed

    def _simplify(self, module: Module, comp: Computation, w: Instruction) -> bool:
        cond, _ = w.called
        n = trip_count(w)
        if n is not None and w.meta.get("trip_count") != n:
            w.meta["trip_count"] = n
        dead = n == 0 or (cond.root is not None and cond.root.opcode == "constant"
                          and not bool(cond.root.attrs.literal.to_numpy()))
        if dead:
            if len(w.operands) == 1:
                new = w.operands[0]
            else:
                new = comp.add(Instruction("tuple", list(w.operands), w.shape, name="tuple"))
            w.replace_all_uses_with(new)
            if w is not comp.root and not w.users:
                comp.remove(w)
            sort_instructions(comp)
            return True
        if n == 1:
            from xlapy.passes.while_loop_unroller import unroll, unrollable

            if unrollable(w) == 1:
                w.replace_all_uses_with(unroll(comp, w, 1))  # (the root too)
                if not w.users:
                    comp.remove(w)
                sort_instructions(comp)
                return True
        changed = self._sink(module, w)
        regions = list(w.called)
        if remove_dead_state(module, comp, w) is None:
            return changed
        for c in regions:  # (w now calls trimmed copies)
            self._callers[id(c)] = self._callers.get(id(c), 1) - 1
        return True

    def _sink(self, module: Module, w: Instruction) -> bool:
        """Constant sinking: the reads of sinkable, passed-through elements (not the body's
        output of them) become copies of the initial value."""
        init = _state_elements(w)
        if init is None:
            return False
        cond, body = w.called
        packed = packed_state(w)
        todo = [k for k, x in enumerate(init)
                if _sinkable(x) and passes_through(body, k, packed) and any(
                    read_by(region, k, packed, body) for region in (cond, body))]
        if not todo:
            return False
        if any(self._callers.get(id(c), 0) > 1 for c in (cond, body)):
            for c in (cond, body):  # another loop calls them: sink into copies
                self._callers[id(c)] = self._callers.get(id(c), 1) - 1
            cond = module.add_computation(cond.clone(cond.name + ".sunk"))
            body = module.add_computation(body.clone(body.name + ".sunk"))
            self._callers[id(cond)] = self._callers[id(body)] = 1
            w.called = [cond, body]
        for region in (cond, body):
            for k in todo:
                for use in element_uses(region, k, packed):
                    users = [u for u in use.users if not (region is body and u is body.root)]
                    if not users:
                        continue
                    c = _copy_into(region, init[k])
                    for u in users:
                        u.replace_operand_with(use, c)
            sort_instructions(region)  # (once: a sort per element was most of a compile)
        return True


def _sinkable(x: Instruction) -> bool:
    """Cheaper to recompute where it is read than to carry: a constant, an iota, a broadcast
    of a scalar constant."""
    if x.opcode in ("constant", "iota"):
        return True
    return (x.opcode == "broadcast_in_dim" and x.operands[0].opcode == "constant"
            and x.operands[0].shape.rank == 0)


def read_by(region: Computation, k: int, packed: bool, body: Computation) -> list[Instruction]:
    """The users of element k in `region` (the body's root, its pass-through, aside)."""
    return [u for use in element_uses(region, k, packed) for u in use.users
            if not (region is body and u is body.root)]


def _copy_into(region: Computation, x: Instruction) -> Instruction:
    """A copy of `x` (a constant, or an op over copies of its operands) added to `region`."""
    ops = [_copy_into(region, o) for o in x.operands]
    return region.add(Instruction(x.opcode, ops, x.shape, x.attrs, (), "sunk"))
