"""StableHLO attributes -> each OpDef's attrs dataclass, driven by the dataclass's type hints.

Field names are the spec's attribute names, so most ops need no table row: a field takes the
attribute of the same name, converted by its type hint (tuples, enums, nested dataclasses,
shapes). Fields StableHLO carries in the result type (`shape`, `new_element_type`,
`result_shapes`...) come from the declared result types. `ALIASES` covers the few spellings
that differ.

Attributes no field takes are dropped. Among them `result_accuracy =
#stablehlo.result_accuracy<atol, rtol, ulps, mode>` on transcendental ops: a request for at
least that accuracy which xlapy's ops carry no field for; the interpreter evaluates in the
element type's precision or better (DEFAULT), and the cpu backend's polynomials have fixed,
measured ulp bounds (`backends/cpu/math_poly.py`), so a TOLERANCE request is not checked.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import sys
import types
import typing
from functools import cache
from typing import Any

import numpy as np

from xlapy.errors import XlapyError
from xlapy.ops.base import NO_ATTRS, NoAttrs
from xlapy.stablehlo.dense import dense_to_array
from xlapy.stablehlo.nodes import (
    ConvDims,
    DenseArray,
    DenseAttr,
    EnumAttr,
    StructAttr,
    SymbolRef,
    TypedNumber,
)
from xlapy.types import ElementType, Literal, Shape


class AttrError(XlapyError):
    """An attribute is missing or has a value the op's attribute type cannot take."""


#: (op, dataclass field) -> StableHLO attribute name where they differ.
ALIASES: dict[tuple[str, str], str] = {
    ("dot_general", "*"): "dot_dimension_numbers",
    ("chlo.ragged_dot", "*"): "ragged_dot_dimension_numbers",
    ("scatter", "scatter_dimension_numbers"): "scatter_dimension_numbers",
    ("all_gather", "channel_id"): "channel_handle",
    ("all_reduce", "channel_id"): "channel_handle",
    ("reduce_scatter", "channel_id"): "channel_handle",
    ("all_to_all", "channel_id"): "channel_handle",
    ("collective_permute", "channel_id"): "channel_handle",
    ("collective_broadcast", "channel_id"): "channel_handle",
    ("check.expect_serialized_eq", "iteration"): "iter",
    ("custom_call", "mhlo_backend_config"): "mhlo.backend_config",
}

#: Fields filled from the declared result type(s) when the text does not give them.
_FROM_RESULT = {"shape", "new_element_type", "result_shapes", "result_shape", "element_type",
                "new_sizes", "result_type"}


@cache
def _hints(cls: type) -> dict[str, Any]:
    """typing.get_type_hints(cls), made cheaper on first use (every attrs class pays it on
    its first compile): each annotation string is evaluated as get_type_hints does (the
    defining module's names first, then the class's), and the same string in the same
    module is evaluated once (unless the class itself defines a name it uses)."""
    out: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        ann = base.__dict__.get("__annotations__")
        if not ann:
            continue
        module = sys.modules[base.__module__]
        for name, hint in ann.items():
            if isinstance(hint, str):
                hint = _eval_hint(hint, module, base)
            out[name] = type(None) if hint is None else hint
    return out


_NAMES = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EVALUATED: dict[tuple[str, str], Any] = {}


def _eval_hint(text: str, module: Any, cls: type) -> Any:
    own = vars(cls)
    shared = not any(n in own for n in _NAMES.findall(text))
    key = (module.__name__, text)
    if shared and key in _EVALUATED:
        return _EVALUATED[key]
    value = eval(text, dict(own), module.__dict__)  # noqa: S307 - an annotation, as typing does
    if shared:
        _EVALUATED[key] = value
    return value


#: Inherent attributes StableHLO declares `I64Attr`: `dimension = 1 : i32` fails its verifier
#: ("64-bit signless integer attribute"), so it is a ParseError here too. Untyped values (the
#: pretty forms) are i64 by definition.
I64_ATTRS: dict[str, frozenset[str]] = {
    "iota": frozenset({"iota_dimension"}), "dynamic_iota": frozenset({"iota_dimension"}),
    "concatenate": frozenset({"dimension"}), "sort": frozenset({"dimension"}),
    "get_dimension_size": frozenset({"dimension"}), "all_gather": frozenset({"all_gather_dim"}),
    "all_to_all": frozenset({"split_dimension", "concat_dimension", "split_count"}),
    "reduce_scatter": frozenset({"scatter_dimension"}),
    "convolution": frozenset({"feature_group_count", "batch_group_count"}),
    "dynamic_conv": frozenset({"feature_group_count", "batch_group_count"}),
    "batch_norm_inference": frozenset({"feature_index"}),
    "batch_norm_training": frozenset({"feature_index"}),
    "batch_norm_grad": frozenset({"feature_index"}),
}
_S64 = Shape.scalar(ElementType.S64)


def _check_width(op: str, key: str, value: Any) -> None:
    if isinstance(value, TypedNumber) and key in I64_ATTRS.get(op, ()) and value.type != _S64:
        shown = value.type.element_type.shlo_name if isinstance(value.type, Shape) else value.type
        raise AttrError(f"{op}: attribute '{key}' must be a 64-bit signless integer (i64), "
                        f"got {value.value} : {shown}")


def build_attrs(op: str, cls: type, attrs: dict[str, Any], result_types: list[Any],
                operand_types: list[Shape] | None = None) -> Any:
    """Instantiate `cls` for op `op` from parsed `attrs` and the declared result types.

    `result_element_type` (dot_general, convolution) is set only when the declared result
    element type differs from the operands'."""
    if cls is NoAttrs:  # (most ops: element-wise)
        return NO_ATTRS
    plan = _field_plan(op, cls)
    if plan is None:
        return cls()
    flat = attrs
    nested = ALIASES.get((op, "*"))
    if nested and isinstance(flat.get(nested), StructAttr):
        flat = dict(attrs)
        flat.update(flat.pop(nested).fields)
    kwargs: dict[str, Any] = {}
    for f, key, hint, fast in plan:
        if key in flat:
            value = flat[key]
            if fast:  # plain values of the common types are taken as they are
                got = _plain_value(fast, value)
                if got is not _NOT_PLAIN:
                    kwargs[f.name] = got
                    continue
            _check_width(op, key, value)
            try:
                kwargs[f.name] = convert(value, hint)
            except (AttrError, ValueError, TypeError, KeyError) as e:
                raise AttrError(f"{op}: bad value for attribute '{key}': {e}") from None
            continue
        if f.name == "result_element_type" and result_types and operand_types:
            r, o = result_types[0], operand_types[0]
            if isinstance(r, Shape) and r.is_array and o.is_array and \
                    r.element_type is not o.element_type:
                kwargs[f.name] = r.element_type
            continue
        if f.name in _FROM_RESULT and result_types:
            value = _from_result(f.name, hint, result_types)
            if value is not None:
                kwargs[f.name] = value
                continue
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise AttrError(f"{op}: missing attribute '{key}'")
    return cls(**kwargs)


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_NOT_PLAIN = object()
#: Type hints whose plain values build_attrs takes without convert() (_plain_value).
_PLAIN_KINDS = {int: "int", tuple[int, ...]: "ints", tuple[bool, ...]: "bools",
                tuple[tuple[int, int], ...]: "pairs"}


@cache
def _field_plan(op: str, cls: type
                ) -> tuple[tuple[dataclasses.Field[Any], str, Any, str], ...] | None:
    """(field, attribute name, type hint, plain kind) per field of `cls` as op `op` spells
    it (None: not a dataclass): what build_attrs walks, worked out once per op instead of
    per instruction. The plain kind (_PLAIN_KINDS; '' for none) names the shortcut."""
    if not dataclasses.is_dataclass(cls):
        return None
    hints = _hints(cls)
    return tuple((f, ALIASES.get((op, f.name), f.name), hints[f.name],
                  _PLAIN_KINDS.get(_strip_optional(hints[f.name]), ""))
                 for f in dataclasses.fields(cls))


def _int64(v: Any) -> bool:
    return type(v) is int and _I64_MIN <= v <= _I64_MAX


def _plain_value(kind: str, value: Any) -> Any:
    """`value` as convert() makes it, when it is plain (int64s, bools, [lo, hi] pairs of
    int64s, an `N : i64`): _NOT_PLAIN otherwise (convert() then decides, errors included)."""
    if kind == "int":
        if isinstance(value, TypedNumber):
            if value.type != _S64:  # (an i32 where i64 is due is _check_width's error)
                return _NOT_PLAIN
            value = value.value
        return value if _int64(value) else _NOT_PLAIN
    seq = value.values if isinstance(value, DenseArray) else value
    if not isinstance(seq, (list, tuple)):
        return _NOT_PLAIN
    if kind == "ints":
        ok = all(_int64(v) for v in seq)
    elif kind == "bools":
        ok = all(type(v) is bool for v in seq)
    else:  # pairs
        ok = all(isinstance(v, (list, tuple)) and len(v) == 2 and _int64(v[0])
                 and _int64(v[1]) for v in seq)
        return tuple(tuple(v) for v in seq) if ok else _NOT_PLAIN
    return tuple(seq) if ok else _NOT_PLAIN


def _from_result(name: str, hint: Any, result_types: list[Any]) -> Any:
    shapes = [t for t in result_types if isinstance(t, Shape)]
    if len(shapes) != len(result_types) or not shapes:
        return None
    first = shapes[0]
    kind = _result_kind(hint)
    if kind == "shape":
        return first
    if kind == "element_type":
        return first.element_type if first.is_array else None
    if kind == "shapes":
        return tuple(shapes)
    if kind == "dims":
        return tuple(first.dimensions)
    return None


@cache
def _result_kind(hint: Any) -> str:
    """What a field of type `hint` takes from the declared result types (_from_result):
    worked out once per hint (typing's introspection is slow)."""
    base = _strip_optional(hint)
    if base is Shape:
        return "shape"
    if base is ElementType:
        return "element_type"
    if typing.get_origin(base) is tuple:
        args = typing.get_args(base)
        return "shapes" if args and args[0] is Shape else "dims"
    return ""


def _strip_optional(hint: Any) -> Any:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def convert(value: Any, hint: Any) -> Any:
    """Convert a parsed attribute value to the Python type `hint` names."""
    if value is None:
        return None
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        last: Exception | None = None
        for a in args:
            try:
                return convert(value, a)
            except (AttrError, ValueError, TypeError, KeyError) as e:
                last = e
        raise AttrError(str(last))
    if isinstance(value, TypedNumber):
        value = value.value
    if hint is Any:
        return plain_value(value)
    if hint is bool:
        if isinstance(value, DenseAttr):
            return bool(_dense(value).reshape(-1)[0])
        if isinstance(value, (bool, int, np.bool_)):
            return bool(value)
        raise AttrError(f"expected a boolean, got {_show(value)}")
    if hint is int:
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, int):
            return _i64(value)
        if isinstance(value, StructAttr) and "handle" in value.fields:  # channel_handle
            return _i64(int(plain_value(value.fields["handle"])))
        if isinstance(value, DenseAttr):
            return int(_dense(value).reshape(-1)[0])
        raise AttrError(f"expected an integer, got {_show(value)}")
    if hint is float:
        if isinstance(value, (int, float)):
            return float(value)
        raise AttrError(f"expected a float, got {_show(value)}")
    if hint is str:
        if isinstance(value, str):
            return value
        if isinstance(value, SymbolRef):
            return value.name
        if isinstance(value, EnumAttr):
            return value.value
        if isinstance(value, Shape) and value.is_array and value.rank == 0:
            return value.element_type.shlo_name  # a type name (dot_algorithm's types)
        raise AttrError(f"expected a string, got {_show(value)}")
    if hint is Shape:
        if isinstance(value, Shape):
            return value
        raise AttrError(f"expected a type, got {_show(value)}")
    if hint is ElementType:
        if isinstance(value, Shape) and value.is_array:
            return value.element_type
        raise AttrError(f"expected an element type, got {_show(value)}")
    if hint is Literal:
        if isinstance(value, DenseAttr) and isinstance(value.type, Shape):
            return Literal(value.type, _dense(value))
        raise AttrError(f"expected a dense literal, got {_show(value)}")
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum(value, hint)
    if dataclasses.is_dataclass(hint):
        return _dataclass(value, hint)
    origin = typing.get_origin(hint)
    if origin is tuple:
        args = typing.get_args(hint)
        items = _sequence(value)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(convert(v, args[0]) for v in items)
        if len(items) != len(args):
            raise AttrError(f"expected {len(args)} values, got {len(items)}")
        return tuple(convert(v, a) for v, a in zip(items, args))
    raise AttrError(f"cannot convert {_show(value)} to {hint}")


def _sequence(value: Any) -> list[Any]:
    if isinstance(value, DenseArray):
        return list(value.values)
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, dict):
        return sorted(value.items())
    if isinstance(value, DenseAttr):
        return _dense(value).tolist()
    raise AttrError(f"expected a list, got {_show(value)}")


def _i64(v: int) -> int:
    """Integer attributes are 64-bit in StableHLO (MLIR refuses wider literals)."""
    if not -(1 << 63) <= v < (1 << 63):
        raise AttrError(f"integer {v} does not fit a 64-bit attribute")
    return v


def _dense(value: DenseAttr) -> np.ndarray:
    if not isinstance(value.type, Shape):
        raise AttrError("a dense attribute needs a static tensor type")
    return dense_to_array(value.body, value.type)


_ENUM_SPELLINGS = {"NOTRANSPOSE": "NO_TRANSPOSE"}


def _enum(value: Any, cls: type[enum.Enum]) -> enum.Enum:
    if isinstance(value, EnumAttr):
        text: Any = value.value
    elif isinstance(value, (str, int)):
        text = value
    else:
        raise AttrError(f"expected a {cls.__name__}, got {_show(value)}")
    if isinstance(text, int) and not isinstance(text, bool):
        for member in cls:
            if member.value == text:
                return member
        raise AttrError(f"{text} is not a {cls.__name__}")
    key = _ENUM_SPELLINGS.get(str(text).upper(), str(text).upper())
    for member in cls:
        if member.name == key or str(member.value).upper() == key:
            return member
    raise AttrError(f"'{text}' is not a {cls.__name__} "
                    f"({', '.join(m.name for m in cls)})")


_DIGITS = re.compile(r"\d+")  # (compiled here: a first convolution paid re's compile)
_CONV_FIELDS = {"input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions"}


def _dataclass(value: Any, cls: type) -> Any:
    if isinstance(value, ConvDims) and _CONV_FIELDS <= {f.name for f in dataclasses.fields(cls)}:
        return cls(**conv_dims_fields(value))
    if isinstance(value, StructAttr):
        fields = value.fields
    elif isinstance(value, dict):
        fields = value
    else:
        raise AttrError(f"expected {cls.__name__}, got {_show(value)}")
    hints = _hints(cls)
    kwargs = {}
    names = {f.name for f in dataclasses.fields(cls)}
    for key, v in fields.items():
        if key in names:
            kwargs[key] = convert(v, hints[key])
        elif key == "type" and "type" not in names:
            continue
        else:
            raise AttrError(f"{cls.__name__} has no field '{key}'")
    if isinstance(value, StructAttr):  # MLIR omits fields at their default ([] and 0)
        for f in dataclasses.fields(cls):
            if f.name in kwargs or f.default is not dataclasses.MISSING or \
                    f.default_factory is not dataclasses.MISSING:
                continue
            hint = _strip_optional(hints[f.name])
            if typing.get_origin(hint) is tuple:
                kwargs[f.name] = ()
            elif hint is int:
                kwargs[f.name] = 0
    return cls(**kwargs)


def conv_dims_fields(d: ConvDims) -> dict[str, Any]:
    """`[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]` -> ConvDimensionNumbers fields."""
    def split(group: tuple[str, ...], a: str, b: str) -> tuple[int, int, tuple[int, ...]]:
        if a not in group or b not in group:
            raise AttrError(f"convolution layout {list(group)} needs '{a}' and '{b}'")
        spatial = sorted((int(c), i) for i, c in enumerate(group) if _DIGITS.fullmatch(c))
        return group.index(a), group.index(b), tuple(i for _, i in spatial)

    ib, if_, isp = split(d.lhs, "b", "f")
    ki, ko, ksp = split(d.rhs, "i", "o")
    ob, of, osp = split(d.out, "b", "f")
    return {"input_batch_dimension": ib, "input_feature_dimension": if_,
            "input_spatial_dimensions": isp, "kernel_input_feature_dimension": ki,
            "kernel_output_feature_dimension": ko, "kernel_spatial_dimensions": ksp,
            "output_batch_dimension": ob, "output_feature_dimension": of,
            "output_spatial_dimensions": osp}


def plain_value(value: Any) -> Any:
    """A hashable Python value for `Any`-typed fields (composite attributes...)."""
    if isinstance(value, TypedNumber):
        return value.value
    if isinstance(value, dict):
        return tuple(sorted((k, plain_value(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(plain_value(v) for v in value)
    if isinstance(value, DenseArray):
        return value.values
    if isinstance(value, DenseAttr):
        return tuple(_dense(value).reshape(-1).tolist())
    if isinstance(value, EnumAttr):
        return value.value
    if isinstance(value, SymbolRef):
        return value.name
    return value


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."
