"""Dead while-loop state removal (XLA's WhileLoopSimplifier, TryRemoveDeadWhileParams).

A state element k is *dead* when
* the body passes it through unchanged (body output k is the body's read of element k),
* nothing else reads it: no other body instruction, no other body output, not the condition,
* and no one reads loop result k after the loop (every user of the loop is a
  get_tuple_element, none of index k, and the loop is not its computation's root).
Such an element only carries its initial value around: it is dropped from the state (the
condition and body are rebuilt from clones, so another loop calling them is unaffected).
Token elements (or tuples holding one) are always kept, as are all elements of a loop with a
sharding (its per-element annotation), and a loop is never left with an empty state. Side
effects in the condition or body do not matter: a pure pass-through value feeds none of them.
Both the XLA form (one tuple-typed state) and the StableHLO form (N operands) are handled.
The WhileLoopSimplifier runs this after its constant sinking, which often leaves an element
read by nothing but the body's root (JAX's scan over a broadcast constant `xs`).
"""

from __future__ import annotations

from xlapy.ir import Computation, Instruction, Module
from xlapy.ops.core import GetTupleElementAttrs, ParameterAttrs
from xlapy.passes.pass_base import packed_state, sort_instructions
from xlapy.types import Shape


def _state_shapes(w: Instruction) -> list[Shape]:
    if packed_state(w):
        return list(w.operands[0].shape.tuple_shapes)
    return [o.shape for o in w.operands]


def _has_token(shape: Shape) -> bool:
    if shape.is_tuple:
        return any(_has_token(s) for s in shape.tuple_shapes)
    return shape.is_token


def _reads(region: Computation, packed: bool, n: int) -> list[list[Instruction]] | None:
    """The instructions of `region` that stand for each state element (None when the state
    is also used whole, or the signature is not the loop's)."""
    if packed:
        if len(region.parameters) != 1:
            return None
        p = region.parameters[0]
        if p is region.root or any(u.opcode != "get_tuple_element" for u in p.users):
            return None
        out: list[list[Instruction]] = [[] for _ in range(n)]
        for u in p.users:
            out[u.attrs.index].append(u)
        return out
    if len(region.parameters) != n:
        return None
    return [[p] for p in region.parameters]


def dead_elements(w: Instruction) -> list[int]:
    """The indices of the state elements of loop `w` that can be dropped (see the module doc)."""
    cond, body = w.called
    comp = w.parent
    packed = packed_state(w)
    shapes = _state_shapes(w)
    n = len(shapes)
    if n < 2 or comp is None or w is comp.root or w.meta.get("sharding") is not None:
        return []
    if any(u.opcode != "get_tuple_element" for u in w.users):
        return []
    used_after = {u.attrs.index for u in w.users}
    root = body.root
    if (root is None or root.opcode != "tuple" or len(root.operands) != n or root.users
            or not (packed or body.multi_result)):
        return []
    in_body, in_cond = _reads(body, packed, n), _reads(cond, packed, n)
    if in_body is None or in_cond is None:
        return []
    dead = []
    for k in range(n):
        if k in used_after or _has_token(shapes[k]) or any(r.users for r in in_cond[k]):
            continue
        reads = {id(r) for r in in_body[k]}
        if id(root.operands[k]) not in reads:
            continue  # not passed through unchanged
        if sum(id(o) in reads for o in root.operands) != 1:
            continue  # also another output
        if any(u is not root for r in in_body[k] for u in r.users):
            continue  # read by the body
        dead.append(k)
    keep = n - len(dead)
    if keep == 0 or (keep == 1 and not packed and shapes[
            next(k for k in range(n) if k not in dead)].is_tuple):
        return []  # (one tuple-typed operand would read as the packed form)
    return dead


def _trim_region(region: Computation, packed: bool, dead: set[int],
                 new_index: dict[int, int], state: Shape, shapes: list[Shape]) -> None:
    """Drop the dead elements' reads from a cloned cond/body (their users are gone) and
    renumber the others."""
    if packed:
        p = region.parameters[0]
        p.shape = state
        p.attrs = ParameterAttrs(0, state)
        for u in list(p.users):
            k = u.attrs.index
            if k in dead:
                region.remove(u)
            else:
                u.attrs = GetTupleElementAttrs(new_index[k])
                u.inferred = None
        return
    for p in list(region.parameters):
        k = p.parameter_number
        if k in dead:
            region.remove(p)
        else:
            p.attrs = ParameterAttrs(new_index[k], shapes[k])
    region.parameters.sort(key=lambda q: q.parameter_number)


def remove_dead_state(module: Module, comp: Computation, w: Instruction) -> Instruction | None:
    """Rebuild loop `w` without its dead state elements; the new loop, or None if none."""
    dead_list = dead_elements(w)
    if not dead_list:
        return None
    dead = set(dead_list)
    cond, body = w.called
    packed = packed_state(w)
    shapes = _state_shapes(w)
    keep = [k for k in range(len(shapes)) if k not in dead]
    new_index = {k: j for j, k in enumerate(keep)}
    kept_shapes = [shapes[k] for k in keep]
    state = Shape.tuple(kept_shapes)
    new_cond = module.add_computation(cond.clone(cond.name + ".trim"))
    new_body = module.add_computation(body.clone(body.name + ".trim"))
    # the body's outputs first (the root is the dead reads' only user)
    old_root = new_body.root
    assert old_root is not None
    outs = [old_root.operands[k] for k in keep]
    if packed or len(keep) > 1:
        new_body.root = new_body.add(Instruction("tuple", outs, state, name="tuple"))
    else:
        new_body.root = outs[0]
        new_body.multi_result = False
    if not old_root.users:
        new_body.remove(old_root)
    for region in (new_cond, new_body):
        _trim_region(region, packed, dead, new_index, state, shapes)
        sort_instructions(region)
    # the loop
    if packed:
        init = w.operands[0]
        if init.opcode == "tuple":
            elems = [init.operands[k] for k in keep]
        else:
            elems = [comp.add(Instruction("get_tuple_element", [init], shapes[k],
                                          GetTupleElementAttrs(k), (), "gte")) for k in keep]
        operands = [comp.add(Instruction("tuple", elems, state, name="tuple"))]
        result = state
    else:
        operands = [w.operands[k] for k in keep]
        result = state if len(keep) > 1 else kept_shapes[0]
    new_w = comp.add(Instruction("while", operands, result, w.attrs, [new_cond, new_body],
                                 w.name, w.meta))
    for u in list(w.users):
        k = u.attrs.index
        if not packed and len(keep) == 1:
            repl = new_w
        else:
            repl = comp.add(Instruction("get_tuple_element", [new_w], u.shape,
                                        GetTupleElementAttrs(new_index[k]), (), u.name))
        u.replace_all_uses_with(repl)
        comp.remove(u)
    old_operands = list(w.operands)
    comp.remove(w)
    for o in old_operands:
        if o.opcode == "tuple" and not o.users and o is not comp.root:
            comp.remove(o)
    sort_instructions(comp)
    return new_w
