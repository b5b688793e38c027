"""Native reduce with a general region (reduce_region_emit.py): argmax/argmin's variadic
comparator reduce and other element-wise regions, bit-exact against the interpreter's fold
(sequential up to SEQUENTIAL_LIMIT elements, its pairwise tree beyond), never a fallback;
with the last dimension kept, in vector lanes along it (a scalar remainder); short rows
reduced whole, a row per lane."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu.reduce_region_emit import ROW_LANES
from xlapy.ops.reduction import SEQUENTIAL_LIMIT
from xlapy.types import ElementType as ET

from .test_window_emit import MLIR, check, data, same, tensor


def argmax(t: ET, dims: Sequence[int], red: Sequence[int], direction: str = "GT") -> str:
    """jnp.argmax's lowering (argmin: direction LT), over dimensions `red`."""
    e = MLIR[t]
    out = [n for d, n in enumerate(dims) if d not in red]
    kind = "FLOAT" if t.is_float else "SIGNED"
    init = {ET.F32: "0xFF800000", ET.F64: "0xFFF0000000000000", ET.BF16: "0xFF80",
            ET.F16: "0xFC00", ET.S32: "-2147483648"}[t] if direction == "GT" else \
        {ET.F32: "0x7F800000", ET.F64: "0x7FF0000000000000", ET.BF16: "0x7F80",
         ET.F16: "0x7C00", ET.S32: "2147483647"}[t]
    nan = (f"%3 = stablehlo.compare NE, %a, %a, {kind} : (tensor<{e}>, tensor<{e}>) -> "
           f"tensor<i1>\n      %4 = stablehlo.or %2, %3 : tensor<i1>") if t.is_float else \
        "%4 = stablehlo.or %2, %2 : tensor<i1>"
    return f"""
func.func @main(%x: {tensor(t, dims)}) -> ({tensor(t, out)}, {tensor(ET.S32, out)}) {{
  %i = stablehlo.iota dim = {red[-1]} : {tensor(ET.S32, dims)}
  %c = stablehlo.constant dense<{init}> : tensor<{e}>
  %z = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.reduce(%x init: %c), (%i init: %z) across dimensions = [{', '.join(
        map(str, red))}] : ({tensor(t, dims)}, {tensor(ET.S32, dims)}, tensor<{e}>,
        tensor<i32>) -> ({tensor(t, out)}, {tensor(ET.S32, out)})
    reducer(%a: tensor<{e}>, %b: tensor<{e}>) (%p: tensor<i32>, %q: tensor<i32>) {{
      %2 = stablehlo.compare {direction}, %a, %b, {kind} : (tensor<{e}>, tensor<{e}>) -> tensor<i1>
      {nan}
      %5 = stablehlo.compare EQ, %a, %b, {kind} : (tensor<{e}>, tensor<{e}>) -> tensor<i1>
      %6 = stablehlo.compare LT, %p, %q, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %7 = stablehlo.and %5, %6 : tensor<i1>
      %8 = stablehlo.or %4, %7 : tensor<i1>
      %9 = stablehlo.select %4, %a, %b : tensor<i1>, tensor<{e}>
      %10 = stablehlo.select %8, %p, %q : tensor<i1>, tensor<i32>
      stablehlo.return %9, %10 : tensor<{e}>, tensor<i32>
    }}
  return %r#0, %r#1 : {tensor(t, out)}, {tensor(ET.S32, out)}
}}"""


SHAPES = [((4, 0), (1,)), ((3, 1), (1,)), ((3, SEQUENTIAL_LIMIT), (1,)),
          ((3, SEQUENTIAL_LIMIT + 1), (1,)), ((5, 37), (1,)), ((2, 1000), (1,)),
          ((9, 4), (0,)), ((3, 5, 7), (0, 2)), ((6, 7), (0, 1)),
          # the last dimension kept: lanes along it, a scalar remainder of columns
          ((SEQUENTIAL_LIMIT, 53), (0,)), ((40, 37), (0,)), ((5, 33, 21), (1,)),
          ((300, 16), (0,)), ((3, 7, 19), (0, 1)),
          # trailing dimensions reduced, rows of at most SEQUENTIAL_LIMIT: a row per lane
          ((40, SEQUENTIAL_LIMIT), (1,)), ((37, 3), (1,)), ((4, 9, 5), (2,)),
          ((3, 6, 2, 5), (2, 3)), ((100, 1), (1,)),
          # ... past SEQUENTIAL_LIMIT in the pairwise tree, unrolled (up to ROW_LANES)
          ((40, SEQUENTIAL_LIMIT + 1), (1,)), ((37, 21), (1,)), ((3, 6, 4, 7), (2, 3)),
          ((35, ROW_LANES), (1,)), ((35, ROW_LANES + 1), (1,)),
          # longer rows, a lane each gathering its column, the scalar tree per lane; a
          # scalar rest of rows
          ((40, 1000), (1,)), ((2, 17, 300), (2,)), ((16, 4, 50), (1, 2)), ((33, 257), (1,))]


@pytest.mark.parametrize("t", [ET.F32, ET.F64, ET.S32, ET.BF16, ET.F16])
@pytest.mark.parametrize("direction", ["GT", "LT"])
@pytest.mark.parametrize("k", range(len(SHAPES)))
def test_argmax_argmin(t: ET, direction: str, k: int) -> None:
    dims, red = SHAPES[k]
    x = data(t, dims, seed=k)
    if t.is_integer or k % 2:
        x = (np.asarray(x).astype(np.float64) % 3).astype(x.dtype)  # ties
    check(argmax(t, dims, red, direction), [x], "reduce")


REGION_SUM = """
func.func @main(%x: tensor<7x{n}xf32>, %y: tensor<7x{n}xi32>) -> (tensor<7xf32>, tensor<7xi32>) {{
  %c = stablehlo.constant dense<0.5> : tensor<f32>
  %d = stablehlo.constant dense<3> : tensor<i32>
  %r:2 = stablehlo.reduce(%x init: %c), (%y init: %d) across dimensions = [1]
      : (tensor<7x{n}xf32>, tensor<7x{n}xi32>, tensor<f32>, tensor<i32>)
      -> (tensor<7xf32>, tensor<7xi32>)
    reducer(%a: tensor<f32>, %b: tensor<f32>) (%p: tensor<i32>, %q: tensor<i32>) {{
      %1 = stablehlo.multiply %b, %b : tensor<f32>
      %2 = stablehlo.add %a, %1 : tensor<f32>
      %3 = stablehlo.multiply %p, %q : tensor<i32>
      stablehlo.return %2, %3 : tensor<f32>, tensor<i32>
    }}
  return %r#0, %r#1 : tensor<7xf32>, tensor<7xi32>
}}"""


@pytest.mark.parametrize("n", [0, 5, SEQUENTIAL_LIMIT + 1, 100, 1023])
def test_any_elementwise_region(n: int) -> None:
    """A region that is no binary op (sum of squares, not associative in floats): the
    interpreter's exact association, sequential or tree."""
    x = data(ET.F32, (7, n), seed=n)
    y = data(ET.S32, (7, n), seed=n + 1)
    check(REGION_SUM.format(n=n), [x, y], "reduce")


def test_single_result_region_splits_over_threads() -> None:
    text = """
func.func @main(%x: tensor<4096x80xf32>) -> tensor<4096xf32> {
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%x init: %c) across dimensions = [1]
      : (tensor<4096x80xf32>, tensor<f32>) -> tensor<4096xf32>
    reducer(%a: tensor<f32>, %b: tensor<f32>) {
      %1 = stablehlo.abs %b : tensor<f32>
      %2 = stablehlo.add %a, %1 : tensor<f32>
      stablehlo.return %2 : tensor<f32>
    }
  return %r : tensor<4096xf32>
}"""
    x = data(ET.F32, (4096, 80), seed=3)
    same(check(text, [x], "reduce", num_threads=1), check(text, [x], "reduce", num_threads=2))


def test_argmax_from_jax_and_complex_product() -> None:
    jax = pytest.importorskip("jax")
    x = data(ET.F32, (6, 50), seed=4)
    check(jax.jit(lambda a: jax.numpy.argmax(a, axis=1)).lower(x).as_text(), [x], "reduce")
    z = (x + 1j * x).astype(np.complex64)
    text = jax.jit(lambda a: jax.lax.reduce(a, np.complex64(1), jax.lax.mul, (1,))
                   ).lower(z).as_text()
    exe = xlapy.compile(text, backend="cpu")
    # A complex reducer is a reduce kernel's (elementwise_complex.REDUCERS), in order.
    np.testing.assert_allclose(exe(z), xlapy.compile(text)(z), rtol=1e-5)
    assert "reduce" not in {o for _, o in exe._exe.fallbacks()}


def test_argmax_splits_over_threads() -> None:
    """Several results (TupleKernel) split by output rows: the bits never depend on the
    thread count; rows of 80 take whole blocks and a remainder."""
    x = data(ET.F32, (4096, 80), seed=5)
    text = argmax(ET.F32, (4096, 80), (1,))
    same(check(text, [x], "reduce", num_threads=1), check(text, [x], "reduce", num_threads=2))


def test_short_row_argmin_in_lanes_splits_over_threads() -> None:
    """jnp.argmin over 16 columns (k-means' assignment): a row per vector lane, folding its
    columns left to right as one row at a time did (0.63 ms for 8192 rows, XLA 0.08):
    NaNs, ties and signed zeros, the interpreter's bits on 1 and 2 threads, the rows split
    at any point (a scalar remainder)."""
    x = data(ET.F32, (1003, 16), seed=8)
    x = (np.asarray(x).astype(np.float64) % 3).astype(np.float32)  # ties
    x[5, 3] = x[5, 9] = x[700, 0] = x[701, 15] = np.nan
    x[9, :] = 0.0
    x[9, 4::3] = -0.0
    text = argmax(ET.F32, (1003, 16), (1,), "LT")
    same(check(text, [x], "reduce", num_threads=1, split_cost=1),
         check(text, [x], "reduce", num_threads=2, split_cost=1))
    ir_text = xlapy.compile(text, backend="cpu")._exe.kernel_ir  # type: ignore[attr-defined]
    from xlapy.backends.cpu.lanes import vector_width

    assert f"<{vector_width() * 16} x float>" in ir_text


def test_rows_of_21_fold_their_tree_in_lanes() -> None:
    """argmax over 21 classes (a segmentation map, NHWC): the pairwise tree of each row, a
    row per lane (1.07 -> 0.19 ms for 2 x 128 x 128 x 21; XLA's program 0.25), NaNs and
    ties exact on 1 and 2 threads."""
    from xlapy.backends.cpu.lanes import vector_width

    x = data(ET.F32, (2, 40, 9, 21), seed=12)
    x = (np.asarray(x).astype(np.float64) % 2).astype(np.float32)  # ties
    x[0, 3, 4, 7] = x[1, 39, 8, 20] = np.nan
    text = argmax(ET.F32, (2, 40, 9, 21), (3,))
    same(check(text, [x], "reduce", num_threads=1, split_cost=1),
         check(text, [x], "reduce", num_threads=2, split_cost=1))
    ir_text = xlapy.compile(text, backend="cpu")._exe.kernel_ir  # type: ignore[attr-defined]
    assert f"<{vector_width() * 21} x float>" in ir_text


@pytest.mark.parametrize("iota", [0, 1, 2, 3])
def test_short_rows_take_any_iota_as_positions(iota: int) -> None:
    """A row per lane reads an iota along a reduced dimension as the positions (no load):
    along either of two reduced dimensions, or a kept one (loaded)."""
    dims = (5, 7, 3, 4)
    x = data(ET.F32, dims, seed=iota)
    x = (np.asarray(x).astype(np.float64) % 2).astype(np.float32)  # ties
    text = argmax(ET.F32, dims, (2, 3)).replace("iota dim = 3", f"iota dim = {iota}")
    check(text, [x], "reduce")


@pytest.mark.parametrize("n", [5, 23])
def test_region_over_short_rows_in_lanes(n: int) -> None:
    """A region that is no binary op (not associative in floats) over rows of 5 or 23, a row
    a lane: sequential or the pairwise tree, exact."""
    text = REGION_SUM.replace("7x{n}", "{r}x{n}").replace("tensor<7x", "tensor<{r}x") \
        .replace("tensor<7xf32>", "tensor<{r}xf32>").replace("tensor<7xi32>", "tensor<{r}xi32>")
    x = data(ET.F32, (45, n), seed=9)
    y = data(ET.S32, (45, n), seed=10)
    check(text.format(n=n, r=45), [x, y], "reduce")


def test_column_argmin_in_lanes_splits_over_threads() -> None:
    """jnp.argmin over axis 0 (the last dimension kept: vector lanes, 2048 rows in the
    pairwise tree, ~9x faster than one column at a time): NaNs and ties, the bits of the
    interpreter on 1 and 2 threads (columns split at any point, a scalar remainder)."""
    x = data(ET.F32, (2048, 203), seed=6)
    x = (np.asarray(x).astype(np.float64) % 5).astype(np.float32)  # ties
    x[7, 3] = x[1500, 4] = x[9, 4] = np.nan
    text = argmax(ET.F32, (2048, 203), (0,), "LT")
    same(check(text, [x], "reduce", num_threads=1, split_cost=1),
         check(text, [x], "reduce", num_threads=2, split_cost=1))
    from xlapy.backends.cpu.lanes import vector_width

    ir_text = xlapy.compile(text, backend="cpu")._exe.kernel_ir  # type: ignore[attr-defined]
    assert f"<{vector_width()} x float>" in ir_text  # the lanes' loads


def test_vector_lane_reduces_take_the_light_pipeline() -> None:
    """A native reduce whose work is in vector lanes (columns kept, or rows a lane each) is
    compiled with the light pipeline (119 -> 47 ms for argmin over the columns of [2048,
    512]); a scalar tree (fewer rows than lanes) keeps O3's, ~20% faster there, unless small
    (LIGHT_TREE elements: a categorical sample's argmax over [1024, 100], 57 ms of LLVM on
    ~30 us a call). The bits are the interpreter's either way (the tests above)."""
    from xlapy.backends.cpu import op_emit

    def kernel(text: str) -> op_emit.Kernel:
        exe = xlapy.compile(text, backend="cpu")._exe  # type: ignore[attr-defined]
        (spec,) = [s for s in exe.kernel_specs if s is not None and "reduce" in s.root.opcode]
        return spec

    assert kernel(argmax(ET.F32, (64, 40), (0,), "LT")).explicit  # columns in lanes
    assert kernel(argmax(ET.F32, (64, 21), (1,))).explicit  # rows of 21, a lane each
    assert kernel(argmax(ET.F32, (300, 1000), (1,))).explicit  # long rows, gathered
    assert not kernel(argmax(ET.F32, (3, 100000), (1,))).explicit  # scalar trees
    assert kernel(argmax(ET.F32, (4, 1000), (1,))).explicit  # a small one


@pytest.mark.parametrize("dims,red", [((300, 10), (1,)), ((2, 21, 9, 40), (1,)),
                                      ((64, 40), (0,)), ((5, 1000), (1,)), ((3, 5, 7), (0, 2))])
def test_argmax_computes_its_iota(dims: tuple[int, ...], red: tuple[int, ...]) -> None:
    """jnp.argmax's iota along the reduced dimension is computed by the reduce from the
    element's index (reduce_region_emit.computed_iota): no kernel, no buffer (a [65536, 10]
    argmax wrote and read 2.6 MB of indices per call); the interpreter's bits, NaNs and
    ties included."""
    x = (np.asarray(data(ET.F32, dims, seed=3)).astype(np.float64) % 3).astype(np.float32)
    x.flat[::13] = np.nan
    text = argmax(ET.F32, dims, red)
    check(text, [x], "reduce")
    exe = xlapy.compile(text, backend="cpu")._exe  # type: ignore[attr-defined]
    assert [op for _, op, how in exe.report if how not in ("aliasing", "buffer")] == \
        ["reduce"], exe.explain()


def test_an_iota_along_a_kept_dimension_or_also_a_result_keeps_its_buffer() -> None:
    """An iota along a dimension the reduce keeps is read from its buffer; one the program
    also returns is computed in the reduce and materialized for the result."""
    x = np.asarray(data(ET.F32, (12, 40), seed=4))
    kept = argmax(ET.F32, (12, 40), (1,)).replace("iota dim = 1", "iota dim = 0")
    check(kept, [x], "reduce")
    exe = xlapy.compile(kept, backend="cpu")._exe  # type: ignore[attr-defined]
    assert "iota" in [op for _, op, _ in exe.report]
    both = argmax(ET.F32, (12, 40), (1,)).replace(
        "return %r#0, %r#1 : ", "return %r#0, %r#1, %i : ").replace(
        "-> (tensor<12xf32>, tensor<12xi32>) {", "-> (tensor<12xf32>, tensor<12xi32>, "
        "tensor<12x40xi32>) {").replace(": tensor<12xf32>, tensor<12xi32>\n}",
                                        ": tensor<12xf32>, tensor<12xi32>, tensor<12x40xi32>\n}")
    got = check(both, [x], "reduce")
    np.testing.assert_array_equal(got[2], np.broadcast_to(np.arange(40), (12, 40)))


@pytest.mark.parametrize("dims,red", [((300, 64), (0,)), ((3, 50, 32), (1,))])
def test_whole_vectors_of_columns_have_no_scalar_rest(dims: tuple[int, ...],
                                                      red: tuple[int, ...]) -> None:
    """Kept columns that are whole vectors: no scalar remainder loop is emitted, and a
    reduce whose only kept dimension they are splits over threads at multiples of a vector
    (Kernel.align; half of argmin over [2048, 512]'s IR, its compile 47 -> 26 ms); the
    interpreter's bits on 1 and 2 threads."""
    from xlapy.backends.cpu.lanes import vector_width

    x = (np.asarray(data(ET.F32, dims, seed=8)).astype(np.float64) % 4).astype(np.float32)
    x.flat[::29] = np.nan
    text = argmax(ET.F32, dims, red, "LT")
    same(check(text, [x], "reduce", num_threads=1, split_cost=1),
         check(text, [x], "reduce", num_threads=2, split_cost=1))
    exe = xlapy.compile(text, backend="cpu")._exe  # type: ignore[attr-defined]
    w = vector_width()
    assert dims[-1] % w == 0  # (whole vectors on every target: 16 lanes at most)
    assert '"os.body"' not in exe.kernel_ir
    (spec,) = [s for s in exe.kernel_specs if s is not None]
    assert spec.align == (w if len(dims) == 2 else 1)


@pytest.mark.parametrize("it", ["ui8", "i16", "i64"])
def test_a_computed_iota_wraps_and_widens_as_its_type(it: str) -> None:
    """An iota of another integer type computed by the reduce (computed_iota): 300
    positions in u8 wrap as the interpreter's iota does, i16 and i64 are exact; kept
    columns in lanes and a scalar tree alike."""
    for dims, red in (((300, 40), (0,)), ((40, 300), (1,))):
        x = (np.asarray(data(ET.F32, dims, seed=9)).astype(np.float64) % 3).astype(np.float32)
        x.flat[::31] = np.nan
        text = argmax(ET.F32, dims, red).replace("i32", it)
        if it.startswith("u"):
            text = text.replace(", SIGNED", ", UNSIGNED")
        check(text, [x], "reduce")
