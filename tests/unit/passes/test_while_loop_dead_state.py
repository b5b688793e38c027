"""While-loop dead state removal and broadcast-of-constant sinking (WhileLoopSimplifier):
which elements go, which stay, and that results match the interpreter."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

import xlapy
from xlapy.interpreter import Interpreter
from xlapy.ir import Instruction, Module
from xlapy.passes.dce import DeadCodeElimination
from xlapy.passes.hlo_builder import Emitter, HloBuilder, parse_shape
from xlapy.passes.pass_base import run_passes
from xlapy.passes.pipelines import backend_pipeline, simplification_group
from xlapy.passes.tuple_simplifier import TupleSimplifier
from xlapy.passes.while_loop_dead_state import dead_elements
from xlapy.passes.while_loop_simplifier import WhileLoopSimplifier
from xlapy.stablehlo import parse_module
from xlapy.types import Shape

pytestmark = pytest.mark.usefixtures("jax_x32")  # f32 programs from jax

F = "f32[4]"
Elems = list[Instruction]


def _while(g: HloBuilder, init: Sequence[Instruction], cond_fn: Callable[[Emitter, Elems],
           Instruction], body_fn: Callable[[Emitter, Elems], Elems], packed: bool,
           regions: tuple | None = None) -> tuple[Instruction, tuple]:
    """A while over `init`; cond/body see the state as a list (get_tuple_elements of the one
    tuple parameter when `packed`). `regions`: reuse another loop's (cond, body)."""
    shapes = [i.shape for i in init]
    if regions is None:
        def unpack(e: Emitter, ps: tuple) -> Elems:
            if not packed:
                return list(ps)
            return [e.get_tuple_element(ps[0], index=k) for k in range(len(shapes))]

        sig = [Shape.tuple(shapes)] if packed else shapes
        cond = g.sub("cond", sig, lambda e, *ps: cond_fn(e, unpack(e, ps)))
        body = g.sub("body", sig, lambda e, *ps: e.tuple(*body_fn(e, unpack(e, ps))))
        body.multi_result = not packed
        regions = (cond, body)
    operands = [g.tuple(*init)] if packed else list(init)
    return g.op("while", *operands, called=list(regions)), regions


def _count_loop(g: HloBuilder, x: Instruction, extra: Sequence[Instruction], packed: bool,
                trips: int = 3, cond_reads: int | None = None,
                body_fn: Callable | None = None) -> Instruction:
    """while i < trips: (i + 1, acc + x_state, *extra passed through) over
    (i, acc, x_state, *extra); `cond_reads`: the extra element the condition also reads."""
    def cond(e: Emitter, s: Elems) -> Instruction:
        p = e.cmp(s[0], e.const(trips, "s32"), "LT")
        if cond_reads is not None:
            q = e.cmp(e.reduce(s[3 + cond_reads], e.const(0.0), (0,), g.scalar_fn("add")),
                      e.const(1e9), "LT")
            p = e.op("and", p, q)
        return p

    def body(e: Emitter, s: Elems) -> Elems:
        out = [e.add(s[0], e.const(1, "s32")), e.add(s[1], s[2]), s[2], *s[3:]]
        return body_fn(e, s, out) if body_fn else out

    w, _ = _while(g, [g.const(0, "s32"), g.splat(0.0, F), x, *extra], cond, body, packed)
    return w


def _whiles(m: Module) -> list[Instruction]:
    return [i for c in m.computations for i in c.instructions if i.opcode == "while"]


def _state_len(w: Instruction) -> int:
    packed = len(w.operands) == 1 and w.operands[0].shape.is_tuple
    return len(w.operands[0].shape.tuple_shapes) if packed else len(w.operands)


def _simplify(m: Module, args: list[np.ndarray]) -> tuple:
    before = Interpreter().run_module(m, args)
    changed = run_passes(m, [WhileLoopSimplifier(), TupleSimplifier(), DeadCodeElimination()])
    after = Interpreter().run_module(m, args)
    return changed, before, after


def _eq(a: object, b: object) -> None:
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _eq(x, y)
        return
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


X = np.linspace(-1, 1, 4, dtype=np.float32)


@pytest.mark.parametrize("packed", [True, False])
def test_unused_pass_through_elements_go(packed: bool) -> None:
    g = HloBuilder()
    x, y = g.param(F), g.param(F)
    w = _count_loop(g, x, [y, g.negate(y)], packed)
    m = g.build(g.get_tuple_element(w, index=1))
    (w,) = _whiles(m)
    assert dead_elements(w) == [3, 4]
    changed, before, after = _simplify(m, [X, X * 2])
    assert changed
    _eq(after, before)
    (w,) = _whiles(m)
    assert _state_len(w) == 3
    assert "negate" not in [i.opcode for i in m.entry.instructions]
    assert not run_passes(m, [WhileLoopSimplifier()])  # nothing left to do


@pytest.mark.parametrize("packed", [True, False])
def test_element_used_after_the_loop_stays(packed: bool) -> None:
    g = HloBuilder()
    x, y = g.param(F), g.param(F)
    w = _count_loop(g, x, [y, y], packed)
    m = g.build(g.add(g.get_tuple_element(w, index=1), g.get_tuple_element(w, index=4)))
    (w,) = _whiles(m)
    assert dead_elements(w) == [3]
    changed, before, after = _simplify(m, [X, X * 3])
    _eq(after, before)
    (w,) = _whiles(m)
    assert _state_len(w) == 4


@pytest.mark.parametrize("packed", [True, False])
def test_element_read_in_cond_or_body_stays(packed: bool) -> None:
    g = HloBuilder()
    x, y = g.param(F), g.param(F)
    w = _count_loop(g, x, [y], packed, cond_reads=0)
    m = g.build(g.get_tuple_element(w, index=1))
    (w,) = _whiles(m)
    assert dead_elements(w) == []
    # x_state (element 2) passes through but the body reads it: it stays too
    changed, before, after = _simplify(m, [X, X])
    _eq(after, before)
    assert _state_len(_whiles(m)[0]) == 4


@pytest.mark.parametrize("packed", [True, False])
def test_element_that_is_another_output_stays(packed: bool) -> None:
    """Element 3 passes through, but is also body output 4 (element 4 reads it)."""
    g = HloBuilder()
    x, y = g.param(F), g.param(F)

    def body(e: Emitter, s: Elems, out: Elems) -> Elems:
        return out[:4] + [s[3]]

    w = _count_loop(g, x, [y, g.negate(y)], packed, body_fn=body)
    m = g.build(g.tuple(g.get_tuple_element(w, index=1), g.get_tuple_element(w, index=4)))
    (w,) = _whiles(m)
    assert dead_elements(w) == []
    changed, before, after = _simplify(m, [X, X + 1])
    _eq(after, before)


@pytest.mark.parametrize("packed", [True, False])
def test_token_element_stays(packed: bool) -> None:
    g = HloBuilder()
    x, y = g.param(F), g.param(F)
    w = _count_loop(g, x, [g.op("after_all"), y], packed)
    m = g.build(g.get_tuple_element(w, index=1))
    (w,) = _whiles(m)
    assert w.operands[0].shape.is_tuple if packed else w.operands[3].shape.is_token
    assert dead_elements(w) == [4]
    changed, before, after = _simplify(m, [X, X])
    _eq(after, before)
    (w,) = _whiles(m)
    assert _state_len(w) == 4
    shapes = w.operands[0].shape.tuple_shapes if packed else [o.shape for o in w.operands]
    assert shapes[3].is_token


def test_one_element_left_in_the_operand_form() -> None:
    """(i, junk) -> (i): the loop's result is no longer a tuple."""
    g = HloBuilder()
    y = g.param(F)
    w, _ = _while(g, [g.const(0, "s32"), y],
                  lambda e, s: e.cmp(s[0], e.const(5, "s32"), "LT"),
                  lambda e, s: [e.add(s[0], e.const(1, "s32")), s[1]], packed=False)
    m = g.build(g.add(g.get_tuple_element(w, index=0), g.const(7, "s32")))
    want = xlapy.compile(m.clone(), backend="interpreter")(X)
    changed, before, after = _simplify(m, [X])
    assert changed and int(after) == int(before) == 12
    (w,) = _whiles(m)
    assert len(w.operands) == 1 and not w.shape.is_tuple
    _eq(xlapy.compile(m, backend="cpu")(X), want)


def test_loop_that_would_lose_everything_is_left_alone() -> None:
    """A loop whose every element could go keeps its state (nothing gained by an empty
    one): here the condition reads nothing."""
    g = HloBuilder()
    y = g.param(F)
    w, _ = _while(g, [g.const(0, "s32"), y], lambda e, s: e.const(False, "pred"),
                  lambda e, s: [s[0], s[1]], packed=False)
    m = g.build(g.negate(y))
    (w,) = _whiles(m)
    assert dead_elements(w) == []


@pytest.mark.parametrize("packed", [True, False])
def test_loops_sharing_cond_and_body(packed: bool) -> None:
    """Two loops call the same computations; only the one whose element 3 is unused loses
    it, and the other still runs the original computations."""
    g = HloBuilder()
    x, y = g.param(F), g.param(F)
    w1 = _count_loop(g, x, [y], packed)
    w2, _ = _while(g, [g.const(1, "s32"), g.splat(1.0, F), y, x], None, None, packed,
                   regions=tuple(w1.called))
    m = g.build(g.tuple(g.get_tuple_element(w1, index=1), g.get_tuple_element(w2, index=1),
                        g.get_tuple_element(w2, index=3)))
    old = list(w1.called)
    changed, before, after = _simplify(m, [X, X - 2])
    assert changed
    _eq(after, before)
    a, b = _whiles(m)
    lens = sorted([_state_len(a), _state_len(b)])
    assert lens == [3, 4]
    keeps = a if _state_len(a) == 4 else b
    assert keeps.called == old


def _bcast_loop(packed: bool, value: float = 1.0, kind: str = "broadcast") -> Module:
    """A scan over a broadcast constant `xs` [6, 4] (a dynamic_slice of row i a trip)."""
    g = HloBuilder()
    v = g.param(F)
    if kind == "broadcast":
        xs = g.splat(value, "f32[6,4]")
    elif kind == "iota":
        xs = g.iota(shape=parse_shape("f32[6,4]"), iota_dimension=0)
    else:
        xs = g.const(np.arange(24, dtype=np.float32).reshape(6, 4))

    def body(e: Emitter, s: Elems) -> Elems:
        row = e.reshape(e.dynamic_slice(s[0], s[1], e.const(0, "s32"), slice_sizes=(1, 4)),
                        shape=(4,))
        return [s[0], e.add(s[1], e.const(1, "s32")),
                e.add(s[2], e.multiply(row, e.splat(0.5, F)))]

    w, _ = _while(g, [xs, g.const(0, "s32"), v],
                  lambda e, s: e.cmp(s[1], e.const(6, "s32"), "LT"), body, packed)
    return g.build(g.get_tuple_element(w, index=2))


@pytest.mark.parametrize("packed", [True, False])
def test_broadcast_of_constant_sinks_and_folds(packed: bool) -> None:
    m = _bcast_loop(packed, 2.0)
    before = Interpreter().run_module(m, [X])
    run_passes(m, [simplification_group(exact_only=True)])
    _eq(Interpreter().run_module(m, [X]), before)
    np.testing.assert_allclose(np.asarray(before), X + 6.0)
    (w,) = _whiles(m)
    assert _state_len(w) == 2
    body = w.called[1]
    ops = [i.opcode for i in body.instructions]
    assert "dynamic_slice" not in ops and "multiply" not in ops  # folded to a constant
    assert "broadcast_in_dim" not in [i.opcode for i in m.entry.instructions]


@pytest.mark.parametrize("kind", ["iota", "constant"])
def test_iota_and_constant_sink(kind: str) -> None:
    for packed in (True, False):
        m = _bcast_loop(packed, kind=kind)
        before = Interpreter().run_module(m, [X])
        run_passes(m, [simplification_group(exact_only=True)])
        _eq(Interpreter().run_module(m, [X]), before)
        (w,) = _whiles(m)
        assert _state_len(w) == 2  # sunk, then dead
        assert kind in [i.opcode for i in w.called[1].instructions]


def test_broadcast_sinking_does_not_touch_a_shared_body() -> None:
    """Two loops share cond/body with different broadcast values: each gets its own."""
    g = HloBuilder()
    v = g.param(F)

    def body(e: Emitter, s: Elems) -> Elems:
        return [s[0], e.add(s[1], e.const(1, "s32")), e.add(s[2], s[0])]

    cond = lambda e, s: e.cmp(s[1], e.const(3, "s32"), "LT")  # noqa: E731
    w1, regions = _while(g, [g.splat(1.0, F), g.const(0, "s32"), v], cond, body, False)
    w2, _ = _while(g, [g.splat(5.0, F), g.const(0, "s32"), v], cond, body, False,
                   regions=regions)
    m = g.build(g.tuple(g.get_tuple_element(w1, index=2), g.get_tuple_element(w2, index=2)))
    changed, before, after = _simplify(m, [X])
    assert changed
    _eq(after, before)
    np.testing.assert_allclose(np.asarray(after[1]), X + 15.0)


def _random_loop(rng: np.random.Generator, packed: bool) -> tuple[Module, list[int]]:
    """A counter loop with 2-6 extra f32[4] elements, each: updated, passed through and read
    by the body, passed through and read by cond, passed through unused; its result used
    after the loop or not. Returns the module and the extra elements expected to go."""
    g = HloBuilder()
    x = g.param(F)
    k = int(rng.integers(2, 7))
    kinds = [str(rng.choice(["update", "body", "cond", "unused"])) for _ in range(k)]
    used = [bool(rng.integers(0, 2)) for _ in range(k)]
    init = [g.const(0, "s32"), g.splat(0.0, F)] + [
        g.multiply(x, g.splat(float(j + 1), F)) for j in range(k)]

    def cond(e: Emitter, s: Elems) -> Instruction:
        p = e.cmp(s[0], e.const(3, "s32"), "LT")
        for j, kind in enumerate(kinds):
            if kind == "cond":
                q = e.cmp(e.reduce(s[2 + j], e.const(0.0), (0,), g.scalar_fn("add")),
                          e.const(1e9), "LT")
                p = e.op("and", p, q)
        return p

    def body(e: Emitter, s: Elems) -> Elems:
        acc = s[1]
        out = [e.add(s[0], e.const(1, "s32")), acc]
        for j, kind in enumerate(kinds):
            if kind == "update":
                out.append(e.add(s[2 + j], e.splat(1.0, F)))
            else:
                out.append(s[2 + j])
            if kind == "body":
                acc = e.add(acc, s[2 + j])
        out[1] = acc
        return out

    w, _ = _while(g, init, cond, body, packed)
    outs = [g.get_tuple_element(w, index=1)] + [
        g.get_tuple_element(w, index=2 + j) for j in range(k) if used[j]]
    m = g.build(g.tuple(*outs))
    dead = [2 + j for j in range(k) if kinds[j] == "unused" and not used[j]]
    return m, dead


def test_random_loops_keep_their_values() -> None:
    rng = np.random.default_rng(7)
    for trial in range(24):
        packed = bool(trial % 2)
        m, dead = _random_loop(rng, packed)
        (w,) = _whiles(m)
        assert dead_elements(w) == dead
        n = _state_len(w)
        changed, before, after = _simplify(m, [X])
        _eq(after, before)
        (w,) = _whiles(m)
        assert _state_len(w) == n - len(dead)
        cpu = xlapy.compile(m.clone(), backend="cpu")
        _eq(cpu(X), before)


def test_bcast_loops_on_cpu_match_the_interpreter() -> None:
    for packed in (True, False):
        for kind in ("broadcast", "iota", "constant"):
            m = _bcast_loop(packed, 3.0, kind)
            want = xlapy.compile(m.clone(), backend="interpreter")(X)
            _eq(xlapy.compile(m, backend="cpu")(X), want)


def test_jax_scan_over_broadcast_in_fori_loop() -> None:
    """The motivating program: the scan's xs (a 64x256 ones broadcast) is no longer made and
    carried each outer trip; the inner body adds a folded 0.1."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    lax = jax.lax
    v = np.linspace(0, 1, 256, dtype=np.float32)

    def f(v: object) -> object:
        return lax.fori_loop(0, 100, lambda i, w: lax.scan(
            lambda c, x: (c + x * 0.1, c), w, jnp.ones((64, v.shape[0])))[0], v)

    text = jax.jit(f).lower(v).as_text()
    want = xlapy.compile(text, backend="interpreter")(v)
    cpu = xlapy.compile(text, backend="cpu")
    got = cpu(v)
    _eq(got, want)
    np.testing.assert_allclose(np.asarray(got), np.asarray(jax.jit(f)(v)), rtol=1e-5)
    m = parse_module(text, "<jax>")
    backend_pipeline(verify=True).run(m)
    shapes = [s for w in _whiles(m) for s in (
        w.shape.tuple_shapes if w.shape.is_tuple else [w.shape])]
    assert parse_shape("f32[64,256]") not in shapes
    assert not any(i.opcode == "broadcast_in_dim" and i.shape.dimensions == (64, 256)
                   for c in m.computations for i in c.instructions)
