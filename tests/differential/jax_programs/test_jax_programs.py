"""Issue 4's differential suite: every program of the table lowered by JAX, run by xlapy and
compared with JAX (exact unless the program states a tolerance), and parse(print(m)) == m.

Known failures are listed in XFAIL / XFAIL_ROUND_TRIP with the reason (strict: a fix shows up
as an XPASS to remove from the table); nothing is skipped.
"""

from __future__ import annotations

import pytest

from tests.differential.compare import jax_x64
from tests.differential.jax_programs import array_programs, lax_programs, model_programs
from tests.differential.jax_programs.runner import check_program, check_round_trip
from tests.differential.jax_programs.table import Program

jax_x64()

PROGRAMS: list[Program] = (lax_programs.programs() + array_programs.programs()
                           + model_programs.programs())

#: program id -> why its module does not survive parse(print(m)) today.
XFAIL_ROUND_TRIP: dict[str, str] = {}

#: program id -> why running it does not match JAX today.
XFAIL: dict[str, str] = {
    **XFAIL_ROUND_TRIP,
}


#: program id -> why the cpu backend does not match JAX today.
XFAIL_CPU: dict[str, str] = {**XFAIL}


def _params(table: dict[str, str]) -> list[object]:
    return [pytest.param(p, id=p.id, marks=[pytest.mark.xfail(reason=table[p.id], strict=True)]
                         if p.id in table else []) for p in PROGRAMS]


def test_table_is_large_and_ids_unique() -> None:
    ids = [p.id for p in PROGRAMS]
    assert len(ids) >= 300
    assert len(set(ids)) == len(ids)
    assert not (set(XFAIL) | set(XFAIL_ROUND_TRIP)) - set(ids), "stale xfail ids"


@pytest.mark.parametrize("program", _params(XFAIL))
def test_matches_jax(program: Program) -> None:
    check_program(program, "interpreter")


@pytest.mark.parametrize("program", _params(XFAIL_CPU))
def test_matches_jax_on_cpu(program: Program) -> None:
    """The same programs on the native cpu backend (issue 7: the differential suite passes on
    cpu as on the interpreter)."""
    check_program(program, "cpu")


@pytest.mark.parametrize("program", _params(XFAIL_ROUND_TRIP))
def test_round_trip(program: Program) -> None:
    check_round_trip(program)
