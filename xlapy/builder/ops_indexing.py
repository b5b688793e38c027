"""Builder ops: Gather and Scatter (seed 000 §Gather/§Scatter; xla_client signatures).

Dimension numbers may be our frozen dataclasses or any object with the same field names
(xla_client's protos, jax.lax's named tuples; those lack `index_vector_dim`, which then is
the last dimension of the indices, as in jax, and name the batching fields
`operand_batching_dims`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xlapy.builder.overloads import bind_overload, names_of
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp
from xlapy.errors import BuilderError
from xlapy.ops.indexing import GatherAttrs, GatherDimensionNumbers
from xlapy.ops.indexing_scatter import ScatterAttrs, ScatterDimensionNumbers

__all__ = ["Gather", "Scatter", "GatherDimensionNumbers", "ScatterDimensionNumbers"]


def _ints(value: Any) -> tuple[int, ...]:
    return () if value is None else tuple(int(v) for v in value)


def _gather_dnums(dn: Any, indices_rank: int) -> GatherDimensionNumbers:
    if isinstance(dn, GatherDimensionNumbers):
        return dn
    ivd = getattr(dn, "index_vector_dim", None)
    return GatherDimensionNumbers(
        offset_dims=_ints(dn.offset_dims),
        collapsed_slice_dims=_ints(dn.collapsed_slice_dims),
        start_index_map=_ints(dn.start_index_map),
        index_vector_dim=indices_rank - 1 if ivd is None else int(ivd),
        operand_batching_dims=_ints(getattr(dn, "operand_batching_dims", ())),
        start_indices_batching_dims=_ints(getattr(dn, "start_indices_batching_dims", ())),
    )


def _scatter_dnums(dn: Any, indices_rank: int) -> ScatterDimensionNumbers:
    if isinstance(dn, ScatterDimensionNumbers):
        return dn
    ivd = getattr(dn, "index_vector_dim", None)
    batching = getattr(dn, "input_batching_dims", None)
    if batching is None:
        batching = getattr(dn, "operand_batching_dims", ())
    return ScatterDimensionNumbers(
        update_window_dims=_ints(dn.update_window_dims),
        inserted_window_dims=_ints(dn.inserted_window_dims),
        scatter_dims_to_operand_dims=_ints(dn.scatter_dims_to_operand_dims),
        index_vector_dim=indices_rank - 1 if ivd is None else int(ivd),
        input_batching_dims=_ints(batching),
        scatter_indices_batching_dims=_ints(getattr(dn, "scatter_indices_batching_dims", ())),
    )


def _builder_of(values: Sequence[Any]) -> XlaBuilder:
    for v in values:
        if isinstance(v, XlaOp):
            return v.builder
    raise BuilderError("expects XlaOp operands")


def Gather(a: XlaOp, start_indices: XlaOp, dimension_numbers: Any,
           slice_sizes: Sequence[int], indices_are_sorted: bool = False) -> XlaOp:
    """Slices of `a` at the starts in `start_indices` (starts clamped into bounds)."""
    operand = a
    b = _builder_of([operand, start_indices])
    if not all(isinstance(o, XlaOp) and o.ok for o in (operand, start_indices)):
        return b.add_op("gather", [operand, start_indices], api_name="Gather")
    try:
        dn = _gather_dnums(dimension_numbers, start_indices.shape().rank)
        attrs = GatherAttrs(dn, _ints(slice_sizes), bool(indices_are_sorted))
    except (AttributeError, TypeError, ValueError) as e:
        return b.report_error("Gather", f"bad dimension numbers or slice sizes: {e}")
    return b.add_op("gather", [operand, start_indices], attrs, api_name="Gather")


_SCATTER_TAIL = ("scatter_indices", "updates", "update_computation", "dimension_numbers",
                 "indices_are_sorted", "unique_indices")
_SCATTER_DEFAULTS = {"indices_are_sorted": False, "unique_indices": False}
_SCATTER = ((("input",) + _SCATTER_TAIL, _SCATTER_DEFAULTS),
            (("builder", "operands") + _SCATTER_TAIL, _SCATTER_DEFAULTS))


def Scatter(*args: Any, **kwargs: Any) -> XlaOp:
    """`Scatter(input, scatter_indices, updates, update_computation, dimension_numbers,
    indices_are_sorted=False, unique_indices=False)` or the variadic
    `Scatter(builder, operands, scatter_indices, updates, ...)` (xla_client's two forms).

    `input` and `updates` may also be lists (variadic; the result is then a tuple, N > 1);
    out-of-bounds windows are skipped.
    """
    form, a = bind_overload("Scatter", args, kwargs, _SCATTER,
                            lambda i, a: (i == 1) == isinstance(a["input" if i == 0 else "builder"],
                                                        XlaBuilder))
    return _scatter(a["operands"] if form else a["input"], a["scatter_indices"], a["updates"],
                    a["update_computation"], a["dimension_numbers"], a["indices_are_sorted"],
                    a["unique_indices"])


Scatter.overloads = names_of(_SCATTER)  # type: ignore[attr-defined]


def _scatter(operand: XlaOp | Sequence[XlaOp], scatter_indices: XlaOp,
             updates: XlaOp | Sequence[XlaOp], update_computation: XlaComputation,
             dimension_numbers: Any, indices_are_sorted: bool,
             unique_indices: bool) -> XlaOp:
    inputs = list(operand) if isinstance(operand, (list, tuple)) else [operand]
    upds = list(updates) if isinstance(updates, (list, tuple)) else [updates]
    b = _builder_of([*inputs, scatter_indices, *upds])
    if len(inputs) != len(upds) or not inputs:
        return b.report_error("Scatter", f"expects as many updates as operands (>= 1), got "
                              f"{len(inputs)} operand(s) and {len(upds)} update(s)")
    operands = [*inputs, scatter_indices, *upds]
    if not all(isinstance(o, XlaOp) and o.ok for o in operands):
        return b.add_op("scatter", operands, api_name="Scatter")
    try:
        dn = _scatter_dnums(dimension_numbers, scatter_indices.shape().rank)
        attrs = ScatterAttrs(dn, bool(indices_are_sorted), bool(unique_indices))
    except (AttributeError, TypeError, ValueError) as e:
        return b.report_error("Scatter", f"bad dimension numbers: {e}")
    return b.add_op("scatter", operands, attrs, [update_computation], api_name="Scatter")
