"""total_minmax.py: a float max/min over a whole array runs by rows first, with the
interpreter's bits (NaNs, signed zeros, infinities, a non-identity init), and lengths
without a row shape stay one reduce."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.total_minmax import MIN_ELEMENTS, TotalMinMax, row_length
from xlapy.stablehlo import parse_module

jax = pytest.importorskip("jax")
jnp, lax = jax.numpy, jax.lax


def _text(fn: Any, x: np.ndarray) -> str:
    return jax.jit(fn).lower(x).as_text()


def _same_bits(text: str, x: np.ndarray) -> None:
    got = np.asarray(xlapy.compile(text, backend="cpu")(x))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x))
    assert got.tobytes() == want.tobytes(), (got, want)


def _filled(shape: tuple[int, ...], dtype: Any, special: list[float], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    for v in special:  # at random places, some in the same row
        flat[rng.integers(0, flat.size)] = v
    return x.astype(dtype)


@pytest.mark.parametrize("shape", [(1 << 16,), (256, 256), (3000, 31, 7), (6007, 13),
                                   (8, 4, 2048), (1 << 14,)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("special", [[], [np.nan], [-0.0, 0.0], [np.inf, -np.nan]])
@pytest.mark.parametrize("op", ["max", "min"])
def test_whole_array_minmax_has_the_interpreters_bits(shape: tuple[int, ...], dtype: Any,
                                                     special: list[float], op: str) -> None:
    x = _filled(shape, dtype, special, seed=len(shape) + len(special))
    if special == [-0.0, 0.0]:  # the answer itself a zero: every value a signed zero
        x = np.where(np.arange(x.size).reshape(shape) % 3 == 0, -0.0, 0.0).astype(dtype)
    _same_bits(_text(jnp.max if op == "max" else jnp.min, x), x)


def test_an_init_joins_each_level() -> None:
    """lax.reduce with an init above every value: the init, not a row's maximum."""
    x = _filled((64, 4096), np.float32, [], 3)
    text = _text(lambda v: lax.reduce(v, np.float32(9.5), lax.max, (0, 1)), x)
    assert float(xlapy.compile(text, backend="cpu")(x)) == 9.5
    _same_bits(text, x)


@pytest.mark.parametrize("shape,length", [
    ((1 << 20,), 4096),      # a multiple of ROW: rows of ROW (one reduce: 4.3 ms, XLA 1.5)
    ((64, 256, 1024), 1024), # the array's own rows, long enough
    ((1 << 12, 64), 4096),   # short ones: rows of ROW
    ((3000, 3001), 3001),    # the array's own rows
    ((9003005,), 7117),      # 1-D: a divisor of its length (1265 rows)
    ((16411,), None),        # a prime length: stays one reduce
    ((MIN_ELEMENTS - 1,), None),
])
def test_row_length(shape: tuple[int, ...], length: int | None) -> None:
    x = jax.ShapeDtypeStruct(shape, jnp.float32)
    module = parse_module(jax.jit(jnp.max).lower(x).as_text())
    (r,) = [i for i in module.entry_computation().instructions if i.opcode == "reduce"]
    assert row_length(r) == length
    assert TotalMinMax().run(module) == (length is not None)


def test_sums_and_integers_stay() -> None:
    for fn, dtype in ((jnp.sum, np.float32), (jnp.max, np.int32)):
        x = jax.ShapeDtypeStruct((1 << 16,), dtype)
        assert not TotalMinMax().run(parse_module(jax.jit(fn).lower(x).as_text()))
