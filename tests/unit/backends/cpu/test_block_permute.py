"""block_permute.py: a transpose of a buffer within small trailing blocks ([.., 16, 2] ->
[.., 2, 16]: 0.77 -> 0.36 ms for 65536, XLA 0.42) moves groups of blocks through one vector
shuffle: every element type's bits (NaN payloads too), blocks past the last whole group,
leading dimensions kept, thread splits, each x86 target; what it does not take keeps the
other transposes."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import target

jax = pytest.importorskip("jax")
jnp = jax.numpy


def _text(shape: tuple[int, ...], perm: tuple[int, ...], dtype: Any) -> str:
    x = jax.ShapeDtypeStruct(shape, dtype)
    with jax.enable_x64(np.dtype(dtype) == np.float64):
        return jax.jit(lambda v: jnp.transpose(v, perm)).lower(x).as_text()


def _data(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    rng = np.random.default_rng(sum(shape))
    if np.dtype(dtype) == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-100, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _kinds(prog: Any) -> list[str]:
    return [line for line in prog._exe.explain().splitlines() if " transpose " in line]


CASES = [((1031, 16, 2), (0, 2, 1)), ((999, 3, 4), (0, 2, 1)), ((77, 2, 3, 4), (0, 3, 1, 2)),
         ((5, 7, 2, 4), (0, 1, 3, 2)), ((300, 2, 16), (0, 2, 1)), ((3, 4, 4), (0, 2, 1))]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16, np.int8,
                                   np.bool_])
def test_bits_of_numpy_transpose(case: tuple[Any, Any], dtype: Any) -> None:
    shape, perm = case
    text = _text(shape, perm, dtype)
    x = _data(shape, dtype)
    want = np.ascontiguousarray(np.transpose(x, perm))
    for threads in (1, 2):
        prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
        kinds = _kinds(prog)
        assert kinds and all("block permute" in k for k in kinds), kinds
        got = np.asarray(prog(x))
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_nan_payloads_move_untouched() -> None:
    x = np.full((64, 16, 2), np.nan, np.float32)
    x.view(np.uint32)[...] = np.arange(x.size, dtype=np.uint32).reshape(x.shape) | 0x7FC00000
    got = np.asarray(xlapy.compile(_text(x.shape, (0, 2, 1), np.float32), backend="cpu")(x))
    np.testing.assert_array_equal(got.view(np.uint32), np.swapaxes(x, 1, 2).view(np.uint32))


@pytest.mark.parametrize("name", ["x86-64-v3", "x86-64-v2"])
def test_lower_targets(name: str) -> None:
    t = target.resolve(name)
    if not t.runs_here:
        pytest.skip(f"{name} does not run here")
    for shape, perm in CASES[:3]:
        x = _data(shape, np.float32)
        prog = xlapy.compile(_text(shape, perm, np.float32), backend="cpu",
                             options={"target": name})
        assert any("block permute" in k for k in _kinds(prog))
        np.testing.assert_array_equal(np.asarray(prog(x)), np.transpose(x, perm))


@pytest.mark.parametrize(("shape", "perm"), [((64, 8, 8), (0, 2, 1)),  # transpose_lib's
                                             ((64, 5, 7), (0, 2, 1)),  # group over 256 B
                                             ((64, 16, 2), (2, 1, 0))])  # moves dimension 0
def test_what_it_does_not_take(shape: tuple[int, ...], perm: tuple[int, ...]) -> None:
    prog = xlapy.compile(_text(shape, perm, np.float32), backend="cpu")
    assert not any("block permute" in k for k in _kinds(prog))
    x = _data(shape, np.float32)
    np.testing.assert_array_equal(np.asarray(prog(x)), np.transpose(x, perm))


def test_a_fused_transpose_is_not_taken() -> None:
    x = _data((64, 16, 2), np.float32)
    text = jax.jit(lambda v: jnp.swapaxes(v, 1, 2) * 2).lower(x).as_text()
    prog = xlapy.compile(text, backend="cpu")
    assert "block permute" not in prog._exe.explain()
    np.testing.assert_array_equal(np.asarray(prog(x)), np.swapaxes(x, 1, 2) * 2)

