"""Kernels go to LLVM in two modules: explicit-vector kernels through the light pipeline,
the others through O3 (executable._compile_kernels, llvm_util.module_texts); issue 14:
one non-explicit kernel put every kernel of the executable through O3."""

from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

import xlapy
from xlapy.backends.cpu import cache
from xlapy.backends.cpu.llvm_util import I64, module_text, module_texts, new_module

POOL = """
func.func @main(%x: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<32x32xf32>) {
  %e = stablehlo.exponential %x : tensor<64x64xf32>
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = "stablehlo.reduce_window"(%e, %init) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) {window_dimensions = array<i64: 2, 2>, window_strides = array<i64: 2, 2>}
     : (tensor<64x64xf32>, tensor<f32>) -> tensor<32x32xf32>
  return %e, %p : tensor<64x64xf32>, tensor<32x32xf32>
}
"""


def _fn(mod: ir.Module, name: str, callee: ir.Function | None = None) -> ir.Function:
    fn = ir.Function(mod, ir.FunctionType(I64, [I64]), name=name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    x = fn.args[0]
    b.ret(b.call(callee, [x]) if callee is not None else b.add(x, x))
    return fn


def test_module_texts_splits_by_group_with_what_each_reaches() -> None:
    mod = new_module("m")
    helper = _fn(mod, "helper")
    _fn(mod, "a", helper)
    _fn(mod, "b")
    _fn(mod, "c")
    whole, (ab, c) = module_texts(mod, [["a", "b"], ["c"]])
    assert whole == module_text(mod)
    for text in (whole, ab, c):
        llvm.parse_assembly(text).verify()
    assert all(f'@"{n}"' in ab for n in ("a", "b", "helper")) and '@"c"' not in ab
    assert '@"c"' in c and '@"a"' not in c and '@"helper"' not in c
    assert module_texts(mod, [["a", "b", "c"]]) == (whole, [whole])  # one group: printed once


def test_explicit_kernels_skip_o3_beside_a_native_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")  # compile here: the optimized IR is kept
    cache.clear_memory()
    prog = xlapy.compile(POOL, backend="cpu")
    exe = prog._exe
    kinds = {k.root.opcode: k.explicit for k in exe.kernel_specs}
    assert kinds == {"exponential": True, "reduce_window": False}, kinds
    assert [e.pipeline for e in exe.engines] == ["light", "O3"]
    light, o3 = (e.asm_ir for e in exe.engines)
    by_root = {k.root.opcode: k.name for k in exe.kernel_specs}
    assert f'@{by_root["exponential"]}(' in light and f'@{by_root["reduce_window"]}(' not in light
    assert f'@{by_root["reduce_window"]}(' in o3 and f'@{by_root["exponential"]}(' not in o3
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    got = prog(x)
    want = xlapy.compile(POOL, backend="interpreter")(x)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)


def test_top_k_compiles_light_with_its_comparator_inlined() -> None:
    """topk_emit's module goes through the light pipeline (issue 14: O3 was a third of
    top_k's compile), whose always-inliner still inlines the per-element comparator."""
    from tests.unit.backends.cpu.test_topk_emit import _sort_slice_text
    from xlapy.backends.cpu import topk_emit
    from xlapy.stablehlo import parse_module

    mod = parse_module(_sort_slice_text((8, 64), 1, 4, "f32", "GT", "TOTALORDER"))
    sort = next(i for i in mod.entry_computation().instructions if i.opcode == "sort")
    run = topk_emit.plan(sort)
    assert run is not None
    opt = run.engine.asm_ir  # type: ignore[attr-defined]
    assert run.engine.pipeline == "light"  # type: ignore[attr-defined]
    assert "define void @topk_rows(" in opt and "@less" not in opt, opt[:2000]
