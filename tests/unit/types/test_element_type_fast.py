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


def test_shape_array_checks_and_converts() -> None:
    """Shape.array converts numpy integers, keeps its messages (the first negative size)."""
    import numpy as np

    from xlapy.errors import XlapyError
    from xlapy.types import Shape

    s = Shape.array(ElementType.F32, [np.int64(3), 2])
    assert s.dimensions == (3, 2) and type(s.dimensions[0]) is int and s.layout is None
    assert Shape.array(ElementType.F32, (2, 3), (0, 1)).layout is not None
    with pytest.raises(XlapyError, match=r"negative dimension size -1 in shape \[2, -1, -3\]"):
        Shape.array(ElementType.F32, (2, -1, -3))
    with pytest.raises(XlapyError, match="tuple is not an array element type"):
        Shape.array(ElementType.TUPLE, (1,))
    with pytest.raises(XlapyError, match="has rank 1 but shape has rank 2"):
        Shape.array(ElementType.F32, (2, 3), (0,))
