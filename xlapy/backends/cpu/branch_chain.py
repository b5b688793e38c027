"""Computations rebuilt for the native while driver: a branch as the body of a loop trip
that runs it once (`body`, branch_loop.py), and a case/if inside one as a chain of loops
that each run at most once (`chain`): loop k runs branch k when the index picks it (an index
outside [0, n - 1) the last, the op's semantics), its state (i, limit, the branch's operand
elements, the results so far: zeros before loop 0), so the chain's last state holds the
picked branch's results. The driver runs loops, not case thunks: with the chain a program
whose top level picks a branch (jax.scipy.linalg.expm's norm test) is one native call, and a
loop whose body holds a cond of LAPACK calls (no select can replace it) stays native. The
chain's condition computations are named nested_loop.PICKED (a branch, not a program loop:
the iteration limit does not count them).
"""

from __future__ import annotations

from xlapy.backends.cpu.nested_loop import PICKED
from xlapy.ir import Computation, Instruction
from xlapy.passes.hlo_builder import Emitter
from xlapy.types import ElementType, Shape

S32 = ElementType.S32


def arrays(shape: Shape) -> list[Shape] | None:
    """A value's arrays (itself, or a flat tuple's elements), or None."""
    if shape.is_array:
        return [shape]
    if shape.is_tuple and all(s.is_array for s in shape.tuple_shapes):
        return list(shape.tuple_shapes)
    return None


def _copy(e: Emitter, comp: Computation, mapping: dict[int, Instruction],
          flat: dict[int, list[Instruction]]) -> bool:
    """Add `comp`'s instructions but its parameters to `e` (a case/if as a `chain`), their
    operands through `mapping` (a tuple's get_tuple_elements through `flat`: its elements);
    False when a case/if cannot be a chain."""
    for i in comp.post_order():
        if i.opcode == "parameter":
            continue
        if i.opcode == "get_tuple_element" and id(i.operands[0]) in flat:
            mapping[id(i)] = flat[id(i.operands[0])][i.attrs.index]
            continue
        ops = [mapping[id(o)] for o in i.operands]
        if i.opcode in ("case", "if"):
            got = chain(e, i, ops)
            if got is None or (i.shape.is_tuple and any(
                    u.opcode != "get_tuple_element" for u in i.users)):
                return False
            if i.shape.is_tuple:  # (its elements, as a tuple parameter's)
                flat[id(i)] = got
            else:
                mapping[id(i)] = got[0]
            continue
        mapping[id(i)] = e.comp.add(Instruction(i.opcode, ops, i.shape, i.attrs, i.called,
                                                i.name, i.meta))
    return True


def _outs(comp: Computation, mapping: dict[int, Instruction],
          flat: dict[int, list[Instruction]]) -> list[Instruction]:
    """The copied values of `comp`'s root (a tuple's elements)."""
    root = comp.root
    assert root is not None
    if root.opcode == "tuple" and root.shape.is_tuple:
        return [mapping[id(o)] for o in root.operands]
    return flat[id(root)] if id(root) in flat else [mapping[id(root)]]


def unbranched(comp: Computation) -> Computation | None:
    """`comp` (a while loop's condition or body) with each case/if a `chain`, or None (none
    in it, or one that cannot be)."""
    if not any(i.opcode in ("case", "if") for i in comp.instructions):
        return None
    e = Emitter(Computation(comp.name))
    mapping: dict[int, Instruction] = {}
    for p in comp.parameters:
        mapping[id(p)] = e.param(p.shape, p.name)
    flat: dict[int, list[Instruction]] = {}
    if not _copy(e, comp, mapping, flat):
        return None
    root = comp.root
    assert root is not None
    outs = _outs(comp, mapping, flat)
    e.comp.root = e.tuple(*outs) if root.shape.is_tuple else outs[0]
    e.comp.multi_result = comp.multi_result
    return e.comp


def body(branch: Computation, state: list[Shape], n: int, lead: int = 1
         ) -> Computation | None:
    """(i, [limit,] elements..., results...) -> (i + 1, [limit,] elements...,
    branch(elements...)), `lead` the words before the elements; None when a tuple parameter
    is used other than through get_tuple_element, or a case/if inside cannot be a chain."""
    e = Emitter(Computation(f"{branch.name}.once_body"))
    ps = [e.param(s) for s in state]
    flat: dict[int, list[Instruction]] = {}
    k = lead
    mapping: dict[int, Instruction] = {}
    for p in branch.parameters:
        if p.shape.is_tuple:
            if any(u.opcode != "get_tuple_element" for u in p.users):
                return None
            flat[id(p)] = ps[k: k + len(p.shape.tuple_shapes)]
            k += len(p.shape.tuple_shapes)
        else:
            mapping[id(p)] = ps[k]
            k += 1
    if not _copy(e, branch, mapping, flat):
        return None
    e.comp.root = e.tuple(e.add(ps[0], e.const(1, S32)), *ps[1:lead + n],
                          *_outs(branch, mapping, flat))
    e.comp.multi_result = True
    return e.comp


def picks(e: Emitter, instr: Instruction, index: Instruction, k: int) -> Instruction:
    """1 (s32) when case/if `instr` runs branch k, else 0: the index k, or for the last
    branch any index outside [0, n - 1) (the op's semantics); if: the predicate, then not."""
    n = len(instr.called)
    if instr.opcode == "if":
        pick = index if k == 0 else e.op("not", index)
    elif n == 1:
        return e.const(1, S32)
    elif k < n - 1:
        pick = e.cmp(index, e.const(k, index.shape.element_type), "EQ")
    else:
        t = index.shape.element_type
        pick = e.op("or", e.cmp(index, e.const(0, t), "LT"),
                    e.cmp(index, e.const(n - 1, t), "GE"))
    return e.select(pick, e.const(1, S32), e.const(0, S32))


def chain(e: Emitter, instr: Instruction, ops: list[Instruction]) -> list[Instruction] | None:
    """case/if `instr` (operands `ops`, copied into `e`) as a chain (module docstring): its
    results as a list (a tuple the driver's state cannot be), or None (a value the chain
    cannot carry)."""
    results = arrays(instr.shape)
    if results is None:
        return None
    acc = [e.const(0, r.element_type, r.dimensions) for r in results]
    for k, branch in enumerate(instr.called):
        arg = ops[1 + k] if len(ops) > 1 else None
        if arg is None:
            elems = []
        elif arg.opcode == "tuple":  # (its operands: the tuple is left unused)
            elems = list(arg.operands)
        else:
            elems = [e.get_tuple_element(arg, index=j) for j in range(
                len(arg.shape.tuple_shapes))] if arg.shape.is_tuple else [arg]
        init = [e.const(0, S32), picks(e, instr, ops[0], k), *elems, *acc]
        state = [x.shape for x in init]
        loop_body = body(branch, state, len(elems), lead=2)
        if loop_body is None:
            return None
        c = Emitter(Computation(f"{branch.name}{PICKED}"))
        ps = [c.param(s) for s in state]
        c.comp.root = c.cmp(ps[0], ps[1], "LT")
        loop = e.op("while", *init, called=[c.comp, loop_body], name=f"{instr.name}.branch{k}")
        acc = [e.get_tuple_element(loop, index=2 + len(elems) + j) for j in range(len(acc))]
    return acc


