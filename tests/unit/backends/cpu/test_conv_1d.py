"""conv_1d.py: 1-D channels-first convolutions through the direct kernel in segments (the
general loop nest ran a one-feature filter in scalar code: jnp.correlate of 256K samples
with 255 taps 14 ms, 1.26 this way; XLA 13.5)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_conv_general import Case, _check
from xlapy.backends.cpu import conv_1d
from xlapy.backends.cpu.conv_general import conv_route
from xlapy.stablehlo import parse_module

NCW = ("bf0", "oi0", "bf0")


@pytest.mark.parametrize(("case", "t"), [
    (Case(1, 1, (5000,), 1, (255,), layout=NCW), "f32"),  # jnp.correlate's shape
    (Case(1, 1, (3000,), 1, (31,), pad=((15, 15),), layout=NCW), "f32"),  # convolve "same"
    (Case(3, 4, (700,), 6, (9,), pad=((2, 7),), layout=NCW), "f32"),  # features, batch
    (Case(2, 3, (37,), 5, (4,), layout=NCW), "f64"),  # a row shorter than a block
    (Case(1, 2, (400,), 3, (24,), layout=NCW), "f64"),  # taps in whole blocks of 8
    (Case(2, 1, (300,), 2, (17,), pad=((3, 0),), layout=NCW), "f32"),  # 2 blocks and 1 tap
    (Case(1, 2, (10,), 3, (10,), layout=NCW), "f32"),  # one output
    (Case(2, 1, (300,), 1, (1,), layout=("b0f", "0io", "bf0")), "f32"),  # input last: not
])
def test_one_dimensional_convolutions(case: Case, t: str) -> None:
    text = case.text(t)[0]
    root = parse_module(text).entry_computation().root
    assert (conv_route(root) == "nchw-direct") == (case.layout[0] == "bf0")
    _check(case, t, t)


def test_segments_split_the_row_over_threads_with_the_same_bits() -> None:
    text = Case(1, 1, (20000,), 1, (64,), layout=NCW).text("f32")[0]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 1, 20000)).astype(np.float32)
    w = rng.standard_normal((1, 1, 64)).astype(np.float32)
    one = xlapy.compile(text, backend="cpu", options={"num_threads": 1})
    two = xlapy.compile(text, backend="cpu", options={"num_threads": 2})
    np.testing.assert_array_equal(np.asarray(one(x, w)), np.asarray(two(x, w)))
    assert conv_1d.segment(20000 - 63, 16, 2) * 2 * conv_1d.SEGMENTS_PER_THREAD >= 20000 - 63


def test_long_windows_and_short_wide_ones_keep_the_loop_nest() -> None:
    """Past MAX_TAPS taps, and under WIDE_MIN_TAPS into WIDE or more output features (the
    loop nest's vectors along the features won: 16 x 64 x 4096 -> 64, 3 taps 15.7 ms there,
    18.2 here)."""
    def route(case: Case) -> str:
        return conv_route(parse_module(case.text("f32")[0]).entry_computation().root)

    assert route(Case(1, 1, (2000,), 1, (conv_1d.MAX_TAPS + 1,), layout=NCW)) == "direct"
    wide = conv_1d.WIDE
    assert route(Case(2, 4, (500,), wide, (conv_1d.WIDE_MIN_TAPS - 1,), layout=NCW)) == "direct"
    assert route(Case(2, 4, (500,), wide, (conv_1d.WIDE_MIN_TAPS,), layout=NCW)) == \
        "nchw-direct"
    assert route(Case(2, 4, (500,), wide - 1, (3,), layout=NCW)) == "nchw-direct"


def test_long_filters_loop_over_blocks_of_taps() -> None:
    """A window row longer than conv.UNROLLED_TAPS runs a loop over blocks of TAP_BLOCK
    positions: jnp.correlate's 255 taps unrolled were 6,700 IR lines (0.7 s of code
    generation); the sums keep their order (the cases above: the interpreter's bits)."""
    from xlapy.backends.cpu import conv

    def lines(kw: int) -> int:
        return len(str(conv._emit("k", conv.F32, 8, 1, 1, 1, 1, 2048 + kw, 2048, 1, kw,
                                  1, 4, 64)).splitlines())

    assert lines(255) < lines(conv.UNROLLED_TAPS) < 600  # (255 unrolled: ~8,000)
    assert lines(conv.UNROLLED_TAPS) > lines(conv.UNROLLED_TAPS - 1)  # (unrolled whole)
