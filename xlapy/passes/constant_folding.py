"""HloConstantFolding: evaluate instructions whose operands are all constants.

Folding runs each op's own `evaluate`, so a folded value is bit-for-bit what the interpreter
would compute. Results over `max_elements` are left alone (folding would bloat the module),
and so are ops whose operands hold over `max_operand_elements` (as XLA's limit on operand
sizes: a reduce of a lazy 100M-element splat would take seconds and gigabytes to compile),
as are broadcasts and iotas (cheap to compute, large to store), side-effecting ops and loops.
An op of at most SMALL elements folds with small iotas and broadcast scalar constants among
its operands too: jnp.vander's exponents 5 - iota(6) are then a [6] constant, which a
kernel over [n, 6] reads per column (kernel_flat.py) where a computed [6] kept its rows one
masked vector each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xlapy.errors import XlapyError
from xlapy.ir import Computation, Instruction
from xlapy.ops.base import OPS
from xlapy.ops.core import ConstantAttrs
from xlapy.passes.pass_base import ComputationPass, add_instr, op_has_side_effects
from xlapy.types import Literal

#: Ops never folded: cheap generators whose folded form is just bigger, and control flow.
NOT_FOLDED = frozenset({"parameter", "constant", "broadcast_in_dim", "iota", "while", "case",
                        "if", "tuple", "get_tuple_element", "after_all", "optimization_barrier",
                        "rng", "rng_bit_generator", "partition_id", "replica_id", "fusion"})


#: The most elements of an op folded with iotas or broadcast constants among its operands.
SMALL = 256


def _generated(o: Instruction) -> bool:
    """A small iota, or a constant broadcast small (folding through them)."""
    return o.shape.is_array and o.shape.num_elements <= SMALL and (
        o.opcode == "iota" or (o.opcode == "broadcast_in_dim" and
                               o.operands[0].opcode == "constant"))


def _value(o: Instruction) -> Any:
    if o.opcode == "constant":
        return o.attrs.literal.to_value()
    vals = [_value(x) for x in o.operands]
    return OPS[o.opcode].evaluate(vals, o.attrs, o.shape, _Ctx(o))


class _Ctx:
    """The EvalContext folding hands to `evaluate` (called computations run via run_comp)."""

    def __init__(self, instr: Instruction) -> None:
        self.instruction = instr

    def call(self, index: int, *args: Any) -> Any:
        return run_computation(self.instruction.called[index], args)

    @property
    def num_regions(self) -> int:
        return len(self.instruction.called)

    @property
    def process(self) -> Any:
        return None

    @property
    def runtime(self) -> Any:
        raise XlapyError("constant folding cannot use runtime state")


def run_computation(comp: Computation, args: Sequence[Any]) -> Any:
    """A minimal evaluator for effect-free computations (the interpreter is a later layer)."""
    env: dict[int, Any] = {id(p): a for p, a in zip(comp.parameters, args)}
    for instr in comp.instructions:
        if instr.opcode == "parameter":
            continue
        vals = [env[id(o)] for o in instr.operands]
        env[id(instr)] = OPS[instr.opcode].evaluate(vals, instr.attrs, instr.shape, _Ctx(instr))
    assert comp.root is not None
    return env[id(comp.root)]


class ConstantFolding(ComputationPass):
    """Replaces all-constant-operand instructions by the constant they compute."""

    name = "constant-folding"

    def __init__(self, max_elements: int = 1 << 16, max_operand_elements: int = 1 << 22
                 ) -> None:
        self.max_elements = max_elements
        self.max_operand_elements = max_operand_elements

    def foldable(self, instr: Instruction) -> bool:
        if instr.opcode in NOT_FOLDED or not instr.shape.is_array:
            return False
        if instr.shape.num_elements > self.max_elements:
            return False
        small = instr.shape.num_elements <= SMALL
        if not all(o.opcode == "constant" or (small and _generated(o))
                   for o in instr.operands):
            return False
        if sum(o.shape.num_elements for o in instr.operands if o.shape.is_array) > \
                self.max_operand_elements:
            return False
        return not op_has_side_effects(instr)

    def run_on_computation(self, comp: Computation) -> bool:
        changed = False
        for instr in list(comp.instructions):
            if not self.foldable(instr):
                continue
            try:
                vals = [_value(o) for o in instr.operands]
                value = OPS[instr.opcode].evaluate(vals, instr.attrs, instr.shape, _Ctx(instr))
                lit = Literal.from_value(value, instr.shape)
            except Exception:  # noqa: BLE001 - an op that cannot fold stays as it is
                continue
            const = add_instr(comp, "constant", [], ConstantAttrs(lit), name=instr.name)
            instr.replace_all_uses_with(const)
            if not instr.users and instr is not comp.root:
                comp.remove(instr)
            changed = True
        return changed
