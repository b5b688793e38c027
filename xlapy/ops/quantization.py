"""Uniform quantization: stablehlo.uniform_quantize / uniform_dequantize on storage values.

xlapy has no quantized element types: a quantized tensor is held as its storage type (i8, ...)
and the quantization parameters (`QuantParams`: scales, zero points, the per-axis dimension,
the storage range) travel as attributes of the ops that convert to and from it. The StableHLO
importer maps `!quant.uniform<...>` types onto this and runs other ops on quantized values as
the spec's `dequantize_op_quantize` (spec §Quantization, §uniform_quantize,
§uniform_dequantize).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.base import EvalContext, OpDef, Region, check, register
from xlapy.types import ElementType, Shape


@dataclass(frozen=True)
class QuantParams:
    """One quantized element type: `!quant.uniform<storage<min:max>:expressed:dim, scales>`."""

    storage_type: ElementType
    expressed_type: ElementType
    scales: tuple[float, ...]
    zero_points: tuple[int, ...]
    storage_min: int
    storage_max: int
    quantization_dimension: int = -1  # -1: per-tensor

    def per_element(self, dims: Sequence[int], values: tuple[Any, ...], dtype: Any
                    ) -> np.ndarray:
        """`values` (one, or one per slice of the quantization dimension) shaped to `dims`."""
        arr = np.asarray(values, dtype)
        if self.quantization_dimension < 0:
            return arr.reshape(())
        shape = [1] * len(dims)
        shape[self.quantization_dimension] = len(values)
        return arr.reshape(shape)


def _check_params(p: QuantParams, shape: Shape, label: str) -> None:
    check(p.storage_type.is_integer, label, f"storage type {p.storage_type} is not an integer")
    check(p.expressed_type.is_float, label, f"expressed type {p.expressed_type} is not a float")
    check_quant_type(p)
    check(len(p.scales) == len(p.zero_points) and p.scales, label,
          "scales and zero points differ in number")
    if p.quantization_dimension >= 0:
        check(p.quantization_dimension < shape.rank and
              shape.dimensions[p.quantization_dimension] == len(p.scales), label,
              f"quantization dimension {p.quantization_dimension} of {shape} does not have "
              f"{len(p.scales)} elements")
    else:
        check(len(p.scales) == 1, label, "per-tensor quantization has one scale")


def storage_limits(t: ElementType) -> tuple[int, int]:
    """The smallest and largest value of an integer storage type (i4 and u4 included)."""
    if t.is_signed:
        return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1
    return 0, (1 << t.bits) - 1


def check_quant_type(p: QuantParams) -> None:
    """The spec's constraints on a quantized element type (§Types, `quant_type_c*`):
    storage_min < storage_max inside the storage type, positive finite scales, zero points
    inside [storage_min, storage_max]. (`num_bits(storage) < num_bits(expressed)` is not
    checked: i32:f32 accumulators occur in real quantized programs; docs/verifier.md.)"""
    st, et = p.storage_type, p.expressed_type
    if not (st.is_integer and et.is_float):
        return  # reported by the caller with its op's label
    lo, hi = storage_limits(st)
    check(lo <= p.storage_min < p.storage_max <= hi, "quant_type_c4",
          f"storage range [{p.storage_min}, {p.storage_max}] is not an increasing range "
          f"inside {st} [{lo}, {hi}]")
    for s in p.scales:
        check(np.isfinite(s) and s > 0, "quant_type_c6", f"scale {s} is not positive and finite")
    for z in p.zero_points:
        check(p.storage_min <= z <= p.storage_max, "quant_type_c8",
              f"zero point {z} is outside the storage range [{p.storage_min}, "
              f"{p.storage_max}]")
    check(p.quantization_dimension >= -1, "quant_type_c12",
          f"quantization dimension {p.quantization_dimension} is negative")


def quantize(x: np.ndarray, p: QuantParams) -> np.ndarray:
    """The spec's `quantize`: round_nearest_even(x / scale) + zero_point, clamped, converted."""
    dt = p.expressed_type.dtype
    scales = p.per_element(x.shape, p.scales, dt)
    zps = p.per_element(x.shape, p.zero_points, dt)
    with np.errstate(all="ignore"):
        v = np.rint((x.astype(dt) / scales).astype(dt)) + zps
        v = np.clip(v, dt.type(p.storage_min), dt.type(p.storage_max))
    return v.astype(p.storage_type.dtype)  # type: ignore[no-any-return]


def dequantize(q: np.ndarray, p: QuantParams) -> np.ndarray:
    """The spec's `dequantize`: (storage - zero_point) * scale in the expressed type."""
    dt = p.expressed_type.dtype
    scales = p.per_element(q.shape, p.scales, dt)
    zps = p.per_element(q.shape, p.zero_points, np.int64)
    with np.errstate(all="ignore"):
        return ((q.astype(np.int64) - zps).astype(dt) * scales).astype(dt)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class UniformQuantizeAttrs:
    """`result`: the quantized result type; `operand`: set when requantizing."""

    result: QuantParams
    operand: QuantParams | None = None


@register
class UniformQuantize(OpDef):
    """stablehlo.uniform_quantize: spec §uniform_quantize (float -> storage, or storage ->
    storage with new parameters)."""

    name = "uniform_quantize"
    arity = 1
    attrs = UniformQuantizeAttrs
    family = "quantization"

    def infer(self, operands: Sequence[Shape], attrs: UniformQuantizeAttrs,
              regions: Sequence[Region]) -> Shape:
        (x,) = operands
        check(x.is_array, "uniform_quantize_c1", f"operand {x} is not a tensor")
        _check_params(attrs.result, x, "uniform_quantize_c1")
        if attrs.operand is None:
            check(x.element_type is attrs.result.expressed_type, "uniform_quantize_c1",
                  f"operand element type {x.element_type} is not the expressed type "
                  f"{attrs.result.expressed_type}")
        else:
            _check_params(attrs.operand, x, "uniform_quantize_c1")
            check(x.element_type is attrs.operand.storage_type, "uniform_quantize_c1",
                  f"operand element type {x.element_type} is not its storage type")
            check(attrs.operand.expressed_type is attrs.result.expressed_type,
                  "uniform_quantize_c2", f"requantizing changes the expressed type from "
                  f"{attrs.operand.expressed_type} to {attrs.result.expressed_type}")
        return Shape.array(attrs.result.storage_type, x.dimensions)

    def evaluate(self, operands: Sequence[Any], attrs: UniformQuantizeAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        (x,) = operands
        if attrs.operand is not None:
            x = dequantize(x, attrs.operand)
        return quantize(x, attrs.result)


@dataclass(frozen=True)
class UniformDequantizeAttrs:
    operand: QuantParams


@register
class UniformDequantize(OpDef):
    """stablehlo.uniform_dequantize: spec §uniform_dequantize (storage -> expressed type)."""

    name = "uniform_dequantize"
    arity = 1
    attrs = UniformDequantizeAttrs
    family = "quantization"

    def infer(self, operands: Sequence[Shape], attrs: UniformDequantizeAttrs,
              regions: Sequence[Region]) -> Shape:
        (x,) = operands
        check(x.is_array, "uniform_dequantize_c1", f"operand {x} is not a tensor")
        _check_params(attrs.operand, x, "uniform_dequantize_c1")
        check(x.element_type is attrs.operand.storage_type, "uniform_dequantize_c1",
              f"operand element type {x.element_type} is not the storage type "
              f"{attrs.operand.storage_type}")
        return Shape.array(attrs.operand.expressed_type, x.dimensions)

    def evaluate(self, operands: Sequence[Any], attrs: UniformDequantizeAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        return dequantize(operands[0], attrs.operand)
