"""xlapy.phases: a compile's per-phase breakdown (issue 14) adds up and costs nothing outside
a recording."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy import phases
from xlapy.phases import ORDER, phase, recording


def test_phases_are_exclusive_and_add_up_to_the_total(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(phases.time, "perf_counter", lambda: clock[0])

    def spend(seconds: float) -> None:
        clock[0] += seconds

    with recording() as rec:
        spend(0.002)
        with phase("passes"):
            spend(0.004)
            with phase("llvm codegen"):  # pauses "passes"
                spend(0.006)
            spend(0.001)
    assert rec.seconds == pytest.approx({"other": 0.002, "passes": 0.005,
                                         "llvm codegen": 0.006})
    assert rec.total == pytest.approx(0.013)
    line = rec.table()
    assert line == "compile 13.0 ms: passes 5.0, llvm codegen 6.0, other 2.0"


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


def test_compile_parses_with_the_cyclic_gc_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """xlapy.compile pauses the collector from parsing on (a full collection in a process
    holding jax took 40-70 ms inside a 21 ms compile) and restores it, also on a bad text."""
    import gc

    import xlapy.stablehlo

    seen: list[bool] = []
    real = xlapy.stablehlo.parse_module

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return real(*a, **k)

    monkeypatch.setattr(xlapy.stablehlo, "parse_module", spy)
    text = ("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
            "  %y = stablehlo.exponential %x : tensor<4xf32>\n  return %y : tensor<4xf32>\n}\n")
    assert gc.isenabled()
    xlapy.compile(text, backend="interpreter")
    assert seen == [False] and gc.isenabled()
    with pytest.raises(xlapy.errors.XlapyError):
        xlapy.compile(text.replace("return", "retrun"), backend="interpreter")
    assert gc.isenabled()
