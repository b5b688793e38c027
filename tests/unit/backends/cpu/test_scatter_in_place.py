"""A native scatter written over its operand (scatter_emit.in_place): a loop's
`c.at[idx].add(v)` updates its state buffer with no copy of it each step, a top-level
scatter takes a dying temporary's memory; the interpreter's bits (duplicates in order,
out-of-bounds rows dropped, 1 and 2 threads), and a scatter whose updates are its operand
keeps its copy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy

jax = pytest.importorskip("jax")
jnp = jax.numpy
lax = jax.lax

#: What the report says of a fori_loop whose scatter updates c in place (native_loop.py).
CARRIED = "native while loop (2 state elements carried in place)"


def _same(fn: Any, args: list[np.ndarray], threads: int = 2) -> Any:
    text = jax.jit(fn).lower(*args).as_text()
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    want = xlapy.compile(text, backend="interpreter")(*args)
    keep = [a.copy() for a in args]
    got = prog(*args)
    assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
    assert np.asarray(prog(*args)).tobytes() == np.asarray(want).tobytes()
    for a, k in zip(args, keep):  # (the caller's arrays are never written)
        assert a.tobytes() == k.tobytes()
    assert not prog._exe.fallbacks()
    return prog


def _state(rows: int = 512) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(rows)
    c = rng.standard_normal((rows, 64)).astype(np.float32)
    idx = rng.integers(-8, rows + 8, (12, 96)).astype(np.int32)  # duplicates, some dropped
    v = rng.standard_normal((12, 96, 64)).astype(np.float32)
    return c, idx, v


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("how", ["add", "set", "max", "mul"])
def test_a_loops_scatter_updates_its_state_in_place(how: str, threads: int) -> None:
    c, idx, v = _state()

    def f(c: Any, idx: Any, v: Any) -> Any:
        return lax.fori_loop(0, 12, lambda i, c: getattr(c.at[idx[i]], how)(
            v[i], mode="drop"), c)

    prog = _same(f, [c, idx, v], threads)
    assert CARRIED in prog._exe.explain()  # (the counter and c; before, the counter alone)


def test_updates_read_from_the_state_before_it_is_written() -> None:
    """The updates gather rows of the state itself (computed before the scatter runs)."""
    c, idx, _ = _state(256)
    _same(lambda c, idx: lax.fori_loop(0, 12, lambda i, c: c.at[idx[i] % 256].add(
        c[(idx[i] // 2) % 256] * 0.25), c), [c, idx])


def test_top_level_scatters_over_a_dying_temporary_and_over_themselves() -> None:
    c, idx, v = _state(300)
    _same(lambda c, idx, v: (c * 2.0).at[idx[0]].add(v[0]) + 1.0, [c, idx, v])
    # the updates are the operand's own rows: scatter(x, i, x[j]) must read them first
    _same(lambda c, idx: (c * 2.0).at[idx[0, :64] % 300].set((c * 2.0)[:64]), [c, idx])
    sq = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    i = np.arange(64, dtype=np.int32)[::-1].copy()
    _same(lambda x, i: (x + 1.0).at[i].add(x + 1.0), [sq, i])


def test_the_loop_in_place_skips_the_copy() -> None:
    """The kernel skips its copy when result and operand are one buffer: 100 steps of 128
    rows added into 4096 x 64 ran 3.4 ms (all of c copied each step; XLA 0.55-1.1), now
    ~0.3; checked through the bits of a longer run than the tests above."""
    rng = np.random.default_rng(7)
    c = rng.standard_normal((4096, 64)).astype(np.float32)
    idx = rng.integers(0, 4096, (40, 128)).astype(np.int32)
    v = rng.standard_normal((40, 128, 64)).astype(np.float32)
    prog = _same(lambda c, idx, v: lax.fori_loop(
        0, 40, lambda i, c: c.at[idx[i]].add(v[i]), c), [c, idx, v])
    assert CARRIED in prog._exe.explain()
