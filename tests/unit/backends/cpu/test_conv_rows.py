"""Channels-last convolutions with padding read their input rows in-kernel (conv_kernel.py's
ring of zero-padded rows, no padded copy per call): every padding form, strides, window
dilations whose rows do or do not fit the ring, groups, 1-3 spatial dimensions and thread
splits give the interpreter's result."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_conv_general import Case, _check
from xlapy.backends.cpu import conv_general
from xlapy.stablehlo import parse_module

ROWS = {
    "same_3x3": Case(2, 16, (6, 9), 16, (3, 3), pad=((1, 1), (1, 1))),
    "odd_channels": Case(2, 5, (5, 7), 3, (3, 3), pad=((1, 1), (1, 1))),
    "asymmetric": Case(1, 4, (7, 6), 8, (2, 4), pad=((0, 3), (2, 0))),
    "negative_low": Case(2, 3, (8, 7), 4, (3, 3), pad=((-1, 2), (1, -2))),
    "all_padding_rows": Case(1, 2, (2, 3), 4, (3, 3), pad=((4, 4), (1, 1))),
    "stride2": Case(2, 8, (9, 10), 16, (3, 3), stride=(2, 2), pad=((1, 1), (1, 1))),
    "dilation_prime": Case(1, 4, (9, 9), 8, (3, 3), rhs_dil=(2, 2), pad=((2, 2), (2, 2))),
    "dilation_shares_slot": Case(1, 4, (10, 8), 8, (3, 2), rhs_dil=(3, 2),
                                 pad=((3, 3), (1, 1))),
    "grouped": Case(2, 8, (6, 6), 12, (3, 3), fg=4, pad=((1, 1), (1, 1))),
    "depthwise_lanes": Case(1, 16, (5, 6), 16, (3, 3), fg=16, pad=((1, 1), (1, 1))),
    "one_d": Case(3, 4, (17,), 5, (3,), stride=(2,), pad=((2, 1),),
                  layout=("b0f", "0io", "b0f")),
    "three_d": Case(2, 3, (5, 6, 4), 4, (3, 2, 3), pad=((1, 1), (0, 1), (1, 1)),
                    layout=("b012f", "012io", "b012f")),
    "wide": Case(2, 32, (5, 64), 32, (3, 3), pad=((1, 1), (1, 1))),
}


def _nest_rows(case: Case) -> bool:
    """Whether the plan of `case` pads in-kernel."""
    instr = parse_module(case.text("f32")[0]).entry_computation().root
    geo = conv_general.geometry(instr)
    return all(d == 1 for d in geo.lhs_dil) and any(p != (0, 0) for p in geo.pad)


@pytest.mark.parametrize("form", list(ROWS))
@pytest.mark.parametrize("t", ["f32", "f64"])
def test_rows_forms(form: str, t: str) -> None:
    assert _nest_rows(ROWS[form])
    _check(ROWS[form], t, t)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_rows_threads_same_bits(threads: int) -> None:
    """Each part has its own ring; an output row is summed whole by one part: the bits do
    not depend on the thread count (and a second call, ring tags reset, gives them again)."""
    case = Case(4, 32, (12, 20), 32, (3, 3), pad=((1, 1), (1, 1)))
    text, xs, ws = case.text("f32")
    rng = np.random.default_rng(3)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    one = np.asarray(xlapy.compile(text, backend="cpu", options={"num_threads": 1})(x, w))
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    np.testing.assert_array_equal(np.asarray(cpu(x, w)), one)
    np.testing.assert_array_equal(np.asarray(cpu(x * 2, w)), one * 2)


def test_rows_need_no_padded_copy() -> None:
    """The plan keeps no padded input buffer: only its small per-thread row scratch."""
    case = ROWS["wide"]
    text, xs, ws = case.text("f32")
    instr = parse_module(text).entry_computation().root
    run = conv_general.general_plan(instr, 2)
    x = np.ones(xs, np.float32)
    w = np.ones(ws, np.float32)
    out = np.empty((2, 5, 64, 32), np.float32)
    run(x, w, out)
    padded, scratch = run.kept
    assert not padded and scratch and all(a.shape[1] < 40 << 10 for a in scratch)
    assert out[0, 2, 10, 0] == 9 * 32 and out[0, 0, 0, 0] == 4 * 32
