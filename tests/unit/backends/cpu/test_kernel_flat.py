"""Element-wise kernels over a last dimension shorter than a vector run over one flat
dimension (kernel_flat.py): vector lanes (they ran scalar), the interpreter's bits on 1 and 2
threads at any element count; a kernel reading anything other than its own index (a
per-channel broadcast, an iota) keeps its shape."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import kernel_flat
from xlapy.backends.cpu.lanes import vector_width
from xlapy.stablehlo import parse_module

CLIP_U8 = """
func.func public @main(%x: tensor<{d}x{t}>, %p: tensor<i1>) -> tensor<{d}xui8> {{
  %k = stablehlo.constant dense<255.0> : tensor<{t}>
  %kb = stablehlo.broadcast_in_dim %k, dims = [] : (tensor<{t}>) -> tensor<{d}x{t}>
  %z = stablehlo.constant dense<0.0> : tensor<{t}>
  %m = stablehlo.multiply %x, %kb : tensor<{d}x{t}>
  %e = stablehlo.exponential %x : tensor<{d}x{t}>
  %s = "stablehlo.select"(%p, %m, %e) : (tensor<i1>, tensor<{d}x{t}>, tensor<{d}x{t}>)
    -> tensor<{d}x{t}>
  %c = stablehlo.clamp %z, %s, %k : (tensor<{t}>, tensor<{d}x{t}>, tensor<{t}>) -> tensor<{d}x{t}>
  %u = stablehlo.convert %c : (tensor<{d}x{t}>) -> tensor<{d}xui8>
  return %u : tensor<{d}xui8>
}}
"""

PER_CHANNEL = """
func.func public @main(%x: tensor<{d}xf32>) -> tensor<{d}xf32> {{
  %c = stablehlo.constant dense<[0.5, 2.0, -1.0]> : tensor<3xf32>
  %b = stablehlo.broadcast_in_dim %c, dims = [{last}] : (tensor<3xf32>) -> tensor<{d}xf32>
  %y = stablehlo.multiply %x, %b : tensor<{d}xf32>
  return %y : tensor<{d}xf32>
}}
"""


def _dims(dims: tuple[int, ...]) -> str:
    return "x".join(map(str, dims))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dims", [(8, 37, 3), (1000, 3), (5, 2), (2, 7, 5)])
@pytest.mark.parametrize("t", ["f32", "bf16"])
def test_short_last_dimension_runs_flat(threads: int, dims: tuple[int, ...], t: str) -> None:
    text = CLIP_U8.format(d=_dims(dims), t=t)
    dt = np.float32 if t == "f32" else ml_dtypes.bfloat16
    x = (np.random.default_rng(1).standard_normal(dims) * 3).astype(dt)
    x.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads,
                                                       "split_cost": 1})
    ref = xlapy.compile(text, backend="interpreter")
    for p in (True, False):
        np.testing.assert_array_equal(prog(x, np.array(p)), ref(x, np.array(p)))
    if np.prod(dims) >= vector_width():
        assert f"<{vector_width()} x float>" in prog._exe.kernel_ir  # lanes, not scalars


def test_per_channel_broadcast_keeps_its_shape() -> None:
    dims = (64, 3)
    text = PER_CHANNEL.format(d=_dims(dims), last=1)
    x = np.random.default_rng(2).standard_normal(dims).astype(np.float32)
    np.testing.assert_array_equal(xlapy.compile(text, backend="cpu")(x),
                                  xlapy.compile(text, backend="interpreter")(x))
    root = parse_module(text).entry.root
    assert kernel_flat.flatten(root, {id(root.operands[0]): 0}, ()) is None


def test_flat_copy_reads_leaves_at_flat_indices() -> None:
    root = parse_module(CLIP_U8.format(d="9x3", t="f32")).entry.root
    x, p = root.parent.parameters
    got = kernel_flat.flatten(root, {id(x): 0, id(p): 1}, ())
    assert got is not None
    flat, leaves = got
    assert flat.shape.dimensions == (27,) and flat is not root
    assert sorted(set(leaves.values())) == [0, 1]  # the same buffers
    # rows (a row reduction's kernel) or a long last dimension: not flattened
    assert kernel_flat.flatten(root, {id(x): 0, id(p): 1}, [root]) is None
    long = parse_module(CLIP_U8.format(d=f"3x{vector_width()}", t="f32")).entry.root
    lx, lp = long.parent.parameters
    assert kernel_flat.flatten(long, {id(lx): 0, id(lp): 1}, ()) is None
