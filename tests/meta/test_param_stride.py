"""tests/conftest.py's XLAPY_PARAM_STRIDE: what `make test`'s lower-target passes run."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

_TESTS = """
import pytest

@pytest.mark.parametrize("n", range(5))
def test_grid(n):
    pass

@pytest.mark.parametrize("n", range(2))
def test_pair(n):
    pass

def test_plain():
    pass
"""


@pytest.mark.parametrize("stride, ran", [("", 8), ("1", 8), ("2", 5), ("3", 4)])
def test_every_function_keeps_its_first_parameter_set(pytester: pytest.Pytester,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      stride: str, ran: int) -> None:
    monkeypatch.setenv("XLAPY_PARAM_STRIDE", stride)
    pytester.makeconftest("from tests.conftest import pytest_collection_modifyitems  # noqa")
    pytester.makepyfile(test_grid=_TESTS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist", "-v")
    result.assert_outcomes(passed=ran, deselected=8 - ran)
    if stride == "2":
        result.stdout.fnmatch_lines(["*test_grid?0? PASSED*", "*test_grid?2? PASSED*",
                                     "*test_grid?4? PASSED*", "*test_pair?0? PASSED*",
                                     "*test_plain PASSED*"])
