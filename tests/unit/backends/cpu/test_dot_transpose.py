# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""dot_transpose.py: transpose(dot_general(A, B)) runs as dot_general(B, A) on the cpu
backend (no transpose kernel), with the interpreter's values; other transposes and dots read
by others stay."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.dot_transpose import FoldDotTranspose
from xlapy.stablehlo import parse_module

#: A weight gradient as JAX writes it: contract the batch of g and x, then transpose.
GRAD = """func.func @main(%g: tensor<{b}x{n}xf32>, %x: tensor<{b}x{m}xf32>) -> tensor<{m}x{n}xf32> {{
  %0 = stablehlo.dot_general %g, %x, contracting_dims = [0] x [0] : (tensor<{b}x{n}xf32>, tensor<{b}x{m}xf32>) -> tensor<{n}x{m}xf32>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<{n}x{m}xf32>) -> tensor<{m}x{n}xf32>
  return %1 : tensor<{m}x{n}xf32>
}}"""

BATCHED = """func.func @main(%a: tensor<3x5x7x4xf64>, %b: tensor<3x4x6xf64>) -> tensor<3x6x5x7xf64> {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [3] x [1] : (tensor<3x5x7x4xf64>, tensor<3x4x6xf64>) -> tensor<3x5x7x6xf64>
  %1 = stablehlo.transpose %0, dims = [0, 3, 1, 2] : (tensor<3x5x7x6xf64>) -> tensor<3x6x5x7xf64>
  return %1 : tensor<3x6x5x7xf64>
}"""

#: Not folded: a permutation that does not swap the free groups; a dot read twice.
OTHER_PERM = BATCHED.replace("dims = [0, 3, 1, 2]", "dims = [0, 3, 2, 1]").replace(
    "tensor<3x6x5x7xf64>", "tensor<3x6x7x5xf64>")
READ_TWICE = """func.func @main(%g: tensor<8x5xf32>, %x: tensor<8x3xf32>) -> (tensor<3x5xf32>, tensor<5x3xf32>) {
  %0 = stablehlo.dot_general %g, %x, contracting_dims = [0] x [0] : (tensor<8x5xf32>, tensor<8x3xf32>) -> tensor<5x3xf32>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<5x3xf32>) -> tensor<3x5xf32>
  return %1, %0 : tensor<3x5xf32>, tensor<5x3xf32>
}"""


def _ops(text: str) -> list[str]:
    prog = xlapy.compile(text, backend="cpu")
    return [line.split()[1] for line in prog._exe.explain().splitlines()
            if line.startswith("  ")]


@pytest.mark.parametrize("b,n,m", [(8, 5, 3), (256, 300, 129), (64, 1, 40)])
def test_weight_gradient_has_no_transpose(b: int, n: int, m: int) -> None:
    text = GRAD.format(b=b, n=n, m=m)
    assert "transpose" not in _ops(text)
    rng = np.random.default_rng(0)
    g = rng.standard_normal((b, n)).astype(np.float32)
    x = rng.standard_normal((b, m)).astype(np.float32)
    got = xlapy.compile(text, backend="cpu")(g, x)
    np.testing.assert_allclose(got, (g.T @ x).T, rtol=2e-5, atol=2e-5 * np.sqrt(b))
    np.testing.assert_allclose(got, xlapy.compile(text, backend="interpreter")(g, x),
                               rtol=2e-5, atol=2e-5 * np.sqrt(b))


def test_batched_dot_swaps_its_free_groups() -> None:
    module = parse_module(BATCHED)
    assert FoldDotTranspose().run(module)
    ops = [i.opcode for i in module.entry_computation().instructions]
    assert "transpose" not in ops and ops.count("dot_general") == 1
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 5, 7, 4)), rng.standard_normal((3, 4, 6))
    got = xlapy.compile(BATCHED, backend="cpu")(a, b)
    np.testing.assert_allclose(got, np.einsum("zijk,zkl->zlij", a, b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("text", [OTHER_PERM, READ_TWICE])
def test_other_transposes_stay(text: str) -> None:
    assert not FoldDotTranspose().run(parse_module(text))


#: JAX's einsum("bhqk,bkhd->bqhd", p, v): dot_general(v, p) contracting v's dimension 1 and
#: p's last, then a transpose.
PV = """func.func @main(%p: tensor<2x3x5x6xf32>, %v: tensor<2x6x3x4xf32>) -> tensor<2x5x3x4xf32> {
  %0 = stablehlo.dot_general %v, %p, batching_dims = [0, 2] x [0, 1], contracting_dims = [1] x [3] : (tensor<2x6x3x4xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x4x5xf32>
  %1 = stablehlo.transpose %0, dims = [0, 3, 1, 2] : (tensor<2x3x4x5xf32>) -> tensor<2x5x3x4xf32>
  return %1 : tensor<2x5x3x4xf32>
}"""


def test_a_dot_whose_rhs_reads_as_rows_swaps_its_operands() -> None:
    module = parse_module(PV)
    assert FoldDotTranspose().run(module)
    dots = [i for i in module.entry_computation().instructions if i.opcode == "dot_general"]
    assert len(dots) == 1 and dots[0].operands[0].name == "p"  # p is the lhs now
    assert tuple(dots[0].shape.dimensions) == (2, 3, 5, 4)
    rng = np.random.default_rng(2)
    p = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    v = rng.standard_normal((2, 6, 3, 4)).astype(np.float32)
    got = xlapy.compile(PV, backend="cpu")(p, v)
    np.testing.assert_allclose(got, np.einsum("bhqk,bkhd->bqhd", p, v), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, xlapy.compile(PV, backend="interpreter")(p, v),
                               rtol=1e-5, atol=1e-5)


#: JAX's x @ w.T: a transpose of the weight, then a plain dot; both transposed (w.T @ x.T).
XWT = """func.func @main(%x: tensor<{m}x{k}x{t}>, %w: tensor<{n}x{k}x{t}>) -> tensor<{m}x{n}x{t}> {{
  %0 = stablehlo.transpose %w, dims = [1, 0] : (tensor<{n}x{k}x{t}>) -> tensor<{k}x{n}x{t}>
  %1 = stablehlo.dot_general %x, %0, contracting_dims = [1] x [0] : (tensor<{m}x{k}x{t}>, tensor<{k}x{n}x{t}>) -> tensor<{m}x{n}x{t}>
  return %1 : tensor<{m}x{n}x{t}>
}}"""
BOTH_T = """func.func @main(%w: tensor<8x16xf32>, %x: tensor<4x8xf32>) -> tensor<16x4xf32> {
  %0 = stablehlo.transpose %w, dims = [1, 0] : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %1 = stablehlo.transpose %x, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %2 = stablehlo.dot_general %0, %1, contracting_dims = [1] x [0] : (tensor<16x8xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  return %2 : tensor<16x4xf32>
}"""


@pytest.mark.parametrize("m,k,n,t", [(256, 1024, 512, "f32"), (3, 700, 400, "f64"),
                                     (1, 1024, 512, "f32"), (5, 33, 20, "f32"),
                                     (64, 1024, 512, "bf16"), (8, 1024, 512, "f16")])
def test_a_transposed_weight_is_read_where_it_lies(m: int, k: int, n: int, t: str) -> None:
    """x @ w.T reads w [n, k] as B^T (no transpose kernel copying it every call: 256 x 1024
    @ (512 x 1024)^T 1.25 -> 1.07 ms), bf16 and f16 weights too; within f32's error of the
    product (and the result's rounding), as the interpreter."""
    from xlapy.backends.cpu.dot_transpose import FOLD_RHS_MIN

    text = XWT.format(m=m, k=k, n=n, t=t)
    assert ("transpose" in _ops(text)) == (n * k < FOLD_RHS_MIN)  # (small: the copy is cheap)
    import ml_dtypes

    dt = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16,
          "f16": np.float16}[t]
    rng = np.random.default_rng(k)
    x, w = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((n, k)).astype(dt)
    got = np.asarray(xlapy.compile(text, backend="cpu")(x, w), np.float64)
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x, w), np.float64)
    eps = np.finfo(np.float32 if t in ("bf16", "f16") else dt).eps
    ulp = {"bf16": 2.0 ** -7, "f16": 2.0 ** -10}.get(t, 0.0)  # (one ulp: f32 sums differ)
    np.testing.assert_allclose(got, want, rtol=k * eps + ulp, atol=k * eps * np.sqrt(k))


def test_a_transposed_lhs_keeps_the_rhs_transpose() -> None:
    """Both operands transposed (w.T @ x.T): folded, the GEMM ran 1.05 -> 1.52 ms; left."""
    from xlapy.backends.cpu.dot_transpose import FoldRhsTranspose

    assert not FoldRhsTranspose().run(parse_module(BOTH_T))
