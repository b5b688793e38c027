"""`#stablehlo.dot_algorithm<...>`: dot_general's `algorithm` attribute and its constraints.

The algorithm names the precision the operands are rounded to, the accumulation type and how
many primitive products make up one (bf16 x3/x6/x9 split products, tf32 x3). StableHLO accepts
only the combinations some hardware supports (its `getKnownDotAlgorithm` table, mirrored in
`KNOWN`), positive counts, and DEFAULT precision_config alongside an algorithm: the algorithm
replaces the precision hint. xlapy checks those rules; evaluation computes in the operands'
own precision or better, which every known algorithm allows.
"""

from __future__ import annotations

from dataclasses import dataclass

from xlapy.ops.attrs import Precision
from xlapy.ops.base import check

#: f8 types any `ANY_F8_ANY_F8_*` algorithm takes (their StableHLO spellings).
F8_TYPES = frozenset({"f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ", "f8E4M3B11FNUZ",
                      "f8E4M3", "f8E3M4"})

#: (lhs precision type, rhs precision type, accumulation type) -> allowed primitive op counts,
#: for single-component operands without imprecise accumulation.
KNOWN: dict[tuple[str, str, str], frozenset[int]] = {
    ("f16", "f16", "f16"): frozenset({1}),
    ("f16", "f16", "f32"): frozenset({1}),
    ("bf16", "bf16", "bf16"): frozenset({1}),
    ("bf16", "bf16", "f32"): frozenset({1, 3, 6, 9}),
    ("tf32", "tf32", "f32"): frozenset({1, 3}),
    ("f32", "f32", "f32"): frozenset({1}),
    ("f64", "f64", "f64"): frozenset({1}),
}


@dataclass(frozen=True)
class DotAlgorithm:
    """The fields of `#stablehlo.dot_algorithm`, types by their StableHLO spelling (`tf32`,
    `bf16`, `f8E4M3FN`)."""

    lhs_precision_type: str
    rhs_precision_type: str
    accumulation_type: str
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False


def is_known(a: DotAlgorithm) -> bool:
    """StableHLO's `getKnownDotAlgorithm`: is this combination supported anywhere?"""
    if a.lhs_component_count != 1 or a.rhs_component_count != 1:
        return False
    lhs, rhs, acc = a.lhs_precision_type, a.rhs_precision_type, a.accumulation_type
    if lhs in F8_TYPES and rhs in F8_TYPES:
        return acc == "f32" and a.num_primitive_operations == 1
    if a.allow_imprecise_accumulation:
        return False
    return a.num_primitive_operations in KNOWN.get((lhs, rhs, acc), frozenset())


def check_algorithm(a: DotAlgorithm, precision_config: tuple[Precision, ...]) -> None:
    """dot_general C21-C25 (StableHLO numbering): DEFAULT precision with an algorithm,
    positive counts, a known algorithm."""
    check(all(p is Precision.DEFAULT for p in precision_config), "dot_general_c21",
          f"precision_config {[p.name for p in precision_config]} must be DEFAULT when an "
          "algorithm is set")
    check(a.lhs_component_count > 0, "dot_general_c22",
          f"lhs_component_count {a.lhs_component_count} must be positive")
    check(a.rhs_component_count > 0, "dot_general_c23",
          f"rhs_component_count {a.rhs_component_count} must be positive")
    check(a.num_primitive_operations > 0, "dot_general_c24",
          f"num_primitive_operations {a.num_primitive_operations} must be positive")
    check(is_known(a), "dot_general_c25",
          f"dot algorithm {a.lhs_precision_type} x {a.rhs_precision_type} -> "
          f"{a.accumulation_type} (components {a.lhs_component_count}/"
          f"{a.rhs_component_count}, {a.num_primitive_operations} primitive operation(s), "
          f"imprecise accumulation {a.allow_imprecise_accumulation}) is not known to be "
          "supported on any hardware")
