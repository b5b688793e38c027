"""Kernels set the denormal flush bits of MXCSR for their run and put the caller's back
(llvm_util.kernel_mxcsr): a top-level executable's kernels without a branch (they run once
per call), a loop body's behind a test (the native loop driver sets FTZ once for all its
iterations). Whatever the calling thread's MXCSR holds, the result follows the executable's
denormal mode and the thread's MXCSR is unchanged after the call."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import xlapy
from xlapy import denormal
from xlapy.backends.cpu import target
from xlapy.backends.cpu.fp_env import MXCSR_DAZ, MXCSR_FTZ_DAZ
from xlapy.backends.cpu.llvm_util import Engine

pytestmark = pytest.mark.skipif(not (target.current().is_x86 and target.current().runs_here),
                                reason="MXCSR is x86's; the code must run here")

_IR = """
declare void @llvm.x86.sse.stmxcsr(i8*)
declare void @llvm.x86.sse.ldmxcsr(i8*)
define i32 @get_mxcsr() {
  %p = alloca i32
  %q = bitcast i32* %p to i8*
  call void @llvm.x86.sse.stmxcsr(i8* %q)
  %v = load i32, i32* %p
  ret i32 %v
}
define void @set_mxcsr(i32 %v) {
  %p = alloca i32
  store i32 %v, i32* %p
  %q = bitcast i32* %p to i8*
  call void @llvm.x86.sse.ldmxcsr(i8* %q)
  ret void
}
"""
# A top-level kernel (x * y) and a native while loop whose body's kernel multiplies too.
PROGRAM = """
func.func public @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %p = stablehlo.multiply %x, %y : tensor<4xf32>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<4xf32>
    cond {
      %n = stablehlo.constant dense<3> : tensor<i32>
      %lt = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      %w = stablehlo.multiply %v, %y : tensor<4xf32>
      stablehlo.return %j, %w : tensor<i32>, tensor<4xf32>
    }
  return %p, %r#1 : tensor<4xf32>, tensor<4xf32>
}
"""


#: MXCSR's exception flags (sticky status bits: set by whatever computes, not a mode).
_FLAGS = 0x3F


@pytest.fixture(scope="module")
def mxcsr() -> tuple[ctypes._CFuncPtr, ctypes._CFuncPtr]:
    eng = Engine(_IR, exports=["get_mxcsr", "set_mxcsr"])
    get = ctypes.CFUNCTYPE(ctypes.c_uint32)(eng.address("get_mxcsr"))
    put = ctypes.CFUNCTYPE(None, ctypes.c_uint32)(eng.address("set_mxcsr"))
    get._engine = eng  # type: ignore[attr-defined]  # (the code lives while they do)
    return get, put


@pytest.mark.parametrize("caller_flush", [False, True])
@pytest.mark.parametrize("mode", denormal.MODES)
def test_the_callers_mxcsr_is_kept_and_the_mode_holds(mxcsr: tuple, mode: str,
                                                      caller_flush: bool) -> None:
    get, put = mxcsr
    exe = xlapy.compile(PROGRAM, backend="cpu", options={"denormal": mode, "num_threads": 1})
    assert "native while loop" in exe._exe.explain()
    x = np.full(4, 1e-20, np.float32)
    y = np.full(4, 1e-19, np.float32)  # x * y = 1e-39: a subnormal
    before = get()
    bits = MXCSR_FTZ_DAZ | MXCSR_DAZ
    mine = (before | bits) if caller_flush else (before & ~bits)
    put(mine)
    try:
        p, w = (np.asarray(r) for r in exe(x, y))
        after = get()
    finally:
        put(before)
    assert after & ~_FLAGS == mine & ~_FLAGS  # (the sticky exception flags aside)
    flushed = mode == denormal.FTZ
    assert (p[0] == 0) == flushed and (p[0] != 0 or flushed)
    assert np.all(w == 0)  # 1e-20 * 1e-19^3 underflows to zero either way
    if not flushed:
        np.testing.assert_array_equal(p, np.float32(1e-20) * np.float32(1e-19))


def test_top_level_kernels_set_mxcsr_without_a_branch() -> None:
    """Two basic blocks fewer per side of a top-level kernel (code generation time); the
    loop body's kernels keep the test that skips the load under the loop driver."""
    exe = xlapy.compile(PROGRAM, backend="cpu")._exe
    assert "ldmxcsr" in exe.kernel_ir and "entry.if:" not in exe.kernel_ir
    body = [sub for _, sub in exe.subexecs if sub.kernel_ir and "multiply" in sub.explain()]
    assert body and all("entry.if:" in sub.kernel_ir for sub in body)
