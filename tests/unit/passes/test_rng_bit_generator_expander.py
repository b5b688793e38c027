"""RngBitGeneratorExpander: the expanded HLO computes the interpreter's rng_bit_generator
bit for bit (output and new state) for every algorithm, result type, shape and state."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.interpreter import Interpreter
from xlapy.ir import Module
from xlapy.ops.rng import RngAlgorithm
from xlapy.passes.hlo_builder import HloBuilder
from xlapy.passes.pass_base import run_passes
from xlapy.passes.pipelines import backend_pipeline, make_pass
from xlapy.passes.rng_bit_generator_expander import RngBitGeneratorExpander
from xlapy.types import Shape, from_hlo_name

M = 2**64 - 1
#: Per state size: plain counters, counters that wrap (Threefry's u64 counter, Philox's
#: 128-bit carry from state[1] into state[2], or into the key for a u64[2] state).
STATES = {
    2: [np.array([1, 2], np.uint64), np.array([0xDEADBEEFCAFE, M - 1], np.uint64),
        np.array([M, M - 5], np.uint64)],
    3: [np.array([5, 9, 7], np.uint64), np.array([5, M - 2, 7], np.uint64),
        np.array([9, M, M], np.uint64)],
}
TYPES = ["u8", "s8", "u16", "s16", "f16", "bf16", "u32", "s32", "f32", "u64", "s64", "f64"]
#: 2/4-bit outputs (the low bits of the u32 words) and 8-bit floats.
SMALL_TYPES = ["u2", "s2", "u4", "s4", "f4e2m1fn", "f8e4m3fn", "f8e5m2", "f8e4m3", "f8e3m4",
               "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e8m0fnu"]
SHAPES = [(), (1,), (7,), (3, 5), (4, 6, 2), (0, 3), (5, 3), (2, 3, 3)]
CASES = [(RngAlgorithm.THREE_FRY, 2), (RngAlgorithm.PHILOX, 2), (RngAlgorithm.PHILOX, 3),
         (RngAlgorithm.DEFAULT, 3)]


def rbg_module(alg: RngAlgorithm, et: str, dims: tuple[int, ...], size: int) -> Module:
    """(new state, output) of rng_bit_generator on a u64[size] parameter state."""
    g = HloBuilder()
    s = g.param(f"u64[{size}]")
    r = g.op("rng_bit_generator", s, rng_algorithm=alg,
             result_shapes=(s.shape, Shape.array(from_hlo_name(et), dims)))
    return g.build(g.tuple(g.get_tuple_element(r, index=0), g.get_tuple_element(r, index=1)))


def opcodes(m: Module) -> set[str]:
    return {i.opcode for c in m.computations for i in c.instructions}


def assert_same_bits(got: tuple, ref: tuple) -> None:
    for a, b in zip(got, ref, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        assert (a.dtype, a.shape) == (b.dtype, b.shape)
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("alg,size", CASES, ids=lambda v: getattr(v, "name", str(v)))
@pytest.mark.parametrize("et", TYPES + SMALL_TYPES)
def test_expansion_is_bit_exact_on_interpreter(alg: RngAlgorithm, size: int, et: str) -> None:
    for dims in SHAPES:
        m = rbg_module(alg, et, dims, size)
        refs = [Interpreter().run_module(m, [s]) for s in STATES[size]]
        assert run_passes(m, [RngBitGeneratorExpander()])
        assert "rng_bit_generator" not in opcodes(m)
        for s, ref in zip(STATES[size], refs):
            assert_same_bits(Interpreter().run_module(m, [s]), ref)


def test_kept_types_stay_unexpanded() -> None:
    """The cpu backend keeps the IEEE-like f8 outputs (NaN payloads) on the op, not a wrong
    answer; other types expand."""
    m = rbg_module(RngAlgorithm.PHILOX, "f8e5m2", (3,), 2)
    assert not run_passes(m, [RngBitGeneratorExpander.for_cpu()])
    assert "rng_bit_generator" in opcodes(m)
    assert run_passes(m, [RngBitGeneratorExpander()])


def test_registered_and_in_backend_pipeline() -> None:
    assert isinstance(make_pass("rng-bit-generator-expander"), RngBitGeneratorExpander)
    m = rbg_module(RngAlgorithm.THREE_FRY, "u32", (4, 4), 2)
    backend_pipeline().run(m)
    assert "rng_bit_generator" not in opcodes(m)
