"""interpret(cpu_pipeline(m)) == interpret(m) on hypothesis-generated programs.

With `exact_only` (no float-inexact simplifier rows, no expanders) results must match bit for
bit; the default pipeline may differ only where its declared-inexact rewrites allow (signed
zeros and flushed denormals: compared with -0 == +0, NaN == NaN; the logistic expander within
1e-6 relative).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.interpreter import Interpreter
from xlapy.passes import cpu_pipeline
from xlapy.passes.hlo_builder import HloBuilder

UNARY = ["negate", "abs", "exponential", "tanh", "floor", "sign", "sqrt"]
BINARY = ["add", "subtract", "multiply", "maximum", "minimum", "divide"]
SHAPE = (3, 4)


@st.composite
def programs(draw: st.DrawFn, allow_logistic: bool = False) -> tuple:
    g = HloBuilder()
    vals = [g.param("f32[3,4]"), g.param("f32[3,4]")]
    n = draw(st.integers(1, 14))
    unary = UNARY + (["logistic"] if allow_logistic else [])
    for _ in range(n):
        kind = draw(st.sampled_from(["u", "b", "c", "t", "r", "s"]))
        a = draw(st.sampled_from(vals))
        if kind == "u":
            v = g.op(draw(st.sampled_from(unary)), a)
        elif kind == "b":
            v = g.op(draw(st.sampled_from(BINARY)), a, draw(st.sampled_from(vals)))
        elif kind == "c":
            c = draw(st.sampled_from([0.0, 1.0, -1.0, 2.0, 0.5]))
            v = g.op(draw(st.sampled_from(BINARY)), a, g.splat(c, a))
        elif kind == "t":
            v = g.transpose(g.transpose(a, permutation=(1, 0)), permutation=(1, 0))
        elif kind == "r":
            r = g.reduce(a, g.const(0.0), (1,), g.scalar_fn("add"))
            v = g.add(a, g.bcast(r, SHAPE, (0,)))
        else:
            v = g.select(g.cmp(a, draw(st.sampled_from(vals)), "LT"), a,
                         draw(st.sampled_from(vals)))
        vals.append(v)
    outs = draw(st.lists(st.sampled_from(vals[2:]), min_size=1, max_size=3))
    return g.build(g.tuple(*outs) if len(outs) > 1 else outs[0])


def _args(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(SHAPE) * 2).astype(np.float32) for _ in range(2)]


def _leaves(v: object) -> list[np.ndarray]:
    return [np.asarray(x) for x in v] if isinstance(v, tuple) else [np.asarray(v)]


@settings(max_examples=40, deadline=None)
@given(programs(), st.integers(0, 1000))
def test_exact_pipeline_is_bit_exact(module: object, seed: int) -> None:
    args = _args(seed)
    before = _leaves(Interpreter().run_module(module, args))
    cpu_pipeline(verify=True, exact_only=True, expand=False).run(module)
    after = _leaves(Interpreter().run_module(module, args))
    for x, y in zip(before, after):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes() or (np.isnan(x) == np.isnan(y)).all() and \
            np.array_equal(x.view(np.uint32)[~np.isnan(x)], y.view(np.uint32)[~np.isnan(y)])


@settings(max_examples=30, deadline=None)
@given(programs(allow_logistic=True), st.integers(0, 1000))
def test_default_pipeline_within_declared_tolerance(module: object, seed: int) -> None:
    args = _args(seed)
    before = _leaves(Interpreter().run_module(module, args))
    cpu_pipeline(verify=True).run(module)
    after = _leaves(Interpreter().run_module(module, args))
    for x, y in zip(before, after):
        np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-30, equal_nan=True)
