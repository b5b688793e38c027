"""Builder ops for parameters, constants and tuples (seed 001 ComputationBuilder)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xlapy.builder.xla_builder import (
    XlaBuilder,
    XlaOp,
    as_element_type,
    get_tuple_element,
    tuple_op,
)
from xlapy.errors import XlapyError
from xlapy.types import ElementType, Literal, Shape
from xlapy.types.limits import max_literal_bytes

__all__ = [
    "Parameter", "Constant", "ConstantLiteral", "ConstantR0", "ConstantR1", "ConstantR2",
    "ConstantFromArray", "ConstantR2FromArray2D", "ConstantR3FromArray3D",
    "ConstantR4FromArray4D", "Tuple", "GetTupleElement",
]


def Parameter(builder: XlaBuilder, parameter_number: int, shape: Shape, name: str = "",
              replicated_at_leaf_buffers: Sequence[bool] = ()) -> XlaOp:
    """A parameter of the computation, numbered from 0."""
    del replicated_at_leaf_buffers
    return builder.parameter(parameter_number, shape, name)


def _constant(builder: XlaBuilder, value: Any, element_type: Any, api_name: str) -> XlaOp:
    try:
        et = None if element_type is None else as_element_type(element_type)
        with np.errstate(over="ignore"):  # an overflow is reported below
            literal = value if isinstance(value, Literal) else Literal.from_numpy(value, et)
    except (XlapyError, ValueError, TypeError) as e:
        return builder.report_error(api_name, f"cannot make a constant of {value!r}: {e}")
    if et is not None and et.is_float and not isinstance(value, Literal):
        # A finite number that the type cannot hold is an error, not a silent inf (as a
        # float literal in program text: types/float_range.py).
        src = np.asarray(value)
        if src.dtype.kind in "fiu" and src.size:
            with np.errstate(all="ignore"):
                wide = src.astype(np.float64)
                got = np.asarray(literal.to_numpy()).astype(np.float64)
            bad = np.flatnonzero(np.isfinite(wide) & ~np.isfinite(got))
            if bad.size:
                return builder.report_error(
                    api_name, f"{float(wide.flat[bad[0]])!r} is out of range for "
                    f"{et.name.lower()} (it would become {float(got.flat[bad[0]])}); spell inf "
                    "explicitly")
    return builder.constant(literal, api_name=api_name)


def Constant(builder: XlaBuilder, value: Any, element_type: Any = None) -> XlaOp:
    """A constant from a numpy array, Python value or Literal (jax xla_client's `Constant`)."""
    return _constant(builder, value, element_type, "Constant")


def ConstantLiteral(builder: XlaBuilder, literal: Literal | Any) -> XlaOp:
    return _constant(builder, literal, None, "ConstantLiteral")


def ConstantR0(builder: XlaBuilder, value: Any, element_type: Any = None) -> XlaOp:
    """A scalar constant; Python floats default to f32 and ints to s32 (seed 001)."""
    if element_type is None and not isinstance(value, np.generic):
        element_type = _default_type(value)
    return _constant(builder, np.asarray(value), element_type, "ConstantR0")


def ConstantR1(builder: XlaBuilder, values_or_length: Any, value: Any = None,
               element_type: Any = None) -> XlaOp:
    """`ConstantR1(b, [1, 2])` or `ConstantR1(b, length, value)` (seed 001's two forms)."""
    if value is not None:
        if element_type is None:
            element_type = _default_type(value)
        length = int(values_or_length)
        itemsize = np.asarray(value).dtype.itemsize
        if not 0 <= length * itemsize <= max_literal_bytes():
            return builder.report_error(
                "ConstantR1", f"length {length} is negative or over the literal limit "
                f"XLAPY_MAX_LITERAL_BYTES={max_literal_bytes()} bytes")
        arr = np.full(length, value)
    else:
        arr = np.asarray(values_or_length)
        if element_type is None and not isinstance(values_or_length, np.ndarray):
            element_type = _default_list_type(arr)
    if arr.ndim != 1:
        return builder.report_error("ConstantR1", f"expects a rank-1 value, got shape "
                                    f"{list(arr.shape)}")
    return _constant(builder, arr, element_type, "ConstantR1")


def _ranked(builder: XlaBuilder, values: Any, rank: int, element_type: Any, api: str) -> XlaOp:
    arr = np.asarray(values)
    if arr.ndim != rank:
        return builder.report_error(api, f"expects a rank-{rank} value, got shape "
                                    f"{list(arr.shape)}")
    if element_type is None and not isinstance(values, np.ndarray):
        element_type = _default_list_type(arr)
    return _constant(builder, arr, element_type, api)


def ConstantR2(builder: XlaBuilder, values: Any, element_type: Any = None) -> XlaOp:
    return _ranked(builder, values, 2, element_type, "ConstantR2")


def ConstantR2FromArray2D(builder: XlaBuilder, values: Any, element_type: Any = None) -> XlaOp:
    return _ranked(builder, values, 2, element_type, "ConstantR2FromArray2D")


def ConstantR3FromArray3D(builder: XlaBuilder, values: Any, element_type: Any = None) -> XlaOp:
    return _ranked(builder, values, 3, element_type, "ConstantR3FromArray3D")


def ConstantR4FromArray4D(builder: XlaBuilder, values: Any, element_type: Any = None) -> XlaOp:
    return _ranked(builder, values, 4, element_type, "ConstantR4FromArray4D")


def ConstantFromArray(builder: XlaBuilder, values: Any, element_type: Any = None) -> XlaOp:
    return _constant(builder, np.asarray(values), element_type, "ConstantFromArray")


def _default_type(value: Any) -> ElementType:
    """Seed 001's native-type table: bool->PRED, int->S32, float->F32, complex->C64."""
    if isinstance(value, (bool, np.bool_)):
        return ElementType.PRED
    if isinstance(value, np.generic):
        from xlapy.types import from_dtype

        return from_dtype(value.dtype)
    if isinstance(value, int):
        return ElementType.S32
    if isinstance(value, complex):
        return ElementType.C64
    return ElementType.F32


def _default_list_type(arr: np.ndarray) -> ElementType:
    """Python lists follow seed 001's native types (float -> F32, int -> S32)."""
    kind = arr.dtype.kind
    if kind == "b":
        return ElementType.PRED
    if kind in "iu":
        return ElementType.S32
    if kind == "c":
        return ElementType.C64
    if kind == "f" and arr.dtype.itemsize == 8:
        return ElementType.F32
    from xlapy.types import from_dtype

    return from_dtype(arr.dtype)


def Tuple(builder: XlaBuilder, elements: Sequence[XlaOp]) -> XlaOp:
    return tuple_op(builder, elements)


def GetTupleElement(tuple_data: XlaOp, index: int) -> XlaOp:
    return get_tuple_element(tuple_data, index)
