"""Reductions down the rows of a narrow last dimension, in registers (column_registers.py):
f32[524288, 16].max(0) loaded, combined and stored the output row once a row (1.96 ms,
XLA 0.70; now ~1.0). The interpreter's bits for integer ops and float max/min (NaN, -0/+0,
an init used once), rows not a multiple of the chains, kept and reduced leading dimensions,
fused row and column operands, and bf16 partial outputs combined across threads."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_narrow_columns import _program
from xlapy.backends.cpu.column_registers import MAX_VECTORS
from xlapy.backends.cpu.lanes import vector_width

_DT = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "f16": np.float16,
       "i32": np.int32, "ui8": np.uint8, "i64": np.int64}


def _data(shape: tuple[int, ...], t: str, op: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if t[0] in "iu":
        hi = 200 if t == "ui8" else 1 << 20
        return rng.integers(0, hi, shape).astype(_DT[t]), np.array(
            3 if op != "minimum" else 150, _DT[t])
    x = rng.standard_normal(shape).astype(np.float32)
    x[..., 7, 1] = np.nan  # one column holds a NaN; another only zeros of both signs
    x[..., 0] = -0.0
    x[..., ::3, 0] = 0.0
    x[..., 5] = x[..., 5] * 1e-39  # (denormals: flushed, as the kernels' other reduces)
    return x.astype(_DT[t]), np.array(0.25, _DT[t])


def _in_registers(c: int, t: str) -> bool:
    """Whether c columns of 4- or 8-byte values are whole vectors, at most MAX_VECTORS of
    them, on this target (lanes as many as f32's)."""
    w = vector_width()
    return c % w == 0 and c // w <= MAX_VECTORS


def _check(shape: tuple[int, ...], dims: tuple[int, ...], t: str, op: str,
           seed: int = 0) -> xlapy.Program:
    x, init = _data(shape, t, op, seed)
    text = _program(shape, dims, t, op)
    prog = xlapy.compile(text, backend="cpu")
    got = np.asarray(prog(x, init))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x, init))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    return prog


@pytest.mark.parametrize("c", [16, 32, 64])
@pytest.mark.parametrize(("t", "op"), [("f32", "maximum"), ("f32", "minimum"),
                                       ("f64", "maximum"), ("i32", "add"), ("i64", "xor"),
                                       ("ui8", "maximum")])
def test_columns_reduce_in_registers(c: int, t: str, op: str) -> None:
    prog = _check((4096 + 3, c), (0,), t, op, c)  # (3 rows past the chains' last round)
    if t != "ui8":  # (1-byte values run more lanes, as many as the target's kernels take)
        assert ("cr.body" in prog._exe.kernel_ir) == _in_registers(c, t)


@pytest.mark.parametrize(("shape", "dims"), [((4, 1000, 16), (1,)), ((40, 500, 16), (0, 1)),
                                             ((3, 8, 700, 32), (1, 2)),
                                             ((6, 28, 28, 64), (1, 2))])
def test_leading_kept_and_reduced_dimensions(shape: tuple[int, ...],
                                             dims: tuple[int, ...]) -> None:
    prog = _check(shape, dims, "f32", "maximum", len(shape))
    assert ("cr.body" in prog._exe.kernel_ir) == _in_registers(shape[-1], "f32")


@pytest.mark.parametrize("op", ["add", "multiply"])
@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize(("shape", "dims"), [((5003, 16), (0,)), ((32, 28, 28, 64), (1, 2)),
                                             ((64, 1000, 16), (1,))])
def test_float_sums_and_products(op: str, t: str, shape: tuple[int, ...],
                                 dims: tuple[int, ...]) -> None:
    """Reassociated as the kernels' other f32/f64 chains (a global mean pool over 28 x 28
    pixels: each image's rows run as one run of 784 rows; f32[65536, 16].prod(0) 3.9x ->
    0.66x XLA, a mean over the middle of [64, 4096, 16] 1.14x -> 0.46x)."""
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape)
    x = (1 + x / 256 if op == "multiply" else x).astype(_DT[t])
    init = np.array(1.5 if op == "multiply" else 5.0, _DT[t])
    text = _program(shape, dims, t, op)
    prog = xlapy.compile(text, backend="cpu")
    assert ("cr.body" in prog._exe.kernel_ir) == _in_registers(shape[-1], t)
    want = (np.prod if op == "multiply" else np.sum)(x.astype(np.float64), axis=dims)
    want = want * 1.5 if op == "multiply" else want + 5.0
    np.testing.assert_allclose(np.asarray(prog(x, init)), want, rtol=2e-5 if t == "f32"
                               else 1e-12, atol=1e-4 if t == "f32" else 1e-10)


def test_a_wide_row_keeps_the_row_loop() -> None:
    """More vectors than MAX_VECTORS: the plain loop (its row's store-load chains are as
    many as its vectors, independent)."""
    prog = _check((512, 1024), (0,), "f32", "maximum")
    assert "cr.body" not in prog._exe.kernel_ir


@pytest.mark.parametrize("t", ["bf16", "f16"])
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_wide_rows_of_2_byte_floats_reduce_in_blocks(t: str, op: str) -> None:
    """bf16 / f16 rows wider than MAX_VECTORS reduce MAX_VECTORS vectors at a time down all
    the rows: in the output buffer each step rounded back to 2 bytes and flushed
    (bf16[4096, 1024].max(0) 0.54 -> 0.28 ms)."""
    prog = _check((700, 1024), (0,), t, op, 6)
    assert "cr.body" in prog._exe.kernel_ir and "cb.body" in prog._exe.kernel_ir


FUSED = """
func.func @main(%x: tensor<5000x16xf32>, %s: tensor<5000xf32>, %c: tensor<16xf32>)
    -> tensor<16xf32> {
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<5000xf32>) -> tensor<5000x16xf32>
  %cb = stablehlo.broadcast_in_dim %c, dims = [1] : (tensor<16xf32>) -> tensor<5000x16xf32>
  %p = stablehlo.multiply %x, %sb : tensor<5000x16xf32>
  %q = stablehlo.add %p, %cb : tensor<5000x16xf32>
  %a = stablehlo.abs %q : tensor<5000x16xf32>
  %z = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %r = stablehlo.reduce(%a init: %z) applies stablehlo.maximum across dimensions = [0]
    : (tensor<5000x16xf32>, tensor<f32>) -> tensor<16xf32>
  return %r : tensor<16xf32>
}
"""


def test_fused_row_and_column_operands() -> None:
    """A per-row scale (uniform across the lanes: broadcast) and a per-column shift."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5000, 16)).astype(np.float32)
    s = rng.standard_normal(5000).astype(np.float32)
    c = rng.standard_normal(16).astype(np.float32)
    prog = xlapy.compile(FUSED, backend="cpu")
    assert "cr.body" in prog._exe.kernel_ir
    want = np.abs(x * s[:, None] + c[None, :]).max(0)
    np.testing.assert_array_equal(np.asarray(prog(x, s, c)), want)


def test_bf16_partials_combine_across_threads() -> None:
    """A bf16 max / min over 64K elements or more splits into partial outputs (as f32's
    did), combined in order: -0 < +0, a NaN wins (bf16[262144, 32].min(0) 3.5 -> 0.41 ms,
    XLA 0.37)."""
    prog = _check((1 << 15, 32), (0,), "bf16", "minimum", 4)
    assert any(s.partial == "minimum" for s in prog._exe.kernel_specs)
    _check((1 << 15, 32), (0,), "bf16", "maximum", 5)


@pytest.mark.parametrize(("shape", "t", "op"), [
    ((512, 1024), "f32", "maximum"), ((512, 1024), "f32", "minimum"),
    ((300, 40, 56), "f64", "maximum"), ((64, 1000, 7), "f32", "maximum"),
    ((64, 1000, 7), "f32", "minimum")])
def test_wide_rows_flush_once_at_the_end(shape: tuple[int, ...], t: str, op: str) -> None:
    """The row loop's float max / min skips each element's flush and flushes its range of
    the output once (a `flush` loop after the rows): the interpreter's bits, with a column
    of denormals only (its max or min flushed to a signed zero), NaN and signed zeros, from
    an infinite init (which the denormals beat)."""
    x, _ = _data(shape, t, op, 3)
    init = np.array(-np.inf if op == "maximum" else np.inf, _DT[t])
    text = _program(shape, (0,), t, op)
    prog = xlapy.compile(text, backend="cpu")
    got = np.asarray(prog(x, init))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x, init))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    flat = want.reshape(-1)
    if t == "f32":  # (the column of f32 denormals, flushed; f64 holds them)
        assert (flat[5::shape[-1]] == 0).all()
    assert "flush.body" in prog._exe.kernel_ir and "cr.body" not in prog._exe.kernel_ir
