"""Kernels written over a dying operand (inplace.py): which operands qualify (read only at the
written element or along its row, last read by the kernel, native readers only, no whole-array
reader in the same row-parallel region), the arena giving both one allocation, and programs
whose in-place kernels match the interpreter on 1 and 2 threads."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import arena, batch_chain, cache, inplace
from xlapy.types import ElementType as ET
from xlapy.types import Shape

KB = 1024


def _shape(*dims: int, et: ET = ET.F32) -> Shape:
    return Shape.array(et, list(dims))


def _compile(text: str, threads: int) -> tuple[xlapy.CompiledProgram, object]:
    cache.clear_memory()
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads, "split_cost": 1,
                                                       "entry_trip": False})
    return prog, prog._exe  # type: ignore[attr-defined]


def _check(text: str, args: list[np.ndarray], threads: int) -> object:
    """Run on cpu and the interpreter: normwise close (the products' rounding differs), the
    same bits on a second call (the arena reused); returns the cpu executable."""
    prog, exe = _compile(text, threads)
    want = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    got = prog(*args)
    assert np.abs(np.asarray(got) - want).max() <= 1e-5 * np.abs(want).max()
    again = prog(*args)  # the arena reused: a second call gives the same bits
    np.testing.assert_array_equal(np.asarray(again), np.asarray(got))
    return exe


# ---- the pieces -----------------------------------------------------------------------------
def test_same_index_reads() -> None:
    s = _shape(4, 8)
    assert inplace.same_index_reads(s, s, {("r", "r1")})
    assert inplace.same_index_reads(s, s, {("r", "r1"), ("r", "c")})  # softmax's reads
    assert not inplace.same_index_reads(s, s, {("r1", "r")})  # a transposed read
    assert not inplace.same_index_reads(s, s, {("r", "?")})
    assert not inplace.same_index_reads(s, s, set())
    assert not inplace.same_index_reads(s, _shape(8, 4), {("r", "r1")})
    assert not inplace.same_index_reads(s, _shape(4, 8, et=ET.F64), {("r", "r1")})
    one = _shape(1, 8)
    assert inplace.same_index_reads(one, one, {("0", "r1")})


def test_choose_takes_the_last_reader_only() -> None:
    """t0 (BLAS) -> k1 reads t0 -> k2 reads t0 and t1: only k2, t0's last reader, may take
    t0; k1's operand is read later."""
    outs, ins = [0, 1, 2], [[9], [0], [0, 1]]
    fresh = {0, 1, 2}
    share = inplace.choose(outs, ins, {1: [0], 2: [0, 1]}, {0, 1, 2}, fresh, set(), {})
    assert share == {2: 0}


def test_choose_refuses_results_views_and_whole_readers() -> None:
    outs, ins = [0, 1], [[9], [0]]
    base = dict(outs=outs, ins=ins, eligible={1: [0]}, temps={0, 1}, fresh={0, 1},
                results=set(), whole_reads={})
    assert inplace.choose(**base) == {1: 0}
    assert inplace.choose(**{**base, "results": {0}}) == {}  # the operand is a result
    assert inplace.choose(**{**base, "results": {1}}) == {}  # the kernel's result leaves
    assert inplace.choose(**{**base, "temps": {1}}) == {}  # operand not in the arena
    assert inplace.choose(**{**base, "fresh": {1}}) == {}  # operand may be a view
    # a non-native reader (a tuple, a fallback) may keep a view of the operand
    assert inplace.choose(outs=[0, 5, 1], ins=[[9], [0], [0]], eligible={1: [0]},
                          temps={0, 1}, fresh={0, 1}, results=set(), whole_reads={}) == {}
    # a member of the kernel's region reads the operand whole: another thread may still
    assert inplace.choose(**{**base, "whole_reads": {1: {0}}}) == {}


def test_arena_gives_shared_slots_one_allocation() -> None:
    """t0 -> k1 over t0 -> k2 over t1: one 4 KB allocation for all three; a fourth temporary
    live with them gets its own."""
    steps = arena.schedule([0, 1, 2, 3, 4], [[9], [0], [1], [9], [2, 3]], {}, {0, 1, 2, 3, 4})
    sizes = {0: 4 * KB, 1: 4 * KB, 2: 4 * KB, 3: 4 * KB}
    off, total = arena.offsets(steps, sizes, [4], {1: 0, 2: 1})
    assert off[0] == off[1] == off[2] != off[3]
    assert total == 8 * KB


# ---- programs -------------------------------------------------------------------------------
MLP = """
func.func @main(%x: tensor<64x32xf32>, %w0: tensor<32x48xf32>, %b0: tensor<48xf32>,
                %w1: tensor<48x16xf32>) -> tensor<64x16xf32> {
  %0 = stablehlo.dot_general %x, %w0, contracting_dims = [1] x [0]
       : (tensor<64x32xf32>, tensor<32x48xf32>) -> tensor<64x48xf32>
  %1 = stablehlo.broadcast_in_dim %b0, dims = [1] : (tensor<48xf32>) -> tensor<64x48xf32>
  %2 = stablehlo.add %0, %1 : tensor<64x48xf32>
  %z = stablehlo.constant dense<0.0> : tensor<64x48xf32>
  %3 = stablehlo.maximum %2, %z : tensor<64x48xf32>
  %4 = stablehlo.dot_general %3, %w1, contracting_dims = [1] x [0]
       : (tensor<64x48xf32>, tensor<48x16xf32>) -> tensor<64x16xf32>
  return %4 : tensor<64x16xf32>
}
"""

SOFTMAX_DOT = """
func.func @main(%q: tensor<2x32x16xf32>, %k: tensor<2x24x16xf32>, %v: tensor<2x24x16xf32>)
    -> tensor<2x32x16xf32> {
  %s = stablehlo.dot_general %q, %k, batching_dims = [0] x [0], contracting_dims = [2] x [2]
       : (tensor<2x32x16xf32>, tensor<2x24x16xf32>) -> tensor<2x32x24xf32>
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %mx = stablehlo.reduce(%s init: %init) applies stablehlo.maximum across dimensions = [2]
        : (tensor<2x32x24xf32>, tensor<f32>) -> tensor<2x32xf32>
  %mb = stablehlo.broadcast_in_dim %mx, dims = [0, 1] : (tensor<2x32xf32>) -> tensor<2x32x24xf32>
  %d = stablehlo.subtract %s, %mb : tensor<2x32x24xf32>
  %e = stablehlo.exponential %d : tensor<2x32x24xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [2]
         : (tensor<2x32x24xf32>, tensor<f32>) -> tensor<2x32xf32>
  %sb = stablehlo.broadcast_in_dim %sum, dims = [0, 1] : (tensor<2x32xf32>) -> tensor<2x32x24xf32>
  %p = stablehlo.divide %e, %sb : tensor<2x32x24xf32>
  %o = stablehlo.dot_general %p, %v, batching_dims = [0] x [0], contracting_dims = [2] x [1]
       : (tensor<2x32x24xf32>, tensor<2x24x16xf32>) -> tensor<2x32x16xf32>
  return %o : tensor<2x32x16xf32>
}
"""

#: The kernel reads the GEMM's square result transposed: element (i, j) needs (j, i), which
#: another iteration may already have overwritten - never in place.
TRANSPOSED = """
func.func @main(%x: tensor<48x48xf32>, %w: tensor<48x48xf32>) -> tensor<48x48xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
       : (tensor<48x48xf32>, tensor<48x48xf32>) -> tensor<48x48xf32>
  %t = stablehlo.transpose %0, dims = [1, 0] : (tensor<48x48xf32>) -> tensor<48x48xf32>
  %1 = stablehlo.add %0, %t : tensor<48x48xf32>
  %2 = stablehlo.dot_general %1, %w, contracting_dims = [1] x [0]
       : (tensor<48x48xf32>, tensor<48x48xf32>) -> tensor<48x48xf32>
  return %2 : tensor<48x48xf32>
}
"""

#: Reversed rows of the GEMM's result: a read at another element of the row, outside a
#: row reduction - never in place.
REVERSED = """
func.func @main(%x: tensor<48x48xf32>, %w: tensor<48x48xf32>) -> tensor<48x48xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
       : (tensor<48x48xf32>, tensor<48x48xf32>) -> tensor<48x48xf32>
  %r = stablehlo.reverse %0, dims = [1] : tensor<48x48xf32>
  %1 = stablehlo.multiply %0, %r : tensor<48x48xf32>
  %2 = stablehlo.dot_general %1, %w, contracting_dims = [1] x [0]
       : (tensor<48x48xf32>, tensor<48x48xf32>) -> tensor<48x48xf32>
  return %2 : tensor<48x48xf32>
}
"""

#: %h is read whole as the rhs of %d inside the region that %o's kernel is in: a thread
#: overwriting its rows of %h could race the other thread's GEMM - never over %h (over %d,
#: whose rows the same thread has just written, it may).
WHOLE_READ = """
func.func @main(%x: tensor<64x64xf32>, %a: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %h = stablehlo.exponential %x : tensor<64x64xf32>
  %d = stablehlo.dot_general %a, %h, contracting_dims = [1] x [0]
       : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %o = stablehlo.add %h, %d : tensor<64x64xf32>
  %p = stablehlo.dot_general %o, %a, contracting_dims = [1] x [0]
       : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  return %p : tensor<64x64xf32>
}
"""


def _args(*shapes: tuple[int, ...], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("threads", [1, 2])
def test_mlp_bias_relu_in_place(threads: int) -> None:
    exe = _check(MLP, _args((64, 32), (32, 48), (48,), (48, 16)), threads)
    assert len(exe.in_place) == 1  # type: ignore[attr-defined]
    assert exe._arena_plan[1] == 64 * 48 * 4  # type: ignore[attr-defined]


@pytest.mark.parametrize("threads", [1, 2])
def test_softmax_over_the_scores_in_place(threads: int, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    monkeypatch.setattr(batch_chain, "ENABLED", False)  # else one batch chain (no arena)
    exe = _check(SOFTMAX_DOT, _args((2, 32, 16), (2, 24, 16), (2, 24, 16)), threads)
    assert len(exe.in_place) == 1  # type: ignore[attr-defined]
    assert exe._arena_plan[1] == 2 * 32 * 24 * 4  # type: ignore[attr-defined]


@pytest.mark.parametrize("text", [TRANSPOSED, REVERSED], ids=["transposed", "reversed"])
@pytest.mark.parametrize("threads", [1, 2])
def test_other_element_reads_stay_out_of_place(text: str, threads: int) -> None:
    exe = _check(text, _args((48, 48), (48, 48)), threads)
    assert exe.in_place == {}  # type: ignore[attr-defined]


@pytest.mark.parametrize("threads", [1, 2])
def test_whole_reads_in_the_region_stay_out_of_place(threads: int) -> None:
    exe = _check(WHOLE_READ, _args((64, 64), (64, 64)), threads)
    slot = {i.name: exe.slot[id(i)] for i in exe.comp.instructions}  # type: ignore[attr-defined]
    assert any("row-parallel: %d, %o, %p" in ln for ln in exe.explain().splitlines())  # type: ignore[attr-defined]
    # %o may take %d's rows (this thread wrote them), never %h's
    assert exe.in_place == {slot["o"]: slot["d"]}  # type: ignore[attr-defined]


#: A region (2 GEMMs and their bias kernels, 256 rows) whose last kernel is the result: the
#: last GEMM writes the result's buffer, the bias is added in place (inplace.into_outputs).
REGION_OUT = """
func.func @main(%x: tensor<256x64xf32>, %w0: tensor<64x128xf32>, %b0: tensor<128xf32>,
                %w1: tensor<128x96xf32>, %b1: tensor<96xf32>) -> tensor<256x96xf32> {
  %0 = stablehlo.dot_general %x, %w0, contracting_dims = [1] x [0]
       : (tensor<256x64xf32>, tensor<64x128xf32>) -> tensor<256x128xf32>
  %1 = stablehlo.broadcast_in_dim %b0, dims = [1] : (tensor<128xf32>) -> tensor<256x128xf32>
  %2 = stablehlo.add %0, %1 : tensor<256x128xf32>
  %z = stablehlo.constant dense<0.0> : tensor<256x128xf32>
  %3 = stablehlo.maximum %2, %z : tensor<256x128xf32>
  %4 = stablehlo.dot_general %3, %w1, contracting_dims = [1] x [0]
       : (tensor<256x128xf32>, tensor<128x96xf32>) -> tensor<256x96xf32>
  %5 = stablehlo.broadcast_in_dim %b1, dims = [1] : (tensor<96xf32>) -> tensor<256x96xf32>
  %6 = stablehlo.add %4, %5 : tensor<256x96xf32>
  return %6 : tensor<256x96xf32>
}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_region_result_kernel_over_its_gemm(threads: int) -> None:
    shapes = ((256, 64), (64, 128), (128,), (128, 96), (96,))
    args = _args(*shapes)
    exe = _check(REGION_OUT, args, threads)
    slot = {i.name: exe.slot.get(id(i)) for i in exe.comp.instructions}  # type: ignore[attr-defined]
    assert any("row-parallel" in ln for ln in exe.explain().splitlines())  # type: ignore[attr-defined]
    assert exe.out_alias == {slot["4"]: slot["6"]}  # type: ignore[attr-defined]
    assert exe._arena_plan[1] == 256 * 128 * 4  # type: ignore[attr-defined]
    # a result the caller holds is never written again: the next call gets a new buffer
    prog = xlapy.compile(REGION_OUT, backend="cpu", options={"num_threads": threads,
                                                             "split_cost": 1,
                                                             "entry_trip": False})
    first = prog(*args)
    keep = np.array(first)
    second = prog(*_args(*shapes, seed=1))
    np.testing.assert_array_equal(first, keep)
    assert not np.array_equal(second, keep)
    want = np.asarray(xlapy.compile(REGION_OUT, backend="interpreter")(*_args(*shapes, seed=1)))
    assert np.abs(np.asarray(second) - want).max() <= 1e-5 * np.abs(want).max()
