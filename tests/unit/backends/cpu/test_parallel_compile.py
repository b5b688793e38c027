"""parallel_compile.py: kernel modules compiled on threads give the serial path's objects
and results (issue 14), and the executable cuts its explicit kernels into modules only when
it has threads to compile them on."""

from __future__ import annotations

import numpy as np
import pytest
from llvmlite import ir

import xlapy
from xlapy.backends.cpu import cache, parallel_compile
from xlapy.backends.cpu.llvm_util import F32, I64, Engine, for_range, module_text, new_module

# Four kernels (softmax pieces over dimension 2 of a 4-D value: max, exp written once
# (fusion_spread.reduced_elsewhere), its sum, divide; over the last dimension they fuse into
# one row kernel).
PROGRAM = """
func.func @main(%x: tensor<4x8x64x64xf32>) -> tensor<4x8x64x64xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [2]
       : (tensor<4x8x64x64xf32>, tensor<f32>) -> tensor<4x8x64xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1, 3]
        : (tensor<4x8x64xf32>) -> tensor<4x8x64x64xf32>
  %d = stablehlo.subtract %x, %mb : tensor<4x8x64x64xf32>
  %e = stablehlo.exponential %d : tensor<4x8x64x64xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [2]
       : (tensor<4x8x64x64xf32>, tensor<f32>) -> tensor<4x8x64xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0, 1, 3]
        : (tensor<4x8x64xf32>) -> tensor<4x8x64x64xf32>
  %r = stablehlo.divide %e, %sb : tensor<4x8x64x64xf32>
  return %r : tensor<4x8x64x64xf32>
}
"""


def test_chunks_are_contiguous_balanced_and_big_enough() -> None:
    chunks = parallel_compile.chunks
    assert chunks([], 4) == [range(0, 0)]
    assert chunks([50, 50, 50], 2) == [range(0, 3)]  # 150 instructions: one module
    assert chunks([100] * 4, 2) == [range(0, 2), range(2, 4)]
    assert chunks([100] * 4, 1) == [range(0, 4)]
    got = chunks([300, 10, 10, 300], 4)
    assert [i for r in got for i in r] == [0, 1, 2, 3] and 2 <= len(got) <= 4 and all(got)


def _module(k: int) -> str:
    """`void f{k}(float* x, i64 n)`: x[i] = x[i] * k + 1, a loop O3 vectorizes."""
    mod = new_module(f"m{k}")
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [F32.as_pointer(), I64]),
                     name=f"f{k}")
    x, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    with for_range(b, ir.Constant(I64, 0), n) as i:
        p = b.gep(x, [i])
        b.store(b.fadd(b.fmul(b.load(p), ir.Constant(F32, float(k))), ir.Constant(F32, 1.0)), p)
    b.ret_void()
    return module_text(mod)


@pytest.mark.parametrize("light", [True, False])
def test_threads_emit_the_serial_objects(light: bool) -> None:
    texts = [_module(k) for k in range(6)]
    serial = [Engine(t, vectorize=True, light=light, exports=[f"f{k}"]).object
              for k, t in enumerate(texts)]
    for _ in range(3):  # several rounds: threads reuse their contexts' target machines
        got = parallel_compile.compile_all([(t, True, light) for t in texts], 3)
        assert [obj for obj, _ in got] == serial
        assert all(f"define void @f{k}(" in str(ref) for k, (_, ref) in enumerate(got))


def _compile(monkeypatch: pytest.MonkeyPatch, threads: int) -> xlapy.CompiledProgram:
    monkeypatch.setattr(parallel_compile, "threads", lambda limit: min(limit, threads))
    cache.clear_memory()
    return xlapy.compile(PROGRAM, backend="cpu")


def test_executable_compiles_its_kernels_on_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    serial = _compile(monkeypatch, 1)
    threaded = _compile(monkeypatch, 3)
    assert len(serial._exe.kernel_specs) == 4 and len(serial._exe.engines) == 1
    assert len(threaded._exe.engines) > 1
    assert all(e.pipeline == "light" and e.asm_ir for e in threaded._exe.engines)
    assert threaded.phases is not None and "llvm threads" in threaded.phases.seconds
    assert threaded._exe.kernel_ir == serial._exe.kernel_ir
    x = np.random.default_rng(3).standard_normal((4, 8, 64, 64)).astype(np.float32)
    np.testing.assert_array_equal(threaded(x), serial(x))


def test_a_forked_child_compiles_on_threads_of_its_own() -> None:
    """The parent's pool has no threads in a fork child: using it there hung."""
    import multiprocessing

    texts = [_module(k) for k in range(2)]
    want = [obj for obj, _ in parallel_compile.compile_all([(t, True, True) for t in texts], 2)]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply_async(_child_objects, (texts,)).get(timeout=120)
    assert got == want


def _child_objects(texts: list[str]) -> list[bytes]:
    return [obj for obj, _ in parallel_compile.compile_all([(t, True, True) for t in texts], 2)]


POOLS = """
func.func @main(%x: tensor<8x32x32x16xf32>)
    -> (tensor<8x16x16x16xf32>, tensor<8x16x16x16xf32>, tensor<8x16x16x16xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = "stablehlo.reduce_window"(%x, %ninf) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %r = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %r : tensor<f32>
  }) {window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>}
     : (tensor<8x32x32x16xf32>, tensor<f32>) -> tensor<8x16x16x16xf32>
  %s = "stablehlo.reduce_window"(%x, %zero) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %r = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %r : tensor<f32>
  }) {window_dimensions = array<i64: 1, 3, 3, 1>, window_strides = array<i64: 1, 2, 2, 1>,
      padding = dense<[[0, 0], [1, 1], [1, 1], [0, 0]]> : tensor<4x2xi64>}
     : (tensor<8x32x32x16xf32>, tensor<f32>) -> tensor<8x16x16x16xf32>
  %n = "stablehlo.reduce_window"(%x, %ninf) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %r = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %r : tensor<f32>
  }) {window_dimensions = array<i64: 1, 3, 3, 1>, window_strides = array<i64: 1, 2, 2, 1>,
      padding = dense<[[0, 0], [1, 1], [1, 1], [0, 0]]> : tensor<4x2xi64>}
     : (tensor<8x32x32x16xf32>, tensor<f32>) -> tensor<8x16x16x16xf32>
  return %m, %s, %n : tensor<8x16x16x16xf32>, tensor<8x16x16x16xf32>, tensor<8x16x16x16xf32>
}
"""


def test_o3_kernels_are_cut_into_modules_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    monkeypatch.setattr(parallel_compile, "threads", lambda limit: 1)
    cache.clear_memory()
    serial = xlapy.compile(POOLS, backend="cpu")
    monkeypatch.setattr(parallel_compile, "threads", lambda limit: 2)
    cache.clear_memory()
    threaded = xlapy.compile(POOLS, backend="cpu")
    assert [e.pipeline for e in serial._exe.engines] == ["O3"]
    assert [e.pipeline for e in threaded._exe.engines] == ["O3", "O3"]
    x = np.random.default_rng(4).standard_normal((8, 32, 32, 16)).astype(np.float32)
    for got, want in zip(threaded(x), serial(x)):
        np.testing.assert_array_equal(got, want)


def test_a_compiled_module_outlives_its_contexts_finalizer() -> None:
    """Bug: the module a compile thread returns and its own LLVMContext each had a finalizer;
    the cyclic collector (an Engine in a cycle) could dispose the context first, freeing the
    module, whose own dispose then crashed the process. The module now disposes the context
    after itself, and the context's finalizer does nothing."""
    import gc

    obj, ref = parallel_compile.submit(_module(3), True, False).result()
    assert obj
    ctx = ref._context
    ctx.close()  # what a collector finalizing the context first does
    assert "define" in str(ref)  # the module is still alive
    cycle: list[object] = [ref, ctx]
    cycle.append(cycle)
    del ref, ctx, cycle
    gc.collect()


def test_prewarm_once_and_same_objects() -> None:
    """prewarm (the backend's first compile in a process) makes a -O3 and a -O0 machine on
    a compile thread, once per target; modules compiled on them are the objects of fresh
    machines (the start-up moves, the code does not)."""
    from xlapy.backends.cpu import llvm_util, target

    t = target.host_target()
    job = parallel_compile.prewarm(t)
    if job is not None:
        job.result()
        assert {(t, llvm_util.OPT_LEVEL), (t, 0)} <= set(parallel_compile._FREE)
    assert parallel_compile.prewarm(t) is None
    text = _module(3)
    with target.use(t):
        warm_o3 = parallel_compile.submit(text, True, False).result()[0]
        warm_o0 = parallel_compile.compile_o0(text)[0]
    fresh = []
    for opt in (llvm_util.OPT_LEVEL, 0):
        tm = llvm_util.target_machine(t, opt=opt)
        ref = llvm_util.verify(text)
        ref.triple = t.triple
        ref.data_layout = str(tm.target_data)
        if opt:
            llvm_util.optimize(ref, tm, True, False)
        fresh.append(tm.emit_object(ref))
    assert [warm_o3, warm_o0] == fresh


def test_threads_are_the_cpus_whatever_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """threads() is the CPUs this process may use (at most the limit and MAX_THREADS), not
    fewer on a busy machine: two threads compiled faster than one at every load measured."""
    import os

    cpus = len(os.sched_getaffinity(0))
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    assert parallel_compile.threads(64) == min(cpus, parallel_compile.MAX_THREADS)
    assert parallel_compile.threads(1) == 1
    assert parallel_compile.threads(0) == 1
