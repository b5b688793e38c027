"""branch_loop._chain: a case/if inside a trip (an entry computation or a branch run as one
native loop trip) becomes a chain of loops that run at most once, so a program whose top
level picks a branch (jax.scipy.linalg.expm) is one native call, with the bits of its
thunks for every index, an out-of-range one included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import branch_loop

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

ENTRY = "runs as one native loop trip"


def _pair(fn: Any, *args: Any) -> tuple[Any, Any]:
    """(the program with its entry as a trip, the same with the thunks: the reference)."""
    text = jax.jit(fn).lower(*args).as_text()
    prog = xlapy.compile(text, backend="cpu")
    ref = xlapy.compile(text, backend="cpu", options={"entry_trip": False})
    assert ENTRY not in ref._exe.explain()
    return prog, ref


def _same(got: Any, want: Any) -> None:
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.reshape(-1).view(np.uint8), w.reshape(-1).view(np.uint8))


def test_expm_is_one_trip_with_its_thunks_bits() -> None:
    """expm's entry ends in a case on its norm (the Pade branch, or NaNs for a non-finite
    input): with the case a thunk the entry was ~20 thunks (~77 us against XLA's ~45 on Zen
    3); as a chain, one native call (~40)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 16)).astype(np.float32)
    prog, ref = _pair(jax.scipy.linalg.expm, a)
    assert isinstance(prog._exe.trip, branch_loop.Trip) and ENTRY in prog._exe.explain()
    nan = a.copy()
    nan[3, 4] = np.nan
    for x in (a * 0.01, a * 0.3, a * 4, nan):  # (scalings: 0, some, many squarings)
        _same(prog(x), ref(x))
    assert np.isnan(np.asarray(prog(nan))).all()
    np.testing.assert_allclose(prog(a * 0.3), jax.jit(jax.scipy.linalg.expm)(a * 0.3),
                               rtol=2e-5, atol=1e-6)


def _switch(a: Any, b: Any, k: Any) -> Any:
    """Three branches of LAPACK calls and products (none a select), after a few kernels."""
    a = a @ a.T + 8 * jnp.eye(a.shape[0], dtype=a.dtype)
    b = jnp.tanh(b) + 1
    return jax.lax.switch(k, [
        lambda a, b: (jnp.linalg.cholesky(a) @ b, jnp.sum(a)),
        lambda a, b: (jnp.linalg.cholesky(a + 1) @ b @ b, jnp.sum(b)),
        lambda a, b: (jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky(a), b,
                                                        lower=True), jnp.max(a)),
    ], a, b)


def test_a_switch_runs_the_branch_its_index_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loop k of the chain runs when the index (jax clamps it) is k; also under
    XLAPY_MAX_WHILE_ITERATIONS=0 (the chain's loops are branches, not the program's loops:
    nested_loop.PICKED)."""
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((12, 12)).astype(np.float32) for _ in range(2))
    prog, ref = _pair(_switch, a, b, np.int32(0))
    assert isinstance(prog._exe.trip, branch_loop.Trip)
    outs = {}
    for k in (0, 1, 2, -1, 7):
        outs[k] = prog(a, b, np.int32(k))
        _same(outs[k], ref(a, b, np.int32(k)))
    assert not np.array_equal(outs[0][0], outs[1][0])
    assert not np.array_equal(outs[1][0], outs[2][0])
    monkeypatch.setenv("XLAPY_MAX_WHILE_ITERATIONS", "0")
    _same(prog(a, b, np.int32(2)), outs[2])


def test_an_unclamped_case_index_picks_the_last_branch() -> None:
    """A case whose index no clamp bounds (HLO text, not jax): -1 and 5 run the last of
    three branches, in the trip as in the thunks."""
    import re

    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((12, 12)).astype(np.float32) for _ in range(2))
    text = jax.jit(_switch).lower(a, b, np.int32(0)).as_text()
    # clamp(0, k, 2) -> k + 0
    text, n = re.subn(r"stablehlo\.clamp (%\S+), (%\S+), %\S+ : tensor<i32>",
                      r"stablehlo.add \2, \1 : tensor<i32>", text)
    assert n == 1, text
    prog = xlapy.compile(text, backend="cpu")
    ref = xlapy.compile(text, backend="cpu", options={"entry_trip": False})
    assert isinstance(prog._exe.trip, branch_loop.Trip)
    last = ref(a, b, np.int32(2))
    for k in (-1, 5):
        _same(prog(a, b, np.int32(k)), last)
        _same(ref(a, b, np.int32(k)), last)


def _renorm_loop(x: Any, w: Any) -> Any:
    """Every 8th step normalizes the columns and multiplies by an inverse (getrf, trsm: no
    select can stand for the cond), the others scale; a 3-way switch on i % 3 after it."""
    inv = lambda c: c / jnp.linalg.norm(c, axis=0, keepdims=True) @ jnp.linalg.inv(  # noqa: E731
        w + 4 * jnp.eye(w.shape[0], dtype=w.dtype))

    def body(i: Any, c: Any) -> Any:
        c = jnp.tanh(c @ w)
        c = jax.lax.cond(i % 8 == 0, inv, lambda c: c * 1.01, c)
        return jax.lax.switch(i % 3, [lambda c: c, lambda c: jnp.linalg.cholesky(
            c @ c.T + 4 * jnp.eye(c.shape[0], dtype=c.dtype)) @ c, inv], c)
    return jax.lax.fori_loop(0, 20, body, x)


def test_a_loop_whose_body_holds_a_cond_stays_native(monkeypatch: pytest.MonkeyPatch
                                                     ) -> None:
    """A while body (and condition) holding case/if compiles with each as a chain when the
    loop is native then (branch_loop._chained): it ran through Python per iteration (5.3 ms
    against XLA's 0.6 for a 64-step loop on Zen 3; 0.39 now), with the same bits."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 16)).astype(np.float32)
    w = (rng.standard_normal((16, 16)) * 0.3).astype(np.float32)
    text = jax.jit(_renorm_loop).lower(x, w).as_text()
    prog = xlapy.compile(text, backend="cpu")
    top = prog._exe.explain().split("-- called by")[0]
    assert "native while loop" in top and "control flow" not in top, top
    with monkeypatch.context() as m:
        m.setattr(branch_loop, "_chained", lambda *a: None)
        ref = xlapy.compile(text, backend="cpu", options={"entry_trip": False})
    assert "control flow" in ref._exe.explain()
    for k in range(3):
        _same(prog(x * (k + 1), w), ref(x * (k + 1), w))
    np.testing.assert_allclose(prog(x, w), jax.jit(_renorm_loop)(x, w), rtol=1e-4, atol=1e-5)


def test_a_loop_whose_chains_would_not_be_native_keeps_its_case() -> None:
    """A branch with no native step (a sort split over the threads) leaves the loop to
    Python with the case thunk, compiled from the original body: the rewritten one, planned
    under the body's name, had made that compile a stale-plan error."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 64, 4096)).astype(np.float32)

    def fn(x: Any) -> Any:
        return jax.lax.fori_loop(0, 4, lambda i, c: jax.lax.cond(
            i % 2 == 0, lambda c: c + jnp.sort(x[i], axis=-1)[:, -1],
            lambda c: c * 2, c), jnp.zeros(64, np.float32))
    text = jax.jit(fn).lower(x).as_text()
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": 2})
    top = cpu._exe.explain().split("-- called by")[0]
    assert "native while loop" not in top and "control flow" in top, top
    _same(cpu(x), xlapy.compile(text, backend="interpreter")(x))
