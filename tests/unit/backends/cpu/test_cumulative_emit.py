"""Cumulative windows in XLA CPU's order (cumulative_emit.py): blocks of 16 along the axis,
their totals scanned the same way, recursively; bit for bit a numpy model of that order
(tests/differential/test_reduction_vs_xla.py holds it against jax itself)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import cumulative_emit
from xlapy.types import ElementType as ET

from .test_window_emit import IDENTITY, check, data, reduce_window, same, scalar

Op = Callable[[np.ndarray, np.ndarray], np.ndarray]
OPS: dict[str, tuple[Op, float]] = {"add": (np.add, 0.0), "multiply": (np.multiply, 1.0)}


def _rounded(op: Op, dt: Any) -> Op:
    """`op` computed in f32 (f64 for f64) and rounded to `dt`, as one HLO op of that type."""
    wide = np.float64 if np.dtype(dt) == np.float64 else np.float32
    return lambda a, b: op(a.astype(wide), b.astype(wide)).astype(dt)


def _fold(x: np.ndarray, op: Op, init: Any, dt: Any) -> np.ndarray:
    """Each window's left-to-right fold from the init: forward windows end at each element."""
    out = np.empty_like(x)
    acc = np.full(x.shape[:-1], init, dt)
    for i in range(x.shape[-1]):
        acc = op(acc, x[..., i])
        out[..., i] = acc
    return out


def _rfold(x: np.ndarray, op: Op, init: Any, dt: Any) -> np.ndarray:
    """Reversed windows (element i to the end), each folded left to right."""
    n = x.shape[-1]
    out = np.empty_like(x)
    for i in range(n):
        acc = np.full(x.shape[:-1], init, dt)
        for w in range(i, n):
            acc = op(acc, x[..., w])
        out[..., i] = acc
    return out


def xla_order(x: np.ndarray, op: Op, init: Any, rev: bool) -> np.ndarray:
    """XLA CPU's cumulative order along the last axis (ReduceWindowRewriter, base 16)."""
    dt, n = x.dtype, x.shape[-1]
    fold = _rfold if rev else _fold
    if n <= cumulative_emit.BASE:
        return fold(x, op, init, dt)
    m = -(-n // 16)
    padded = np.full(x.shape[:-1] + (m * 16,), init, dt)
    padded[..., :n] = x
    inner = fold(padded.reshape(x.shape[:-1] + (m, 16)), op, init, dt)
    scanned = xla_order(inner[..., 0] if rev else inner[..., -1], op, init, rev)
    edge = np.full(x.shape[:-1] + (1,), init, dt)
    excl = np.concatenate([scanned[..., 1:], edge] if rev else [edge, scanned[..., :-1]], -1)
    return op(inner, excl[..., None]).reshape(x.shape[:-1] + (m * 16,))[..., :n]


def _cumulative(t: ET, dims: tuple[int, ...], axis: int, op: str, rev: bool) -> str:
    n = dims[axis]
    window = [1] * len(dims)
    window[axis] = n
    pads = [(0, 0)] * len(dims)
    pads[axis] = (0, n - 1) if rev else (n - 1, 0)
    return reduce_window(t, dims, op, window, padding=pads)


def _model(x: np.ndarray, t: ET, axis: int, op: str, rev: bool) -> np.ndarray:
    fn, init = OPS[op]
    xs = np.moveaxis(np.asarray(x), axis, -1)
    return np.moveaxis(xla_order(xs, _rounded(fn, xs.dtype), init, rev), -1, axis)


def _values(t: ET, dims: tuple[int, ...], op: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(dims)
    v = 1 + 1e-2 * v if op == "multiply" else v
    return v.astype(ml_dtypes.bfloat16 if t is ET.BF16 else t.dtype)


@pytest.mark.parametrize("t", [ET.F32, ET.F64, ET.BF16])
@pytest.mark.parametrize("op", ["add", "multiply"])
@pytest.mark.parametrize("rev", [False, True])
@pytest.mark.parametrize("n", [5, 16, 17, 33, 256, 257, 1000])
def test_last_axis_in_xlas_order(t: ET, op: str, rev: bool, n: int) -> None:
    x = _values(t, (3, n), op, n)
    text = _cumulative(t, (3, n), 1, op, rev)
    got = xlapy.compile(text, backend="cpu")(x, scalar(t, OPS[op][1]))
    same(got, _model(x, t, 1, op, rev))



@pytest.mark.parametrize("t", [ET.F32, ET.F64, ET.BF16])
@pytest.mark.parametrize("n", [16, 48, 50])
def test_reversed_last_axis_folds_blocks_as_vectors(t: ET, n: int) -> None:
    """A reversed walk along the last axis folds each full block of 16 in one vector (lane j
    adding the block rotated by one more lane per step): the same bits as the scalar fold,
    signed zeros, infinities and NaN included, the partial last block still scalar."""
    x = _values(t, (4, n), "add", n)
    x[0, ::3] = -0.0
    x[1, 5] = np.inf
    x[2, 7] = np.nan
    x[3, 20 % n] = -np.inf
    text = _cumulative(t, (4, n), 1, "add", True)
    cpu = xlapy.compile(text, backend="cpu")
    same(cpu(x, scalar(t, 0.0)), _model(x, t, 1, "add", True))
    lane = {ET.F32: "float", ET.F64: "double", ET.BF16: "float"}[t]
    assert f"shufflevector <16 x {lane}>" in cpu._exe.kernel_ir

@pytest.mark.parametrize(("dims", "axis"), [((300, 5), 0), ((40, 300), 0), ((20, 1100), 0),
                                            ((4, 300, 7), 1), ((2, 70, 3), 1), ((48, 40), 0)])
@pytest.mark.parametrize("rev", [False, True])
@pytest.mark.parametrize("t", [ET.F32, ET.F64, ET.BF16])
def test_other_axes_and_tiles_in_xlas_order(dims: tuple[int, ...], axis: int,
                                            rev: bool, t: ET) -> None:
    """Rows along dimension 0 wider than a tile (256 f32s reversed, 1024 forward) walk the
    axis once per tile, a reversed one's full blocks a vector of inner positions at a time
    and the rest of the tile one by one; the split over threads (2) never changes a bit."""
    x = _values(t, dims, "add", sum(dims))
    x.flat[::9] = -0.0
    text = _cumulative(t, dims, axis, "add", rev)
    want = _model(x, t, axis, "add", rev)
    for threads in (1, 2):
        got = xlapy.compile(text, backend="cpu", options={"num_threads": threads})(
            x, scalar(t, 0.0))
        same(got, want)


@pytest.mark.parametrize("t", [ET.F32, ET.F64, ET.BF16])
@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("dims", [(40, 33), (37, 9), (300, 3)])
def test_reversed_max_min_across_columns_fold_suffixes(t: ET, op: str,
                                                       dims: tuple[int, int]) -> None:
    """A reversed cummax / cummin along axis 0 folds each block's suffixes right to left
    in a loop (cumulative_emit._suffix_block): the interpreter's values, signed zeros,
    infinities and NaNs included, from a kernel of a few hundred IR lines (the 136 unrolled
    left-to-right folds per block were 2,600 lines in f32, 6,000 in bf16, and 0.6-1.2 s of
    LLVM on a 2-core Zen 3)."""
    x = data(t, dims, sum(dims))
    x[::3, 0] = -0.0
    x[1::3, 0] = 0.0
    x[5, 1] = np.nan
    x[7, 2] = np.inf
    x[dims[0] - 1, dims[1] - 1] = -np.inf
    text = reduce_window(t, dims, op, [dims[0], 1], padding=[(0, dims[0] - 1), (0, 0)])
    exe = xlapy.compile(text, backend="cpu")
    check(text, [x, scalar(t, IDENTITY[op])], "reduce_window")
    assert len(exe._exe.kernel_ir.splitlines()) < 1000, len(exe._exe.kernel_ir.splitlines())


def test_complex_cumsum_is_native_in_xlas_order() -> None:
    """A complex cumsum runs as its parts' (passes/complex_windows.py), each in the order."""
    n = 300
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, n)) + 1j * rng.standard_normal((2, n))).astype(np.complex64)
    text = f"""
func.func @main(%x: tensor<2x{n}xcomplex<f32>>) -> tensor<2x{n}xcomplex<f32>> {{
  %c = stablehlo.constant dense<(0.0, 0.0)> : tensor<complex<f32>>
  %0 = "stablehlo.reduce_window"(%x, %c) <{{window_dimensions = array<i64: 1, {n}>,
      padding = dense<[[0, 0], [{n - 1}, 0]]> : tensor<2x2xi64>}}> ({{
  ^bb0(%a: tensor<complex<f32>>, %b: tensor<complex<f32>>):
    %1 = stablehlo.add %a, %b : tensor<complex<f32>>
    stablehlo.return %1 : tensor<complex<f32>>
  }}) : (tensor<2x{n}xcomplex<f32>>, tensor<complex<f32>>) -> tensor<2x{n}xcomplex<f32>>
  return %0 : tensor<2x{n}xcomplex<f32>>
}}"""
    exe = xlapy.compile(text, backend="cpu")
    got = np.asarray(exe(x))
    assert not exe._exe.fallbacks()
    add = _rounded(np.add, np.float32)
    for part in (np.real, np.imag):
        same(part(got), xla_order(part(x).astype(np.float32), add, 0.0, False))


@pytest.mark.parametrize("op", ["add", "multiply", "maximum"])
@pytest.mark.parametrize("rev", [False, True])
def test_integer_scans_are_the_interpreters(op: str, rev: bool) -> None:
    """Integer reducers give the same bits in any order: the running / suffix scan stays."""
    x = data(ET.S32, (4, 300), seed=5)
    init = {"add": 0, "multiply": 1, "maximum": -2 ** 31}[op]
    check(_cumulative(ET.S32, (4, 300), 1, op, rev), [x, scalar(ET.S32, init)],
          "reduce_window")


def test_levels_and_when_the_order_differs() -> None:
    assert [cumulative_emit.levels(n) for n in (1, 16, 17, 256, 257, 4096, 4097)] == \
        [0, 0, 1, 1, 2, 2, 3]
    needed = cumulative_emit.needed
    assert not needed("add", ET.F32, 16, False) and needed("add", ET.F32, 17, False)
    assert needed("add", ET.F32, 5, True)  # (a suffix scan is not each window's fold)
    assert needed("maximum", ET.F32, 100, False)  # (+0 / -0 ties)
    assert needed(None, ET.F32, 100, False)  # (a region: cumlogsumexp)
    assert not needed("add", ET.S32, 100, True) and not needed("maximum", ET.U8, 100, False)
    assert needed("add", ET.C64, 100, False)
