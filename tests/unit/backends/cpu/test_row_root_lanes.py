# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""A row kernel whose root has the rows' shape (logsumexp: log(sum exp(x - max)) + max per
row) runs its row passes in vector lanes, the root once per row: bf16 logsumexp had gone to
scalar IR that LLVM could not vectorize (its bf16 roundings), 4.7-6.6x XLA's time."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.lanes import vector_width

LSE = """
func.func public @main(%arg0: tensor<{r}x{c}xf32>) -> tensor<{r}x{t}> {{
  %0 = stablehlo.convert %arg0 : (tensor<{r}x{c}xf32>) -> tensor<{r}x{c}x{t}>
  %lo = stablehlo.constant dense<0xFF80> : tensor<{t}>
  %1 = stablehlo.reduce(%0 init: %lo) applies stablehlo.maximum across dimensions = [1] : (tensor<{r}x{c}x{t}>, tensor<{t}>) -> tensor<{r}x{t}>
  %4 = stablehlo.is_finite %1 : (tensor<{r}x{t}>) -> tensor<{r}xi1>
  %z = stablehlo.constant dense<0.0> : tensor<{r}x{t}>
  %6 = stablehlo.select %4, %1, %z : tensor<{r}xi1>, tensor<{r}x{t}>
  %8 = stablehlo.broadcast_in_dim %6, dims = [0] : (tensor<{r}x{t}>) -> tensor<{r}x{c}x{t}>
  %9 = stablehlo.subtract %0, %8 : tensor<{r}x{c}x{t}>
  %10 = stablehlo.exponential %9 : tensor<{r}x{c}x{t}>
  %11 = stablehlo.convert %10 : (tensor<{r}x{c}x{t}>) -> tensor<{r}x{c}xf32>
  %zf = stablehlo.constant dense<0.0> : tensor<f32>
  %12 = stablehlo.reduce(%11 init: %zf) applies stablehlo.add across dimensions = [1] : (tensor<{r}x{c}xf32>, tensor<f32>) -> tensor<{r}xf32>
  %13 = stablehlo.convert %12 : (tensor<{r}xf32>) -> tensor<{r}x{t}>
  %15 = stablehlo.log %13 : tensor<{r}x{t}>
  %16 = stablehlo.add %15, %6 : tensor<{r}x{t}>
  return %16 : tensor<{r}x{t}>
}}
"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("r,c", [(64, 256), (7, 37), (3, 1000), (1, 24)])
@pytest.mark.parametrize("t", ["bf16", "f32"])
def test_per_row_root_runs_rows_in_lanes(t: str, r: int, c: int, threads: int) -> None:
    text = LSE.format(r=r, c=c, t=t).replace("0xFF80> : tensor<f32>", "0xFF800000> : tensor<f32>")
    x = np.random.default_rng(r + c).standard_normal((r, c)).astype(np.float32) * 4
    x[0, :3] = [np.inf, 1.0, -np.inf] if c >= 3 else x[0, :3]
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": threads, "split_cost": 1})
    got = np.asarray(prog(x)).astype(np.float32)
    ref = np.asarray(xlapy.compile(text, backend="interpreter")(x)).astype(np.float32)
    tol = 1e-2 if t == "bf16" else 2e-6
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    assert len(prog._exe.kernel_specs) == 1  # one row kernel
    assert f"<{vector_width()} x float>" in prog._exe.kernel_ir  # the rows in lanes


KEEPDIMS = {
    "max": lambda x: x.max(-1, keepdims=True),
    "logsumexp": lambda x: __import__("jax").nn.logsumexp(x, -1, keepdims=True),
    "norm": lambda x: __import__("jax").numpy.linalg.norm(x, axis=-1, keepdims=True),
    "var": lambda x: x.var(-1, keepdims=True)[..., None],  # [r, 1, 1]
}


@pytest.mark.parametrize("name", list(KEEPDIMS))
def test_a_keepdims_per_row_root_runs_rows_in_lanes(name: str) -> None:
    """A per-row root with trailing 1s (keepdims=True) is per-row too: it had no lanes, so
    LLVM's vectorizer summed each row in one vaddps chain (AVX2, 4096 x 1024, same process:
    jax.nn.logsumexp(keepdims=True) 1.95 -> 0.79 ms, x.max(-1, keepdims=True) 0.90 -> 0.31,
    x.var(-1, keepdims=True) 0.53 -> 0.31; XLA 0.35-0.68 for the last two)."""
    jax = pytest.importorskip("jax")
    x = np.random.default_rng(5).standard_normal((64, 300)).astype(np.float32)
    x[1, :2] = [np.inf, np.nan]
    text = jax.jit(KEEPDIMS[name]).lower(x).as_text()
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": 2, "split_cost": 1})
    ref = np.asarray(xlapy.compile(text, backend="interpreter")(x))
    np.testing.assert_allclose(np.asarray(prog(x)), ref, rtol=2e-6, atol=1e-6)
    assert f"<{vector_width()} x float>" in prog._exe.kernel_ir  # the rows in lanes
