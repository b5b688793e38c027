"""Smoke test of benchmarks/jax_probe.py: a few of its programs (tiny shapes) run on both
sides with no fallback and XLA's values; an unknown program is refused by name. No timing
assertions: timings belong to the benchmark."""

from __future__ import annotations

import pytest

from benchmarks import jax_probe


def test_some_programs_run_on_both_sides() -> None:
    table = jax_probe.programs(small=True)
    assert len(table) >= 20
    for name in ("cond_in_loop", "scan_ys", "to_int8", "loop_in_loop", "decode_loop",
                 "arctan2", "square_f", "patchify", "rotate_pts", "cross", "segment_max",
                 "segment_sum", "gather_pairs", "bincount_w", "clip_norm", "heat_pad",
                 "nbody", "moe_dispatch", "attn_grad_bthd"):
        fn, args = table[name]
        r = jax_probe.probe_one(fn, args, reps=1, burst=1)
        assert r["fallbacks"] == 0 and r["err"] < 1e-4, (name, r)
        assert r["xlapy"] > 0 and r["xla"] > 0


def test_unknown_programs_are_named() -> None:
    with pytest.raises(SystemExit, match="unknown program.*nosuch"):
        jax_probe.main(["--only", "nosuch", "--small"])


def test_program_names_are_unique(monkeypatch: pytest.MonkeyPatch) -> None:
    """A row of jax_probe_rows.py named as one of jax_probe.py's replaced it silently (a
    second decode_loop did); now the table refuses it."""
    from benchmarks import jax_probe, jax_probe_rows

    real = jax_probe_rows.programs
    monkeypatch.setattr(jax_probe_rows, "programs", lambda *a: {
        **real(*a), "decode_loop": (lambda x: x, [])})
    with pytest.raises(ValueError, match="decode_loop"):
        jax_probe.programs(small=True)
