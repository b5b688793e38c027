# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""Concatenates and pads inside an element-wise kernel that branch along its innermost
dimension (index_emit.inner_cuts): the kernel runs in lanes, its innermost loop in segments
where each such op takes one case, with the interpreter's bits. Before, any such branch kept
the whole kernel scalar: jnp.concatenate([a, b], -1) * 2 ran 5x slower than along dim 0, a
stencil over jnp.pad(u, 1, mode="edge") 2.2x XLA's time."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import xlapy
from xlapy.backends.cpu import index_emit


def _t(*dims: int) -> str:
    return f"tensor<{'x'.join(map(str, dims))}xf32>"


def _run(text: str, *args: np.ndarray) -> object:
    """The cpu program (bits equal to the interpreter's, no fallback)."""
    cpu = xlapy.compile(text, backend="cpu")
    ref = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    got = np.asarray(cpu(*args))
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))
    assert not cpu._exe.fallbacks()  # type: ignore[attr-defined]
    return cpu


def _explicit(prog: object) -> list[bool]:
    return [k.explicit for k in prog._exe.kernel_specs]  # type: ignore[attr-defined]


def _values(*dims: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(dims).astype(np.float32)
    x.reshape(-1)[::5] = np.float32(1e-40)  # denormals: flushed as everywhere else
    return x


def _edge_stencil(r: int, c: int) -> str:
    """u + 0.1 * (the four neighbours - 4 u) over jnp.pad(u, 1, mode="edge") as JAX lowers
    it: a concatenate of edge rows, then one of edge columns, read through four slices."""
    u, rows, full = _t(r, c), _t(r + 2, c), _t(r + 2, c + 2)
    return f"""
func.func @main(%u: {u}) -> {u} {{
  %t = stablehlo.slice %u [0:1, 0:{c}] : ({u}) -> {_t(1, c)}
  %b = stablehlo.slice %u [{r - 1}:{r}, 0:{c}] : ({u}) -> {_t(1, c)}
  %p0 = stablehlo.concatenate %t, %u, %b, dim = 0 : ({_t(1, c)}, {u}, {_t(1, c)}) -> {rows}
  %l = stablehlo.slice %p0 [0:{r + 2}, 0:1] : ({rows}) -> {_t(r + 2, 1)}
  %q = stablehlo.slice %p0 [0:{r + 2}, {c - 1}:{c}] : ({rows}) -> {_t(r + 2, 1)}
  %p = stablehlo.concatenate %l, %p0, %q, dim = 1 : ({_t(r + 2, 1)}, {rows}, {_t(r + 2, 1)}) -> {full}
  %n = stablehlo.slice %p [0:{r}, 1:{c + 1}] : ({full}) -> {u}
  %s = stablehlo.slice %p [2:{r + 2}, 1:{c + 1}] : ({full}) -> {u}
  %w = stablehlo.slice %p [1:{r + 1}, 0:{c}] : ({full}) -> {u}
  %e = stablehlo.slice %p [1:{r + 1}, 2:{c + 2}] : ({full}) -> {u}
  %a1 = stablehlo.add %n, %s : {u}
  %a2 = stablehlo.add %a1, %w : {u}
  %a3 = stablehlo.add %a2, %e : {u}
  %four = stablehlo.constant dense<4.0> : {u}
  %m = stablehlo.multiply %four, %u : {u}
  %d = stablehlo.subtract %a3, %m : {u}
  %k = stablehlo.constant dense<0.1> : {u}
  %g = stablehlo.multiply %k, %d : {u}
  %o = stablehlo.add %u, %g : {u}
  return %o : {u}
}}
"""


@pytest.mark.parametrize("r,c", [(64, 64), (33, 45), (5, 3), (2, 1), (17, 130)])
def test_an_edge_padded_stencil_runs_in_lanes(r: int, c: int) -> None:
    prog = _run(_edge_stencil(r, c), _values(r, c))
    if c >= 16:
        assert _explicit(prog) == [True]


@pytest.mark.parametrize("n", [1, 7, 16, 37, 64])
def test_a_concatenate_along_the_last_dimension_under_an_element_wise_root(n: int) -> None:
    a, b = _t(16, 37), _t(16, n)
    out = _t(16, 37 + n)
    prog = _run(f"""
func.func @main(%a: {a}, %b: {b}) -> {out} {{
  %c = stablehlo.concatenate %a, %b, dim = 1 : ({a}, {b}) -> {out}
  %m = stablehlo.abs %c : {out}
  %e = stablehlo.sqrt %m : {out}
  %two = stablehlo.constant dense<2.0> : {out}
  %r = stablehlo.multiply %e, %two : {out}
  return %r : {out}
}}
""", _values(16, 37), _values(16, n, seed=1))
    assert _explicit(prog) == [True]


@pytest.mark.parametrize("lo,hi", [(1, 1), (3, -2), (-4, 6), (0, 9)])
def test_constant_pads_read_through_shifted_slices(lo: int, hi: int) -> None:
    """pad(x, v)[:, :-2] * pad(y, v)[:, 2:] (a shifted difference): two pads, each with its
    own cuts, and a scalar padding value read inside one segment."""
    c = 40
    w = c + lo + hi
    x, v, p = _t(8, c), "tensor<f32>", _t(8, w)
    s = _t(8, w - 2)
    prog = _run(f"""
func.func @main(%x: {x}, %y: {x}, %v: {v}) -> {s} {{
  %p = stablehlo.pad %x, %v, low = [0, {lo}], high = [0, {hi}], interior = [0, 0] : ({x}, {v}) -> {p}
  %q = stablehlo.pad %y, %v, low = [0, {lo}], high = [0, {hi}], interior = [0, 0] : ({x}, {v}) -> {p}
  %a = stablehlo.slice %p [0:8, 0:{w - 2}] : ({p}) -> {s}
  %b = stablehlo.slice %q [0:8, 2:{w}] : ({p}) -> {s}
  %r = stablehlo.multiply %a, %b : {s}
  return %r : {s}
}}
""", _values(8, c), _values(8, c, seed=2), np.float32(-3.5))
    assert _explicit(prog) == [True]


def test_the_lane_through_transposes() -> None:
    """A concatenate along dimension 0 of transposed operands, transposed back: the lane
    runs along the concatenate's dimension there (and along the leaves' rows)."""
    a, b, ta, tb = _t(16, 37), _t(16, 20), _t(37, 16), _t(20, 16)
    cat, out = _t(57, 16), _t(16, 57)
    prog = _run(f"""
func.func @main(%a: {a}, %b: {b}, %z: {out}) -> {out} {{
  %x = stablehlo.transpose %a, dims = [1, 0] : ({a}) -> {ta}
  %y = stablehlo.transpose %b, dims = [1, 0] : ({b}) -> {tb}
  %c = stablehlo.concatenate %x, %y, dim = 0 : ({ta}, {tb}) -> {cat}
  %t = stablehlo.transpose %c, dims = [1, 0] : ({cat}) -> {out}
  %r = stablehlo.add %t, %z : {out}
  return %r : {out}
}}
""", _values(16, 37), _values(16, 20, seed=1), _values(16, 57, seed=2))
    assert _explicit(prog) == [True]


def test_too_many_segments_stay_one_scalar_loop() -> None:
    """More cuts than MAX_SEGMENTS segments: the branches stay (scalar), the bits too."""
    k = index_emit.MAX_SEGMENTS + 2
    parts = ", ".join(f"%a{j}" for j in range(k))
    x = _t(4, 3)
    out = _t(4, 3 * k)
    args = "".join(f", %a{j}: {x}" for j in range(k))[2:]
    prog = _run(f"""
func.func @main({args}) -> {out} {{
  %c = stablehlo.concatenate {parts}, dim = 1 : ({", ".join([x] * k)}) -> {out}
  %two = stablehlo.constant dense<2.0> : {out}
  %r = stablehlo.multiply %c, %two : {out}
  return %r : {out}
}}
""", *[_values(4, 3, seed=j) for j in range(k)])
    assert _explicit(prog) == [False]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(-3, 5), st.integers(-3, 5),
       st.integers(0, 3), st.integers(0, 3))
def test_random_pads_of_concatenates_read_at_two_shifts(na: int, nb: int, lo: int, hi: int,
                                                        s1: int, s2: int) -> None:
    """pad(concatenate(a, b)) read through two slices at random shifts: the interpreter's
    bits whatever the cuts' order and overlap."""
    w = na + nb + lo + hi
    n = w - max(s1, s2)
    assume(n > 0)
    a, b, c, p, s = _t(3, na), _t(3, nb), _t(3, na + nb), _t(3, w), _t(3, n)
    _run(f"""
func.func @main(%a: {a}, %b: {b}, %v: tensor<f32>) -> {s} {{
  %c = stablehlo.concatenate %a, %b, dim = 1 : ({a}, {b}) -> {c}
  %p = stablehlo.pad %c, %v, low = [0, {lo}], high = [0, {hi}], interior = [0, 0] : ({c}, tensor<f32>) -> {p}
  %x = stablehlo.slice %p [0:3, {s1}:{s1 + n}] : ({p}) -> {s}
  %y = stablehlo.slice %p [0:3, {s2}:{s2 + n}] : ({p}) -> {s}
  %m = stablehlo.multiply %x, %y : {s}
  %r = stablehlo.add %m, %x : {s}
  return %r : {s}
}}
""", _values(3, na), _values(3, nb, seed=1), np.float32(0.25))
