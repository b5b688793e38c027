"""dense.py reads a one-element plain decimal (most of a JAX module's constants) without the
general path's token and range machinery; the array (bytes, dtype) or the error must be what
the general path gives, for every element type, at and past the edges of each range."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.stablehlo import dense
from xlapy.types import ElementType, Shape
from xlapy.types.element_type import ARRAY_TYPES

TYPES = [t for t in ARRAY_TYPES if not t.is_complex and t is not ElementType.PRED]
EDGES = ["0.000000e+00", "5.120000e+02", "-1.5", "+2", "1", "0", "-0.0", "1.", "00012", "-07",
         "65504", "65519.99", "65520", "3.4028235e38", "3.4028236e38", "3.5e38", "1e309",
         "-1e309", "127", "128", "-128", "-129", "255", "256", "4294967295",
         "9223372036854775807", "-9223372036854775808", "18446744073709551615", "1e-50",
         "4.9e-324", "1.0e-45", "7", "448", "464", "57344", "240", "0x7F", "inf", "nan", "true"]


def _both(body: str, et: ElementType, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    shape = Shape.array(et, ())

    def run() -> Any:
        try:
            a = dense.dense_to_array(body, shape)
            return a.dtype.str, a.tobytes(), a.shape
        except Exception as e:  # noqa: BLE001 - the error is compared
            return type(e).__name__, str(e)

    fast = run()
    with monkeypatch.context() as m:
        m.setattr(dense, "_plain_scalar", lambda body, et: None)
        general = run()
    return fast, general


@pytest.mark.parametrize("et", TYPES, ids=str)
def test_edges_match_the_general_path(et: ElementType, monkeypatch: pytest.MonkeyPatch) -> None:
    for body in EDGES:
        fast, general = _both(body, et, monkeypatch)
        assert fast == general, body


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TYPES), st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda v: f"{v:.6e}"),
    st.integers(-(1 << 70), 1 << 70).map(str)))
def test_random_values_match(et: ElementType, body: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        fast, general = _both(body, et, mp)
    assert fast == general


def test_splats_of_a_plain_scalar() -> None:
    a = dense.dense_to_array("2.5", Shape.array(ElementType.BF16, (2, 3)))
    assert a.shape == (2, 3) and float(a[1, 2]) == 2.5
