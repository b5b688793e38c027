"""reverse_emit.py: a reverse along a kernel's vector lanes reads the mirrored lanes and
permutes them (jnp.flip(x, -1) * 2 + x was scalar code, 1.5x XLA's time), and a flip of
pixels of 3 channels runs with its lanes along the pixels (minor_stack.short: uint8 images
6x XLA's time -> 1.2x): the interpreter's bits, masked tails and shifted lanes included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.lanes import vector_width

from .util import lowered_bits

jax = pytest.importorskip("jax")
lax = jax.lax
jnp = jax.numpy
W = vector_width()

CASES: dict[str, tuple[Any, tuple[int, ...]]] = {
    "flip_rows": (lambda x: jnp.flip(x, -1) * 2.0 + x, (9, 4 * W)),
    "masked_tail": (lambda x: jnp.flip(x, -1) - x, (7, 3 * W + 5)),
    "short_row": (lambda x: jnp.flip(x, -1) * x, (5, W - 3)),
    "sliced_then_flipped": (lambda x: x[:, 3:-2][:, ::-1] * 3.0, (6, 4 * W + 1)),
    "flipped_then_sliced": (lambda x: x[:, ::-1][:, 2:-5] + 1.0, (6, 4 * W + 1)),
    "both_dims": (lambda x: lax.rev(x, (0, 1)) * x, (11, 2 * W + 3)),
    "twice": (lambda x: lax.rev(lax.rev(x, (1,)) + 1.0, (1,)) - x, (4, 3 * W + 2)),
    "pixels": (lambda x: jnp.flip(x, 2) + x, (2, 6, 2 * W + 3, 3)),
    "pixel_crop": (lambda x: jnp.flip(x[:, 1:-1, 2:-1, :], 2) * 2.0, (2, 6, 3 * W, 3)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int32, "bfloat16", np.float64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_reverses_along_the_lanes(case: str, dtype: Any) -> None:
    import ml_dtypes
    fn, shape = CASES[case]
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    rng = np.random.default_rng(len(case))
    cpu = lowered_bits(fn, (rng.standard_normal(shape) * 40).astype(dt))
    assert all(k.explicit for k in cpu._exe.kernel_specs)  # type: ignore[attr-defined]


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_a_horizontal_flip_of_pixels_runs_in_stacked_lanes(dtype: Any) -> None:
    """Lanes along the pixels, the 3 channels interleaved into one store, not 3 masked
    lanes of 8 a pixel."""
    x = (np.arange(2 * 5 * (4 * W + 1) * 3) % 251).astype(dtype).reshape(2, 5, 4 * W + 1, 3)
    text = jax.jit(lambda x: jnp.flip(x, 2)).lower(x).as_text()
    cpu = xlapy.compile(text, backend="cpu")
    np.testing.assert_array_equal(np.asarray(cpu(x)), x[:, :, ::-1])
    assert f"<{3 * W} x" in cpu._exe.kernel_ir  # type: ignore[attr-defined]
