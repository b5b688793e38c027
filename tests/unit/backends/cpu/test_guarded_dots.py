"""guarded_dots.py: a dot whose only reader is a select on a rank-0 predicate runs in a
native loop only when the select picks it (expm's squaring scan: `cond(i < n, x @ x, x)`),
with the interpreter's bits whatever its stale buffer holds; its predicate is materialized
with the reason; conditional_to_select converts such conds in loop bodies up to
MAX_GUARDED_FLOPS, not at a program's top level."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import cache, guarded_dots
from xlapy.passes import conditional_to_select
from xlapy.passes.hlo_builder import HloBuilder

jax = pytest.importorskip("jax")
jnp, lax = jax.numpy, jax.lax


def _squarings(x: Any, n: Any) -> Any:
    """expm's _squaring: a scan of 16 steps, step i squaring when i < n."""
    def step(c: Any, i: Any) -> Any:
        return lax.cond(i < n, lambda m: m @ m, lambda m: m, c), None

    return lax.scan(step, x, jnp.arange(16))[0]


def _compile(fn: Any, args: list[Any], threads: int = 1) -> tuple[xlapy.CompiledProgram, str]:
    cache.clear_memory()
    text = jax.jit(fn).lower(*args).as_text()
    return xlapy.compile(text, backend="cpu", options={"num_threads": threads}), text


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("size", [8, 64, 128])
def test_a_squaring_loop_runs_the_picked_products_only(size: int, threads: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Bits equal to the same products run unguarded, one call a squaring, for 0, 2 and 16
    squarings in any call order: a call squaring 16 times (its products overflow to inf and
    NaN) leaves them in the product's buffer, and the next call, squaring none, must not
    read them. Within rounding of the interpreter (numpy's matmul: its OpenBLAS kernel sums
    in another order on some machines, Zen 3's, so its bits are not ours)."""
    wrapped: list[bool] = []
    real = guarded_dots.wrap

    def spy(exe: Any, slot: int, words: list[int], table: int, keep: list[Any]) -> list[int]:
        got = real(exe, slot, words, table, keep)
        wrapped.append(got is not words)
        return got

    monkeypatch.setattr(guarded_dots, "wrap", spy)
    x = np.random.default_rng(size).standard_normal((size, size)).astype(np.float32)
    prog, text = _compile(_squarings, [x, np.float32(0)], threads)
    square, _ = _compile(lambda m: m @ m, [x], threads)
    ref = xlapy.compile(text, backend="interpreter")
    assert prog._exe.fallbacks() == []  # type: ignore[attr-defined]
    for n in (16, 0, 2, 0, 16, 2):
        with np.errstate(all="ignore"):
            want = x
            for _ in range(n):
                want = np.asarray(square(want))
            got = np.asarray(prog(x, np.float32(n)))
            np.testing.assert_array_equal(got, want)
            if n == 2:
                np.testing.assert_allclose(got, np.asarray(ref(x, np.float32(n))),
                                           atol=1e-5 * np.abs(want).max())
        if n == 0:
            np.testing.assert_array_equal(got, x)
    assert wrapped and all(wrapped)


def _dot(g: HloBuilder, a: Any) -> Any:
    return g.op("dot_general", a, a, lhs_batching_dimensions=(), rhs_batching_dimensions=(),
                lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,))


def test_guard_and_the_forced_predicate() -> None:
    """select(p, a @ a, a): guardable on the true side, its compare materialized with the
    reason; a dot read by anything else, or on both sides, is not."""
    g = HloBuilder()
    a, s, t = g.param("f32[4,4]"), g.param("f32[]"), g.param("f32[]")
    p = g.cmp(s, t, "LT")
    d = _dot(g, a)
    assert guarded_dots.guard(d) is None  # no reader yet
    r = g.select(p, a, d)
    assert guarded_dots.guard(d) == (p, False)
    reasons = guarded_dots.forced(list(g.comp.instructions), {id(p), id(r)})
    assert "may drop dot" in reasons[id(p)] and len(reasons) == 1
    assert guarded_dots.forced(list(g.comp.instructions), {id(r)}) == {}  # p has a buffer
    g.op("negate", d)
    assert guarded_dots.guard(d) is None  # two readers
    d2 = _dot(g, a)
    g.select(p, d2, d2)
    assert guarded_dots.guard(d2) is None  # both sides


def _explain(prog: xlapy.CompiledProgram) -> str:
    return prog._exe.explain()  # type: ignore[attr-defined]


def test_cond_to_select_in_loops_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 128 x 128 squaring (4 MFLOP, over MAX_DOT_FLOPS) becomes a select in a loop body;
    the same cond at a program's top level stays a case (no guard on the Python path); under
    a lower MAX_GUARDED_FLOPS the loop's cond is a case again (a chain of picked loops)."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    x = np.eye(128, dtype=np.float32)
    text = _explain(_compile(_squarings, [x, np.float32(1)])[0])
    assert ".picked" not in text and " select " in text
    top = _explain(_compile(lambda m, n: lax.cond(n > 0, lambda a: a @ a, lambda a: a, m),
                            [x, np.float32(1)])[0])
    assert " case " in top
    monkeypatch.setattr(conditional_to_select, "MAX_GUARDED_FLOPS", 1 << 20)
    assert ".picked" in _explain(_compile(_squarings, [x, np.float32(1)])[0])
