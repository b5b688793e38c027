"""The parsed form of a StableHLO file: generic ops, attributes and types, before import.

Both MLIR forms (generic `"stablehlo.add"(...)` and pretty `stablehlo.add ...`) parse into
these nodes; the importer turns them into the HLO IR.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xlapy.types import ElementType, Shape


@dataclass(frozen=True)
class TensorType:
    """A ranked tensor type with at least one dynamic (`?`) dimension (None entries)."""

    element_type: ElementType
    dims: tuple[int | None, ...]

    def __str__(self) -> str:
        dims = "".join(("?" if d is None else str(d)) + "x" for d in self.dims)
        return f"tensor<{dims}{self.element_type.shlo_name}>"


@dataclass(frozen=True)
class OpaqueType:
    """A type xlapy cannot represent yet (quantized, unranked...); kept as text."""

    text: str

    def __str__(self) -> str:
        return self.text


Type = Shape | TensorType | OpaqueType


def type_str(t: Any) -> str:
    return t.to_shlo() if isinstance(t, Shape) else str(t)


@dataclass(frozen=True)
class DenseAttr:
    """`dense<...> : type`; `body` is the raw text between the angle brackets."""

    body: str
    type: Any
    pos: int = 0


@dataclass(frozen=True)
class DenseArray:
    """`array<i64: 1, 2>`."""

    element: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class SymbolRef:
    name: str


@dataclass(frozen=True)
class StructAttr:
    """`#stablehlo.gather<offset_dims = [1], ...>` and friends."""

    name: str
    fields: dict[str, Any]


@dataclass(frozen=True)
class EnumAttr:
    """`#stablehlo<comparison_direction LT>` (kind, value) or a bare keyword `LT`."""

    kind: str
    value: str


@dataclass(frozen=True)
class TypedNumber:
    """`1 : i64`, `0.5 : f32` kept with its type for round-trips."""

    value: int | float
    type: Any


@dataclass(frozen=True)
class ConvDims:
    """The `[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]` dimension-number layout text."""

    lhs: tuple[str, ...]
    rhs: tuple[str, ...]
    out: tuple[str, ...]


@dataclass(frozen=True)
class FunctionTypeAttr:
    """A function type used as an attribute value (`function_type = (a, b) -> c`)."""

    inputs: tuple[Any, ...]
    results: tuple[Any, ...]


@dataclass(frozen=True)
class ValueRef:
    name: str
    index: int | None
    pos: int


@dataclass
class BlockArg:
    name: str
    type: Any
    pos: int = 0


@dataclass
class RegionNode:
    args: list[BlockArg]
    ops: list[OpNode]


@dataclass
class OpNode:
    """One op in generic terms. `results` lists (name, count) groups as written."""

    name: str
    results: list[tuple[str, int]]
    operands: list[ValueRef]
    attrs: dict[str, Any]
    regions: list[RegionNode] = field(default_factory=list)
    operand_types: list[Any] | None = None
    result_types: list[Any] | None = None
    pos: int = 0
    loc: str | None = None  # the raw text inside `loc(...)` after the op

    @property
    def num_results(self) -> int:
        results = self.results
        if len(results) == 1:  # (almost every op; the importer asks several times per op)
            return results[0][1]
        return sum(c for _, c in results)


@dataclass
class FuncNode:
    name: str
    args: list[BlockArg]
    result_types: list[Any]
    body: list[OpNode]
    visibility: str = "public"
    arg_attrs: list[dict[str, Any]] = field(default_factory=list)
    pos: int = 0
    result_attrs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ModuleNode:
    name: str
    attrs: dict[str, Any]
    funcs: list[FuncNode]
    pos: int = 0
    meshes: dict[str, Any] = field(default_factory=dict)  # sdy.mesh @name -> ir.sharding.Mesh
    locs: dict[str, str] = field(default_factory=dict)  # `#locN = loc(...)` aliases, raw
