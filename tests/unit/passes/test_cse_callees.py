"""CSE compares called computations by structure: two reduces of one value whose reducers are
separate but equal regions (JAX writes one per reduce: x.mean() and the mean inside x.var())
merge; different reducers, constants or parameter orders keep them apart."""

from __future__ import annotations

import numpy as np

import xlapy
from xlapy.interpreter import Interpreter
from xlapy.passes.cse import CommonSubexpressionElimination
from xlapy.passes.dce import DeadCodeElimination
from xlapy.passes.hlo_builder import HloBuilder
from xlapy.passes.pass_base import run_passes


def _two_reduces(first: str, second: str, swap: bool = False) -> HloBuilder:
    g = HloBuilder()
    x = g.param("f32[64,8]")
    zero = g.const(0.0, "f32")
    f = g.scalar_fn(first, name="r1")
    if swap:  # (b, a) -> op(b, a): the parameters in the other order
        h = g.sub("r2", ["f32[]", "f32[]"], lambda e, a, b: e.op(second, b, a))
    else:
        h = g.scalar_fn(second, name="r2")
    g.build(g.tuple(g.reduce(x, zero, [0], f), g.reduce(x, zero, [0], h)))
    return g


def test_equal_reducer_regions_merge() -> None:
    g = _two_reduces("add", "add")
    x = np.arange(512, dtype=np.float32).reshape(64, 8) / 7
    before = Interpreter().run_module(g.module, [x])
    assert run_passes(g.module, [CommonSubexpressionElimination(), DeadCodeElimination()])
    root = g.module.entry.root
    assert root.operands[0] is root.operands[1]
    after = Interpreter().run_module(g.module, [x])
    for b, a in zip(before, after):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_different_reducers_stay_apart() -> None:
    for second, swap in (("maximum", False), ("subtract", True)):
        g = _two_reduces("add" if second == "maximum" else "subtract", second, swap)
        run_passes(g.module, [CommonSubexpressionElimination()])
        root = g.module.entry.root
        assert root.operands[0] is not root.operands[1], second


def test_batch_norm_statistics_read_the_input_twice_not_three_times() -> None:
    jax = __import__("pytest").importorskip("jax")
    jnp = jax.numpy

    def bn(x: object) -> object:
        return (x - x.mean((0, 1, 2))) / jnp.sqrt(x.var((0, 1, 2)) + 1e-5)

    x = np.random.default_rng(0).standard_normal((4, 8, 8, 16)).astype(np.float32)
    text = jax.jit(bn).lower(x).as_text()
    prog = xlapy.compile(text, backend="cpu")
    def reads_x(i: object) -> bool:  # x itself, or x reshaped into column blocks
        while i.opcode == "reshape":
            i = i.operands[0]
        return i.opcode == "parameter"

    sums_of_x = [d for d in prog._exe.fusion.kernel_roots() if d.opcode == "reduce"
                 and reads_x(d.operands[0])]
    assert len(sums_of_x) == 1
    # (the backend sums long columns in two levels, column_sums.py: not the interpreter's
    # association, so not its bits)
    np.testing.assert_allclose(prog(x), xlapy.compile(text, backend="interpreter")(x),
                               rtol=1e-5, atol=1e-5)
