"""Instruction: one op application in a computation (XLA's HloInstruction)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from xlapy.ops.base import NO_ATTRS
from xlapy.types import Shape

if TYPE_CHECKING:
    from xlapy.ir.computation import Computation


class Instruction:
    """An op applied to operands, with one result shape (a tuple shape for several results).

    `called` holds the called computations (reducer, comparator, while cond/body, branches);
    `users` is maintained by the owning computation. `meta` carries front-door extras that do
    not change semantics (source location, frontend attributes, sharding).
    """

    __slots__ = ("opcode", "operands", "shape", "attrs", "called", "name", "parent", "users",
                 "meta", "inferred")

    def __init__(self, opcode: str, operands: Sequence[Instruction], shape: Shape,
                 attrs: Any = NO_ATTRS, called: Sequence[Computation] = (), name: str = "",
                 meta: dict[str, Any] | None = None) -> None:
        self.opcode = opcode
        self.operands: list[Instruction] = list(operands)
        self.shape = shape
        self.attrs = attrs
        self.called: list[Computation] = list(called)
        self.name = name
        self.parent: Computation | None = None
        self.users: list[Instruction] = []
        self.meta: dict[str, Any] = dict(meta or {})
        #: What `shape` was inferred from, when shape inference made it (make_instruction,
        #: the importer): (opcode, attrs, operand shapes, shape), the very objects. While
        #: they are still the instruction's, inference would give `shape` again, and the
        #: verifier skips it (`shape_is_inferred`). None: not known, verify infers.
        self.inferred: tuple[str, Any, tuple[Shape, ...], Shape] | None = None

    def replace_operand(self, index: int, new: Instruction) -> None:
        old = self.operands[index]
        self.operands[index] = new
        if self not in new.users:
            new.users.append(self)
        if old not in self.operands and self in old.users:
            old.users.remove(self)

    def replace_operand_with(self, old: Instruction, new: Instruction) -> None:
        for i, op in enumerate(self.operands):
            if op is old:
                self.replace_operand(i, new)

    def replace_all_uses_with(self, new: Instruction) -> None:
        """Point every user (and the root, if this is it) at `new`."""
        for user in list(self.users):
            user.replace_operand_with(self, new)
        if self.parent is not None and self.parent.root is self:
            self.parent.root = new

    def mark_inferred(self) -> Instruction:
        """Record that `shape` is what shape inference gives for the current opcode, attrs
        and operand shapes (the caller just ran it); returns self."""
        self.inferred = (self.opcode, self.attrs, tuple([o.shape for o in self.operands]),
                         self.shape)
        return self

    def shape_is_inferred(self) -> bool:
        """Is `shape` still what inference gave (mark_inferred), nothing it depends on since
        replaced? Instructions that call computations never are (their regions' signatures
        count too, and passes rewrite them)."""
        st = self.inferred
        if st is None or self.called:
            return False
        opcode, attrs, shapes, shape = st
        if (shape is not self.shape or attrs is not self.attrs or opcode != self.opcode
                or len(shapes) != len(self.operands)):
            return False
        for s, o in zip(shapes, self.operands):
            if s is not o.shape:
                return False
        return True

    @property
    def parameter_number(self) -> int:
        if self.opcode != "parameter":
            raise ValueError(f"{self.name} is not a parameter")
        return int(self.attrs.number)

    def same_op(self, other: Instruction) -> bool:
        """Same opcode, shape, attrs and called computations (CSE's notion of identical)."""
        return (self.opcode == other.opcode and self.shape == other.shape
                and self.attrs == other.attrs and self.called == other.called)

    def __repr__(self) -> str:
        ops = ", ".join(f"%{o.name}" for o in self.operands)
        return f"%{self.name} = {self.shape} {self.opcode}({ops})"
