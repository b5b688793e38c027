"""fusion_plan.py: a value read through index-changing ops at many places of one kernel is
generated once per path; past MAX_GENERATED (value, path) pairs the plan gives one a buffer,
so a lax.associative_scan (slices and interleaving pads, doubling the paths per level)
compiles in bounded memory with its values."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.fusion_plan import MAX_GENERATED, _generated, plan_fusion
from xlapy.passes.hlo_builder import HloBuilder
from xlapy.types import ElementType, Shape


def _levels(n: int) -> HloBuilder:
    """x_{l+1} = concat(x_l[0::2] + x_l[1::2], x_l[1::2] - x_l[0::2]) over 2^k elements,
    n levels: every level reads the last one at two index paths."""
    g = HloBuilder()
    x = g.param(Shape.array(ElementType.F32, [64]))
    for _ in range(n):
        ev = g.slice(x, start_indices=(0,), limit_indices=(64,), strides=(2,))
        od = g.slice(x, start_indices=(1,), limit_indices=(64,), strides=(2,))
        x = g.concatenate(g.add(ev, od), g.subtract(od, ev), dimension=0)
    g.build(x)
    return g


def test_every_kernel_generates_a_bounded_expression() -> None:
    g = _levels(24)  # 2^24 paths at the bottom as one kernel
    comp = g.comp
    plan = plan_fusion(comp)
    for root in plan.kernel_roots():
        _, over = _generated(root, plan.fusible, plan.materialized)
        assert not over
    assert any("too many indices" in d.reason for d in plan.decisions)
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    np.testing.assert_array_equal(xlapy.compile(g.module, backend="cpu")(x),
                                  xlapy.compile(g.module, backend="interpreter")(x))


def test_small_expressions_keep_one_kernel() -> None:
    plan = plan_fusion(_levels(4).comp)  # 2^4 paths: well under the cap
    assert len(plan.kernel_roots()) == 1
    assert MAX_GENERATED >= 256


def test_associative_scan_from_jax() -> None:
    jax = pytest.importorskip("jax")
    x = np.random.default_rng(0).standard_normal((4, 4096)).astype(np.float32)
    text = jax.jit(lambda v: jax.lax.associative_scan(jax.numpy.add, v, axis=1)).lower(
        x).as_text()
    got = xlapy.compile(text, backend="cpu")(x)
    np.testing.assert_array_equal(got, xlapy.compile(text, backend="interpreter")(x))
