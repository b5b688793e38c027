"""Issue 20: every program of programs.py run on the cpu backend from its StableHLO, from
XLA's unoptimized HLO and from XLA's optimized HLO (fusions of every kind, layouts,
annotations, LAPACK custom calls) matches JAX, with no interpreter fallback
(tests/fallbacks.py's check)."""

from __future__ import annotations

import pytest

from tests.differential.jax_programs.runner import compare, run_ours
from tests.differential.xla_hlo.programs import programs
from tests.differential.xla_hlo.runner import WAYS, lower

PROGRAMS = programs()


def test_suite_is_large_and_ids_unique() -> None:
    ids = [p.id for p in PROGRAMS]
    assert len(ids) >= 40
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("program", PROGRAMS, ids=[p.id for p in PROGRAMS])
def test_matches_jax_on_cpu(program, way: str) -> None:  # noqa: ANN001
    texts = lower(program)
    compare(program, run_ours(texts.by_way[way], program.args, "cpu"), texts.expected)
