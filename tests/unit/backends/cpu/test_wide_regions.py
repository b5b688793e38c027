"""Wide GEMMs (more columns than rows, which blas.gemm alone splits by columns) with a small
rhs (regions.WIDE_RHS_BYTES) join row-parallel regions: a transformer block's MLP half
(x + relu(x w1) w2 over 256 rows) is one region, equal to NumPy within the GEMM bounds, with
the same bits on any thread count."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.tolerance import Bounded
from xlapy.backends.cpu import cache, regions


def _mlp(rows: int, d: int, n: int, residual: bool) -> str:
    """x @ w1, relu, @ w2 over `rows` rows (d -> n -> 128), plus x when `residual`."""
    tail = "  %y = stablehlo.add %x, %o : tensor<{r}x128xf32>\n  return %y" if residual \
        else "  return %o"
    return ("""
func.func @main(%x: tensor<{r}x{d}xf32>, %w1: tensor<{d}x{n}xf32>,
                %w2: tensor<{n}x128xf32>) -> tensor<{r}x128xf32> {{
  %h = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0]
       : (tensor<{r}x{d}xf32>, tensor<{d}x{n}xf32>) -> tensor<{r}x{n}xf32>
  %z = stablehlo.constant dense<0.0> : tensor<{r}x{n}xf32>
  %r = stablehlo.maximum %h, %z : tensor<{r}x{n}xf32>
  %o = stablehlo.dot_general %r, %w2, contracting_dims = [1] x [0]
       : (tensor<{r}x{n}xf32>, tensor<{n}x128xf32>) -> tensor<{r}x128xf32>
""" + tail + """ : tensor<{r}x128xf32>
}}
""").format(r=rows, d=d, n=n)


def _compile(n: int, threads: int) -> xlapy.CompiledProgram:
    cache.clear_memory()
    # 256 rows (two 128-row chunks), a 128 -> n -> 128 MLP with a residual: w1 is wide
    return xlapy.compile(_mlp(256, 128, n, True), backend="cpu",
                         options={"num_threads": threads, "split_cost": 1})


def _args(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in [(256, 128), (128, n), (n, 128)]]


def _ref(x: np.ndarray, w1: np.ndarray, w2: np.ndarray) -> Bounded:
    hidden = (Bounded.exact(x) @ Bounded.exact(w1)).maximum(0.0)
    return Bounded.exact(x) + hidden @ Bounded.exact(w2)


def _region_lines(prog: xlapy.CompiledProgram) -> list[str]:
    return [line for line in prog._exe.explain().splitlines()  # type: ignore[attr-defined]
            if "row-parallel" in line]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_wide_block_is_one_region(threads: int) -> None:
    prog = _compile(1024, threads)
    lines = _region_lines(prog)
    assert len(lines) == 1 and lines[0].count("%") == 4, prog._exe.explain()  # type: ignore
    args = _args(1024)
    got = prog(*args)
    _ref(*args).check(got)
    if threads > 1:
        np.testing.assert_array_equal(got, _compile(1024, 1)(*args))
    args2 = _args(1024, seed=1)  # new arguments: the region reads the new pointers
    _ref(*args2).check(prog(*args2))


def test_big_rhs_stays_column_split() -> None:
    """A wide GEMM whose rhs is over WIDE_RHS_BYTES runs alone, split by columns; the rest
    of the block still forms a region and the result is the same within bounds."""
    n = regions.WIDE_RHS_BYTES // (128 * 4) + 16
    prog = _compile(n, 2)
    lines = _region_lines(prog)
    assert len(lines) == 1 and "%h" not in lines[0], prog._exe.explain()  # type: ignore
    args = _args(n)
    _ref(*args).check(prog(*args))


@pytest.mark.parametrize("rows", [32, 96])
def test_a_few_rows_against_a_big_rhs_run_alone(rows: int) -> None:
    """Fewer rows than two chunks against an rhs over WIDE_RHS_BYTES: the GEMM runs alone
    (gemm_skinny's or blas.gemm's column chunks read the rhs once), never as a region member
    whose threads would each read all of it; the rest still forms a region; the result is
    the NumPy one within bounds."""
    n = regions.WIDE_RHS_BYTES // (1024 * 4) + 64
    text = _mlp(rows, 1024, n, False)
    cache.clear_memory()
    prog = xlapy.compile(text, backend="cpu", options={"num_threads": 2, "split_cost": 1})
    assert regions.rhs_alone(regions.Gemm(0, 1, 2, rows, n, 1024, False, False))
    assert not regions.rhs_alone(regions.Gemm(0, 1, 2, rows, 512, 1024, False, False))
    assert not regions.rhs_alone(regions.Gemm(0, 1, 2, 4096, n, 1024, False, False))  # rows
    assert all("%h" not in line for line in _region_lines(prog)), \
        prog._exe.explain()  # type: ignore[attr-defined]
    rng = np.random.default_rng(5)
    x, w1, w2 = (rng.standard_normal(s).astype(np.float32)
                 for s in [(rows, 1024), (1024, n), (n, 128)])
    want = (Bounded.exact(x) @ Bounded.exact(w1)).maximum(0.0) @ Bounded.exact(w2)
    want.check(prog(x, w1, w2))
