# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""Reductions over a short last dimension as element-wise folds (short_reduce.py): the
interpreter's bits (its left-to-right fold from the init) for sums, products, max/min and
bitwise folds over 1..8 elements in f32/bf16/s32/pred, a non-identity init, and over
up to 16 when the result is not spread back out (a plain sum, a distance); dots
contracting at most 8 elements as fused kernels (a BLAS call with k = 3 took 1.95x XLA's
time); normalizations (the result broadcast back over the operand) stay row reductions."""

from __future__ import annotations

import re
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.short_reduce import SHORT, SHORT_HEAVY, THIN, THIN_OUTPUTS

RED = """
func.func @main(%x: tensor<{m}x{n}x{t}>, %i: tensor<{t}>) -> tensor<{m}x{t}> {{
  %r = stablehlo.reduce(%x init: %i) applies stablehlo.{op} across dimensions = [1]
    : (tensor<{m}x{n}x{t}>, tensor<{t}>) -> tensor<{m}x{t}>
  return %r : tensor<{m}x{t}>
}}
"""

_DT = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "i32": np.int32, "i1": np.bool_}


def _kinds(prog: xlapy.CompiledProgram) -> list[str]:
    return [how for _, _, how in prog._exe.report]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 9, 12, 16, 17])
@pytest.mark.parametrize(("t", "op"), [("f32", "add"), ("f32", "maximum"), ("bf16", "add"),
                                       ("f32", "multiply"), ("i32", "minimum"),
                                       ("i32", "xor"), ("i1", "or")])
def test_short_last_dimension_folds_in_order(n: int, t: str, op: str) -> None:
    m = 1000
    rng = np.random.default_rng(n)
    dt = _DT[t]
    if t == "i1":
        x, init = rng.random((m, n)) > 0.7, np.array(False)
    elif t == "i32":
        x, init = rng.integers(-1000, 1000, (m, n)).astype(dt), np.array(7, dt)
    else:
        x = (rng.standard_normal((m, n)) * 1e3).astype(dt)
        x.flat[:4] = np.array([np.nan, np.inf, -0.0, 1e-40], np.float32).astype(dt)
        init = np.array(0.5 if op != "maximum" else -np.inf, dt)
    text = RED.format(m=m, n=n, t=t, op=op)
    prog = xlapy.compile(text, backend="cpu")
    got, want = prog(x, init), xlapy.compile(text, backend="interpreter")(x, init)
    if n > SHORT_HEAVY and t[0] in "fb" and op in ("add", "multiply"):  # (row kernel lanes)
        # (sums of ~1e3; bf16 rounds each partial sum, in the lanes' order: half an ulp of
        # the largest partial each)
        c = np.abs(np.cumsum(np.asarray(x, np.float64), axis=1))
        big = c[np.isfinite(c)].max()
        tol = 1e-2 if t == "f32" else n * big * 2.0 ** -8
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                                   rtol=1e-5, atol=tol)
    else:
        np.testing.assert_array_equal(np.asarray(got).view(np.uint8),
                                      np.asarray(want).view(np.uint8))
    # (the result is the program's: not spread out, so folded up to SHORT_HEAVY)
    assert any("reduce" in str(i.opcode) for i in prog._exe.comp.instructions) == \
        (n > SHORT_HEAVY)


DOT = """
func.func @main(%x: tensor<64x224x{k}xf32>, %w: tensor<{k}xf32>) -> tensor<64x224xf32> {{
  %d = stablehlo.dot_general %x, %w, contracting_dims = [2] x [0]
    : (tensor<64x224x{k}xf32>, tensor<{k}xf32>) -> tensor<64x224xf32>
  return %d : tensor<64x224xf32>
}}
"""


@pytest.mark.parametrize("k", [3, 8, 16])
def test_narrow_dots_are_kernels(k: int) -> None:
    rng = np.random.default_rng(k)
    x, w = rng.standard_normal((64, 224, k)).astype(np.float32), \
        rng.standard_normal(k).astype(np.float32)
    prog = xlapy.compile(DOT.format(k=k), backend="cpu")
    np.testing.assert_allclose(prog(x, w), x @ w, rtol=1e-5, atol=1e-5)
    # (a library call past SHORT: the matrix-vector loop, gemv.matvec)
    assert ("library jit gemv (matvec)" in _kinds(prog)) == (k > SHORT)


SOFTMAX = """
func.func @main(%x: tensor<512x4xf32>) -> tensor<512x4xf32> {
  %lo = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %lo) applies stablehlo.maximum across dimensions = [1]
    : (tensor<512x4xf32>, tensor<f32>) -> tensor<512xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<512xf32>) -> tensor<512x4xf32>
  %d = stablehlo.subtract %x, %mb : tensor<512x4xf32>
  return %d : tensor<512x4xf32>
}
"""


@pytest.mark.parametrize(("m", "k", "n"), [(2048, 4, 1024), (1024, THIN, 2048),
                                            (2048, THIN + 1, 1024), (256, 4, 1024)])
def test_thin_products_into_many_outputs_are_folds(m: int, k: int, n: int) -> None:
    """An unbatched product contracting at most THIN elements into THIN_OUTPUTS or more is
    the fold of k broadcast products (2048 x 4 x 2048: BLAS 0.82 ms, the fold 0.45, XLA
    0.50); fewer outputs or a longer contraction keep BLAS."""
    ty = "tensor<{}x{}xf32>"
    text = f"""
func.func @main(%a: {ty.format(m, k)}, %b: {ty.format(k, n)}) -> {ty.format(m, n)} {{
  %r = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
    : ({ty.format(m, k)}, {ty.format(k, n)}) -> {ty.format(m, n)}
  return %r : {ty.format(m, n)}
}}
"""
    rng = np.random.default_rng(k)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n)))
    prog = xlapy.compile(text, backend="cpu")
    folded = k <= THIN and m * n >= THIN_OUTPUTS
    assert any("blas" in h or "gemm" in h for h in _kinds(prog)) != folded, _kinds(prog)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(np.asarray(prog(a, b)), want, rtol=0,
                               atol=8 * k * np.finfo(np.float32).eps * np.abs(want).max())


def test_normalizations_keep_their_row_reduction() -> None:
    prog = xlapy.compile(SOFTMAX, backend="cpu")
    assert any(i.opcode == "reduce" for i in prog._exe.comp.instructions)
    x = np.random.default_rng(0).standard_normal((512, 4)).astype(np.float32)
    np.testing.assert_array_equal(prog(x), xlapy.compile(SOFTMAX, backend="interpreter")(x))


#: r2 = sum of squares over 3 components, pow(r2, 1.5) broadcast back over them.
OVER_POW = """
func.func @main(%x: tensor<512x3xf32>) -> tensor<512x3xf32> {
  %sq = stablehlo.multiply %x, %x : tensor<512x3xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%sq init: %z) applies stablehlo.add across dimensions = [1] : (tensor<512x3xf32>, tensor<f32>) -> tensor<512xf32>
  %e = stablehlo.constant dense<1.5> : tensor<512xf32>
  %p = stablehlo.power %s, %e : tensor<512xf32>
  %pb = stablehlo.broadcast_in_dim %p, dims = [0] : (tensor<512xf32>) -> tensor<512x3xf32>
  %d = stablehlo.divide %x, %pb : tensor<512x3xf32>
  return %d : tensor<512x3xf32>
}
"""


def test_a_short_sum_spread_out_keeps_its_row_kernel() -> None:
    """Past SHORT, a reduce whose values are spread back out, even through a transcendental
    (an RMS norm over 12: x * rsqrt(mean(x^2))), stays a row kernel (one value a row: 1.36
    ms over [512, 1024, 16], folded 2.43); one that is not (the sum of squares itself) folds
    up to SHORT_HEAVY (65536 rows of 16: 0.25 -> 0.14 ms)."""
    jax = pytest.importorskip("jax")
    x = np.random.default_rng(2).standard_normal((256, 64, 12)).astype(np.float32)
    rms = jax.jit(lambda v: v * jax.lax.rsqrt((v * v).mean(-1, keepdims=True) + 1e-6))
    norm = jax.jit(lambda v: (v * v).sum(-1))
    for fn, row in ((rms, True), (norm, False)):
        text = fn.lower(x).as_text()
        prog = xlapy.compile(text, backend="cpu")
        assert bool(prog._exe.row_reduces) == row
        want = xlapy.compile(text, backend="interpreter")(x)
        np.testing.assert_allclose(np.asarray(prog(x)), np.asarray(want), rtol=1e-5)


def test_a_reduce_broadcast_back_through_a_transcendental_is_folded() -> None:
    """The pow between the sum and its broadcast back would run once per row of 3 in the
    row kernel's scalar code: folded, it is computed in lanes (fusion_spread.SHORT_ROW gives
    it a buffer when it is big enough). The interpreter's bits."""
    prog = xlapy.compile(OVER_POW, backend="cpu")
    assert not any(i.opcode == "reduce" for i in prog._exe.comp.instructions)
    x = np.random.default_rng(1).standard_normal((512, 3)).astype(np.float32)
    np.testing.assert_array_equal(prog(x), xlapy.compile(OVER_POW, backend="interpreter")(x))


#: jnp.packbits: x > 0 of a flat x as bytes, reshaped to rows of 8, shifted by 7 - column,
#: summed as u32 into bytes.
PACKBITS = """
func.func @main(%x: tensor<{n}xf32>) -> tensor<{m}xui8> {{
  %z = stablehlo.constant dense<0.0> : tensor<{n}xf32>
  %1 = stablehlo.compare GT, %x, %z, FLOAT : (tensor<{n}xf32>, tensor<{n}xf32>) -> tensor<{n}xi1>
  %2 = stablehlo.convert %1 : (tensor<{n}xi1>) -> tensor<{n}xui8>
  %3 = stablehlo.iota dim = 0 : tensor<8xui8>
  %4 = stablehlo.reverse %3, dims = [0] : tensor<8xui8>
  %5 = stablehlo.reshape %2 : (tensor<{n}xui8>) -> tensor<{m}x8xui8>
  %7 = stablehlo.broadcast_in_dim %4, dims = [1] : (tensor<8xui8>) -> tensor<{m}x8xui8>
  %8 = stablehlo.shift_left %5, %7 : tensor<{m}x8xui8>
  %9 = stablehlo.convert %8 : (tensor<{m}x8xui8>) -> tensor<{m}x8xui32>
  %c = stablehlo.constant dense<0> : tensor<ui32>
  %10 = stablehlo.reduce(%9 init: %c) applies stablehlo.add across dimensions = [1] : (tensor<{m}x8xui32>, tensor<ui32>) -> tensor<{m}xui32>
  %11 = stablehlo.convert %10 : (tensor<{m}xui32>) -> tensor<{m}xui8>
  {ret}
}}
"""


@pytest.mark.parametrize("m", [1027, 16384])
def test_a_fold_of_a_reshaped_flat_value_reads_tiles_of_its_buffer(m: int) -> None:
    """The fold's columns of reshape(convert(x > 0)) move the reshape onto x
    (sink_reshapes), whose columns then load in lanes as tiles of rows (column_lanes.py);
    the flat x's columns were a scalar stride-8 loop (1M floats: 0.57 ms, XLA 0.12)."""
    text = PACKBITS.format(n=8 * m, m=m, ret=f"return %11 : tensor<{m}xui8>")
    prog = xlapy.compile(text, backend="cpu")
    assert re.search(r"store <\d+ x i8>", prog._exe.kernel_ir)
    x = np.random.default_rng(m).standard_normal(8 * m).astype(np.float32)
    x[:5] = [np.nan, 1e-40, -0.0, np.inf, -np.inf]
    flushed = np.where(np.abs(x) < np.finfo(np.float32).tiny, 0, x)  # (XLA's DAZ)
    np.testing.assert_array_equal(np.asarray(prog(x)), np.packbits(flushed > 0))
    np.testing.assert_array_equal(np.asarray(prog(x)),
                                  xlapy.compile(text, backend="interpreter")(x))


def test_a_value_used_elsewhere_keeps_its_reshape() -> None:
    """x > 0 is a second result too: the reshape stays on it (moving it would compute the
    compare twice in two shapes)."""
    m = 1024
    text = PACKBITS.format(n=8 * m, m=m, ret=f"return %11, %1 : tensor<{m}xui8>, tensor<{8 * m}xi1>"
                           ).replace(
        f"-> tensor<{m}xui8> {{", f"-> (tensor<{m}xui8>, tensor<{8 * m}xi1>) {{")
    prog = xlapy.compile(text, backend="cpu")
    live = [i for i in prog._exe.comp.instructions if i.users or i is prog._exe.comp.root]
    assert [i.opcode for i in live].count("compare") == 1
    assert any(i.opcode == "reshape" and i.operands[0].opcode == "compare" for i in live)
    x = np.random.default_rng(0).standard_normal(8 * m).astype(np.float32)
    got = prog(x)
    np.testing.assert_array_equal(np.asarray(got[0]), np.packbits(x > 0))
    np.testing.assert_array_equal(np.asarray(got[1]), x > 0)


_VARIADIC = [((4, 1031), 0), ((3, 5, 67), 0), ((1031, 3), 1), ((2, 2, 129), (0, 1)), ((8, 64), 0)]


@pytest.mark.parametrize(("kind", "shape", "axis"), [
    *((k, s, a) for k in ("argmax", "argmin") for s, a in _VARIADIC),
    ("select", (4, 1031), 0), ("select", (8, 64), 0)])  # (jnp.select: 1-D conditions)
def test_variadic_short_reduces_fold(kind: str, shape: tuple[int, ...], axis: Any) -> None:
    """A reduce of several inputs over at most 4 elements of leading dimensions (argmax:
    values and indices) is the interpreter's left-to-right fold with its reducer applied to
    whole arrays (short_reduce.unroll_variadic): jnp.select's argmax over its stacked
    conditions fuses into the selects, one kernel (it was a tuple kernel and three passes:
    2.2x XLA's time); 8 rows and a last dimension keep the reduce. NaN, ties and -0 pick
    what the interpreter picks."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    rng = np.random.default_rng(len(shape))
    x = rng.integers(-3, 4, shape).astype(np.float32)  # (ties)
    x.reshape(-1)[::17] = np.nan
    x.reshape(-1)[5::13] = -0.0
    if kind == "select":
        v = x[0]

        def fn(v: Any) -> Any:
            return jnp.select([v < -1, v < 0, v < 1], [v * 2, v * v, v + 3], v - 1)
        args: tuple[Any, ...] = (v,)
    else:
        def fn(v: Any) -> Any:
            ax = axis if isinstance(axis, int) else None
            if ax is None:  # (both leading axes: flattened first, as jnp does for a tuple)
                v = v.reshape(-1, v.shape[-1])
                ax = 0
            return getattr(jnp, kind)(v, axis=ax)
        args = (x,)
    text = jax.jit(fn).lower(*args).as_text()
    prog = xlapy.compile(text, backend="cpu")
    folds = kind == "select" or (axis != 1 and shape[0] * (shape[1] if axis != 0 else 1) <= 4)
    assert folds != any(i.opcode == "reduce" for i in prog._exe.comp.instructions)
    np.testing.assert_array_equal(np.asarray(prog(*args)),
                                  np.asarray(xlapy.compile(text, backend="interpreter")(*args)))
    np.testing.assert_array_equal(np.asarray(prog(*args)), np.asarray(jax.jit(fn)(*args)))


POOL = """
func.func @main(%x: tensor<6x5x8x2x12x{k}x{t}>, %i: tensor<{t}>) -> tensor<6x5x8x12x{t}> {{
  %r = stablehlo.reduce(%x init: %i) applies stablehlo.{op} across dimensions = [3, 5]
    : (tensor<6x5x8x2x12x{k}x{t}>, tensor<{t}>) -> tensor<6x5x8x12x{t}>
  return %r : tensor<6x5x8x12x{t}>
}}
"""


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize(("t", "op"), [("f32", "maximum"), ("f32", "minimum"), ("f32", "add"),
                                       ("i32", "add"), ("bf16", "maximum"), ("bf16", "add")])
def test_a_short_last_dimension_reduced_with_others_folds_first(k: int, t: str,
                                                                op: str) -> None:
    """x.reshape(n, c, h / 2, 2, w / 2, 2).max((3, 5)) (a 2 x 2 max pool of NCHW images)
    reduced each output's pairs in masked vectors of 2: 6.5 ms against XLA's 3.3 for
    [32, 64, 56, 56]. Split into the last dimension's fold, then the rest: one kernel over
    the output, 1.75 ms (an average pool 4.6 -> 1.4). Max/min and integer sums keep the
    interpreter's bits (NaN, -0/+0, an init counted once); f32 sums reassociate; bf16 sums
    (rounded each step) are not split."""
    rng = np.random.default_rng(k)
    shape = (6, 5, 8, 2, 12, k)
    dt = _DT[t]
    if t == "i32":
        x, init = rng.integers(-1000, 1000, shape).astype(dt), np.array(7, dt)
    else:
        x = rng.standard_normal(shape).astype(np.float32)
        x[0, 0, 0, 1, 3, 0] = np.nan
        x[1, 1, 1, :, 2, :] = -0.0
        x[1, 1, 1, 1, 2, 0] = 0.0
        x = x.astype(dt)
        init = np.array(0.25, dt)
    text = POOL.format(k=k, t=t, op=op)
    prog = xlapy.compile(text, backend="cpu")
    got = np.asarray(prog(x, init))
    want = np.asarray(xlapy.compile(text, backend="interpreter")(x, init))
    split = t != "bf16" or op != "add"
    reds = [i for i in prog._exe.comp.instructions if i.opcode == "reduce"]
    assert [tuple(r.attrs.dimensions) for r in reds] == [(3,) if split else (3, 5)]
    assert len(prog._exe.kernel_specs) == 1
    if t == "f32" and op == "add":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
