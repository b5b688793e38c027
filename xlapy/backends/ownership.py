"""Results are memory the caller owns: never an argument, a constant, the cpu arena or another
result of the same call (writing into one result must not change a later call or a sibling).

A backend decides at compile time, per result leaf, whether it is freshly computed (KEEP: no
per-call work), always shared (COPY: a parameter, a constant, a repeated value) or unknown
(CHECK: e.g. an interpreter kernel's result, which may be a view of its operand), so the
common path costs nothing per call. `own` applies such a plan to one call's result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlapy.ir import Instruction

KEEP, COPY, CHECK = "keep", "copy", "check"
#: One mode per result leaf, nested like the root's tuple instructions.
Plan = str | tuple["Plan", ...]


def result_plan(root: Instruction | None, mode: Callable[[Instruction], str]) -> Plan | None:
    """The plan for a computation's root (None when every leaf is KEEP): `mode(leaf)` per
    leaf instruction behind the root's tuples; a leaf seen before is COPY."""
    if root is None:
        return None
    seen: set[Any] = set()

    def walk(instr: Instruction) -> Plan:
        if instr.opcode == "tuple":
            return tuple(walk(o) for o in instr.operands)
        key: Any = id(instr)
        if instr.opcode == "get_tuple_element":  # two of them may name one element
            key = (id(instr.operands[0]), instr.attrs.index)
        m = COPY if key in seen else mode(instr)
        seen.add(key)
        return m

    plan = walk(root)
    return None if _all_keep(plan) else plan


def own(value: Any, plan: Plan | None, protected: Callable[[], Sequence[Any]]) -> Any:
    """`value` with COPY leaves copied and CHECK leaves copied when they may share memory
    with `protected()` (arguments, constants, arena: values or tuples) or with another leaf."""
    if plan is None:
        return value
    leaves: list[list[Any]] = []
    _flatten(value, plan, leaves)
    checks = []
    for k, leaf in enumerate(leaves):
        if leaf[1] == COPY:
            leaf[0] = _copy(leaf[0])
        elif leaf[1] == CHECK and isinstance(leaf[0], np.ndarray):
            checks.append(k)
    if checks:
        guard: list[np.ndarray] = []
        for p in protected():
            _arrays(p, guard)
        for k in checks:
            v = leaves[k][0]
            others = guard + [leaf[0] for j, leaf in enumerate(leaves)
                              if j != k and isinstance(leaf[0], np.ndarray)]
            if _aliases(v, others):
                leaves[k][0] = v.copy()
    it = iter(leaf[0] for leaf in leaves)
    return _rebuild(value, plan, it)


def _aliases(v: np.ndarray, others: list[np.ndarray]) -> bool:
    """Whether v may share memory with one of `others`. An array owning its memory can only
    be shared as itself or through a view of it (the view is the one tested)."""
    if v.base is None:
        return any(o is v for o in others)
    return any(np.may_share_memory(v, o) for o in others)


def _copy(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    return value.copy() if isinstance(value, np.ndarray) else value


def _arrays(value: Any, out: list[np.ndarray]) -> None:
    if isinstance(value, (tuple, list)):
        for v in value:
            _arrays(v, out)
    elif isinstance(value, np.ndarray):
        out.append(value)


def _flatten(value: Any, plan: Plan, out: list[list[Any]]) -> None:
    if isinstance(plan, tuple):
        for v, p in zip(value, plan):
            _flatten(v, p, out)
    elif isinstance(value, tuple):  # a tuple-shaped leaf: each element gets the leaf's mode
        for v in value:
            _flatten(v, plan, out)
    else:
        out.append([value, plan])


def _rebuild(value: Any, plan: Plan, it: Any) -> Any:
    if isinstance(plan, tuple):
        return tuple(_rebuild(v, p, it) for v, p in zip(value, plan))
    if isinstance(value, tuple):
        return tuple(_rebuild(v, plan, it) for v in value)
    return next(it)


def _all_keep(plan: Plan) -> bool:
    if isinstance(plan, tuple):
        return all(_all_keep(p) for p in plan)
    return plan == KEEP


__all__ = ["result_plan", "own", "KEEP", "COPY", "CHECK", "Plan"]
