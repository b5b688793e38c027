"""Shape inference and evaluation of while, case, if, call, map, optimization_barrier,
composite."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

import xlapy
from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation
from xlapy.errors import ShapeInferenceError
from xlapy.ops import infer_shape
from xlapy.ops.control_flow import CompositeAttrs, MapAttrs
from xlapy.types import ElementType, Shape

S32 = Shape.scalar(ElementType.S32)
F32 = Shape.scalar(ElementType.F32)
PRED = Shape.scalar(ElementType.PRED)
V4 = Shape.array(ElementType.F32, (4,))


@dataclass
class R:
    """A Region stand-in: parameter shapes, result shape, multi_result."""

    parameter_shapes: list[Shape]
    result_shape: Shape
    multi_result: bool = False
    name: str = field(default="region")


def multi(params: list[Shape], results: list[Shape]) -> R:
    return R(params, Shape.tuple(results), True)


def run(comp: XlaComputation, *args: object) -> object:
    return xlapy.Client().execute_and_transfer(comp, list(args)).to_value()


def sub(name: str, params: list[Shape], body, multi_result: bool = False) -> XlaComputation:
    b = XlaBuilder(name)
    ps = [b.parameter(i, s) for i, s in enumerate(params)]
    root = body(b, *ps)
    comp = b.build(root)
    comp.module.entry_computation().multi_result = multi_result
    return comp


# ---- shape inference ----------------------------------------------------------------------
class TestWhileInfer:
    def test_variadic(self) -> None:
        shape = infer_shape("while", [S32, V4], regions=[R([S32, V4], PRED),
                                                          multi([S32, V4], [S32, V4])])
        assert shape == Shape.tuple([S32, V4])

    def test_single_tuple_state(self) -> None:
        t = Shape.tuple([S32, V4])
        assert infer_shape("while", [t], regions=[R([t], PRED), R([t], t)]) == t

    def test_cond_params(self) -> None:
        with pytest.raises(ShapeInferenceError, match="while_c1"):
            infer_shape("while", [S32], regions=[R([F32], PRED), R([S32], S32)])

    def test_cond_result(self) -> None:
        with pytest.raises(ShapeInferenceError, match="while_c1.*expected pred"):
            infer_shape("while", [S32], regions=[R([S32], S32), R([S32], S32)])

    def test_body_result(self) -> None:
        with pytest.raises(ShapeInferenceError, match="while_c2"):
            infer_shape("while", [S32, V4], regions=[R([S32, V4], PRED),
                                                      multi([S32, V4], [S32, S32])])

    def test_body_params(self) -> None:
        with pytest.raises(ShapeInferenceError, match="while_c2"):
            infer_shape("while", [S32], regions=[R([S32], PRED), R([F32], S32)])


class TestCaseIfInfer:
    def test_case_no_operands(self) -> None:
        shape = infer_shape("case", [S32], regions=[multi([], [V4, S32])] * 3)
        assert shape == Shape.tuple([V4, S32])

    def test_case_branch_operands(self) -> None:
        assert infer_shape("case", [S32, F32, V4], regions=[R([F32], S32), R([V4], S32)]) == S32

    def test_case_index_type(self) -> None:
        with pytest.raises(ShapeInferenceError, match="case_c0"):
            infer_shape("case", [F32], regions=[R([], S32)])

    def test_case_no_branches(self) -> None:
        with pytest.raises(ShapeInferenceError, match="case_c1"):
            infer_shape("case", [S32], regions=[])

    def test_case_branch_params(self) -> None:
        with pytest.raises(ShapeInferenceError, match="case_c2"):
            infer_shape("case", [S32], regions=[R([S32], S32)])
        with pytest.raises(ShapeInferenceError, match="case_c2"):
            infer_shape("case", [S32, F32], regions=[R([F32], S32), R([F32], S32)])

    def test_case_same_outputs(self) -> None:
        with pytest.raises(ShapeInferenceError, match="case_c3"):
            infer_shape("case", [S32], regions=[R([], S32), R([], F32)])

    def test_if(self) -> None:
        assert infer_shape("if", [PRED], regions=[R([], V4), R([], V4)]) == V4
        assert infer_shape("if", [PRED, S32, F32], regions=[R([S32], V4), R([F32], V4)]) == V4

    def test_if_pred(self) -> None:
        with pytest.raises(ShapeInferenceError, match="if_c0"):
            infer_shape("if", [S32], regions=[R([], V4), R([], V4)])

    def test_if_params_and_outputs(self) -> None:
        with pytest.raises(ShapeInferenceError, match="if_c1"):
            infer_shape("if", [PRED], regions=[R([S32], V4), R([], V4)])
        with pytest.raises(ShapeInferenceError, match="if_c2"):
            infer_shape("if", [PRED], regions=[R([], V4), R([], F32)])


class TestOtherInfer:
    def test_call(self) -> None:
        assert infer_shape("call", [S32, V4], regions=[R([S32, V4], F32)]) == F32
        assert infer_shape("call", [], regions=[multi([], [F32, S32])]) == Shape.tuple([F32, S32])
        with pytest.raises(ShapeInferenceError, match="call_c1"):
            infer_shape("call", [S32], regions=[R([F32], F32)])

    def test_map(self) -> None:
        m = Shape.array(ElementType.S32, (2, 3))
        shape = infer_shape("map", [m, m], MapAttrs((0, 1)), [R([S32, S32], PRED)])
        assert shape == Shape.array(ElementType.PRED, (2, 3))

    def test_map_violations(self) -> None:
        m = Shape.array(ElementType.S32, (2, 3))
        with pytest.raises(ShapeInferenceError, match="map_c1"):
            infer_shape("map", [m, V4], MapAttrs((0, 1)), [R([S32, F32], S32)])
        with pytest.raises(ShapeInferenceError, match="map_c2"):
            infer_shape("map", [], MapAttrs(()), [R([], S32)])
        with pytest.raises(ShapeInferenceError, match="map_c3"):
            infer_shape("map", [m], MapAttrs((1, 0)), [R([S32], S32)])
        with pytest.raises(ShapeInferenceError, match="map_c4"):
            infer_shape("map", [m], MapAttrs((0, 1)), [R([F32], S32)])
        with pytest.raises(ShapeInferenceError, match="map_c4"):
            infer_shape("map", [m], MapAttrs((0, 1)), [R([S32], V4)])

    def test_optimization_barrier(self) -> None:
        tok = Shape.token()
        assert infer_shape("optimization_barrier", [V4, tok]) == Shape.tuple([V4, tok])
        assert infer_shape("optimization_barrier", [V4]) == V4

    def test_composite(self) -> None:
        attrs = CompositeAttrs("my.op", (("k", 1),), "decomp", 1)
        assert infer_shape("composite", [V4], attrs, [R([V4], V4)]) == V4
        with pytest.raises(ShapeInferenceError, match="composite_c1"):
            infer_shape("composite", [V4], CompositeAttrs("plain"), [R([V4], V4)])
        with pytest.raises(ShapeInferenceError, match="composite_c2"):
            infer_shape("composite", [V4], CompositeAttrs("a.b", (("k", 1), ("k", 2))),
                        [R([V4], V4)])
        with pytest.raises(ShapeInferenceError, match="composite_c3"):
            infer_shape("composite", [V4], CompositeAttrs("a.b"), [R([F32], V4)])


# ---- evaluation ---------------------------------------------------------------------------
def test_while_factorial_tuple_state() -> None:
    t = Shape.tuple([S32, S32])
    cond = sub("cond", [t], lambda b, p: ops.Gt(ops.GetTupleElement(p, 0), ops.ConstantR0(b, 0)))
    body = sub("body", [t], lambda b, p: ops.Tuple(b, [
        ops.Sub(ops.GetTupleElement(p, 0), ops.ConstantR0(b, 1)),
        ops.Mul(ops.GetTupleElement(p, 1), ops.GetTupleElement(p, 0))]))
    b = XlaBuilder("fact")
    n = b.parameter(0, S32)
    w = ops.While(cond, body, ops.Tuple(b, [n, ops.ConstantR0(b, 1)]))
    comp = b.build(ops.GetTupleElement(w, 1))
    assert [int(run(comp, np.int32(k))) for k in (0, 1, 5, 10)] == [1, 1, 120, 3628800]


def test_while_fibonacci_multi_result_regions() -> None:
    """StableHLO form: three operands, regions with three parameters and three results."""
    cond = sub("cond", [S32, S32, S32], lambda b, i, x, y: ops.Lt(i, ops.ConstantR0(b, 10)))
    body = sub("body", [S32, S32, S32], lambda b, i, x, y: ops.Tuple(
        b, [ops.Add(i, ops.ConstantR0(b, 1)), y, ops.Add(x, y)]), multi_result=True)
    b = XlaBuilder("fib")
    init = [ops.ConstantR0(b, 0), ops.ConstantR0(b, 0), ops.ConstantR0(b, 1)]
    w = b.add_op("while", init, computations=[cond, body])
    assert w.shape() == Shape.tuple([S32, S32, S32])
    assert [int(v) for v in run(b.build(w))] == [10, 55, 89]


def test_while_zero_iterations_keeps_state() -> None:
    cond = sub("cond", [V4], lambda b, x: ops.ConstantR0(b, False))
    body = sub("body", [V4], lambda b, x: ops.Add(x, x))
    b = XlaBuilder("w")
    ops.While(cond, body, b.parameter(0, V4))
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(run(b.build(), x), x)


def _switch(index_type: ElementType = ElementType.S32) -> XlaComputation:
    branches = [sub(f"br{k}", [V4], lambda b, x, k=k: ops.Add(
        x, ops.ConstantR1(b, [float(k)] * 4))) for k in range(3)]
    b = XlaBuilder("switch")
    i = b.parameter(0, Shape.scalar(index_type))
    x = b.parameter(1, V4)
    ops.Conditional(i, branches, [x, x, x])
    return b.build()


@pytest.mark.parametrize("index,expected", [(0, 0.0), (1, 1.0), (2, 2.0), (3, 2.0), (-1, 2.0),
                                            (2**31 - 1, 2.0)])
def test_case_out_of_range_runs_last_branch(index: int, expected: float) -> None:
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(run(_switch(), np.int32(index), x), x + expected)


def test_case_branches_without_operands_multi_result() -> None:
    br = [sub(f"b{k}", [], lambda b, k=k: ops.Tuple(
        b, [ops.ConstantR0(b, k), ops.ConstantR1(b, [k, k])]), multi_result=True)
          for k in range(2)]
    b = XlaBuilder("case")
    b.add_op("case", [b.parameter(0, S32)], computations=br)
    comp = b.build()
    r = run(comp, np.int32(-1))
    assert int(r[0]) == 1 and list(r[1]) == [1, 1]
    assert int(run(comp, np.int32(0))[0]) == 0


def test_if_xla_conditional_form() -> None:
    t = sub("t", [S32], lambda b, x: ops.Mul(x, ops.ConstantR0(b, 10)))
    f = sub("f", [F32], lambda b, x: ops.ConstantR0(b, -1))
    b = XlaBuilder("if")
    p = b.parameter(0, PRED)
    ops.Conditional(p, b.parameter(1, S32), t, b.parameter(2, F32), f)
    comp = b.build()
    assert int(run(comp, np.bool_(True), np.int32(4), np.float32(0))) == 40
    assert int(run(comp, np.bool_(False), np.int32(4), np.float32(0))) == -1


def test_pred_index_with_branch_list_builds_if() -> None:
    t = sub("t", [S32], lambda b, x: x)
    f = sub("f", [S32], lambda b, x: ops.Sub(x, x))
    b = XlaBuilder("if")
    r = ops.Conditional(b.parameter(0, PRED), [t, f], [b.parameter(1, S32)] * 2)
    assert r.instr.opcode == "if"
    assert int(run(b.build(), np.bool_(True), np.int32(7))) == 7


def test_call_and_composite() -> None:
    f = sub("f", [V4, V4], lambda b, x, y: ops.Mul(x, y))
    b = XlaBuilder("call")
    x = b.parameter(0, V4)
    c = ops.Call(b, f, [x, x])
    ops.Composite(b, [c, x], "my.square_times", f, {"k": 1}, version=1)
    v = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(run(b.build(), v), v * v * v)


def test_map_elementwise_and_fallback() -> None:
    m = Shape.array(ElementType.S32, (2, 3))
    f = sub("f", [S32, S32], lambda b, x, y: ops.Add(ops.Mul(x, y), ops.ConstantR0(b, 1)))
    b = XlaBuilder("map")
    ops.Map(b, [b.parameter(0, m), b.parameter(1, m)], f, [0, 1])
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_array_equal(run(b.build(), x, x + 1), x * (x + 1) + 1)

    # a computation with a while loop is not element-wise: evaluated per element
    cond = sub("c", [S32], lambda b, v: ops.Lt(v, ops.ConstantR0(b, 100)))
    body = sub("d", [S32], lambda b, v: ops.Mul(v, ops.ConstantR0(b, 2)))
    g = sub("g", [S32], lambda b, v: ops.While(cond, body, v))
    b2 = XlaBuilder("map2")
    ops.Map(b2, [b2.parameter(0, m)], g, [0, 1])
    y = np.array([[1, 3, 50], [99, 100, 7]], np.int32)
    np.testing.assert_array_equal(run(b2.build(), y), [[128, 192, 100], [198, 100, 112]])


def test_map_to_other_type() -> None:
    f = sub("f", [F32], lambda b, x: ops.Gt(x, ops.ConstantR0(b, 1.5)))
    b = XlaBuilder("map")
    ops.Map(b, [b.parameter(0, V4)], f, [0])
    r = run(b.build(), np.arange(4, dtype=np.float32))
    assert r.dtype == np.bool_ and list(r) == [False, False, True, True]


def test_optimization_barrier_identity() -> None:
    b = XlaBuilder("ob")
    x = b.parameter(0, V4)
    ops.OptimizationBarrier(ops.Tuple(b, [x, b.parameter(1, S32)]))
    r = run(b.build(), np.ones(4, np.float32), np.int32(3))
    assert list(r[0]) == [1.0] * 4 and int(r[1]) == 3
