"""Builder ops: reductions, windows, sort and batch norm (seed 000 Reduce/ReduceWindow/
SelectAndScatter/Sort/BatchNorm*, seed 001 ComputationBuilder, jax xla_client spellings)."""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Any

from xlapy.builder.overloads import bind_overload, names_of
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp
from xlapy.errors import XlapyError
from xlapy.ops.attrs import ComparisonDirection
from xlapy.ops.elementwise import CompareAttrs
from xlapy.ops.reduction import ReduceAttrs
from xlapy.ops.reduction_batch_norm import BatchNormAttrs
from xlapy.ops.reduction_sort import SortAttrs
from xlapy.ops.reduction_window import ReduceWindowAttrs, SelectAndScatterAttrs
from xlapy.types import Shape

__all__ = [
    "Padding", "MakePadding", "Reduce", "ReduceAll", "ReduceWindow",
    "ReduceWindowWithGeneralPadding", "SelectAndScatter", "SelectAndScatterWithGeneralPadding",
    "Sort", "BatchNormTraining", "BatchNormInference", "BatchNormGrad",
]


class Padding(enum.Enum):
    """Seed 000/001 `Padding::kSame` / `Padding::kValid` (xla_client's PaddingType)."""

    VALID = "VALID"
    SAME = "SAME"


def MakePadding(input_dimensions: Sequence[int], window_dimensions: Sequence[int],
                window_strides: Sequence[int], padding: Padding | str
                ) -> list[tuple[int, int]]:
    """(low, high) per dimension: none for VALID; for SAME enough that the output has
    ceil(input / stride) elements, the odd element going to the high side (XLA MakePadding)."""
    kind = Padding(padding.upper()) if isinstance(padding, str) else padding
    if kind is Padding.VALID:
        return [(0, 0)] * len(input_dimensions)
    pads = []
    for size, window, stride in zip(input_dimensions, window_dimensions, window_strides):
        out = math.ceil(size / stride) if stride > 0 else 0
        total = max((out - 1) * stride + window - size, 0)
        pads.append((total // 2, total - total // 2))
    return pads


# ---- argument helpers ---------------------------------------------------------------------------
def _ops_list(x: XlaOp | Sequence[XlaOp]) -> list[XlaOp]:
    return [x] if isinstance(x, XlaOp) else list(x)


class _ArgError(ValueError):
    """A malformed argument, reported through `builder.report_error`."""


def _ints(api: str, name: str, values: Sequence[int] | None) -> tuple[int, ...] | None:
    if values is None:
        return None
    try:
        return tuple(int(v) for v in values)
    except (TypeError, ValueError):
        raise _ArgError(f"{name} must be a sequence of integers, got {values!r}") from None


def _pairs(api: str, padding: Sequence[Sequence[int]]) -> tuple[tuple[int, int], ...]:
    try:
        out = tuple((int(lo), int(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise _ArgError(f"padding must be (low, high) pairs, got {padding!r}") from None
    return out


def _builder_of(api: str, operands: Sequence[XlaOp]) -> XlaBuilder:
    if not operands or not isinstance(operands[0], XlaOp):
        raise XlapyError(f"{api}: expects at least one XlaOp operand, got {operands!r}")
    return operands[0].builder


def _shapes(builder: XlaBuilder, api: str, operands: Sequence[XlaOp]) -> list[Shape] | None:
    """Operand shapes, or None when an earlier op already failed (its error is reported)."""
    if any(not isinstance(o, XlaOp) for o in operands):
        builder.report_error(api, f"operands must be XlaOps, got {operands!r}")
        return None
    if any(o.instr is None for o in operands):
        return None
    return [o.shape() for o in operands]


# ---- reduce ---------------------------------------------------------------------------------
_REDUCE = ((("builder", "operands", "init_values", "computation", "dimensions_to_reduce"), {}),
           (("operand", "init_value", "computation", "dimensions_to_reduce"), {}))


def Reduce(*args: Any, **kwargs: Any) -> XlaOp:
    """`Reduce(builder, operands, init_values, computation, dimensions_to_reduce)` (xla_client)
    or `Reduce(operand, init_value, computation, dimensions_to_reduce)` (seed 001).

    The result is the bare reduced array for one operand, a tuple for several.
    """
    form, a = bind_overload("Reduce", args, kwargs, _REDUCE,
                            lambda i, a: (i == 0) == isinstance(a["builder" if i == 0 else
                                                                  "operand"], XlaBuilder))
    computation, dims = a["computation"], a["dimensions_to_reduce"]
    if form == 0:
        builder, operands, inits = a["builder"], a["operands"], a["init_values"]
    else:
        operands, inits = a["operand"], a["init_value"]
        builder = _builder_of("Reduce", _ops_list(operands))
    ops = _ops_list(operands) + _ops_list(inits)
    try:
        attrs = ReduceAttrs(_ints("Reduce", "dimensions_to_reduce", dims) or ())
    except _ArgError as e:
        return builder.report_error("Reduce", str(e))
    return builder.add_op("reduce", ops, attrs, [computation], api_name="Reduce")


Reduce.overloads = names_of(_REDUCE)  # type: ignore[attr-defined]


def ReduceAll(operand: XlaOp, init_value: XlaOp, computation: XlaComputation) -> XlaOp:
    """Reduce over every dimension (seed 001 ReduceAll) to a scalar."""
    shapes = _shapes(operand.builder, "ReduceAll", [operand])
    if shapes is None:
        return XlaOp(operand.builder, None)
    return operand.builder.add_op("reduce", [operand, init_value],
                                  ReduceAttrs(tuple(range(shapes[0].rank))), [computation],
                                  api_name="ReduceAll")


# ---- reduce_window ----------------------------------------------------------------------------
_RW_TAIL = ("computation", "window_dimensions", "window_strides", "base_dilations",
            "window_dilations", "padding")
_RW_DEFAULTS = {"window_strides": None, "base_dilations": None, "window_dilations": None,
                "padding": None}
_REDUCE_WINDOW = ((("operand", "init_value") + _RW_TAIL, _RW_DEFAULTS),
                  (("operands", "init_values") + _RW_TAIL, _RW_DEFAULTS))


def ReduceWindowWithGeneralPadding(*args: Any, **kwargs: Any) -> XlaOp:
    """Windowed reduction with explicit (low, high) padding per dimension (xla_client order:
    `(operand, init_value, computation, window_dimensions, window_strides, base_dilations,
    window_dilations, padding)`, or `operands, init_values` lists for the variadic form)."""
    form, a = bind_overload("ReduceWindowWithGeneralPadding", args, kwargs, _REDUCE_WINDOW,
                            lambda i, a: i == 1 or isinstance(a["operand"], XlaOp))
    return _reduce_window_general(
        a["operands" if form else "operand"], a["init_values" if form else "init_value"],
        a["computation"], a["window_dimensions"], a["window_strides"], a["base_dilations"],
        a["window_dilations"], a["padding"])


ReduceWindowWithGeneralPadding.overloads = names_of(_REDUCE_WINDOW)  # type: ignore[attr-defined]


def _reduce_window_general(operands: XlaOp | Sequence[XlaOp],
                           init_values: XlaOp | Sequence[XlaOp], computation: XlaComputation,
                           window_dimensions: Sequence[int],
                           window_strides: Sequence[int] | None,
                           base_dilations: Sequence[int] | None,
                           window_dilations: Sequence[int] | None,
                           padding: Sequence[Sequence[int]] | None) -> XlaOp:
    api = "ReduceWindowWithGeneralPadding"
    ops = _ops_list(operands) + _ops_list(init_values)
    builder = _builder_of(api, ops)
    try:
        attrs = ReduceWindowAttrs(
            _ints(api, "window_dimensions", window_dimensions) or (),
            _ints(api, "window_strides", window_strides),
            _ints(api, "base_dilations", base_dilations),
            _ints(api, "window_dilations", window_dilations),
            None if padding is None else _pairs(api, padding))
    except _ArgError as e:
        return builder.report_error(api, str(e))
    return builder.add_op("reduce_window", ops, attrs, [computation], api_name=api)


def ReduceWindow(operands: XlaOp | Sequence[XlaOp], init_values: XlaOp | Sequence[XlaOp],
                 computation: XlaComputation, window_dimensions: Sequence[int],
                 window_strides: Sequence[int] | None = None,
                 padding: Padding | str | Sequence[Sequence[int]] = Padding.VALID,
                 base_dilations: Sequence[int] | None = None,
                 window_dilations: Sequence[int] | None = None) -> XlaOp:
    """Seed 000 ReduceWindow: `padding` is Padding.SAME/VALID (or explicit pairs)."""
    api = "ReduceWindow"
    first = _ops_list(operands)
    builder = _builder_of(api, first)
    shapes = _shapes(builder, api, first)
    if shapes is None:
        return XlaOp(builder, None)
    rank = shapes[0].rank
    strides = list(window_strides) if window_strides is not None else [1] * rank
    if isinstance(padding, (Padding, str)):
        if len(window_dimensions) != rank or len(strides) != rank:
            return builder.report_error(api, f"window_dimensions {list(window_dimensions)} and"
                                        f" window_strides {strides} must have rank {rank}")
        dilated = [(s - 1) * b + 1 if s else 0 for s, b in
                   zip(shapes[0].dimensions, base_dilations or [1] * rank)]
        eff_window = [(w - 1) * d + 1 if w else 0 for w, d in
                      zip(window_dimensions, window_dilations or [1] * rank)]
        padding = MakePadding(dilated, eff_window, strides, padding)
    return _reduce_window_general(operands, init_values, computation, window_dimensions,
                                  strides, base_dilations, window_dilations, padding)


# ---- select_and_scatter -------------------------------------------------------------------------
def SelectAndScatterWithGeneralPadding(operand: XlaOp, select: XlaComputation,
                                       window_dimensions: Sequence[int],
                                       window_strides: Sequence[int],
                                       padding: Sequence[Sequence[int]], source: XlaOp,
                                       init_value: XlaOp, scatter: XlaComputation) -> XlaOp:
    """Scatter `source` onto the elements `select` picks in each window (explicit padding)."""
    api = "SelectAndScatterWithGeneralPadding"
    try:
        attrs = SelectAndScatterAttrs(_ints(api, "window_dimensions", window_dimensions) or (),
                                      _ints(api, "window_strides", window_strides),
                                      _pairs(api, padding))
    except _ArgError as e:
        return operand.builder.report_error(api, str(e))
    return operand.builder.add_op("select_and_scatter", [operand, source, init_value], attrs,
                                  [select, scatter], api_name=api)


def SelectAndScatter(operand: XlaOp, select: XlaComputation, window_dimensions: Sequence[int],
                     window_strides: Sequence[int], padding: Padding | str, source: XlaOp,
                     init_value: XlaOp, scatter: XlaComputation) -> XlaOp:
    """Seed 000 SelectAndScatter with Padding.SAME/VALID."""
    shapes = _shapes(operand.builder, "SelectAndScatter", [operand])
    if shapes is None:
        return XlaOp(operand.builder, None)
    if len(window_dimensions) != shapes[0].rank or len(window_strides) != shapes[0].rank:
        return operand.builder.report_error(
            "SelectAndScatter", f"window_dimensions {list(window_dimensions)} and "
            f"window_strides {list(window_strides)} must have rank {shapes[0].rank}")
    pads = MakePadding(shapes[0].dimensions, window_dimensions, window_strides, padding)
    return SelectAndScatterWithGeneralPadding(operand, select, window_dimensions,
                                              window_strides, pads, source, init_value, scatter)


# ---- sort -------------------------------------------------------------------------------------
def _default_comparator(shapes: Sequence[Shape]) -> XlaComputation:
    """LT on the first operand; the other operands' parameters are ignored."""
    b = XlaBuilder("lt_comparator")
    params = []
    for i, s in enumerate(shapes):
        scalar = Shape.scalar(s.element_type)
        params.append(b.parameter(2 * i, scalar, f"lhs.{i}"))
        params.append(b.parameter(2 * i + 1, scalar, f"rhs.{i}"))
    b.add_op("compare", params[:2], CompareAttrs(ComparisonDirection.LT), api_name="Lt")
    return b.build()


def Sort(builder: XlaBuilder | XlaOp | Sequence[XlaOp],
         operands: XlaOp | Sequence[XlaOp] | XlaComputation | None = None,
         comparator: XlaComputation | int | None = None, dimension: int = -1,
         is_stable: bool = False) -> XlaOp:
    """`Sort(builder, operands, comparator=None, dimension=-1, is_stable=False)` (xla_client);
    `Sort(operands, comparator, dimension, is_stable)` also works. Default comparator: LT on
    the first operand. One operand gives the bare sorted array, several a tuple."""
    if not isinstance(builder, XlaBuilder):
        # Sort(operands, comparator, dimension, is_stable): every argument shifts left by one.
        ops = _ops_list(builder)
        builder = _builder_of("Sort", ops)
        real_comparator = operands
        if isinstance(comparator, int) and not isinstance(comparator, bool):
            is_stable = dimension if isinstance(dimension, bool) else is_stable
            dimension = comparator
        comparator = real_comparator  # type: ignore[assignment]
    else:
        ops = _ops_list(operands)  # type: ignore[arg-type]
    shapes = _shapes(builder, "Sort", ops)
    if shapes is None:
        return XlaOp(builder, None)
    if not ops:
        return builder.report_error("Sort", "expects at least one operand")
    if comparator is None:
        comparator = _default_comparator(shapes)
    return builder.add_op("sort", ops, SortAttrs(int(dimension), bool(is_stable)),
                          [comparator], api_name="Sort")  # type: ignore[list-item]


# ---- batch norm ---------------------------------------------------------------------------------
def BatchNormTraining(operand: XlaOp, scale: XlaOp, offset: XlaOp, epsilon: float,
                      feature_index: int) -> XlaOp:
    """A tuple (output, batch_mean, batch_var)."""
    return operand.builder.add_op("batch_norm_training", [operand, scale, offset],
                                  BatchNormAttrs(float(epsilon), int(feature_index)),
                                  api_name="BatchNormTraining")


def BatchNormInference(operand: XlaOp, scale: XlaOp, offset: XlaOp, mean: XlaOp,
                       variance: XlaOp, epsilon: float, feature_index: int) -> XlaOp:
    return operand.builder.add_op("batch_norm_inference",
                                  [operand, scale, offset, mean, variance],
                                  BatchNormAttrs(float(epsilon), int(feature_index)),
                                  api_name="BatchNormInference")


def BatchNormGrad(operand: XlaOp, scale: XlaOp, mean: XlaOp, variance: XlaOp,
                  grad_output: XlaOp, epsilon: float, feature_index: int) -> XlaOp:
    """A tuple (grad_operand, grad_scale, grad_offset)."""
    return operand.builder.add_op("batch_norm_grad",
                                  [operand, scale, mean, variance, grad_output],
                                  BatchNormAttrs(float(epsilon), int(feature_index)),
                                  api_name="BatchNormGrad")

