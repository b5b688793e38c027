"""ElementType's kind queries read attributes set once per member, and members hash by
identity (Enum's own hash runs Python code; element types are hashed in every shape rule)."""

from __future__ import annotations

import pickle

import pytest

from xlapy.types import ElementType
from xlapy.types.element_type import _INFO, Kind


@pytest.mark.parametrize("t", list(ElementType))
def test_queries_follow_the_table(t: ElementType) -> None:
    info = _INFO[t]
    assert t.info is info and t.kind is info.kind and t.bits == info.bits
    assert t.is_array == (info.kind not in (Kind.TOKEN, Kind.TUPLE))
    assert t.is_float == (info.kind is Kind.FLOAT)
    assert t.is_complex == (info.kind is Kind.COMPLEX)
    assert t.is_signed == (info.kind is Kind.SIGNED)
    assert t.is_unsigned == (info.kind is Kind.UNSIGNED)
    assert t.is_integer == (info.kind in (Kind.SIGNED, Kind.UNSIGNED))


def test_members_hash_and_compare_by_identity() -> None:
    e = ElementType
    assert len({*e, *e}) == len(e)
    table = {t: t.value for t in e}
    assert all(table[e(t.value)] == t.value for t in e)
    assert e.F32 in frozenset([e.F32, e.S32]) and e.F64 not in frozenset([e.F32])
    assert pickle.loads(pickle.dumps(e.BF16)) is e.BF16
    assert hash(e.F32) == hash(e["F32"]) == hash(e("f32"))
