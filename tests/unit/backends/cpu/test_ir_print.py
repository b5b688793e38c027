"""ir_print.function_text writes a kernel function character for character as llvmlite's
str() does (the module text is the compile cache's key and what LLVM parses), for every
kernel module of the JAX reference workloads (small shapes) and a few programs of
scalar, integer, compare and conversion kernels, on the host and the portable targets."""

from __future__ import annotations

from typing import Any

import pytest
from llvmlite import ir

import xlapy
from xlapy.backends.cpu import cache, ir_print, llvm_util

PROGRAMS = [
    """
func.func @main(%x: tensor<5x7xf32>, %y: tensor<5x7xi32>) -> (tensor<5x7xf32>, tensor<5x7xi32>) {
  %c = stablehlo.compare GT, %x, %x : (tensor<5x7xf32>, tensor<5x7xf32>) -> tensor<5x7xi1>
  %t = stablehlo.tanh %x : tensor<5x7xf32>
  %l = stablehlo.log %x : tensor<5x7xf32>
  %s = stablehlo.select %c, %t, %l : tensor<5x7xi1>, tensor<5x7xf32>
  %f = stablehlo.convert %y : (tensor<5x7xi32>) -> tensor<5x7xf32>
  %r = stablehlo.add %s, %f : tensor<5x7xf32>
  %m = stablehlo.multiply %y, %y : tensor<5x7xi32>
  %sh = stablehlo.shift_right_logical %m, %y : tensor<5x7xi32>
  return %r, %sh : tensor<5x7xf32>, tensor<5x7xi32>
}
""",
    """
func.func @main(%x: tensor<3x4x6xf64>) -> tensor<6x3xf64> {
  %z = stablehlo.constant dense<0.0> : tensor<f64>
  %s = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1]
       : (tensor<3x4x6xf64>, tensor<f64>) -> tensor<3x6xf64>
  %t = stablehlo.transpose %s, dims = [1, 0] : (tensor<3x6xf64>) -> tensor<6x3xf64>
  %e = stablehlo.exponential %t : tensor<6x3xf64>
  return %e : tensor<6x3xf64>
}
""",
]


def _modules(text: str, monkeypatch: pytest.MonkeyPatch) -> list[ir.Module]:
    """The kernel modules (llvmlite) a compile of `text` prints."""
    from xlapy.backends.cpu import kernel_compile

    seen: list[ir.Module] = []
    real = kernel_compile.module_texts

    def spy(mod: ir.Module, groups: Any) -> Any:
        seen.append(mod)
        return real(mod, groups)

    monkeypatch.setattr(kernel_compile, "module_texts", spy)
    cache.clear_memory()
    xlapy.compile(text, backend="cpu")
    return seen


def _check(mods: list[ir.Module]) -> int:
    n = 0
    for mod in mods:
        for v in mod.globals.values():
            if isinstance(v, ir.Function) and v.blocks:
                for blk in v.blocks:
                    for i in blk.instructions:
                        i._clear_string_cache()
                assert ir_print.function_text(v) == str(v), v.name
                n += 1
    return n


@pytest.mark.parametrize("target", ["host", "x86-64-v3", "x86-64-v2"])
def test_programs_print_as_llvmlite(target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    from xlapy.backends.cpu import target as tgt

    with tgt.use(tgt.resolve(target)):
        mods = [m for p in PROGRAMS for m in _modules(p, monkeypatch)]
    assert _check(mods) >= 2


def test_jax_workloads_print_as_llvmlite(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("jax")
    from benchmarks.jax_workloads import JAX_WORKLOADS, lower

    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    mods: list[ir.Module] = []
    for name in ("softmax", "layernorm", "attention", "gelu_chain", "transformer", "cnn",
                 "top_k", "scatter_add", "reduce_max_rows", "scan_rnn"):
        case = JAX_WORKLOADS[name](True)
        mods += _modules(lower(case), monkeypatch)
    assert _check(mods) >= 8


def test_other_instructions_go_to_llvmlite() -> None:
    """An instruction kind it does not write (unreachable), and a call with attributes,
    are llvmlite's own text."""
    mod = llvm_util.new_module("m")
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [llvm_util.F32]), name="f")
    callee = ir.Function(mod, ir.FunctionType(llvm_util.F32, [llvm_util.F32]), name="g")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.call(callee, [fn.args[0]], tail=True)
    b.call(callee, [fn.args[0]], fastmath=("fast",))
    b.unreachable()
    assert ir_print.function_text(fn) == str(fn)
    assert "tail call" in str(fn) and "unreachable" in str(fn)


SOFTMAX = """
func.func @main(%x: tensor<8x256xf32>) -> tensor<8x256xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1]
       : (tensor<8x256xf32>, tensor<f32>) -> tensor<8xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<8xf32>) -> tensor<8x256xf32>
  %d = stablehlo.subtract %x, %mb : tensor<8x256xf32>
  %e = stablehlo.exponential %d : tensor<8x256xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1]
       : (tensor<8x256xf32>, tensor<f32>) -> tensor<8xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<8xf32>) -> tensor<8x256xf32>
  %r = stablehlo.divide %e, %sb : tensor<8x256xf32>
  return %r : tensor<8x256xf32>
}
"""


def test_zero_vectors_are_zeroinitializer(monkeypatch: pytest.MonkeyPatch) -> None:
    """llvm_util.broadcast's zero vectors print as `zeroinitializer`, not lane by lane, and
    the kernels compile to the objects of llvmlite's spelled-out zeros (the emitters see
    the same constant: elementwise.is_flushed reads its lanes)."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")

    def build() -> tuple[str, list[bytes]]:
        cache.clear_memory()
        exe = xlapy.compile(SOFTMAX, backend="cpu")._exe
        return exe.kernel_ir, [e.object for e in exe.engines]

    text, objs = build()
    monkeypatch.setattr(llvm_util, "zeros", lambda t: ir.Constant(t, None))
    spelled, want = build()
    assert "zeroinitializer" in text and "float 0.0, float 0.0" in spelled
    assert len(text) < len(spelled) and objs == want
    assert llvm_util.zeros(ir.VectorType(llvm_util.F32, 4)).constant == \
        ir.Constant(ir.VectorType(llvm_util.F32, 4), None).constant
