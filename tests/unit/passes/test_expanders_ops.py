"""select_and_scatter, rng and batch_norm_training/grad expanders vs the unexpanded ops."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from xlapy.interpreter import Interpreter
from xlapy.ir import Module
from xlapy.ops.rng import RngDistribution
from xlapy.passes.dce import DeadCodeElimination
from xlapy.passes.expanders_ops import (
    BatchNormTrainingGradExpander,
    RngExpander,
    SelectAndScatterExpander,
)
from xlapy.passes.hlo_builder import HloBuilder
from xlapy.passes.pass_base import run_passes
from xlapy.types import ElementType, Shape, from_hlo_name


def _opcodes(m: Module) -> list[str]:
    return [i.opcode for c in m.computations for i in c.instructions]


def _sas(et: str, dims: tuple[int, ...], window: tuple[int, ...], strides: tuple[int, ...],
         padding: tuple[tuple[int, int], ...] | None, direction: str, scatter: str) -> Module:
    from xlapy.ops.reduction_window import num_windows

    g = HloBuilder()
    x = g.param(f"{et}[{','.join(map(str, dims))}]")
    pads = padding or tuple((0, 0) for _ in dims)
    src = [num_windows(s, w, st, 1, 1, lo, hi) for s, w, st, (lo, hi)
           in zip(dims, window, strides, pads)]
    s = g.param(f"{et}[{','.join(map(str, src))}]")
    sel = g.sub("select", [f"{et}[]", f"{et}[]"], lambda e, a, b: e.cmp(a, b, direction))
    sc = g.scalar_fn(scatter, et)
    out = g.op("select_and_scatter", x, s, g.const(0, et), called=[sel, sc],
               window_dimensions=window, window_strides=strides, padding=padding)
    return g.build(out)


CASES = [
    ("s32", (6, 6), (2, 2), (2, 2), None, "GE", "add"),
    ("s32", (5, 7), (3, 3), (1, 2), ((1, 1), (0, 2)), "GE", "add"),
    ("s32", (4, 5), (2, 3), (1, 1), None, "LE", "maximum"),
    ("f32", (3, 8), (1, 3), (1, 2), ((0, 0), (1, 1)), "GT", "maximum"),
    ("f32", (6,), (3,), (3,), None, "GE", "add"),
]


@pytest.mark.parametrize("case", CASES)
def test_select_and_scatter_expander_is_exact(case: tuple[Any, ...]) -> None:
    m = _sas(*case)
    rng = np.random.default_rng(1)
    args = [p.shape for p in m.entry.parameters]
    dt = from_hlo_name(case[0]).dtype
    vals = [rng.integers(-3, 4, tuple(s.dimensions)).astype(dt) for s in args]  # many ties
    before = Interpreter().run_module(m, vals)
    assert run_passes(m, [SelectAndScatterExpander(), DeadCodeElimination()])
    assert "select_and_scatter" not in _opcodes(m) and "reduce_window" in _opcodes(m)
    np.testing.assert_array_equal(Interpreter().run_module(m, vals), before)


def test_select_and_scatter_expander_leaves_other_ops() -> None:
    g = HloBuilder()
    x = g.param("f32[4]")
    m = g.build(g.negate(x))
    assert not run_passes(m, [SelectAndScatterExpander()])


def _rng(et: str, dist: RngDistribution, a: float, b: float, n: int = 4096) -> Module:
    g = HloBuilder()
    t = from_hlo_name(et)
    r = g.op("rng", g.const(a, t), g.const(b, t), g.const([n], "s64"), rng_distribution=dist,
             shape=Shape.array(t, [n]))
    return g.build(r)


@pytest.mark.parametrize("et", ["f32", "f64", "bf16", "f16"])
def test_rng_uniform_float_expansion_distribution(et: str) -> None:
    m = _rng(et, RngDistribution.UNIFORM, -2.0, 3.0)
    assert run_passes(m, [RngExpander(), DeadCodeElimination()])
    assert "rng" not in _opcodes(m) and "rng_bit_generator" in _opcodes(m)
    v = np.asarray(Interpreter().run_module(m, [])).astype(np.float64)
    assert Interpreter().run_module(m, []).dtype == from_hlo_name(et).dtype
    assert v.min() >= -2.0 and v.max() < 3.0
    assert abs(v.mean() - 0.5) < 0.15 and abs(v.std() - 5 / 12 ** 0.5) < 0.1
    # deterministic: the key is a compile-time constant
    np.testing.assert_array_equal(Interpreter().run_module(m, []), Interpreter().run_module(m, []))


@pytest.mark.parametrize("et", ["f32", "f64"])
def test_rng_normal_expansion_moments(et: str) -> None:
    m = _rng(et, RngDistribution.NORMAL, 1.5, 2.0, n=8192)
    assert run_passes(m, [RngExpander()])
    v = np.asarray(Interpreter().run_module(m, []), np.float64)
    assert np.isfinite(v).all()
    assert abs(v.mean() - 1.5) < 0.1 and abs(v.std() - 2.0) < 0.1


@pytest.mark.parametrize("et", ["s32", "u32", "s64", "u64"])
def test_rng_uniform_int_expansion_range(et: str) -> None:
    m = _rng(et, RngDistribution.UNIFORM, 3, 10)
    assert run_passes(m, [RngExpander()])
    v = np.asarray(Interpreter().run_module(m, []))
    assert v.dtype == from_hlo_name(et).dtype
    assert set(np.unique(v).tolist()) == set(range(3, 10))


def test_rng_expander_leaves_unsupported_types_and_gives_distinct_streams() -> None:
    m = _rng("s8", RngDistribution.UNIFORM, 0, 5)
    assert not run_passes(m, [RngExpander()])
    g = HloBuilder()
    t = ElementType.F32
    mk = [g.op("rng", g.const(0.0), g.const(1.0), g.const([64], "s64"),
               rng_distribution=RngDistribution.UNIFORM, shape=Shape.array(t, [64]))
          for _ in range(2)]
    m = g.build(g.tuple(*mk))
    run_passes(m, [RngExpander()])
    a, b = Interpreter().run_module(m, [])
    assert not np.array_equal(a, b)


def _bn(kind: str, fi: int, dims: tuple[int, ...]) -> Module:
    g = HloBuilder()
    x = g.param(f"f32[{','.join(map(str, dims))}]")
    fs = f"f32[{dims[fi]}]"
    if kind == "training":
        out = g.op("batch_norm_training", x, g.param(fs), g.param(fs), epsilon=1e-3,
                   feature_index=fi)
    else:
        out = g.op("batch_norm_grad", x, g.param(fs), g.param(fs), g.param(fs), g.param(x.shape),
                   epsilon=1e-3, feature_index=fi)
    return g.build(out)


@pytest.mark.parametrize("kind", ["training", "grad"])
@pytest.mark.parametrize("fi,dims", [(1, (4, 3, 5)), (0, (3, 8)), (2, (2, 2, 6))])
def test_batch_norm_training_grad_expansion(kind: str, fi: int, dims: tuple[int, ...]) -> None:
    m = _bn(kind, fi, dims)
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(tuple(p.shape.dimensions)).astype(np.float32)
            for p in m.entry.parameters]
    if kind == "grad":
        args[3] = np.abs(args[3]) + 0.5  # a variance
    before = Interpreter().run_module(m, args)
    assert run_passes(m, [BatchNormTrainingGradExpander(), DeadCodeElimination()])
    assert not any(o.startswith("batch_norm") for o in _opcodes(m))
    after = Interpreter().run_module(m, args)
    for x, y in zip(before, after):
        np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-5)
