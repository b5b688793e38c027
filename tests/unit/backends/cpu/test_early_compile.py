"""A big kernel starts compiling on a compile thread as soon as it is emitted
(early_compile.py), the last one too: the program computes the same bits as compiled
serially, prints the same kernel module and takes the kernel's object from the cache when
it is there; its module text holds the definitions it reaches and every declaration. Row kernels
are built before the small kernels ahead of them in program order (the functions keep
program order), and the compile thread says when its code generation starts."""

from __future__ import annotations

import threading

import llvmlite.binding as llvm
import ml_dtypes
import numpy as np
import pytest
from llvmlite import ir

import xlapy
from xlapy.backends.cpu import cache, early_compile, kernels, parallel_compile
from xlapy.backends.cpu.llvm_util import F32, I64, VOID, new_module

_X, _Y = "tensor<64x256xbf16>", "tensor<64x256xf32>"
# attention_bf16's softmax (one row kernel of ~180 instructions on x86-64-v3), then a small
# kernel.
PROGRAM = f"""
func.func public @main(%x0: {_X}, %y: {_Y}) -> ({_X}, {_Y}) {{
  %c = stablehlo.constant dense<1.250000e-01> : {_X}
  %x = stablehlo.multiply %x0, %c : {_X}
  %ninf = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1]
    : ({_X}, tensor<bf16>) -> tensor<64xbf16>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<64xbf16>) -> {_X}
  %d = stablehlo.subtract %x, %mb : {_X}
  %e = stablehlo.exponential %d : {_X}
  %z = stablehlo.constant dense<0.0> : tensor<bf16>
  %s = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [1]
    : ({_X}, tensor<bf16>) -> tensor<64xbf16>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<64xbf16>) -> {_X}
  %p = stablehlo.divide %e, %sb : {_X}
  %two = stablehlo.constant dense<2.0> : {_Y}
  %q = stablehlo.multiply %y, %two : {_Y}
  %r = stablehlo.add %q, %y : {_Y}
  return %p, %r : {_X}, {_Y}
}}
"""
OPTS = {"target": "x86-64-v3"}


def _args() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((64, 256)) * 3).astype(ml_dtypes.bfloat16)
    x[3, 7], x[5, :] = np.nan, -np.inf
    return x, rng.standard_normal((64, 256)).astype(np.float32)


def _compile(monkeypatch: pytest.MonkeyPatch, threads: int) -> xlapy.CompiledProgram:
    monkeypatch.setattr(parallel_compile, "threads", lambda limit: min(limit, threads))
    monkeypatch.setattr(early_compile, "MIN_INSTRUCTIONS", 100)  # the softmax: ~180
    cache.clear_memory()
    return xlapy.compile(PROGRAM, backend="cpu", options=OPTS)


def test_a_big_kernel_compiles_early_to_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    serial = _compile(monkeypatch, 1)
    early = _compile(monkeypatch, 2)
    assert not serial._exe._early.jobs
    jobs = early._exe._early.jobs
    assert list(jobs) == [early._exe.kernel_specs[0].name]  # the softmax (the small one is grouped)
    assert len(early._exe.kernel_specs) == 2
    assert early._exe.kernel_ir == serial._exe.kernel_ir
    args = _args()
    for g, w in zip(early(*args), serial(*args)):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint8), np.asarray(w).view(np.uint8))


def test_an_early_kernel_comes_from_the_cache(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: object) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    first = _compile(monkeypatch, 2)
    second = _compile(monkeypatch, 2)  # (the memory cache cleared: read from the disk)
    job = next(iter(second._exe._early.jobs.values()))
    assert job.future is None and job.cached is not None
    assert job.cached == next(iter(first._exe._early.jobs.values())).future.result()[0]
    args = _args()
    for g, w in zip(second(*args), first(*args)):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint8), np.asarray(w).view(np.uint8))


def test_a_row_kernel_is_built_before_the_small_ones_ahead_of_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    lines = PROGRAM.strip().splitlines()
    small = [ln for ln in lines if "%two" in ln or "%q" in ln and "%r" in ln]
    y_first = "\n".join([lines[0]] + small + [ln for ln in lines[1:] if ln not in small])
    built: list[str] = []
    build = kernels.KernelEmitter.build
    monkeypatch.setattr(kernels.KernelEmitter, "build",
                        lambda self: built.append(self.name) or build(self))
    monkeypatch.setattr(parallel_compile, "threads", lambda limit: 1)
    cache.clear_memory()
    serial = xlapy.compile(y_first, backend="cpu", options=OPTS)
    monkeypatch.setattr(parallel_compile, "threads", lambda limit: 2)
    monkeypatch.setattr(early_compile, "MIN_INSTRUCTIONS", 100)
    cache.clear_memory()
    early = xlapy.compile(y_first, backend="cpu", options=OPTS)
    assert [k.root.name for k in early._exe.kernel_specs] == ["r", "p"]  # program order
    assert built == ["k1", "k0"] * 2 and list(early._exe._early.jobs) == ["k1"]
    ir_text = early._exe.kernel_ir
    assert ir_text == serial._exe.kernel_ir and ir_text.index('"k0"') < ir_text.index('"k1"')
    args = _args()
    for g, w in zip(early(*args), serial(*args)):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint8), np.asarray(w).view(np.uint8))


def test_submit_says_when_code_generation_starts() -> None:
    text = early_compile.group_text(_one_function_module(), ["kernel"])
    started = threading.Event()
    obj, _ = parallel_compile.submit(text, True, True, emitting=started).result()
    assert started.is_set() and obj
    failed = threading.Event()
    with pytest.raises(RuntimeError):
        parallel_compile.submit("not IR", True, True, emitting=failed).result()
    assert failed.is_set()  # (a caller waiting for it is not left waiting)


def _one_function_module() -> ir.Module:
    mod = new_module("early_one")
    fn = ir.Function(mod, ir.FunctionType(F32, [F32]), "kernel")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(b.fadd(fn.args[0], fn.args[0]))
    return mod


def test_the_last_kernel_compiles_early_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A program's one big kernel (softmax alone): what follows its emission runs beside
    its code generation; same kernel module, same bits as compiled serially."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    text = PROGRAM.replace("return %p, %r", "return %p, %y")  # the softmax alone
    progs = []
    for threads in (1, 2):
        monkeypatch.setattr(parallel_compile, "threads", lambda limit, n=threads: n)
        monkeypatch.setattr(early_compile, "MIN_INSTRUCTIONS", 100)
        cache.clear_memory()
        progs.append(xlapy.compile(text, backend="cpu", options=OPTS))
    serial, early = progs
    assert len(early._exe.kernel_specs) == 1
    assert list(early._exe._early.jobs) == [early._exe.kernel_specs[0].name]
    assert not serial._exe._early.jobs
    assert early._exe.kernel_ir == serial._exe.kernel_ir
    args = _args()
    for g, w in zip(early(*args), serial(*args)):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint8), np.asarray(w).view(np.uint8))


def test_group_text_keeps_what_its_functions_reach() -> None:
    mod = new_module("early_text")
    helper = ir.Function(mod, ir.FunctionType(F32, [F32]), "helper")
    b = ir.IRBuilder(helper.append_basic_block())
    b.ret(b.fadd(helper.args[0], helper.args[0]))
    ir.Function(mod, ir.FunctionType(VOID, [I64]), "declared")
    for name in ("kernel", "other"):
        fn = ir.Function(mod, ir.FunctionType(F32, [F32]), name)
        b = ir.IRBuilder(fn.append_basic_block())
        b.ret(b.call(helper, [fn.args[0]]) if name == "kernel" else fn.args[0])
    text = early_compile.group_text(mod, ["kernel"])
    assert 'define float @"kernel"' in text and 'define float @"helper"' in text
    assert '@"other"' not in text and 'declare void @"declared"' in text
    assert text.count('define float @"helper"') == 1
    llvm.parse_assembly(text).verify()
