"""StableHLO's dynamic-shape ops, run when their shapes are static after propagation.

Each op takes some of its sizes (output dimensions, padding, slice sizes, ...) as operands
instead of attributes. The interpreter keeps static shapes, so each op carries its static
result type in `result_shape` (from the declared type, or computed by the importer when the
size operands are constants). `evaluate` reads the size operands, builds the static op they
describe (broadcast_in_dim, iota, reshape, pad, gather, convolution, slice), checks that it
yields exactly `result_shape` (otherwise "dynamic shape not supported: ...") and evaluates it.
Imported from `xlapy.ops.misc`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np

from xlapy.errors import Unimplemented
from xlapy.ops.attrs import Precision
from xlapy.ops.base import (
    OPS,
    EvalContext,
    OpDef,
    Region,
    check,
    get_op,
    infer_shape,
    register,
)
from xlapy.ops.indexing import GatherAttrs, GatherDimensionNumbers
from xlapy.ops.linalg_conv import ConvDimensionNumbers, ConvolutionAttrs
from xlapy.ops.shape import (
    BroadcastInDimAttrs,
    IotaAttrs,
    PadAttrs,
    ReshapeAttrs,
    SliceAttrs,
)
from xlapy.types import ElementType, Shape


def _ints(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in np.asarray(value).reshape(-1))


class DynamicOp(OpDef):
    """Shared machinery: `static(operand_shapes, sizes, attrs)` -> (opcode, attrs, operands)."""

    family = "dynamic"
    #: Indices of the operands that carry sizes (1-d integer tensors, or 2-d for padding).
    size_operands: ClassVar[tuple[int, ...]] = ()
    #: The rank each size operand must have (1 unless the op says otherwise).
    size_rank: ClassVar[int] = 1
    #: The static op's operands, by index.
    data_operands: ClassVar[tuple[int, ...]] = ()
    static_op: ClassVar[str] = ""

    def static_attrs(self, shapes: Sequence[Shape], sizes: Sequence[tuple[int, ...]],
                     attrs: Any) -> Any:
        raise NotImplementedError

    def resolve(self, shapes: Sequence[Shape], sizes: Sequence[Any], attrs: Any
                ) -> tuple[Any, Shape]:
        """The static op's attrs and result shape for these size values."""
        static = self.static_attrs(shapes, [_ints(s) for s in sizes], attrs)
        shape = infer_shape(self.static_op, [shapes[i] for i in self.data_operands], static)
        return static, shape

    def infer(self, operands: Sequence[Shape], attrs: Any, regions: Sequence[Region]) -> Shape:
        label = f"{self.name}_c1"
        check(len(operands) == len(self.size_operands) + len(self.data_operands),
              f"{self.name}_arity", f"expects {len(self.size_operands) + len(self.data_operands)}"
              f" operands, got {len(operands)}")
        for i in self.size_operands:
            s = operands[i]
            check(s.is_array and s.element_type.is_integer and s.rank == self.size_rank, label,
                  f"size operand {i} is {s}; expected a {self.size_rank}-d integer tensor")
        result = attrs.result_shape
        check(isinstance(result, Shape) and result.is_array, label,
              "dynamic shape not supported: the result type must be static")
        self.check_static(operands, attrs)
        return result  # type: ignore[no-any-return]

    def check_static(self, operands: Sequence[Shape], attrs: Any) -> None:
        """Constraints checkable without the size values (overridden per op)."""

    def evaluate(self, operands: Sequence[Any], attrs: Any, result: Shape,
                 ctx: EvalContext) -> Any:
        shapes = [Shape.array(_etype(v), v.shape) for v in operands]
        static, shape = self.resolve(shapes, [operands[i] for i in self.size_operands], attrs)
        if shape != result:
            raise Unimplemented(f"dynamic shape not supported: {self.name} computes {shape} "
                                f"from its size operands but its static type is {result}")
        return get_op(self.static_op).evaluate([operands[i] for i in self.data_operands],
                                               static, shape, ctx)


_ET = {t.dtype: t for t in ElementType if t.is_array}


def _etype(v: np.ndarray) -> ElementType:
    return _ET[v.dtype]


@dataclass(frozen=True)
class DynamicBroadcastInDimAttrs:
    result_shape: Shape
    broadcast_dimensions: tuple[int, ...]
    known_expanding_dimensions: tuple[int, ...] = ()
    known_nonexpanding_dimensions: tuple[int, ...] = ()


@register
class DynamicBroadcastInDim(DynamicOp):
    """stablehlo.dynamic_broadcast_in_dim: spec §dynamic_broadcast_in_dim (output_dimensions
    as an operand)."""

    name = "dynamic_broadcast_in_dim"
    attrs = DynamicBroadcastInDimAttrs
    size_operands = (1,)
    data_operands = (0,)
    static_op = "broadcast_in_dim"

    def static_attrs(self, shapes: Sequence[Shape], sizes: Sequence[tuple[int, ...]],
                     attrs: DynamicBroadcastInDimAttrs) -> Any:
        return BroadcastInDimAttrs(sizes[0], tuple(attrs.broadcast_dimensions))

    def check_static(self, operands: Sequence[Shape], attrs: DynamicBroadcastInDimAttrs) -> None:
        result = attrs.result_shape
        check(operands[1].dimensions[0] == result.rank, "dynamic_broadcast_in_dim_c7",
              f"output_dimensions has {operands[1].dimensions[0]} elements but the result "
              f"{result} has rank {result.rank}")
        for what, dims in (("known_expanding_dimensions", attrs.known_expanding_dimensions),
                           ("known_nonexpanding_dimensions",
                            attrs.known_nonexpanding_dimensions)):
            check(len(set(dims)) == len(dims) and all(0 <= d < operands[0].rank for d in dims),
                  "dynamic_broadcast_in_dim_c9", f"{what} {list(dims)} are not unique "
                  f"dimensions of the rank-{operands[0].rank} operand")
        infer_shape("broadcast_in_dim", [operands[0]],
                    BroadcastInDimAttrs(attrs.result_shape.dimensions,
                                        tuple(attrs.broadcast_dimensions)))
        known = set(attrs.known_expanding_dimensions)
        check(not known & set(attrs.known_nonexpanding_dimensions),
              "dynamic_broadcast_in_dim_c8", "a dimension is both known expanding and known "
              "non-expanding")


@dataclass(frozen=True)
class DynamicIotaAttrs:
    result_shape: Shape
    iota_dimension: int


@register
class DynamicIota(DynamicOp):
    """stablehlo.dynamic_iota: spec §dynamic_iota (output_shape as an operand)."""

    name = "dynamic_iota"
    attrs = DynamicIotaAttrs
    size_operands = (0,)
    data_operands = ()
    static_op = "iota"

    def static_attrs(self, shapes: Sequence[Shape], sizes: Sequence[tuple[int, ...]],
                     attrs: DynamicIotaAttrs) -> Any:
        return IotaAttrs(Shape.array(attrs.result_shape.element_type, sizes[0]),
                         attrs.iota_dimension)

    def check_static(self, operands: Sequence[Shape], attrs: DynamicIotaAttrs) -> None:
        n, rank = operands[0].dimensions[0], attrs.result_shape.rank
        check(0 <= attrs.iota_dimension < n, "dynamic_iota_c1",
              f"iota_dimension {attrs.iota_dimension} is not below the size {n} of output_shape")
        check(n == rank, "dynamic_iota_c2",
              f"output_shape has {n} elements but the result has rank {rank}")
        infer_shape("iota", [], IotaAttrs(attrs.result_shape, attrs.iota_dimension))


@dataclass(frozen=True)
class DynamicReshapeAttrs:
    result_shape: Shape


@register
class DynamicReshape(DynamicOp):
    """stablehlo.dynamic_reshape: spec §dynamic_reshape (output_shape as an operand)."""

    name = "dynamic_reshape"
    attrs = DynamicReshapeAttrs
    size_operands = (1,)
    data_operands = (0,)
    static_op = "reshape"

    def static_attrs(self, shapes: Sequence[Shape], sizes: Sequence[tuple[int, ...]],
                     attrs: DynamicReshapeAttrs) -> Any:
        return ReshapeAttrs(sizes[0])

    def check_static(self, operands: Sequence[Shape], attrs: DynamicReshapeAttrs) -> None:
        n, rank = operands[1].dimensions[0], attrs.result_shape.rank
        check(n == rank, "dynamic_reshape_c3",
              f"output_shape has {n} elements but the result has rank {rank}")
        infer_shape("reshape", [operands[0]], ReshapeAttrs(attrs.result_shape.dimensions))


@dataclass(frozen=True)
class DynamicPadAttrs:
    result_shape: Shape


@register
class DynamicPad(DynamicOp):
    """stablehlo.dynamic_pad: spec §dynamic_pad (edge/interior padding as operands)."""

    name = "dynamic_pad"
    attrs = DynamicPadAttrs
    size_operands = (2, 3, 4)
    data_operands = (0, 1)
    static_op = "pad"

    def static_attrs(self, shapes: Sequence[Shape], sizes: Sequence[tuple[int, ...]],
                     attrs: DynamicPadAttrs) -> Any:
        return PadAttrs(sizes[0], sizes[1], sizes[2])

    def check_static(self, operands: Sequence[Shape], attrs: DynamicPadAttrs) -> None:
        operand, value, result = operands[0], operands[1], attrs.result_shape
        check(operand.is_array and value.is_array and value.rank == 0, "dynamic_pad_c1",
              f"padding_value {value} is not a 0-d tensor")
        check(operand.element_type == value.element_type == result.element_type,
              "dynamic_pad_c1", f"operand {operand}, padding_value {value} and result "
              f"{result} differ in element type")
        for i, what in ((2, "edge_padding_low"), (3, "edge_padding_high"),
                        (4, "interior_padding")):
            check(operands[i].dimensions[0] == operand.rank, "dynamic_pad_c2",
                  f"{what} has {operands[i].dimensions[0]} elements; the operand has rank "
                  f"{operand.rank}")
        check(result.rank == operand.rank, "dynamic_pad_c4",
              f"result {result} and operand {operand} differ in rank")


@dataclass(frozen=True)
class DynamicGatherAttrs:
    result_shape: Shape
    dimension_numbers: GatherDimensionNumbers
    indices_are_sorted: bool = False


@register
class DynamicGather(DynamicOp):
    """stablehlo.dynamic_gather: spec §dynamic_gather (slice_sizes as an operand)."""

    name = "dynamic_gather"
    attrs = DynamicGatherAttrs
    size_operands = (2,)
    data_operands = (0, 1)
    static_op = "gather"

    def static_attrs(self, shapes: Sequence[Shape], sizes: Sequence[tuple[int, ...]],
                     attrs: DynamicGatherAttrs) -> Any:
        return GatherAttrs(attrs.dimension_numbers, sizes[0], attrs.indices_are_sorted)

    def check_static(self, operands: Sequence[Shape], attrs: DynamicGatherAttrs) -> None:
        operand = operands[0]
        check(operand.is_array, "dynamic_gather_c1", f"operand {operand} is not a tensor")
        check(operands[2].dimensions[0] == operand.rank, "dynamic_gather_c20",
              f"slice_sizes has {operands[2].dimensions[0]} elements; the operand has rank "
              f"{operand.rank}")
        # The dimension-number constraints (gather_c1..c19) hold whatever the sizes are:
        # check them with empty slices, which pass every size-dependent one.
        shape = infer_shape("gather", operands[:2], GatherAttrs(
            attrs.dimension_numbers, (0,) * operand.rank, attrs.indices_are_sorted))
        check(shape.rank == attrs.result_shape.rank
              and shape.element_type == attrs.result_shape.element_type, "dynamic_gather_c5",
              f"result {attrs.result_shape} does not have the rank and element type "
              f"{shape.rank}, {shape.element_type} of the gathered slices")


@dataclass(frozen=True)
class DynamicConvAttrs:
    result_shape: Shape
    dimension_numbers: ConvDimensionNumbers
    window_strides: tuple[int, ...] = ()
    lhs_dilation: tuple[int, ...] = ()
    rhs_dilation: tuple[int, ...] = ()
    window_reversal: tuple[bool, ...] = ()
    feature_group_count: int = 1
    batch_group_count: int = 1
    precision_config: tuple[Precision, ...] = ()
    result_element_type: ElementType | None = None


@register
class DynamicConv(DynamicOp):
    """stablehlo.dynamic_conv: spec §dynamic_conv (padding as an Nx2 operand)."""

    name = "dynamic_conv"
    attrs = DynamicConvAttrs
    size_operands = (2,)
    size_rank = 2
    data_operands = (0, 1)
    static_op = "convolution"

    def static_attrs(self, shapes: Sequence[Shape], sizes: Sequence[tuple[int, ...]],
                     attrs: DynamicConvAttrs) -> Any:
        flat = sizes[0]
        check(len(flat) % 2 == 0, "dynamic_conv_c4", f"padding {flat} is not N x 2")
        pairs = tuple((flat[i], flat[i + 1]) for i in range(0, len(flat), 2))
        kw = {f.name: getattr(attrs, f.name) for f in fields(attrs) if f.name != "result_shape"}
        return ConvolutionAttrs(padding=pairs, **kw)

    def check_static(self, operands: Sequence[Shape], attrs: DynamicConvAttrs) -> None:
        lhs, padding = operands[0], operands[2]
        spatial = max(lhs.rank - 2, 0)
        check(padding.dimensions == (spatial, 2), "dynamic_conv_c4",
              f"padding is {padding}; expected shape [{spatial}, 2] (low, high per spatial "
              "dimension)")
        # Every other convolution constraint is independent of the padding values: check them
        # with zero padding (padding only moves the window count, which never fails).
        kw = {f.name: getattr(attrs, f.name) for f in fields(attrs) if f.name != "result_shape"}
        shape = infer_shape("convolution", operands[:2],
                            ConvolutionAttrs(padding=((0, 0),) * spatial, **kw))
        check(shape.rank == attrs.result_shape.rank
              and shape.element_type == attrs.result_shape.element_type, "dynamic_conv_c27",
              f"result {attrs.result_shape} does not have the rank and element type "
              f"{shape.rank}, {shape.element_type} of the convolution")


@dataclass(frozen=True)
class RealDynamicSliceAttrs:
    result_shape: Shape


@register
class RealDynamicSlice(DynamicOp):
    """stablehlo.real_dynamic_slice: spec §real_dynamic_slice (start, limit and strides as
    operands)."""

    name = "real_dynamic_slice"
    attrs = RealDynamicSliceAttrs
    size_operands = (1, 2, 3)
    data_operands = (0,)
    static_op = "slice"

    def static_attrs(self, shapes: Sequence[Shape], sizes: Sequence[tuple[int, ...]],
                     attrs: RealDynamicSliceAttrs) -> Any:
        return SliceAttrs(sizes[0], sizes[1], sizes[2])

    def check_static(self, operands: Sequence[Shape], attrs: RealDynamicSliceAttrs) -> None:
        operand, result = operands[0], attrs.result_shape
        check(operand.is_array and operand.element_type == result.element_type,
              "real_dynamic_slice_c1", f"operand {operand} and result {result} differ in "
              "element type")
        for i, what in ((1, "start_indices"), (2, "limit_indices"), (3, "strides")):
            check(operands[i].dimensions[0] == operand.rank, "real_dynamic_slice_c2",
                  f"{what} has {operands[i].dimensions[0]} elements; the operand has rank "
                  f"{operand.rank}")
        check(result.rank == operand.rank, "real_dynamic_slice_c5",
              f"result {result} and operand {operand} differ in rank")


#: The dynamic ops by name (the StableHLO importer resolves `?` result types through them).
DYNAMIC_OPS: dict[str, DynamicOp] = {
    cls.name: OPS[cls.name] for cls in (DynamicBroadcastInDim, DynamicIota, DynamicReshape,
                                        DynamicPad, DynamicGather, DynamicConv,
                                        RealDynamicSlice)}  # type: ignore[misc]


from xlapy.ops import quantization  # noqa: E402,F401  (uniform_quantize / uniform_dequantize)
