"""rng_bit_generator and rng: shape inference (every label), generator known answers, evaluate."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from xlapy.errors import ShapeInferenceError
from xlapy.interpreter.evaluator import RuntimeState
from xlapy.ops import get_op, infer_shape
from xlapy.ops.rng import (
    RngAlgorithm,
    RngAttrs,
    RngBitGeneratorAttrs,
    RngDistribution,
    bits_to_type,
)
from xlapy.ops.rng_bits import generate_bits, philox4x32, threefry2x32
from xlapy.types import ElementType as E
from xlapy.types import Shape

U64_2 = Shape.array(E.U64, (2,))
U64_3 = Shape.array(E.U64, (3,))
S64_1 = Shape.array(E.S64, (1,))


def rbg(alg: RngAlgorithm, state: Shape, out: Shape) -> RngBitGeneratorAttrs:
    return RngBitGeneratorAttrs(alg, (state, out))


class Ctx:
    """An EvalContext stand-in holding only the runtime state."""

    def __init__(self, runtime: Any = None) -> None:
        self.runtime = runtime if runtime is not None else RuntimeState()
        self.process = None
        self.num_regions = 0

    def call(self, index: int, *args: Any) -> Any:
        raise AssertionError("rng ops call no computations")


def evaluate(name: str, operands: list[Any], attrs: Any, ctx: Any = None) -> Any:
    shapes = [Shape.array(_et(np.asarray(o).dtype), np.asarray(o).shape) for o in operands]
    result = infer_shape(name, shapes, attrs)
    return get_op(name).evaluate(operands, attrs, result, ctx or Ctx())


def _et(dtype: np.dtype) -> E:
    from xlapy.types import from_dtype

    return from_dtype(dtype)


# ---- known answers (Random123 test vectors) --------------------------------------------------
@pytest.mark.parametrize("ctr, key, expected", [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
])
def test_threefry2x32_known_answers(ctr: tuple[int, int], key: tuple[int, int],
                                    expected: tuple[int, int]) -> None:
    a, b = threefry2x32(np.array([ctr[0]], np.uint32), np.array([ctr[1]], np.uint32),
                        np.uint32(key[0]), np.uint32(key[1]))
    assert (int(a[0]), int(b[0])) == expected


@pytest.mark.parametrize("ctr, key, expected", [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox4x32_known_answers(ctr: tuple[int, ...], key: tuple[int, int],
                                  expected: tuple[int, ...]) -> None:
    words = philox4x32(tuple(np.array([c], np.uint32) for c in ctr),  # type: ignore[arg-type]
                       np.uint32(key[0]), np.uint32(key[1]))
    assert tuple(int(w[0]) for w in words) == expected


def test_spec_example_three_fry() -> None:
    """The spec's rng_bit_generator example (also what XLA CPU computes)."""
    state, out = evaluate("rng_bit_generator", [np.array([1, 2], np.uint64)],
                          rbg(RngAlgorithm.THREE_FRY, U64_2, Shape.array(E.U64, (2, 2))))
    np.testing.assert_array_equal(state, np.array([1, 6], np.uint64))
    np.testing.assert_array_equal(out, np.array(
        [[9236835810183407956, 16087790271692313299],
         [18212823393184779219, 2658481902456610144]], np.uint64))


def test_threefry_narrow_is_low_bits_of_u32() -> None:
    s = np.array([7, 9], np.uint64)
    _, w32 = generate_bits("THREE_FRY", s, (3, 5), 32)
    _, w8 = generate_bits("THREE_FRY", s, (3, 5), 8)
    np.testing.assert_array_equal(w8, w32)  # the caller truncates
    out = bits_to_type(w32, E.U8)
    np.testing.assert_array_equal(out, (w32 & 0xFF).astype(np.uint8))


def test_threefry_counter_advance() -> None:
    s = np.array([0, 10], np.uint64)
    assert int(generate_bits("THREE_FRY", s, (3, 5), 32)[0][1]) == 10 + 9  # 3 x ceil(5/2)
    assert int(generate_bits("THREE_FRY", s, (4, 5), 32)[0][1]) == 10 + 10  # 2 x 5
    assert int(generate_bits("THREE_FRY", s, (3, 5), 64)[0][1]) == 10 + 15
    assert int(generate_bits("THREE_FRY", s, (1,), 32)[0][1]) == 11
    assert int(generate_bits("THREE_FRY", s, (0, 7), 32)[0][1]) == 10


def test_philox_counter_is_128_bits() -> None:
    m = 2**64 - 1
    s = np.array([3, m - 1, m], np.uint64)
    new, _ = generate_bits("PHILOX", s, (9,), 32)  # 3 blocks: wraps 128 bits
    np.testing.assert_array_equal(new, np.array([3, 1, 0], np.uint64))
    new2, _ = generate_bits("PHILOX", np.array([3, m], np.uint64), (8,), 64)
    np.testing.assert_array_equal(new2, np.array([3, 3], np.uint64))


def test_philox_two_word_state_uses_key_as_high_counter() -> None:
    _, a = generate_bits("PHILOX", np.array([5, 9], np.uint64), (7,), 32)
    _, b = generate_bits("PHILOX", np.array([5, 9, 5], np.uint64), (7,), 32)
    np.testing.assert_array_equal(a, b)


def test_philox_zero_state_first_block() -> None:
    _, out = generate_bits("PHILOX", np.zeros(3, np.uint64), (4,), 32)
    assert [int(x) for x in out] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]


@pytest.mark.parametrize("et", [E.S8, E.S16, E.S32, E.S64, E.U2, E.U4, E.S4, E.S2, E.F16,
                                E.BF16, E.F32, E.F64, E.F8E4M3FN, E.F8E5M2, E.F4E2M1FN])
def test_every_generatable_type_evaluates(et: E) -> None:
    out_shape = Shape.array(et, (2, 3))
    state, out = evaluate("rng_bit_generator", [np.array([1, 2], np.uint64)],
                          rbg(RngAlgorithm.DEFAULT, U64_2, out_shape))
    assert out.dtype == et.dtype and out.shape == (2, 3)
    assert state.dtype == np.uint64


def test_bits_to_type_signed_subbyte() -> None:
    out = bits_to_type(np.array([0xF, 0x8, 0x7, 0x1F], np.uint32), E.S4)
    assert out.dtype == ml_dtypes.int4
    assert [int(x) for x in out] == [-1, -8, 7, -1]


# ---- rng_bit_generator inference --------------------------------------------------------------
@pytest.mark.parametrize("alg, state", [(RngAlgorithm.THREE_FRY, U64_2),
                                        (RngAlgorithm.PHILOX, U64_2),
                                        (RngAlgorithm.PHILOX, U64_3),
                                        (RngAlgorithm.DEFAULT, U64_3)])
def test_rbg_infer_valid(alg: RngAlgorithm, state: Shape) -> None:
    out = Shape.array(E.F32, (3, 4))
    assert infer_shape("rng_bit_generator", [state], rbg(alg, state, out)) == \
        Shape.tuple([state, out])


def test_rbg_c1_output_state_type() -> None:
    with pytest.raises(ShapeInferenceError, match="rng_bit_generator_c1"):
        infer_shape("rng_bit_generator", [U64_2],
                    rbg(RngAlgorithm.PHILOX, U64_3, Shape.array(E.U32, (4,))))


@pytest.mark.parametrize("alg, state", [(RngAlgorithm.THREE_FRY, U64_3),
                                        (RngAlgorithm.PHILOX, Shape.array(E.U64, (4,))),
                                        (RngAlgorithm.DEFAULT, Shape.array(E.U64, (1,)))])
def test_rbg_c2_state_size(alg: RngAlgorithm, state: Shape) -> None:
    with pytest.raises(ShapeInferenceError, match="rng_bit_generator_c2"):
        infer_shape("rng_bit_generator", [state], rbg(alg, state, Shape.array(E.U32, (4,))))


@pytest.mark.parametrize("state", [Shape.array(E.S64, (2,)), Shape.array(E.U64, (2, 1)),
                                   Shape.scalar(E.U64)])
def test_rbg_initial_state_type(state: Shape) -> None:
    with pytest.raises(ShapeInferenceError, match="rng_bit_generator_i2"):
        infer_shape("rng_bit_generator", [state],
                    rbg(RngAlgorithm.THREE_FRY, state, Shape.array(E.U32, (4,))))


@pytest.mark.parametrize("et", [E.PRED, E.C64, E.C128])
def test_rbg_output_type(et: E) -> None:
    with pytest.raises(ShapeInferenceError, match="rng_bit_generator_o2"):
        infer_shape("rng_bit_generator", [U64_2],
                    rbg(RngAlgorithm.THREE_FRY, U64_2, Shape.array(et, (4,))))


def test_rbg_result_count() -> None:
    with pytest.raises(ShapeInferenceError, match="rng_bit_generator_o1"):
        infer_shape("rng_bit_generator", [U64_2],
                    RngBitGeneratorAttrs(RngAlgorithm.THREE_FRY, (U64_2,)))


# ---- rng inference ------------------------------------------------------------------------------
def rng_attrs(dist: RngDistribution, et: E, dims: tuple[int, ...]) -> RngAttrs:
    return RngAttrs(dist, Shape.array(et, dims))


def test_rng_infer_valid() -> None:
    f = Shape.scalar(E.F32)
    assert infer_shape("rng", [f, f, Shape.array(E.S64, (2,))],
                       rng_attrs(RngDistribution.NORMAL, E.F32, (3, 4))) == \
        Shape.array(E.F32, (3, 4))
    s = Shape.scalar(E.S32)
    assert infer_shape("rng", [s, s, Shape.array(E.S64, (0,))],
                       rng_attrs(RngDistribution.UNIFORM, E.S32, ())) == Shape.scalar(E.S32)


def test_rng_c1_element_types() -> None:
    with pytest.raises(ShapeInferenceError, match="rng_c1"):
        infer_shape("rng", [Shape.scalar(E.F32), Shape.scalar(E.F64), S64_1],
                    rng_attrs(RngDistribution.UNIFORM, E.F32, (3,)))


def test_rng_c2_normal_needs_float() -> None:
    s = Shape.scalar(E.S32)
    with pytest.raises(ShapeInferenceError, match="rng_c2"):
        infer_shape("rng", [s, s, S64_1], rng_attrs(RngDistribution.NORMAL, E.S32, (3,)))


def test_rng_c3_shape_rank() -> None:
    f = Shape.scalar(E.F32)
    with pytest.raises(ShapeInferenceError, match="rng_c3"):
        infer_shape("rng", [f, f, Shape.array(E.S64, (2,))],
                    rng_attrs(RngDistribution.UNIFORM, E.F32, (3,)))


def test_rng_operands_scalar() -> None:
    with pytest.raises(ShapeInferenceError, match="rng_i1"):
        infer_shape("rng", [Shape.array(E.F32, (2,)), Shape.scalar(E.F32), S64_1],
                    rng_attrs(RngDistribution.UNIFORM, E.F32, (3,)))
    with pytest.raises(ShapeInferenceError, match="rng_i3"):
        infer_shape("rng", [Shape.scalar(E.F32), Shape.scalar(E.F32), Shape.scalar(E.S64)],
                    rng_attrs(RngDistribution.UNIFORM, E.F32, (3,)))


# ---- rng evaluation --------------------------------------------------------------------------
def draw(dist: RngDistribution, a: Any, b: Any, dims: tuple[int, ...], ctx: Any = None) -> Any:
    a, b = np.asarray(a), np.asarray(b)
    return evaluate("rng", [a, b, np.array(dims, np.int64)],
                    rng_attrs(dist, _et(a.dtype), dims), ctx)


def test_rng_uniform_float_range_and_moments() -> None:
    out = draw(RngDistribution.UNIFORM, np.float32(-2), np.float32(3), (200, 100))
    assert out.dtype == np.float32 and out.shape == (200, 100)
    assert out.min() >= -2 and out.max() < 3
    assert abs(out.mean() - 0.5) < 0.05
    assert abs(out.var() - 25 / 12) < 0.1


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64, np.uint64, ml_dtypes.int4])
def test_rng_uniform_int_range(dtype: Any) -> None:
    lo, hi = (np.array(-3).astype(dtype), np.array(5).astype(dtype)) \
        if np.dtype(dtype).kind == "i" or dtype is ml_dtypes.int4 else \
        (np.array(3).astype(dtype), np.array(9).astype(dtype))
    out = draw(RngDistribution.UNIFORM, lo, hi, (5000,))
    assert out.dtype == np.dtype(dtype)
    ints = out.astype(np.int64)
    assert ints.min() == int(lo) and ints.max() == int(hi) - 1  # every value is hit


def test_rng_uniform_bf16_below_b() -> None:
    out = draw(RngDistribution.UNIFORM, np.array(0, ml_dtypes.bfloat16),
               np.array(1, ml_dtypes.bfloat16), (20000,))
    assert out.dtype == ml_dtypes.bfloat16
    assert float(out.astype(np.float32).max()) < 1.0


def test_rng_normal_moments() -> None:
    out = draw(RngDistribution.NORMAL, np.float64(3), np.float64(2), (100000,))
    assert out.dtype == np.float64
    assert abs(out.mean() - 3) < 0.05 and abs(out.std() - 2) < 0.05


def test_rng_state_advances_and_is_reproducible() -> None:
    ctx = Ctx(RuntimeState(rng_seed=42))
    x = draw(RngDistribution.UNIFORM, np.float32(0), np.float32(1), (16,), ctx)
    y = draw(RngDistribution.UNIFORM, np.float32(0), np.float32(1), (16,), ctx)
    assert ctx.runtime.rng_counter == 2
    assert not np.array_equal(x, y)
    ctx2 = Ctx(RuntimeState(rng_seed=42))
    np.testing.assert_array_equal(
        draw(RngDistribution.UNIFORM, np.float32(0), np.float32(1), (16,), ctx2), x)
    ctx3 = Ctx(RuntimeState(rng_seed=43))
    assert not np.array_equal(
        draw(RngDistribution.UNIFORM, np.float32(0), np.float32(1), (16,), ctx3), x)


def test_rng_shape_operand_must_match_result() -> None:
    f = np.float32(0)
    attrs = rng_attrs(RngDistribution.UNIFORM, E.F32, (3,))
    result = infer_shape("rng", [Shape.scalar(E.F32)] * 2 + [S64_1], attrs)
    with pytest.raises(ShapeInferenceError, match="rng_c3"):
        get_op("rng").evaluate([f, np.float32(1), np.array([4], np.int64)], attrs, result,
                               Ctx())


def test_rng_is_side_effecting() -> None:
    assert get_op("rng").side_effecting
    assert not get_op("rng_bit_generator").side_effecting


def test_rng_without_runtime_fields() -> None:
    """A context whose runtime lacks rng fields still draws (seed 0)."""
    out = draw(RngDistribution.UNIFORM, np.float32(0), np.float32(1), (4,),
               Ctx(SimpleNamespace()))
    assert out.shape == (4,)
