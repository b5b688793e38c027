"""Arguments a loop re-reads are copied to cache-line alignment when they come misaligned
(realign.py): which ones, and that results and later calls see the caller's data."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import xlapy
from xlapy.backends.cpu import realign


def _misaligned(a: np.ndarray, by: int = 16) -> np.ndarray:
    buf = np.empty(a.nbytes + 2 * realign.ALIGN, np.uint8)
    off = -buf.ctypes.data % realign.ALIGN + by
    out = buf[off: off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def _power(steps: int) -> Any:
    def f(a: Any, v: Any) -> Any:
        w = jax.lax.fori_loop(0, steps, lambda i, v: jnp.tanh(a @ v), v)
        return w, a  # (a result that is the argument itself)
    return f


def _compile(steps: int, a: np.ndarray, v: np.ndarray) -> Any:
    return xlapy.compile(jax.jit(_power(steps)).lower(a, v).as_text(), backend="cpu")


def test_a_matrix_a_long_loop_reads_is_realigned() -> None:
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((64, 64)) * 0.1).astype(np.float32)
    v = np.ones(64, np.float32)
    assert _compile(150, a, v)._exe._realign == {0}  # (v is state the loop replaces)
    assert _compile(40, a, v)._exe._realign == frozenset()  # too few steps to pay
    small = np.ones((8, 8), np.float32)
    assert _compile(150, small, v[:8])._exe._realign == frozenset()  # below BYTES


def test_realigned_calls_see_the_callers_data() -> None:
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((64, 64)) * 0.1).astype(np.float32)
    v = rng.standard_normal(64).astype(np.float32)
    prog = _compile(150, a, v)
    m = _misaligned(a)
    assert m.ctypes.data % realign.ALIGN
    want = prog(np.ascontiguousarray(a), v)
    for _ in range(2):
        got = prog(m, v)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], a)
    kept = got[1]
    m *= 2  # changed in place: the next call reads the new values
    got = prog(m, v)
    np.testing.assert_array_equal(got[0], prog(np.ascontiguousarray(a * 2), v)[0])
    np.testing.assert_array_equal(kept, a)  # an earlier result is not the copy's buffer


def test_a_scans_sliced_input_is_not_copied() -> None:
    """A scan's xs is read one step's slice a step: once a call in all, less than a copy."""
    xs = np.ones((200, 64), np.float32)

    def f(xs: Any, w: Any) -> Any:
        return jax.lax.scan(lambda c, x: (jnp.tanh(c + x @ w), None), xs[0], xs)[0]
    w = np.eye(64, dtype=np.float32)
    prog = xlapy.compile(jax.jit(f).lower(xs, w).as_text(), backend="cpu")
    assert prog._exe._realign == {1}  # (w: read whole every step)
