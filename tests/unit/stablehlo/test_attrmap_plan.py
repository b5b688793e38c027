"""build_attrs walks a per-(op, attrs class) field plan worked out once; ops without
attributes get the shared NO_ATTRS; the parsed attribute dict is never modified (the nested
`dot_dimension_numbers` struct is flattened into a copy)."""

from __future__ import annotations

import pytest

from xlapy.ops.base import NO_ATTRS, NoAttrs
from xlapy.ops.collectives import AllGatherAttrs
from xlapy.ops.linalg import DotGeneralAttrs
from xlapy.ops.shape import BroadcastInDimAttrs
from xlapy.stablehlo.attrmap import AttrError, _field_plan, build_attrs
from xlapy.stablehlo.nodes import DenseArray, StructAttr, TypedNumber
from xlapy.types import ElementType, Shape

F32 = Shape.array(ElementType.F32, [2, 3])


def test_no_attrs_is_the_shared_instance() -> None:
    assert build_attrs("add", NoAttrs, {"ignored": 1}, [F32]) is NO_ATTRS


def test_plan_is_cached_and_spells_aliases() -> None:
    plan = _field_plan("all_gather", AllGatherAttrs)
    assert plan is not None and plan is _field_plan("all_gather", AllGatherAttrs)
    keys = {f.name: key for f, key, _, _ in plan}
    assert keys["channel_id"] == "channel_handle"
    assert keys["all_gather_dim"] == "all_gather_dim"


def test_nested_struct_flattened_into_a_copy() -> None:
    dims = StructAttr("dot", {"lhs_contracting_dimensions": [1],
                              "rhs_contracting_dimensions": [0]})
    attrs = {"dot_dimension_numbers": dims}
    got = build_attrs("dot_general", DotGeneralAttrs, attrs,
                      [Shape.array(ElementType.F32, [2, 4])], [F32])
    assert got.lhs_contracting_dimensions == (1,) and got.rhs_contracting_dimensions == (0,)
    assert attrs == {"dot_dimension_numbers": dims}  # not modified


def test_fields_from_text_and_result_and_missing() -> None:
    got = build_attrs("broadcast_in_dim", BroadcastInDimAttrs,
                      {"broadcast_dimensions": DenseArray("i64", (1,))},
                      [Shape.array(ElementType.F32, [4, 3])])
    assert got == BroadcastInDimAttrs(shape=(4, 3), broadcast_dimensions=(1,))
    with pytest.raises(AttrError, match="missing attribute 'broadcast_dimensions'"):
        build_attrs("broadcast_in_dim", BroadcastInDimAttrs, {},
                    [Shape.array(ElementType.F32, [4, 3])])


@pytest.mark.parametrize("value", [
    DenseArray("i64", (1, 0)), DenseArray("i64", ()), [2, 3], (4,), [True, 1],
    DenseArray("i1", (True, False)), [1 << 63], [-(1 << 63)], [(1 << 63) - 1]])
def test_int_tuples_as_convert_reads_them(value: object) -> None:
    """The tuple[int, ...] shortcut gives what convert() gives, or defers to it (bools,
    values past int64: convert's own result or error)."""
    from xlapy.ops.shape import TransposeAttrs
    from xlapy.stablehlo.attrmap import convert

    try:
        want: object = TransposeAttrs(convert(value, tuple[int, ...]))
    except AttrError as e:
        want = str(e)
    try:
        got: object = build_attrs("transpose", TransposeAttrs, {"permutation": value}, [F32])
    except AttrError as e:
        got = str(e).removeprefix("transpose: bad value for attribute 'permutation': ")
    assert got == want


def test_result_kinds() -> None:
    """What a field takes from the declared result types, by its type hint (once per hint)."""
    from xlapy.stablehlo.attrmap import _result_kind
    from xlapy.types import ElementType

    assert _result_kind(Shape) == _result_kind(Shape | None) == "shape"
    assert _result_kind(ElementType | None) == "element_type"
    assert _result_kind(tuple[int, ...]) == "dims"
    assert _result_kind(tuple[Shape, ...]) == "shapes"
    assert _result_kind(int) == ""


S64 = Shape.scalar(ElementType.S64)
S32 = Shape.scalar(ElementType.S32)


@pytest.mark.parametrize(("hint", "value"), [
    (int, 3), (int, True), (int, 1 << 63), (int, TypedNumber(2, S64)),
    (int, TypedNumber(2, S32)), (int, TypedNumber(2.0, Shape.scalar(ElementType.F32))),
    (int, [1]),
    (tuple[bool, ...], [False, True]), (tuple[bool, ...], [0, 1]),
    (tuple[bool, ...], DenseArray("i1", (True, False))), (tuple[bool, ...], ()),
    (tuple[tuple[int, int], ...], [[1, 1], [0, 2]]), (tuple[tuple[int, int], ...], []),
    (tuple[tuple[int, int], ...], [[1, 1, 1]]), (tuple[tuple[int, int], ...], [[True, 1]]),
    (tuple[tuple[int, int], ...], [[1 << 63, 0]]), (tuple[tuple[int, int], ...], [1, 2]),
    (tuple[int, ...] | None, [4, 5]), (tuple[int, ...] | None, None),
])
def test_plain_values_as_convert_reads_them(hint: object, value: object) -> None:
    """_plain_value gives convert()'s result, or leaves the value to convert() (never a
    different answer, never swallowing its error)."""
    from xlapy.stablehlo.attrmap import (
        _NOT_PLAIN,
        _PLAIN_KINDS,
        _plain_value,
        _strip_optional,
        convert,
    )

    kind = _PLAIN_KINDS.get(_strip_optional(hint))
    assert kind
    got = _plain_value(kind, value)
    if got is _NOT_PLAIN:
        return
    want = convert(value.value if isinstance(value, TypedNumber) else value, hint)
    assert got == want and type(got) is type(want)


def test_hints_are_typings() -> None:
    """_hints(cls) is typing.get_type_hints(cls) for every op's attributes class and every
    dataclass those hold (evaluated its own, cheaper way)."""
    import dataclasses
    import typing

    import xlapy.stablehlo  # noqa: F401 - registers the chlo / check / sdy ops
    from xlapy.ops.base import OPS
    from xlapy.stablehlo.attrmap import _hints

    todo = [op.attrs for op in OPS.values() if dataclasses.is_dataclass(op.attrs)]
    seen: set[type] = set()
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        try:
            want = typing.get_type_hints(cls)
        except TypeError:  # (Shape: its `tuple` method shadows the builtin in its annotations)
            with pytest.raises(TypeError):
                _hints(cls)
            continue
        assert _hints(cls) == want, cls
        for hint in want.values():
            for t in (hint, *typing.get_args(hint)):
                if isinstance(t, type) and dataclasses.is_dataclass(t):
                    todo.append(t)
    assert len(seen) > 50
