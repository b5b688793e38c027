"""Computation deduplication: identical loop regions become one, different ones stay."""

from __future__ import annotations

import numpy as np

from xlapy.interpreter import Interpreter
from xlapy.ir import Module
from xlapy.passes.computation_dedup import ComputationDeduplicator
from xlapy.passes.hlo_builder import Emitter, HloBuilder

S = "f32[8]"


def _two_loops(scale_a: float, scale_b: float) -> Module:
    """Two loops, each with regions of its own: y <- y * scale + x, three times."""
    g = HloBuilder()
    x = g.param(S)
    shapes = ["s32[]", S, S]

    def cond(e: Emitter, i: object, y: object, xx: object) -> object:
        return e.cmp(i, e.const(3, "s32"), "LT")

    def loop(scale: float, init: object) -> object:
        def body(e: Emitter, i: object, y: object, xx: object) -> object:
            return e.tuple(e.add(i, e.const(1, "s32")),
                           e.add(e.multiply(y, e.splat(scale, S)), xx), xx)

        c = g.sub("cond", shapes, cond)
        b = g.sub("body", shapes, body)
        b.multi_result = True
        return g.op("while", g.const(0, "s32"), g.splat(1.0, S), init, called=[c, b])

    wa = loop(scale_a, x)
    wb = loop(scale_b, g.negate(x))
    return g.build(g.tuple(g.get_tuple_element(wa, index=1),
                           g.get_tuple_element(wb, index=1)))


def _whiles(m: Module) -> list[object]:
    return [i for i in m.entry.instructions if i.opcode == "while"]


def _run(m: Module) -> list[np.ndarray]:
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    return [np.asarray(r) for r in Interpreter().run_module(m, [x])]


def test_identical_regions_are_shared_and_results_kept() -> None:
    m = _two_loops(0.5, 0.5)
    before = _run(m)
    n = len(m.computations)
    assert ComputationDeduplicator().run(m)
    a, b = _whiles(m)
    assert all(x is y for x, y in zip(a.called, b.called))
    assert len(m.computations) == n - 2  # (the copies left unreachable are removed)
    for got, want in zip(_run(m), before):
        np.testing.assert_array_equal(got, want)
    assert not ComputationDeduplicator().run(m)


def test_different_constants_stay_apart() -> None:
    m = _two_loops(0.5, 0.25)
    before = _run(m)
    assert ComputationDeduplicator().run(m)
    a, b = _whiles(m)
    assert a.called[0] is b.called[0]  # the conditions are the same
    assert a.called[1] is not b.called[1]
    for got, want in zip(_run(m), before):
        np.testing.assert_array_equal(got, want)
