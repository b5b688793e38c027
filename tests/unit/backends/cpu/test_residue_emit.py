"""Interleaving kernels (pads with interior padding along the last dimension, as
lax.associative_scan lowers) loop over column residues (residue_emit.py): the interpreter's
bits for every residue count, shift, edge and type; the loop runs in vectors (AVX-512);
kernels whose columns do not map through column-wise ops keep the plain loop."""

from __future__ import annotations

import re

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import cache, residue_emit, target


def _both(text: str, *args: np.ndarray) -> tuple[list[np.ndarray], object]:
    cpu = xlapy.compile(text, backend="cpu")
    ref = xlapy.compile(text, backend="interpreter")
    got, want = cpu(*args), ref(*args)
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    for g, w in zip(got, want):
        g, w = np.atleast_1d(np.asarray(g)), np.atleast_1d(np.asarray(w))
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))
    assert not list(cpu._exe.fallbacks())
    return got, cpu._exe


def _interleave(t: str, rows: int, n: int, k: int, lo_a: int, lo_b: int) -> str:
    """pad(a, lo_a, interior k) + pad(b, lo_b, interior k): both (rows, m) with the
    results (rows, n)."""
    m = (n - 1 - max(lo_a, lo_b)) // (k + 1) + 1
    hi_a, hi_b = (n - lo_a - (m - 1) * (k + 1) - 1, n - lo_b - (m - 1) * (k + 1) - 1)
    x, y = f"tensor<{rows}x{m}x{t}>", f"tensor<{rows}x{n}x{t}>"
    return f"""
func.func @main(%a: {x}, %b: {x}) -> {y} {{
  %z = stablehlo.constant dense<0> : tensor<{t}>
  %pa = stablehlo.pad %a, %z, low = [0, {lo_a}], high = [0, {hi_a}], interior = [0, {k}]
    : ({x}, tensor<{t}>) -> {y}
  %pb = stablehlo.pad %b, %z, low = [0, {lo_b}], high = [0, {hi_b}], interior = [0, {k}]
    : ({x}, tensor<{t}>) -> {y}
  %s = stablehlo.add %pa, %pb : {y}
  return %s : {y}
}}""", m


def _data(t: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if t.startswith("i"):
        return rng.integers(-100, 100, shape).astype(np.int32)
    x = (rng.standard_normal(shape) * 3).astype(np.float32 if t == "f32" else np.float64)
    x.flat[::7] = -0.0
    x.flat[3::11] = np.nan
    x.flat[5::13] = np.inf
    return x


@pytest.mark.parametrize("t", ["f32", "f64", "i32"])
@pytest.mark.parametrize("k,lo_a,lo_b", [(1, 0, 1), (1, 1, 0), (2, 0, 1), (2, 2, 0),
                                         (3, 0, 2), (1, 3, 2), (4, 0, 1)])
def test_interleaves_give_the_interpreters_bits(t: str, k: int, lo_a: int, lo_b: int) -> None:
    n = 4 * 5 * 12  # a multiple of every residue count here
    text, m = _interleave(t, 6, n, k, lo_a, lo_b)
    _, exe = _both(text, _data(t, (6, m), 1), _data(t, (6, m), 2))
    p = residue_emit.residues(exe.kernel_specs[0].root, {})
    assert p == (k + 1 if k + 1 <= residue_emit.MAX_RESIDUES else 1)
    assert ("d1r" in exe.kernel_ir) == (p > 1)


def test_the_scans_last_level_runs_in_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    """jax.lax.associative_scan's last level (256 x 4096 f32 there): the odd columns the
    previous level's sums, the even ones a concatenate of the first column and sums of a
    strided slice. Its residue loop is vectorized by LLVM (vector stores in its optimized IR)
    with AVX-512 (masked loads for the branches; LLVM's cost model keeps AVX2 and SSE
    scalar there)."""
    if not target.current().has("avx512f"):
        pytest.skip("the vectorized loop is AVX-512's")
    n, h = 64, 32
    x, y = f"tensor<4x{n}xf32>", f"tensor<4x{h}xf32>"
    text = f"""
func.func @main(%arg: {x}, %prev: {y}) -> {x} {{
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.slice %prev [0:4, 0:{h - 1}] : ({y}) -> tensor<4x{h - 1}xf32>
  %e = stablehlo.slice %arg [0:4, 2:{n}:2] : ({x}) -> tensor<4x{h - 1}xf32>
  %a = stablehlo.add %s, %e : tensor<4x{h - 1}xf32>
  %f = stablehlo.slice %arg [0:4, 0:1] : ({x}) -> tensor<4x1xf32>
  %c = stablehlo.concatenate %f, %a, dim = 1 : (tensor<4x1xf32>, tensor<4x{h - 1}xf32>) -> {y}
  %p = stablehlo.pad %c, %z, low = [0, 0], high = [0, 1], interior = [0, 1]
    : ({y}, tensor<f32>) -> {x}
  %q = stablehlo.pad %prev, %z, low = [0, 1], high = [0, 0], interior = [0, 1]
    : ({y}, tensor<f32>) -> {x}
  %r = stablehlo.add %p, %q : {x}
  return %r : {x}
}}"""
    arg, prev = _data("f32", (4, n), 3), _data("f32", (4, h), 4)
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")  # compiled here: its optimized IR is kept
    cache.clear_memory()
    (got,), exe = _both(text, arg, prev)
    assert residue_emit.residues(exe.kernel_specs[0].root, {}) == 2
    opt = "".join(e.asm_ir for e in exe.engines)
    assert re.search(r"store <\d+ x float>", opt)  # the loop vectorizer ran it in vectors


def test_odd_extents_and_scrambled_columns_keep_the_plain_loop() -> None:
    text, m = _interleave("f32", 3, 61, 1, 0, 1)  # 61 columns: no whole residue groups
    _, exe = _both(text, _data("f32", (3, m), 5), _data("f32", (3, m), 6))
    assert residue_emit.residues(exe.kernel_specs[0].root, {}) == 1
    y = "tensor<8x8xf32>"
    text = f"""
func.func @main(%a: tensor<8x4xf32>) -> {y} {{
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %p = stablehlo.pad %a, %z, low = [0, 0], high = [0, 1], interior = [0, 1]
    : (tensor<8x4xf32>, tensor<f32>) -> {y}
  %t = stablehlo.transpose %p, dims = [1, 0] : ({y}) -> {y}
  %e = stablehlo.negate %t : {y}
  return %e : {y}
}}"""
    _, exe = _both(text, _data("f32", (8, 4), 7))
    assert all(residue_emit.residues(k.root, {}) == 1 for k in exe.kernel_specs)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_rank_1_interleave_splits_over_threads_at_whole_groups(threads: int) -> None:
    """A vector's scan level: the kernel's one loop is the threads' range, split at
    multiples of the residue count (Kernel.align)."""
    n, m = 3 * 1000, 1000
    x, y = f"tensor<{m}xf32>", f"tensor<{n}xf32>"
    text = f"""
func.func @main(%a: {x}, %b: {x}) -> {y} {{
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %pa = stablehlo.pad %a, %z, low = [0], high = [2], interior = [2] : ({x}, tensor<f32>) -> {y}
  %pb = stablehlo.pad %b, %z, low = [1], high = [1], interior = [2] : ({x}, tensor<f32>) -> {y}
  %s = stablehlo.add %pa, %pb : {y}
  return %s : {y}
}}"""
    a, b = _data("f32", (m,), 8), _data("f32", (m,), 9)
    cpu = xlapy.compile(text, backend="cpu", options={"num_threads": threads, "split_cost": 1})
    ref = xlapy.compile(text, backend="interpreter")
    np.testing.assert_array_equal(np.asarray(cpu(a, b)).view(np.uint8),
                                  np.asarray(ref(a, b)).view(np.uint8))
    spec = cpu._exe.kernel_specs[0]
    assert "d0r" in cpu._exe.kernel_ir and spec.align == 3
