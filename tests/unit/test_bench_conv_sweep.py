"""Smoke test of benchmarks/conv_sweep.py: the layers' operands and flops agree with their
shapes, a bad --only is refused with the index named, and one small layer runs on both sides
with its route and no fallback. No timing assertions: timings belong to the benchmark."""

from __future__ import annotations

import pytest

from benchmarks import conv_sweep


def test_layers_operands_and_flops() -> None:
    layer = conv_sweep.Layer(2, 9, 4, 8, 3, 2)
    _, x, w, flops = conv_sweep.operands(layer)
    assert x.shape == (2, 9, 9, 4) and w.shape == (3, 3, 4, 8)
    assert flops == 2.0 * 2 * 5 * 5 * 8 * 4 * 9
    nchw = conv_sweep.Layer(1, 6, 4, 4, 3, groups=2, layout="NCHW", padding="VALID")
    _, x, w, flops = conv_sweep.operands(nchw)
    assert x.shape == (1, 4, 6, 6) and w.shape == (4, 2, 3, 3)
    assert flops == 2.0 * 4 * 4 * 4 * 2 * 9


def test_bad_only_is_refused() -> None:
    with pytest.raises(SystemExit, match="no layer 99"):
        conv_sweep.main(["--only", "99"])
    with pytest.raises(SystemExit, match="layer indices"):
        conv_sweep.main(["--only", "x"])


def test_one_small_layer_runs_on_both_sides() -> None:
    r = conv_sweep.sweep_one(conv_sweep.Layer(2, 8, 4, 16, 3), reps=1, burst=1)
    assert r["fallbacks"] == 0 and r["err"] < 1e-5
    assert r["route"] == "conv-direct" and r["xlapy"] > 0 and r["xla"] > 0
