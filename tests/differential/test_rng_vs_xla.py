"""rng_bit_generator vs XLA's CPU backend: bit-exact output and output state.

jax.lax.rng_bit_generator covers u64[2] states and u8/u16/u32/u64 outputs. XLA also takes
PHILOX u64[3] states and signed, sub-byte and float outputs, which jax's wrapper refuses; those
run as raw StableHLO compiled by jaxlib's CPU client (skipped if that API is unavailable).
Everything here is exact (tolerance 0): the generator is a deterministic function of the state.
rng (hidden state) is not bit-reproducible in XLA, so it is tested by distribution in the unit
tests, not here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from tests.differential.compare import assert_same, jax_x64
from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder
from xlapy.ops.rng import RngAlgorithm
from xlapy.types import ElementType as E
from xlapy.types import Shape

jax = jax_x64()
lax = jax.lax

_JAX_ALG = {RngAlgorithm.DEFAULT: lax.RandomAlgorithm.RNG_DEFAULT,
            RngAlgorithm.THREE_FRY: lax.RandomAlgorithm.RNG_THREE_FRY,
            RngAlgorithm.PHILOX: lax.RandomAlgorithm.RNG_PHILOX}
_UNSIGNED = {np.uint8: E.U8, np.uint16: E.U16, np.uint32: E.U32, np.uint64: E.U64}
M = 2**64 - 1

#: Shapes of rank 0..4, odd and even sizes, size-1 and size-0 dimensions.
SHAPES: list[tuple[int, ...]] = [(), (1,), (7,), (8,), (2, 3), (3, 2), (3, 1, 5), (4, 4),
                                 (5, 3, 7), (2, 2, 3), (1, 9, 2), (3, 3, 3), (2, 3, 2, 3),
                                 (0, 4), (6, 9)]


def _states(n: int, size: int, seed: int) -> list[np.ndarray]:
    """Random states plus counters next to the 64- and 128-bit wrap."""
    rs = np.random.default_rng(seed)
    out = [rs.integers(0, 2**64, size, dtype=np.uint64, endpoint=False) for _ in range(n)]
    out.append(np.array([5] + [M - 1] * (size - 1), np.uint64))
    return out


def ours(alg: RngAlgorithm, state: np.ndarray, dims: tuple[int, ...], et: E) -> Any:
    b = XlaBuilder("rbg")
    p = ops.Parameter(b, 0, Shape.array(E.U64, state.shape))
    ops.RngBitGenerator(alg, p, Shape.array(et, dims))
    return xlapy.Client().execute_and_transfer(b.build(), [state]).to_value()


# ---- through jax.lax.rng_bit_generator ---------------------------------------------------------
@pytest.mark.parametrize("alg", list(RngAlgorithm))
@pytest.mark.parametrize("dtype", list(_UNSIGNED))
def test_rng_bit_generator_vs_jax(alg: RngAlgorithm, dtype: type) -> None:
    seed = list(RngAlgorithm).index(alg) * 10 + list(_UNSIGNED).index(dtype)
    states = _states(2, 2, seed)
    # A third of SHAPES per (algorithm, type), rotating so every shape meets every algorithm.
    for dims in SHAPES[seed % 3::3]:
        fn = jax.jit(lambda k, d=dims: lax.rng_bit_generator(k, d, dtype, algorithm=_JAX_ALG[alg]))
        for st in states:
            their_state, their_bits = fn(st)
            our_state, our_bits = ours(alg, st, dims, _UNSIGNED[dtype])
            what = f"{alg.name} {np.dtype(dtype)}{list(dims)} state={st.tolist()}"
            assert_same(our_state, their_state, what=what + " output_state")
            assert_same(our_bits, their_bits, what=what + " output")


def test_rng_bit_generator_random_shapes_vs_jax() -> None:
    rs = np.random.default_rng(1234)
    for i in range(12):
        rank = int(rs.integers(0, 4))
        dims = tuple(int(d) for d in rs.integers(1, 8, rank))
        alg = list(RngAlgorithm)[i % 3]
        dtype = list(_UNSIGNED)[int(rs.integers(0, 4))]
        st = rs.integers(0, 2**64, 2, dtype=np.uint64)
        their = jax.jit(lambda k, d=dims, t=dtype, a=alg: lax.rng_bit_generator(
            k, d, t, algorithm=_JAX_ALG[a]))(st)
        mine = ours(alg, st, dims, _UNSIGNED[dtype])
        what = f"{alg.name} {np.dtype(dtype)}{list(dims)}"
        assert_same(mine[0], their[0], what=what + " output_state")
        assert_same(mine[1], their[1], what=what + " output")


@pytest.mark.parametrize("dtype", list(_UNSIGNED))
def test_jax_random_rbg_bits(dtype: type) -> None:
    """jax.random's 'rbg' PRNG: bits = rng_bit_generator(DEFAULT) of the u32[4] key as u64[2]."""
    for seed in (0, 7, 2**31 + 5):
        key = jax.random.key(seed, impl="rbg")
        for dims in [(5,), (2, 3), (4, 1, 3)]:
            their = jax.random.bits(key, dims, dtype)
            state = np.asarray(jax.random.key_data(key), np.uint32).view(np.uint64)
            _, mine = ours(RngAlgorithm.DEFAULT, state, dims, _UNSIGNED[dtype])
            assert_same(mine, their, what=f"rbg seed={seed} {np.dtype(dtype)}{list(dims)}")


def test_threefry2x32_vs_jax_primitive() -> None:
    """Our Threefry-2x32 kernel vs jax's threefry2x32 primitive on random keys and counters."""
    from jax.extend.random import threefry_2x32

    from xlapy.ops.rng_bits import threefry2x32

    rs = np.random.default_rng(5)
    for _ in range(4):
        key = rs.integers(0, 2**32, 2, dtype=np.uint32)
        count = rs.integers(0, 2**32, 64, dtype=np.uint32)
        their = np.asarray(threefry_2x32(key, count))
        a, b = threefry2x32(count[:32], count[32:], key[0], key[1])
        assert_same(np.concatenate([a, b]), their, what=f"threefry key={key.tolist()}")


# ---- raw StableHLO through jaxlib (u64[3] states, every output type) -------------------------
def _raw_runner() -> Any:
    try:
        import jax.extend as je
        from jax._src.lib import xla_client as xc

        backend = je.backend.get_backend("cpu")
        devices = xc.DeviceList(tuple(backend.local_devices()[:1]))
    except Exception as e:  # pragma: no cover - depends on the jaxlib build
        pytest.skip(f"raw StableHLO compilation unavailable: {e}")

    def run(alg: RngAlgorithm, state: np.ndarray, dims: tuple[int, ...], et: E
            ) -> tuple[np.ndarray, np.ndarray]:
        n = state.shape[0]
        st = f"tensor<{n}xui64>"
        ot = Shape.array(et, dims).to_shlo()
        # XLA CPU compiles a signed integer output as the unsigned type of its width (u2 for
        # s2, u8 for s8: the executable's result shape disagrees with the module's). jaxlib
        # 0.10 read such a buffer anyway; jaxlib 0.12 refuses sub-byte ones ("Shape mismatch
        # during ToLiteral conversion u2 vs s2"). So signed outputs are returned through a
        # bitcast_convert to the unsigned type; only the bits are compared.
        signed = et.is_integer and et.is_signed
        rt = Shape.array(E(f"u{et.bits}"), dims).to_shlo() if signed else ot
        cast = f"    %r = stablehlo.bitcast_convert %o : ({ot}) -> {rt}\n" if signed else ""
        text = (f"module @m {{\n  func.func public @main(%arg0: {st}) -> ({st}, {rt}) {{\n"
                f"    %s, %o = stablehlo.rng_bit_generator %arg0, algorithm = {alg.name} : "
                f"({st}) -> ({st}, {ot})\n{cast}"
                f"    return %s, {'%r' if signed else '%o'} : {st}, {rt}\n  }}\n}}\n")
        exe = backend.compile_and_load(text, devices, xc.CompileOptions())
        res = exe.execute_sharded([jax.device_put(state)])
        out = res.disassemble_into_single_device_arrays()
        return np.asarray(out[0][0]), np.asarray(out[1][0])

    return run


def _bits(x: np.ndarray, bits: int) -> np.ndarray:
    """The raw bit patterns of `x` as unsigned integers (low `bits` bits for sub-byte types)."""
    x = np.ascontiguousarray(x)
    if bits < 8:
        return x.view(np.uint8) & np.uint8((1 << bits) - 1)
    return x.view({8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[bits])


RAW_TYPES = [E.S8, E.S16, E.S32, E.S64, E.U2, E.U4, E.S2, E.S4, E.F16, E.BF16, E.F32, E.F64,
             E.F8E4M3FN, E.F8E5M2, E.U32, E.U64]


@pytest.mark.parametrize("alg, size", [(RngAlgorithm.PHILOX, 3), (RngAlgorithm.DEFAULT, 3),
                                       (RngAlgorithm.THREE_FRY, 2), (RngAlgorithm.PHILOX, 2)])
def test_rng_bit_generator_every_type_vs_xla(alg: RngAlgorithm, size: int) -> None:
    run = _raw_runner()
    rs = np.random.default_rng(size * 7 + list(RngAlgorithm).index(alg))
    shapes = [(), (5,), (3, 1, 5), (2, 3, 2)]
    for k, et in enumerate(RAW_TYPES):
        dims = shapes[k % len(shapes)]
        st = rs.integers(0, 2**64, size, dtype=np.uint64)
        if k % 4 == 3:
            st[1:] = M  # counter wrap
        their_state, their_bits = run(alg, st, dims, et)
        our_state, our_bits = ours(alg, st, dims, et)
        what = f"{alg.name} u64[{size}] {et}{list(dims)} state={st.tolist()}"
        assert our_bits.dtype == et.dtype and our_bits.shape == dims, what
        assert_same(our_state, their_state, what=what + " output_state")
        assert_same(_bits(our_bits, et.bits), _bits(their_bits, et.bits), what=what + " output")


def test_philox_u64x3_counter_wrap_vs_xla() -> None:
    run = _raw_runner()
    for st in ([3, M - 1, M], [3, M, M], [9, M - 2, 17], [0, 0, 0]):
        state = np.array(st, np.uint64)
        for dims, et in [((9,), E.U32), ((5,), E.U64), ((2, 3), E.U8), ((4, 3), E.F32)]:
            their_state, their_bits = run(RngAlgorithm.PHILOX, state, dims, et)
            our_state, our_bits = ours(RngAlgorithm.PHILOX, state, dims, et)
            what = f"PHILOX {st} {et}{list(dims)}"
            assert_same(our_state, their_state, what=what + " output_state")
            assert_same(_bits(our_bits, et.bits), _bits(their_bits, et.bits), what=what)
