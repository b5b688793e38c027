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


def test_pure_custom_calls_merge_effectful_ones_stay() -> None:
    """As XLA's HloCSE: jnp.linalg.matrix_rank(a) + jnp.linalg.cond(a) call sgesdd on `a`
    twice (one private function each); once inlined, the two pure calls are one (0.125 ->
    ~0.07 ms, XLA 0.063). Calls marked has_side_effect, or to other targets, or with other
    backend configs, stay apart."""
    from xlapy.stablehlo import parse_module

    calls = [("pure_target", 'backend_config = "x"'), ("pure_target", 'backend_config = "x"'),
             ("pure_target", 'backend_config = "y"'), ("other_target", 'backend_config = "x"'),
             ("effect_target", "has_side_effect = true"),
             ("effect_target", "has_side_effect = true")]
    t = "tensor<4xf32>"
    body = "".join(f"  %{k} = stablehlo.custom_call @{name}(%a) {{{attr}}} : ({t}) -> {t}\n"
                   for k, (name, attr) in enumerate(calls))
    results = ", ".join(f"%{k}" for k in range(len(calls)))
    types = ", ".join([t] * len(calls))
    text = (f"func.func @main(%a: {t}) -> ({types}) {{\n{body}"
            f"  return {results} : {types}\n}}")
    m = parse_module(text, "<test>")
    assert run_passes(m, [CommonSubexpressionElimination()])
    r = m.entry.root.operands
    assert r[0] is r[1]
    assert len({id(x) for x in r}) == 5


def test_matrix_rank_and_cond_share_one_svd() -> None:
    jax = __import__("pytest").importorskip("jax")
    jnp = jax.numpy
    a = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    f = lambda a: jnp.linalg.matrix_rank(a) + jnp.linalg.cond(a)  # noqa: E731
    lowered = jax.jit(f).lower(a)
    assert lowered.as_text().count("lapack_sgesdd") == 2
    prog = xlapy.compile(lowered.as_text(), backend="cpu")
    calls = [i for c in prog._exe.module.computations for i in c.instructions
             if i.opcode == "custom_call"]
    assert len(calls) == 1
    np.testing.assert_allclose(np.asarray(prog(a)), np.asarray(lowered.compile()(a)),
                               rtol=1e-5)
