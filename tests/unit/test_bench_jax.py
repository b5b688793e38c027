"""Smoke test of the JAX-lowered benchmark workloads (benchmarks/jax_workloads.py): a few small
ones lower, compile on the cpu backend with no interpreter fallback and match XLA's values.
No timing here: timings belong to benchmarks/jax_run.py."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from benchmarks.jax_workloads import JAX_WORKLOADS, lower, rel_error, x32


@pytest.mark.parametrize("name", ["transformer", "fori_nested", "scatter_add", "conv_nchw",
                                  "conv_grouped", "conv_depthwise", "conv_strided",
                                  "conv_dilated", "dot_batched", "dot_skinny", "matvec"])
def test_small_workload_matches_xla(name: str) -> None:
    import jax

    case = JAX_WORKLOADS[name](True)
    prog = xlapy.compile(lower(case), backend="cpu")
    assert list(prog._exe.fallbacks()) == [], prog._exe.explain()
    with x32():
        want = jax.jit(case.fn)(*case.args)
    err = rel_error(prog(*case.args), want)
    assert err <= max(case.tol, 1e-6), f"{name}: max rel error {err:.3g}"


def test_inputs_are_seeded() -> None:
    a, b = JAX_WORKLOADS["gather"](True), JAX_WORKLOADS["gather"](True)
    assert all(np.array_equal(x, y) for x, y in zip(a.args, b.args))


def test_rel_error_sees_shape_and_value_differences() -> None:
    x = np.array([1.0, -4.0], np.float32)
    assert rel_error((x,), (x,)) == 0.0
    assert rel_error(x, x + np.float32(0.5)) == pytest.approx(0.5 / 3.5)
    assert rel_error(x, x[:1]) == float("inf")
    assert rel_error((x, x), (x,)) == float("inf")


def test_round_robin_bursts_each_side_in_turn() -> None:
    from benchmarks.timing import round_robin

    order: list[str] = []
    times = round_robin({"a": lambda: order.append("a"), "b": lambda: order.append("b")},
                        reps=2, burst=3)
    assert order == ["a"] * 3 + ["b"] * 3 + ["a"] * 3 + ["b"] * 3
    assert {k: len(v) for k, v in times.items()} == {"a": 6, "b": 6}
    order.clear()
    round_robin({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, reps=2)
    assert order == ["a", "b", "a", "b"]


def test_gc_paused_restores_the_collector() -> None:
    import gc

    from benchmarks.timing import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("compile failed")
    assert gc.isenabled()


def test_workloads_lower_as_f32_programs_with_x64_on() -> None:
    """A test that turned x64 on for the process (the differential suites do) does not change
    what a workload lowers to, nor make it fail to lower (it did: lax.max of f32 and f64)."""
    import jax

    cases = [JAX_WORKLOADS[n](True) for n in ("cnn", "transformer")]
    want = [lower(c) for c in cases]
    was = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        assert [lower(c) for c in cases] == want
        assert jax.config.jax_enable_x64
    finally:
        jax.config.update("jax_enable_x64", was)


def test_fma_peak_counts_the_loops_flops() -> None:
    """The FMA loop runs on the host's widest vectors, and its rate is that of the machine
    (between 1 and 10^5 GFLOP/s a core; all CPUs at least about one's)."""
    from benchmarks.fma_peak import _shape, fma_peak

    lanes, chains = _shape()
    assert lanes in (4, 8, 16) and chains >= 12
    one, every = fma_peak(0.01)
    assert 1.0 < one < 1e5 and 0.5 * one < every
