"""Native scatter (scatter_emit.py): bit-exact against the interpreter for every element type,
update region and dimension-number form (out-of-bounds windows dropped, duplicates applied in
order), and never an interpreter fallback."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import lanes, scatter_emit
from xlapy.types import ElementType as ET

from .test_window_emit import MLIR, check, data, same, tensor
from .util import ulp_error

TYPES = [ET.F32, ET.F64, ET.S32, ET.BF16, ET.F16]


def arr(v: Sequence[int]) -> str:
    return f"[{', '.join(map(str, v))}]"


def region(kind: str, e: str) -> str:
    """The update computation f(current, update)."""
    if kind == "replace":
        return f"stablehlo.return %b : tensor<{e}>"
    if kind == "keep":
        return f"stablehlo.return %a : tensor<{e}>"
    if kind == "sub_swapped":
        return (f"%1 = stablehlo.subtract %b, %a : tensor<{e}>\n"
                f"    stablehlo.return %1 : tensor<{e}>")
    if kind == "apply_negate":  # x.at[i].apply(f): f of the current value
        return (f"%1 = stablehlo.negate %a : tensor<{e}>\n"
                f"    stablehlo.return %1 : tensor<{e}>")
    return (f"%1 = stablehlo.{kind} %a, %b : tensor<{e}>\n"
            f"    stablehlo.return %1 : tensor<{e}>")


def scatter(t: ET, it: ET, dims: Sequence[int], idims: Sequence[int], udims: Sequence[int],
            uwd: Sequence[int], iwd: Sequence[int], sdod: Sequence[int], ivd: int,
            kind: str, ibd: Sequence[int] = (), sibd: Sequence[int] = ()) -> str:
    e = MLIR[t]
    batching = (f", input_batching_dims = {arr(ibd)}, scatter_indices_batching_dims = "
                f"{arr(sibd)}") if ibd else ""
    return f"""
func.func @main(%x: {tensor(t, dims)}, %i: {tensor(it, idims)}, %u: {tensor(t, udims)})
    -> {tensor(t, dims)} {{
  %0 = "stablehlo.scatter"(%x, %i, %u) <{{indices_are_sorted = false,
      scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = {arr(uwd)},
      inserted_window_dims = {arr(iwd)}{batching},
      scatter_dims_to_operand_dims = {arr(sdod)}, index_vector_dim = {ivd}>,
      unique_indices = false}}> ({{
  ^bb0(%a: tensor<{e}>, %b: tensor<{e}>):
    {region(kind, e)}
  }}) : ({tensor(t, dims)}, {tensor(it, idims)}, {tensor(t, udims)}) -> {tensor(t, dims)}
  return %0 : {tensor(t, dims)}
}}"""


#: name -> (operand dims, indices, update dims, uwd, iwd, sdod, ivd, ibd, sibd)
CONFIGS: dict[str, tuple[Any, ...]] = {
    # x.at[idx].op(v) on rows: duplicates, a negative and two past-the-end rows dropped
    "rows": ((5, 3), [[0], [2], [2], [-1], [5], [2], [7], [4]], (8, 3), [1], [0], [0], 1,
             (), ()),
    # x.at[i, j] points
    "points": ((5, 6), [[0, 1], [4, 5], [0, 1], [5, 0], [3, -2], [2, 2]], (6,), [], [0, 1],
               [0, 1], 1, (), ()),
    # 2-D windows, one sticking out (dropped whole)
    "windows": ((6, 5), [[0], [4], [3], [1]], (4, 3, 2), [1, 2], [], [0], 1, (), ()),
    # index_vector_dim 0, scatter_dims_to_operand_dims permuted
    "ivd0": ((4, 5), [[1, 3, 3, 0], [0, 4, 4, 9]], (4,), [], [0, 1], [1, 0], 0, (), ()),
    # implicit index vector (index_vector_dim == rank of the indices)
    "implicit": ((6, 2), [5, 0, 5, 6, 1], (5, 2), [1], [0], [0], 1, (), ()),
    # batching dims (vmap of x.at[i].op)
    "batched": ((2, 5, 3), [[[1], [1], [4]], [[0], [9], [2]]], (2, 3, 3), [2], [1], [1], 2,
                (0,), (0,)),
    # no updates at all
    "empty": ((4, 3), np.zeros((0, 1), np.int64), (0, 3), [1], [0], [0], 1, (), ()),
}
KINDS = ["add", "replace", "multiply", "maximum", "minimum", "subtract"]


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_scatter(t: ET, kind: str, name: str) -> None:
    dims, idx, udims, uwd, iwd, sdod, ivd, ibd, sibd = CONFIGS[name]
    idx = np.asarray(idx, np.int32)
    text = scatter(t, ET.S32, dims, idx.shape, udims, uwd, iwd, sdod, ivd, kind, ibd, sibd)
    check(text, [data(t, dims, 1), idx, data(t, udims, 2)], "scatter")


@pytest.mark.parametrize("it", [ET.S8, ET.S64, ET.U32])
@pytest.mark.parametrize("kind", ["keep", "sub_swapped", "apply_negate", "and", "or"])
def test_scatter_regions_and_index_types(it: ET, kind: str) -> None:
    t = ET.S32
    dims, idx, udims, uwd, iwd, sdod, ivd, ibd, sibd = CONFIGS["rows"]
    raw = np.asarray(idx, np.int64)
    idx = raw.astype(it.dtype) if it.is_signed else (raw % (1 << it.bits)).astype(it.dtype)
    text = scatter(t, it, dims, idx.shape, udims, uwd, iwd, sdod, ivd, kind, ibd, sibd)
    check(text, [data(t, dims, 1), idx, data(t, udims, 2)], "scatter")


def test_many_duplicates_apply_in_order() -> None:
    """A long chain of float adds to one element: the interpreter's order, bit for bit."""
    n = 5000
    idx = np.zeros((n, 1), np.int32)
    idx[::7] = 1
    text = scatter(ET.F32, ET.S32, (3,), idx.shape, (n,), [], [0], [0], 1, "add")
    upd = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    check(text, [np.zeros(3, np.float32), idx, upd], "scatter")


def test_scatter_from_jax() -> None:
    jax = pytest.importorskip("jax")
    x = data(ET.F32, (6, 4), 3)
    i = np.array([0, 5, 5, -1, 2], np.int32)
    for f in (lambda a, j: a.at[j].add(1.5), lambda a, j: a.at[j].set(2.0),
              lambda a, j: a.at[j, 1].min(-1.0)):
        check(jax.jit(f).lower(x, i).as_text(), [x, i], "scatter")
    # apply(sin): sine is a polynomial (elementwise.INEXACT), compared in ulps
    text = jax.jit(lambda a, j: a.at[j].apply(jax.numpy.sin)).lower(x, i).as_text()
    exe = xlapy.compile(text, backend="cpu")
    assert ulp_error(np.asarray(exe(x, i)), np.asarray(xlapy.compile(text)(x, i))) <= 2
    assert "scatter" not in {o for _, o in exe._exe.fallbacks()}


@pytest.mark.parametrize("fill", [0.0, -2.5, 1e-40, -1e-45])
@pytest.mark.parametrize("op", ["add", "max", "mul"])
def test_weights_into_a_filled_result(fill: float, op: str) -> None:
    """jnp.bincount(i, w) and kin: a result filled with a constant that is no denormal is
    read without a flush (scatter_emit._flushed_result); a denormal fill is flushed as
    before. Denormal and tiny weights, the interpreter's bits."""
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(5)
    # each bin's first update shows an unflushed denormal fill (2e-38 + 1e-40 = 2.01e-38,
    # 1e30 x 1e-40 = 1e-10, max(1e-40, -0.5)); then tiny and denormal ones, out of range too
    i = np.concatenate([np.arange(64), rng.integers(-3, 70, 400)]).astype(np.int32)
    w = np.concatenate([np.resize(np.array([2e-38, 1e30, -2e-38, -0.5], np.float32), 64),
                        rng.choice(np.array([1e-39, -3e-40, 3e-38, -1e-30, 0.5], np.float32),
                                   400)]).astype(np.float32)
    upd = {"add": lambda r, i, w: r.at[i].add(w), "max": lambda r, i, w: r.at[i].max(w),
           "mul": lambda r, i, w: r.at[i].multiply(w)}[op]
    f = jax.jit(lambda i, w: upd(jax.numpy.full(64, fill, jax.numpy.float32), i, w))
    with np.errstate(all="ignore"):
        check(f.lower(i, w).as_text(), [i, w], "scatter")


@pytest.mark.parametrize("cols", [2, 3, 4, 5, 8, 12, 16, 21])
@pytest.mark.parametrize("fill", [0.0, -2.5, 1e-40])
@pytest.mark.parametrize("op", ["add", "max"])
def test_rows_into_a_filled_result(cols: int, fill: float, op: str) -> None:
    """jax.ops.segment_sum and x.at[i].add(u) of rows of 2-21 floats: the rows in vectors
    of the widest power of two of lanes that fits (rows of 8 under AVX-512 ran scalar), the
    rest masked (AVX-512) or in halving vectors, the result read without a flush when its
    fill is no denormal. Denormal and tiny updates, duplicates, out-of-range rows: the
    interpreter's bits."""
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(6)
    i = np.concatenate([np.arange(64), rng.integers(-3, 70, 300)]).astype(np.int32)
    w = rng.choice(np.array([1e-39, -3e-40, 3e-38, -1e-30, 0.5, -2e-38, 7.25], np.float32),
                   (len(i), cols)).astype(np.float32)
    upd = {"add": lambda r, i, w: r.at[i].add(w), "max": lambda r, i, w: r.at[i].max(w)}[op]
    f = jax.jit(lambda i, w: upd(jax.numpy.full((64, cols), fill, jax.numpy.float32), i, w))
    text = f.lower(i, w).as_text()
    spec = [k for k in xlapy.compile(text, backend="cpu")._exe.kernel_specs
            if k.root.opcode == "scatter"][0]
    assert scatter_emit.vector_lanes(spec.root) == min(1 << (cols.bit_length() - 1),
                                                       lanes.vector_width())
    with np.errstate(all="ignore"):
        check(text, [i, w], "scatter")


VARIADIC = """
func.func @main(%x: tensor<4xf32>, %y: tensor<4xi32>, %i: tensor<5x1xi32>, %u: tensor<5xf32>,
                %v: tensor<5xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
  %0:2 = "stablehlo.scatter"(%x, %y, %i, %u, %v) <{scatter_dimension_numbers =
      #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
      index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<i32>, %c: tensor<f32>, %d: tensor<i32>):
    %1 = stablehlo.compare GT, %c, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %2 = stablehlo.select %1, %c, %a : tensor<i1>, tensor<f32>
    %3 = stablehlo.select %1, %d, %b : tensor<i1>, tensor<i32>
    stablehlo.return %2, %3 : tensor<f32>, tensor<i32>
  }) : (tensor<4xf32>, tensor<4xi32>, tensor<5x1xi32>, tensor<5xf32>, tensor<5xi32>)
      -> (tensor<4xf32>, tensor<4xi32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xi32>
}"""


def test_variadic_scatter() -> None:
    """Several operands (a scatter-argmax: each result depends on both): a TupleKernel."""
    args = [np.zeros(4, np.float32), np.full(4, -1, np.int32),
            np.array([[1], [3], [1], [9], [1]], np.int32),
            np.array([2, 5, 2, 7, 3], np.float32), np.arange(5, dtype=np.int32)]
    check(VARIADIC, args, "scatter")


def test_complex_scatter_falls_back_loudly() -> None:
    text = scatter(ET.F32, ET.S32, (4,), (2, 1), (2,), [], [0], [0], 1, "add").replace(
        "f32", "complex<f32>")
    args = [np.zeros(4, np.complex64), np.array([[1], [3]], np.int32),
            np.array([1 + 2j, 3j], np.complex64)]
    exe = xlapy.compile(text, backend="cpu")
    same(exe(*args), xlapy.compile(text)(*args))
    assert "scatter" in {o for _, o in exe._exe.fallbacks()}


@pytest.mark.parametrize("e", ["complex<f32>", "complex<f64>"])
@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("threads", [1, 3])
def test_complex_replace_scatter_is_native(e: str, name: str, threads: int) -> None:
    """`.at[].set` on complex values (jax.scipy.linalg.sqrtm's c64 scatter): the region only
    moves stored {re, im} elements, so it runs natively (split over rows on threads)."""
    dims, idx, udims, uwd, iwd, sdod, ivd, ibd, sibd = CONFIGS[name]
    idx = np.asarray(idx, np.int32)
    text = scatter(ET.F32, ET.S32, dims, idx.shape, udims, uwd, iwd, sdod, ivd, "replace",
                   ibd, sibd).replace("f32", e)
    part, dt = (ET.F32, np.complex64) if e == "complex<f32>" else (ET.F64, np.complex128)

    def cdata(d: tuple[int, ...], seed: int) -> np.ndarray:  # (re, im) pairs, specials too
        return np.ascontiguousarray(data(part, (*d, 2), seed)).view(dt)[..., 0]
    args = [cdata(dims, 1), idx, cdata(udims, 2)]
    check(text, args, "scatter", split_cost=1, num_threads=threads)


def _splat_text(t: ET, name: str, kind: str, scalar: str, also_read: bool = False) -> str:
    """CONFIGS[name]'s scatter into a splat: `scalar` a constant literal, or "param" (a
    scalar parameter); `also_read`: the broadcast is also returned (plus one)."""
    dims, idx, udims, uwd, iwd, sdod, ivd, ibd, sibd = CONFIGS[name]
    idx = np.asarray(idx, np.int32)
    text = scatter(t, ET.S32, dims, idx.shape, udims, uwd, iwd, sdod, ivd, kind, ibd, sibd)
    e, tx = MLIR[t], tensor(t, dims)
    src = "%s" if scalar == "param" else "%s0"
    head = f"func.func @main(%s: tensor<{e}>, %i:" if scalar == "param" else \
        "func.func @main(%i:"
    text = text.replace("func.func @main(%x: " + tx + ", %i:", head)
    const = "" if scalar == "param" else \
        f"  %s0 = stablehlo.constant dense<{scalar}> : tensor<{e}>\n"
    text = text.replace("  %0 = \"stablehlo.scatter\"", const +
                        f"  %x = stablehlo.broadcast_in_dim {src}, dims = [] : "
                        f"(tensor<{e}>) -> {tx}\n  %0 = \"stablehlo.scatter\"")
    if also_read:
        text = text.replace(f"-> {tx} {{", f"-> ({tx}, {tx}) {{").replace(
            f"  return %0 : {tx}", f"  %k = stablehlo.add %x, %x : {tx}\n"
                                   f"  return %0, %k : {tx}, {tx}")
    return text


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("kind", ["add", "replace", "maximum"])
@pytest.mark.parametrize("name", ["rows", "windows", "batched"])
def test_scatter_into_a_splat_fills_the_result(t: ET, kind: str, name: str) -> None:
    """jnp.zeros(...).at[i].add(u) (an embedding gradient): the native scatter fills its
    result with the scalar; the broadcast gets no buffer of its own."""
    dims, idx, udims = CONFIGS[name][:3]
    idx = np.asarray(idx, np.int32)
    nan = {ET.F32: "0x7FC00001", ET.F64: "0x7FF8000000000001", ET.F16: "0x7E01",
           ET.BF16: "0x7FC1"}
    for scalar in (["0.0", "-0.0", "-1.5", nan[t]] if t.is_float else ["0", "-7"]):
        text = _splat_text(t, name, kind, scalar)
        exe = xlapy.compile(text, backend="cpu")
        assert "broadcast_in_dim" not in exe._exe.explain()
        check(text, [idx, data(t, udims, 2)], "scatter")
    s = np.asarray(data(t, (1,), 4)[0])
    check(_splat_text(t, name, kind, "param"), [s, idx, data(t, udims, 2)], "scatter")
    check(_splat_text(t, name, kind, "param", also_read=True), [s, idx, data(t, udims, 2)],
          "scatter")


def test_variadic_scatter_with_one_splat_operand() -> None:
    """A scatter-argmax from -inf: the f32 result filled with the splat, the i32 copied."""
    text = VARIADIC.replace("func.func @main(%x: tensor<4xf32>, %y:", "func.func @main(%y:")
    text = text.replace("  %0:2 = ", "  %m = stablehlo.constant dense<0xFF800000> : "
                        "tensor<f32>\n  %x = stablehlo.broadcast_in_dim %m, dims = [] : "
                        "(tensor<f32>) -> tensor<4xf32>\n  %0:2 = ")
    args = [np.full(4, -1, np.int32), np.array([[1], [3], [1], [9], [1]], np.int32),
            np.array([2, 5, 2, 7, 3], np.float32), np.arange(5, dtype=np.int32)]
    got = check(text, args, "scatter")
    np.testing.assert_array_equal(got[0], [-np.inf, 3, -np.inf, 5])
