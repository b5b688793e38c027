"""Steps of native while loops beyond kernels: an argmax's variadic reduce (loop_tuples.py)
and vector-matrix products (dot_shapes.plain_dot's vectors) keep a JAX loop native (a
decoding loop that picks the next token), with the interpreter's values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy

jax = pytest.importorskip("jax")
jnp, lax = jax.numpy, jax.lax


def _argmax_walk(x: Any, w: Any) -> Any:
    """Each step: the argmax of a row picks the next row; the indices are the output."""
    def body(i: Any, st: Any) -> Any:
        row, out = st
        nxt = jnp.argmax(x[row] * w).astype(jnp.int32)
        return nxt, out.at[i].set(nxt)
    return lax.fori_loop(0, 40, body, (jnp.int32(0), jnp.zeros(40, jnp.int32)))[1]


def _vector_rnn(h: Any, w: Any, v: Any) -> Any:
    """h (1-D) times a matrix, and a matrix times a vector, every step."""
    return lax.fori_loop(0, 30, lambda i, h: jnp.tanh(h @ w + v @ h * 0.01), h)


def _argmax_values(x: Any) -> Any:
    """argmax and max of a row per step (both results of the variadic reduce read)."""
    def body(i: Any, st: Any) -> Any:
        acc, idx = st
        r = x[i % x.shape[0]] + acc * 0.5
        return jnp.max(r) + acc, idx + jnp.argmax(r).astype(jnp.int32)
    return lax.fori_loop(0, 25, body, (jnp.float32(0), jnp.int32(0)))


def _big_gemv(h: Any, w: Any, u: Any) -> Any:
    """h @ W with W [k, n] (4 MB: gemv's rows form in chunks) and h @ U.T (the cols form)."""
    return lax.fori_loop(0, 5, lambda i, h: jnp.tanh(h @ w) * 0.5 + jnp.tanh(h @ u.T) * 0.5, h)


PROGRAMS: dict[str, tuple[Any, list[np.ndarray]]] = {
    "argmax_walk": (_argmax_walk, [np.random.default_rng(0).standard_normal(
        (64, 64)).astype(np.float32), np.float32(1.5)]),
    "vector_rnn": (_vector_rnn, [np.random.default_rng(1).standard_normal(32).astype(
        np.float32), np.random.default_rng(2).standard_normal((32, 32)).astype(np.float32)
        * 0.3, np.random.default_rng(3).standard_normal((32, 32)).astype(np.float32)]),
    "argmax_values": (_argmax_values, [np.random.default_rng(4).standard_normal(
        (7, 300)).astype(np.float32)]),
    "big_gemv": (_big_gemv, [np.random.default_rng(5).standard_normal(1024).astype(
        np.float32), (np.random.default_rng(6).standard_normal((1024, 1024)) * 0.03).astype(
        np.float32), (np.random.default_rng(7).standard_normal((1024, 1024)) * 0.03).astype(
        np.float32)]),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_loop_stays_native(name: str, threads: int) -> None:
    fn, args = PROGRAMS[name]
    text = jax.jit(fn).lower(*args).as_text()
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    report = cpu._exe.explain()
    top = report.split("-- called by")[0]
    assert "native while loop" in top and "sub-executables" not in top, report
    want = xlapy.compile(text, backend="interpreter")(*args)
    for _ in range(2):
        got = cpu(*args)
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


def test_big_vector_matrix_products_run_on_gemv(monkeypatch: pytest.MonkeyPatch) -> None:
    from xlapy.backends.cpu import loop_gemv

    made: list[object] = []
    real = loop_gemv.entry
    monkeypatch.setattr(loop_gemv, "entry", lambda *a: made.append(a) or real(*a))
    fn, args = PROGRAMS["big_gemv"]
    text = jax.jit(fn).lower(*args).as_text()
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": 2})
    got = cpu(*args)
    assert len(made) == 2  # both forms
    np.testing.assert_allclose(got, xlapy.compile(text, backend="interpreter")(*args),
                               rtol=1e-5, atol=1e-5)


def test_a_loops_mid_size_products_split_in_halves_with_the_same_bits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """h @ A and h @ B of 1 MB each in a fori_loop (an RNN decode step) run in two halves
    of W (gemv.PAIR_BYTES): the caller's first chunk is chunk 0 and the worker's chunk 1,
    step after step, so each half stays in its core's L2 (1.06 -> 0.61-0.65 of XLA's time
    on Zen 4); the bits are the same on one thread and two."""
    from xlapy.backends.cpu import gemv, loop_gemv

    steps: list[object] = []
    real = loop_gemv.Step.__init__

    def init(self: object, *a: object) -> None:
        real(self, *a)  # type: ignore[arg-type]
        steps.append(self)

    monkeypatch.setattr(loop_gemv.Step, "__init__", init)
    rng = np.random.default_rng(3)
    h = rng.standard_normal((1, 256)).astype(np.float32)
    a = (rng.standard_normal((256, 1024)) * 0.05).astype(np.float32)
    b = (rng.standard_normal((1024, 256)) * 0.05).astype(np.float32)
    text = jax.jit(lambda h, a, b: jax.lax.fori_loop(0, 20, lambda i, h: jnp.tanh(jnp.tanh(
        h @ a) @ b), h)).lower(h, a, b).as_text()
    got = [np.asarray(xlapy.compile(text, backend="cpu", options={"num_threads": t})(h, a, b))
           for t in (1, 2, 2)]
    assert steps and all(int(s.d[gemv._D_CHUNKS]) == 2 for s in steps)  # type: ignore
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0], got[2])
    want = xlapy.compile(text, backend="interpreter")(h, a, b)
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5)
