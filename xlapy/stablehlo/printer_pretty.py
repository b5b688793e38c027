"""Pretty (custom-assembly) forms the printer emits, as JAX prints them; `syntax` reads them.

`pretty_op` returns the op's text without the `%x = ` prefix, or None when the op has no
pretty form here (or attributes the form cannot carry): the printer then prints it generic.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from xlapy.ir import Instruction
from xlapy.stablehlo.attrmap import _FROM_RESULT

_Fmt = Callable[[Instruction, str, str], str | None]


def _ints(values: Any) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def _set_fields(instr: Instruction) -> set[str]:
    """Attribute fields that differ from their defaults (result-type fields excluded)."""
    a = instr.attrs
    if not dataclasses.is_dataclass(a):
        return set()
    out = set()
    for f in dataclasses.fields(a):
        if f.name in _FROM_RESULT or f.name == "result_element_type":
            continue
        v = getattr(a, f.name)
        if f.default is not dataclasses.MISSING and v == f.default:
            continue
        if f.default_factory is not dataclasses.MISSING and v == f.default_factory():  # type: ignore[misc]
            continue
        out.add(f.name)
    return out


def _keyword_form(op: str, fields: tuple[tuple[str, str], ...]) -> _Fmt:
    """`op %a, %b, kw = [..] : type` for ops whose attributes are integer lists / ints."""

    def fmt(instr: Instruction, operands: str, ftype: str) -> str | None:
        if not _set_fields(instr) <= {f for _, f in fields}:
            return None
        parts = [operands] if operands else []
        for kw, field in fields:
            v = getattr(instr.attrs, field)
            parts.append(f"{kw} = {_ints(v) if isinstance(v, tuple) else int(v)}")
        head = ", ".join(parts)
        return f"stablehlo.{op} {head} : {ftype}"

    return fmt


def _compare(instr: Instruction, operands: str, ftype: str) -> str | None:
    a = instr.attrs
    text = f"stablehlo.compare  {a.comparison_direction.name}, {operands}"
    if a.compare_type is not None:
        text += f",  {a.compare_type.name}"
    return f"{text} : {ftype}"


def _slice(instr: Instruction, operands: str, ftype: str) -> str | None:
    a = instr.attrs
    ranges = ", ".join(f"{s}:{lim}" + (f":{st}" if st != 1 else "")
                       for s, lim, st in zip(a.start_indices, a.limit_indices, a.strides))
    return f"stablehlo.slice {operands} [{ranges}] : {ftype}"


def _gte(instr: Instruction, operands: str, ftype: str) -> str | None:
    return f"stablehlo.get_tuple_element {operands}[{instr.attrs.index}] : {ftype}"


def _dot_general(instr: Instruction, operands: str, ftype: str) -> str | None:
    a = instr.attrs
    if not _set_fields(instr) <= {"lhs_batching_dimensions", "rhs_batching_dimensions",
                                  "lhs_contracting_dimensions", "rhs_contracting_dimensions",
                                  "precision_config"}:
        return None
    parts = [operands]
    if a.lhs_batching_dimensions or a.rhs_batching_dimensions:
        parts.append(f"batching_dims = {_ints(a.lhs_batching_dimensions)} x "
                     f"{_ints(a.rhs_batching_dimensions)}")
    parts.append(f"contracting_dims = {_ints(a.lhs_contracting_dimensions)} x "
                 f"{_ints(a.rhs_contracting_dimensions)}")
    if a.precision_config:
        parts.append("precision = [" + ", ".join(p.name for p in a.precision_config) + "]")
    return f"stablehlo.dot_general {', '.join(parts)} : {ftype}"


def _typed_unary(op: str) -> _Fmt:
    """`op %x : (t) -> t'` (convert, reshape, bitcast_convert: the result type says it all)."""

    def fmt(instr: Instruction, operands: str, ftype: str) -> str | None:
        return f"stablehlo.{op} {operands} : {ftype}"

    return fmt


def _select(instr: Instruction, operands: str, ftype: str) -> str | None:
    pred, on_true = instr.operands[0].shape, instr.operands[1].shape
    if instr.operands[2].shape != on_true or instr.shape != on_true:
        return None
    return f"stablehlo.select {operands} : {pred.to_shlo()}, {on_true.to_shlo()}"


PRETTY: dict[str, _Fmt] = {
    "compare": _compare,
    "slice": _slice,
    "get_tuple_element": _gte,
    "dot_general": _dot_general,
    "select": _select,
    "broadcast_in_dim": _keyword_form("broadcast_in_dim", (("dims", "broadcast_dimensions"),)),
    "transpose": _keyword_form("transpose", (("dims", "permutation"),)),
    "reverse": _keyword_form("reverse", (("dims", "dimensions"),)),
    "iota": _keyword_form("iota", (("dim", "iota_dimension"),)),
    "concatenate": _keyword_form("concatenate", (("dim", "dimension"),)),
    "pad": _keyword_form("pad", (("low", "edge_padding_low"), ("high", "edge_padding_high"),
                                 ("interior", "interior_padding"))),
    "dynamic_slice": _keyword_form("dynamic_slice", (("sizes", "slice_sizes"),)),
    "get_dimension_size": _keyword_form("get_dimension_size", (("dim", "dimension"),)),
    "convert": _typed_unary("convert"),
    "reshape": _typed_unary("reshape"),
    "bitcast_convert": _typed_unary("bitcast_convert"),
}


def pretty_op(instr: Instruction, operands: str, ftype: str) -> str | None:
    fmt = PRETTY.get(instr.opcode)
    if fmt is None or instr.called:
        return None
    return fmt(instr, operands, ftype)
