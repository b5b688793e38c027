"""rng_bit_generator on the cpu backend: expanded to native integer kernels (no interpreter
fallback) and bit-exact with the interpreter's op, output and new state."""

from __future__ import annotations

import pytest

from tests.unit.passes.test_rng_bit_generator_expander import (
    SHAPES,
    STATES,
    TYPES,
    assert_same_bits,
    rbg_module,
)
from xlapy.backends.cpu import CpuBackend
from xlapy.interpreter import Interpreter
from xlapy.ops.rng import RngAlgorithm

ALGS = [(RngAlgorithm.THREE_FRY, 2), (RngAlgorithm.PHILOX, 2), (RngAlgorithm.PHILOX, 3)]
ids = lambda v: getattr(v, "name", str(v))  # noqa: E731


def check_cpu(alg: RngAlgorithm, et: str, dims: tuple[int, ...], size: int) -> None:
    m = rbg_module(alg, et, dims, size)
    exe = CpuBackend().compile(m)
    assert exe.fallbacks() == []
    for s in STATES[size]:
        assert_same_bits(exe.run([s]), Interpreter().run_module(m, [s]))


@pytest.mark.parametrize("alg,size", ALGS, ids=ids)
@pytest.mark.parametrize("et", TYPES)
def test_every_type_native_and_exact(alg: RngAlgorithm, size: int, et: str) -> None:
    check_cpu(alg, et, (3, 5), size)


@pytest.mark.parametrize("alg,size", ALGS, ids=ids)
@pytest.mark.parametrize("et", ["u8", "f16", "u32", "u64"])
@pytest.mark.parametrize("dims", [d for d in SHAPES if d != (3, 5)], ids=str)
def test_every_shape_native_and_exact(alg: RngAlgorithm, size: int, et: str,
                                      dims: tuple[int, ...]) -> None:
    check_cpu(alg, et, dims, size)


def test_compile_function_expands() -> None:
    """The conformance path (compile_function, no backend pipeline) expands the op too."""
    m = rbg_module(RngAlgorithm.DEFAULT, "u32", (6,), 3)
    exe = CpuBackend().compile_function(m, m.entry)
    assert exe.fallbacks() == []
    s = STATES[3][2]
    assert_same_bits(exe.run([s]), Interpreter().run_module(m, [s]))
    assert any(i.opcode == "rng_bit_generator" for i in m.entry.instructions)  # caller's intact


@pytest.mark.parametrize("et", ["u2", "s4", "f8e4m3fn", "f8e5m2fnuz", "f8e4m3b11fnuz",
                                "f4e2m1fn"])
def test_small_types_native_and_exact(et: str) -> None:
    for alg, size in ALGS:
        check_cpu(alg, et, (4, 7), size)


@pytest.mark.parametrize("et,fallback", [("f8e5m2", "rng_bit_generator"),
                                         ("f8e4m3", "rng_bit_generator"),
                                         ("f8e3m4", "rng_bit_generator"),
                                         ("f8e8m0fnu", "bitcast_convert")])
def test_types_without_exact_kernels_fall_back_loudly(et: str, fallback: str) -> None:
    """IEEE-like f8 outputs keep the op (cpu kernels canonicalize their NaN payloads); e8m0
    expands but its bitcast is not compiled (f4 is: every code a value, no NaN). Either
    way the bits are exact."""
    m = rbg_module(RngAlgorithm.PHILOX, et, (64,), 3)
    exe = CpuBackend().compile(m)
    assert [op for _, op in exe.fallbacks()] == [fallback]
    for s in STATES[3]:
        assert_same_bits(exe.run([s]), Interpreter().run_module(m, [s]))
