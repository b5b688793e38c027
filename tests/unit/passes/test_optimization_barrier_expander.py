# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""OptimizationBarrierExpander: a barrier is the identity (XLA:CPU removes it too), so CSE
merges a jax.checkpoint forward pass with its recomputation; the values stay the same."""

from __future__ import annotations

import numpy as np

import xlapy
from xlapy.backends.cpu.pipeline import cpu_pipeline
from xlapy.passes.optimization_barrier_expander import OptimizationBarrierExpander
from xlapy.stablehlo import parse_module

#: jax.checkpoint's shape: a product before the barrier, the same product of the barrier's
#: results after it, a single-operand barrier, and a barrier as the result.
REMAT = """func.func @main(%x: tensor<8x4xf32>, %w: tensor<4x4xf32>) -> (tensor<8x4xf32>, tensor<4x4xf32>) {
  %d = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %t = stablehlo.tanh %d : tensor<8x4xf32>
  %b:3 = stablehlo.optimization_barrier %x, %w, %t : tensor<8x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>
  %e = stablehlo.dot_general %b#0, %b#1, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %s = stablehlo.add %e, %b#2 : tensor<8x4xf32>
  %one = stablehlo.optimization_barrier %s : tensor<8x4xf32>
  %r:2 = stablehlo.optimization_barrier %one, %w : tensor<8x4xf32>, tensor<4x4xf32>
  return %r#0, %r#1 : tensor<8x4xf32>, tensor<4x4xf32>
}"""


def _count(module: object, opcode: str) -> int:
    return sum(i.opcode == opcode for c in module.computations  # type: ignore[attr-defined]
               for i in c.instructions)


def test_barriers_become_their_operands() -> None:
    module = parse_module(REMAT)
    assert OptimizationBarrierExpander().run(module)
    assert _count(module, "optimization_barrier") == 0
    assert not OptimizationBarrierExpander().run(module)


def test_the_recomputed_product_merges_with_the_forward_one() -> None:
    module = parse_module(REMAT)
    assert _count(module, "dot_general") == 2
    cpu_pipeline().run(module)
    assert _count(module, "dot_general") == 1 and _count(module, "optimization_barrier") == 0


def test_values_are_the_interpreters() -> None:
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((8, 4)).astype(np.float32),
            rng.standard_normal((4, 4)).astype(np.float32)]
    want = xlapy.compile(REMAT, backend="interpreter")(*args)
    got = xlapy.compile(REMAT, backend="cpu")(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(got[1]), args[1])
