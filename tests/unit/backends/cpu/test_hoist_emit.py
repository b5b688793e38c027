"""Loop-invariant hoisting (hoist_emit.py): a row kernel computes what depends on the row
only (layernorm's mean and rsqrt(var + eps)) once per row, before its column loops, with
the interpreter's results; a value behind an index op's branch on the row (pad along the
rows) is hoisted whole, its branch with it, and stays correct at the edges."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.hoist_emit import HoistEmitter

LAYERNORM = """
func.func public @main(%x: tensor<{r}x{c}xf32>, %s: tensor<{c}xf32>, %b: tensor<{c}xf32>)
    -> tensor<{r}x{c}xf32> {{
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1]
    : (tensor<{r}x{c}xf32>, tensor<f32>) -> tensor<{r}xf32>
  %1 = stablehlo.broadcast_in_dim %0, dims = [0] : (tensor<{r}xf32>) -> tensor<{r}x1xf32>
  %n = stablehlo.constant dense<{c}.0> : tensor<{r}x1xf32>
  %3 = stablehlo.divide %1, %n : tensor<{r}x1xf32>
  %4 = stablehlo.broadcast_in_dim %3, dims = [0, 1] : (tensor<{r}x1xf32>) -> tensor<{r}x{c}xf32>
  %5 = stablehlo.subtract %x, %4 : tensor<{r}x{c}xf32>
  %6 = stablehlo.multiply %5, %5 : tensor<{r}x{c}xf32>
  %7 = stablehlo.reduce(%6 init: %z) applies stablehlo.add across dimensions = [1]
    : (tensor<{r}x{c}xf32>, tensor<f32>) -> tensor<{r}xf32>
  %8 = stablehlo.broadcast_in_dim %7, dims = [0] : (tensor<{r}xf32>) -> tensor<{r}x1xf32>
  %10 = stablehlo.divide %8, %n : tensor<{r}x1xf32>
  %e = stablehlo.constant dense<1.0e-5> : tensor<{r}x1xf32>
  %12 = stablehlo.add %10, %e : tensor<{r}x1xf32>
  %13 = stablehlo.rsqrt %12 : tensor<{r}x1xf32>
  %14 = stablehlo.broadcast_in_dim %13, dims = [0, 1] : (tensor<{r}x1xf32>) -> tensor<{r}x{c}xf32>
  %15 = stablehlo.multiply %5, %14 : tensor<{r}x{c}xf32>
  %17 = stablehlo.broadcast_in_dim %s, dims = [1] : (tensor<{c}xf32>) -> tensor<{r}x{c}xf32>
  %18 = stablehlo.multiply %15, %17 : tensor<{r}x{c}xf32>
  %20 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<{c}xf32>) -> tensor<{r}x{c}xf32>
  %21 = stablehlo.add %18, %20 : tensor<{r}x{c}xf32>
  return %21 : tensor<{r}x{c}xf32>
}}
"""

#: x - pad(v, 1 row low)[row]: the padded value is read at the row index only (invariant in
#: the column loop), its branch on the row index hoisted with it.
PAD_ROWS = """
func.func public @main(%x: tensor<{r}x{c}xf32>, %v: tensor<{k}xf32>) -> tensor<{r}x{c}xf32> {{
  %z = stablehlo.constant dense<7.0> : tensor<f32>
  %p = stablehlo.pad %v, %z, low = [1], high = [0], interior = [0]
    : (tensor<{k}xf32>, tensor<f32>) -> tensor<{r}xf32>
  %q = stablehlo.sqrt %p : tensor<{r}xf32>
  %b = stablehlo.broadcast_in_dim %q, dims = [0] : (tensor<{r}xf32>) -> tensor<{r}x{c}xf32>
  %s = stablehlo.subtract %x, %b : tensor<{r}x{c}xf32>
  return %s : tensor<{r}x{c}xf32>
}}
"""


def _record(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = HoistEmitter._hoisted

    def spy(self, phase, key, instr, idx):  # type: ignore[no-untyped-def]
        seen.append(instr.opcode)
        return real(self, phase, key, instr, idx)

    monkeypatch.setattr(HoistEmitter, "_hoisted", spy)
    return seen


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("cols", [64, 67])
def test_layernorm_row_values_hoisted(threads: int, cols: int,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _record(monkeypatch)
    rows = 33
    text = LAYERNORM.format(r=rows, c=cols)
    rng = np.random.default_rng(3)
    args = [(rng.standard_normal((rows, cols)) * 3 + 1).astype(np.float32),
            rng.standard_normal(cols).astype(np.float32),
            rng.standard_normal(cols).astype(np.float32)]
    args[0][5, :] = 1e-40  # denormal inputs (flushed)
    args[1][3] = 1e-41
    got = xlapy.compile(text, backend="cpu",
                        options={"num_threads": threads, "split_cost": 1})(*args)
    ref = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-6)
    assert {"rsqrt", "add"} <= set(seen), seen  # once per row, not per column


@pytest.mark.parametrize("threads", [1, 2])
def test_hoisted_pad_branch_on_rows(threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _record(monkeypatch)
    rows, cols = 40, 48
    text = PAD_ROWS.format(r=rows, c=cols, k=rows - 1)
    rng = np.random.default_rng(4)
    args = [rng.standard_normal((rows, cols)).astype(np.float32),
            rng.random(rows - 1).astype(np.float32) * 4]
    got = xlapy.compile(text, backend="cpu",
                        options={"num_threads": threads, "split_cost": 1})(*args)
    ref = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_array_equal(got, ref)
    assert "sqrt" in seen


def test_constant_index_keys_by_value() -> None:
    """Index constants are memo keys by type and value, not by identity: one made for a
    lookup is freed after it, and another object could take its id while a hoisted value
    is remembered for the whole loop."""
    from llvmlite import ir

    from xlapy.backends.cpu.lanes import index_key
    from xlapy.backends.cpu.llvm_util import i64

    assert index_key(i64(0)) == index_key(i64(0))
    assert index_key(i64(0)) != index_key(i64(1))
    assert index_key(i64(0)) != index_key(ir.Constant(ir.IntType(32), 0))


@pytest.mark.parametrize("threads", [1, 2])
def test_row_offset_hoisted(threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank-3 softmax's loads and stores take their row's offset (two outer indices times
    their strides) from before the first column loop, made once for all the row's passes,
    with the interpreter's results."""
    from tests.unit.backends.cpu.test_row_prefetch import softmax_text

    made: list[int] = []
    values: set[int] = set()
    real = HoistEmitter.fixed_offset

    def spy(self, terms):  # type: ignore[no-untyped-def]
        fixed, rest = real(self, terms)
        if fixed is not None:
            made.append(len(terms) - len(rest))
            values.add(id(fixed))
        return fixed, rest

    monkeypatch.setattr(HoistEmitter, "fixed_offset", spy)
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    x = np.random.default_rng(6).standard_normal((3, 5, 64)).astype(np.float32)
    x[1, 2, 7] = np.nan
    x[2, 4, :] = -np.inf
    text = softmax_text(x.shape)
    from xlapy.backends.cpu import cache

    cache.clear_memory()
    got = xlapy.compile(text, backend="cpu",
                        options={"num_threads": threads, "split_cost": 1})(x)
    ref = xlapy.compile(text, backend="interpreter")(x)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=0)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    assert made and set(made) == {2}, made
    assert len(made) > 3 and len(values) == 1  # one offset per row, for every pass


#: sum(one_hot(label) * (x - m - log(s))) over each row, m and s given per row: the root is
#: the reduce itself (not a row reduction of a kernel), its per-row values log(s) and the
#: label read in the reduced dimension's loop.
XENT_ROWS = """
func.func public @main(%x: tensor<{r}x{c}xf32>, %l: tensor<{r}xi32>, %m: tensor<{r}xf32>,
                       %s: tensor<{r}xf32>) -> tensor<{r}xf32> {{
  %lb = stablehlo.broadcast_in_dim %l, dims = [0] : (tensor<{r}xi32>) -> tensor<{r}x{c}xi32>
  %io = stablehlo.iota dim = 1 : tensor<{r}x{c}xi32>
  %eq = stablehlo.compare EQ, %lb, %io, SIGNED : (tensor<{r}x{c}xi32>, tensor<{r}x{c}xi32>)
    -> tensor<{r}x{c}xi1>
  %oh = stablehlo.convert %eq : (tensor<{r}x{c}xi1>) -> tensor<{r}x{c}xf32>
  %ls = stablehlo.log %s : tensor<{r}xf32>
  %t = stablehlo.add %m, %ls : tensor<{r}xf32>
  %tb = stablehlo.broadcast_in_dim %t, dims = [0] : (tensor<{r}xf32>) -> tensor<{r}x{c}xf32>
  %d = stablehlo.subtract %x, %tb : tensor<{r}x{c}xf32>
  %p = stablehlo.multiply %oh, %d : tensor<{r}x{c}xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%p init: %z) applies stablehlo.add across dimensions = [1]
    : (tensor<{r}x{c}xf32>, tensor<f32>) -> tensor<{r}xf32>
  return %r : tensor<{r}xf32>
}}
"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("cols", [1000, 64])
def test_reduce_root_row_values_hoisted(threads: int, cols: int,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A reduce root's values fixed by its outer indices (xent's log of the row sum, the
    label) are computed once per row, before the reduced dimension's loops (a scalar log
    per vector had made jax's one-hot cross entropy 1.4x XLA's time)."""
    seen = _record(monkeypatch)
    rows = 37
    text = XENT_ROWS.format(r=rows, c=cols)
    rng = np.random.default_rng(5)
    args = [rng.standard_normal((rows, cols)).astype(np.float32),
            rng.integers(0, cols, rows).astype(np.int32),
            rng.standard_normal(rows).astype(np.float32),
            (rng.random(rows) * 50 + 1).astype(np.float32)]
    got = xlapy.compile(text, backend="cpu",
                        options={"num_threads": threads, "split_cost": 1})(*args)
    ref = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)  # (f32 sums reassociate)
    assert "log" in seen, seen


#: optax's clip_by_global_norm: a 1-D kernel scaled by a function of a scalar (the sum).
CLIP = """
func.func public @main(%g: tensor<{n}xf32>, %s: tensor<f32>) -> tensor<{n}xf32> {{
  %r = stablehlo.sqrt %s : tensor<f32>
  %e = stablehlo.constant dense<1.0e-6> : tensor<f32>
  %d = stablehlo.add %r, %e : tensor<f32>
  %one = stablehlo.constant dense<1.0> : tensor<f32>
  %q = stablehlo.divide %one, %d : tensor<f32>
  %m = stablehlo.minimum %one, %q : tensor<f32>
  %b = stablehlo.broadcast_in_dim %m, dims = [] : (tensor<f32>) -> tensor<{n}xf32>
  %y = stablehlo.multiply %g, %b : tensor<{n}xf32>
  return %y : tensor<{n}xf32>
}}
"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("s", [0.25, 1e-20, 0.0, 1e-40, float("inf"), float("nan")])
def test_scalar_values_of_a_flat_kernel_hoisted(threads: int, s: float,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-dimensional kernel's values of its scalars (g * min(1, 1 / (sqrt(s) + eps)))
    are computed once before its loop (x86-64-v3 code ran a scalar sqrt and divide per
    vector: 1.5-2x XLA's time), with the interpreter's bits for special sums too."""
    seen = _record(monkeypatch)
    n = 100003
    text = CLIP.format(n=n)
    g = np.random.default_rng(4).standard_normal(n).astype(np.float32)
    s32 = np.float32(s)
    exe = xlapy.compile(text, backend="cpu", options={"num_threads": threads,
                                                      "split_cost": 1})
    got = np.asarray(exe(g, s32))
    ref = np.asarray(xlapy.compile(text)(g, s32))
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))
    assert {"sqrt", "divide", "minimum"} <= set(seen)
