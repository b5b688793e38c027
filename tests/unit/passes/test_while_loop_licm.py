"""While-loop invariant code motion: what is hoisted, what stays, and that results match."""

from __future__ import annotations

import numpy as np

from xlapy.interpreter import Interpreter
from xlapy.ir import Module
from xlapy.passes.dce import DeadCodeElimination
from xlapy.passes.hlo_builder import Emitter, HloBuilder, parse_shape
from xlapy.passes.pass_base import run_passes
from xlapy.passes.tuple_simplifier import TupleSimplifier
from xlapy.passes.while_loop_licm import WhileLoopInvariantCodeMotion
from xlapy.types import ElementType, Shape

S = "f32[8]"


def _loop(body_fn: object, packed: bool, trips: int = 3, ys: str = S) -> Module:
    """while i < trips: (i + 1, y = body_fn(e, i, x, y), x) over the state (i, y, x), y of
    shape `ys`."""
    g = HloBuilder()
    global _ADD
    _ADD = g.scalar_fn("add")
    x = g.param(S)
    shapes = ["s32[]", ys, S]

    def cond(e: Emitter, *ps: object) -> object:
        i = ps[0] if not packed else e.get_tuple_element(ps[0], index=0)
        return e.cmp(i, e.const(trips, "s32"), "LT")

    def body(e: Emitter, *ps: object) -> object:
        if packed:
            i, y, xx = (e.get_tuple_element(ps[0], index=k) for k in range(3))
        else:
            i, y, xx = ps
        out = (e.add(i, e.const(1, "s32")), body_fn(e, i, xx, y), xx)  # type: ignore[operator]
        return e.tuple(*out)

    init = [g.const(0, "s32"), g.splat(0.0, ys), x]
    if packed:
        tshape = Shape.tuple([parse_shape(t) for t in shapes])
        c = g.sub("cond", [tshape], cond)
        b = g.sub("body", [tshape], body)
        w = g.op("while", g.tuple(*init), called=[c, b])
    else:
        c = g.sub("cond", shapes, cond)
        b = g.sub("body", shapes, body)
        b.multi_result = True
        w = g.op("while", *init, called=[c, b])
    return g.build(g.get_tuple_element(w, index=1))


def _ops(comp: object) -> list[str]:
    return [i.opcode for i in comp.instructions]  # type: ignore[attr-defined]


def _body(m: Module) -> object:
    (w,) = [i for i in m.entry.instructions if i.opcode == "while"]
    return w.called[1]


def _check(fn: object, packed: bool, expect_hoisted: bool, opname: str) -> None:
    m = _loop(fn, packed)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    before = Interpreter().run_module(m, [x])
    p = WhileLoopInvariantCodeMotion()
    changed = run_passes(m, [p, TupleSimplifier(), DeadCodeElimination()])
    after = Interpreter().run_module(m, [x])
    np.testing.assert_array_equal(after, before)
    assert bool(p.hoisted) == expect_hoisted and (changed or not expect_hoisted)
    assert (opname in _ops(m.entry)) == expect_hoisted
    assert (opname in _ops(_body(m))) != expect_hoisted


def test_hoists_invariant_expensive_op_packed_and_unpacked() -> None:
    def fn(e: Emitter, i: object, x: object, y: object) -> object:
        return e.add(y, e.exponential(e.negate(x)))

    for packed in (True, False):
        _check(fn, packed, True, "exponential")


def test_hoisted_values_become_passed_through_state() -> None:
    def fn(e: Emitter, i: object, x: object, y: object) -> object:
        return e.add(y, e.tanh(x))

    m = _loop(fn, packed=False)
    run_passes(m, [WhileLoopInvariantCodeMotion(), TupleSimplifier(), DeadCodeElimination()])
    (w,) = [i for i in m.entry.instructions if i.opcode == "while"]
    assert len(w.operands) == 4 and w.operands[3].opcode == "tanh"
    body = w.called[1]
    assert body.root.operands[3] is body.parameters[3]


def test_does_not_hoist_values_depending_on_changing_state() -> None:
    def fn(e: Emitter, i: object, x: object, y: object) -> object:
        return e.add(y, e.exponential(y))

    for packed in (True, False):
        _check(fn, packed, False, "exponential")


def test_does_not_hoist_side_effecting_ops() -> None:
    def fn(e: Emitter, i: object, x: object, y: object) -> object:
        from xlapy.ops.rng import RngDistribution

        r = e.op("rng", e.const(0.0), e.const(1.0), e.const([8], "s64"),
                 rng_distribution=RngDistribution.UNIFORM,
                 shape=Shape.array(ElementType.F32, [8]))
        return e.add(y, e.multiply(r, x))

    m = _loop(fn, packed=True)
    assert not run_passes(m, [WhileLoopInvariantCodeMotion()])
    assert "rng" in _ops(_body(m))


def test_does_not_carry_size_inflating_broadcast() -> None:
    def fn(e: Emitter, i: object, x: object, y: object) -> object:
        s = e.reduce(x, e.const(0.0), (0,), _add(e))
        return e.add(y, e.bcast(s, (8,), ()))

    m = _loop(fn, packed=True)
    x = np.arange(8, dtype=np.float32)
    before = Interpreter().run_module(m, [x])
    run_passes(m, [WhileLoopInvariantCodeMotion(), TupleSimplifier(), DeadCodeElimination()])
    np.testing.assert_array_equal(Interpreter().run_module(m, [x]), before)
    assert "reduce" in _ops(m.entry) and "broadcast_in_dim" in _ops(_body(m))


def test_does_not_carry_values_made_of_broadcast_constants() -> None:
    """select(c < d, bcast(2), bcast(-2)) (jnp.remainder's divisor) is invariant and no
    bigger than its operands, but made of constants alone: carried as an array it hid them
    from the body's kernels (betainc's remainder became a scalar idiv per element). It stays
    in the body; a value computed from the state element x (x * bcast(3)) is carried."""
    def fn(e: Emitter, i: object, x: object, y: object) -> object:
        pred = e.splat(True, "pred[8]")
        divisor = e.select(pred, e.splat(2.0, S), e.splat(-2.0, S))
        return e.add(e.remainder(y, divisor), e.multiply(x, e.splat(3.0, S)))

    m = _loop(fn, packed=True)
    x = np.linspace(-7, 7, 8, dtype=np.float32)
    before = Interpreter().run_module(m, [x])
    run_passes(m, [WhileLoopInvariantCodeMotion(), TupleSimplifier(), DeadCodeElimination()])
    np.testing.assert_array_equal(Interpreter().run_module(m, [x]), before)
    body = _ops(_body(m))
    assert "select" in body and "multiply" not in body, body
    assert "multiply" in _ops(m.entry)


def test_carries_costly_values_larger_than_their_inputs() -> None:
    """exp(convert(x)) to f64 from the f32 state element x is twice x's bytes, but an exp per
    element each trip costs more than reading it: carried, as XLA does (a c64 exp(1j t) from
    an f32 t in a fori_loop was recomputed every trip, 3.5x XLA's time; failed before). The
    convert alone (cheap) stays in the body, recomputed."""
    def costly(e: Emitter, i: object, x: object, y: object) -> object:
        return e.add(y, e.exponential(e.convert(x, new_element_type=ElementType.F64)))

    def cheap(e: Emitter, i: object, x: object, y: object) -> object:
        return e.add(y, e.convert(x, new_element_type=ElementType.F64))

    x = np.linspace(-1, 1, 8, dtype=np.float32)
    for packed in (True, False):
        for fn, moved in ((costly, "exponential"), (cheap, None)):
            m = _loop(fn, packed, ys="f64[8]")
            before = Interpreter().run_module(m, [x])
            run_passes(m, [WhileLoopInvariantCodeMotion(), TupleSimplifier(),
                           DeadCodeElimination()])
            np.testing.assert_array_equal(Interpreter().run_module(m, [x]), before)
            body = _ops(_body(m))
            assert "exponential" not in body, body
            assert "convert" in (_ops(m.entry) if moved else body)


def test_zero_trip_loop_still_correct() -> None:
    def fn(e: Emitter, i: object, x: object, y: object) -> object:
        return e.add(y, e.log(x))

    m = _loop(fn, packed=True, trips=0)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    run_passes(m, [WhileLoopInvariantCodeMotion()])
    np.testing.assert_array_equal(Interpreter().run_module(m, [x]), np.zeros(8, np.float32))


_ADD: object = None


def _add(e: Emitter) -> object:
    return _ADD


def test_hoists_a_pure_custom_call_and_its_tuple_elements() -> None:
    """As XLA's LICM: a custom call without has_side_effect on a state element the body
    passes through is invariant, and so are the get_tuple_elements of its results (the LU of
    jnp.linalg.solve(a, b + c) in a fori_loop over c was recomputed every trip); the same call
    marked has_side_effect stays in the body."""
    from xlapy.ops.misc import register_custom_call, unregister_custom_call
    from xlapy.stablehlo import parse_module

    def text(effect: str) -> str:
        return f"""func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {{
  %z = stablehlo.constant dense<0.0> : tensor<4xf32>
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %i0, %x = %a, %acc = %z)
    : tensor<i32>, tensor<4xf32>, tensor<4xf32>
    cond {{
      %n = stablehlo.constant dense<3> : tensor<i32>
      %c = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    }} do {{
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      %t:2 = stablehlo.custom_call @licm_pair(%x){effect}
        : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
      %s = stablehlo.add %acc, %t#0 : tensor<4xf32>
      %u = stablehlo.add %s, %t#1 : tensor<4xf32>
      stablehlo.return %j, %x, %u : tensor<i32>, tensor<4xf32>, tensor<4xf32>
    }}
  return %r#2 : tensor<4xf32>
}}"""

    register_custom_call("licm_pair", lambda ops, shape, attrs: (ops[0] * 2, ops[0] + 1))
    try:
        a = np.arange(4, dtype=np.float32)
        want = 3 * (a * 2 + a + 1)
        for effect, hoisted in (("", True), (" {has_side_effect = true}", False)):
            m = parse_module(text(effect), "<test>")
            run_passes(m, [WhileLoopInvariantCodeMotion(), TupleSimplifier(),
                           DeadCodeElimination()])
            np.testing.assert_array_equal(Interpreter().run_module(m, [a]), want)
            assert ("custom_call" in _ops(m.entry)) == hoisted
            assert ("custom_call" in _ops(_body(m))) != hoisted
    finally:
        unregister_custom_call("licm_pair")


def test_a_loops_own_regions_change_in_place() -> None:
    def fn(e: Emitter, i: object, x: object, y: object) -> object:
        return e.add(y, e.tanh(x))

    m = _loop(fn, packed=False)
    body = _body(m)
    n = len(m.computations)
    p = WhileLoopInvariantCodeMotion()
    run_passes(m, [p])
    assert p.hoisted and _body(m) is body and len(m.computations) == n


def test_regions_two_loops_call_are_copied_for_each() -> None:
    g = HloBuilder()
    x = g.param(S)
    shapes = ["s32[]", S, S]
    c = g.sub("cond", shapes, lambda e, i, y, xx: e.cmp(i, e.const(3, "s32"), "LT"))
    b = g.sub("body", shapes, lambda e, i, y, xx: e.tuple(
        e.add(i, e.const(1, "s32")), e.add(y, e.tanh(xx)), xx))
    b.multi_result = True
    ws = [g.op("while", g.const(0, "s32"), g.splat(0.0, S), init, called=[c, b])
          for init in (x, g.negate(x))]
    m = g.build(g.tuple(*[g.get_tuple_element(w, index=1) for w in ws]))
    xs = np.linspace(-1, 1, 8, dtype=np.float32)
    before = Interpreter().run_module(m, [xs])
    run_passes(m, [WhileLoopInvariantCodeMotion(), TupleSimplifier(), DeadCodeElimination()])
    ws = [i for i in m.entry.instructions if i.opcode == "while"]
    assert len(ws) == 2 and ws[0].called[1] is not ws[1].called[1]
    assert all("tanh" not in _ops(w.called[1]) for w in ws)
    for got, want in zip(Interpreter().run_module(m, [xs]), before):
        np.testing.assert_array_equal(got, want)
