"""Literal: a typed host value (array, tuple or token) with an optional physical layout.

The logical value is always a numpy array in row-major (C) order; the layout only matters when
the value is linearized (`to_physical`) or rebuilt from memory (`from_physical`), as seed 001
describes for `minor_to_major` and padded dimensions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xlapy.errors import XlapyError
from xlapy.types.element_type import ElementType, from_dtype
from xlapy.types.shape import Layout, Shape


class Token:
    """The single run-time value of `token` type."""

    _instance: Token | None = None

    def __new__(cls) -> Token:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "token"


TOKEN_VALUE = Token()


class Literal:
    """A typed host value. Build with `Literal.from_numpy`, `Literal.tuple`, `Literal.scalar`."""

    __slots__ = ("shape", "_array", "_elements")

    def __init__(self, shape: Shape, array: np.ndarray | None = None,
                 elements: Sequence[Literal] = ()) -> None:
        self.shape = shape
        self._array = array
        self._elements = tuple(elements)
        if shape.is_array:
            if array is None:
                raise XlapyError(f"array literal of shape {shape} needs data")
            if array.dtype != shape.dtype or tuple(array.shape) != shape.dimensions:
                raise XlapyError(
                    f"literal data {array.dtype}{list(array.shape)} does not match shape {shape}"
                )

    # ---- constructors -----------------------------------------------------------------------
    @staticmethod
    def from_numpy(value: Any, element_type: ElementType | None = None,
                   layout: Layout | Sequence[int] | None = None) -> Literal:
        """A literal holding `value` (converted to `element_type` when given)."""
        if isinstance(value, Literal):
            return value
        if isinstance(value, tuple):
            return Literal.tuple([Literal.from_numpy(v) for v in value])
        arr = np.asarray(value) if element_type is None else np.asarray(value, element_type.dtype)
        et = from_dtype(arr.dtype)
        arr = np.asarray(arr, order="C")
        return Literal(Shape.array(et, arr.shape, layout), arr)

    @staticmethod
    def splat(value: Any, shape: Shape) -> Literal:
        """Every element of `shape` equal to `value`, held as one element (see is_splat)."""
        one = np.asarray(value, shape.dtype).reshape(())
        return Literal(shape, np.broadcast_to(one, shape.dimensions))

    @staticmethod
    def scalar(value: Any, element_type: ElementType) -> Literal:
        return Literal.from_numpy(np.asarray(value, element_type.dtype))

    @staticmethod
    def tuple(elements: Sequence[Literal]) -> Literal:
        return Literal(Shape.tuple([e.shape for e in elements]), None, elements)

    @staticmethod
    def token() -> Literal:
        return Literal(Shape.token())

    @staticmethod
    def from_value(value: Any, shape: Shape) -> Literal:
        """Wrap an interpreter value (ndarray / tuple / Token) of `shape`."""
        if shape.is_tuple:
            parts = zip(value, shape.tuple_shapes)
            return Literal.tuple([Literal.from_value(v, s) for v, s in parts])
        if shape.is_token:
            return Literal.token()
        return Literal(shape, np.asarray(value, shape.dtype).reshape(shape.dimensions))

    # ---- access -----------------------------------------------------------------------------
    def to_numpy(self) -> np.ndarray:
        if not self.shape.is_array:
            raise XlapyError(f"literal of shape {self.shape} is not an array")
        assert self._array is not None
        return self._array

    @property
    def is_splat(self) -> bool:
        """Held as one element broadcast to the shape (zero strides, a read-only view): a
        `dense<1.0> : tensor<800000000xf32>` costs 4 bytes until something needs every
        element, and passes keep it that way (the cpu backend computes it inside kernels)."""
        a = self._array
        return a is not None and a.size > 1 and not any(a.strides)

    def to_value(self) -> Any:
        """The interpreter's value: ndarray, tuple of values, or the token."""
        if self.shape.is_tuple:
            return tuple(e.to_value() for e in self._elements)
        if self.shape.is_token:
            return TOKEN_VALUE
        return self.to_numpy()

    def to_py(self) -> Any:
        """Nested Python lists / tuples (for tests and printing)."""
        if self.shape.is_tuple:
            return tuple(e.to_py() for e in self._elements)
        if self.shape.is_token:
            return TOKEN_VALUE
        return self.to_numpy().tolist()

    @property
    def elements(self) -> tuple[Literal, ...]:
        return self._elements

    def __getitem__(self, index: int) -> Literal:
        return self._elements[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Literal) or self.shape != other.shape:
            return False
        if self.shape.is_tuple:
            return all(a == b for a, b in zip(self._elements, other._elements))
        if self.shape.is_token:
            return True
        a, b = self.to_numpy(), other.to_numpy()
        return bool(np.array_equal(a.view(_uint_view(a.dtype)), b.view(_uint_view(b.dtype))))

    __hash__ = None  # type: ignore[assignment]

    # ---- layouts ----------------------------------------------------------------------------
    def relayout(self, layout: Layout | Sequence[int]) -> Literal:
        """The same logical value with another physical layout."""
        if not isinstance(layout, Layout):
            layout = Layout(tuple(layout))
        return Literal(self.shape.with_layout(layout), self.to_numpy())

    def to_physical(self) -> np.ndarray:
        """The elements in memory order of this literal's layout, padding included (1-D)."""
        arr = self.to_numpy()
        layout = self.shape.effective_layout()
        major_to_minor = tuple(reversed(layout.minor_to_major))
        phys = np.transpose(arr, major_to_minor) if arr.ndim else arr
        if layout.padded_dimensions is not None:
            padded = [layout.padded_dimensions[d] for d in major_to_minor]
            for d, (have, want) in enumerate(zip(phys.shape, padded)):
                if want < have:
                    raise XlapyError(
                        f"padded dimension {major_to_minor[d]} has size {want} < logical {have}"
                    )
            out = np.full(padded, layout.padding_value, dtype=arr.dtype)
            out[tuple(slice(0, n) for n in phys.shape)] = phys
            phys = out
        return np.ascontiguousarray(phys).reshape(-1)

    @staticmethod
    def from_physical(data: np.ndarray, shape: Shape) -> Literal:
        """Inverse of `to_physical`: read a linear buffer laid out by `shape.layout`."""
        layout = shape.effective_layout()
        major_to_minor = tuple(reversed(layout.minor_to_major))
        logical_phys = [shape.dimensions[d] for d in major_to_minor]
        stored = ([layout.padded_dimensions[d] for d in major_to_minor]
                  if layout.padded_dimensions is not None else logical_phys)
        flat = np.asarray(data, shape.dtype).reshape(-1)
        if flat.size != int(np.prod(stored, dtype=np.int64)):
            raise XlapyError(f"buffer of {flat.size} elements does not hold {shape}")
        phys = flat.reshape(stored)[tuple(slice(0, n) for n in logical_phys)]
        arr = np.transpose(phys, np.argsort(major_to_minor)) if phys.ndim else phys
        return Literal(shape, np.asarray(arr, order="C"))

    # ---- printing ---------------------------------------------------------------------------
    def __str__(self) -> str:
        if self.shape.is_tuple:
            return "(\n" + ",\n".join(str(e) for e in self._elements) + "\n)"
        if self.shape.is_token:
            return "token"
        return f"{self.shape} {format_array(self.to_numpy())}"

    def __repr__(self) -> str:
        return f"Literal({self})"


def _uint_view(dtype: np.dtype) -> np.dtype:
    size = dtype.itemsize
    return np.dtype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.complex128}[size]
                    ) if size != 16 else dtype


def format_scalar(x: Any, dtype: np.dtype) -> str:
    """XLA's scalar spelling: `true`, `-3`, `1.5`, `inf`, `nan`, `(1, 2)` for complex."""
    if dtype == np.bool_:
        return "true" if x else "false"
    if np.issubdtype(dtype, np.complexfloating):
        return f"({format_scalar(x.real, dtype.type(0).real.dtype)}, " \
               f"{format_scalar(x.imag, dtype.type(0).real.dtype)})"
    if from_dtype(dtype).is_integer:
        return str(int(x))
    f = float(x)
    if np.isnan(f):
        return "-nan" if np.signbit(f) else "nan"
    if np.isinf(f):
        return "-inf" if f < 0 else "inf"
    text = str(dtype.type(x))
    if text.endswith(".0"):
        text = text[:-2]
    return text


def format_array(arr: np.ndarray) -> str:
    """`{{1, 2}, {3, 4}}` nesting as XLA prints literals; a scalar prints bare."""
    if arr.ndim == 0:
        return format_scalar(arr[()], arr.dtype)

    def rec(a: np.ndarray) -> str:
        if a.ndim == 1:
            return "{" + ", ".join(format_scalar(x, a.dtype) for x in a) + "}"
        return "{" + ", ".join(rec(x) for x in a) + "}"

    return rec(arr)
