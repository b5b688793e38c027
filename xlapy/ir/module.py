"""Module: the computations of a program, its entry, and its replica/partition counts."""

from __future__ import annotations

from xlapy.errors import XlapyError
from xlapy.ir.computation import Computation


class Module:
    """XLA's HloModule: named computations, one of them the entry."""

    def __init__(self, name: str, entry: Computation | None = None) -> None:
        self.name = name
        self.computations: list[Computation] = []
        self.entry: Computation | None = None
        self.num_replicas = 1
        self.num_partitions = 1
        #: Front-door extras (module attributes, func visibility...) kept for printing.
        self.meta: dict[str, object] = {}
        if entry is not None:
            self.add_computation(entry, entry=True)

    def add_computation(self, comp: Computation, entry: bool = False) -> Computation:
        names = {c.name for c in self.computations}
        if comp.name in names:
            base, i = comp.name, 1
            while f"{base}.{i}" in names:
                i += 1
            comp.name = f"{base}.{i}"
        self.computations.append(comp)
        if entry:
            self.entry = comp
        return comp

    def get(self, name: str) -> Computation:
        for c in self.computations:
            if c.name == name:
                return c
        raise XlapyError(f"module {self.name} has no computation named '{name}'")

    def entry_computation(self) -> Computation:
        if self.entry is None:
            raise XlapyError(f"module {self.name} has no entry computation")
        return self.entry

    def post_order(self) -> list[Computation]:
        """Computations with callees before callers, entry last."""
        order: list[Computation] = []
        seen: set[int] = set()

        def visit(c: Computation) -> None:
            if id(c) in seen:
                return
            seen.add(id(c))
            for callee in c.called_computations():
                visit(callee)
            order.append(c)

        roots = [self.entry] if self.entry is not None else []
        for c in roots + [c for c in self.computations if c is not self.entry]:
            visit(c)
        return order

    def remove_unreachable(self) -> bool:
        """Drop computations the entry never calls; return whether any went."""
        if self.entry is None:
            return False
        reachable: set[int] = set()
        stack = [self.entry]
        while stack:
            c = stack.pop()
            if id(c) in reachable:
                continue
            reachable.add(id(c))
            stack.extend(c.called_computations())
        before = len(self.computations)
        self.computations = [c for c in self.computations if id(c) in reachable]
        return len(self.computations) != before

    def clone(self, name: str | None = None) -> Module:
        new = Module(name or self.name)
        new.num_replicas, new.num_partitions = self.num_replicas, self.num_partitions
        new.meta = dict(self.meta)
        mapping: dict[int, Computation] = {}
        for c in self.post_order():
            copy = c.clone(map_called=lambda callee: mapping[id(callee)])
            mapping[id(c)] = copy
            new.computations.append(copy)
            if c is self.entry:
                new.entry = copy
        return new

    def to_text(self) -> str:
        from xlapy.ir.printer import print_module

        return print_module(self)

    def __repr__(self) -> str:
        return f"<Module {self.name}: {len(self.computations)} computations>"
