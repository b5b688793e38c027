# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""Reshapes as views of row-major buffers in kernels: a reshape of a leaf reads at the
offset of its own index (no division into the leaf's indices and back), and a reshape root
is walked in its operand's dims (kernel_flat.peel_reshape). A ViT patch embedding's
reshape(transpose(reshape(x))) had divided every index by 3, 48, 768, 10752 and back (6.1 ms,
XLA 3.1); the interpreter's bits on 1 and 2 threads."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.kernel_flat import peel_reshape
from xlapy.passes.hlo_builder import HloBuilder

#: NHWC patches of 4 x 4 (ViT's patchify, small): [2, 8, 8, 3] -> [2, 4, 48].
NHWC = """
func.func @main(%x: tensor<2x8x8x3xf32>) -> tensor<2x4x48xf32> {
  %0 = stablehlo.reshape %x : (tensor<2x8x8x3xf32>) -> tensor<2x2x4x2x4x3xf32>
  %1 = stablehlo.transpose %0, dims = [0, 1, 3, 2, 4, 5] : (tensor<2x2x4x2x4x3xf32>) -> tensor<2x2x2x4x4x3xf32>
  %2 = stablehlo.reshape %1 : (tensor<2x2x2x4x4x3xf32>) -> tensor<2x4x48xf32>
  return %2 : tensor<2x4x48xf32>
}
"""
#: NCHW patches of 16 x 16 (a PyTorch-style ViT): [4, 3, 64, 64] -> [4, 16, 768].
NCHW = """
func.func @main(%x: tensor<4x3x64x64xf32>) -> tensor<4x16x768xf32> {
  %0 = stablehlo.reshape %x : (tensor<4x3x64x64xf32>) -> tensor<4x3x4x16x4x16xf32>
  %1 = stablehlo.transpose %0, dims = [0, 2, 4, 1, 3, 5] : (tensor<4x3x4x16x4x16xf32>) -> tensor<4x4x4x3x16x16xf32>
  %2 = stablehlo.reshape %1 : (tensor<4x4x4x3x16x16xf32>) -> tensor<4x16x768xf32>
  return %2 : tensor<4x16x768xf32>
}
"""
#: relu, then flattened: the root reshape's operand is an element-wise value.
FLATTEN = """
func.func @main(%x: tensor<16x12x10x6xf32>) -> tensor<16x720xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<16x12x10x6xf32>
  %0 = stablehlo.maximum %x, %z : tensor<16x12x10x6xf32>
  %1 = stablehlo.reshape %0 : (tensor<16x12x10x6xf32>) -> tensor<16x720xf32>
  return %1 : tensor<16x720xf32>
}
"""
#: A leaf reshaped with no dimension shared, then an element-wise op.
NO_SHARED = """
func.func @main(%x: tensor<16x224x3xf32>) -> tensor<224x48xf32> {
  %0 = stablehlo.reshape %x : (tensor<16x224x3xf32>) -> tensor<224x48xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<224x48xf32>
  return %1 : tensor<224x48xf32>
}
"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["NHWC", "NCHW", "FLATTEN", "NO_SHARED"])
def test_reshape_views_keep_the_interpreters_bits_without_index_divisions(
        name: str, threads: int) -> None:
    text = globals()[name]
    fn = xlapy.compile(text, backend="interpreter")
    shape = [int(d) for d in text.split("tensor<")[1].split("xf32")[0].split("x")]
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    x.reshape(-1)[:4] = [np.nan, -0.0, np.inf, 1e-40]
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": threads, "split_cost": 1})
    got, want = np.asarray(cpu(x)), np.asarray(fn(x))
    assert got.tobytes() == want.tobytes()
    assert not cpu._exe.fallbacks()
    ir = cpu._exe.kernel_ir
    if name != "NCHW":  # (its 16-wide rows split into vector lanes: lane_split.py, as before)
        assert "udiv" not in ir and "urem" not in ir, f"{name}: index divisions left"


def test_peel_reshape_keeps_a_split_and_leaves() -> None:
    """The operand's dims are walked only when the last dimension differs, the operand is
    computed in the kernel (not a leaf: that read is a view already) and its outer extent
    (after leading dimensions of one element, walked without them) still splits over
    threads."""
    g = HloBuilder()
    x = g.param("f32[16,12,10,6]")
    y = g.op("maximum", x, x)
    flat = g.op("reshape", y, shape=(16, 720))
    assert peel_reshape(flat, {id(x): 0}, [], []) is y
    assert peel_reshape(g.op("reshape", x, shape=(16, 720)), {id(x): 0}, [], []).opcode == "reshape"
    z = g.op("maximum", g.param("f32[1,4096]"), g.param("f32[1,4096]"))
    one = g.op("reshape", z, shape=(64, 64))
    walked = peel_reshape(one, {}, [], [])  # [1, 4096] as [4096]: threads split it
    assert walked.opcode == "reshape" and walked.operands[0] is z
    assert walked.shape.dimensions == (4096,)
    short = g.op("reshape", g.op("maximum", g.param("f32[1,2,32]"), g.param("f32[1,2,32]")),
                 shape=(8, 8))
    assert peel_reshape(short, {}, [], []) is short  # (2 of 8 rows to split: as it is)
    same_last = g.op("reshape", g.op("maximum", x, x), shape=(192, 10, 6))
    assert peel_reshape(same_last, {id(x): 0}, [], []) is same_last
