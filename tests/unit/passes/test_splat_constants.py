"""Lazy splats (issue 21): a splat constant is one element until something needs them all.

The parser keeps `dense<v>` as a broadcast view (Literal.is_splat); SplatToBroadcast turns it
into broadcast_in_dim of a scalar so the cpu backend computes it in its kernels instead of
materializing it at compile time; results made from splats are memory the caller owns."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import xlapy
from xlapy.passes.splat_constants import SplatToBroadcast
from xlapy.stablehlo import parse_module

SUM = """func.func @main(%x: tensor<f32>) -> (tensor<f32>, tensor<4x3xf32>) {{
  %c = stablehlo.constant dense<1.5> : tensor<{n}xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%c init: %z) applies stablehlo.add across dimensions = [0]
      : (tensor<{n}xf32>, tensor<f32>) -> tensor<f32>
  %r = stablehlo.add %s, %x : tensor<f32>
  %k = stablehlo.constant dense<2.0> : tensor<4x3xf32>
  return %r, %k : tensor<f32>, tensor<4x3xf32>
}}"""


def test_pass_rewrites_splats_only() -> None:
    module = parse_module(SUM.format(n=8))
    assert SplatToBroadcast().run(module)
    ops = [i.opcode for i in module.entry.instructions]
    assert ops.count("broadcast_in_dim") == 2
    consts = [i for i in module.entry.instructions if i.opcode == "constant"]
    assert all(c.shape.rank == 0 for c in consts)
    assert not SplatToBroadcast().run(module)


def test_non_splat_constant_is_kept() -> None:
    text = """func.func @main() -> tensor<2xf32> {
  %c = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  return %c : tensor<2xf32>
}"""
    module = parse_module(text)
    assert not SplatToBroadcast().run(module)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_splat_results_are_owned_and_right(backend: str) -> None:
    exe = xlapy.compile(SUM.format(n=1000), backend=backend)
    r, k = exe(np.float32(1.0))
    assert float(r) == 1501.0
    assert k.flags.writeable and k.flags.c_contiguous
    k[...] = 7
    assert (exe(np.float32(1.0))[1] == 2.0).all()


def test_cpu_compile_does_not_materialize_a_big_splat() -> None:
    """100M f32 (400 MB): the kernel computes the 1.5s; nothing that size is allocated."""
    n = 100_000_000
    tracemalloc.start()
    try:
        exe = xlapy.compile(SUM.format(n=n), backend="cpu")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak
    assert not exe._exe.fallbacks()
    assert float(exe(np.float32(0.0))[0]) == pytest.approx(1.5 * n, rel=1e-6)


def test_folding_skips_big_operands() -> None:
    """XLA's constant folder skips ops with big operands: a reduce of a 10M-element splat
    stays a reduce instead of costing the compile 30 MB and a full evaluation."""
    from xlapy.passes.constant_folding import ConstantFolding

    module = parse_module(SUM.format(n=10_000_000))
    ConstantFolding().run(module)
    assert "reduce" in [i.opcode for i in module.entry.instructions]
    module = parse_module(SUM.format(n=1000))
    ConstantFolding().run(module)
    assert "reduce" not in [i.opcode for i in module.entry.instructions]


def test_cpu_compile_function_does_not_materialize_a_big_splat() -> None:
    """The path `xlapy run --backend cpu` and the conformance suite take."""
    from xlapy.backends import get_backend

    module = parse_module(SUM.format(n=100_000_000))
    tracemalloc.start()
    try:
        exe = get_backend("cpu").compile_function(module, module.entry)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak
    assert not exe.fallbacks()
    consts = [i for i in module.entry.instructions if i.opcode == "constant"]
    assert consts[0].attrs.literal.is_splat  # the caller's module is unchanged
    r, k = exe.run_computation([np.float32(0.0)])
    assert float(r) == pytest.approx(1.5e8, rel=1e-6) and (k == 2.0).all()
