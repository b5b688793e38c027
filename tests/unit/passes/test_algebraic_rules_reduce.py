"""algebraic_rules_reduce.py: jnp.argmax / argmin of booleans along a short dimension (and
jnp.select, which picks its case with one) become select chains with XLA's results: all
false, all true, the first row, the last; longer dimensions and other regions stay reduces."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.passes.algebraic_simplifier import AlgebraicSimplifier
from xlapy.passes.pass_base import run_passes
from xlapy.stablehlo import parse_module

jax = pytest.importorskip("jax")
jnp = jax.numpy


def _fired(text: str) -> int:
    simp = AlgebraicSimplifier()
    run_passes(parse_module(text), [simp])
    return simp.fired["argmax_pred_rows"]


def _masks(k: int) -> np.ndarray:
    """[k, 64] booleans whose columns hold every case: none true, all, one in each row,
    random ones."""
    rng = np.random.default_rng(k)
    m = rng.random((k, 64)) < 0.3
    m[:, 0], m[:, 1] = False, True
    for r in range(min(k, 30)):
        m[:, 2 + r] = False
        m[r, 2 + r] = True
    return m


@pytest.mark.parametrize("k", [1, 2, 4, 16, 17, 1000])
@pytest.mark.parametrize("fn", [lambda m: jnp.argmax(m, 0), lambda m: jnp.argmin(m, 0),
                                lambda m: jnp.argmax(m.T, -1, keepdims=True),
                                lambda m: (jnp.argmin(m, 0), jnp.max(m, 0))],
                         ids=["argmax", "argmin", "argmax_rows_keepdims", "argmin_and_max"])
def test_bool_argmax_is_xlas(k: int, fn: Any) -> None:
    m = _masks(k)
    text = jax.jit(fn).lower(m).as_text()
    assert _fired(text) == 1
    want = jax.tree_util.tree_leaves(jax.jit(fn)(m))
    for backend in ("cpu", "interpreter"):
        got = jax.tree_util.tree_leaves(xlapy.compile(text, backend=backend)(m))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_jnp_select_is_a_select_chain() -> None:
    """jnp.select(conditions, choices, default): argmax over the stacked conditions (0.61
    ms -> 0.18 for 3 conditions over 1M floats on Zen 3, XLA 0.25), NaN taking the default."""
    def fn(x: Any) -> Any:
        return jnp.select([x < -1, x < 0, x < 1], [x * 2, x * x, x + 3], x - 1)

    x = np.random.default_rng(0).standard_normal(4096).astype(np.float32) * 2
    x[:4] = [-1.0, 0.0, 1.0, np.nan]
    text = jax.jit(fn).lower(x).as_text()
    assert _fired(text) == 1
    prog = xlapy.compile(text, backend="cpu")
    np.testing.assert_array_equal(np.asarray(prog(x)), np.asarray(jax.jit(fn)(x)))
    assert prog._exe.fallbacks() == []  # type: ignore[attr-defined]


def test_a_float_argmax_stays_a_reduce() -> None:
    x = np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)
    assert _fired(jax.jit(lambda v: jnp.argmax(v, 0)).lower(x).as_text()) == 0


def _argmax_reduce(k: int, odd: bool, it: str = "s32") -> Any:
    """pred[k, 64] argmax over dimension 0 with `it` indices, the region jax's (`odd`: ties
    broken towards index 3 first, an order no table of three indices would show)."""
    from xlapy.passes.hlo_builder import HloBuilder, parse_shape

    g = HloBuilder()
    a = g.param(f"pred[{k},64]")

    def region(e: Any, av: Any, ai: Any, ev: Any, ei: Any) -> Any:
        gt = e.cmp(av, ev, "GT")
        first = e.cmp(ai, ei, "LT")
        if odd:
            first = e.op("or", first, e.cmp(ai, e.const(3, it), "EQ"))
        take = e.op("or", gt, e.op("and", e.cmp(av, ev, "EQ"), first))
        return e.tuple(e.select(gt, av, ev), e.select(take, ai, ei))

    body = g.sub("argmax", ["pred[]", f"{it}[]", "pred[]", f"{it}[]"], region)
    ids = g.op("iota", shape=parse_shape(f"{it}[{k},64]"), iota_dimension=0)
    r = g.op("reduce", a, ids, g.const(False, "pred"), g.const(0, it), called=[body],
             dimensions=(0,))
    return g.build(g.op("get_tuple_element", r, index=1))


@pytest.mark.parametrize("k", [8, 40])
def test_a_region_reading_an_index_value_is_checked_on_every_index(k: int) -> None:
    """A region comparing an index with a constant is no order-only comparator: a short
    dimension checks it on every index (and finds it is no argmax), a long one is left."""
    from xlapy.interpreter import Interpreter

    for odd in (False, True):
        module = _argmax_reduce(k, odd)
        m = _masks(k)
        before = np.asarray(Interpreter().run_module(module, [m]))
        simp = AlgebraicSimplifier()
        run_passes(module, [simp])
        assert simp.fired["argmax_pred_rows"] == (not odd)
        np.testing.assert_array_equal(np.asarray(Interpreter().run_module(module, [m])),
                                      before)


@pytest.mark.parametrize("it,k,fires", [("s8", 127, True), ("s8", 128, False),
                                         ("s8", 200, False), ("u8", 255, True),
                                         ("u8", 256, False), ("s4", 7, True),
                                         ("s4", 12, False)])
def test_narrow_index_types_that_wrap_stay_reduces(it: str, k: int, fires: bool) -> None:
    """An iota in a narrow type wraps past its maximum (and the long form's `none` index k
    must fit too): the rewrite needs k <= the type's maximum, else the reduce's own ties."""
    from xlapy.interpreter import Interpreter

    module = _argmax_reduce(k, False, it)
    m = _masks(k)
    m[:, 3] = False
    m[k - 1, 3] = True  # (only the last row true: its index is the wrapped one)
    before = np.asarray(Interpreter().run_module(module, [m]))
    simp = AlgebraicSimplifier()
    run_passes(module, [simp])
    assert simp.fired["argmax_pred_rows"] == fires
    np.testing.assert_array_equal(np.asarray(Interpreter().run_module(module, [m])), before)
