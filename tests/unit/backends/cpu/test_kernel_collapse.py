"""kernel_collapse.py: kernels of short last dimensions whose index ops move whole rows run
with their trailing dimensions merged (an NHWC image of 3 channels padded: 0.26 -> 0.08 ms,
XLA 0.12-0.22): the interpreter's bits; what it cannot merge keeps its shape."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.kernel_collapse import collapse
from xlapy.backends.cpu.lanes import vector_width
from xlapy.stablehlo import parse_module

jax = pytest.importorskip("jax")
lax = jax.lax
jnp = jax.numpy
W = vector_width()

CASES: dict[str, tuple[Any, list[tuple[int, ...]]]] = {
    "pad_pixels": (lambda x: jnp.pad(x, ((0, 0), (4, 4), (3, 5), (0, 0))), [(2, 9, 11, 3)]),
    "pad_value_relu": (lambda x: jnp.pad(jax.nn.relu(x), ((1, 2), (0, 0), (0, 0)),
                                         constant_values=-1.0), [(5, 7, 2)]),
    "pad_interior_rows": (lambda x: lax.pad(x, np.float32(0.5),
                                            ((1, 1, 2), (2, 0, 0), (0, 0, 0))), [(4, 6, 3)]),
    "concat_rows": (lambda a, b: jnp.concatenate([a, b], 0) * 2.0, [(37, 3), (20, 3)]),
    "concat_rows_big": (lambda a, b, c: jnp.concatenate([a, b, c], 0) * 2.0 - 1.0,
                        [(20001, 3), (0, 3), (9999, 3)]),
    "pad_rows_scaled": (lambda x: jnp.pad(x, ((3, 2), (0, 0)), constant_values=7.0) * 3.0,
                        [(4001, 3)]),
    "concat_pixels": (lambda a, b: jnp.concatenate([a, b], 2), [(2, 5, 7, 3), (2, 5, 4, 3)]),
    "crop": (lambda x: x[:, 2:-3, 1:-1, :] + 1.0, [(3, 12, 10, 3)]),
    "flip_rows": (lambda x: jnp.flip(x[1:], 0) - x[:-1], [(9, 10, 2)]),
    "iota_rows": (lambda x: x * lax.broadcasted_iota(jnp.float32, x.shape, 0), [(16, 5, 3)]),
    "broadcast_rows": (lambda x, y: x + jnp.broadcast_to(y, x.shape), [(6, 8, 3), (1, 8, 3)]),
}


def _run(fn: Any, args: list[Any]) -> tuple[Any, str]:
    text = jax.jit(fn).lower(*args).as_text()
    got = xlapy.compile(text, backend="cpu")(*args)
    want = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    return got, text


def _collapsed(text: str) -> bool:
    """Whether collapse takes the entry's root kernel read from its parameters."""
    mod = parse_module(text)
    root = mod.entry.root
    leaves = {id(p): k for k, p in enumerate(mod.entry.parameters)}
    return collapse(root, leaves) is not None


@pytest.mark.parametrize("case", sorted(CASES))
def test_index_kernels_of_short_rows_merge(case: str) -> None:
    fn, shapes = CASES[case]
    rng = np.random.default_rng(len(case))
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    _run(fn, args)


CROPS = [(start, itype) for itype in (np.int8, np.int32, np.uint8)
         for start in (-3, 0, 2, 5, 1 << 30)
         if np.iinfo(itype).min <= start <= np.iinfo(itype).max]  # (the starts each type holds)


@pytest.mark.parametrize(("start", "itype"), CROPS)
def test_random_crops_clamp_their_start_as_before(start: int, itype: Any) -> None:
    """The crop's start is clamped in pixels, then scaled to the merged rows (a start of
    2^30 pixels, or one in an s8 index, would overflow scaled first)."""
    x = np.arange(2 * 12 * 12 * 3, dtype=np.float32).reshape(2, 12, 12, 3)
    i = np.asarray(start, itype)
    got, _ = _run(lambda x, i: lax.dynamic_slice(x, (i * 0, i, i, i * 0), (2, 7, 7, 3)),
                  [x, i])
    k = min(max(int(start) + (12 if start < 0 else 0), 0), 5)  # (jax wraps negative ones)
    np.testing.assert_array_equal(np.asarray(got), x[:, k:k + 7, k:k + 7])


def test_what_it_takes_and_leaves() -> None:
    x = np.zeros((2, 16, 16, 3), np.float32)
    def pad(x: Any) -> Any:
        return lax.pad(x, np.float32(0), ((0, 0, 0), (2, 2, 0), (2, 2, 0), (0, 0, 0)))
    assert _collapsed(jax.jit(pad).lower(x).as_text()) == (W > 3)
    flip = jax.jit(lambda x: lax.rev(x, (2,)) * 2.0).lower(x).as_text()  # (moves pixels)
    assert not _collapsed(flip)
    points = np.zeros((300, 3), np.float32)  # (segments where each operand is read)
    concat = jax.jit(lambda a, b: jnp.concatenate([a, b], 0) * 2.0).lower(points, points)
    assert _collapsed(concat.as_text()) == (W > 3)
    wide = np.zeros((2, 16, 16, 4 * W), np.float32)
    assert not _collapsed(jax.jit(pad).lower(wide).as_text())  # (rows of whole vectors)
