"""Smoke test of benchmarks/xla_hlo_run.py (issue 20): two small workloads run from StableHLO
and from XLA's optimized HLO, match XLA with no interpreter fallback, and the table prints a
ratio for each. No timing checked here."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

from benchmarks import xla_hlo_run


def test_small_run_prints_both_ways() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert xla_hlo_run.main(["--small", "--reps", "1", "--only", "adam_step,sort"]) == 0
    text = out.getvalue()
    assert "FALLBACK" not in text and "FAILED" not in text
    rows = [ln for ln in text.splitlines() if ln.startswith(("adam_step ", "sort "))]
    assert len(rows) == 2 and all(ln.rstrip().endswith("| yes | 0/0") for ln in rows), text
