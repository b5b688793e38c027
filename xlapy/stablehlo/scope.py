"""Name scopes of the StableHLO importer: which instruction a `%name` (or `%name#i`) denotes
in a computation, and the values a region uses from outside (lifted or cloned constants)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlapy.ir import Computation, Instruction
from xlapy.stablehlo.nodes import RegionNode, ValueRef

if TYPE_CHECKING:
    from xlapy.stablehlo.importer import Importer

Key = tuple[str, int | None]


class Scope:
    """Values visible in one computation; unknown names resolve through the parent scope."""

    def __init__(self, imp: Importer, comp: Computation, parent: Scope | None,
                 lifted: dict[Key, Instruction] | None = None) -> None:
        self.imp = imp
        self.comp = comp
        self.parent = parent
        self.values: dict[str, list[Instruction]] = {}
        self.lifted = lifted if lifted is not None else {}
        self.cloned: dict[Key, Instruction] = {}

    def bind(self, name: str, values: list[Instruction], pos: int) -> None:
        if name in self.values:
            raise self.imp.error(pos, f"value {name} is defined twice")
        self.values[name] = values

    def resolve_outer(self, key: Key, pos: int) -> Instruction:
        """The instruction a name denotes in this scope (or an enclosing one)."""
        name, index = key
        if name in self.values:
            group = self.values[name]
            if index is None:
                if len(group) != 1:
                    raise self.imp.error(pos, f"{name} has {len(group)} results: use {name}#i")
                return group[0]
            if not 0 <= index < len(group):
                raise self.imp.error(pos, f"{name}#{index} is out of range ({name} has "
                                          f"{len(group)} results)")
            return group[index]
        if key in self.lifted:
            return self.lifted[key]
        if key in self.cloned:
            return self.cloned[key]
        if self.parent is None:
            raise self.imp.error(pos, f"use of undefined value {name}"
                                      f"{'' if index is None else f'#{index}'}")
        outer = self.parent.resolve_outer(key, pos)
        if not is_constant(outer):
            raise self.imp.error(pos, f"value {name} is captured from an enclosing region; only "
                                      "constants can be captured here (while, case and if lift "
                                      "other values)")
        clone = self.comp.add(Instruction("constant", [], outer.shape, outer.attrs, (),
                                          name.lstrip("%")))
        self.cloned[key] = clone
        return clone

    def lookup(self, ref: ValueRef) -> Instruction:
        return self.resolve_outer((ref.name, ref.index), ref.pos)


def is_constant(instr: Instruction) -> bool:
    return instr.opcode == "constant"


def free_values(region: RegionNode) -> list[tuple[Key, int]]:
    """Values a region uses but does not define (with a source position), in first-use order."""
    out: dict[Key, int] = {}

    def walk(r: RegionNode, defined: set[str]) -> None:
        defined = set(defined) | {a.name for a in r.args}
        for op in r.ops:
            for ref in op.operands:
                if ref.name not in defined:
                    out.setdefault((ref.name, ref.index), ref.pos)
            for sub in op.regions:
                walk(sub, defined)
            defined |= {n for n, _ in op.results}

    walk(region, set())
    return list(out.items())
