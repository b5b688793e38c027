"""Builder element-wise ops: every function in `ops_elementwise.__all__` run through
xlapy.Client with its value checked, seed 001 broadcast_dimensions, and error reports that
name the builder function."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import scipy.special

import xlapy
from xlapy.builder import XlaBuilder, XlaOp, ops
from xlapy.builder import ops_elementwise as ew
from xlapy.errors import BuilderError
from xlapy.types import ElementType, Shape, from_dtype

E = ElementType


def run(build: Callable[..., XlaOp], *args: np.ndarray) -> np.ndarray:
    """Build `build(*parameters)` over `args`' shapes and run it on the client."""
    b = XlaBuilder("t")
    params = [ops.Parameter(b, i, Shape.array(from_dtype(a.dtype), a.shape))
              for i, a in enumerate(args)]
    comp = b.build(build(*params))
    return np.asarray(xlapy.Client().execute_and_transfer(comp, list(args)).to_numpy())


def build_error(build: Callable[..., Any], *shapes: Shape) -> str:
    b = XlaBuilder("t")
    build(*[ops.Parameter(b, i, s) for i, s in enumerate(shapes)])
    with pytest.raises(BuilderError) as info:
        b.build()
    return str(info.value)


f = np.array([-2.5, -0.5, 0.5, 1.5, 4.0], np.float32)
g = np.array([2.0, -3.0, 0.25, -1.5, 8.0], np.float32)
pos = np.array([0.25, 1.0, 2.0, 9.0, 27.0], np.float32)
i = np.array([7, -7, 12, -128, 1], np.int8)
j = np.array([2, 3, -5, 1, 7], np.int8)
u = np.array([1, 2, 255, 16, 0], np.uint8)
p = np.array([True, False, True, False, True])
q = np.array([True, True, False, False, True])
c = np.array([1 + 2j, -3 - 4j, 0.5j], np.complex64)

# (builder function, arguments, expected value, tolerance (0: exact)).
CASES: list[tuple[Callable[..., XlaOp], Sequence[np.ndarray], Any, float]] = [
    (ops.Add, [f, g], f + g, 0), (ops.Sub, [f, g], f - g, 0), (ops.Mul, [f, g], f * g, 0),
    (ops.Div, [f, g], f / g, 0), (ops.Div, [i, j], [3, -2, -2, -128, 0], 0),
    (ops.Rem, [f, g], np.fmod(f, g), 0), (ops.Rem, [i, j], [1, -1, 2, 0, 1], 0),
    (ops.Max, [f, g], np.maximum(f, g), 0), (ops.Min, [f, g], np.minimum(f, g), 0),
    (ops.Pow, [pos, g], pos ** g, 1e-6), (ops.Pow, [i, np.abs(j)], [49, -343, 0, -128, 1], 0),
    (ops.Atan2, [f, g], np.arctan2(f, g), 1e-6),
    (ops.Complex, [f, g], f + 1j * g, 0),
    (ops.And, [i, j], i & j, 0), (ops.Or, [i, j], i | j, 0), (ops.Xor, [i, j], i ^ j, 0),
    (ops.And, [p, q], p & q, 0), (ops.Or, [p, q], p | q, 0), (ops.Xor, [p, q], p ^ q, 0),
    (ops.ShiftLeft, [u, np.array([1, 7, 1, 4, 9], np.uint8)], [2, 0, 254, 0, 0], 0),
    (ops.ShiftRightArithmetic, [i, np.array([1, 1, 2, 9, 0], np.int8)], [3, -4, 3, -1, 1], 0),
    (ops.ShiftRightLogical, [i, np.array([1, 1, 2, 9, 0], np.int8)], [3, 124, 3, 0, 1], 0),
    (ops.LogicalAnd, [p, q], p & q, 0), (ops.LogicalOr, [p, q], p | q, 0),
    (ops.Eq, [f, g], f == g, 0), (ops.Ne, [f, g], f != g, 0), (ops.Ge, [f, g], f >= g, 0),
    (ops.Gt, [f, g], f > g, 0), (ops.Le, [f, g], f <= g, 0), (ops.Lt, [i, j], i < j, 0),
    (ops.EqTotalOrder, [np.array([0.0, np.nan], np.float32), np.array([-0.0, np.nan],
                                                                       np.float32)],
     [False, True], 0),
    (ops.NeTotalOrder, [f, f], [False] * 5, 0),
    (ops.GeTotalOrder, [np.array([0.0], np.float32), np.array([-0.0], np.float32)], [True], 0),
    (ops.GtTotalOrder, [np.array([0.0], np.float32), np.array([-0.0], np.float32)], [True], 0),
    (ops.LeTotalOrder, [np.array([np.nan], np.float32), np.array([np.inf], np.float32)],
     [False], 0),
    (ops.LtTotalOrder, [np.array([-np.nan], np.float32), np.array([-np.inf], np.float32)],
     [True], 0),
    (lambda x, y: ops.Compare(x, y, (), "GT"), [f, g], f > g, 0),
    (lambda x, y: ops.Compare(x, y, direction="LT", compare_type="TOTALORDER"),
     [np.array([-0.0], np.float32), np.array([0.0], np.float32)], [True], 0),
    (ops.Abs, [f], np.abs(f), 0), (ops.Abs, [c], np.abs(c), 1e-6),
    (ops.Ceil, [f], np.ceil(f), 0), (ops.Floor, [f], np.floor(f), 0),
    (ops.Exp, [f], np.exp(f), 1e-6), (ops.Expm1, [f], np.expm1(f), 1e-6),
    (ops.Log, [pos], np.log(pos), 1e-6), (ops.Log1p, [pos], np.log1p(pos), 1e-6),
    (ops.Logistic, [f], 1 / (1 + np.exp(-f)), 1e-6), (ops.Neg, [i], -i, 0),
    (ops.Sign, [f], np.sign(f), 0), (ops.Sqrt, [pos], np.sqrt(pos), 0),
    (ops.Rsqrt, [pos], 1 / np.sqrt(pos), 1e-6), (ops.Cbrt, [pos], np.cbrt(pos), 1e-6),
    (ops.Tanh, [f], np.tanh(f), 1e-6), (ops.Tan, [f], np.tan(f), 1e-6),
    (ops.Sin, [f], np.sin(f), 1e-6), (ops.Cos, [f], np.cos(f), 1e-6),
    (ops.Erf, [f], scipy.special.erf(f), 1e-6),
    (ops.Real, [c], c.real, 0), (ops.Imag, [c], c.imag, 0), (ops.Conj, [c], np.conj(c), 0),
    (ops.Conj, [f], f, 0),
    (ops.IsFinite, [np.array([1, np.inf, np.nan], np.float32)], [True, False, False], 0),
    (ops.PopulationCount, [u], [1, 1, 8, 1, 0], 0), (ops.Clz, [u], [7, 6, 0, 3, 8], 0),
    (ops.RoundNearestAfz, [f], [-3, -1, 1, 2, 4], 0), (ops.Round, [f], [-3, -1, 1, 2, 4], 0),
    (ops.RoundNearestEven, [f], [-2, -0.0, 0, 2, 4], 0),
    (ops.Not, [i], ~i, 0), (ops.Not, [p], ~p, 0), (ops.LogicalNot, [p], ~p, 0),
    (lambda x: ops.ConvertElementType(x, E.S32), [f], [-2, 0, 0, 1, 4], 0),
    (lambda x: ops.ConvertElementType(x, np.float16), [i], i.astype(np.float16), 0),
    (lambda x: ops.BitcastConvertType(x, E.U32), [np.array([1.0], np.float32)],
     [0x3F800000], 0),
    (lambda x: ops.BitcastConvertType(x, E.U8), [np.array([1.0], np.float32)],
     [[0, 0, 128, 63]], 0),
    (lambda x: ops.ReducePrecision(x, 8, 7), [np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8],
                                                       np.float32)],
     [1.0, 1 + 2 ** -6], 0),
    (lambda x, y: ops.Select(ops.Lt(x, y), x, y), [f, g], np.where(f < g, f, g), 0),
    (ops.Clamp, [np.array(-1.0, np.float32), f, np.array(1.0, np.float32)],
     np.clip(f, -1, 1), 0),
    (ops.SquareF32, [f], f * f, 0), (ops.ReciprocalF32, [pos], 1 / pos, 1e-6),
    (ops.SqrtF32, [pos], np.sqrt(pos), 1e-6),  # Pow-based: not the correctly rounded sqrt
]


@pytest.mark.parametrize("k", range(len(CASES)))
def test_value(k: int) -> None:
    fn, args, want, tol = CASES[k]
    got = run(fn, *args)
    want = np.asarray(want)
    assert got.shape == want.shape
    if tol:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want.astype(got.dtype))
        if got.dtype.kind == "f":  # signed zeros too
            assert (np.signbit(got) == np.signbit(want.astype(got.dtype))).all()


def test_every_builder_function_has_a_value_case() -> None:
    # Lambdas name their function inside; read the code objects' global names.
    used = set()
    for fn, *_ in CASES:
        used.add(getattr(fn, "__name__", ""))
        used.update(fn.__code__.co_names if fn.__name__ == "<lambda>" else ())
    assert set(ew.__all__) - used == set()


def test_bf16_and_int4_through_the_builder() -> None:
    x = np.array([1.0, 3.0], ml_dtypes.bfloat16)
    assert run(ops.Add, x, x).tolist() == [2.0, 6.0]
    s4 = np.array([7, -8], ml_dtypes.int4)
    assert run(ops.Add, s4, s4).tolist() == [-2, 0]  # wraps


# ---- broadcast_dimensions --------------------------------------------------------------------
m = np.arange(6, dtype=np.float32).reshape(2, 3)


def test_broadcast_dimensions() -> None:
    row = np.array([10, 20, 30], np.float32)
    col = np.array([100, 200], np.float32)
    assert (run(lambda a, b: ops.Add(a, b, (1,)), m, row) == m + row).all()
    assert (run(lambda a, b: ops.Sub(a, b, (0,)), m, col) == m - col[:, None]).all()
    assert (run(lambda a, b: ops.Mul(b, a, (0,)), m, col) == col[:, None] * m).all()
    assert (run(lambda a, b: ops.Gt(a, b, (1,)), m, np.full(3, 2.5, np.float32))
            == (m > 2.5)).all()
    s = np.array(2.0, np.float32)
    assert (run(ops.Max, m, s) == np.maximum(m, 2)).all()
    # Degenerate (size-1) dimensions broadcast at equal rank.
    a, b = np.ones((2, 1), np.float32), np.arange(3, dtype=np.float32).reshape(1, 3)
    assert run(ops.Add, a, b).shape == (2, 3)
    # A rank-1 operand into a rank-3 one.
    cube = np.zeros((2, 3, 4), np.int32)
    v = np.arange(3, dtype=np.int32)
    got = run(lambda x, y: ops.Add(x, y, (1,)), cube, v)
    assert (got == v[None, :, None]).all()
    got = run(lambda x, y: ops.Compare(x, y, (1,), "EQ"), cube, v)
    assert got.dtype == np.bool_ and got[:, 0].all() and not got[:, 1].any()


# ---- error reporting -----------------------------------------------------------------------------
F2x3 = Shape.array(E.F32, (2, 3))


@pytest.mark.parametrize(("name", "build", "shapes", "fragment"), [
    ("Add", lambda a, b: ops.Add(a, b, (1,)), [F2x3, Shape.array(E.F32, (4,))], ""),
    ("Add", lambda a, b: ops.Add(a, b), [F2x3, Shape.array(E.F32, (3,))], "rank"),
    ("Mul", lambda a, b: ops.Mul(a, b), [F2x3, Shape.array(E.S32, (2, 3))], "multiply_c1"),
    ("Sqrt", ops.Sqrt, [Shape.array(E.S32, (2,))], "sqrt_c1"),
    ("Not", ops.Not, [F2x3], "not_c1"),
    ("PopulationCount", ops.PopulationCount, [F2x3], "popcnt_c1"),
    ("ShiftLeft", ops.ShiftLeft, [F2x3, F2x3], "shift_left_c1"),
    ("Complex", ops.Complex, [Shape.array(E.S32, (2,))] * 2, "complex_c1"),
    ("Compare", lambda a, b: ops.Compare(a, b, (), "SIDEWAYS"), [F2x3, F2x3], ""),
    ("Compare", lambda a, b: ops.Compare(a, b, (), "LT", "UNSIGNED"), [F2x3, F2x3],
     "compare_c3"),
    ("EqTotalOrder", ops.EqTotalOrder, [Shape.array(E.S32, (2,))] * 2, "floating"),
    ("ConvertElementType", lambda a: ops.ConvertElementType(a, "not-a-type"), [F2x3], ""),
    ("BitcastConvertType", lambda a: ops.BitcastConvertType(a, E.F64), [F2x3],
     "bitcast_convert_c1"),
    ("ReducePrecision", lambda a: ops.ReducePrecision(a, 0, 3), [F2x3],
     "reduce_precision_c2"),
    ("Select", lambda a, b: ops.Select(a, b, b), [Shape.array(E.S32, (2, 3)), F2x3],
     "select_c1"),
    ("Clamp", lambda a, b: ops.Clamp(a, b, a), [Shape.array(E.F32, (4,)), F2x3], "clamp_c1"),
])
def test_errors_name_the_builder_function(name: str, build: Callable[..., Any],
                                          shapes: list[Shape], fragment: str) -> None:
    msg = build_error(build, *shapes)
    assert msg.startswith(f"{name}: "), msg
    assert fragment in msg


def test_first_error_wins_and_propagates() -> None:
    """An op on a failed operand reports nothing new: the first error is the one raised."""
    b = XlaBuilder("t")
    x = ops.Parameter(b, 0, Shape.array(E.S32, (2,)))
    ops.Neg(ops.Exp(ops.Sqrt(x)))
    with pytest.raises(BuilderError, match="^Sqrt: "):
        b.build()
