"""Windows along the last dimension only (window_slide.py): the interior columns fold in
registers, the others as before. A moving sum of 16 over [64, 16384] read and wrote its
output row once per window position (3.3x XLA's time): bit for bit the interpreter's fold
and the generic fold's, NaN, +-0, infinities and denormals included (util.values), for
padding on either side, dilated windows, strided outer dimensions, rank 1 split over
threads, rows shorter than one register block, and inits that are not the identity."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import window_slide
from xlapy.types import ElementType as ET

from .test_window_emit import IDENTITY, check, data, reduce_window, same, scalar
from .util import recorded

#: (dims, window, strides, window dilations, padding)
SLIDES = [
    ((4, 203), (1, 16), None, None, None),                          # a moving sum (VALID)
    ((3, 150), (1, 5), None, None, [(0, 0), (2, 2)]),               # SAME
    ((2, 5, 97), (1, 1, 7), None, None, [(0, 0), (0, 0), (6, 0)]),  # causal
    ((3, 120), (1, 4), None, (1, 3), [(0, 0), (1, 5)]),             # dilated window
    ((6, 90), (1, 3), (2, 1), None, None),                          # strided rows
    ((2, 20), (1, 9), None, None, [(0, 0), (-3, 4)]),              # negative padding
    ((3, 11), (1, 3), None, None, None),                            # shorter than a block
    ((4, 50), (1, 60), None, None, [(0, 0), (5, 5)]),              # window > row
    ((1500,), (33,), None, None, [(16, 16)]),                       # rank 1 (threads)
]


@pytest.fixture
def slid() -> Iterator[list[bool]]:
    """Whether each reduce_window compiled meanwhile took the register fold."""
    with recorded(window_slide.SlideEmitter, "slides") as seen:
        yield seen


def _generic(text: str, args: list[Any], threads: int) -> Any:
    orig = window_slide.SlideEmitter.slides
    window_slide.SlideEmitter.slides = lambda self: False  # type: ignore[method-assign]
    try:
        return xlapy.compile(text, backend="cpu", options={"num_threads": threads})(*args)
    finally:
        window_slide.SlideEmitter.slides = orig  # type: ignore[method-assign]


@pytest.mark.parametrize("t", [ET.F32, ET.F64])
@pytest.mark.parametrize("op", ["add", "maximum", "minimum", "multiply"])
@pytest.mark.parametrize("k", range(len(SLIDES)))
def test_last_dimension_windows_fold_in_registers(t: ET, op: str, k: int,
                                                  slid: list[bool]) -> None:
    dims, window, strides, wdil, padding = SLIDES[k]
    x = data(t, dims, seed=k + 70)
    text = reduce_window(t, dims, op, window, strides, None, wdil, padding)
    for init in (IDENTITY[op], -0.0, 1.5):
        args = [x, scalar(t, init)]
        got = check(text, args, "reduce_window", num_threads=2)
        same(got, _generic(text, args, 2))
    assert slid and all(slid)


def test_what_keeps_the_generic_fold(slid: list[bool]) -> None:
    """A window on an outer dimension, a strided last one, an integer type."""
    for t, dims, window, strides in [(ET.F32, (4, 40), (2, 3), None),
                                     (ET.F32, (4, 40), (1, 3), (1, 2)),
                                     (ET.S32, (4, 40), (1, 3), None)]:
        x = data(t, dims, seed=3)
        text = reduce_window(t, dims, "add", window, strides)
        check(text, [x, scalar(t, 0)], "reduce_window")
    assert slid == [False, False, False]


def test_a_moving_average_from_jax() -> None:
    jax = pytest.importorskip("jax")
    x = np.random.default_rng(0).standard_normal((8, 1000)).astype(np.float32)
    fn = jax.jit(lambda x: jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 16), (1, 1),
                                                 "VALID") / 16)
    got = xlapy.compile(fn.lower(x).as_text(), backend="cpu")(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(fn(x)))
