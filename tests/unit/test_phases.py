"""xlapy.phases: a compile's per-phase breakdown (issue 14) adds up and costs nothing outside
a recording."""

from __future__ import annotations

import time

import numpy as np

import xlapy
from xlapy.phases import ORDER, phase, recording


def test_phases_are_exclusive_and_add_up_to_the_total() -> None:
    with recording() as rec:
        time.sleep(0.002)
        with phase("passes"):
            time.sleep(0.004)
            with phase("llvm codegen"):  # pauses "passes"
                time.sleep(0.006)
    assert set(rec.seconds) == {"other", "passes", "llvm codegen"}
    assert rec.seconds["llvm codegen"] >= 0.006
    assert 0.004 <= rec.seconds["passes"] < 0.006 + 0.004
    assert abs(sum(rec.seconds.values()) - rec.total) < 1e-6
    line = rec.table()
    assert line.startswith(f"compile {rec.total * 1e3:.1f} ms: ")
    assert line.index("passes") < line.index("llvm codegen") < line.index("other")


def test_phase_outside_a_recording_does_nothing_and_recordings_nest() -> None:
    with phase("emit"):
        pass
    with recording() as outer:
        with recording() as inner, phase("emit"):
            pass
    assert inner is outer and "emit" in outer.seconds


def test_compile_reports_its_phases() -> None:
    text = """
func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {
  %y = stablehlo.exponential %x : tensor<64xf32>
  return %y : tensor<64xf32>
}
"""
    prog = xlapy.compile(text, backend="cpu")
    assert prog.phases is not None and prog.phases is prog._exe.phases
    assert {"parse", "import", "passes", "emit"} <= set(prog.phases.seconds)
    assert set(prog.phases.seconds) <= set(ORDER)
    np.testing.assert_allclose(prog(np.zeros(64, np.float32)), np.ones(64, np.float32))
