"""reduce, reduce_window, select_and_scatter, sort and batch norm against XLA (through jax).

Tolerances: integer, bool, min/max and sort results are exact. Float sums and products may
associate differently from XLA's CPU emitter (its order depends on the vector width): they
are compared within the bound of tests/tolerance.py for n terms in any order, 2 (n + 1) eps
times the sum of |terms| (for a product, |product|), with eps of f32/f64, and of bf16/f16
themselves for those (XLA's optimized HLO adds them in the narrow type). Batch norm has no
jax primitive: it is checked against the spec's formulas in float64 and against XLA itself on
StableHLO text compiled by jaxlib (rtol 1e-4 f32, 1e-11 f64).
"""

# The builder lambdas below run at once inside their loop iteration, so B023 does not apply.
# ruff: noqa: B023

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tests.differential.compare import assert_same, assert_within, jax_x64, magnitudes
from tests.tolerance import magnitude_bound, sum_bound
from xlapy.builder import XlaBuilder, XlaComputation, ops
from xlapy.ops.attrs import ComparisonDirection, ComparisonType
from xlapy.ops.elementwise import CompareAttrs
from xlapy.types import Shape, from_dtype

jax = jax_x64()
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

CLIENT = xlapy.Client()

FLOATS = [np.float32, np.float64, ml_dtypes.bfloat16, np.float16]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def _rtol(dtype: Any) -> float:
    d = np.dtype(dtype)
    if d.kind in "biu":
        return 0.0
    return {8: 1e-12, 4: 1e-5}.get(d.itemsize, 2e-2)


def _seed(*parts: Any) -> int:
    """A per-case seed that does not depend on PYTHONHASHSEED."""
    return zlib.crc32(repr([p if isinstance(p, str) else np.dtype(p).name
                            for p in parts]).encode())


def _random(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
    d = np.dtype(dtype)
    if d == np.bool_:
        return rng.random(shape) < 0.5
    if d.kind in "iu":
        info = np.iinfo(d)
        lo, hi = max(int(info.min), -100), min(int(info.max), 100)
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(d)
    return rng.standard_normal(shape).astype(d)


def _scalar(b: XlaBuilder, i: int, dtype: Any) -> Any:
    return b.parameter(i, Shape.scalar(from_dtype(np.dtype(dtype))))


def _binary_computation(opcode: str, dtype: Any) -> XlaComputation:
    b = XlaBuilder(opcode)
    b.add_op(opcode, [_scalar(b, 0, dtype), _scalar(b, 1, dtype)])
    return b.build()


def _run(build: Callable[[XlaBuilder, list[Any]], Any], args: Sequence[np.ndarray]) -> Any:
    b = XlaBuilder("test")
    params = [b.parameter(i, Shape.array(from_dtype(a.dtype), a.shape))
              for i, a in enumerate(args)]
    build(b, params)
    lit = CLIENT.execute_and_transfer(b.build(), list(args))
    return lit.to_value() if hasattr(lit, "to_value") else lit.to_numpy()


def _const(b: XlaBuilder, value: Any, dtype: Any) -> Any:
    return ops.Constant(b, np.asarray(value, dtype=dtype))


# ---- reduce ------------------------------------------------------------------------------------
_REDUCERS = {
    # opcode: (jax binary fn, init for the dtype, dtype kinds allowed)
    "add": (lax.add, lambda d: 0, "iuf"),
    "multiply": (lax.mul, lambda d: 1, "iuf"),
    "maximum": (lax.max, lambda d: (np.iinfo(d).min if np.dtype(d).kind in "iu" else -np.inf),
                "iuf"),
    "minimum": (lax.min, lambda d: (np.iinfo(d).max if np.dtype(d).kind in "iu" else np.inf),
                "iuf"),
    "and": (lax.bitwise_and, lambda d: True if np.dtype(d) == np.bool_ else -1, "biu"),
    "or": (lax.bitwise_or, lambda d: 0, "biu"),
}


def _reduce_cases() -> list[tuple[str, Any]]:
    cases = []
    for opcode, (_, _, kinds) in _REDUCERS.items():
        for dtype in FLOATS + INTS + [np.bool_]:
            if np.dtype(dtype).kind in kinds:
                cases.append((opcode, dtype))
    return cases


@pytest.mark.parametrize("opcode,dtype", _reduce_cases(),
                         ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
def test_reduce_matches_xla(opcode: str, dtype: Any) -> None:
    rng = np.random.default_rng(_seed(opcode, dtype))
    jfn, init_of, _ = _REDUCERS[opcode]
    comp = _binary_computation(opcode, dtype)
    for trial in range(3):
        rank = int(rng.integers(1, 4))
        shape = tuple(int(s) for s in rng.integers(0 if trial == 2 else 1, 6, size=rank))
        if opcode == "add" and trial == 1:
            shape = shape[:-1] + (int(rng.integers(20, 70)),)  # long: exercises the tree
        dims = tuple(sorted(int(d) for d in rng.choice(rank, int(rng.integers(1, rank + 1)),
                                                       replace=False)))
        x = _random(rng, shape, dtype)
        if opcode == "multiply" and np.dtype(dtype).kind in "f":
            x = (1 + 0.1 * x.astype(np.float32)).astype(dtype)
        init = np.asarray(init_of(dtype)).astype(dtype)
        ours = _run(lambda b, p: ops.Reduce(b, [p[0]], [_const(b, init, dtype)], comp, dims),
                    [x])
        theirs = jax.jit(lambda a: lax.reduce(a, init, jfn, dims))(x)
        what = f"reduce {opcode} {shape} dims={dims}"
        if np.dtype(dtype).kind == "f" and opcode in ("add", "multiply"):
            acc = dtype if np.dtype(dtype).itemsize == 2 else None  # XLA: the narrow type
            if opcode == "add":
                bound = sum_bound(x, dims, dtype, init, acc_dtype=acc)
            else:  # n roundings of the product, whatever the order: gamma_n |product|
                n = int(np.prod([shape[d] for d in dims]))
                mag = np.abs(np.prod(x.astype(np.float64), axis=dims))
                bound = magnitude_bound(mag, n + 1, dtype, acc_dtype=acc)
            assert_within(ours, theirs, bound, what)
        else:
            assert_same(ours, np.asarray(theirs), what=what)


def _argmax_computation(vtype: Any, itype: Any) -> XlaComputation:
    """(max, argmax) reducer preferring the smaller index on ties, as jax's argmax does."""
    b = XlaBuilder("argmax")
    av, ai, bv, bi = (_scalar(b, 0, vtype), _scalar(b, 1, itype), _scalar(b, 2, vtype),
                      _scalar(b, 3, itype))
    gt = b.add_op("compare", [av, bv], CompareAttrs(ComparisonDirection.GT))
    eq = b.add_op("compare", [av, bv], CompareAttrs(ComparisonDirection.EQ))
    lt_i = b.add_op("compare", [ai, bi], CompareAttrs(ComparisonDirection.LT))
    pick_a = ops.Or(gt, ops.And(eq, lt_i))
    ops.Tuple(b, [ops.Select(pick_a, av, bv), ops.Select(pick_a, ai, bi)])
    return b.build()


@pytest.mark.parametrize("vtype", [np.float32, np.int32, np.float64])
def test_variadic_argmax_reduce_matches_xla(vtype: Any) -> None:
    rng = np.random.default_rng(7)
    comp = _argmax_computation(vtype, np.int32)

    def jreduce(x: Any, i: Any) -> Any:
        def f(a: Any, b: Any) -> Any:
            pick_a = (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] < b[1]))
            return (lax.select(pick_a, a[0], b[0]), lax.select(pick_a, a[1], b[1]))
        init = (np.asarray(-np.inf if np.dtype(vtype).kind == "f" else -2**31, vtype),
                np.int32(0))
        return lax.reduce((x, i), init, f, (1,))

    for shape in [(4, 9), (3, 40), (2, 1)]:
        x = rng.integers(-5, 5, size=shape).astype(vtype)  # ties are common
        idx = np.broadcast_to(np.arange(shape[1], dtype=np.int32), shape).copy()
        init_v = np.asarray(-np.inf if np.dtype(vtype).kind == "f" else -2**31, vtype)
        ours = _run(lambda b, p: ops.Reduce(b, [p[0], p[1]], [_const(b, init_v, vtype),
                                                               _const(b, 0, np.int32)],
                                            comp, [1]), [x, idx])
        theirs = jax.jit(jreduce)(x, idx)
        assert isinstance(ours, tuple) and len(ours) == 2
        assert_same(ours[0], np.asarray(theirs[0]), what="max")
        assert_same(ours[1], np.asarray(theirs[1]), what="argmax")
        assert_same(ours[1], np.argmax(x, axis=1).astype(np.int32), what="argmax vs numpy")


# ---- reduce_window -----------------------------------------------------------------------------
@pytest.mark.parametrize("opcode,dtype", [
    ("add", np.float32), ("add", np.int32), ("maximum", np.float32), ("maximum", np.int8),
    ("minimum", ml_dtypes.bfloat16), ("add", np.float64), ("multiply", np.int64),
    ("or", np.bool_), ("maximum", np.uint16),
], ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
def test_reduce_window_matches_xla(opcode: str, dtype: Any) -> None:
    rng = np.random.default_rng(_seed("rw", opcode, dtype))
    jfn, init_of, _ = _REDUCERS[opcode]
    comp = _binary_computation(opcode, dtype)
    for _ in range(6):
        rank = int(rng.integers(1, 4))
        shape = tuple(int(s) for s in rng.integers(1, 7, size=rank))
        window = tuple(int(w) for w in rng.integers(1, 4, size=rank))
        strides = tuple(int(s) for s in rng.integers(1, 3, size=rank))
        base = tuple(int(s) for s in rng.integers(1, 3, size=rank))
        wdil = tuple(int(s) for s in rng.integers(1, 3, size=rank))
        pad = tuple((int(lo), int(hi)) for lo, hi in rng.integers(0, 3, size=(rank, 2)))
        x = _random(rng, shape, dtype)
        init = np.asarray(init_of(dtype)).astype(dtype)
        ours = _run(lambda b, p: ops.ReduceWindowWithGeneralPadding(
            p[0], _const(b, init, dtype), comp, window, strides, base, wdil, pad), [x])
        theirs = jax.jit(lambda a: lax.reduce_window(a, init, jfn, window, strides, pad,
                                                     base, wdil))(x)
        what = (f"reduce_window {opcode} {shape} w={window} s={strides} b={base} d={wdil} "
                f"p={pad}")
        if np.dtype(dtype).kind == "f" and opcode == "add":  # window sums, in any order
            [mag] = magnitudes(lambda a: lax.reduce_window(
                a, np.zeros((), a.dtype), lax.add, window, strides, pad, base, wdil), x)
            assert_within(ours, theirs, magnitude_bound(mag, int(np.prod(window)) + 1, dtype),
                          what)
        else:
            assert_same(ours, np.asarray(theirs), what=what)


def test_reduce_window_variadic_and_same_padding_match_xla() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    y = rng.integers(-9, 9, size=(5, 7)).astype(np.int32)
    b = XlaBuilder("sum_and_max")
    a0, a1, b0, b1 = (_scalar(b, 0, np.float32), _scalar(b, 1, np.int32),
                      _scalar(b, 2, np.float32), _scalar(b, 3, np.int32))
    ops.Tuple(b, [b.add_op("add", [a0, b0]), b.add_op("maximum", [a1, b1])])
    comp = b.build()
    ours = _run(lambda bb, p: ops.ReduceWindow(
        [p[0], p[1]], [_const(bb, 0, np.float32), _const(bb, -100, np.int32)], comp,
        (2, 3), (1, 2), ops.Padding.SAME), [x, y])
    theirs = jax.jit(lambda u, v: lax.reduce_window(
        (u, v), (np.float32(0), np.int32(-100)),
        lambda p, q: (p[0] + q[0], lax.max(p[1], q[1])), (2, 3), (1, 2), "SAME"))(x, y)
    [mag] = magnitudes(lambda u: lax.reduce_window(u, 0.0, lax.add, (2, 3), (1, 2), "SAME"), x)
    assert_within(ours[0], theirs[0], magnitude_bound(mag, 2 * 3 + 1, np.float32), "sum")
    assert_same(ours[1], np.asarray(theirs[1]), what="max")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16, np.complex64],
                         ids=lambda v: np.dtype(v).name)
def test_cumulative_windows_are_xlas_bits(dtype: Any) -> None:
    """The cpu backend folds cumulative windows (cumsum / cumprod, forward and reversed) in
    XLA CPU's order (backends/cpu/cumulative_emit.py): jax's bits, not within a bound."""
    rng = np.random.default_rng(_seed("cumulative", dtype))
    fns = {"cumsum": lambda a, ax: jnp.cumsum(a, ax),
           "cumsum_rev": lambda a, ax: lax.cumsum(a, ax, reverse=True),
           "cumprod": lambda a, ax: jnp.cumprod(a, ax),
           "cumprod_rev": lambda a, ax: lax.cumprod(a, ax, reverse=True)}
    for shape, axis in [((3, 1000), 1), ((300, 7), 0), ((2, 40, 3), 1), ((4097,), 0)]:
        for name, fn in fns.items():
            if np.dtype(dtype).kind == "c" and name.startswith("cumprod"):
                continue  # (a complex product stays on the interpreter)
            x = rng.standard_normal(shape)
            if np.dtype(dtype).kind == "c":
                x = x + 1j * rng.standard_normal(shape)
            x = (1 + 1e-3 * x if name.startswith("cumprod") else x).astype(dtype)
            jf = jax.jit(lambda a: fn(a, axis))
            ours = xlapy.compile(jf.lower(x).as_text(), backend="cpu")(x)
            assert_same(ours, np.asarray(jf(x)), what=f"{name} {shape} axis {axis}")


def test_cumulative_windows_with_denormals_are_xlas_bits() -> None:
    """Denormal inputs and -0 (XLA CPU flushes them): the walk keeps flushed values and
    skips their re-flush (cumulative_emit._flushed), the bits still jax's."""
    rng = np.random.default_rng(_seed("cumulative denormals"))
    x = rng.standard_normal((4, 300)).astype(np.float32) * np.float32(1e-38)
    x[:, ::7] = np.float32(3e-39)
    x[0, 5] = -0.0
    p = (1 + 0.01 * rng.standard_normal((4, 300))).astype(np.float32)
    p[:, ::9] = np.float32(3e-39)
    for name, fn, v in [("cumsum", lambda a: jnp.cumsum(a, 1), x),
                        ("cumsum_rev", lambda a: lax.cumsum(a, 1, reverse=True), x),
                        ("cumprod", lambda a: jnp.cumprod(a, 1), p),
                        ("cumprod_rev", lambda a: lax.cumprod(a, 1, reverse=True), p)]:
        jf = jax.jit(fn)
        ours = np.asarray(xlapy.compile(jf.lower(v).as_text(), backend="cpu")(v))
        theirs = np.asarray(jf(v))
        assert (ours.view(np.uint32) == theirs.view(np.uint32)).all(), name


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16],
                         ids=lambda v: np.dtype(v).name)
def test_cumulative_max_min_are_xlas_bits(dtype: Any) -> None:
    """cummax / cummin along rows (whole blocks folded as vectors, several at once:
    cumulative_emit._forward_lanes / _lanes) and along columns, forward and reversed, over
    ties of -0 and +0, NaNs, infinities and denormals (flushed once per block): jax's bits."""
    rng = np.random.default_rng(_seed("cumulative max", dtype))
    fns = {"cummax": lambda a, ax: lax.cummax(a, ax),
           "cummin": lambda a, ax: lax.cummin(a, ax),
           "cummax_rev": lambda a, ax: lax.cummax(a, ax, reverse=True),
           "cummin_rev": lambda a, ax: lax.cummin(a, ax, reverse=True)}
    for shape, axis in [((3, 1000), 1), ((2, 4097), 1), ((2, 4096), 1), ((4, 256), 1),
                        ((5, 64), 1), ((40, 33), 0), ((300,), 0), ((2, 16), 1)]:
        x = rng.standard_normal(shape)
        x[rng.random(shape) < 0.2] = 0.0
        x[rng.random(shape) < 0.1] = -0.0
        x[rng.random(shape) < 0.02] = np.inf
        x[rng.random(shape) < 0.02] = -np.inf
        x[rng.random(shape) < 0.05] = 3e-39 if dtype != np.float64 else 3e-309
        x[rng.random(shape) < 0.005] = np.nan
        x = x.astype(dtype)
        for name, fn in fns.items():
            jf = jax.jit(lambda a: fn(a, axis))
            ours = np.asarray(xlapy.compile(jf.lower(x).as_text(), backend="cpu")(x))
            theirs = np.asarray(jf(x))
            bits = f"u{np.dtype(dtype).itemsize}"
            same = (ours.view(bits) == theirs.view(bits)) | (np.isnan(ours) & np.isnan(theirs))
            assert same.all(), (name, shape, axis, ours[~same][:4], theirs[~same][:4])


# ---- select_and_scatter ------------------------------------------------------------------------
def _ge_computation(dtype: Any) -> XlaComputation:
    b = XlaBuilder("ge")
    b.add_op("compare", [_scalar(b, 0, dtype), _scalar(b, 1, dtype)],
             CompareAttrs(ComparisonDirection.GE))
    return b.build()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_select_and_scatter_matches_max_pool_gradient(dtype: Any) -> None:
    """jax's max-pool VJP is XLA select_and_scatter(GE select, add scatter)."""
    rng = np.random.default_rng(11)
    select, scatter = _ge_computation(dtype), _binary_computation("add", dtype)
    for _ in range(5):
        shape = tuple(int(s) for s in rng.integers(2, 8, size=2))
        window = tuple(int(w) for w in rng.integers(1, 4, size=2))
        strides = tuple(int(s) for s in rng.integers(1, 3, size=2))
        pad = tuple((int(lo), int(hi)) for lo, hi in rng.integers(0, 2, size=(2, 2)))
        # Few distinct values: ties pick the first (lowest-index) maximum, as XLA does.
        x = rng.integers(-3, 3, size=shape).astype(dtype)
        out_shape = jax.eval_shape(lambda a: lax.reduce_window(
            a, np.asarray(-np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min,
                          dtype), lax.max, window, strides, pad), x).shape
        src = rng.integers(-5, 5, size=out_shape).astype(dtype)
        ours = _run(lambda b, p: ops.SelectAndScatterWithGeneralPadding(
            p[0], select, window, strides, pad, p[1], _const(b, 0, dtype), scatter), [x, src])
        from jax._src.lax.windowed_reductions import _select_and_scatter_add

        theirs = jax.jit(lambda s, a: _select_and_scatter_add(
            s, a, lax.ge_p, window, strides, pad))(src, x)
        assert_same(ours, np.asarray(theirs), what=f"select_and_scatter {shape} w={window} "
                    f"s={strides} p={pad}")


def test_select_and_scatter_grad_of_max_pool() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 8)).astype(np.float32)
    window, strides = (3, 2), (2, 2)
    pads = ops.MakePadding(x.shape, window, strides, ops.Padding.SAME)

    def pool(a: Any) -> Any:
        return lax.reduce_window(a, -jnp.inf, lax.max, window, strides, "SAME")

    g = rng.standard_normal(jax.eval_shape(pool, x).shape).astype(np.float32)
    theirs = jax.jit(lambda a: jax.vjp(pool, a)[1](g)[0])(x)
    ours = _run(lambda b, p: ops.SelectAndScatter(
        p[0], _ge_computation(np.float32), window, strides, ops.Padding.SAME, p[1],
        _const(b, 0, np.float32), _binary_computation("add", np.float32)), [x, g])
    # Each element adds the g of the windows that selected it (at most the window size), in
    # any order: the same scatter of |g| (the selection, from x, unchanged) bounds it.
    mag = np.asarray(jax.jit(lambda gg: jax.vjp(pool, x.astype(np.float64))[1](gg)[0])(
        np.abs(g).astype(np.float64)))
    assert_within(ours, theirs, magnitude_bound(mag, int(np.prod(window)) + 1, np.float32),
                  f"pads {pads}")


# ---- sort ---------------------------------------------------------------------------------------
def _jax_style_comparator(dtypes: Sequence[Any], num_keys: int) -> XlaComputation:
    """Lexicographic LT over the first `num_keys` operands, TOTALORDER for floats (jax's)."""
    b = XlaBuilder("lex_lt")
    params = []
    for i, d in enumerate(dtypes):
        params.append((_scalar(b, 2 * i, d), _scalar(b, 2 * i + 1, d)))
    result = None
    for k in reversed(range(num_keys)):
        lhs, rhs = params[k]
        ct = ComparisonType.TOTALORDER if np.dtype(dtypes[k]).kind == "f" else None
        lt = b.add_op("compare", [lhs, rhs], CompareAttrs(ComparisonDirection.LT, ct))
        if result is None:
            result = lt
        else:
            eq = b.add_op("compare", [lhs, rhs], CompareAttrs(ComparisonDirection.EQ, ct))
            result = ops.Or(lt, ops.And(eq, result))
    return b.build()


@pytest.mark.parametrize("dtype", FLOATS + INTS + [np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_sort_single_operand_default_comparator(dtype: Any) -> None:
    rng = np.random.default_rng(_seed("sort", dtype))
    x = _random(rng, (4, 9), dtype)
    for dim in (0, 1, -1):
        ours = _run(lambda b, p: ops.Sort(b, [p[0]], dimension=dim, is_stable=True), [x])
        theirs = jax.jit(lambda a: lax.sort(a, dimension=dim))(x)
        assert_same(ours, np.asarray(theirs), what=f"sort dim={dim}")


@pytest.mark.parametrize("n", [1, 2, 17, 100])
def test_sort_with_nans_and_signed_zeros(n: int) -> None:
    rng = np.random.default_rng(n)
    pool = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1.5, -2.0], np.float32)
    x = rng.choice(pool, size=(3, n)).astype(np.float32)
    for comp in (_jax_style_comparator([np.float32], 1),):
        ours = _run(lambda b, p: ops.Sort(b, [p[0]], comp, 1, True), [x])
        # jax canonicalizes NaN and -0.0 in its comparator; ours uses plain TOTALORDER, so
        # compare against numpy's total order of the raw bits instead.
        from xlapy.ops.elementwise import total_order_key

        want = np.take_along_axis(x, np.argsort(total_order_key(x), axis=1, kind="stable"),
                                  axis=1)
        assert_same(ours.view(np.int32), want.view(np.int32), what="totalorder bits")
    theirs = jax.jit(lambda a: lax.sort(a, dimension=1))(x)
    ours = _run(lambda b, p: ops.Sort(b, [p[0]], _jax_comparator_from_lowering(), 1, True), [x])
    assert_same(ours, np.asarray(theirs), what="jax comparator")


def _jax_comparator_from_lowering() -> XlaComputation:
    """jax's single-key f32 comparator: -0.0 -> 0.0, NaN -> canonical NaN, then TOTALORDER LT."""
    b = XlaBuilder("jax_lt")
    x, y = _scalar(b, 0, np.float32), _scalar(b, 1, np.float32)

    def canon(v: Any) -> Any:
        zero = _const(b, 0.0, np.float32)
        is_zero = b.add_op("compare", [v, zero], CompareAttrs(ComparisonDirection.EQ,
                                                             ComparisonType.FLOAT))
        v = ops.Select(is_zero, _const(b, 0.0, np.float32), v)
        is_nan = b.add_op("compare", [v, v], CompareAttrs(ComparisonDirection.NE,
                                                          ComparisonType.FLOAT))
        return ops.Select(is_nan, _const(b, np.float32(np.nan), np.float32), v)

    cx, cy = canon(x), canon(y)
    b.add_op("compare", [cx, cy], CompareAttrs(ComparisonDirection.LT,
                                               ComparisonType.TOTALORDER))
    return b.build()


@pytest.mark.parametrize("num_keys", [1, 2, 3])
def test_sort_multi_operand_matches_xla(num_keys: int) -> None:
    rng = np.random.default_rng(num_keys)
    dtypes = [np.int32, np.float32, np.uint8]
    for shape, dim in [((5, 13), 1), ((40, 3), 0), ((2, 3, 70), 2), ((1,), 0)]:
        xs = [rng.integers(0, 3, size=shape).astype(d) for d in dtypes]  # many ties
        comp = _jax_style_comparator(dtypes, num_keys)
        ours = _run(lambda b, p: ops.Sort(b, p, comp, dim, True), xs)
        theirs = jax.jit(lambda *a: lax.sort(a, dimension=dim, is_stable=True,
                                             num_keys=num_keys))(*xs)
        for k, (o, t) in enumerate(zip(ours, theirs)):
            assert_same(o, np.asarray(t), what=f"operand {k} shape {shape} dim {dim}")


def test_sort_descending_gt_fast_path_is_stable() -> None:
    rng = np.random.default_rng(2)
    keys = rng.integers(0, 4, size=(3, 50)).astype(np.int64)
    vals = rng.standard_normal((3, 50))
    b = XlaBuilder("gt")
    p = [_scalar(b, i, d) for i, d in enumerate([np.int64, np.int64, np.float64,
                                                  np.float64])]
    b.add_op("compare", [p[0], p[1]], CompareAttrs(ComparisonDirection.GT))
    comp = b.build()
    ours = _run(lambda bb, q: ops.Sort(bb, q, comp, 1, True), [keys, vals])
    theirs = jax.jit(lambda k, v: lax.sort((-k, v), dimension=1, is_stable=True,
                                           num_keys=1))(keys, vals)
    assert_same(ours[0], -np.asarray(theirs[0]), what="keys")
    assert_same(ours[1], np.asarray(theirs[1]), what="values")


# ---- batch norm ---------------------------------------------------------------------------------
def _bn_reference(x: np.ndarray, fi: int, eps: float) -> tuple[np.ndarray, ...]:
    axes = tuple(d for d in range(x.ndim) if d != fi)
    shape = [1] * x.ndim
    shape[fi] = x.shape[fi]
    xf = x.astype(np.float64)
    mean = xf.mean(axis=axes)
    var = ((xf - mean.reshape(shape)) ** 2).mean(axis=axes)
    return xf, mean, var, np.array(shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16],
                         ids=lambda d: np.dtype(d).name)
def test_batch_norm_ops_match_spec_formulas(dtype: Any) -> None:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 4, 5)).astype(dtype)
    for fi in range(3):
        c = x.shape[fi]
        scale = (rng.random(c) + 0.5).astype(dtype)
        offset = rng.standard_normal(c).astype(dtype)
        dy = rng.standard_normal(x.shape).astype(dtype)
        eps = 1e-3
        xf, mean, var, shape = _bn_reference(x, fi, eps)
        r = tuple(shape)
        g, o = scale.astype(np.float64).reshape(r), offset.astype(np.float64).reshape(r)
        norm = (xf - mean.reshape(r)) / np.sqrt(var.reshape(r) + eps)
        tol = max(_rtol(dtype), 1e-6) * 4
        out = _run(lambda b, p: ops.BatchNormTraining(p[0], p[1], p[2], eps, fi),
                   [x, scale, offset])
        for got, want, what in zip(out, (g * norm + o, mean, var), ("output", "mean", "var")):
            assert_same(got, want.astype(dtype), rtol=tol, atol=tol, what=what)
        inf = _run(lambda b, p: ops.BatchNormInference(p[0], p[1], p[2], p[3], p[4], eps, fi),
                   [x, scale, offset, mean.astype(dtype), var.astype(dtype)])
        assert_same(inf, (g * norm + o).astype(dtype), rtol=tol, atol=tol, what="inference")
        grads = _run(lambda b, p: ops.BatchNormGrad(p[0], p[1], p[2], p[3], p[4], eps, fi),
                     [x, scale, mean.astype(dtype), var.astype(dtype), dy])
        # Seed 000's formulas for the gradients.
        dyf = dy.astype(np.float64)
        axes = tuple(d for d in range(3) if d != fi)
        n = x.size // c
        cl = (dyf * (xf - mean.reshape(r)) / (var.reshape(r) + eps)).sum(axes) / n
        gx = g / np.sqrt(var.reshape(r) + eps) * (
            dyf - dyf.mean(axes).reshape(r) - cl.reshape(r) * (xf - mean.reshape(r)))
        want = (gx, (dyf * norm).sum(axes), dyf.sum(axes))
        gtol = tol * 10 if np.dtype(dtype).itemsize == 2 else tol
        for got, w, what in zip(grads, want, ("grad_operand", "grad_scale", "grad_offset")):
            assert_same(got, w.astype(dtype), rtol=gtol, atol=gtol, what=what)


# ---- batch norm against XLA itself (StableHLO text compiled by jaxlib) ---------------------------
def _xla_run_stablehlo(text: str, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Compile a StableHLO module with jaxlib's CPU client and run it (jax has no bn primitive)."""
    from jax._src import compiler
    from jax._src.lib import xla_client as xc

    client = jax.devices("cpu")[0].client
    opts = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    exe = client.compile_and_load(text, xc.DeviceList(tuple(jax.devices("cpu")[:1])), opts)
    res = exe.execute_sharded([jax.device_put(a) for a in args])
    return [np.asarray(o[0]) for o in res.disassemble_into_single_device_arrays()]


def _tensor(a: np.ndarray) -> str:
    return Shape.array(from_dtype(a.dtype), a.shape).to_shlo()


_BN_OPERANDS = {"batch_norm_training": 3, "batch_norm_inference": 5, "batch_norm_grad": 5}


@pytest.mark.parametrize("name", list(_BN_OPERANDS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_batch_norm_matches_xla(name: str, dtype: Any) -> None:
    rng = np.random.default_rng(_seed(name, dtype))
    x = (rng.standard_normal((4, 3, 5)) + 2).astype(dtype)
    fi, eps = 1, 1e-3
    c = x.shape[fi]
    vec = [(rng.random(c) + 0.5).astype(dtype) for _ in range(4)]
    args = [x] + vec[:2] if name == "batch_norm_training" else \
        [x] + vec if name == "batch_norm_inference" else \
        [x] + vec[:3] + [rng.standard_normal(x.shape).astype(dtype)]
    results = [x] if name == "batch_norm_inference" else [x, vec[0], vec[0]]
    params = ", ".join(f"%a{i}: {_tensor(a)}" for i, a in enumerate(args))
    outs = ", ".join(_tensor(a) for a in results)
    names = ", ".join(f"%r{i}" for i in range(len(results)))
    text = (f"module @m {{ func.func public @main({params}) -> ({outs}) {{\n"
            f"  {names} = \"stablehlo.{name}\"({', '.join(f'%a{i}' for i in range(len(args)))})"
            f" {{epsilon = {eps:e} : f32, feature_index = {fi} : i64}} : "
            f"({', '.join(_tensor(a) for a in args)}) -> ({outs})\n"
            f"  return {names} : {outs} }} }}")
    theirs = _xla_run_stablehlo(text, args)
    api = {"batch_norm_training": ops.BatchNormTraining,
           "batch_norm_inference": ops.BatchNormInference,
           "batch_norm_grad": ops.BatchNormGrad}[name]
    ours = _run(lambda b, p: api(*p, eps, fi), args)
    ours = [ours] if name == "batch_norm_inference" else list(ours)
    tol = _rtol(dtype) * 10
    for k, (o, t) in enumerate(zip(ours, theirs)):
        assert_same(o, t, rtol=tol, atol=tol, what=f"{name} result {k}")
