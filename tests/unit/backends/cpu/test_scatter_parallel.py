"""Scatter split over threads by rows of the result (scatter_emit.py): every element still
gets its updates in the interpreter's order from one thread, so the bits equal the
interpreter's and the one-thread run's for any thread count (add / multiply / replace,
duplicates, out-of-bounds windows skipped, windows spanning rows, batching dims, variadic)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import lanes, scatter_emit
from xlapy.types import ElementType as ET

from .test_scatter_emit import scatter
from .test_window_emit import data, same

#: split_cost 1: every scatter whose windows allow it is split, however small.
SPLIT = {"split_cost": 1}
#: The threshold the backend runs with.
DEFAULT_MIN_SPLIT = scatter_emit.MIN_SPLIT_WINDOW


@pytest.fixture(autouse=True)
def _small_windows_split(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cases' windows of 8-12 elements split (the default threshold is a cost choice:
    test_windows_of_one_vector_stay_sequential)."""
    monkeypatch.setattr(scatter_emit, "MIN_SPLIT_WINDOW", 8)
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")


def run(text: str, args: Sequence[Any], threads: int) -> tuple[Any, Any]:
    """The cpu result on `threads` threads, and the executable (no fallback)."""
    exe = xlapy.compile(text, backend="cpu", options={**SPLIT, "num_threads": threads})
    assert "scatter" not in {o for _, o in exe._exe.fallbacks()}, exe._exe.explain()
    return exe(*args), exe


def scatter_specs(exe: Any) -> list[Any]:
    return [k for k in exe._exe.kernel_specs if k.root.opcode == "scatter"]


def check_threads(text: str, args: Sequence[Any], split: bool = True) -> None:
    """Bits equal to the interpreter on 1-4 threads; the kernel split as expected."""
    ref = xlapy.compile(text)(*args)
    one, exe = run(text, args, 1)
    same(one, ref)
    specs = scatter_specs(exe)
    assert len(specs) == 1 and specs[0].splittable == split
    for threads in (2, 3, 4):
        got, _ = run(text, args, threads)
        same(got, ref)
        same(got, one)


def indices(n: int, hi: int, seed: int, cols: int = 1) -> np.ndarray:
    """Random starts in [-3, hi + 3): duplicates and out-of-bounds ones (skipped)."""
    return np.random.default_rng(seed).integers(-3, hi + 3, (n, cols)).astype(np.int32)


@pytest.mark.parametrize("t", [ET.F32, ET.F64, ET.S32])
@pytest.mark.parametrize("kind", ["add", "multiply", "replace"])
def test_one_row_windows(t: ET, kind: str) -> None:
    """x.at[idx].op(u) on rows (the jax scatter_add workload's form), many duplicates."""
    dims, n = (37, 8), 300
    idx = indices(n, dims[0], 1)
    text = scatter(t, ET.S32, dims, idx.shape, (n, 8), [1], [0], [0], 1, kind)
    check_threads(text, [data(t, dims, 1), idx, data(t, (n, 8), 2)])


@pytest.mark.parametrize("kind", ["add", "replace"])
def test_windows_spanning_rows(kind: str) -> None:
    """4x3 windows starting anywhere (some sticking out, dropped whole): each thread applies
    only the window rows in its range."""
    dims, n = (23, 6), 200
    idx = np.concatenate([indices(n, 20, 3), indices(n, 4, 4)], axis=1)
    text = scatter(ET.F32, ET.S32, dims, idx.shape, (n, 4, 3), [1, 2], [], [0, 1], 1, kind)
    check_threads(text, [data(ET.F32, dims, 1), idx, data(ET.F32, (n, 4, 3), 2)])


def test_column_windows() -> None:
    """Columns indexed, every window covering all rows: split inside each window."""
    dims, n = (9, 30), 100
    idx = indices(n, dims[1], 5)
    text = scatter(ET.F32, ET.S32, dims, idx.shape, (n, 9), [1], [1], [1], 1, "add")
    check_threads(text, [data(ET.F32, dims, 1), idx, data(ET.F32, (n, 9), 2)])


def test_batching_dims() -> None:
    """vmap of x.at[i].add(u): the outer dimension is the batch, taken from the position."""
    dims, n = (5, 10, 8), 40
    idx = np.random.default_rng(6).integers(-2, 12, (5, n, 1)).astype(np.int32)
    text = scatter(ET.F64, ET.S32, dims, idx.shape, (5, n, 8), [2], [1], [1], 2, "add",
                   (0,), (0,))
    check_threads(text, [data(ET.F64, dims, 1), idx, data(ET.F64, (5, n, 8), 2)])


def test_small_windows_stay_sequential() -> None:
    """Point updates (one element per position): every thread would rescan all positions
    for one element each, so the kernel is not split; still exact."""
    dims, n = (40, 3), 500
    idx = indices(n, dims[0], 7, cols=2) % np.int32(3)
    text = scatter(ET.F32, ET.S32, dims, idx.shape, (n,), [], [0, 1], [0, 1], 1, "add")
    assert scatter_emit.MIN_SPLIT_WINDOW > 1
    check_threads(text, [data(ET.F32, dims, 1), idx, data(ET.F32, (n,), 2)], split=False)


def test_windows_of_one_vector_stay_sequential(monkeypatch: pytest.MonkeyPatch) -> None:
    """segment_sum's rows of 16 floats: listing every position on each thread costs more
    than the half of the updates it saves, so the kernel is not split; still exact."""
    monkeypatch.setattr(scatter_emit, "MIN_SPLIT_WINDOW", DEFAULT_MIN_SPLIT)
    dims, n = (128, 16), 3000
    idx = indices(n, dims[0], 8)
    text = scatter(ET.F32, ET.S32, dims, idx.shape, (n, 16), [1], [0], [0], 1, "add")
    check_threads(text, [data(ET.F32, dims, 1), idx, data(ET.F32, (n, 16), 2)], split=False)


VARIADIC = """
func.func @main(%x: tensor<16x8xf32>, %y: tensor<16x8xi32>, %i: tensor<90x1xi32>,
                %u: tensor<90x8xf32>, %v: tensor<90x8xi32>)
    -> (tensor<16x8xf32>, tensor<16x8xi32>) {
  %0:2 = "stablehlo.scatter"(%x, %y, %i, %u, %v) <{scatter_dimension_numbers =
      #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0],
      scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<i32>, %c: tensor<f32>, %d: tensor<i32>):
    %1 = stablehlo.compare GE, %c, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %2 = stablehlo.select %1, %c, %a : tensor<i1>, tensor<f32>
    %3 = stablehlo.select %1, %d, %b : tensor<i1>, tensor<i32>
    stablehlo.return %2, %3 : tensor<f32>, tensor<i32>
  }) : (tensor<16x8xf32>, tensor<16x8xi32>, tensor<90x1xi32>, tensor<90x8xf32>,
        tensor<90x8xi32>) -> (tensor<16x8xf32>, tensor<16x8xi32>)
  return %0#0, %0#1 : tensor<16x8xf32>, tensor<16x8xi32>
}"""


def test_variadic_scatter() -> None:
    """A scatter-argmax over rows (a TupleKernel): ties resolved by order, both results."""
    rng = np.random.default_rng(8)
    args = [np.zeros((16, 8), np.float32), np.full((16, 8), -1, np.int32),
            indices(90, 16, 9),
            rng.integers(0, 4, (90, 8)).astype(np.float32),  # many ties: order matters
            np.arange(90 * 8, dtype=np.int32).reshape(90, 8)]
    check_threads(VARIADIC, args)


def test_float_add_order_on_threads() -> None:
    """Long chains of float adds into few rows (rounding depends on the order): equal to
    the interpreter on every thread count, rows owned by both threads' ranges."""
    dims, n = (4, 16), 4000
    idx = np.random.default_rng(10).integers(0, 4, (n, 1)).astype(np.int32)
    upd = (np.random.default_rng(11).standard_normal((n, 16)) *
           np.logspace(-6, 6, 16)).astype(np.float32)
    text = scatter(ET.F32, ET.S32, dims, idx.shape, (n, 16), [1], [0], [0], 1, "add")
    check_threads(text, [np.zeros(dims, np.float32), idx, upd])


def test_scatter_from_jax_on_threads() -> None:
    """The benchmark's form, lowered by JAX, against XLA on two threads."""
    jax = pytest.importorskip("jax")
    x = data(ET.F32, (64, 16), 3)
    i = np.random.default_rng(12).integers(-5, 70, 2000).astype(np.int32)
    u = data(ET.F32, (2000, 16), 4)
    f = jax.jit(lambda a, j, v: a.at[j].add(v))
    text = f.lower(x, i, u).as_text()
    check_threads(text, [x, i, u])
    got, _ = run(text, [x, i, u], 2)
    np.testing.assert_allclose(np.asarray(got), np.asarray(f(x, i, u)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("t", [ET.F32, ET.F64, ET.S32, ET.U32, ET.S64])
@pytest.mark.parametrize("kind", ["add", "multiply", "subtract", "maximum", "minimum",
                                  "replace", "sub_swapped"])
def test_vector_rows(t: ET, kind: str) -> None:
    """Rows of 37 (vectors of the target's width, then a scalar remainder) with denormals,
    NaNs and infinities in both operands: the vector update is the scalar one lane by lane
    (flushes, NaN rules), on 1-4 threads."""
    dims, n = (29, 37), 150
    idx = indices(n, dims[0], 13)
    text = scatter(t, ET.S32, dims, idx.shape, (n, 37), [1], [0], [0], 1, kind)
    check_threads(text, [data(t, dims, 1), idx, data(t, (n, 37), 2)])


def test_vector_lanes_chosen() -> None:
    """The vector update is used where the window row is contiguous and two elements or
    more (the widest power of two of lanes it holds), f32/f64 and 32/64-bit integers; not
    for narrower types or one-element rows."""
    def lanes_of(t: ET, cols: int) -> int:
        text = scatter(t, ET.S32, (8, cols), (4, 1), (4, cols), [1], [0], [0], 1, "add")
        exe = xlapy.compile(text, backend="cpu")
        return scatter_emit.vector_lanes(scatter_specs(exe)[0].root)

    w = lanes.vector_width()
    assert lanes_of(ET.F32, 64) == w
    assert lanes_of(ET.F64, 64) == w // 2
    assert lanes_of(ET.S32, 64) == w and lanes_of(ET.S64, 8) == min(8, w // 2)
    assert lanes_of(ET.F32, 8) == min(8, w) and lanes_of(ET.F32, 12) == min(8, w)
    assert lanes_of(ET.F32, 3) == 2 and lanes_of(ET.F64, 1) == 0 and lanes_of(ET.F32, 1) == 0
    assert lanes_of(ET.S8, 64) == 0 and lanes_of(ET.PRED, 64) == 0


def test_vector_windows_spanning_rows() -> None:
    """2-D windows of 5 x 33 starting anywhere in both dimensions: vectors along the row
    at any offset, rows clipped to each thread's range, windows sticking out dropped."""
    dims, n = (19, 50), 120
    idx = np.concatenate([indices(n, 15, 14), indices(n, 18, 15)], axis=1)
    text = scatter(ET.F32, ET.S32, dims, idx.shape, (n, 5, 33), [1, 2], [], [0, 1], 1, "add")
    check_threads(text, [data(ET.F32, dims, 1), idx, data(ET.F32, (n, 5, 33), 2)])


def test_scatter_in_native_loop_on_threads() -> None:
    """A scatter-add in a fori_loop body (the native while loop splits it by rows too):
    the interpreter's bits on 1 and 2 threads, big enough to be split."""
    jax = pytest.importorskip("jax")
    x = data(ET.F32, (256, 64), 3)
    i = np.random.default_rng(16).integers(-2, 260, 4096).astype(np.int32)
    u = np.random.default_rng(17).standard_normal((4096, 64)).astype(np.float32)

    def f(a: Any, j: Any, v: Any) -> Any:
        return jax.lax.fori_loop(0, 3, lambda k, c: c.at[j + k].add(v * 0.5), a)

    text = jax.jit(f).lower(x, i, u).as_text()
    ref = xlapy.compile(text)(x, i, u)
    for threads in (1, 2):
        exe = xlapy.compile(text, backend="cpu", options={"num_threads": threads})
        assert not exe._exe.fallbacks(), exe._exe.explain()
        same(exe(x, i, u), ref)


@pytest.mark.parametrize("uwd", [[1], [0]])
def test_update_window_dim_leading(uwd: list[int]) -> None:
    """Updates whose window dimension comes first ([8, n]: a window strided in the updates,
    not prefetched as one block) and last ([n, 8]): the same bits on 1-4 threads."""
    dims, n = (37, 8), 300
    idx = indices(n, dims[0], 18)
    udims = (n, 8) if uwd == [1] else (8, n)
    text = scatter(ET.F32, ET.S32, dims, idx.shape, udims, uwd, [0], [0], 1, "add")
    check_threads(text, [data(ET.F32, dims, 1), idx, data(ET.F32, udims, 2)])
