"""Builder RngBitGenerator, RngUniform, RngNormal, RngBernoulli: shapes, errors, values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.interpreter import InterpreterBackend
from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation
from xlapy.errors import BuilderError
from xlapy.interpreter.evaluator import RuntimeState
from xlapy.types import ElementType as E
from xlapy.types import Shape

U64_2 = Shape.array(E.U64, (2,))


def run(comp: XlaComputation, *args: Any) -> Any:
    return xlapy.Client().execute_and_transfer(comp, list(args)).to_value()


def run_with(comp: XlaComputation, runtime: RuntimeState) -> Any:
    return InterpreterBackend().compile(comp.module).run([], runtime)


@pytest.mark.parametrize("alg", ["THREE_FRY", "RNG_PHILOX", "rng_default", 1,
                                 ops.RandomAlgorithm.RNG_PHILOX])
def test_rng_bit_generator_shape_and_spellings(alg: Any) -> None:
    b = XlaBuilder("t")
    p = ops.Parameter(b, 0, U64_2)
    r = ops.RngBitGenerator(alg, p, Shape.array(E.U32, (3, 4)))
    assert r.shape() == Shape.tuple([U64_2, Shape.array(E.U32, (3, 4))])
    state, bits = run(b.build(), np.array([1, 2], np.uint64))
    assert bits.dtype == np.uint32 and bits.shape == (3, 4)
    assert state[0] == 1 and state[1] != 2


def test_rng_bit_generator_spec_example_through_get_tuple_element() -> None:
    b = XlaBuilder("t")
    p = ops.ConstantR1(b, np.array([1, 2], np.uint64))
    r = ops.RngBitGenerator(ops.RandomAlgorithm.RNG_THREE_FRY, p, Shape.array(E.U64, (2, 2)))
    ops.GetTupleElement(r, 1)
    out = run(b.build())
    np.testing.assert_array_equal(out, np.array(
        [[9236835810183407956, 16087790271692313299],
         [18212823393184779219, 2658481902456610144]], np.uint64))


def test_rng_bit_generator_errors() -> None:
    b = XlaBuilder("t")
    p = ops.Parameter(b, 0, Shape.array(E.U64, (3,)))
    ops.RngBitGenerator("THREE_FRY", p, Shape.array(E.U32, (4,)))
    with pytest.raises(BuilderError, match="RngBitGenerator.*rng_bit_generator_c2"):
        b.build()
    b = XlaBuilder("t")
    p = ops.Parameter(b, 0, U64_2)
    ops.RngBitGenerator("MERSENNE", p, Shape.array(E.U32, (4,)))
    with pytest.raises(BuilderError, match="RngBitGenerator: unknown algorithm"):
        b.build()
    b = XlaBuilder("t")
    p = ops.Parameter(b, 0, U64_2)
    ops.RngBitGenerator("PHILOX", p, (4,))  # type: ignore[arg-type]
    with pytest.raises(BuilderError, match="shape must be a Shape"):
        b.build()
    b = XlaBuilder("t")
    p = ops.Parameter(b, 0, U64_2)
    ops.RngBitGenerator("PHILOX", p, Shape.array(E.PRED, (4,)))
    with pytest.raises(BuilderError, match="rng_bit_generator_o2"):
        b.build()


def test_chained_states_continue_the_stream() -> None:
    """Feeding output_state back gives the next counter block (64-bit THREE_FRY: +n)."""
    b = XlaBuilder("t")
    p = ops.Parameter(b, 0, U64_2)
    first = ops.RngBitGenerator("THREE_FRY", p, Shape.array(E.U64, (3,)))
    second = ops.RngBitGenerator("THREE_FRY", ops.GetTupleElement(first, 0),
                                 Shape.array(E.U64, (3,)))
    both = ops.RngBitGenerator("THREE_FRY", p, Shape.array(E.U64, (6,)))
    ops.Tuple(b, [ops.GetTupleElement(first, 1), ops.GetTupleElement(second, 1),
                  ops.GetTupleElement(both, 1)])
    x, y, z = run(b.build(), np.array([4, 5], np.uint64))
    np.testing.assert_array_equal(np.concatenate([x, y]), z)


def test_rng_uniform_and_normal() -> None:
    b = XlaBuilder("t")
    u = ops.RngUniform(ops.ConstantR0(b, 2.0), ops.ConstantR0(b, 4.0), Shape.array(E.F32, (500,)))
    n = ops.RngNormal(ops.ConstantR0(b, -1.0), ops.ConstantR0(b, 0.5),
                      Shape.array(E.F32, (20000,)))
    i = ops.RngUniform(ops.ConstantR0(b, -3), ops.ConstantR0(b, 3), Shape.array(E.S32, (2, 300)))
    assert u.shape() == Shape.array(E.F32, (500,))
    ops.Tuple(b, [u, n, i])
    uv, nv, iv = run(b.build())
    assert uv.dtype == np.float32 and 2 <= uv.min() and uv.max() < 4
    assert abs(nv.mean() + 1) < 0.03 and abs(nv.std() - 0.5) < 0.03
    assert iv.dtype == np.int32 and iv.shape == (2, 300)
    assert set(np.unique(iv).tolist()) == {-3, -2, -1, 0, 1, 2}


def test_rng_draws_differ_within_a_run_and_repeat_per_seed() -> None:
    b = XlaBuilder("t")
    lo, hi = ops.ConstantR0(b, 0.0), ops.ConstantR0(b, 1.0)
    shape = Shape.array(E.F32, (8,))
    ops.Tuple(b, [ops.RngUniform(lo, hi, shape), ops.RngUniform(lo, hi, shape)])
    comp = b.build()
    x1, y1 = run_with(comp, RuntimeState(rng_seed=1))
    x2, y2 = run_with(comp, RuntimeState(rng_seed=1))
    x3, _ = run_with(comp, RuntimeState(rng_seed=2))
    assert not np.array_equal(x1, y1)
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_array_equal(y1, y2)
    assert not np.array_equal(x1, x3)


def test_rng_errors() -> None:
    b = XlaBuilder("t")
    ops.RngNormal(ops.ConstantR0(b, 0), ops.ConstantR0(b, 1), Shape.array(E.S32, (3,)))
    with pytest.raises(BuilderError, match="RngNormal.*rng_c2"):
        b.build()
    b = XlaBuilder("t")
    ops.RngUniform(ops.ConstantR0(b, 0.0), ops.ConstantR0(b, 1.0), Shape.array(E.F64, (3,)))
    with pytest.raises(BuilderError, match="RngUniform.*rng_c1"):
        b.build()
    b = XlaBuilder("t")
    ops.RngUniform(ops.ConstantR0(b, 0.0), ops.ConstantR0(b, 1.0), "f32[3]")  # type: ignore
    with pytest.raises(BuilderError, match="RngUniform: shape must be"):
        b.build()


def test_rng_bernoulli() -> None:
    b = XlaBuilder("t")
    r = ops.RngBernoulli(ops.ConstantR0(b, 0.25), Shape.array(E.U32, (100, 100)))
    assert r.shape() == Shape.array(E.U32, (100, 100))
    out = run(b.build())
    assert out.dtype == np.uint32 and set(np.unique(out).tolist()) <= {0, 1}
    assert abs(out.mean() - 0.25) < 0.02


@pytest.mark.parametrize("mean, shape, match", [
    (0.5, Shape.array(E.S32, (3,)), "element type u32"),
    (np.float64(0.5), Shape.array(E.U32, (3,)), "f32 scalar"),
])
def test_rng_bernoulli_errors(mean: Any, shape: Shape, match: str) -> None:
    b = XlaBuilder("t")
    ops.RngBernoulli(ops.ConstantR0(b, mean), shape)
    with pytest.raises(BuilderError, match=f"RngBernoulli.*{match}"):
        b.build()
