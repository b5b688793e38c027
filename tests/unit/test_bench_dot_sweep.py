"""Smoke test of benchmarks/dot_sweep.py: shapes parse (bad ones are refused with the shape
named), and one small dot runs on both sides with its route and no fallback. No timing
assertions: timings belong to the benchmark."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import dot_sweep


def test_shapes_parse_and_bad_ones_are_named() -> None:
    assert dot_sweep.parse_shapes("2x1024x4096, 1x8x1") == [(2, 1024, 4096), (1, 8, 1)]
    assert len(dot_sweep.parse_shapes(dot_sweep.SHAPES)) == 34
    for bad in ("3x0x4", "2x3", "ax2x3", "2x3x4x5"):
        with pytest.raises(SystemExit, match=f"bad shape '{bad}'"):
            dot_sweep.parse_shapes(bad)


def test_one_small_dot_runs_on_both_sides() -> None:
    r = dot_sweep.sweep_one(16, 32, 24, np.float32, reps=1, burst=1)
    assert r["fallbacks"] == 0 and r["err"] < 1e-5
    assert r["route"] == "jit gemm" and r["xlapy"] > 0 and r["xla"] > 0
