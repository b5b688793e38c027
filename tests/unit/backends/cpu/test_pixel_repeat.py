"""Repeats of pixels along a row (jnp.repeat of 3-channel images, a 2x nearest upsample):
a minor stack (lanes along the pixels, the channels interleaved into one store) whose
reshape splits the lane's dimension with the channels after it pinned (lanes.split_patterns)
and reads each channel from one tile of whole pixels (lane_split._pattern_column). The
kernel used 3 of 8 masked lanes a pixel (upsample of [8, 128, 128, 3] f32 1.4x XLA's time,
uint8 2.2x). The interpreter's bits for odd widths (a scalar rest), repeats by 2, 3, 4, 8,
2 to 5 channels, five element types."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.lanes import split_patterns, vector_width

from .util import lowered_bits

jax = pytest.importorskip("jax")
jnp = jax.numpy
W = vector_width()


def upsample(x: Any) -> Any:
    return jnp.repeat(jnp.repeat(x, 2, 1), 2, 2)


CASES: dict[str, tuple[Any, tuple[int, ...]]] = {
    "upsample": (upsample, (2, 5, 2 * W, 3)),
    "upsample_odd": (upsample, (3, 7, 2 * W + 5, 3)),
    "four_channels": (upsample, (2, 3, W + 3, 4)),
    "two_channels": (upsample, (2, 3, W + 1, 2)),
    "five_channels_by_2": (lambda x: jnp.repeat(x, 2, 2), (2, 3, W + 5, 5)),
    "by_4": (lambda x: jnp.repeat(x, 4, 2), (2, 3, W + 3, 3)),
    "by_8": (lambda x: jnp.repeat(x, 8, 2), (2, 3, 5, 3)),
    "then_scaled": (lambda x: upsample(x) * 3 - x[0, 0, 0], (2, 4, W + 3, 3)),
    "of_a_product": (lambda x: upsample(x * x), (2, 4, W + 3, 3)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int32, "bfloat16", np.float64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_pixel_repeats_run_in_stacked_lanes(case: str, dtype: Any) -> None:
    fn, shape = CASES[case]
    rng = np.random.default_rng(len(case))
    exe = lowered_bits(fn, (rng.standard_normal(shape) * 40).astype(dtype))._exe
    assert all(k.explicit for k in exe.kernel_specs) and not exe.fallbacks()
    c = shape[-1]
    if c < W:  # (minor_stack.short: else the lanes run along the channels)
        assert f"<{c * W} x" in exe.kernel_ir  # the C channels of W pixels stored at once


def test_a_repeat_by_3_along_the_row_stays_masked() -> None:
    """Lane k's pixel (base + k) // 3 is no fixed pattern of k (base a multiple of W): the
    row kernel it was, with the interpreter's bits."""
    x = np.arange(2 * 3 * (W + 3) * 3, dtype=np.float32).reshape(2, 3, W + 3, 3)
    text = jax.jit(lambda x: jnp.repeat(x, 3, 2)).lower(x).as_text()
    got = np.asarray(xlapy.compile(text, backend="cpu")(x))
    np.testing.assert_array_equal(got, np.repeat(x, 3, 2))


def test_split_patterns_with_pinned_columns() -> None:
    """[.., n, 2, 3] -> [.., 2n, 3]: the channels after the split dimension only when
    pinned; a row that is not whole vectors only when the lanes are whole (`whole`)."""
    out, src = (4, 32, 3), (4, 16, 2, 3)
    pats = {1: tuple(k // 2 for k in range(16)), 2: tuple(k % 2 for k in range(16))}
    assert split_patterns(out, src, 1, 16) is None
    assert split_patterns(out, src, 1, 16, pinned=True) == pats
    odd, odd_src = (4, 26, 3), (4, 13, 2, 3)
    assert split_patterns(odd, odd_src, 1, 16, pinned=True) is None
    assert split_patterns(odd, odd_src, 1, 16, pinned=True, whole=True) == pats
