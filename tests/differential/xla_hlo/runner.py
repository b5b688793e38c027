"""Lower a program with jax three ways -- StableHLO, XLA's unoptimized HLO and XLA's
optimized HLO (after its CPU compiler's passes: fusions, layouts, scheduling) -- and run each
text on xlapy's cpu backend. Lowerings are cached per session."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from tests.differential.compare import jax_x64
from tests.differential.jax_programs.table import Program

#: way -> what the text is.
WAYS = {
    "stablehlo": "jax.jit(f).lower(*args).as_text()",
    "hlo": "lowered.as_text(dialect='hlo'): XLA's HLO before its passes",
    "optimized": "lowered.compile().as_text(): XLA's HLO after its CPU pipeline",
}


@dataclass(frozen=True)
class Texts:
    """The three texts of one program and JAX's outputs (flattened leaves)."""

    by_way: dict[str, str]
    expected: tuple[np.ndarray, ...]


@cache
def lower(program: Program) -> Texts:
    jax = jax_x64()
    lowered = jax.jit(program.fn, keep_unused=True).lower(*program.args)
    compiled = lowered.compile()
    out = compiled(*program.args)
    leaves = tuple(np.asarray(v) for v in jax.tree_util.tree_leaves(out))
    return Texts({"stablehlo": lowered.as_text(), "hlo": lowered.as_text(dialect="hlo"),
                  "optimized": compiled.as_text()}, leaves)
