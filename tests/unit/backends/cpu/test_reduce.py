# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""Reductions over dimension 0 split across threads (partial outputs combined): exact for
integers, the interpreter's value; inits that are not the reducer's identity stay serial."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlapy
from tests.tolerance import Bounded
from xlapy.backends.cpu import parallel, thunks

PROGRAM = """
func.func @main(%x: tensor<1024x512xi32>, %f: tensor<1024x512xf32>) -> (tensor<i32>, tensor<512xi32>, tensor<i32>, tensor<512xi32>, tensor<f32>, tensor<512xf32>) {
  %z = stablehlo.constant dense<0> : tensor<i32>
  %seven = stablehlo.constant dense<7> : tensor<i32>
  %lo = stablehlo.constant dense<-2147483648> : tensor<i32>
  %fz = stablehlo.constant dense<0.0> : tensor<f32>
  %f3 = stablehlo.constant dense<3.0> : tensor<f32>
  %a = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0, 1] : (tensor<1024x512xi32>, tensor<i32>) -> tensor<i32>
  %c = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0] : (tensor<1024x512xi32>, tensor<i32>) -> tensor<512xi32>
  %s = stablehlo.reduce(%x init: %seven) applies stablehlo.add across dimensions = [0, 1] : (tensor<1024x512xi32>, tensor<i32>) -> tensor<i32>
  %m = stablehlo.reduce(%x init: %lo) applies stablehlo.maximum across dimensions = [0] : (tensor<1024x512xi32>, tensor<i32>) -> tensor<512xi32>
  %g = stablehlo.reduce(%f init: %fz) applies stablehlo.add across dimensions = [0, 1] : (tensor<1024x512xf32>, tensor<f32>) -> tensor<f32>
  %h = stablehlo.reduce(%f init: %f3) applies stablehlo.add across dimensions = [0] : (tensor<1024x512xf32>, tensor<f32>) -> tensor<512xf32>
  return %a, %c, %s, %m, %g, %h : tensor<i32>, tensor<512xi32>, tensor<i32>, tensor<512xi32>, tensor<f32>, tensor<512xf32>
}
"""


def _partial_thunks(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The cuts of every partial reduce thunk built from here on."""
    made: list[list[int]] = []
    real = thunks.partial_thunk

    def spy(fn: Any, cuts: list[int], *a: Any) -> Any:
        made.append(cuts)
        return real(fn, cuts, *a)

    monkeypatch.setattr(thunks, "partial_thunk", spy)
    return made


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_split_reductions_match_interpreter(threads: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """(chunks of any cost: these sums are under parallel.PARTIAL_CHUNK_COST)"""
    monkeypatch.setattr(parallel, "PARTIAL_CHUNK_COST", 1)
    made = _partial_thunks(monkeypatch)
    rng = np.random.default_rng(0)
    x = rng.integers(-2**31, 2**31 - 1, (1024, 512), dtype=np.int32)  # sums wrap
    # Multiples of 1/16 of magnitude <= 1: every partial sum of any order (threads, lanes)
    # is a multiple of 2^-4 below 2^19 + 3, exact in f32's 24 bits, so the sums are exact.
    f = (rng.integers(-16, 17, (1024, 512)) / 16).astype(np.float32)
    cpu = xlapy.compile(PROGRAM, backend="cpu", options={"num_threads": threads})
    kinds = [k.partial for k in cpu._exe.kernel_specs]
    # (%h, an f32 column sum of 1024 rows, is per block of 32 rows, then over the blocks:
    # column_sums.py)
    assert kinds == ["add", "add", None, "maximum", "add", None, None]
    assert len(made) == 4 and all(len(c) == 17 for c in made)
    want = xlapy.compile(PROGRAM, backend="interpreter")(x, f)
    got = cpu(x, f)
    for k in range(6):
        np.testing.assert_array_equal(got[k], want[k])
    np.testing.assert_array_equal(got[4], f.astype(np.float64).sum())
    np.testing.assert_array_equal(got[5], f.astype(np.float64).sum(0) + 3)


def test_a_mid_sized_sum_is_one_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sum of 1M floats (4 MB) in 16 partial chunks paid ~16 calls and combines: 99-116
    us where one kernel takes 55 (XLA 135); it splits from PARTIAL_CHUNK_COST per chunk."""
    made = _partial_thunks(monkeypatch)
    text = """
func.func @main(%x: tensor<{n}xf32>) -> tensor<f32> {{
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0] : (tensor<{n}xf32>, tensor<f32>) -> tensor<f32>
  return %s : tensor<f32>
}}
"""
    x = (np.random.default_rng(2).integers(-16, 17, 1 << 20) / 16).astype(np.float32)
    got = xlapy.compile(text.format(n=1 << 20), backend="cpu", options={"num_threads": 2})(x)
    np.testing.assert_array_equal(got, x.astype(np.float64).sum())
    assert made == []
    assert len(parallel.partial_cuts(1 << 24, 1 << 24, 16)) == 9  # 8 chunks of 2M


def test_partial_chunks_are_a_power_of_two() -> None:
    """Two or four threads share a partial reduce's chunks evenly: a sum of logs over 1M
    floats (cost ~6M) made 3 chunks, one thread's 2 while the other waited (375 us where
    its two chunks take 302)."""
    from xlapy.backends.cpu import parallel

    assert len(parallel.partial_cuts(1 << 20, 6 << 20, 16)) - 1 == 2
    for extent in (1000, 4096, 65537, 1 << 20, 3 << 20):
        for cost in (extent, 3 * extent, 7 * extent, 40 * extent):
            chunks = len(parallel.partial_cuts(extent, cost, 16)) - 1
            assert chunks & (chunks - 1) == 0, (extent, cost, chunks)


ROWS = """
func.func @main(%x: tensor<64x40xi32>, %y: tensor<40x40xi32>) -> (tensor<64x40xi32>, tensor<40x40xi32>, tensor<64x40xi32>, tensor<64xi32>) {
  %z = stablehlo.constant dense<0> : tensor<i32>
  %lo = stablehlo.constant dense<-2147483648> : tensor<i32>
  %m = stablehlo.reduce(%x init: %lo) applies stablehlo.maximum across dimensions = [1] : (tensor<64x40xi32>, tensor<i32>) -> tensor<64xi32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<64xi32>) -> tensor<64x40xi32>
  %d = stablehlo.subtract %x, %mb : tensor<64x40xi32>
  %dd = stablehlo.multiply %d, %d : tensor<64x40xi32>
  %s = stablehlo.reduce(%dd init: %z) applies stablehlo.add across dimensions = [1] : (tensor<64x40xi32>, tensor<i32>) -> tensor<64xi32>
  %two = stablehlo.constant dense<2> : tensor<64xi32>
  %s2 = stablehlo.multiply %s, %two : tensor<64xi32>
  %sb = stablehlo.broadcast_in_dim %s2, dims = [0] : (tensor<64xi32>) -> tensor<64x40xi32>
  %r = stablehlo.add %dd, %sb : tensor<64x40xi32>
  %t = stablehlo.reduce(%y init: %z) applies stablehlo.add across dimensions = [1] : (tensor<40x40xi32>, tensor<i32>) -> tensor<40xi32>
  %tb = stablehlo.broadcast_in_dim %t, dims = [0] : (tensor<40xi32>) -> tensor<40x40xi32>
  %tt = stablehlo.transpose %tb, dims = [1, 0] : (tensor<40x40xi32>) -> tensor<40x40xi32>
  %u = stablehlo.add %y, %tt : tensor<40x40xi32>
  %q = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1] : (tensor<64x40xi32>, tensor<i32>) -> tensor<64xi32>
  %qb = stablehlo.broadcast_in_dim %q, dims = [0] : (tensor<64xi32>) -> tensor<64x40xi32>
  %v = stablehlo.subtract %x, %qb : tensor<64x40xi32>
  return %r, %u, %v, %q : tensor<64x40xi32>, tensor<40x40xi32>, tensor<64x40xi32>, tensor<64xi32>
}
"""


def test_row_reductions_fused_only_where_the_row_index_matches() -> None:
    """max -> (x - max)^2 -> sum -> scale runs inside one kernel per row; a row sum reached
    through a transpose, and one that is also a result, get their own buffer; exact."""
    rng = np.random.default_rng(1)
    x = rng.integers(-1000, 1000, (64, 40), dtype=np.int32)
    y = rng.integers(-1000, 1000, (40, 40), dtype=np.int32)
    cpu = xlapy.compile(ROWS, backend="cpu")
    exe = cpu._exe
    inlined = {r.name for rows in exe.row_reduces.values() for r in rows}
    assert len(inlined) == 2  # %m and %s; not %t (transposed) nor %q (a result)
    assert len(exe.kernel_specs) == 5  # %r, %t, %u, %q, %v
    want = xlapy.compile(ROWS, backend="interpreter")(x, y)
    for g, w in zip(cpu(x, y), want):
        np.testing.assert_array_equal(g, w)


def test_softmax_one_pass_per_row_matches_interpreter() -> None:
    from benchmarks.workloads.normalization import layernorm, softmax

    rng = np.random.default_rng(2)
    for comp, extra in ((softmax(33, 70), 0), (layernorm(17, 50), 2)):
        cpu = xlapy.compile(comp, backend="cpu")
        assert len(cpu._exe.kernel_specs) == 1
        args = [rng.standard_normal(comp.module.entry_computation().parameters[k]
                                     .shape.dimensions).astype(np.float32)
                for k in range(1 + extra)]
        want = xlapy.compile(comp, backend="interpreter")(*args)
        exact = (_softmax if extra == 0 else _layernorm)(*args)
        exact.check(cpu(*args), "cpu")
        exact.check(want, "interpreter")


def _softmax(x: np.ndarray) -> Bounded:
    """The row softmax, exact, and how far f32 may be from it (tests/tolerance.py: exp's
    documented ulps, the row sum's gamma_{n-1} in any order, the divide's rounding)."""
    bx = Bounded.exact(x)
    e = (bx - bx.max(1, keepdims=True)).exp()
    return e / e.sum(1, keepdims=True)


def _layernorm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> Bounded:
    """normalization.layernorm exactly, its constants as the f32 values the program holds."""
    bx = Bounded.exact(x)
    inv_n = np.float32(1.0 / x.shape[1])
    xc = bx - bx.sum(1, keepdims=True) * inv_n
    rs = ((xc * xc).sum(1, keepdims=True) * inv_n + np.float32(1e-5)).rsqrt()
    return xc * rs * Bounded.exact(scale) + Bounded.exact(bias)


@pytest.mark.parametrize("c", [0.1, 1 / 3, 0.7])
def test_a_long_float_sum_adds_in_blocks(c: float) -> None:
    """jnp.sum of 4M copies of c: each vector lane of the one accumulator had rounded ~65536
    times in a row (relative error 1.5e-4, x86-64-v2 6e-4; XLA and numpy ~1e-6); summed in
    blocks of SUM_BLOCK vectors it is within 2e-5 on every target."""
    n = 1 << 22
    x = np.full(n, c, np.float32)
    text = f"""func.func @main(%x: tensor<{n}xf32>) -> tensor<f32> {{
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0]
    : (tensor<{n}xf32>, tensor<f32>) -> tensor<f32>
  return %s : tensor<f32>
}}"""
    exact = float(x.astype(np.float64).sum())
    got = float(xlapy.compile(text, backend="cpu")(x))
    assert abs(got - exact) / exact < 2e-5


EMBED1 = """
func.func @main(%e: tensor<1000x1xf32>, %i: tensor<262144xi32>) -> tensor<1xf32> {
  %ib = stablehlo.broadcast_in_dim %i, dims = [0] : (tensor<262144xi32>) -> tensor<262144x1xi32>
  %g = "stablehlo.gather"(%e, %ib) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<1000x1xf32>, tensor<262144x1xi32>) -> tensor<262144x1xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%g init: %z) applies stablehlo.add across dimensions = [0] : (tensor<262144x1xf32>, tensor<f32>) -> tensor<1xf32>
  return %s : tensor<1xf32>
}
"""


def test_a_sum_keeping_a_width_one_dimension_is_a_full_sum() -> None:
    """jnp.sum(e[i], 0) of width-1 rows: the kept extent-1 dimension made it a column sum
    with its accumulator in memory, stored per element (2.4x XLA's time); now the gather
    feeds a split full sum (partial outputs over threads), exact on multiples of 1/16."""
    rng = np.random.default_rng(3)
    e = (rng.integers(-16, 17, (1000, 1)) / 16).astype(np.float32)
    i = rng.integers(0, 1000, 262144).astype(np.int32)
    cpu = xlapy.compile(EMBED1, backend="cpu", options={"num_threads": 2})
    assert [k.partial for k in cpu._exe.kernel_specs if k.partial] == ["add"]
    want = e[i, 0].astype(np.float64).sum()
    np.testing.assert_array_equal(cpu(e, i), np.array([want], np.float32))


@pytest.mark.parametrize("c,shape", [(0.1, (1 << 22,)), (1 / 3, (1 << 22,)),
                                     (0.1, (1 << 16, 64))])
def test_a_long_complex_sum_is_vectorized_in_blocks(c: float, shape: tuple[int, ...]) -> None:
    """jnp.sum of 4M c64: the complex add's two serial chains ran one element a step (a 1M
    sum 2.0 ms, XLA 0.6-1.0); as two reassociated float sums LLVM vectorizes it (0.26-0.31
    ms), added in blocks (SCALAR_SUM_BLOCK, superblocks of SCALAR_SUM_BLOCKS): each lane
    of LLVM's vectors had rounded 4M / 16 times in a row (uniform [0, 1) parts: 4.6e-6 off
    where XLA is 4e-8, now 6e-8; here 4M copies of one value, every rounding the same way:
    0.4% off, 5e-6 in blocks; the serial chain was 4% off). Rows of 64 of a buffer fold as
    one long row (kernel_collapse.merge_reduced); rows the merge cannot take are blocked 64
    at a time (`test_unmerged_complex_rows_are_summed_in_blocks`)."""
    x = np.full(shape, complex(c, -3 * c), np.complex64)
    t = "x".join(map(str, shape)) + "xcomplex<f32>"
    dims = ", ".join(map(str, range(len(shape))))
    text = f"""func.func @main(%x: tensor<{t}>) -> tensor<complex<f32>> {{
  %z = stablehlo.constant dense<(0.0, 0.0)> : tensor<complex<f32>>
  %s = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [{dims}]
    : (tensor<{t}>, tensor<complex<f32>>) -> tensor<complex<f32>>
  return %s : tensor<complex<f32>>
}}"""
    exact = x.astype(np.complex128).sum()
    prog = xlapy.compile(text, backend="cpu")
    assert "fadd reassoc nsz float" in prog._exe.kernel_ir  # type: ignore[attr-defined]
    got = complex(prog(x))
    assert abs(got.real - exact.real) / abs(exact.real) < 2e-5
    assert abs(got.imag - exact.imag) / abs(exact.imag) < 2e-5


@pytest.mark.parametrize("cols", [1027, 7])
def test_a_complex_row_product_runs_in_independent_chains(cols: int) -> None:
    """jnp.prod of c64 rows: one serial chain waited a complex multiply's latency a column
    (256 x 1024: 3.2x XLA's time, 0.77x in PRODUCT_CHAINS chains); the rest of a row past
    the last whole round goes into the first chain, short rows stay one chain."""
    rng = np.random.default_rng(4)
    x = (1 + 0.01 * (rng.standard_normal((64, cols)) + 1j * rng.standard_normal((64, cols)))
         ).astype(np.complex64)
    text = f"""func.func @main(%x: tensor<64x{cols}xcomplex<f32>>) -> tensor<64xcomplex<f32>> {{
  %one = stablehlo.constant dense<(1.0, 0.0)> : tensor<complex<f32>>
  %p = stablehlo.reduce(%x init: %one) applies stablehlo.multiply across dimensions = [1]
    : (tensor<64x{cols}xcomplex<f32>>, tensor<complex<f32>>) -> tensor<64xcomplex<f32>>
  return %p : tensor<64xcomplex<f32>>
}}"""
    prog = xlapy.compile(text, backend="cpu")
    assert ('"chain"' in prog._exe.kernel_ir) == (cols > 8)  # type: ignore[attr-defined]
    want = np.prod(x.astype(np.complex128), axis=1)
    np.testing.assert_allclose(np.asarray(prog(x)), want, rtol=2e-5)


def test_unmerged_complex_rows_are_summed_in_blocks() -> None:
    """A complex sum over rows of 64 read reversed (no merge into one row): ~4096 elements,
    64 whole rows, a block (each row had added into the one running sum: 0.6% off)."""
    jnp = pytest.importorskip("jax.numpy")
    import jax

    from xlapy.backends.cpu.kernel_collapse import merge_reduced
    from xlapy.stablehlo import parse_module

    x = np.full((1 << 16, 64), complex(0.1, -0.3), np.complex64)
    text = jax.jit(lambda x: jnp.flip(x, 1).sum()).lower(x).as_text()
    mod = parse_module(text)
    root = mod.entry.root
    assert root.opcode == "reduce"
    assert merge_reduced(root, {id(p): k for k, p in enumerate(mod.entry.parameters)}) is None
    got = complex(xlapy.compile(text, backend="cpu")(x))
    exact = x.astype(np.complex128).sum()
    assert abs(got.real - exact.real) / abs(exact.real) < 2e-5
    assert abs(got.imag - exact.imag) / abs(exact.imag) < 2e-5
