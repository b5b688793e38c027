"""A column-split GEMM (rhs over regions.WIDE_RHS_BYTES) computes its consumer kernel's root
chunk by chunk (dot_epilogue.py): the same bits as the unfused kernel after the GEMM, on any
thread count and target, for per-column (bias), same-index (residual) and scalar leaves, a
transposed rhs and chunks whose width is not a multiple of the vector."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

import xlapy
from tests.tolerance import Bounded
from xlapy.backends.cpu import blas, cache, dot_epilogue, regions

M, K = 256, 1024
#: Columns: an rhs of K x N f32 over WIDE_RHS_BYTES, two column chunks, the second's width
#: not a multiple of 16 (a scalar tail per row).
N = regions.WIDE_RHS_BYTES // (K * 4) + 18

LAYER = """
func.func @main(%x: tensor<{m}x{k}xf32>, %w: tensor<{k}x{n}xf32>, %b: tensor<{n}xf32>,
                %r: tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %h = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
       : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<{n}xf32>) -> tensor<{m}x{n}xf32>
  %s = stablehlo.add %h, %bb : tensor<{m}x{n}xf32>
  %z = stablehlo.constant dense<0.0> : tensor<{m}x{n}xf32>
  %y = stablehlo.maximum %s, %z : tensor<{m}x{n}xf32>
  %t = stablehlo.constant dense<0.5> : tensor<{m}x{n}xf32>
  %q = stablehlo.multiply %y, %t : tensor<{m}x{n}xf32>
  %o = stablehlo.add %q, %r : tensor<{m}x{n}xf32>
  return %o : tensor<{m}x{n}xf32>
}}
"""

#: The rhs as [n, k] (contracting its dimension 1), a bias of shape [1, n].
LAYER_T = """
func.func @main(%x: tensor<{m}x{k}xf32>, %w: tensor<{n}x{k}xf32>, %b: tensor<1x{n}xf32>)
    -> tensor<{m}x{n}xf32> {{
  %h = stablehlo.dot_general %x, %w, contracting_dims = [1] x [1]
       : (tensor<{m}x{k}xf32>, tensor<{n}x{k}xf32>) -> tensor<{m}x{n}xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [0, 1] : (tensor<1x{n}xf32>) -> tensor<{m}x{n}xf32>
  %s = stablehlo.add %h, %bb : tensor<{m}x{n}xf32>
  return %s : tensor<{m}x{n}xf32>
}}
"""


@contextmanager
def _unfused() -> Iterator[None]:
    plan = dot_epilogue.plan
    dot_epilogue.plan = lambda *a, **k: {}  # type: ignore[assignment]
    try:
        yield
    finally:
        dot_epilogue.plan = plan  # type: ignore[assignment]


def _compile(text: str, threads: int, n: int = N) -> xlapy.CompiledProgram:
    cache.clear_memory()
    return xlapy.compile(text.format(m=M, k=K, n=n), backend="cpu",
                         options={"num_threads": threads})


def _args(seed: int = 0, n: int = N, special: bool = True) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = (rng.standard_normal((K, n)) / 32).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    r = rng.standard_normal((M, n)).astype(np.float32)
    if not special:
        return [x, w, b, r]
    # the epilogue's special values: NaN, infinities, signed zeros, subnormals
    b[:6] = [np.nan, np.inf, -np.inf, -0.0, 1e-40, -1e-39]
    r[0, :4] = [np.nan, 1e-41, -0.0, np.inf]
    return [x, w, b, r]


def _explain(prog: xlapy.CompiledProgram) -> str:
    return prog._exe.explain()  # type: ignore[attr-defined]


def test_column_chunks_not_a_multiple_of_the_vector() -> None:
    cuts = blas.split(M, N)
    assert len(cuts) == 3 and blas.columns(M, N)
    assert any((hi - lo) % 16 for lo, hi in zip(cuts, cuts[1:]))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_layer_fused_same_bits_as_unfused(threads: int) -> None:
    prog = _compile(LAYER, threads)
    text = _explain(prog)
    assert "epilogue %o" in text and "kernel k" not in text, text
    args = _args()
    got = prog(*args)
    with _unfused():
        plain = _compile(LAYER, threads)
    assert "epilogue" not in _explain(plain)
    np.testing.assert_array_equal(got, plain(*args))
    if threads > 1:
        np.testing.assert_array_equal(got, _compile(LAYER, 1)(*args))
    args2 = _args(seed=1, special=False)  # new arguments: the chunks read the new pointers
    got2 = prog(*args2)
    np.testing.assert_array_equal(got2, plain(*args2))
    x, w, b, r = args2
    ((Bounded.exact(x) @ Bounded.exact(w) + Bounded.exact(b)).maximum(0.0) * 0.5
     + Bounded.exact(r)).check(got2)


def test_transposed_rhs_and_row_bias() -> None:
    prog = _compile(LAYER_T, 2)
    assert "epilogue %s" in _explain(prog), _explain(prog)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = (rng.standard_normal((N, K)) / 32).astype(np.float32)
    b = rng.standard_normal((1, N)).astype(np.float32)
    got = prog(x, w, b)
    with _unfused():
        plain = _compile(LAYER_T, 2)
    np.testing.assert_array_equal(got, plain(x, w, b))
    (Bounded.exact(x) @ Bounded.exact(w).T + Bounded.exact(b)).check(got)


@pytest.mark.parametrize("target", ["x86-64-v3", "x86-64-v2"])
def test_other_targets_same_bits(target: str) -> None:
    """Narrower vectors (8 and 4 lanes), other tails: the bits do not change."""
    from xlapy.backends.cpu import target as tgt

    if not tgt.resolve(target).runs_here:
        pytest.skip(f"{target} does not run here")
    cache.clear_memory()
    prog = xlapy.compile(LAYER.format(m=M, k=K, n=N), backend="cpu",
                         options={"num_threads": 2, "target": target})
    args = _args()
    assert "epilogue %o" in _explain(prog)
    np.testing.assert_array_equal(prog(*args), _compile(LAYER, 2)(*args))


def test_small_rhs_joins_region_instead() -> None:
    """An rhs under WIDE_RHS_BYTES leaves the GEMM to row-parallel regions (no epilogue)."""
    n = 512
    prog = _compile(LAYER, 2, n)
    assert "epilogue" not in _explain(prog)
    assert not dot_epilogue.column_split(next(
        i for i in prog._exe.comp.instructions if i.opcode == "dot_general"))  # type: ignore


def test_dot_returned_not_fused() -> None:
    """A GEMM whose value is also a result keeps its kernel (its buffer holds the dot)."""
    text = LAYER.replace("-> tensor<{m}x{n}xf32> {{",
                         "-> (tensor<{m}x{n}xf32>, tensor<{m}x{n}xf32>) {{")
    text = text.replace("return %o : tensor<{m}x{n}xf32>",
                        "return %o, %h : tensor<{m}x{n}xf32>, tensor<{m}x{n}xf32>")
    prog = _compile(text, 2)
    assert "epilogue" not in _explain(prog), _explain(prog)
    x, w, b, r = _args(special=False)
    got, hid = prog(x, w, b, r)
    dot = Bounded.exact(x) @ Bounded.exact(w)
    dot.check(hid)
    ((dot + Bounded.exact(b)).maximum(0.0) * 0.5 + Bounded.exact(r)).check(got)


def test_ieee_denormals_same_bits_as_unfused() -> None:
    """In the `ieee` denormal mode the epilogue keeps subnormal biases and results, as the
    unfused kernel does (its loop clears FTZ/DAZ instead of setting them)."""
    opts = {"num_threads": 2, "denormal": "ieee"}
    text = LAYER.format(m=M, k=K, n=N)
    cache.clear_memory()
    prog = xlapy.compile(text, backend="cpu", options=opts)
    assert "epilogue %o" in _explain(prog)
    with _unfused():
        cache.clear_memory()
        plain = xlapy.compile(text, backend="cpu", options=opts)
    args = _args()
    args[3][1, :8] = 1e-40  # subnormal residuals: kept in this mode
    got = prog(*args)
    np.testing.assert_array_equal(got, plain(*args))
    assert np.any((got != 0) & (np.abs(got) < np.finfo(np.float32).tiny))


TWO_LAYERS = """
func.func @main(%x: tensor<{m}x{k}xf32>, %w1: tensor<{k}x{n}xf32>, %b1: tensor<{n}xf32>,
                %w2: tensor<{n}x{n}xf32>, %b2: tensor<{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %z = stablehlo.constant dense<0.0> : tensor<{m}x{n}xf32>
  %h1 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0]
        : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %c1 = stablehlo.broadcast_in_dim %b1, dims = [1] : (tensor<{n}xf32>) -> tensor<{m}x{n}xf32>
  %s1 = stablehlo.add %h1, %c1 : tensor<{m}x{n}xf32>
  %y1 = stablehlo.maximum %s1, %z : tensor<{m}x{n}xf32>
  %h2 = stablehlo.dot_general %y1, %w2, contracting_dims = [1] x [0]
        : (tensor<{m}x{n}xf32>, tensor<{n}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %c2 = stablehlo.broadcast_in_dim %b2, dims = [1] : (tensor<{n}xf32>) -> tensor<{m}x{n}xf32>
  %s2 = stablehlo.add %h2, %c2 : tensor<{m}x{n}xf32>
  %y2 = stablehlo.maximum %s2, %z : tensor<{m}x{n}xf32>
  return %y2 : tensor<{m}x{n}xf32>
}}
"""


def test_same_epilogues_share_one_function() -> None:
    """Two bias + relu layers of one width: one epilogue function (LLVM's time per function
    is most of the module's compile), results the unfused program's bits."""
    prog = _compile(TWO_LAYERS, 2)
    compiled = prog._exe._dot_epilogues_compiled  # type: ignore[attr-defined]
    assert len(compiled.names) == 2 and len(set(compiled.names.values())) == 1
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype(np.float32) / d for s, d in
            [((M, K), 1), ((K, N), 32), ((N,), 1), ((N, N), 45), ((N,), 1)]]
    with _unfused():
        plain = _compile(TWO_LAYERS, 2)
    np.testing.assert_array_equal(prog(*args), plain(*args))


def test_f64_layer_same_bits_as_unfused() -> None:
    n = regions.WIDE_RHS_BYTES // (K * 8) + 10  # over the rhs bound in f64, a tail of 2
    text = LAYER.replace("f32", "f64")
    prog = _compile(text, 2, n)
    assert "epilogue %o" in _explain(prog), _explain(prog)
    args = [a.astype(np.float64) for a in _args(n=n)]
    with _unfused():
        plain = _compile(text, 2, n)
    np.testing.assert_array_equal(prog(*args), plain(*args))
