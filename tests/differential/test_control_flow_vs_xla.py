"""Control flow vs XLA (through jax): lax.while_loop, lax.fori_loop, lax.cond, lax.switch.

All exact: the loop bodies and branches use add/subtract/multiply/compare/select/convert, which
XLA's CPU backend computes exactly like the interpreter (no tolerance anywhere).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tests.differential.compare import assert_same, jax_x64
from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp
from xlapy.types import ElementType, Shape, from_dtype

jax = jax_x64()
lax = jax.lax
jnp = jax.numpy

DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
          np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
S32 = Shape.scalar(ElementType.S32)
PRED = Shape.scalar(ElementType.PRED)


def rand(rng: np.random.Generator, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return rng.integers(0 if dt.kind == "u" else -20, 20, shape).astype(dt)
    return (rng.standard_normal(shape) * 4).astype(np.float32).astype(dt)


def const(b: XlaBuilder, value: Any, dtype: Any) -> XlaOp:
    return ops.Constant(b, np.asarray(value, dtype=dtype))


def ours(comp: XlaComputation, *args: Any) -> Any:
    return xlapy.Client().execute_and_transfer(comp, list(args)).to_value()


def sub(name: str, params: list[Shape], body: Callable[..., XlaOp]) -> XlaComputation:
    b = XlaBuilder(name)
    ps = [b.parameter(i, s) for i, s in enumerate(params)]
    return b.build(body(b, *ps))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_while_loop(dtype: Any) -> None:
    """state (i, x, d): while i < n: i += 1; x = x * c + d * convert(i); d = d - x.

    Floats use `x = x + c + d - convert(i)` instead: XLA's CPU backend contracts a multiply
    feeding an add into one fused multiply-add, which no per-op reference reproduces.
    """
    rng = np.random.default_rng(abs(hash(np.dtype(dtype).name)) % 2**32)
    size = int(rng.integers(1, 6))
    vec = Shape.array(from_dtype(np.dtype(dtype)), (size,))
    state = Shape.tuple([S32, vec, vec, S32])
    c = rand(rng, dtype, ())
    is_float = np.dtype(dtype).kind == "f" or dtype is ml_dtypes.bfloat16

    def cond_b(b: XlaBuilder, s: XlaOp) -> XlaOp:
        return ops.Lt(ops.GetTupleElement(s, 0), ops.GetTupleElement(s, 3))

    def body_b(b: XlaBuilder, s: XlaOp) -> XlaOp:
        i, x, d, n = (ops.GetTupleElement(s, k) for k in range(4))
        i1 = ops.Add(i, ops.ConstantR0(b, 1))
        fi = ops.ConvertElementType(i1, from_dtype(np.dtype(dtype)))
        if is_float:
            x1 = ops.Sub(ops.Add(ops.Add(x, const(b, c, dtype)), d), fi)
        else:
            x1 = ops.Add(ops.Mul(x, const(b, c, dtype)), ops.Mul(d, fi))
        return ops.Tuple(b, [i1, x1, ops.Sub(d, x1), n])

    b = XlaBuilder("loop")
    n = b.parameter(0, S32)
    x = b.parameter(1, vec)
    d = b.parameter(2, vec)
    w = ops.While(sub("cond", [state], cond_b), sub("body", [state], body_b),
                  ops.Tuple(b, [ops.ConstantR0(b, 0), x, d, n]))
    comp = b.build(ops.Tuple(b, [ops.GetTupleElement(w, k) for k in range(3)]))

    def jbody(s: Any) -> Any:
        i, xv, dv, nv = s
        i1 = i + 1
        if is_float:
            x1 = xv + jnp.asarray(c, dtype) + dv - i1.astype(dtype)
        else:
            x1 = xv * jnp.asarray(c, dtype) + dv * i1.astype(dtype)
        return (i1, x1, dv - x1, nv)

    fn = jax.jit(lambda n, x, d: lax.while_loop(lambda s: s[0] < s[3], jbody,
                                                 (jnp.int32(0), x, d, n))[:3])
    for _ in range(4):
        nv = np.int32(rng.integers(-1, 7))
        xv, dv = rand(rng, dtype, (size,)), rand(rng, dtype, (size,))
        got = ours(comp, nv, xv, dv)
        want = fn(nv, xv, dv)
        for k, (g, w_) in enumerate(zip(got, want)):
            assert_same(g, np.asarray(w_), what=f"{np.dtype(dtype).name} n={nv} result {k}")


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64, np.float32, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_fori_loop(dtype: Any) -> None:
    """fori_loop(lo, hi, lambda i, x: x * 2 - convert(i), x0) with traced bounds."""
    rng = np.random.default_rng(7)
    vec = Shape.array(from_dtype(np.dtype(dtype)), (3,))
    state = Shape.tuple([S32, S32, vec])

    def body_b(b: XlaBuilder, s: XlaOp) -> XlaOp:
        i, hi, x = (ops.GetTupleElement(s, k) for k in range(3))
        fi = ops.ConvertElementType(i, from_dtype(np.dtype(dtype)))
        x1 = ops.Sub(ops.Mul(x, const(b, 2, dtype)), fi)
        return ops.Tuple(b, [ops.Add(i, ops.ConstantR0(b, 1)), hi, x1])

    b = XlaBuilder("fori")
    lo, hi, x = b.parameter(0, S32), b.parameter(1, S32), b.parameter(2, vec)
    cond = sub("cond", [state], lambda b, s: ops.Lt(ops.GetTupleElement(s, 0),
                                                     ops.GetTupleElement(s, 1)))
    w = ops.While(cond, sub("body", [state], body_b), ops.Tuple(b, [lo, hi, x]))
    comp = b.build(ops.GetTupleElement(w, 2))
    fn = jax.jit(lambda lo, hi, x: lax.fori_loop(
        lo, hi, lambda i, v: v * jnp.asarray(2, dtype) - i.astype(dtype), x))
    for _ in range(5):
        lov = np.int32(rng.integers(-3, 4))
        hiv = np.int32(rng.integers(-3, 9))
        xv = rand(rng, dtype, (3,))
        assert_same(ours(comp, lov, hiv, xv), np.asarray(fn(lov, hiv, xv)),
                    what=f"{np.dtype(dtype).name} [{lov}, {hiv})")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_cond(dtype: Any) -> None:
    """lax.cond(p, t, f, x, y) with branches that take the operand tuple (XLA Conditional)."""
    rng = np.random.default_rng(11)
    vec = Shape.array(from_dtype(np.dtype(dtype)), (4,))
    pair = Shape.tuple([vec, vec])
    t_comp = sub("t", [pair], lambda b, p: ops.Tuple(b, [
        ops.Add(ops.GetTupleElement(p, 0), ops.GetTupleElement(p, 1)),
        ops.Gt(ops.GetTupleElement(p, 0), ops.GetTupleElement(p, 1))]))
    f_comp = sub("f", [pair], lambda b, p: ops.Tuple(b, [
        ops.Mul(ops.GetTupleElement(p, 0), ops.GetTupleElement(p, 0)),
        ops.Ne(ops.GetTupleElement(p, 0), ops.GetTupleElement(p, 1))]))
    b = XlaBuilder("cond")
    p = b.parameter(0, PRED)
    xy = ops.Tuple(b, [b.parameter(1, vec), b.parameter(2, vec)])
    ops.Conditional(p, xy, t_comp, xy, f_comp)
    comp = b.build()
    fn = jax.jit(lambda p, x, y: lax.cond(p, lambda x, y: (x + y, x > y),
                                          lambda x, y: (x * x, x != y), x, y))
    for pv in (True, False):
        xv, yv = rand(rng, dtype, (4,)), rand(rng, dtype, (4,))
        got, want = ours(comp, np.bool_(pv), xv, yv), fn(pv, xv, yv)
        for k in range(2):
            assert_same(got[k], np.asarray(want[k]), what=f"{np.dtype(dtype).name} p={pv} {k}")


@pytest.mark.parametrize("dtype", [np.int16, np.uint32, np.float16, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_switch(dtype: Any) -> None:
    """lax.switch with N random branches; jax clamps the index, so only indices >= 0 are
    compared (index > N-1 runs the last branch in both)."""
    rng = np.random.default_rng(13)
    nbr = int(rng.integers(2, 5))
    vec = Shape.array(from_dtype(np.dtype(dtype)), (3,))
    consts = [rand(rng, dtype, (3,)) for _ in range(nbr)]
    kinds = [int(rng.integers(0, 3)) for _ in range(nbr)]

    def make(k: int) -> XlaComputation:
        def body(b: XlaBuilder, x: XlaOp) -> XlaOp:
            c = const(b, consts[k], dtype)
            return [ops.Add, ops.Sub, ops.Mul][kinds[k]](x, c)
        return sub(f"br{k}", [vec], body)

    b = XlaBuilder("switch")
    i, x = b.parameter(0, S32), b.parameter(1, vec)
    ops.Conditional(i, [make(k) for k in range(nbr)], [x] * nbr)
    comp = b.build()

    def jbranch(k: int) -> Callable[[Any], Any]:
        c = jnp.asarray(consts[k], dtype)
        return [lambda v: v + c, lambda v: v - c, lambda v: v * c][kinds[k]]

    fn = jax.jit(lambda i, x: lax.switch(i, [jbranch(k) for k in range(nbr)], x))
    for iv in list(range(nbr + 2)) + [2**31 - 1]:
        xv = rand(rng, dtype, (3,))
        assert_same(ours(comp, np.int32(iv), xv), np.asarray(fn(np.int32(iv), xv)),
                    what=f"{np.dtype(dtype).name} index {iv} of {nbr}")


def test_nested_while_in_cond() -> None:
    """A while loop inside a cond branch: sum of 1..n when p, else n * n."""
    cond = sub("c", [Shape.tuple([S32, S32])],
               lambda b, s: ops.Gt(ops.GetTupleElement(s, 0), ops.ConstantR0(b, 0)))
    body = sub("d", [Shape.tuple([S32, S32])], lambda b, s: ops.Tuple(b, [
        ops.Sub(ops.GetTupleElement(s, 0), ops.ConstantR0(b, 1)),
        ops.Add(ops.GetTupleElement(s, 1), ops.GetTupleElement(s, 0))]))
    t = sub("t", [S32], lambda b, n: ops.GetTupleElement(
        ops.While(cond, body, ops.Tuple(b, [n, ops.ConstantR0(b, 0)])), 1))
    f = sub("f", [S32], lambda b, n: ops.Mul(n, n))
    b = XlaBuilder("nested")
    n = b.parameter(1, S32)
    ops.Conditional(b.parameter(0, PRED), n, t, n, f)
    comp = b.build()

    def jt(n: Any) -> Any:
        return lax.while_loop(lambda s: s[0] > 0, lambda s: (s[0] - 1, s[1] + s[0]),
                              (n, jnp.int32(0)))[1]

    fn = jax.jit(lambda p, n: lax.cond(p, jt, lambda n: n * n, n))
    for pv in (True, False):
        for nv in (0, 5, 17):
            assert_same(ours(comp, np.bool_(pv), np.int32(nv)),
                        np.asarray(fn(pv, np.int32(nv))), what=f"p={pv} n={nv}")


def test_a_function_called_twice_builds_its_loops_once() -> None:
    """jax.random.beta draws two gammas through one private function: inlined, its
    rejection loops were two copies planned and compiled twice (computation_dedup.py):
    16 loop executables where one gamma draw has 10."""
    def beta(k: Any) -> Any:
        return jax.random.beta(jax.random.wrap_key_data(k), 2.0, 3.0, (512,), jnp.float32)

    def gamma(k: Any) -> Any:
        return jax.random.gamma(jax.random.wrap_key_data(k), 2.0, (512,), jnp.float32)

    def loops(exe: Any) -> set[int]:
        return {id(s) for _, s in exe.subexecs}.union(*[loops(s) for _, s in exe.subexecs])

    key = np.asarray(jax.random.key_data(jax.random.key(0)))
    prog = xlapy.compile(jax.jit(beta).lower(key).as_text(), backend="cpu")
    np.testing.assert_allclose(np.asarray(prog(key)), np.asarray(jax.jit(beta)(key)),
                               rtol=2e-6, atol=1e-7)
    assert not list(prog._exe.fallbacks())
    one = xlapy.compile(jax.jit(gamma).lower(key).as_text(), backend="cpu")
    assert len(loops(prog._exe)) <= len(loops(one._exe)) + 2  # (the beta's own two)
    shown = [line for line in prog._exe.explain().splitlines() if line.startswith("comp")]
    assert len(shown) == len(set(shown)) and ", as for %" in prog._exe.explain()


def test_loops_sharing_regions_keep_each_result() -> None:
    """Three loops over one body (made one by computation_dedup.py), the first's result
    read after the others ran: a shared executable's buffers must not carry results over."""
    def f(a: Any, x: Any, y: Any) -> Any:
        def loop(v: Any, n: int) -> Any:
            def body(i: Any, v: Any) -> Any:
                w = jnp.tanh(a @ v) + jnp.sort(v, axis=0) * 0.1
                return lax.cond(i % 3 == 0, lambda: w * 0.5, lambda: w)
            return lax.fori_loop(0, n, body, v)
        r1 = loop(x, 5)
        r2 = loop(y, 7)
        return r1 - r2 * 2 + loop(r1 + 1, 5) * 3, r1, r2

    rng = np.random.default_rng(0)
    args = [(rng.standard_normal((64, 64)) * 0.1).astype(np.float32),
            rng.standard_normal((64, 8)).astype(np.float32),
            rng.standard_normal((64, 8)).astype(np.float32)]
    prog = xlapy.compile(jax.jit(f).lower(*args).as_text(), backend="cpu")
    want = jax.jit(f)(*args)
    for _ in range(2):
        for got, w in zip(prog(*args), want):
            np.testing.assert_allclose(np.asarray(got), np.asarray(w), rtol=1e-5, atol=1e-5)
