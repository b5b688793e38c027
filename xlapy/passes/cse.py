"""HloCSE: one instruction for each (opcode, operands, attrs, callees, shape) computed twice.

Constants match on their exact bytes (so +0 and -0, or two NaN payloads, stay apart);
side-effecting ops (rng, feeds, custom calls marked `has_side_effect`) are never merged; a
pure custom call is, as XLA's HloCSE does (`pass_base.pure_custom_call`).
"""

from __future__ import annotations

from typing import Any

from xlapy.ir import Computation, Instruction
from xlapy.passes.pass_base import ComputationPass, op_has_side_effects, pure_custom_call
from xlapy.types import Shape


def cse_key(instr: Instruction, callees: dict[int, Any] | None = None) -> Any:
    """A hashable identity of what `instr` computes, or None when it must not be merged.
    Called computations count by their structure (`computation_key`, memoized in
    `callees`): JAX writes a reducer region per reduce, so `x.mean()` and the mean inside
    `x.var()` were two sums of x (batch-norm statistics: a third pass over the input)."""
    return _key(instr, tuple([id(o) for o in instr.operands]), {} if callees is None
                else callees)


def _key(instr: Instruction, operands: tuple[int, ...], memo: dict[int, Any]) -> Any:
    """cse_key with the operands named by `operands` (ids, or positions in a computation)."""
    if instr.opcode == "parameter" or op_has_side_effects(instr) and not pure_custom_call(instr):
        return None
    if instr.opcode == "constant":
        lit = instr.attrs.literal
        if not lit.shape.is_array:
            return None
        arr = lit.to_numpy()
        return ("constant", str(lit.shape), arr.dtype.str, arr.tobytes())
    try:
        hash(instr.attrs)
    except TypeError:
        return None
    called = tuple([computation_key(c, memo) for c in instr.called])
    if None in called:
        return None
    return (instr.opcode, _shape_key(instr.shape), operands, instr.attrs, called)


def computation_key(comp: Computation, memo: dict[int, Any]) -> Any:
    """What `comp` computes, structurally (its instructions' keys over operand positions),
    or None when something in it must not be merged (side effects, unhashable attrs)."""
    if id(comp) in memo:
        return memo[id(comp)]
    memo[id(comp)] = None  # (a computation calling itself is never merged)
    at: dict[int, int] = {}
    items: list[Any] = []
    for instr in comp.post_order():
        at[id(instr)] = len(items)
        if instr.opcode == "parameter":
            items.append(("parameter", _shape_key(instr.shape), instr.attrs))
            continue
        key = _key(instr, tuple([at[id(o)] for o in instr.operands]), memo)
        if key is None:
            return None
        items.append(key)
    out = (tuple(items), at.get(id(comp.root)))
    memo[id(comp)] = out
    return out


def _shape_key(shape: Shape) -> Any:
    """The shape with its layout: a plain array shape itself (Shape equality is all there is
    to it then; its printed form, the key before, cost CSE a third of its time), any other
    its printed form (which shows the layouts, nested ones too)."""
    return shape if shape.layout is None and not shape.tuple_shapes else str(shape)


class CommonSubexpressionElimination(ComputationPass):
    """Replaces each instruction identical to an earlier one by that one."""

    name = "cse"

    def run_on_computation(self, comp: Computation) -> bool:
        seen: dict[Any, Instruction] = {}
        callees: dict[int, Any] = {}
        changed = False
        for instr in list(comp.post_order()):
            key = cse_key(instr, callees)
            if key is None:
                continue
            try:
                first = seen.get(key)
            except TypeError:
                continue
            if first is None:
                seen[key] = instr
                continue
            instr.replace_all_uses_with(first)
            if instr is not comp.root and not instr.users:
                comp.remove(instr)
            changed = True
        return changed
