"""cond_root.py: a while loop whose condition returns a state element as it is runs on the
native loop driver (it ran through Python, and so did every loop around it), with the
interpreter's bits; JAX's GMRES, whose re-orthogonalization is such a loop, runs with no
loop left to Python."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy

jax = pytest.importorskip("jax")
jnp = jax.numpy
lax = jax.lax


def _once(x: Any, flag: Any) -> Any:
    """`while go: x = x * 2 + 1; go = False`, then a counted loop around it."""
    def inner(c: Any) -> Any:
        go, x = c
        return jnp.bool_(False), x * 2.0 + 1.0

    def outer(i: Any, x: Any) -> Any:
        return lax.while_loop(lambda c: c[0], inner, (flag[0] > 0, x))[1] * 0.5

    return lax.fori_loop(0, 5, outer, x)


@pytest.mark.parametrize("flag", [1.0, -1.0])
def test_a_condition_that_is_a_state_element_runs_natively(flag: float) -> None:
    x = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    f = np.array([flag], np.float32)
    text = jax.jit(_once).lower(x, f).as_text()
    prog = xlapy.compile(text, backend="cpu")
    report = prog._exe.explain()
    assert "control flow (cpu sub-executables)" not in report
    assert report.count("native while loop") == 2
    want = xlapy.compile(text, backend="interpreter")(x, f)
    assert np.asarray(prog(x, f)).tobytes() == np.asarray(want).tobytes()


def test_gmres_runs_every_loop_natively() -> None:
    """jax.scipy.sparse.linalg.gmres (512 x 512, restart 10): 3.5-4.6 ms a solve through
    Python's loops (XLA 0.55-0.7), ~0.7 natively."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    a = (a @ a.T / 64 + np.eye(64)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)

    def solve(a: Any, b: Any) -> Any:
        return jax.scipy.sparse.linalg.gmres(lambda v: a @ v, b, tol=1e-5, maxiter=6,
                                             restart=5)[0]

    text = jax.jit(solve).lower(a, b).as_text()
    prog = xlapy.compile(text, backend="cpu")
    report = prog._exe.explain()
    assert "control flow (cpu sub-executables)" not in report and not prog._exe.fallbacks()
    np.testing.assert_allclose(np.asarray(prog(a, b)), np.asarray(jax.jit(solve)(a, b)),
                               rtol=1e-4, atol=1e-5)
