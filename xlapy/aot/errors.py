"""The error `xlapy aot` raises for a program it cannot put into an object file."""

from __future__ import annotations

from xlapy.errors import XlapyError


class Unimplemented(XlapyError):
    """An op (or a type of it) with no in-object implementation: the program is refused,
    naming the op, rather than compiled into an object that would need Python."""

    def __init__(self, opcode: str, why: str) -> None:
        super().__init__(f"xlapy aot: {opcode} is not implemented ahead of time: {why}")
        self.opcode = opcode
        self.why = why


__all__ = ["Unimplemented"]
