"""Builder ops: random numbers (RngBitGenerator, RngUniform, RngNormal, RngBernoulli).

RngBernoulli (seed 002: f32 mean -> u32 0/1) is built from ops, not a dedicated opcode:
`convert(rng UNIFORM f32 [0, 1) < mean, U32)`, so it shares rng's seeded runtime state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xlapy.builder.xla_builder import XlaOp, as_element_type
from xlapy.errors import XlapyError
from xlapy.ops.attrs import ComparisonDirection
from xlapy.ops.elementwise import CompareAttrs
from xlapy.ops.elementwise_convert import ConvertAttrs
from xlapy.ops.rng import RngAlgorithm, RngAttrs, RngBitGeneratorAttrs, RngDistribution
from xlapy.types import ElementType, Literal, Shape

__all__ = ["RngBitGenerator", "RngUniform", "RngNormal", "RngBernoulli", "RngAlgorithm",
           "RngDistribution"]

_ALGORITHM_NAMES = {"RNG_DEFAULT": RngAlgorithm.DEFAULT, "RNG_THREE_FRY": RngAlgorithm.THREE_FRY,
                    "RNG_PHILOX": RngAlgorithm.PHILOX, "DEFAULT": RngAlgorithm.DEFAULT,
                    "THREE_FRY": RngAlgorithm.THREE_FRY, "PHILOX": RngAlgorithm.PHILOX}


def _algorithm(algorithm: Any) -> RngAlgorithm | None:
    """Accept RngAlgorithm, xla_client's RandomAlgorithm (enums.py), names (`PHILOX`,
    `RNG_PHILOX`, any case) or XLA's ints 0/1/2."""
    if isinstance(algorithm, RngAlgorithm):
        return algorithm
    if isinstance(algorithm, str):
        return _ALGORITHM_NAMES.get(algorithm.upper())
    name = getattr(algorithm, "name", None)  # jax.lax.RandomAlgorithm and similar enums
    if isinstance(name, str):
        return _ALGORITHM_NAMES.get(name.upper())
    if isinstance(algorithm, (int, np.integer)) and not isinstance(algorithm, bool):
        return {0: RngAlgorithm.DEFAULT, 1: RngAlgorithm.THREE_FRY,
                2: RngAlgorithm.PHILOX}.get(int(algorithm))
    return None


def RngBitGenerator(algorithm: Any, initial_state: XlaOp, shape: Shape) -> XlaOp:
    """(output_state, random bits of `shape`) as a tuple; bit-exact with XLA's CPU backend."""
    b = initial_state.builder
    alg = _algorithm(algorithm)
    if alg is None:
        return b.report_error("RngBitGenerator", f"unknown algorithm {algorithm!r}")
    if not isinstance(shape, Shape):
        return b.report_error("RngBitGenerator", f"shape must be a Shape, got {shape!r}")
    if not initial_state.ok:
        return XlaOp(b, None)
    state_shape = initial_state.shape()
    attrs = RngBitGeneratorAttrs(alg, (state_shape, shape))
    return b.add_op("rng_bit_generator", [initial_state], attrs, api_name="RngBitGenerator")


def _rng(api_name: str, a: XlaOp, b_op: XlaOp, shape: Shape,
         distribution: RngDistribution) -> XlaOp:
    b = a.builder
    if not isinstance(shape, Shape) or not shape.is_array:
        return b.report_error(api_name, f"shape must be an array Shape, got {shape!r}")
    dims = np.asarray(shape.dimensions, dtype=np.int64).reshape(-1)
    dims_op = b.constant(Literal.from_numpy(dims, ElementType.S64), api_name=api_name)
    return b.add_op("rng", [a, b_op, dims_op], RngAttrs(distribution, shape), api_name=api_name)


def RngUniform(a: XlaOp, b: XlaOp, shape: Shape) -> XlaOp:
    """Uniform numbers on [a, b) of `shape` (scalar a, b of the shape's element type)."""
    return _rng("RngUniform", a, b, shape, RngDistribution.UNIFORM)


def RngNormal(mu: XlaOp, sigma: XlaOp, shape: Shape) -> XlaOp:
    """Normal numbers N(mu, sigma) of `shape` (floating-point scalars mu, sigma)."""
    return _rng("RngNormal", mu, sigma, shape, RngDistribution.NORMAL)


def RngBernoulli(mean: XlaOp, shape: Shape) -> XlaOp:
    """u32 0/1 values that are 1 with probability `mean` (seed 002; f32 scalar mean).

    Built as `convert(RngUniform(0, 1, f32 shape) < broadcast(mean), U32)`.
    """
    b = mean.builder
    if not isinstance(shape, Shape) or not shape.is_array:
        return b.report_error("RngBernoulli", f"shape must be an array Shape, got {shape!r}")
    if not mean.ok:
        return XlaOp(b, None)
    m = mean.shape()
    if not (m.is_array and m.rank == 0 and m.element_type is ElementType.F32):
        return b.report_error("RngBernoulli", f"mean must be an f32 scalar, got {m}")
    try:
        out_type = as_element_type(shape.element_type)
    except XlapyError as e:
        return b.report_error("RngBernoulli", str(e))
    if out_type is not ElementType.U32:
        return b.report_error("RngBernoulli", f"shape must have element type u32, got {shape}")
    f32 = Shape.array(ElementType.F32, shape.dimensions)
    zero = b.constant(Literal.from_numpy(np.float32(0)), api_name="RngBernoulli")
    one = b.constant(Literal.from_numpy(np.float32(1)), api_name="RngBernoulli")
    u = _rng("RngBernoulli", zero, one, f32, RngDistribution.UNIFORM)
    from xlapy.ops.shape import BroadcastInDimAttrs

    mean_b = b.add_op("broadcast_in_dim", [mean],
                      BroadcastInDimAttrs(tuple(shape.dimensions), ()), api_name="RngBernoulli")
    below = b.add_op("compare", [u, mean_b], CompareAttrs(ComparisonDirection.LT, None),
                     api_name="RngBernoulli")
    return b.add_op("convert", [below], ConvertAttrs(ElementType.U32), api_name="RngBernoulli")
