"""Computation: parameters, instructions in a valid order, and a root (XLA's HloComputation)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from xlapy.errors import XlapyError
from xlapy.ir.instruction import Instruction
from xlapy.types import Shape


class Computation:
    """A list of instructions, each after its operands, with numbered parameters and a root.

    `multi_result` records that the root tuple stands for several results (a StableHLO
    `return %a, %b` or a variadic region) rather than one tuple-typed value.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.instructions: list[Instruction] = []
        self.parameters: list[Instruction] = []
        self.root: Instruction | None = None
        self.multi_result = False
        self._names: set[str] = set()
        self._counter = itertools.count()

    # ---- building ---------------------------------------------------------------------------
    def unique_name(self, hint: str) -> str:
        base = hint or "v"
        name = base
        while name in self._names:
            name = f"{base}.{next(self._counter)}"
        self._names.add(name)
        return name

    def add(self, instr: Instruction) -> Instruction:
        """Append `instr` (its operands must already be here) and register it with its operands."""
        instr.name = self.unique_name(instr.name or instr.opcode)
        instr.parent = self
        seen: set[int] = set()
        for op in instr.operands:
            if op.parent is not self:
                raise XlapyError(
                    f"operand %{op.name} of %{instr.name} belongs to another computation"
                )
            if id(op) not in seen:  # a new instruction is not yet anyone's user
                seen.add(id(op))
                op.users.append(instr)
        self.instructions.append(instr)
        if instr.opcode == "parameter":
            params = self.parameters
            params.append(instr)
            if len(params) > 1 and params[-2].parameter_number > instr.parameter_number:
                params.sort(key=lambda p: p.parameter_number)  # (clones add them in order)
        return instr

    def remove(self, instr: Instruction) -> None:
        """Remove an instruction that has no users."""
        if instr.users:
            raise XlapyError(f"cannot remove %{instr.name}: it still has users")
        if instr is self.root:
            raise XlapyError(f"cannot remove the root %{instr.name}")
        self.instructions.remove(instr)
        if instr in self.parameters:
            self.parameters.remove(instr)
        for operand in {id(o): o for o in instr.operands}.values():
            if instr in operand.users:
                operand.users.remove(instr)
        self._names.discard(instr.name)
        instr.parent = None

    def replace_instruction(self, old: Instruction, new: Instruction) -> None:
        """Replace all uses of `old` with `new` (already added) and drop `old`."""
        old.replace_all_uses_with(new)
        if not old.users and old.opcode != "parameter":
            self.remove(old)

    # ---- queries ----------------------------------------------------------------------------
    @property
    def parameter_shapes(self) -> list[Shape]:
        return [p.shape for p in self.parameters]

    @property
    def result_shape(self) -> Shape:
        if self.root is None:
            raise XlapyError(f"computation {self.name} has no root")
        return self.root.shape

    @property
    def result_shapes(self) -> list[Shape]:
        """The results as a list: the root tuple's elements for a multi-result computation."""
        shape = self.result_shape
        return list(shape.tuple_shapes) if self.multi_result else [shape]

    def post_order(self) -> list[Instruction]:
        """Instructions with operands before users; unreachable side-effecting ones kept.

        The order of a depth-first walk from each parameter, then from each instruction in
        list order. An instruction whose operands are all placed is placed as it comes
        (what the walk does with it): passes ask for the order after every change, and the
        list is mostly in order already (the walk itself was most of a cheap pass's time)."""
        seen: set[int] = set()
        order: list[Instruction] = []
        for p in self.parameters:
            if id(p) not in seen:
                self._place(p, seen, order)
        for instr in self.instructions:
            if id(instr) in seen:
                continue
            for o in instr.operands:
                if id(o) not in seen:
                    self._place(instr, seen, order)
                    break
            else:
                seen.add(id(instr))
                order.append(instr)
        return order

    @staticmethod
    def _place(start: Instruction, seen: set[int], order: list[Instruction]) -> None:
        """Depth-first from `start`: its unplaced operands (in operand order), then it."""
        stack: list[tuple[Instruction, int]] = [(start, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0 and id(node) in seen:
                continue
            if i < len(node.operands):
                stack.append((node, i + 1))
                child = node.operands[i]
                if id(child) not in seen:
                    stack.append((child, 0))
            elif id(node) not in seen:
                seen.add(id(node))
                order.append(node)

    def called_computations(self) -> list[Computation]:
        out: list[Computation] = []
        for instr in self.instructions:
            for c in instr.called:
                if c not in out:
                    out.append(c)
        return out

    def clone(self, name: str | None = None,
              map_called: Callable[[Computation], Computation] | None = None) -> Computation:
        """A deep copy of the instruction graph (called computations mapped by `map_called`)."""
        new = Computation(name or self.name)
        new.multi_result = self.multi_result
        mapping: dict[int, Instruction] = {}
        for instr in self.post_order():
            called = [map_called(c) if map_called else c for c in instr.called]
            copy = Instruction(instr.opcode, [mapping[id(o)] for o in instr.operands],
                               instr.shape, instr.attrs, called, instr.name, instr.meta)
            copy.inferred = instr.inferred  # (the same shape objects: still what it says)
            mapping[id(instr)] = new.add(copy)
        if self.root is not None:
            new.root = mapping[id(self.root)]
        return new

    def __iter__(self) -> Iterable[Instruction]:  # type: ignore[override]
        return iter(self.instructions)

    def __repr__(self) -> str:
        return f"<Computation {self.name}: {len(self.instructions)} instructions>"

    def to_text(self) -> str:
        from xlapy.ir.printer import print_computation

        return print_computation(self)


def make_instruction(opcode: str, operands: Sequence[Instruction], attrs: Any = None,
                     called: Sequence[Computation] = (), name: str = "") -> Instruction:
    """An instruction whose shape comes from the op's shape inference."""
    from xlapy.ops.base import NO_ATTRS, infer_shape

    attrs = NO_ATTRS if attrs is None else attrs
    shape = infer_shape(opcode, [o.shape for o in operands], attrs, called)
    return Instruction(opcode, operands, shape, attrs, called, name).mark_inferred()


