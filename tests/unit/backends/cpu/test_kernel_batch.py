"""kernel_batch.py: consecutive unsplit kernels of an executable run as one native call,
with the results (bits, fresh outputs) of one call per kernel, also when several threads
call the executable at once (private pointer tables)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from tests.threads import on_threads
from xlapy.backends.cpu import kernel_batch

# Three results, each its own kernel (a result is materialized), then a dot between kernels
# (a matrix-vector product: a library call; a dot of two vectors would be a reduce kernel).
TEXT = """
func.func @main(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>,
    tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %a = stablehlo.add %x, %y : tensor<8xf32>
  %b = stablehlo.multiply %a, %x : tensor<8xf32>
  %c = stablehlo.sine %b : tensor<8xf32>
  %m = stablehlo.broadcast_in_dim %c, dims = [1] : (tensor<8xf32>) -> tensor<8x8xf32>
  %d = stablehlo.dot_general %m, %b, contracting_dims = [1] x [0]
    : (tensor<8x8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %e = stablehlo.exponential %c : tensor<8xf32>
  return %a, %b, %c, %d, %e
    : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}
"""


def _inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(8).astype(np.float32) for _ in range(2)]


def _same(got: object, want: object) -> None:
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint32), np.asarray(w).view(np.uint32))


def _unbatched(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The program with a thunk per kernel (the reference: same kernels, one call each)."""
    with monkeypatch.context() as m:
        m.setattr(kernel_batch, "MIN_KERNELS", 1 << 30)
        prog = xlapy.compile(TEXT, backend="cpu")
        # (its thunks are bound at this first look: the entry runs as a trip, and the
        # thunks wait for a run that needs them, branch_loop.defer_thunks)
        assert not any(hasattr(th, "batched") for th in prog._exe.thunks)
    return prog


def test_consecutive_kernels_are_one_thunk_with_one_call_each_bits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    prog = xlapy.compile(TEXT, backend="cpu")
    ref = _unbatched(monkeypatch)
    sizes = [getattr(th, "batched", 0) for th in prog._exe.thunks]
    assert 4 in sizes, sizes  # %a, %b, %c, %m in one call; the dot and %e on their own
    firsts = []
    for seed in range(4):
        args = _inputs(seed)
        out = prog(*args)
        _same(out, ref(*args))
        firsts.append((out, ref(*args)))
    for out, want in firsts:  # every call's results are its own arrays
        _same(out, want)


def test_batches_run_right_on_several_threads_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    prog = xlapy.compile(TEXT, backend="cpu")
    ref = _unbatched(monkeypatch)

    def work(seed: int) -> None:
        for k in range(40):
            args = _inputs(seed * 100 + k)
            _same(prog(*args), ref(*args))

    on_threads(work, range(3))


def test_a_single_kernel_is_left_alone() -> None:
    calls: list[str] = []

    def plain(*a: object) -> None:
        calls.append("plain")

    def native(*a: object) -> None:
        calls.append("native")

    native.native = (0, 1, [])  # type: ignore[attr-defined]
    out = kernel_batch.batch([plain, native, plain], {}, lambda: None)
    assert out == [plain, native, plain]


# Small 2-D products between kernels (expm's top level): gemm_small's rows in the batch.
DOTS = """
func.func @main(%x: tensor<16x16xf32>, %w: tensor<16x16xf32>) -> (tensor<16x16xf32>,
    tensor<16x16xf32>) {
  %a = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
    : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %b = stablehlo.tanh %a : tensor<16x16xf32>
  %c = stablehlo.dot_general %b, %w, contracting_dims = [1] x [0]
    : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %d = stablehlo.dot_general %c, %b, contracting_dims = [1] x [0]
    : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %e = stablehlo.exponential %d : tensor<16x16xf32>
  %f = stablehlo.dot_general %e, %x, contracting_dims = [1] x [0]
    : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  return %c, %f : tensor<16x16xf32>, tensor<16x16xf32>
}
"""


def test_small_products_join_the_batch_with_their_thunks_bits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    prog = xlapy.compile(DOTS, backend="cpu")
    # 4 dots and 2 kernels in one call, then the results tuple
    assert [getattr(th, "batched", 0) for th in prog._exe.thunks] == [6, 0]
    with monkeypatch.context() as m:
        m.setattr(kernel_batch, "MIN_KERNELS", 1 << 30)
        ref = xlapy.compile(DOTS, backend="cpu")

    def work(seed: int) -> None:
        for k in range(30):
            rng = np.random.default_rng(seed * 100 + k)
            x, w = (rng.standard_normal((16, 16)).astype(np.float32) * 0.3 for _ in range(2))
            got = prog(x, w)
            _same(got, ref(x, w))
            np.testing.assert_allclose(got[0], np.tanh(x @ w) @ w, rtol=1e-5, atol=1e-5)

    work(0)
    on_threads(work, range(1, 4))
