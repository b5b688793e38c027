# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""Folds over short rows (short_reduce.py) read their columns in lanes (column_lanes.py): a
vector of rows loads as one tile, each column one shuffle of it (or, for a power-of-two row
read at every column, the tile split into its columns). The bits are the scalar kernel's
(the same fold, element by element), for cheap and transcendental folds, rows of 2-16,
masked tails, 1 and 2 threads; jax.nn.logsumexp and friends are one kernel."""

from __future__ import annotations

import re

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import kernel_flat, lanes
from xlapy.backends.cpu.lanes import vector_width

LSE = """
func.func @main(%x: tensor<{m}x{n}xf32>) -> tensor<{m}xf32> {{
  %lo = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %lo) applies stablehlo.maximum across dimensions = [1] : (tensor<{m}x{n}xf32>, tensor<f32>) -> tensor<{m}xf32>
  %1 = stablehlo.broadcast_in_dim %lo, dims = [] : (tensor<f32>) -> tensor<{m}xf32>
  %2 = stablehlo.maximum %1, %0 : tensor<{m}xf32>
  %3 = stablehlo.is_finite %2 : (tensor<{m}xf32>) -> tensor<{m}xi1>
  %z = stablehlo.constant dense<0.0> : tensor<{m}xf32>
  %5 = stablehlo.select %3, %2, %z : tensor<{m}xi1>, tensor<{m}xf32>
  %6 = stablehlo.broadcast_in_dim %5, dims = [0] : (tensor<{m}xf32>) -> tensor<{m}x{n}xf32>
  %8 = stablehlo.subtract %x, %6 : tensor<{m}x{n}xf32>
  %9 = stablehlo.exponential %8 : tensor<{m}x{n}xf32>
  %zf = stablehlo.constant dense<0.0> : tensor<f32>
  %10 = stablehlo.reduce(%9 init: %zf) applies stablehlo.add across dimensions = [1] : (tensor<{m}x{n}xf32>, tensor<f32>) -> tensor<{m}xf32>
  %12 = stablehlo.log %10 : tensor<{m}xf32>
  %13 = stablehlo.add %12, %5 : tensor<{m}xf32>
  return %13 : tensor<{m}xf32>
}}
"""

# an RMS norm's scale over rows of n, keepdims: rsqrt(mean(x * x) + eps) of shape [m, 1]
RMS = """
func.func @main(%x: tensor<{m}x{n}x{t}>) -> tensor<{m}x1x{t}> {{
  %z = stablehlo.constant dense<0.0> : tensor<{t}>
  %0 = stablehlo.multiply %x, %x : tensor<{m}x{n}x{t}>
  %1 = stablehlo.reduce(%0 init: %z) applies stablehlo.add across dimensions = [1] : (tensor<{m}x{n}x{t}>, tensor<{t}>) -> tensor<{m}x{t}>
  %2 = stablehlo.reshape %1 : (tensor<{m}x{t}>) -> tensor<{m}x1x{t}>
  %k = stablehlo.constant dense<0.125> : tensor<{m}x1x{t}>
  %e = stablehlo.constant dense<1.0e-6> : tensor<{m}x1x{t}>
  %3 = stablehlo.multiply %2, %k : tensor<{m}x1x{t}>
  %4 = stablehlo.add %3, %e : tensor<{m}x1x{t}>
  %5 = stablehlo.rsqrt %4 : tensor<{m}x1x{t}>
  return %5 : tensor<{m}x1x{t}>
}}
"""


def _rows(m: int, n: int, seed: int = 0) -> np.ndarray:
    x = (np.random.default_rng(seed).standard_normal((m, n)) * 3).astype(np.float32)
    x[0, 0], x[1, -1], x[2, :] = np.nan, np.inf, -np.inf
    x[3, 0], x[4, 1 % n] = -0.0, 1e-40
    return x


def _in_lanes(prog: xlapy.CompiledProgram) -> bool:
    """One kernel, storing its results a vector at a time."""
    assert len(prog._exe.kernel_specs) == 1
    return re.search(r"store <\d+ x ", prog._exe.kernel_ir) is not None


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [2, 3, 5, 8, 10, 16])
@pytest.mark.parametrize("m", [1000, 37])
def test_logsumexp_folds_in_lanes_with_the_scalar_bits(
        m: int, n: int, threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """jax.nn.logsumexp over short rows: its max and its sum of exps both folded (the max
    broadcast back only into the sum's fold), one kernel over the rows in lanes."""
    text = LSE.format(m=m, n=n)
    x = _rows(m, n, n)
    opts = {"num_threads": threads, "split_cost": 1}
    prog = xlapy.compile(text, backend="cpu", options=opts)
    assert _in_lanes(prog)
    got = np.asarray(prog(x))
    monkeypatch.setattr(lanes, "column_ok", lambda dims, p: False)
    ref = xlapy.compile(text, backend="cpu", options=opts)
    assert not _in_lanes(ref)
    np.testing.assert_array_equal(got.view(np.uint32), np.asarray(ref(x)).view(np.uint32))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x))
    np.testing.assert_allclose(got, want, rtol=2e-6)


@pytest.mark.parametrize("t", ["f32", "f64", "bf16"])
@pytest.mark.parametrize("n", [3, 4, 8])
def test_keepdims_roots_run_their_rows_in_lanes(t: str, n: int) -> None:
    """A root whose last dimension is one element ([m, 1]) is walked without it: its lanes
    run along the rows, each column of x read as one shuffle of a tile."""
    import ml_dtypes

    m = 515
    dt = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16}[t]
    x = _rows(m, n, 3).astype(dt)
    x[2, :] = 1.5
    text = RMS.format(m=m, n=n, t=t)
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": 2, "split_cost": 1})
    assert _in_lanes(prog)
    want = xlapy.compile(text, backend="interpreter")(x)
    np.testing.assert_array_equal(np.asarray(prog(x)).view(np.uint8),
                                  np.asarray(want).view(np.uint8))


@pytest.mark.parametrize("n", [8, 10])
def test_a_tile_is_split_or_shuffled_by_row_length(n: int) -> None:
    """Rows of 8 read at all 8 columns: the tile's vectors split in halves, three rounds of
    two-vector shuffles; rows of 10: one wide load, a shuffle of it per column."""
    prog = xlapy.compile(LSE.format(m=4096, n=n), backend="cpu")
    ir = prog._exe.kernel_ir
    w = vector_width()
    wide = f"<{w * n} x float>"
    assert (wide in ir) == (n == 10)
    x = _rows(4096, n)
    np.testing.assert_allclose(np.asarray(prog(x)), np.asarray(
        xlapy.compile(LSE.format(m=4096, n=n), backend="interpreter")(x)), rtol=2e-6)


def test_cheap_folds_past_eight_fold_when_not_spread_out() -> None:
    """A sum of squares over 16 columns (a vector's length on AVX-512) whose values are not
    spread back out folds (short_reduce._spread): 65536 rows 0.25 -> 0.14 ms, of 10 0.13 ->
    0.07, compiled in 11 ms instead of 6."""
    prog = xlapy.compile(RMS.format(m=512, n=16, t="f32"), backend="cpu")
    assert not prog._exe.row_reduces


@pytest.mark.parametrize("n", [8, 10])
def test_log_softmax_buffers_its_folded_log_sum(n: int) -> None:
    """jax.nn.log_softmax over 8-10 classes: the sum of exps is folded (transcendental), and
    its log, constant along the rows of the output, gets a buffer computed in lanes; inside
    the row kernel it was a fold a row at a time in scalar code (2.6-2.8x XLA's time)."""
    jax = pytest.importorskip("jax")
    x = _rows(4096, n, 5)
    text = jax.jit(lambda v: jax.nn.log_softmax(v, -1)).lower(x).as_text()
    prog = xlapy.compile(text, backend="cpu")
    assert any("a buffer computed in lanes" in d.reason for d in prog._exe.fusion.decisions)
    want = xlapy.compile(text, backend="interpreter")(x)
    np.testing.assert_allclose(np.asarray(prog(x)), np.asarray(want), rtol=1e-5, atol=1e-6)


BACK = """
func.func @main(%x: tensor<{m}x{n}x{t}>, %i: tensor<{t}>) -> (tensor<{m}x{t}>, tensor<{m}x{n}x{t}>) {{
  %r = stablehlo.reduce(%x init: %i) applies stablehlo.{op} across dimensions = [1] : (tensor<{m}x{n}x{t}>, tensor<{t}>) -> tensor<{m}x{t}>
  %b = stablehlo.broadcast_in_dim %r, dims = [0] : (tensor<{m}x{t}>) -> tensor<{m}x{n}x{t}>
  %d = stablehlo.subtract %x, %b : tensor<{m}x{n}x{t}>
  return %r, %d : tensor<{m}x{t}>, tensor<{m}x{n}x{t}>
}}
"""


@pytest.mark.parametrize("n", [3, 8, 10])
@pytest.mark.parametrize(("t", "op"), [("f32", "maximum"), ("f32", "add"), ("bf16", "add"),
                                       ("i32", "minimum")])
def test_a_reduce_root_over_short_rows_is_a_fold(n: int, t: str, op: str) -> None:
    """A reduce that is a result and broadcast back (its own kernel, not a row kernel's)
    over rows of 3-8: walked as the fold (kernel_flat.fold_root), the interpreter's bits;
    it folded a row at a time (a max over [65536, 8]: 0.19 ms, now 0.09). Rows of 10 keep
    the reduce (the fold compiled 2.7x slower for 20% less time)."""
    import ml_dtypes

    m = 1003
    rng = np.random.default_rng(n)
    if t == "i32":
        x, init = rng.integers(-99, 99, (m, n)).astype(np.int32), np.array(50, np.int32)
    else:
        dt = np.float32 if t == "f32" else ml_dtypes.bfloat16
        x = _rows(m, n, n).astype(dt)
        init = np.array(-np.inf if op == "maximum" else 0.25, dt)
    text = BACK.format(m=m, n=n, t=t, op=op)
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": 2, "split_cost": 1})
    red = [k.root for k in prog._exe.kernel_specs if k.root.opcode == "reduce"]
    assert len(red) == 1
    assert kernel_flat.fold_root(red[0]).opcode == (op if n <= kernel_flat.FOLD_ROOT else "reduce")
    exact = n <= kernel_flat.FOLD_ROOT or op != "add" or t == "i32"  # (else lanes reassociate)
    for g, w in zip(prog(x, init), xlapy.compile(text, backend="interpreter")(x, init)):
        if exact:
            np.testing.assert_array_equal(np.asarray(g).view(np.uint8),
                                          np.asarray(w).view(np.uint8))
        else:
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                       rtol=2e-2 if t == "bf16" else 1e-5, atol=1e-5)


def test_cross_entropy_gradient_folds_its_label_sum_too() -> None:
    """jax.grad of optax's softmax cross entropy over 10 classes: the labels' sum (cheap, 10
    columns) meets the folded sum of exps, so it is folded too (short_reduce.companions):
    no kernel is left a row kernel running the fold a row at a time; and x - max(x) is
    not buffered at [rows, 10] for its two kernels (the max is, a tenth of it)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def xent(lg: object, lb: object) -> object:
        return -jnp.mean(jnp.sum(lb * jax.nn.log_softmax(lg, -1), -1))

    x = _rows(4096, 10, 7)
    x[2, :] = 0.5
    lb = np.eye(10, dtype=np.float32)[np.random.default_rng(1).integers(0, 10, 4096)]
    for fn in (xent, jax.grad(xent)):
        text = jax.jit(fn).lower(x, lb).as_text()
        prog = xlapy.compile(text, backend="cpu")
        assert not prog._exe.row_reduces
        assert not [k for k in prog._exe.kernel_specs
                    if k.root.opcode == "subtract" and k.root.shape.dimensions == (4096, 10)]
        want = xlapy.compile(text, backend="interpreter")(x, lb)
        np.testing.assert_allclose(np.asarray(prog(x, lb)), np.asarray(want), rtol=2e-5,
                                   atol=1e-9)
