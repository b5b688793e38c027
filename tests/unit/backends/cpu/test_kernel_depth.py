"""A long chain of element-wise ops (JAX unrolls loops into thousands) compiles on cpu: kernels
are cut every fusion_plan.MAX_FUSED_DEPTH ops instead of recursing past Python's limit."""

from __future__ import annotations

import numpy as np

import xlapy


def _chain(n: int) -> str:
    lines = ["func.func @main(%x: tensor<16xf32>) -> tensor<16xf32> {"]
    prev = "%x"
    for i in range(n):
        op = ("stablehlo.abs", "stablehlo.sqrt", "stablehlo.negate")[i % 3]  # exact ops
        lines.append(f"  %v{i} = {op} {prev} : tensor<16xf32>")
        prev = f"%v{i}"
    return "\n".join([*lines, f"  return {prev} : tensor<16xf32>", "}"])


def test_a_chain_of_3000_ops_compiles_in_bounded_kernels() -> None:
    text = _chain(3000)
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    prog = xlapy.compile(text, "cpu")
    want = xlapy.compile(text, "interpreter")(x)
    np.testing.assert_array_equal(prog(x), want)
    kernels = prog._exe.kernel_specs
    assert len(kernels) >= 10  # ~2,000 ops after simplification, cut every 100
    assert not prog._exe.fallbacks()
