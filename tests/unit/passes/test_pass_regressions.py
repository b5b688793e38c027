"""Pass bugs found by the pipeline property tests and the conformance corpus through the
pipeline: each case failed before its fix (verifier error or a different value)."""

from __future__ import annotations

import numpy as np

from xlapy.interpreter import Interpreter
from xlapy.ir import Module
from xlapy.passes import cpu_pipeline
from xlapy.passes.algebraic_simplifier import AlgebraicSimplifier
from xlapy.passes.hlo_builder import HloBuilder
from xlapy.passes.pass_base import Pass, run_passes
from xlapy.types import ElementType, Shape


def _same_after(module: Module, args: list[np.ndarray], passes: list[Pass] | None = None
                ) -> Module:
    """Run `passes` (default: the exact cpu pipeline, verified) and check bit-equal values."""
    with np.errstate(all="ignore"):
        before = Interpreter().run_module(module, args)
        if passes is None:
            cpu_pipeline(verify=True, exact_only=True, expand=False).run(module)
        else:
            run_passes(module, passes)
        after = Interpreter().run_module(module, args)
    for x, y in zip(before if isinstance(before, tuple) else (before,),
                    after if isinstance(after, tuple) else (after,)):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes(), (x, y)
    return module


def test_slice_of_slice_with_empty_result() -> None:
    # slice(slice(x, [0:5:2]), [3:3]) is empty; composing the starts gave 6 > size 5.
    g = HloBuilder()
    x = g.param("f32[5]")
    inner = g.slice(x, start_indices=(0,), limit_indices=(5,), strides=(2,))
    outer = g.slice(inner, start_indices=(3,), limit_indices=(3,), strides=(1,))
    m = g.build(outer)
    _same_after(m, [np.ones(5, np.float32)], [AlgebraicSimplifier()])
    assert m.entry.root.shape.dimensions == (0,)


def _float_counter_loop(bound: float, start: float) -> Module:
    """while i < bound: (i + 1, y + y) with an f32 counter starting at `start`."""
    g = HloBuilder()
    x = g.param("f32[2]")
    shapes = [Shape.scalar(ElementType.F32), x.shape]
    c = g.sub("cond", shapes, lambda e, i, y: e.cmp(i, e.const(bound, ElementType.F32), "LT"))
    b = g.sub("body", shapes,
              lambda e, i, y: e.tuple(e.add(i, e.const(1.0, ElementType.F32)), e.add(y, y)))
    b.multi_result = True
    w = g.op("while", g.const(start, ElementType.F32), x, called=[c, b])
    return g.build(g.get_tuple_element(w, index=1))


def test_float_counter_loop_is_not_dead() -> None:
    # 0 < 0.5 and -0.5 < 0 run once; `int(bound) - int(start)` said 0 trips and the loop went.
    for bound, start in [(0.5, 0.0), (0.0, -0.5)]:
        m = _same_after(_float_counter_loop(bound, start), [np.ones(2, np.float32)])
        assert trip_count_of(m) is None


def trip_count_of(m: Module) -> int | None:
    loops = [i for c in m.computations for i in c.instructions if i.opcode == "while"]
    return loops[0].meta.get("trip_count") if loops else None
