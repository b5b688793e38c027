"""AlgebraicSimplifier: rewrite rows from `algebraic_rules`, `algebraic_rules_shape` and
`algebraic_rules_reduce`.

Each instruction is matched against the rows for its opcode; the first rewrite that applies
replaces it (new instructions come from an `Emitter`, and DCE drops what is left unused).
`fired` counts rewrites by rule name (tests and `xlapy opt` read it). With `exact_only`, rows
that are not bit-exact on floats are skipped for floating-point and complex instructions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from xlapy.ir import Computation
from xlapy.passes.algebraic_rules import ARITH_RULES, Rule
from xlapy.passes.algebraic_rules_reduce import REDUCE_RULES
from xlapy.passes.algebraic_rules_shape import SHAPE_RULES
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass

RULES: list[Rule] = ARITH_RULES + SHAPE_RULES + REDUCE_RULES


def rules_by_opcode(rules: Iterable[Rule]) -> dict[str, list[Rule]]:
    table: dict[str, list[Rule]] = {}
    for r in rules:
        table.setdefault(r.opcode, []).append(r)
    return table


class AlgebraicSimplifier(ComputationPass):
    """Applies the rewrite rows until none matches in one sweep (the caller iterates)."""

    name = "algsimp"

    def __init__(self, exact_only: bool = False, rules: Iterable[Rule] | None = None,
                 disabled: Iterable[str] = ()) -> None:
        off = set(disabled)
        self.rules = [r for r in (RULES if rules is None else rules) if r.name not in off]
        self.table = rules_by_opcode(self.rules)
        self.exact_only = exact_only
        self.fired: Counter[str] = Counter()

    def run_on_computation(self, comp: Computation) -> bool:
        e = Emitter(comp, self.module)
        changed = False
        for instr in list(comp.post_order()):
            if instr.parent is not comp:
                continue  # removed by an earlier rewrite in this sweep
            rows = self.table.get(instr.opcode)
            if not rows:
                continue
            inexact_type = instr.shape.is_array and (instr.shape.element_type.is_float
                                                     or instr.shape.element_type.is_complex)
            for rule in rows:
                if self.exact_only and inexact_type and not rule.float_exact:
                    continue
                new = rule.fn(instr, e)
                if new is None or new is instr:
                    continue
                if new.shape != instr.shape:
                    raise AssertionError(f"rule {rule.name} changed {instr.shape} to "
                                         f"{new.shape}")
                instr.replace_all_uses_with(new)
                if not instr.users and instr is not comp.root:
                    comp.remove(instr)
                self.fired[rule.name] += 1
                changed = True
                break
        return changed
