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


#: jax.image.resize(x, (b, 2h, 2w, c), "nearest"): two gathers whose start indices come from
#: iotas of the output's rows and columns (floor((i + 0.5) * h / 2h)), fused into one kernel
#: whose innermost loop runs over the c channels.
RESIZE = """
func.func public @main(%x: tensor<{b}x{h}x{w}x{c}xf32>) -> tensor<{b}x{h2}x{w2}x{c}xf32> {{
  %i = stablehlo.iota dim = 0 : tensor<{h2}xf32>
  %hf = stablehlo.constant dense<0.5> : tensor<{h2}xf32>
  %i1 = stablehlo.add %i, %hf : tensor<{h2}xf32>
  %s = stablehlo.constant dense<{r}> : tensor<{h2}xf32>
  %i2 = stablehlo.multiply %i1, %s : tensor<{h2}xf32>
  %i3 = stablehlo.floor %i2 : tensor<{h2}xf32>
  %i4 = stablehlo.convert %i3 : (tensor<{h2}xf32>) -> tensor<{h2}xi32>
  %i5 = stablehlo.reshape %i4 : (tensor<{h2}xi32>) -> tensor<{h2}x1xi32>
  %g = "stablehlo.gather"(%x, %i5) <{{dimension_numbers = #stablehlo.gather<offset_dims = [0, 2, 3],
    collapsed_slice_dims = [1], start_index_map = [1], index_vector_dim = 1>,
    indices_are_sorted = false, slice_sizes = array<i64: {b}, 1, {w}, {c}>}}>
    : (tensor<{b}x{h}x{w}x{c}xf32>, tensor<{h2}x1xi32>) -> tensor<{b}x{h2}x{w}x{c}xf32>
  %j = stablehlo.iota dim = 0 : tensor<{w2}xf32>
  %jh = stablehlo.constant dense<0.5> : tensor<{w2}xf32>
  %j1 = stablehlo.add %j, %jh : tensor<{w2}xf32>
  %t = stablehlo.constant dense<{r}> : tensor<{w2}xf32>
  %j2 = stablehlo.multiply %j1, %t : tensor<{w2}xf32>
  %j3 = stablehlo.floor %j2 : tensor<{w2}xf32>
  %j4 = stablehlo.convert %j3 : (tensor<{w2}xf32>) -> tensor<{w2}xi32>
  %j5 = stablehlo.reshape %j4 : (tensor<{w2}xi32>) -> tensor<{w2}x1xi32>
  %o = "stablehlo.gather"(%g, %j5) <{{dimension_numbers = #stablehlo.gather<offset_dims = [0, 1, 3],
    collapsed_slice_dims = [2], start_index_map = [2], index_vector_dim = 1>,
    indices_are_sorted = false, slice_sizes = array<i64: {b}, {h2}, 1, {c}>}}>
    : (tensor<{b}x{h2}x{w}x{c}xf32>, tensor<{w2}x1xi32>) -> tensor<{b}x{h2}x{w2}x{c}xf32>
  return %o : tensor<{b}x{h2}x{w2}x{c}xf32>
}}
"""


def _phases_hoisted_into(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """(opcode, whether the phase is an outer loop's) of every value hoisted."""
    seen: list[tuple[str, bool]] = []
    real = HoistEmitter._hoisted

    def spy(self, phase, key, instr, idx):  # type: ignore[no-untyped-def]
        seen.append((instr.opcode, phase is not self._phases[-1]))
        return real(self, phase, key, instr, idx)

    monkeypatch.setattr(HoistEmitter, "_hoisted", spy)
    return seen


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("b", "h", "w", "c"), [(2, 8, 12, 3), (1, 5, 1, 2), (3, 4, 6, 1)])
def test_outer_index_values_hoisted_out_of_inner_loops(
        threads: int, b: int, h: int, w: int, c: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows' gather index of a nearest resize (a value of the output row only) is
    computed once per row, before the column loop, not per pixel (1.46 -> 0.74 ms for
    8 x 128 x 128 x 3 -> 256 x 256 on Zen 4); the columns' once per column; dimensions of
    one element among them; the interpreter's bits."""
    seen = _phases_hoisted_into(monkeypatch)
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    text = RESIZE.format(b=b, h=h, w=w, c=c, h2=2 * h, w2=2 * w, r="5.000000e-01")
    x = np.random.default_rng(b + h + w + c).standard_normal((b, h, w, c)).astype(np.float32)
    got = xlapy.compile(text, backend="cpu",
                        options={"num_threads": threads, "split_cost": 1})(x)
    ref = xlapy.compile(text, backend="interpreter")(x)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got, x.repeat(2, 1).repeat(2, 2))
    if c > 1:  # (else the channels' loop is no loop: the columns' is the innermost)
        # into an outer loop's phase (the index computation, or a constant table of it:
        # the columns' iota expression of at most constant_folding.SMALL elements folds)
        assert ("floor", True) in seen or ("constant", True) in seen, seen


#: x * sqrt(r[i]) + s[j] * 2 over [a, b, c]: sqrt(r[i]) is a value of the outer index only,
#: s[j] * 2 of the middle one; `row1`: the row value read at constant index 0 (r of one).
OUTER3 = """
func.func public @main(%x: tensor<{a}x{b}x{c}xf32>, %r: tensor<{a}xf32>, %s: tensor<{b}xf32>)
    -> tensor<{a}x{b}x{c}xf32> {{
  %q = stablehlo.sqrt %r : tensor<{a}xf32>
  %qb = stablehlo.broadcast_in_dim %q, dims = [0] : (tensor<{a}xf32>) -> tensor<{a}x{b}x{c}xf32>
  %two = stablehlo.constant dense<2.0> : tensor<{b}xf32>
  %t = stablehlo.multiply %s, %two : tensor<{b}xf32>
  %tb = stablehlo.broadcast_in_dim %t, dims = [1] : (tensor<{b}xf32>) -> tensor<{a}x{b}x{c}xf32>
  %m = stablehlo.multiply %x, %qb : tensor<{a}x{b}x{c}xf32>
  %o = stablehlo.add %m, %tb : tensor<{a}x{b}x{c}xf32>
  return %o : tensor<{a}x{b}x{c}xf32>
}}
"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("a", "b", "c"), [(6, 5, 3), (1, 7, 3), (4, 1, 40), (3, 9, 1)])
def test_outer_values_of_a_rank3_kernel(threads: int, a: int, b: int, c: int) -> None:
    text = OUTER3.format(a=a, b=b, c=c)
    rng = np.random.default_rng(a * b * c)
    args = [rng.standard_normal((a, b, c)).astype(np.float32),
            (rng.random(a) * 4).astype(np.float32), rng.standard_normal(b).astype(np.float32)]
    args[1][0] = 1e-40  # a denormal row value (flushed: sqrt 0)
    got = xlapy.compile(text, backend="cpu",
                        options={"num_threads": threads, "split_cost": 1})(*args)
    ref = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_array_equal(got, ref)


#: sum(x - log(s)[row]) over every dimension: the row is a reduced index, not an output one.
FULL_SUM_ROWS = """
func.func public @main(%x: tensor<{r}x{c}xf32>, %s: tensor<{r}xf32>) -> tensor<f32> {{
  %ls = stablehlo.log %s : tensor<{r}xf32>
  %b = stablehlo.broadcast_in_dim %ls, dims = [0] : (tensor<{r}xf32>) -> tensor<{r}x{c}xf32>
  %d = stablehlo.subtract %x, %b : tensor<{r}x{c}xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %t = stablehlo.reduce(%d init: %z) applies stablehlo.{op} across dimensions = [0, 1]
    : (tensor<{r}x{c}xf32>, tensor<f32>) -> tensor<f32>
  return %t : tensor<f32>
}}
"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op", ["add", "maximum"])
@pytest.mark.parametrize("cols", [1024, 37])
def test_full_reduce_row_values_hoisted(threads: int, op: str, cols: int,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A reduce over every dimension computes what its outer reduced index fixes (the sum of
    jax.nn.log_softmax's output: the row's log of its sum) once per row, not per vector
    (1024 x 1024: 236 -> 49 us on Zen 4, x86-64-v3 500 -> 82)."""
    seen = _record(monkeypatch)
    rows = 96
    text = FULL_SUM_ROWS.format(r=rows, c=cols, op=op)
    rng = np.random.default_rng(cols)
    args = [rng.standard_normal((rows, cols)).astype(np.float32),
            (rng.random(rows) * 50 + 1).astype(np.float32)]
    got = xlapy.compile(text, backend="cpu",
                        options={"num_threads": threads, "split_cost": 1})(*args)
    ref = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    assert "log" in seen, seen


#: sum over t of exp(s[h, t]) * v[t, h, :], the t dimension split [16, 16] by a reshape
#: (as the cpu passes split a decoding loop's attention-times-values sum): the reshape's
#: index arithmetic on the fixed outer indices comes before the lane loop, and with it the
#: exp that reads through it.
SPLIT_MIX = """
func.func public @main(%s: tensor<{h}x256xf32>, %v: tensor<256x{h}x{d}xf32>)
    -> tensor<{h}x16x{d}xf32> {{
  %e = stablehlo.exponential %s : tensor<{h}x256xf32>
  %eb = stablehlo.broadcast_in_dim %e, dims = [0, 1]
    : (tensor<{h}x256xf32>) -> tensor<{h}x256x{d}xf32>
  %vt = stablehlo.transpose %v, dims = [1, 0, 2]
    : (tensor<256x{h}x{d}xf32>) -> tensor<{h}x256x{d}xf32>
  %m = stablehlo.multiply %eb, %vt : tensor<{h}x256x{d}xf32>
  %r = stablehlo.reshape %m : (tensor<{h}x256x{d}xf32>) -> tensor<{h}x16x16x{d}xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %o = stablehlo.reduce(%r init: %z) applies stablehlo.add across dimensions = [1]
    : (tensor<{h}x16x16x{d}xf32>, tensor<f32>) -> tensor<{h}x16x{d}xf32>
  return %o : tensor<{h}x16x{d}xf32>
}}
"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("d", [64, 20])
def test_split_reshape_index_hoisted(threads: int, d: int,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A value read through a reshape at indices the lane loop fixes is hoisted out of it:
    the reshape's division and remainder are computed before the loop (before, they were
    new values inside it, so nothing reading them counted as fixed: a 64-token decoding
    loop computed its softmax probabilities once per vector of the head dimension)."""
    seen = _record(monkeypatch)
    monkeypatch.setenv("XLAPY_CACHE_DIR", "")
    text = SPLIT_MIX.format(h=4, d=d)
    rng = np.random.default_rng(7)
    args = [rng.standard_normal((4, 256)).astype(np.float32),
            rng.standard_normal((256, 4, d)).astype(np.float32)]
    args[0][1, 3] = np.inf
    args[1][5, 2, :] = 1e-40  # (flushed)
    got = xlapy.compile(text, backend="cpu",
                        options={"num_threads": threads, "split_cost": 1})(*args)
    ref = xlapy.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-6)
    assert "exponential" in seen, seen
