"""Structural module equality, for `parse(print(m)) == m`.

Two modules are equal when their entry computations (and everything they call) compute the
same graph: same ops, shapes, attributes and operand structure, ignoring instruction names,
instruction order and dead values that have no effect.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from xlapy.ir import Computation, Instruction, Module
from xlapy.ops.base import OPS
from xlapy.stablehlo.attrmap import _FROM_RESULT
from xlapy.types import Literal


class _Interner:
    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}

    def __call__(self, key: Any) -> int:
        return self.ids.setdefault(key, len(self.ids))


def _attrs_key(attrs: Any) -> Any:
    """A hashable key; literals compare by their bytes (NaN payloads and -0.0 included)."""
    if isinstance(attrs, Literal):
        return ("literal", str(attrs.shape), np.ascontiguousarray(attrs.to_numpy()).tobytes())
    if dataclasses.is_dataclass(attrs) and not isinstance(attrs, type):
        # Fields the result type carries (`shape`, `result_shapes`...) are in the key already
        # through the instruction's shape; front doors fill them differently (send: ()).
        return (type(attrs).__name__,
                tuple((f.name, _attrs_key(getattr(attrs, f.name)))
                      for f in dataclasses.fields(attrs) if f.name not in _FROM_RESULT))
    if isinstance(attrs, tuple):
        return tuple(_attrs_key(a) for a in attrs)
    try:
        hash(attrs)
        return attrs
    except TypeError:
        return repr(attrs)


def _whole_tuple(instr: Instruction) -> Instruction | None:
    if instr.opcode != "tuple" or not instr.operands:
        return None
    src = instr.operands[0].operands[0] if instr.operands[0].operands else None
    if src is None or not src.shape.is_tuple or \
            len(src.shape.tuple_shapes) != len(instr.operands):
        return None
    for i, o in enumerate(instr.operands):
        if o.opcode != "get_tuple_element" or o.operands[0] is not src or o.attrs.index != i:
            return None
    return src


def computation_key(comp: Computation, intern: _Interner,
                    memo: dict[int, int] | None = None) -> int:
    memo = {} if memo is None else memo
    if id(comp) in memo:
        return memo[id(comp)]
    ids: dict[int, int] = {}

    def key(instr: Instruction) -> int:
        if id(instr) in ids:
            return ids[id(instr)]
        for o in instr.operands:  # operands come first in instruction order
            if id(o) not in ids:
                key(o)
        whole = _whole_tuple(instr)
        if whole is not None:  # tuple(gte(x, 0), ..., gte(x, n-1)) is x itself
            ids[id(instr)] = ids[id(whole)]
            return ids[id(instr)]
        called = tuple(computation_key(c, intern, memo) for c in instr.called)
        k = intern((instr.opcode, str(instr.shape), _attrs_key(instr.attrs),
                    tuple(ids[id(o)] for o in instr.operands), called))
        ids[id(instr)] = k
        return k

    for instr in comp.instructions:
        key(instr)
    effects = tuple(ids[id(i)] for i in comp.instructions
                    if i.opcode in OPS and OPS[i.opcode].side_effecting)
    params = tuple(str(p.shape) for p in comp.parameters)
    root = ids[id(comp.root)] if comp.root is not None else -1
    result = intern(("computation", params, root, effects, comp.multi_result))
    memo[id(comp)] = result
    return result


def modules_equal(a: Module, b: Module) -> bool:
    """Same entry graph (and callees), replica/partition counts."""
    if (a.num_replicas, a.num_partitions) != (b.num_replicas, b.num_partitions):
        return False
    intern = _Interner()
    ka = [computation_key(c, intern) for c in _roots(a)]
    kb = [computation_key(c, intern) for c in _roots(b)]
    return ka == kb


def _roots(m: Module) -> list[Computation]:
    if m.entry is not None:
        return [m.entry]
    called = {id(c) for comp in m.computations for c in comp.called_computations()}
    return [c for c in m.computations if id(c) not in called]
