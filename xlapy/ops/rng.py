"""Random-number ops: rng_bit_generator (bit-exact with XLA CPU) and rng (seeded runtime state).

rng_bit_generator is a pure function of its state; its Threefry/Philox expansion lives in
`rng_bits`. rng is the hidden-state generator: XLA does not promise its bits, so it draws from
a numpy generator keyed by the runtime's `rng_seed` and `rng_counter` (advanced per draw) so a
run is reproducible and repeated draws differ.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.base import EvalContext, OpDef, Region, check, register
from xlapy.ops.rng_bits import generate_bits
from xlapy.types import ElementType, Shape


class RngAlgorithm(enum.Enum):
    """rng_bit_generator `rng_algorithm`; XLA RandomAlgorithm RNG_DEFAULT/THREE_FRY/PHILOX."""

    DEFAULT = "DEFAULT"
    THREE_FRY = "THREE_FRY"
    PHILOX = "PHILOX"


class RngDistribution(enum.Enum):
    """rng `rng_distribution`; XLA RandomDistribution RNG_UNIFORM / RNG_NORMAL."""

    UNIFORM = "UNIFORM"
    NORMAL = "NORMAL"


#: What DEFAULT means on XLA's CPU backend (its RngBitGeneratorExpander default).
DEFAULT_ALGORITHM = RngAlgorithm.PHILOX
#: Allowed `initial_state` sizes per algorithm (XLA CPU: DEFAULT is PHILOX).
STATE_SIZES: dict[RngAlgorithm, tuple[int, ...]] = {
    RngAlgorithm.DEFAULT: (2, 3),
    RngAlgorithm.THREE_FRY: (2,),
    RngAlgorithm.PHILOX: (2, 3),
}
#: Bit widths XLA generates for (integers 2..64 bits, floats 4..64 bits; no pred/complex).
_INT_BITS = (2, 4, 8, 16, 32, 64)
_FLOAT_BITS = (4, 8, 16, 32, 64)


def _generatable(et: ElementType) -> bool:
    if et.is_integer:
        return et.bits in _INT_BITS
    return et.is_float and et.bits in _FLOAT_BITS


def bits_to_type(words: np.ndarray, et: ElementType) -> np.ndarray:
    """Reinterpret generated uint32/uint64 words as `et`, keeping the low `et.bits` bits.

    XLA generates 32-bit words for every type narrower than 64 bits and truncates them
    (u8 is the low byte of the u32 output of the same shape); the bits are then bitcast, so
    float outputs are arbitrary bit patterns (NaNs and infinities included).
    """
    bits = et.bits
    if bits == 64:
        return words.astype(np.uint64).view(et.dtype)
    if bits == 32:
        return words.astype(np.uint32).view(et.dtype)
    if bits == 16:
        return words.astype(np.uint16).view(et.dtype)
    low = (words & np.uint32((1 << bits) - 1)).astype(np.uint8)
    # ml_dtypes sub-byte types take one byte per element: a zero-extended byte views as the
    # (sign-extended) value.
    return low.view(et.dtype)


# ---- rng_bit_generator ------------------------------------------------------------------------
@dataclass(frozen=True)
class RngBitGeneratorAttrs:
    """`rng_algorithm`; `result_shapes`: (output_state, output) shapes, as StableHLO declares.

    The output's shape and type are not derivable from the operand, so they are attributes.
    """

    rng_algorithm: RngAlgorithm
    result_shapes: tuple[Shape, ...]


@register
class RngBitGenerator(OpDef):
    """stablehlo.rng_bit_generator: spec §rng_bit_generator; XLA RngBitGenerator.

    Bit-exact with XLA's CPU expansion (rng_bit_generator_expander + prng.cc); DEFAULT is
    PHILOX there. The result is the tuple (output_state, output).
    """

    name = "rng_bit_generator"
    hlo_name = "rng-bit-generator"
    arity = 1
    attrs = RngBitGeneratorAttrs
    family = "rng"

    def infer(self, operands: Sequence[Shape], attrs: RngBitGeneratorAttrs,
              regions: Sequence[Region]) -> Shape:
        (state,) = operands
        check(isinstance(attrs.rng_algorithm, RngAlgorithm), "rng_bit_generator_i1",
              f"rng_algorithm {attrs.rng_algorithm!r} is not an RngAlgorithm")
        check(state.is_array and state.rank == 1 and state.element_type is ElementType.U64,
              "rng_bit_generator_i2", f"initial_state {state} is not a 1-dimensional u64 tensor")
        check(len(attrs.result_shapes) == 2, "rng_bit_generator_o1",
              f"expects 2 results (output_state, output), got {len(attrs.result_shapes)}")
        out_state, output = attrs.result_shapes
        check(isinstance(out_state, Shape) and isinstance(output, Shape), "rng_bit_generator_o1",
              "result_shapes must be Shapes")
        check(out_state == state, "rng_bit_generator_c1",
              f"output_state {out_state} differs from initial_state {state}")
        sizes = STATE_SIZES[attrs.rng_algorithm]
        check(state.dimensions[0] in sizes, "rng_bit_generator_c2",
              f"{attrs.rng_algorithm.name} needs an initial_state of size "
              f"{' or '.join(map(str, sizes))}, got {state.dimensions[0]}")
        check(output.is_array and _generatable(output.element_type), "rng_bit_generator_o2",
              f"output {output} is not a tensor of 2..64-bit integers or 4..64-bit floats")
        check(all(d >= 0 for d in output.dimensions), "rng_bit_generator_o2",
              f"output dimensions {list(output.dimensions)} are negative")
        return Shape.tuple([state, output])

    def evaluate(self, operands: Sequence[Any], attrs: RngBitGeneratorAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        (state,) = operands
        output = result.tuple_shapes[1]
        alg = attrs.rng_algorithm
        if alg is RngAlgorithm.DEFAULT:
            alg = DEFAULT_ALGORITHM
        new_state, words = generate_bits(alg.name, state, tuple(output.dimensions),
                                         output.element_type.bits)
        return new_state, bits_to_type(words, output.element_type)


# ---- rng ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RngAttrs:
    """`rng_distribution`; `shape`: the result shape (the `shape` operand's value + type)."""

    rng_distribution: RngDistribution
    shape: Shape


@register
class Rng(OpDef):
    """stablehlo.rng: spec §rng; XLA RngUniform / RngNormal (HLO rng).

    Draws from the runtime's seeded generator (`ctx.runtime.rng_seed`, `rng_counter`); the
    bits are implementation-defined (XLA's are not reproducible across backends either).
    UNIFORM is [a, b) for floats and integers; NORMAL has mean a and standard deviation b.
    """

    name = "rng"
    arity = 3
    attrs = RngAttrs
    side_effecting = True
    family = "rng"

    def infer(self, operands: Sequence[Shape], attrs: RngAttrs,
              regions: Sequence[Region]) -> Shape:
        a, b, shape = operands
        result = attrs.shape
        check(isinstance(attrs.rng_distribution, RngDistribution), "rng_i4",
              f"rng_distribution {attrs.rng_distribution!r} is not an RngDistribution")
        for label, s in (("a", a), ("b", b)):
            check(s.is_array and s.rank == 0, f"rng_i{1 if label == 'a' else 2}",
                  f"{label} {s} is not a 0-dimensional tensor")
            et = s.element_type
            check(et.is_integer or et.is_pred or et.is_float, f"rng_i{1 if label == 'a' else 2}",
                  f"{label} {s} is not of integer, boolean or floating-point type")
        check(shape.is_array and shape.rank == 1 and shape.element_type.is_integer, "rng_i3",
              f"shape {shape} is not a 1-dimensional integer tensor")
        check(isinstance(result, Shape) and result.is_array, "rng_c3",
              f"result {result} is not a tensor")
        check(a.element_type == b.element_type == result.element_type, "rng_c1",
              f"a ({a.element_type}), b ({b.element_type}) and result "
              f"({result.element_type}) differ in element type")
        if attrs.rng_distribution is RngDistribution.NORMAL:
            check(result.element_type.is_float, "rng_c2",
                  f"NORMAL needs a floating-point type, got {result.element_type}")
        check(shape.dimensions[0] == result.rank, "rng_c3",
              f"shape has {shape.dimensions[0]} entries but the result has rank {result.rank}")
        check(all(d >= 0 for d in result.dimensions), "rng_c3",
              f"result dimensions {list(result.dimensions)} are negative")
        return result

    def evaluate(self, operands: Sequence[Any], attrs: RngAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        a, b, shape = operands
        dims = tuple(result.dimensions)
        check(tuple(int(d) for d in np.asarray(shape).reshape(-1)) == dims, "rng_c3",
              f"shape {np.asarray(shape).tolist()} differs from the result dimensions "
              f"{list(dims)}")
        gen = _generator(ctx)
        et = result.element_type
        if attrs.rng_distribution is RngDistribution.NORMAL:
            mu, sigma = float(a), float(b)
            values = gen.standard_normal(dims) * sigma + mu
            return np.asarray(values).astype(et.dtype)
        if et.is_float:
            return _uniform_float(gen, float(a), float(b), dims, et)
        return _uniform_int(gen, int(a), int(b), dims, et)


def _generator(ctx: EvalContext) -> np.random.Generator:
    """A generator for one draw: keyed by (rng_seed, rng_counter), then advance the counter."""
    runtime = ctx.runtime
    seed = int(getattr(runtime, "rng_seed", 0)) & ((1 << 64) - 1)
    counter = int(getattr(runtime, "rng_counter", 0))
    if runtime is not None:
        runtime.rng_counter = counter + 1
    return np.random.default_rng(np.random.SeedSequence([seed, counter]))


def _uniform_float(gen: np.random.Generator, a: float, b: float, dims: tuple[int, ...],
                   et: ElementType) -> np.ndarray:
    """Uniform on [a, b) in `et`; a value that rounds up to b is replaced by a."""
    if not b > a:
        return np.full(dims, a).astype(et.dtype)
    values = (a + (b - a) * gen.random(dims)).astype(et.dtype)
    wide = values.astype(np.float64)
    return np.where((wide >= b) | (wide < a), np.asarray(a).astype(et.dtype), values)


def _uniform_int(gen: np.random.Generator, a: int, b: int, dims: tuple[int, ...],
                 et: ElementType) -> np.ndarray:
    """Uniform integers on [a, b) (pred: 0/1); a >= b gives a everywhere."""
    if et.is_pred:
        if a >= b:
            return np.full(dims, bool(a))
        return np.zeros(dims, dtype=bool)  # [false, true) holds only false
    if a >= b:
        return np.full(dims, a).astype(et.dtype)
    if et.bits < 8:
        return gen.integers(a, b, dims, dtype=np.int64).astype(et.dtype)
    return gen.integers(a, b, dims, dtype=et.dtype)
