# ruff: noqa: E501  (StableHLO text lines)
"""A native loop's kernel steps run in the floating-point environment the while driver set
(fp_env.ENV_SET): they skip reading MXCSR, so each denormal mode needs its own driver, and a
loop's results keep its mode's subnormal rule whichever mode's loop ran first."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import xlapy
from xlapy import denormal
from xlapy.backends.cpu import fp_env, target, while_driver

# x * 1e-10 per iteration: 2 iterations take 1e-19 to 1e-39, a subnormal f32
LOOP = """
func.func @main(%x: tensor<4xf32>, %n: tensor<i32>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %s = stablehlo.constant dense<1.0e-10> : tensor<f32>
  %0:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<4xf32>
   cond {
    %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %b = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %m = stablehlo.multiply %v, %b : tensor<4xf32>
    %j = stablehlo.add %i, %c1 : tensor<i32>
    stablehlo.return %j, %m : tensor<i32>, tensor<4xf32>
  }
  return %0#1 : tensor<4xf32>
}
"""

# a scan: ys[i] = sum(carry) * 1e-22 (subnormal) written in place (dus_window.py), carry += xs[i]
SCAN = """
func.func @main(%xs: tensor<8x4xf32>) -> tensor<8xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c8 = stablehlo.constant dense<8> : tensor<i32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %t = stablehlo.constant dense<1.0e-22> : tensor<f32>
  %a0 = stablehlo.constant dense<0.0> : tensor<4xf32>
  %y0 = stablehlo.constant dense<0.0> : tensor<8xf32>
  %0:3 = stablehlo.while(%i = %c0, %a = %a0, %ys = %y0) : tensor<i32>, tensor<4xf32>, tensor<8xf32>
   cond {
    %p = stablehlo.compare LT, %i, %c8 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %row = stablehlo.dynamic_slice %xs, %i, %c0, sizes = [1, 4] : (tensor<8x4xf32>, tensor<i32>, tensor<i32>) -> tensor<1x4xf32>
    %x = stablehlo.reshape %row : (tensor<1x4xf32>) -> tensor<4xf32>
    %na = stablehlo.add %a, %x : tensor<4xf32>
    %s = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
    %st = stablehlo.multiply %s, %t : tensor<f32>
    %u = stablehlo.reshape %st : (tensor<f32>) -> tensor<1xf32>
    %nys = stablehlo.dynamic_update_slice %ys, %u, %i : (tensor<8xf32>, tensor<1xf32>, tensor<i32>) -> tensor<8xf32>
    %j = stablehlo.add %i, %c1 : tensor<i32>
    stablehlo.return %j, %na, %nys : tensor<i32>, tensor<4xf32>, tensor<8xf32>
  }
  return %0#2 : tensor<8xf32>
}
"""


def _loop(mode: str) -> np.ndarray:
    prog = xlapy.compile(LOOP, backend="cpu", options={"denormal": mode})
    assert any("native while loop" in how for _, _, how in prog._exe.report)
    return np.asarray(prog(np.array([1e-19, -1e-19, 1.0, 0.0], np.float32), np.int32(2)))


@pytest.mark.parametrize("order", [("ftz", "ieee"), ("ieee", "ftz")])
def test_each_mode_keeps_its_rule_whichever_loop_ran_first(order: tuple[str, str]) -> None:
    want = {"ftz": np.float32(0.0),
            "ieee": np.float32(1e-19) * np.float32(1e-10) * np.float32(1e-10)}
    assert want["ieee"] != 0
    for mode in (*order, *order):
        got = _loop(mode)
        assert got[0] == want[mode] and got[1] == -want[mode], (mode, got)
        assert got[2] == np.float32(1.0) * np.float32(1e-10) * np.float32(1e-10)


@pytest.mark.parametrize("mode", denormal.MODES)
def test_in_place_scan_windows_keep_the_mode(mode: str) -> None:
    """The scan's window kernel (dus_window.py) and its other kernel steps run with ENV_SET."""
    xs = np.full((8, 4), 1e-19, np.float32)
    prog = xlapy.compile(SCAN, backend="cpu", options={"denormal": mode})
    assert any("updated in place" in how for _, _, how in prog._exe.report)
    got = np.asarray(prog(xs))
    ref = np.asarray(xlapy.compile(SCAN, backend="interpreter",
                                   options={"denormal": mode})(xs))
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))
    assert (got[1:] != 0).all() if mode == "ieee" else (got == 0).all()


def test_a_driver_per_mode() -> None:
    ftz, ieee = (while_driver.driver_for(m)[0] for m in ("ftz", "ieee"))
    assert ftz is not ieee
    with denormal.use(denormal.IEEE):
        assert while_driver.driver()[0] is ieee
    assert while_driver.driver()[0] is ftz


def test_the_driver_sets_the_flag_only_for_kernels_that_read_it() -> None:
    assert fp_env.driven(12, False) == 12 and fp_env.driven(12, True) == 12 | fp_env.ENV_SET
    assert ctypes.c_int64(fp_env.driven(12, True)).value & ((1 << 63) - 1) == 12
    assert fp_env.driven(12, True) < 0  # (bit 63: a negative i64)


@pytest.mark.skipif(not target.host_target().is_x86, reason="MXCSR is x86's")
def test_a_flagged_call_leaves_mxcsr_alone() -> None:
    """A body kernel called with ENV_SET neither reads nor writes MXCSR: with FTZ clear
    around it, its product stays subnormal; called plainly it flushes and restores."""
    prog = xlapy.compile(LOOP, backend="cpu")
    body, j = next((sub, j) for _, sub in prog._exe.subexecs
                   for j, k in enumerate(sub.kernel_specs) if k.root.opcode == "multiply")
    spec, addr = body.kernel_specs[j], body.kernel_addrs[j]
    assert spec.env_arg
    x = np.array([1e-19, 1e-19, 1e-19, 1e-19], np.float32) * np.float32(1e-10)  # 1e-29
    table = (ctypes.c_void_p * max(body.num_slots, 1))()
    for s, arr in body.static.items():
        table[s] = arr.ctypes.data
    out = np.zeros(4, np.float32)
    table[spec.output] = out.ctypes.data
    for s in spec.inputs:
        if not table[s]:
            table[s] = x.ctypes.data
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(addr)
    fn(ctypes.addressof(table), 0, fp_env.driven(spec.outer, True))
    assert (out != 0).all()  # FTZ clear (this thread's default): not flushed
    out[:] = 1
    fn(ctypes.addressof(table), 0, spec.outer)
    assert (out == 0).all()  # the kernel set FTZ itself
    fn(ctypes.addressof(table), 0, fp_env.driven(spec.outer, True))
    assert (out != 0).all()  # ... and restored it
