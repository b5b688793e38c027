"""Builder ops: control flow (seed 000 §While, §Conditional, §Call, §Map)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xlapy.builder.overloads import bind_overload, names_of
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp
from xlapy.ops.control_flow import CompositeAttrs, MapAttrs
from xlapy.types import ElementType

__all__ = ["While", "Conditional", "Call", "Map", "OptimizationBarrier", "Composite"]


def While(condition: XlaComputation, body: XlaComputation, init: XlaOp) -> XlaOp:
    """Run `body` on the state `init` while `condition` holds; the state may be a tuple."""
    return init.builder.add_op("while", [init], computations=[condition, body],
                               api_name="While")


_CONDITIONAL = ((("branch_index", "branch_computations", "branch_operands"), {}),
                (("predicate", "true_operand", "true_computation", "false_operand",
                  "false_computation"), {}))


def Conditional(*args: Any, **kwargs: Any) -> XlaOp:
    """`Conditional(branch_index, branch_computations, branch_operands)` or
    `Conditional(predicate, true_operand, true_computation, false_operand,
    false_computation)`.

    An s32 index builds `case` (out-of-range runs the last branch); a pred builds `if`.
    """
    form, a = bind_overload("Conditional", args, kwargs, _CONDITIONAL)
    if form == 1:
        pred = a["predicate"]
        return pred.builder.add_op(
            "if", [pred, a["true_operand"], a["false_operand"]],
            computations=[a["true_computation"], a["false_computation"]],
            api_name="Conditional")
    index, comps, operands = a["branch_index"], a["branch_computations"], a["branch_operands"]
    builder: XlaBuilder = index.builder
    comps, operands = list(comps), list(operands)
    if len(comps) != len(operands):
        return builder.report_error("Conditional", f"{len(comps)} branch computations but "
                                    f"{len(operands)} branch operands")
    if index.ok and index.shape().is_array and index.shape().element_type is ElementType.PRED:
        if len(comps) != 2:
            return builder.report_error("Conditional", "a pred branch index needs exactly 2 "
                                        f"branches, got {len(comps)}")
        return builder.add_op("if", [index, *operands], computations=comps,
                              api_name="Conditional")
    return builder.add_op("case", [index, *operands], computations=comps,
                          api_name="Conditional")


Conditional.overloads = names_of(_CONDITIONAL)  # type: ignore[attr-defined]


def Call(builder: XlaBuilder, computation: XlaComputation,
         operands: Sequence[XlaOp] = ()) -> XlaOp:
    """Invoke `computation` on `operands` (their types must match its parameters)."""
    return builder.add_op("call", list(operands), computations=[computation], api_name="Call")


def Map(builder: XlaBuilder, operands: Sequence[XlaOp], computation: XlaComputation,
        dimensions: Sequence[int], static_operands: Sequence[XlaOp] = ()) -> XlaOp:
    """Apply the scalar `computation` element-wise over `operands`."""
    if static_operands:
        return builder.report_error("Map", "static_operands are not supported")
    return builder.add_op("map", list(operands), MapAttrs(tuple(int(d) for d in dimensions)),
                          [computation], api_name="Map")


def OptimizationBarrier(operand: XlaOp) -> XlaOp:
    """Identity that orders its operand's producers before its users (HLO opt-barrier).

    As in XLA, a tuple operand gives a tuple result."""
    return operand.builder.add_op("optimization_barrier", [operand],
                                  api_name="OptimizationBarrier")


def Composite(builder: XlaBuilder, operands: Sequence[XlaOp], name: str,
              decomposition: XlaComputation,
              composite_attributes: dict[str, Any] | Sequence[tuple[str, Any]] = (),
              version: int = 0) -> XlaOp:
    """A named op with a decomposition the interpreter runs (stablehlo.composite)."""
    items = composite_attributes.items() if isinstance(composite_attributes, dict) \
        else composite_attributes
    attrs = CompositeAttrs(name, tuple(sorted(((str(k), v) for k, v in items),
                                        key=lambda kv: kv[0])),
                           decomposition.name, int(version))
    return builder.add_op("composite", list(operands), attrs, [decomposition],
                          api_name="Composite")
