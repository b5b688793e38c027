"""nested_loop.in_place: an inner loop that updates an outer loop's state element runs on
the outer state buffer itself (no copy in or out per outer iteration), only where no later
step reads the old value and no inner run can stop the outer loop half way; the results
are the driver's with copies, the interpreter's and jax's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.errors import XlapyError

pytestmark = pytest.mark.usefixtures("jax_x32")

jax = pytest.importorskip("jax")
jnp = jax.numpy
lax = jax.lax

#: Fused inner loops (loop_fused.py) and the generic driver's, each as an entry trip's
#: step and on the thunks' path.
PATHS = [{}, {"fused_loops": False}, {"entry_trip": False},
         {"entry_trip": False, "fused_loops": False}]


def _loops(exe: Any) -> list[Any]:
    out = list(exe.native_loops.values())
    for _, sub in exe.subexecs:
        out += _loops(sub)
    return out


def _in_place(prog: Any) -> int:
    return sum(len(v) for nw in _loops(prog._exe) for v in nw.nested_in_place.values())


def _check(f: Any, args: list[Any], options: dict[str, Any], in_place: int) -> Any:
    text = jax.jit(f).lower(*args).as_text()
    prog = xlapy.compile(text, backend="cpu", options=options)
    assert _in_place(prog) == in_place
    want = xlapy.compile(text, backend="interpreter")(*args)
    for _ in range(2):
        for g, w in zip(jax.tree_util.tree_leaves(prog(*args)), jax.tree_util.tree_leaves(want)):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    np.testing.assert_array_equal(np.asarray(jax.tree_util.tree_leaves(prog(*args))[0]),
                                  np.asarray(jax.tree_util.tree_leaves(jax.jit(f)(*args))[0]))
    return prog


def _edit(a: Any, b: Any, extra: bool = False) -> Any:
    n, m = a.shape[0], b.shape[0]
    dp = jnp.zeros((n + 1, m + 1), jnp.int32).at[:, 0].set(jnp.arange(n + 1)).at[
        0, :].set(jnp.arange(m + 1))

    def row(i: Any, dp: Any) -> Any:
        def col(j: Any, dp: Any) -> Any:
            c = jnp.minimum(jnp.minimum(dp[i - 1, j] + 1, dp[i, j - 1] + 1),
                            dp[i - 1, j - 1] + (a[i - 1] != b[j - 1]))
            return dp.at[i, j].set(c)
        new = lax.fori_loop(1, m + 1, col, dp)
        return new.at[0, 0].add(dp[i - 1, m]) if extra else new  # (reads the old table)
    return lax.fori_loop(1, n + 1, row, dp)


def _args(n: int = 24) -> list[np.ndarray]:
    rng = np.random.default_rng(n)
    return [rng.integers(0, 4, n).astype(np.int32), rng.integers(0, 4, n + 3).astype(np.int32)]


@pytest.mark.parametrize("options", PATHS)
def test_an_edit_distance_row_loop_updates_the_table_in_place(options: dict[str, Any]) -> None:
    prog = _check(_edit, _args(), options, 1)
    assert any("updated in place by them" in how for _, _, how in _report(prog._exe))


def _report(exe: Any) -> list[tuple[str, str, str]]:
    out = list(exe.report)
    for _, sub in exe.subexecs:
        out += _report(sub)
    return out


@pytest.mark.parametrize("options", PATHS[:2])
def test_a_later_read_of_the_old_value_keeps_the_copy(options: dict[str, Any]) -> None:
    _check(lambda a, b: _edit(a, b, extra=True), _args(), options, 0)


@pytest.mark.parametrize("options", PATHS[:2])
def test_an_inner_loop_of_unknown_trip_count_keeps_the_copy(options: dict[str, Any]) -> None:
    """A while whose end depends on its values could run past its budget and hand the
    outer loop to Python from the iteration's start: its state must still be there."""
    def f(x: Any) -> Any:
        def outer(i: Any, c: Any) -> Any:
            return lax.while_loop(lambda s: s[0, 0] < 100.0 + i,
                                  lambda s: s.at[0, 0].add(7.0).at[1, i % 3].mul(0.5), c)
        return lax.fori_loop(0, 20, outer, x)

    _check(f, [np.ones((2, 3), np.float32)], options, 0)


@pytest.mark.parametrize("options", PATHS[:2])
def test_an_inner_loop_before_one_of_unknown_trip_count_keeps_the_copy(
        options: dict[str, Any]) -> None:
    """(One of unknown trip count that runs first is no obstacle: the state is as the
    iteration began when it stops the outer loop.)"""
    def f(x: Any) -> Any:
        def outer(i: Any, c: Any) -> Any:
            t, k = c
            t = lax.fori_loop(0, 4, lambda j, t: t.at[j].add(i * 1.0), t)
            end = 50 + t[0].astype(jnp.int32)  # (so it runs after the fori_loop)
            k = lax.while_loop(lambda v: v < end, lambda v: v * 2 + 1, k)
            return t, k
        return lax.fori_loop(0, 6, outer, (x, jnp.int32(1)))

    _check(f, [np.zeros(4, np.float32)], options, 0)


def test_the_iteration_limit_below_the_inner_trip_count_is_an_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit's error, as on the Python path, never a half-updated table."""
    args = _args(40)
    text = jax.jit(_edit).lower(*args).as_text()
    prog = xlapy.compile(text, backend="cpu", options={"entry_trip": False})
    assert _in_place(prog) == 1
    monkeypatch.setenv("XLAPY_MAX_WHILE_ITERATIONS", "20")
    with pytest.raises(XlapyError, match="20"):
        prog(*args)
    monkeypatch.delenv("XLAPY_MAX_WHILE_ITERATIONS")
    np.testing.assert_array_equal(prog(*args), jax.jit(_edit)(*args))


@pytest.mark.parametrize("options", PATHS[:2])
def test_two_inner_loops_in_a_row(options: dict[str, Any]) -> None:
    """The second inner loop takes the first one's result: the first's result is not an
    outer result and the second's operand not the outer state, so both copy."""
    def f(x: Any) -> Any:
        def outer(i: Any, c: Any) -> Any:
            c = lax.fori_loop(0, 5, lambda j, t: t.at[j, i % 4].add(1.0 + j), c)
            return lax.fori_loop(0, 4, lambda j, t: t.at[i % 5, j].mul(0.5), c)
        return lax.fori_loop(0, 9, outer, x)

    _check(f, [np.ones((5, 4), np.float32)], options, 0)
