"""small_dots.py: small batched f32/f64 dot_generals in loop bodies run as fused reduces on
the cpu backend (values of the interpreter's dot within rounding, the loop native), and the
ones it leaves alone stay dots."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.small_dots import SmallDotsAsReduces
from xlapy.stablehlo import parse_module

jax = pytest.importorskip("jax")
jnp = jax.numpy
enable_x64 = jax.enable_x64

CASES: dict[str, tuple[Any, list[tuple[int, ...]]]] = {
    "scores": (lambda q, k: jnp.einsum("hd,thd->ht", q, k), [(4, 16), (12, 4, 16)]),
    "mix": (lambda p, v: jnp.einsum("ht,thd->hd", p, v), [(4, 12), (12, 4, 16)]),
    "bmm": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), [(3, 5, 7), (3, 7, 6)]),
    "rank3_middle": (lambda a, b: jnp.einsum("ikj,kl->ijl", a, b), [(2, 5, 3), (5, 4)]),
    "outer": (lambda a, b: jnp.einsum("bi,bj->bij", a, b), [(3, 5), (3, 4)]),
    "mix_cache": (lambda p, v: jnp.einsum("ht,thd->hd", p, v), [(4, 37), (37, 4, 24)]),
}


def looped(fn: Any) -> Any:
    """fn inside a 17-step fori_loop (over the unroller's 16), its operands varying."""
    lax = jax.lax
    def run(a: Any, b: Any) -> Any:
        zero = jnp.zeros(jax.eval_shape(fn, a, b).shape, a.dtype)
        return lax.fori_loop(0, 17, lambda i, acc: acc + fn(a * (1.0 + 0.125 * i), b), zero)
    return run


def _ops(text: str) -> list[str]:
    exe = xlapy.compile(text, backend="cpu")._exe
    return [line.split()[1] for line in exe.explain().splitlines() if line.startswith("  ")]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(CASES))
def test_small_batched_dots_are_kernels(name: str, dtype: Any) -> None:
    fn, shapes = CASES[name]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(dtype) for s in shapes]
    with enable_x64(dtype == np.float64):  # (else jax lowers f64 arguments as f32)
        text = jax.jit(looped(fn)).lower(*args).as_text()
    assert "dot_general" not in _ops(text)
    assert "sub-executables" not in xlapy.compile(text, backend="cpu")._exe.explain()
    got = xlapy.compile(text, backend="cpu")(*args)
    want = xlapy.compile(text, backend="interpreter")(*args)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name,last", [("scores", True), ("mix", False), ("bmm", False),
                                       ("rank3_middle", False), ("mix_cache", False)])
def test_the_rhs_rows_run_along_the_lanes(name: str, last: bool) -> None:
    """A reduce over the contracting dimensions last where the rhs's own last dimension is
    contracted; where it is a free one, over middle dimensions, the rhs's rows the lanes
    ("ht,thd->hd" in a decoding loop read its value cache with a stride: 6x XLA's time)."""
    fn, shapes = CASES[name]
    args = [np.ones(s, np.float32) for s in shapes]
    mod = parse_module(jax.jit(looped(fn)).lower(*args).as_text())
    assert SmallDotsAsReduces().run(mod)
    reduces = [i for c in mod.computations for i in c.instructions if i.opcode == "reduce"
               and i.operands[0].opcode == "multiply"]
    assert reduces
    for r in reduces:
        rank = r.operands[0].shape.rank
        assert (rank - 1 in r.attrs.dimensions) == last


@pytest.mark.parametrize("fn,shapes,dtype", [
    (lambda a, b: a @ b, [(8, 16), (16, 4)], np.float32),           # plain 2-D: GEMM routes
    (lambda a, b: a @ b, [(16,), (16, 4)], np.float32),             # vector-matrix: GEMM
    (lambda a, b: jnp.einsum("ijk,kl->ijl", a, b), [(4, 8, 32), (32, 32)], np.float32),  # 2-D
    (CASES["bmm"][0], [(3, 5, 7), (3, 7, 6)], ml_dtypes.bfloat16),  # narrow: stays a dot
    (CASES["bmm"][0], [(16, 64, 64), (16, 64, 64)], np.float32),    # over MAX_MACS
    # a weight gradient x^T g (lhs [k, m]): a native BLAS step, not a reduce reading both
    # operands by columns (was rewritten: an LSTM backward step 26 us for 32 x 256 x 8)
    (lambda x, g: jax.lax.dot_general(x, g, (((0,), (0,)), ((), ()))), [(8, 32), (8, 256)],
     np.float32),
])
def test_other_dots_stay(fn: Any, shapes: list[tuple[int, ...]], dtype: Any) -> None:
    args = [np.ones(s, dtype) for s in shapes]
    text = jax.jit(looped(fn)).lower(*args).as_text()
    assert not SmallDotsAsReduces().run(parse_module(text))


def test_top_level_dots_stay() -> None:
    fn, shapes = CASES["bmm"]
    args = [np.ones(s, np.float32) for s in shapes]
    assert not SmallDotsAsReduces().run(parse_module(jax.jit(fn).lower(*args).as_text()))


@pytest.mark.parametrize("eq,shapes", [
    ("nij,nj->ni", [(4096, 3, 3), (4096, 3)]),      # rotations of points (was 3.9 ms at 128K)
    ("nij,njk->nik", [(4096, 4, 4), (4096, 4, 4)]),  # 4 x 4 transforms
    ("nij,nj->ni", [(512, 8, 16), (512, 16)]),       # TOP_MACS_PER_BATCH multiply-adds each
])
def test_top_level_tiny_batched_dots_are_kernels(eq: str, shapes: list[tuple[int, ...]]
                                                 ) -> None:
    """At the top level a batched dot of a few multiply-adds per batch element is a fused
    reduce, not a BLAS call per element; the interpreter's values within rounding."""
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    text = jax.jit(lambda a, b: jnp.einsum(eq, a, b)).lower(*args).as_text()
    assert "dot_general" not in _ops(text)
    got = xlapy.compile(text, backend="cpu")(*args)
    want = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec,shapes", [
    ("ij,ij->i", [(300, 70), (300, 70)]),
    ("ji,ji->i", [(70, 300), (70, 300)]),     # a column dot: 38x XLA's time as a dot
    ("jib,bji->ib", [(6, 5, 4), (4, 6, 5)]),  # batch and contraction out of order
    ("bhd,bhd->hb", [(3, 4, 9), (3, 4, 9)]),  # the result's batch order not the lhs's
    ("i,i->", [(5000,), (5000,)]),            # jnp.dot of 1-D arrays: one sdot, 1 thread
])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_vector_dots_are_reduces_at_any_size(spec: str, shapes: list[tuple[int, ...]],
                                              dtype: Any) -> None:
    """Batched dots of vectors (no free dimension) at the top level, past
    TOP_MACS_PER_BATCH: one fused reduce of the product, not a BLAS call per batch element
    (einsum("ji,ji->i") over 512 x 8192: 55 ms, XLA 1.1); bf16 summed in f32."""
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype(dtype) for s in shapes]
    text = jax.jit(lambda a, b: jnp.einsum(spec, a, b)).lower(*args).as_text()
    assert "dot_general" not in _ops(text)
    got = np.asarray(xlapy.compile(text, backend="cpu")(*args), np.float64)
    want = np.asarray(xlapy.compile(text, backend="interpreter")(*args), np.float64)
    tol = 1e-5 if dtype == np.float32 else 1e-2
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_a_vector_dot_reads_a_dot_written_in_its_order() -> None:
    """einsum("bi,bj,ij->b"): JAX computes W^T X^T, and the vector dot of y with it read it
    transposed: a transpose kernel between the GEMM and the sum (1.28x XLA's time). The
    dot is computed as X W instead (algebraic_rules.swapped_dot), the old one removed."""
    rng = np.random.default_rng(2)
    x, y, w = (rng.standard_normal(s).astype(np.float32) for s in [(1024, 64), (1024, 64),
                                                                    (64, 64)])
    text = jax.jit(lambda x, y, w: jnp.einsum("bi,bj,ij->b", x, y, w)).lower(x, y, w).as_text()
    assert _ops(text) == ["dot_general", "reduce"]
    got = np.asarray(xlapy.compile(text, backend="cpu")(x, y, w), np.float64)
    want = np.einsum("bi,bj,ij->b", *(a.astype(np.float64) for a in (x, y, w)))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
