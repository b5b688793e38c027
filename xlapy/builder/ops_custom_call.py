"""Builder ops: custom calls (seed 000 §CustomCall; xla_client's CustomCall,
CustomCallWithLayout, CustomCallWithAliasing) and DynamicReshape.

`schedule` is a scheduling hint with no effect on values; it is checked and not kept.
CustomCallWithAliasing's `output_operand_aliasing` lets XLA write a result into an
operand's buffer; xlapy's targets return their results as values (there is no buffer to
share), so the pairs are checked (indices in range, same shapes) and not kept, which cannot
change what the call returns. A `literal` handed to the target is not supported (the IR's
custom_call has no field for one): reported as an error, never dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xlapy.builder.enums import CustomCallApiVersion, CustomCallSchedule
from xlapy.builder.ops_misc import _shape_arg
from xlapy.builder.xla_builder import XlaBuilder, XlaOp
from xlapy.ops.dynamic import DynamicReshapeAttrs
from xlapy.ops.misc import CustomCallAttrs
from xlapy.ops.shape import ReshapeAttrs
from xlapy.types import ElementType, Literal, Shape

__all__ = ["CustomCall", "CustomCallWithLayout", "CustomCallWithAliasing", "DynamicReshape",
           "CustomCallSchedule", "CustomCallApiVersion"]

_NONE = CustomCallSchedule.SCHEDULE_NONE
_ORIGINAL = CustomCallApiVersion.API_VERSION_ORIGINAL


def CustomCall(builder: XlaBuilder, call_target_name: str | bytes, operands: Sequence[XlaOp],
               shape: Shape, opaque: str | bytes = b"", has_side_effect: bool = False,
               schedule: Any = _NONE, api_version: Any = _ORIGINAL) -> XlaOp:
    """Call the registered target `call_target_name` (see xlapy.ops.misc.register_custom_call)."""
    return _custom_call(builder, "CustomCall", call_target_name, operands, shape, opaque,
                        has_side_effect, schedule, api_version, None, None)


def _layouts(builder: XlaBuilder, api: str, operands: Sequence[XlaOp], shape_with_layout: Shape,
             operand_shapes_with_layout: Sequence[Shape]
             ) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]] | None:
    def layout(s: Shape) -> tuple[int, ...]:
        return s.effective_layout().minor_to_major

    shapes = list(operand_shapes_with_layout)
    if len(shapes) != len(operands):
        builder.report_error(api, f"{len(shapes)} operand_shapes_with_layout for "
                             f"{len(operands)} operands")
        return None
    for i, (op, s) in enumerate(zip(operands, shapes)):
        if op.ok and op.shape() != s:
            builder.report_error(api, f"operand {i} has shape {op.shape()} but "
                                 f"operand_shapes_with_layout says {s}")
            return None
    if _shape_arg(builder, api, shape_with_layout) is None:
        return None
    leaves = shape_with_layout.tuple_shapes if shape_with_layout.is_tuple \
        else (shape_with_layout,)
    return tuple(layout(s) for s in shapes), tuple(layout(s) for s in leaves)


def CustomCallWithLayout(builder: XlaBuilder, call_target_name: str | bytes,
                         operands: Sequence[XlaOp], shape_with_layout: Shape,
                         operand_shapes_with_layout: Sequence[Shape], opaque: str | bytes = b"",
                         has_side_effect: bool = False, schedule: Any = _NONE,
                         api_version: Any = _ORIGINAL) -> XlaOp:
    """CustomCall with explicit operand and result layouts."""
    ops = list(operands)
    lay = _layouts(builder, "CustomCallWithLayout", ops, shape_with_layout,
                   operand_shapes_with_layout)
    if lay is None:
        return XlaOp(builder, None)
    return _custom_call(builder, "CustomCallWithLayout", call_target_name, ops,
                        shape_with_layout, opaque, has_side_effect, schedule, api_version, *lay)


def _subshape(shape: Shape, index: Sequence[int]) -> Shape | None:
    for i in index:
        if not shape.is_tuple or not 0 <= int(i) < len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[int(i)]
    return shape


def CustomCallWithAliasing(builder: XlaBuilder, call_target_name: str | bytes,
                           operands: Sequence[XlaOp], shape_with_layout: Shape,
                           operand_shapes_with_layout: Sequence[Shape],
                           opaque: str | bytes = b"", has_side_effect: bool = False,
                           output_operand_aliasing: Sequence[Any] = (),
                           literal: Literal | None = None, schedule: Any = _NONE,
                           api_version: Any = _ORIGINAL) -> XlaOp:
    """CustomCallWithLayout whose results may alias operands: `output_operand_aliasing` is
    a list of (output shape index, (operand number, operand shape index))."""
    api = "CustomCallWithAliasing"
    ops = list(operands)
    if literal is not None:
        return builder.report_error(api, "not implemented in xlapy: a literal passed to the "
                                    "target (the IR's custom_call has no field for it)")
    lay = _layouts(builder, api, ops, shape_with_layout, operand_shapes_with_layout)
    if lay is None:
        return XlaOp(builder, None)
    for pair in output_operand_aliasing:
        out_index, (number, operand_index) = pair
        out = _subshape(shape_with_layout, tuple(out_index))
        if not 0 <= int(number) < len(ops):
            return builder.report_error(api, f"alias {pair!r}: operand {number} is out of "
                                        f"range for {len(ops)} operands")
        src = _subshape(list(operand_shapes_with_layout)[int(number)], tuple(operand_index))
        if out is None or src is None or out != src:
            return builder.report_error(api, f"alias {pair!r}: output {out} and operand "
                                        f"{src} are not the same shape")
    return _custom_call(builder, api, call_target_name, ops, shape_with_layout, opaque,
                        has_side_effect, schedule, api_version, *lay)


def _custom_call(builder: XlaBuilder, api: str, name: str | bytes, operands: Sequence[XlaOp],
                 shape: Shape, opaque: str | bytes, has_side_effect: bool, schedule: Any,
                 api_version: Any, operand_layouts: tuple[tuple[int, ...], ...] | None,
                 result_layouts: tuple[tuple[int, ...], ...] | None) -> XlaOp:
    if _shape_arg(builder, api, shape) is None:
        return XlaOp(builder, None)
    try:
        CustomCallSchedule(int(schedule))
    except ValueError:
        return builder.report_error(api, f"schedule {schedule!r} is not a CustomCallSchedule")
    target = name.decode() if isinstance(name, bytes) else str(name)
    config = opaque.decode() if isinstance(opaque, bytes) else str(opaque)
    attrs = CustomCallAttrs(target, shape, bool(has_side_effect), config, int(api_version),
                            operand_layouts, result_layouts)
    return builder.add_op("custom_call", list(operands), attrs, api_name=api)


# ---- dynamic reshape ---------------------------------------------------------------------------
def DynamicReshape(operand: XlaOp, dim_sizes: Sequence[XlaOp], new_size_bounds: Sequence[int],
                   dims_are_dynamic: Sequence[bool]) -> XlaOp:
    """Reshape to `new_size_bounds`; a dimension marked in `dims_are_dynamic` takes its size
    from the s32 scalar in `dim_sizes` at run time (bounded by new_size_bounds).

    With no dynamic dimension this is dynamic_reshape with a static result (the sizes must
    equal the bounds at run time). With one, the logical elements of the operand (its
    dynamic sizes, GetDimensionSize) fill the logical result row-major: each result position
    computes its row-major number under `dim_sizes`, the operand index of that number under
    the operand's sizes, and gathers it; set_dimension_size then marks the dynamic
    dimensions. Positions past a dynamic size are padding (unspecified, as in XLA).
    """
    b = operand.builder
    sizes, bounds = list(dim_sizes), tuple(int(x) for x in new_size_bounds)
    dynamic = tuple(bool(x) for x in dims_are_dynamic)
    if not len(sizes) == len(bounds) == len(dynamic):
        return b.report_error("DynamicReshape", f"{len(sizes)} dim_sizes, {len(bounds)} "
                              f"new_size_bounds and {len(dynamic)} dims_are_dynamic differ")
    for i, s in enumerate(sizes):
        if not isinstance(s, XlaOp):
            return b.report_error("DynamicReshape", f"dim_sizes[{i}] is not an XlaOp")
        if s.ok and s.shape() != Shape.scalar(ElementType.S32):
            return b.report_error("DynamicReshape", f"dim_sizes[{i}] is {s.shape()}, not an "
                                  "s32 scalar")
    if any(dynamic):
        return _dynamic_reshape(operand, sizes, bounds, dynamic)
    if not sizes:
        return b.add_op("reshape", [operand], ReshapeAttrs(bounds), api_name="DynamicReshape")
    # The sizes travel as dynamic_reshape's output_shape operand; the interpreter checks
    # at run time that they equal the static bounds (else "dynamic shape not supported").
    from xlapy.ops.shape import BroadcastInDimAttrs, ConcatenateAttrs

    vecs = [b.add_op("broadcast_in_dim", [s], BroadcastInDimAttrs((1,), ()),
                     api_name="DynamicReshape") for s in sizes]
    shape_vec = b.add_op("concatenate", vecs, ConcatenateAttrs(0), api_name="DynamicReshape")
    if not operand.ok:
        return operand
    result = Shape.array(operand.shape().element_type, bounds)
    return b.add_op("dynamic_reshape", [operand, shape_vec], DynamicReshapeAttrs(result),
                    api_name="DynamicReshape")


def _dynamic_reshape(operand: XlaOp, sizes: list[XlaOp], bounds: tuple[int, ...],
                     dynamic: tuple[bool, ...]) -> XlaOp:
    from xlapy.ops.indexing import GatherAttrs, GatherDimensionNumbers
    from xlapy.ops.misc import DimensionAttrs
    from xlapy.ops.shape import BroadcastInDimAttrs, ConcatenateAttrs, IotaAttrs

    api = "DynamicReshape"
    b = operand.builder
    if not operand.ok or not all(s.ok for s in sizes):
        return XlaOp(b, None)
    s = operand.shape()
    if not s.is_array or s.rank == 0:
        return b.report_error(api, f"operand {s} must be an array of rank >= 1")
    s32 = ElementType.S32
    out_i = Shape.array(s32, bounds)

    def scalar(v: int) -> XlaOp:
        return b.constant(Literal.from_numpy(np.int32(v)), api_name=api)

    def spread(x: XlaOp) -> XlaOp:  # an s32 scalar over the result's bounds
        return b.add_op("broadcast_in_dim", [x], BroadcastInDimAttrs(bounds, ()), api_name=api)

    def arith(op: str, x: XlaOp, y: XlaOp) -> XlaOp:
        return b.add_op(op, [x, y], api_name=api)

    # Row-major number of each result position under the logical result sizes.
    linear, stride = spread(scalar(0)), scalar(1)
    for k in reversed(range(len(bounds))):
        pos = b.add_op("iota", [], IotaAttrs(out_i, k), api_name=api)
        linear = arith("add", linear, arith("multiply", pos, spread(stride)))
        stride = arith("multiply", stride, sizes[k] if dynamic[k] else scalar(bounds[k]))
    # The operand index of that number under the operand's logical sizes, clamped in bounds.
    parts: list[XlaOp] = [XlaOp(b, None)] * s.rank
    rest = linear
    for k in reversed(range(s.rank)):
        size = b.add_op("get_dimension_size", [operand], DimensionAttrs(k), api_name=api)
        one = scalar(1)
        safe = spread(b.add_op("maximum", [size, one], api_name=api))
        idx = arith("remainder", rest, safe)
        hi = spread(scalar(s.dimensions[k] - 1))
        parts[k] = b.add_op("clamp", [spread(scalar(0)), idx, hi], api_name=api)
        rest = arith("divide", rest, safe)
    column = bounds + (1,)
    vecs = [b.add_op("reshape", [p], ReshapeAttrs(column), api_name=api) for p in parts]
    index = vecs[0] if len(vecs) == 1 else b.add_op(
        "concatenate", vecs, ConcatenateAttrs(len(bounds)), api_name=api)
    dnums = GatherDimensionNumbers((), tuple(range(s.rank)), tuple(range(s.rank)), len(bounds))
    out = b.add_op("gather", [operand, index], GatherAttrs(dnums, (1,) * s.rank),
                   api_name=api)
    for k, d in enumerate(dynamic):
        if d:
            out = b.add_op("set_dimension_size", [out, sizes[k]], DimensionAttrs(k),
                           api_name=api)
    return out
