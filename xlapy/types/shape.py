"""Shape (array, tuple or token) and Layout (seed 001's minor_to_major with padding)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xlapy.errors import XlapyError
from xlapy.types.element_type import ElementType


@dataclass(frozen=True)
class Layout:
    """Physical order of an array's dimensions, fastest-varying first (seed 001).

    `padded_dimensions`, when set, gives each dimension's size in memory (>= its logical size);
    the extra elements hold `padding_value`.
    """

    minor_to_major: tuple[int, ...]
    padded_dimensions: tuple[int, ...] | None = None
    padding_value: float = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "minor_to_major", tuple(int(d) for d in self.minor_to_major))
        if sorted(self.minor_to_major) != list(range(len(self.minor_to_major))):
            raise XlapyError(
                f"layout minor_to_major {list(self.minor_to_major)} is not a permutation"
            )
        if self.padded_dimensions is not None:
            pd = tuple(int(d) for d in self.padded_dimensions)
            object.__setattr__(self, "padded_dimensions", pd)
            if len(pd) != len(self.minor_to_major):
                raise XlapyError(
                    f"layout padded_dimensions {list(pd)} has rank {len(pd)}, "
                    f"minor_to_major has rank {len(self.minor_to_major)}"
                )

    @staticmethod
    def row_major(rank: int) -> Layout:
        return Layout(tuple(range(rank - 1, -1, -1)))

    @staticmethod
    def column_major(rank: int) -> Layout:
        return Layout(tuple(range(rank)))

    def __str__(self) -> str:
        return "{" + ",".join(str(d) for d in self.minor_to_major) + "}"


@dataclass(frozen=True)
class Shape:
    """An XLA shape: an array (element type + dimensions), a tuple of shapes, or a token.

    Equality ignores layout (XLA's `ShapeUtil::Compatible`); use `equal_with_layout` when the
    physical layout matters. `dynamic` marks bounded-dynamic dimensions (set_dimension_size).
    """

    element_type: ElementType
    dimensions: tuple[int, ...] = ()
    tuple_shapes: tuple[Shape, ...] = ()
    layout: Layout | None = field(default=None, compare=False)
    dynamic: tuple[bool, ...] = field(default=(), compare=False)

    # ---- constructors -----------------------------------------------------------------------
    @staticmethod
    def array(element_type: ElementType, dimensions: Sequence[int] = (),
              layout: Layout | Sequence[int] | None = None) -> Shape:
        dims = tuple(map(int, dimensions))  # (numpy integers too)
        if not element_type.is_array:
            raise XlapyError(f"{element_type} is not an array element type")
        if dims and min(dims) < 0:
            d = next(d for d in dims if d < 0)
            raise XlapyError(f"negative dimension size {d} in shape {list(dims)}")
        if layout is None:  # (most shapes)
            return Shape(element_type, dims)
        if not isinstance(layout, Layout):
            layout = Layout(tuple(layout))
        if len(layout.minor_to_major) != len(dims):
            raise XlapyError(
                f"layout {layout} has rank {len(layout.minor_to_major)} but shape has rank "
                f"{len(dims)}"
            )
        return Shape(element_type, dims, (), layout)

    @staticmethod
    def tuple(shapes: Sequence[Shape]) -> Shape:
        return Shape(ElementType.TUPLE, (), tuple(shapes))

    @staticmethod
    def token() -> Shape:
        return Shape(ElementType.TOKEN)

    @staticmethod
    def scalar(element_type: ElementType) -> Shape:
        return Shape.array(element_type, ())

    # ---- queries ----------------------------------------------------------------------------
    @property
    def is_array(self) -> bool:
        return self.element_type.is_array

    @property
    def is_tuple(self) -> bool:
        return self.element_type is ElementType.TUPLE

    @property
    def is_token(self) -> bool:
        return self.element_type is ElementType.TOKEN

    @property
    def rank(self) -> int:
        return len(self.dimensions)

    @property
    def dims(self) -> tuple[int, ...]:
        return self.dimensions

    @property
    def is_scalar(self) -> bool:
        return self.is_array and not self.dimensions

    @property
    def num_elements(self) -> int:
        n = 1
        for d in self.dimensions:
            n *= d
        return n

    @property
    def dtype(self):  # noqa: ANN201 - numpy dtype
        return self.element_type.dtype

    def with_element_type(self, element_type: ElementType) -> Shape:
        return Shape.array(element_type, self.dimensions)

    def with_dimensions(self, dimensions: Sequence[int]) -> Shape:
        return Shape.array(self.element_type, dimensions)

    def with_layout(self, layout: Layout | Sequence[int] | None) -> Shape:
        if self.is_tuple:
            raise XlapyError("a tuple shape has no layout of its own")
        return Shape.array(self.element_type, self.dimensions, layout)

    def effective_layout(self) -> Layout:
        return self.layout if self.layout is not None else Layout.row_major(self.rank)

    def equal_with_layout(self, other: Shape) -> bool:
        if self != other:
            return False
        if self.is_tuple:
            pairs = zip(self.tuple_shapes, other.tuple_shapes)
            return all(a.equal_with_layout(b) for a, b in pairs)
        if not self.is_array:
            return True
        return self.effective_layout() == other.effective_layout()

    def leaves(self) -> list[Shape]:
        """Array and token shapes in depth-first order."""
        if self.is_tuple:
            return [leaf for s in self.tuple_shapes for leaf in s.leaves()]
        return [self]

    # ---- printing ---------------------------------------------------------------------------
    def __str__(self) -> str:
        """HLO text form: `f32[2,3]`, `(f32[2], s32[])`, `token[]`."""
        if self.is_tuple:
            return "(" + ", ".join(str(s) for s in self.tuple_shapes) + ")"
        if self.is_token:
            return "token[]"
        dims = ",".join(str(d) for d in self.dimensions)
        text = f"{self.element_type.hlo_name}[{dims}]"
        if self.layout is not None:
            text += str(self.layout)
        return text

    def __repr__(self) -> str:
        return f"Shape({self})"

    def to_shlo(self) -> str:
        """StableHLO type: `tensor<2x3xf32>`, `tuple<...>`, `!stablehlo.token`."""
        if self.is_tuple:
            return "tuple<" + ", ".join(s.to_shlo() for s in self.tuple_shapes) + ">"
        if self.is_token:
            return "!stablehlo.token"
        dims = "".join(f"{d}x" for d in self.dimensions)
        return f"tensor<{dims}{self.element_type.shlo_name}>"


def shapes_str(shapes: Sequence[Shape]) -> str:
    """`f32[2,3], f32[4,5]`: how error messages list every shape involved."""
    return ", ".join(str(s) for s in shapes)
