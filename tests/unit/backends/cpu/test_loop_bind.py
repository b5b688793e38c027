"""loop_bind.py: a native loop's state bound with index writes worked out once (`Binder`),
and a small state kept in buffers of the loop's own (`Kept`): the same final state, bit for
bit, as fresh buffers bound per call; fresh result arrays every call."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import loop_bind

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def _randint(k: Any) -> Any:
    return jax.random.randint(jax.random.wrap_key_data(k), (50,), 0, 1000)


def _randint_text() -> str:
    return jax.jit(_randint).lower(jax.random.key_data(jax.random.PRNGKey(0))).as_text()


#: The program's own loops at its top level, not inside one trip (branch_loop.entry_trip).
THUNKS = {"entry_trip": False}
#: The generic driver (its swaps and copies), not a fused loop (loop_fused.py).
DRIVER = {**THUNKS, "fused_loops": False}


def _loops(prog: Any) -> list[Any]:
    return list(prog._exe.native_loops.values())


def _keys(n: int) -> list[np.ndarray]:
    return [np.asarray(jax.random.key_data(jax.random.PRNGKey(s))) for s in range(n)]


def test_threefry_loops_keep_their_state_with_the_bound_paths_bits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """jax.random's threefry loops (swapped, moved and owned state elements)."""
    text = _randint_text()
    kept = xlapy.compile(text, backend="cpu", options=THUNKS)
    with monkeypatch.context() as m:
        m.setattr(loop_bind, "KEPT_BYTES", -1)
        bound = xlapy.compile(text, backend="cpu", options=THUNKS)
        firsts = [bound(k) for k in _keys(5)]
    got = [kept(k) for k in _keys(5)]
    assert _loops(kept) and all(nw._prep.kept for nw in _loops(kept))
    assert all(nw._prep.kept is False for nw in _loops(bound))
    for g, w, k in zip(got, firsts, _keys(5)):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(g, np.asarray(jax.jit(_randint)(k)))  # XLA's
    again = kept(_keys(1)[0])  # a later call leaves earlier results alone
    np.testing.assert_array_equal(got[0], firsts[0])
    np.testing.assert_array_equal(again, firsts[0])


def test_a_big_state_is_bound_per_call() -> None:
    n = loop_bind.KEPT_BYTES // 4 + 1

    def f(x: Any) -> Any:
        return jax.lax.fori_loop(0, 3, lambda i, v: v * 1.5 + 1.0, x)

    x = np.arange(n, dtype=np.float32)
    prog = xlapy.compile(jax.jit(f).lower(x).as_text(), backend="cpu")
    np.testing.assert_array_equal(prog(x), np.asarray(jax.jit(f)(x)))
    assert all(nw._prep.kept is False for nw in _loops(prog))


def test_a_loop_with_inner_loops_keeps_its_small_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner native loops rebind their own tables each run: the outer one keeps its state."""
    def f(x: Any) -> Any:
        def outer(i: Any, v: Any) -> Any:
            w = jax.lax.fori_loop(0, i + 1, lambda j, u: jnp.sin(u) * 0.5 + u, v)
            return w * 0.9 + i.astype(w.dtype)
        return jax.lax.fori_loop(0, 5, outer, x)

    x = np.linspace(-1, 1, 16, dtype=np.float32)
    text = jax.jit(f).lower(x).as_text()
    kept = xlapy.compile(text, backend="cpu", options=THUNKS)
    with monkeypatch.context() as m:
        m.setattr(loop_bind, "KEPT_BYTES", -1)
        bound = xlapy.compile(text, backend="cpu", options=THUNKS)
        want = [bound(x + s) for s in range(3)]
    got = [kept(x + s) for s in range(3)]
    (nw,) = _loops(kept)
    assert nw._prep.nested and nw._prep.kept
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_allclose(got[0], np.asarray(jax.jit(f)(x)), rtol=1e-5, atol=1e-6)


def test_state_no_one_reads_after_the_loop_is_not_copied_out() -> None:
    """A fori_loop's counter (its while's users take the carry only) comes back as the
    loop's own buffer; the carry is a fresh copy every call."""
    def f(x: Any) -> Any:
        return jax.lax.fori_loop(0, 5, lambda i, v: v * 1.5 + i.astype(v.dtype), x)

    x = np.arange(4, dtype=np.float32)
    prog = xlapy.compile(jax.jit(f).lower(x).as_text(), backend="cpu")
    first = prog(x)
    (nw,) = _loops(prog)
    assert nw._prep.kept.read[-1] and not any(nw._prep.kept.read[:-1])  # (i, [bound,] carry)
    second = prog(x + 1)
    want = np.asarray(jax.jit(f)(x))
    np.testing.assert_array_equal(first, want)  # (not overwritten by the second call)
    np.testing.assert_array_equal(second, np.asarray(jax.jit(f)(x + 1)))


def test_a_small_repeated_initial_value_is_a_buffer_the_loop_never_writes() -> None:
    """A fori_loop's zeros carry (a broadcast of a constant only the loop's initial state
    reads) is computed once, at compile time (`static_value`), not by a kernel every call;
    the loop copies it in (kept state) or passes it through untouched, so every call starts
    from zeros. Over STATIC_INIT_BYTES it stays a kernel (and a fresh buffer per call)."""
    def f(x: Any) -> Any:
        return jax.lax.fori_loop(0, 5, lambda i, c: (c[0] * 0.5 + x, c[1], c[2] + i),
                                 (jnp.zeros_like(x), jnp.ones_like(x), jnp.zeros((), jnp.int32)))

    x = np.linspace(-1, 1, 16, dtype=np.float32)
    text = jax.jit(f).lower(x).as_text()
    prog = xlapy.compile(text, backend="cpu", options=THUNKS)
    hows = sorted(how for _, op, how in prog._exe.report if op == "broadcast_in_dim")
    assert hows == ["buffer", "kernel k0"], prog._exe.explain()  # (the ones: a result)
    statics = [np.array(v) for v in prog._exe.static.values()]
    want = jax.jit(f)(x)
    for k in range(3):
        got = prog(x + k)
        for g, w in zip(got, jax.jit(f)(x + k)):
            np.testing.assert_allclose(g, w, rtol=1e-6)
    for v, before in zip(prog._exe.static.values(), statics):
        np.testing.assert_array_equal(v, before)
    for g, w in zip(prog(x), want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    big = np.zeros(2048, np.float32)  # 8 KB: a kernel, as before
    prog = xlapy.compile(jax.jit(f).lower(big).as_text(), backend="cpu", options=THUNKS)
    assert any(how.startswith("kernel") for _, op, how in prog._exe.report
               if op == "broadcast_in_dim")


def test_a_repeated_initial_value_broadcast_from_a_vector_keeps_its_values() -> None:
    """A loop's initial value broadcast from a [3] constant along dimension 1 is a buffer
    with the broadcast's values (static_value had filled it with the constant's first
    element: every row [1, 1, 1] where [1, 2, 3] was due)."""
    def f(x: Any) -> Any:
        init = jnp.broadcast_to(np.array([1.0, 2.0, 3.0], np.float32), (4, 3))
        return jax.lax.fori_loop(0, 3, lambda i, c: c * 0.5 + x, init)

    x = np.ones((4, 3), np.float32)
    prog = xlapy.compile(jax.jit(f).lower(x).as_text(), backend="cpu", options=THUNKS)
    assert any(op == "broadcast_in_dim" and how == "buffer" for _, op, how in prog._exe.report)
    np.testing.assert_array_equal(prog(x), jax.jit(f)(x))


def test_kept_buffers_follow_the_swaps_across_calls_and_a_failed_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept copies a call's state into the buffers the last call's swaps left the tables at
    (no restore): trip counts of both parities in turn, then a call stopped by the
    iteration limit, then the right results again."""
    def f(x: Any, n: Any) -> Any:
        return jax.lax.while_loop(lambda s: s[0] < n, lambda s: (
            s[0] + 1, jnp.sin(s[1]) * 1.5 + s[2], s[2] * 0.5 - s[1]), (0, x, x * 2))[1:]

    x = np.linspace(-2, 2, 12).astype(np.float32)
    text = jax.jit(f).lower(x, np.int32(3)).as_text()
    prog = xlapy.compile(text, backend="cpu", options=DRIVER)
    ref = xlapy.compile(text, backend="interpreter")
    (nw,) = _loops(prog)
    assert nw.swapped

    def same(n: int) -> None:
        for g, w in zip(prog(x, np.int32(n)), ref(x, np.int32(n))):
            np.testing.assert_array_equal(g, w)

    for n in (3, 4, 1, 0, 7, 2):
        same(n)
    monkeypatch.setenv("XLAPY_MAX_WHILE_ITERATIONS", "2")
    with pytest.raises(xlapy.XlapyError, match="iteration"):
        prog(x, np.int32(5))
    monkeypatch.delenv("XLAPY_MAX_WHILE_ITERATIONS")
    for n in (5, 2):
        same(n)
