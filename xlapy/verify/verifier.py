"""Structural checks of a module plus every instruction's shape inference run again,
except for an instruction whose shape inference made from the inputs it still holds
(Instruction.shape_is_inferred: the cpu backend verifies each module right after the
importer inferred every shape; the same inference on the same objects gives the same
answer)."""

from __future__ import annotations

from xlapy.errors import ShapeInferenceError, VerificationError, XlapyError
from xlapy.ir import Computation, Instruction, Module
from xlapy.ops.base import OPS, infer_shape
from xlapy.ops.result_types import result_type_label


def verify_module(module: Module) -> None:
    """Raise VerificationError on the first broken invariant."""
    if module.entry is None:
        raise VerificationError("module", "module_entry", f"module {module.name} has no entry")
    known = {id(c) for c in module.computations}
    for comp in module.computations:
        verify_computation(comp)
        for instr in comp.instructions:
            for callee in instr.called:
                if id(callee) not in known:
                    raise VerificationError(
                        instr.opcode, "called_computation",
                        f"%{instr.name} calls {callee.name}, which is not in module {module.name}",
                    )


def verify_computation(comp: Computation) -> None:
    defined: set[int] = set()
    numbers = sorted(p.parameter_number for p in comp.parameters)
    if numbers != list(range(len(numbers))):
        raise VerificationError("parameter", "parameter_numbers",
                                f"computation {comp.name} has parameter numbers {numbers}")
    if comp.root is None:
        raise VerificationError("computation", "root", f"computation {comp.name} has no root")
    user_sets: dict[int, set[int]] = {}
    for instr in comp.instructions:
        if instr.parent is not comp:
            raise VerificationError(instr.opcode, "parent",
                                    f"%{instr.name} does not belong to {comp.name}")
        for o in instr.operands:
            if id(o) not in defined:
                raise VerificationError(
                    instr.opcode, "operand_order",
                    f"%{instr.name} uses %{o.name} before it is defined in {comp.name}",
                )
            if not _lists_user(o, instr, user_sets):
                raise VerificationError(instr.opcode, "users",
                                        f"%{o.name} does not list its user %{instr.name}")
        if instr.opcode not in OPS:
            raise VerificationError(instr.opcode, "opcode", f"unknown op '{instr.opcode}'")
        if instr.shape_is_inferred():  # inference ran on these very inputs: same answer
            defined.add(id(instr))
            continue
        try:
            shape = infer_shape(instr.opcode, [o.shape for o in instr.operands], instr.attrs,
                                instr.called)
        except ShapeInferenceError as e:
            raise VerificationError(instr.opcode, e.label,
                                    f"{e} (in %{instr.name} of {comp.name})") from None
        except XlapyError as e:
            raise VerificationError(instr.opcode, "", f"%{instr.name}: {e}") from None
        if shape != instr.shape:
            raise VerificationError(
                instr.opcode, result_type_label(instr.opcode, shape, instr.shape),
                f"%{instr.name} has shape {instr.shape} but its operands give {shape}",
            )
        defined.add(id(instr))
    if id(comp.root) not in defined:
        raise VerificationError("computation", "root",
                                f"root of {comp.name} is not one of its instructions")


def _lists_user(operand: Instruction, user: Instruction, sets: dict[int, set[int]]) -> bool:
    """Is `user` in operand.users? A short list is searched (Instruction compares by
    identity); a long one's ids become a set once, so a value with many users stays linear."""
    users = operand.users
    if len(users) <= 16:
        return user in users
    ids = sets.get(id(operand))
    if ids is None:
        ids = sets[id(operand)] = {id(u) for u in users}
    return id(user) in ids
