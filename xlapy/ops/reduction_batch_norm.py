"""batch_norm_training, batch_norm_inference, batch_norm_grad.

XLA's CPU backend rewrites these ops into element-wise HLO (batchnorm_expander.cc); we follow
that op sequence (training: Var[X] = E[X^2] - E[X]^2; inference: X * scale' + shift'),
rounding to the operand type after each step. Narrow floats compute each step in f32.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.base import EvalContext, OpDef, Region, check, register
from xlapy.ops.elementwise import compute_dtype
from xlapy.types import Shape


@dataclass(frozen=True)
class BatchNormAttrs:
    """`epsilon` (f32) and the operand's `feature_index`."""

    epsilon: float
    feature_index: int


def _check_common(name: str, operand: Shape, vectors: Sequence[tuple[str, Shape, str]],
                  attrs: BatchNormAttrs) -> None:
    """C1 (feature_index in range), element types (C2) and vector sizes (per-vector label)."""
    check(operand.is_array and operand.element_type.is_float, f"{name}_c2",
          f"operand {operand} must be a tensor of floating-point type")
    rank = operand.rank
    check(0 <= attrs.feature_index < rank, f"{name}_c1",
          f"feature_index {attrs.feature_index} is out of range for operand rank {rank}")
    features = operand.dimensions[attrs.feature_index]
    for what, s, label in vectors:
        check(s.is_array and s.element_type is operand.element_type, f"{name}_c2",
              f"{what} {s} must have the operand's element type {operand.element_type}")
        check(s.rank == 1 and s.dimensions[0] == features, label,
              f"{what} {s} must be 1-dimensional of size dim(operand, {attrs.feature_index})"
              f" = {features}")


def _bcast(v: np.ndarray, rank: int, feature_index: int) -> np.ndarray:
    shape = [1] * rank
    shape[feature_index] = v.shape[0]
    return v.reshape(shape)


def _epsilon(attrs: BatchNormAttrs, dt: np.dtype) -> Any:
    """The attribute is an f32: 1e-3 means float32(1e-3), even for f64 operands."""
    return dt.type(np.float32(attrs.epsilon))


def _axes(rank: int, feature_index: int) -> tuple[int, ...]:
    return tuple(d for d in range(rank) if d != feature_index)


@register
class BatchNormTraining(OpDef):
    """stablehlo.batch_norm_training: spec §batch_norm_training; XLA BatchNormTraining.

    Operands (operand, scale, offset); result (output, batch_mean, batch_var).
    """

    name = "batch_norm_training"
    arity = 3
    attrs = BatchNormAttrs
    family = "reduction"

    def infer(self, operands: Sequence[Shape], attrs: BatchNormAttrs,
              regions: Sequence[Region]) -> Shape:
        operand, scale, offset = operands
        _check_common(self.name, operand, [("scale", scale, "batch_norm_training_c3"),
                                           ("offset", offset, "batch_norm_training_c4")], attrs)
        return Shape.tuple([operand, scale, scale])

    def evaluate(self, operands: Sequence[Any], attrs: BatchNormAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        operand, scale, offset = operands
        t = operand.dtype
        dt = compute_dtype(result.tuple_shapes[0].element_type)

        def r(v: np.ndarray) -> np.ndarray:  # round each step to the operand type
            return np.asarray(v).astype(t).astype(dt)

        x, g, b = (a.astype(dt) for a in (operand, scale, offset))
        fi, rank = attrs.feature_index, x.ndim
        axes = _axes(rank, fi)
        count = dt.type(x.size // x.shape[fi] if x.shape[fi] else 0)
        with np.errstate(all="ignore"):
            mean = r(r(x.sum(axis=axes)) / count)
            square_mean = r(r(r(x * x).sum(axis=axes)) / count)
            var = r(square_mean - r(mean * mean))
            rsqrt = r(1 / np.sqrt(r(var + _epsilon(attrs, dt))))
            normalized = r(r(x - _bcast(mean, rank, fi)) * _bcast(rsqrt, rank, fi))
            out = r(r(normalized * _bcast(g, rank, fi)) + _bcast(b, rank, fi))
        return (out.astype(t), mean.astype(t), var.astype(t))


@register
class BatchNormInference(OpDef):
    """stablehlo.batch_norm_inference: spec §batch_norm_inference; XLA BatchNormInference.

    Operands (operand, scale, offset, mean, variance).
    """

    name = "batch_norm_inference"
    arity = 5
    attrs = BatchNormAttrs
    family = "reduction"

    def infer(self, operands: Sequence[Shape], attrs: BatchNormAttrs,
              regions: Sequence[Region]) -> Shape:
        operand, scale, offset, mean, variance = operands
        _check_common(self.name, operand, [
            ("scale", scale, "batch_norm_inference_c3"),
            ("offset", offset, "batch_norm_inference_c4"),
            ("mean", mean, "batch_norm_inference_c5"),
            ("variance", variance, "batch_norm_inference_c6")], attrs)
        return operand

    def evaluate(self, operands: Sequence[Any], attrs: BatchNormAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        t = operands[0].dtype
        dt = compute_dtype(result.element_type)

        def r(v: np.ndarray) -> np.ndarray:
            return np.asarray(v).astype(t).astype(dt)

        x, g, b, m, v = (a.astype(dt) for a in operands)
        fi, rank = attrs.feature_index, x.ndim
        with np.errstate(all="ignore"):
            rsqrt = r(1 / np.sqrt(r(v + _epsilon(attrs, dt))))
            true_scale = r(rsqrt * g)
            true_shift = r(b - r(m * true_scale))
            out = r(r(x * _bcast(true_scale, rank, fi)) + _bcast(true_shift, rank, fi))
        return out.astype(t)


@register
class BatchNormGrad(OpDef):
    """stablehlo.batch_norm_grad: spec §batch_norm_grad; XLA BatchNormGrad.

    Operands (operand, scale, mean, variance, grad_output); result (grad_operand,
    grad_scale, grad_offset), computed as batchnorm_expander.cc does (the spec's formula).
    """

    name = "batch_norm_grad"
    arity = 5
    attrs = BatchNormAttrs
    family = "reduction"

    def infer(self, operands: Sequence[Shape], attrs: BatchNormAttrs,
              regions: Sequence[Region]) -> Shape:
        operand, scale, mean, variance, grad_output = operands
        _check_common(self.name, operand, [
            ("scale", scale, "batch_norm_grad_c5"), ("mean", mean, "batch_norm_grad_c4"),
            ("variance", variance, "batch_norm_grad_c4")], attrs)
        check(grad_output.is_array and grad_output.element_type is operand.element_type,
              "batch_norm_grad_c2", f"grad_output {grad_output} must have the operand's "
              f"element type {operand.element_type}")
        check(grad_output.dimensions == operand.dimensions, "batch_norm_grad_c3",
              f"grad_output {grad_output} must have the operand's shape {operand}")
        return Shape.tuple([operand, scale, scale])

    def evaluate(self, operands: Sequence[Any], attrs: BatchNormAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        dt = compute_dtype(result.tuple_shapes[0].element_type)
        x, g, m, v, dy = (a.astype(dt) for a in operands)
        fi, rank = attrs.feature_index, x.ndim
        axes = _axes(rank, fi)
        count = dt.type(x.size // x.shape[fi] if x.shape[fi] else 0)
        with np.errstate(all="ignore"):
            var_eps = _bcast(v, rank, fi) + _epsilon(attrs, dt)
            stddev = np.sqrt(var_eps)
            centered = x - _bcast(m, rank, fi)
            normalized = centered / stddev
            i1 = dy * count
            i2 = _bcast(dy.sum(axis=axes), rank, fi)
            i3 = _bcast((dy * centered).sum(axis=axes), rank, fi)
            i5 = (i3 * centered) / var_eps
            grad_operand = ((_bcast(g, rank, fi) / stddev) / count) * ((i1 - i2) - i5)
            grad_scale = (dy * normalized).sum(axis=axes)
            grad_offset = dy.sum(axis=axes)
        t = operands[0].dtype
        return (grad_operand.astype(t), grad_scale.astype(t), grad_offset.astype(t))
