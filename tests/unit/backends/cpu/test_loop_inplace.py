"""loop_inplace.py: a native loop's state element whose body kernel reads it only where it
writes, last in the body, is written over its own buffer (no second buffer, no swap): the
interpreter's bits, the caller's arrays untouched, and not where a later step, a transposed
read or a row-split loop forbids it. inplace.inexact_leaves: a kernel that also slices or
gathers another operand may be written over the operand it reads at the element."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import cache, inplace

jax = pytest.importorskip("jax")
jnp, lax = jax.numpy, jax.lax

CARRIED = "carried in place"


def _run(fn: Any, args: list[np.ndarray], threads: int = 2, rtol: float = 0.0
         ) -> tuple[str, Any]:
    """(the loop's explain text, its results), checked against the interpreter on two calls
    (bit for bit, or within `rtol`: a sum's order is the target's), the arguments
    unchanged."""
    cache.clear_memory()
    text = jax.jit(fn).lower(*args).as_text()
    before = [a.copy() for a in args]
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
    want = xlapy.compile(text, backend="interpreter")(*args)
    for _ in range(2):
        got = prog(*args)
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=0)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)
    how = " ".join(h for _, op, h in prog._exe.report if op == "while")  # type: ignore
    assert "native while loop" in how and prog._exe.fallbacks() == []  # type: ignore
    return how, got


def _x(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("rows", [2, 64, 200])  # a Kept state (<= 64 KB) and bound ones
@pytest.mark.parametrize("threads", [1, 2])
def test_an_accumulated_dynamic_slice_is_carried_in_place(rows: int, threads: int) -> None:
    """c = c + x[7 i: 7 i + rows]: 1.8 us an iteration (64 rows) with the second buffer, 1.3
    in place (XLA 1.2)."""
    def f(x: Any, c0: Any) -> Any:
        return lax.fori_loop(0, 30, lambda i, c: c + lax.dynamic_slice(
            x, (i * 7, 0), (rows, 256)), c0)

    how, _ = _run(f, [_x(512, 256), _x(rows, 256, seed=1)], threads)
    assert CARRIED in how


def test_an_element_read_after_its_kernel_keeps_two_buffers() -> None:
    """(c * 1.5 + 1, sum(c^2)): the reduction reads c after (or beside) the update; it must
    see the old c (a stale c would be off by far more than the sum's rounding, which is the
    target's order: x86-64-v2 code rounds it differently)."""
    def f(c0: Any) -> Any:
        return lax.fori_loop(0, 5, lambda i, s: (s[0] * 1.5 + 1.0, s[1] + jnp.sum(s[0] ** 2)),
                             (c0, jnp.float32(0)))

    _run(f, [_x(64, 128)], rtol=1e-6)


def test_a_transposed_read_is_not_in_place() -> None:
    def f(c0: Any) -> Any:
        return lax.fori_loop(0, 5, lambda i, c: c.T * 0.5 + c, c0)

    how, _ = _run(f, [_x(96, 96)])
    assert "1 state element carried in place" in how  # (the counter alone)


def test_two_elements_reading_each_other() -> None:
    """(a, b) -> (a + b, a - b): each kernel reads the other's element too; the second one
    must read a as it was."""
    def f(a: Any, b: Any) -> Any:
        return lax.fori_loop(0, 6, lambda i, s: (s[0] + s[1] * 0.5, s[0] - s[1]), (a, b))

    _run(f, [_x(48, 256), _x(48, 256, seed=2)])


def test_an_inner_loop_carried_in_place() -> None:
    def f(x: Any, c0: Any) -> Any:
        def outer(j: Any, c: Any) -> Any:
            return lax.fori_loop(0, 4, lambda i, d: d + lax.dynamic_slice(
                x, (i + j, 0), (32, 128)) * 0.25, c) * 0.5
        return lax.fori_loop(0, 3, outer, c0)

    _run(f, [_x(64, 128), _x(32, 128, seed=3)])


def test_scalar_carries_in_place() -> None:
    """v = v * 0.5 + 0.5 and the counter: a scalar's one element is read where it is written
    (8.6 -> 5.3 ns a step, two buffers swapped before; XLA 4.2)."""
    def f(v: Any) -> Any:
        return lax.fori_loop(0, 100, lambda i, v: v * 0.5 + 0.5, v)

    how, _ = _run(f, [np.float32(0.3)])
    assert CARRIED in how


def test_scalars_reading_each_other_and_a_later_reader() -> None:
    """(a, b, t) -> (a + b / 2, a - b, t + sum(x * a)): the second update and the sum must
    read a as it was."""
    def f(a: Any, b: Any, x: Any) -> Any:
        return lax.fori_loop(0, 7, lambda i, s: (s[0] + s[1] * 0.5, s[0] - s[1],
                                                 s[2] + jnp.sum(x * s[0])),
                             (a, b, jnp.float32(0)))

    _run(f, [np.float32(0.75), np.float32(-1.25), _x(256)], rtol=1e-5)


def test_inexact_leaves() -> None:
    """A leaf under a rank-changing bitcast_convert is inexact; one read beside a
    dynamic_slice is not."""
    text = jax.jit(lambda c, x, i: c + lax.dynamic_slice(x, (i, i - i), (8, 16))).lower(
        _x(8, 16), _x(32, 16), np.int32(3)).as_text()
    prog = xlapy.compile(text, backend="cpu")
    exe = prog._exe  # type: ignore[attr-defined]
    (spec,) = [k for k in exe.kernel_specs if k.root.opcode == "add"]
    inline: set[int] = set()
    assert inplace.inexact_leaves(spec.root, exe.fusion.fusible, exe.materialized, inline) == set()
    (ip,) = exe._in_place_operands().values()
    assert len(ip) == 1 and exe.shapes[ip[0]].dimensions == (8, 16)  # c, not x
