"""A convolution's loop nest in two modules (conv_kernel.Split, conv_compile.py): the register
blocks (one function per distinct block shape, shared by chained convolutions) and the
epilogues (one per rows function) compiled at -O3, the rest at -O0, joined through a table
of pointers; both objects through the disk cache."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

import xlapy
from tests.unit.backends.cpu.test_conv_epilogue import _pool_program
from xlapy.backends.cpu import cache, conv_compile, llvm_util, parallel_compile, target
from xlapy.backends.cpu.conv_kernel import Nest, Source, Split, emit
from xlapy.backends.cpu.llvm_util import F32

CONV = """
func.func @main(%x: tensor<2x9x10x16xf32>, %w: tensor<3x3x16x16xf32>,
                %b: tensor<16xf32>) -> tensor<2x9x10x16xf32> {
  %c = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
      window = {pad = [[1, 1], [1, 1]]}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<2x9x10x16xf32>, tensor<3x3x16x16xf32>) -> tensor<2x9x10x16xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [3] : (tensor<16xf32>) -> tensor<2x9x10x16xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %z = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> tensor<2x9x10x16xf32>
  %a = stablehlo.add %c, %bb : tensor<2x9x10x16xf32>
  %y = stablehlo.maximum %a, %z : tensor<2x9x10x16xf32>
  return %y : tensor<2x9x10x16xf32>
}
"""


def _nest(wo: int, p: int) -> Nest:
    """A 3x3 16 -> 16 channels-last nest over [1, 8, wo] with padding 1, P pixels a block."""
    return Nest(b=1, g=1, ci=16, cx=16, gx=16, apad=16, lanes=8, v=2, p=p, xvec=False,
                sp_out=(8, wo), ks=(3, 3), strides=(1, 1), rhs_dil=(1, 1), padded=(10, wo + 2),
                sp_in=(8, wo), pad=((1, 1), (1, 1)), rows=True)


def _blocks(split: Split) -> int:
    """Register-block functions in the hot module (the others are epilogues)."""
    return sum(f'@"{name}"' in d and "fmuladd" in d for name in split.blocks
               for d in split.hot_defs)


def test_chained_nests_share_their_block() -> None:
    """Two layers of one shape: one block function in the hot module, no sums in the cold
    (which holds the two epilogues)."""
    nest = _nest(8, 4)
    split = emit("c", F32, nest, source=Source(nest, None, 0))
    assert len(split.blocks) == 1 and _blocks(split) == 1
    hot, cold = split.hot_text(), split.cold_text()
    assert "fmuladd" in hot and "fmuladd" not in cold
    assert f'@"{split.table}"' in cold


def test_row_remainder_is_the_same_function() -> None:
    """10 pixels in blocks of 4: two blocks and one over pixels 6-9 (6 and 7 computed
    again): one block function."""
    split = emit("c", F32, _nest(10, 4))
    assert len(split.blocks) == 1 and _blocks(split) == 1


def test_table_points_at_the_blocks() -> None:
    nest = _nest(10, 4)
    split = emit("c_table", F32, nest, source=Source(nest, None, 0))
    addr, eng = conv_compile.build("c_table", split)
    hot, cold = eng.engines
    assert addr and cold.linked
    table = cold.address(split.table)
    got = [ctypes.c_uint64.from_address(table + 8 * k).value for k in range(len(split.blocks))]
    assert got == [hot.address(name) for name in split.blocks]
    assert all(got)


def _args() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.standard_normal(s).astype(np.float32) for s in
            ((2, 9, 10, 16), (3, 3, 16, 16), (16,))]


@pytest.mark.parametrize("threads", [1, 2])
def test_split_nest_matches_interpreter(threads: int) -> None:
    args = _args()
    cpu = xlapy.compile(CONV, backend="cpu", options={"num_threads": threads})
    assert not cpu._exe.fallbacks()
    want = np.asarray(xlapy.compile(CONV, backend="interpreter")(*args))
    np.testing.assert_allclose(np.asarray(cpu(*args)), want, rtol=1e-4, atol=1e-4)


def test_objects_from_the_disk_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second compile loads both objects from disk (no code generation) and computes the
    same bits."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    args = _args()
    first = np.asarray(xlapy.compile(CONV, backend="cpu")(*args))
    cache.clear_memory()
    built: list[str] = []
    real = parallel_compile.compile_o0

    def spy(text):  # type: ignore[no-untyped-def]
        built.append("cold")
        return real(text)

    monkeypatch.setattr(parallel_compile, "compile_o0", spy)
    again = xlapy.compile(CONV, backend="cpu")
    assert not built  # the cold object came from disk
    np.testing.assert_array_equal(np.asarray(again(*args)), first)
    cache.clear_memory()


WIDE = """
func.func @main(%x: tensor<1x3xWx32xf32>, %w: tensor<3x3x32x32xf32>,
                %b: tensor<32xf32>) -> tensor<1x3xWx32xf32> {
  %c = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
      window = {pad = [[1, 1], [1, 1]]}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<1x3xWx32xf32>, tensor<3x3x32x32xf32>) -> tensor<1x3xWx32xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [3] : (tensor<32xf32>) -> tensor<1x3xWx32xf32>
  %a = stablehlo.add %c, %bb : tensor<1x3xWx32xf32>
  return %a : tensor<1x3xWx32xf32>
}
"""


@pytest.mark.parametrize("width", [300, 301])
def test_wide_rows_take_several_hot_calls(width: int) -> None:
    """A row whose sums exceed SPILL_BYTES is computed in several calls of the hot code
    (and a remainder block): the interpreter's values, no fallback."""
    text = WIDE.replace("W", str(width))
    rng = np.random.default_rng(4)
    args = [rng.standard_normal(s).astype(np.float32) for s in
            ((1, 3, width, 32), (3, 3, 32, 32), (32,))]
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": 1})
    assert not cpu._exe.fallbacks()
    want = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    np.testing.assert_allclose(np.asarray(cpu(*args)), want, rtol=1e-4, atol=1e-4)


def test_modules_compile_side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """With two idle CPUs the -O3 module compiles on a compile thread while the -O0 one
    is built: the same bits as one after the other."""
    from xlapy.backends.cpu import parallel_compile

    monkeypatch.setenv("XLAPY_CACHE_DIR", "")  # compiled, not loaded
    args = _args()
    cache.clear_memory()
    serial = np.asarray(xlapy.compile(CONV, backend="cpu", options={"num_threads": 2})(*args))
    cache.clear_memory()
    jobs: list[str] = []
    real = parallel_compile.submit

    def spy(text, vectorize, light, passes=True):  # type: ignore[no-untyped-def]
        assert not passes  # code generation alone (parallel_compile.codegen)
        jobs.append(text)
        return real(text, vectorize, light, passes)

    monkeypatch.setattr(parallel_compile, "threads", lambda limit: 2)
    monkeypatch.setattr(parallel_compile, "submit", spy)
    side = xlapy.compile(CONV, backend="cpu", options={"num_threads": 2})
    assert len(jobs) == 1 and "fmuladd" in jobs[0]
    np.testing.assert_array_equal(np.asarray(side(*args)), serial)
    cache.clear_memory()


def test_conv_modules_run_no_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither module goes through the optimization pipeline (the cold one is written as
    the -O0 generator wants it, the hot one as the light pipeline would leave it, whose
    object it is: test_hot_object_is_the_light_pipelines); the results are the
    interpreter's."""
    from xlapy.backends.cpu import llvm_util, parallel_compile

    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    monkeypatch.setattr(parallel_compile, "threads", lambda limit: 1)
    optimized: list[str] = []
    real = llvm_util.optimize

    def spy(ref, *a, **k):  # type: ignore[no-untyped-def]
        optimized.append(str(ref))
        return real(ref, *a, **k)

    monkeypatch.setattr(llvm_util, "optimize", spy)
    cache.clear_memory()
    cpu = xlapy.compile(CONV, backend="cpu")
    assert not [m for m in optimized if "conv" in m]
    args = _args()
    want = np.asarray(xlapy.compile(CONV, backend="interpreter")(*args))
    np.testing.assert_allclose(np.asarray(cpu(*args)), want, rtol=1e-4, atol=1e-4)
    cache.clear_memory()


def test_cold_object_is_the_o0_machines() -> None:
    """The cold module built on the calling thread without llvmlite's lock
    (parallel_compile.compile_o0, its own context and -O0 machine) is byte for byte the
    object of the process's -O0 machine under the lock, and it compiles while a compile
    thread builds the hot module."""
    nest = _nest(10, 4)
    split = emit("c_o0", F32, nest, source=Source(nest, None, 0))
    text = llvm_util.module_text(split.cold_text())
    t = target.current()
    with llvm_util._LOCK:
        ref = llvm_util.verify(text)
        ref.triple = t.triple
        ref.data_layout = str(llvm_util.o0_machine(t).target_data)
        want = llvm_util.o0_machine(t).emit_object(ref)
    job = parallel_compile.submit(split.hot_text(), True, True)
    obj, cold = parallel_compile.compile_o0(text)
    assert obj == want and not cold.get_function("c_o0").is_declaration
    assert job.result()[0]


def _hot_nests() -> list[tuple[object, Nest]]:
    """(element type, nest): the block shapes the JAX convolutions need (3x3 SAME, grouped,
    depthwise, strided, dilated) and edge cases (1x1 window, one channel, f64, int32)."""
    from llvmlite import ir

    base = _nest(10, 5)
    rep = __import__("dataclasses").replace
    return [(F32, base),
            (F32, rep(base, g=4, ci=8, cx=32, gx=8)),                    # grouped
            (F32, rep(base, ci=1, cx=32, apad=32, v=2, xvec=True)),      # depthwise
            (F32, rep(base, strides=(2, 2), padded=(17, 21))),           # strided
            (F32, rep(base, rhs_dil=(2, 2), padded=(12, 14))),           # dilated
            (F32, rep(base, ks=(1, 1), ci=1, cx=1, gx=1, p=1, v=1)),     # 1x1, one channel
            (llvm_util.F64, rep(base, lanes=4)),
            (ir.IntType(32), base)]


@pytest.mark.parametrize("case", range(8))
def test_hot_object_is_the_light_pipelines(case: int) -> None:
    """The hot module through code generation alone (parallel_compile.codegen, what
    conv_compile compiles now) is byte for byte its object through the light pipeline (what
    it compiled before, and the disk cache's key still names), for every target."""
    t, nest = _hot_nests()[case]
    text = emit(f"h{case}", t, nest).hot_text()  # type: ignore[arg-type]
    want = parallel_compile._compile(text, True, True, target.current())[0]
    assert parallel_compile.codegen(text)[0] == want
    assert parallel_compile.submit(text, True, True, passes=False).result()[0] == want


@pytest.mark.parametrize("pooled", [False, True])
@pytest.mark.parametrize("width", [34, 38])
def test_overlapping_last_block_same_bits(monkeypatch: pytest.MonkeyPatch, pooled: bool,
                                          width: int) -> None:
    """A row the blocks do not divide (34 or 38 pixels in blocks of 12 or 13): its last
    block starts over pixels already computed, finishes only the rest, and the result is
    bit for bit the one of blocks that divide the row (2 pixels a block), pooled (each
    output pixel added once) or not; no fallback."""
    from xlapy.backends.cpu import conv_general

    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    if pooled:  # conv 8 -> 16, bias, relu, 2 x 2 average pool
        text = _pool_program(6, width, 2, "add", "%y", True, False)
        shapes = ((2, 6, width, 8), (3, 3, 8, 16), (16,))
    else:
        text = WIDE.replace("1x3xW", f"2x6x{width}").replace("x32xf32", "x16xf32") \
            .replace("3x3x32x", "3x3x16x").replace("<32xf32>", "<16xf32>")
        shapes = ((2, 6, width, 16), (3, 3, 16, 16), (16,))
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    real = conv_general._blocking
    assert real(2, width, 32)[1] in (12, 13) and width % real(2, width, 32)[1]
    cache.clear_memory()
    cpu = xlapy.compile(text, backend="cpu")
    assert not cpu._exe.fallbacks()
    got = np.asarray(cpu(*args))
    monkeypatch.setattr(conv_general, "_blocking", lambda nvec, wout, regs, weights=0: (
        real(nvec, wout, regs, weights)[0], 2))
    cache.clear_memory()
    even = np.asarray(xlapy.compile(text, backend="cpu")(*args))
    np.testing.assert_array_equal(got, even)
    want = np.asarray(xlapy.compile(text, backend="interpreter")(*args))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    cache.clear_memory()


def test_hot_module_finished_as_the_compile_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a compile the hot module's wait is put off to the compile's end (finishing):
    the executable returned is ready (its table filled: the interpreter's values); outside
    one, build waits at once."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    monkeypatch.setattr(parallel_compile, "threads", lambda limit: 2)
    cache.clear_memory()
    waited: list[bool] = []
    real = conv_compile.Engines.ready

    def spy(self):  # type: ignore[no-untyped-def]
        waited.append(self._job is not None)
        return real(self)

    monkeypatch.setattr(conv_compile.Engines, "ready", spy)
    cpu = xlapy.compile(CONV, backend="cpu", options={"num_threads": 2})
    assert waited and waited[0]  # one wait, by the compile's end
    n = len(waited)
    args = _args()
    want = np.asarray(xlapy.compile(CONV, backend="interpreter")(*args))
    np.testing.assert_allclose(np.asarray(cpu(*args)), want, rtol=1e-4, atol=1e-4)
    assert not any(waited[n:])  # the runner found it ready
    nest = _nest(10, 4)
    cache.clear_memory()
    _, eng = conv_compile.build("c_now", emit("c_now", F32, nest), threads=2)
    assert len(eng.engines) == 2 and eng._job is None
    cache.clear_memory()
