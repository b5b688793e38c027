# ruff: noqa: E501  (StableHLO programs are kept on one line per op)
"""Index and data-movement ops generated inside cpu kernels (index_emit.py): concatenate, pad,
dynamic_slice, dynamic_update_slice and gather, bit-exact against the interpreter and never
an interpreter fallback."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xlapy
from xlapy.backends.cpu import CpuBackend, lanes
from xlapy.backends.cpu.index_emit import INDEX_OPS
from xlapy.backends.interpreter import InterpreterBackend
from xlapy.ir import Computation, Instruction
from xlapy.ops.indexing import GatherAttrs, GatherDimensionNumbers
from xlapy.ops.shape import ConcatenateAttrs, PadAttrs
from xlapy.ops.shape_dynamic import DynamicSliceAttrs
from xlapy.types import ElementType as ET
from xlapy.types import Shape

from .util import module, op, run_both, values

TYPES = [ET.F32, ET.BF16, ET.F16, ET.F64, ET.S8, ET.U16, ET.S32, ET.U64, ET.PRED]
INDEX_TYPES = [ET.S32, ET.S64, ET.U8, ET.U32, ET.U64, ET.S8]


def _data(t: ET, dims: Sequence[int], seed: int = 0) -> np.ndarray:
    n = int(np.prod(dims))
    v = values(t, max(n, 16), np.random.default_rng(seed))
    return np.random.default_rng(seed).permutation(v)[:n].reshape(dims)


def _check(shapes: Sequence[Shape], args: Sequence[Any],
           body: Callable[[Computation, list[Instruction]], Instruction],
           opcode: str) -> Any:
    """Runs both backends; the results must be equal bit for bit, the op native."""
    mod = module(shapes, body)
    ref, got, exe = run_both(mod, args)
    ref, got = np.asarray(ref), np.asarray(got)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_array_equal(got.reshape(-1).view(np.uint8), ref.reshape(-1).view(np.uint8))
    assert opcode not in {o for _, o in exe.fallbacks()}, exe.explain()
    return exe


def _idx(t: ET, v: int) -> np.ndarray:
    """A start index of type t (negative values of unsigned types wrap, as bits)."""
    return np.asarray(v).astype(np.int64).astype(t.dtype) if t.is_signed else \
        np.asarray(v % (1 << t.bits), dtype=np.uint64).astype(t.dtype)


def test_lane_rules_cover_every_index_op() -> None:
    assert lanes.INDEX_LANES == INDEX_OPS


# ---- concatenate ----
@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("dims,dim", [
    ([(3,), (0,), (5,)], 0), ([(2, 3, 4), (2, 1, 4), (2, 5, 4)], 1),
    ([(4, 9), (4, 17)], 1), ([(1, 3, 8), (2, 3, 8), (3, 3, 8)], 0),
    ([(2, 0), (2, 0)], 1), ([(3, 16)] * 5, 0), ([(16, 2)] * 7, 1)])
def test_concatenate(t: ET, dims: list[tuple[int, ...]], dim: int) -> None:
    shapes = [Shape.array(t, d) for d in dims]
    args = [_data(t, d, k) for k, d in enumerate(dims)]
    _check(shapes, args, lambda c, ps: op(c, "concatenate", ps, ConcatenateAttrs(dim)),
           "concatenate")


def test_concatenate_fuses_with_producers_and_consumers() -> None:
    t = ET.S32
    shapes = [Shape.array(t, (8, 5)), Shape.array(t, (8, 11))]

    def body(c: Computation, ps: list[Instruction]) -> Instruction:
        a = op(c, "negate", [ps[0]])
        cat = op(c, "concatenate", [a, ps[1]], ConcatenateAttrs(1))
        return op(c, "add", [cat, cat])

    exe = _check(shapes, [_data(t, (8, 5)), _data(t, (8, 11), 1)], body, "concatenate")
    assert len(exe.kernels()) == 1


# ---- pad ----
PADS = [((0,), (0,), (0,)), ((2,), (3,), (0,)), ((-1,), (2,), (1,)), ((1,), (-2,), (2,)),
        ((-3,), (-1,), (0,))]


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("lo,hi,inner", PADS)
def test_pad_rank1(t: ET, lo: tuple[int, ...], hi: tuple[int, ...],
                   inner: tuple[int, ...]) -> None:
    shapes = [Shape.array(t, (6,)), Shape.array(t, ())]
    args = [_data(t, (6,)), _data(t, (1,), 3).reshape(())]
    _check(shapes, args, lambda c, ps: op(c, "pad", ps, PadAttrs(lo, hi, inner)), "pad")


@pytest.mark.parametrize("t", [ET.F32, ET.S16, ET.BF16, ET.PRED])
@pytest.mark.parametrize("dims,lo,hi,inner", [
    ((2, 3, 17), (1, 0, 2), (0, 2, 1), (0, 1, 0)),
    ((3, 4, 16), (0, -1, 0), (1, 0, 0), (1, 0, 0)),  # innermost untouched: lanes
    ((3, 4, 16), (0, 0, -2), (0, 0, -3), (0, 0, 0)),  # innermost cropped: lanes
    ((2, 0, 5), (1, 1, 1), (1, 1, 1), (0, 2, 0)),  # empty operand: all padding
    ((4, 5), (-4, 0), (0, 0), (0, 0)),  # empty result
])
def test_pad(t: ET, dims: tuple[int, ...], lo: tuple[int, ...], hi: tuple[int, ...],
             inner: tuple[int, ...]) -> None:
    shapes = [Shape.array(t, dims), Shape.array(t, ())]
    args = [_data(t, dims), _data(t, (1,), 5).reshape(())]
    _check(shapes, args, lambda c, ps: op(c, "pad", ps, PadAttrs(lo, hi, inner)), "pad")


def test_pad_value_from_a_fused_producer() -> None:
    t = ET.F32
    shapes = [Shape.array(t, (5, 7)), Shape.array(t, ())]

    def body(c: Computation, ps: list[Instruction]) -> Instruction:
        v = op(c, "negate", [ps[1]])
        x = op(c, "abs", [ps[0]])
        return op(c, "pad", [x, v], PadAttrs((1, 2), (2, 1), (1, 0)))

    _check(shapes, [_data(t, (5, 7)), np.float32(2.5)], body, "pad")


# ---- dynamic_slice ----
@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("it", INDEX_TYPES)
@pytest.mark.parametrize("starts", [(0, 0), (1, 2), (-3, 5), (100, -100), (2, 1000)])
def test_dynamic_slice(t: ET, it: ET, starts: tuple[int, int]) -> None:
    dims, sizes = (5, 19), (3, 16)
    shapes = [Shape.array(t, dims), Shape.array(it, ()), Shape.array(it, ())]
    args = [_data(t, dims)] + [_idx(it, s) for s in starts]
    _check(shapes, args, lambda c, ps: op(c, "dynamic_slice", ps, DynamicSliceAttrs(sizes)),
           "dynamic_slice")


@pytest.mark.parametrize("dims,sizes,starts", [
    ((), (), ()), ((7,), (0,), (3,)), ((4, 0, 3), (2, 0, 1), (9, 0, -1)),
    ((3, 4, 5), (1, 4, 2), (2, 1, 2)), ((9,), (9,), (4,))])
def test_dynamic_slice_shapes(dims: tuple[int, ...], sizes: tuple[int, ...],
                              starts: tuple[int, ...]) -> None:
    t = ET.S32
    shapes = [Shape.array(t, dims)] + [Shape.array(ET.S32, ())] * len(dims)
    args = [_data(t, dims)] + [np.int32(s) for s in starts]
    _check(shapes, args, lambda c, ps: op(c, "dynamic_slice", ps, DynamicSliceAttrs(sizes)),
           "dynamic_slice")


# ---- dynamic_update_slice ----
@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("it", [ET.S32, ET.U32, ET.S8, ET.U64])
@pytest.mark.parametrize("dims,udims,starts", [
    ((6, 10), (2, 3), (1, 4)), ((6, 10), (2, 3), (-5, 100)), ((6, 16), (1, 16), (3, 7)),
    ((6, 10), (6, 10), (2, 2)), ((6, 10), (0, 3), (1, 1)), ((3, 4, 5), (1, 2, 5), (2, -1, 3))])
def test_dynamic_update_slice(t: ET, it: ET, dims: tuple[int, ...], udims: tuple[int, ...],
                              starts: tuple[int, ...]) -> None:
    shapes = [Shape.array(t, dims), Shape.array(t, udims)] + \
        [Shape.array(it, ())] * len(dims)
    args = [_data(t, dims), _data(t, udims, 1)] + [_idx(it, s) for s in starts]
    _check(shapes, args, lambda c, ps: op(c, "dynamic_update_slice", ps),
           "dynamic_update_slice")


def test_dynamic_update_slice_rank0() -> None:
    t = ET.F32
    shapes = [Shape.array(t, ()), Shape.array(t, ())]
    _check(shapes, [np.float32(1), np.float32(2)],
           lambda c, ps: op(c, "dynamic_update_slice", ps), "dynamic_update_slice")


# ---- gather ----
def _gather(offset: Sequence[int], collapsed: Sequence[int], sim: Sequence[int], ivd: int,
            sizes: Sequence[int], obd: Sequence[int] = (), sibd: Sequence[int] = ()
            ) -> GatherAttrs:
    return GatherAttrs(GatherDimensionNumbers(tuple(offset), tuple(collapsed), tuple(sim), ivd,
                                              tuple(obd), tuple(sibd)), tuple(sizes))


GATHERS = {
    # x[idx] on x: [8, 5], idx: [6] (JAX: indices [6, 1])
    "x[idx]": ((8, 5), (6, 1), _gather((1,), (0,), (0,), 1, (1, 5))),
    # x[:, idx] on x: [4, 9], idx [3, 1]
    "x[:, idx]": ((4, 9), (3, 1), _gather((0,), (1,), (1,), 1, (4, 1))),
    # take_along_axis(x, idx, axis=1) on x: [4, 6], idx: [4, 3] (batching dims)
    "take_along_axis": ((4, 6), (4, 3, 1), _gather((), (1,), (1,), 2, (1, 1), (0,), (0,))),
    # x[i, j] with i, j: [5] -> index vectors [5, 2]
    "x[i, j]": ((6, 7, 3), (5, 2), _gather((1,), (0, 1), (0, 1), 1, (1, 1, 3))),
    # index_vector_dim not last, windows of 2 along the gathered dim
    "windows": ((10, 4), (1, 3), _gather((1, 2), (), (0,), 0, (2, 4))),
    # a scalar index (rank-0 start_indices, index_vector_dim = rank)
    "scalar": ((7, 3), (), _gather((0,), (0,), (0,), 0, (1, 3))),
    # batching dims on an operand of rank 3 with an index vector along the middle dim
    "batched": ((3, 5, 4), (3, 1, 2), _gather((2,), (1,), (1,), 1, (1, 1, 2), (0,), (0,))),
    # zero-size collapsed slice: zeros
    "zero": ((0, 4), (3, 1), _gather((1,), (0,), (0,), 1, (0, 4))),
    # empty batch
    "empty": ((5, 4), (0, 1), _gather((1,), (0,), (0,), 1, (1, 4))),
}


@pytest.mark.parametrize("name", sorted(GATHERS))
@pytest.mark.parametrize("t", [ET.F32, ET.S8, ET.BF16, ET.PRED, ET.U64])
@pytest.mark.parametrize("it", [ET.S32, ET.U32, ET.S64, ET.U8, ET.U64])
def test_gather(name: str, t: ET, it: ET) -> None:
    dims, idims, attrs = GATHERS[name]
    rng = np.random.default_rng(7)
    bound = max(dims) + 3
    raw = rng.integers(-bound, 2 * bound, size=idims)
    if raw.size:
        raw.flat[0] = -(1 << 40) if it.is_signed else 1 << 62  # clamps
    idx = raw.astype(np.int64).astype(it.dtype) if it.is_signed else \
        (raw % (1 << min(it.bits, 62))).astype(it.dtype)
    shapes = [Shape.array(t, dims), Shape.array(it, idims)]
    _check(shapes, [_data(t, dims), idx], lambda c, ps: op(c, "gather", ps, attrs), "gather")


@pytest.mark.parametrize("it", [ET.S8, ET.U8, ET.S16, ET.U16, ET.S32, ET.U32])
@pytest.mark.parametrize("rows", [300, 100])
def test_gather_clamps_narrow_indices_in_their_own_width(it: ET, rows: int) -> None:
    """Starts narrower than 64 bits clamp in their own width (index_emit.clamp_start): a
    dimension longer than the type's largest value (u8 / s8 into 300 rows) clamps only
    below; 64 lanes of them through the vector gather; every value of the type's range."""
    info = np.iinfo(it.dtype)
    raw = np.random.default_rng(3).integers(int(info.min), int(info.max) + 1, size=(64, 1),
                                            dtype=np.int64)
    raw[:6, 0] = [info.min, info.max, 0, rows - 1, rows, -1 if info.min < 0 else 1]
    dims = (rows, 2)
    shapes = [Shape.array(ET.F32, dims), Shape.array(it, (64, 1))]
    attrs = _gather((1,), (0,), (0,), 1, (1, 2))
    _check(shapes, [_data(ET.F32, dims), raw.astype(it.dtype)],
           lambda c, ps: op(c, "gather", ps, attrs), "gather")


def test_gather_of_a_fused_operand() -> None:
    t = ET.F32
    dims, idims, attrs = GATHERS["x[idx]"]
    shapes = [Shape.array(t, dims), Shape.array(ET.S32, idims)]

    def body(c: Computation, ps: list[Instruction]) -> Instruction:
        return op(c, "gather", [op(c, "negate", [ps[0]]), ps[1]], attrs)

    idx = np.array([[3], [0], [7], [9], [-2], [4]], dtype=np.int32)
    _check(shapes, [_data(t, dims), idx], body, "gather")


# ---- properties ----
@settings(max_examples=40, deadline=None)
@given(st.data())
def test_pad_concatenate_dynamic_slice_property(data: st.DataObject) -> None:
    rank = data.draw(st.integers(1, 3))
    dims = tuple(data.draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank)))
    t = data.draw(st.sampled_from([ET.F32, ET.S8, ET.U32, ET.BF16]))
    kind = data.draw(st.sampled_from(["pad", "concatenate", "dynamic_slice"]))
    x = _data(t, dims, data.draw(st.integers(0, 9)))
    if kind == "pad":
        lo = tuple(data.draw(st.integers(-d, 3)) for d in dims)
        inner = tuple(data.draw(st.integers(0, 2)) for _ in dims)
        hi = tuple(data.draw(st.integers(
            -max(d + max(d - 1, 0) * n + a, 0), 3)) for d, n, a in zip(dims, inner, lo))
        shapes = [Shape.array(t, dims), Shape.array(t, ())]
        _check(shapes, [x, _data(t, (1,), 1).reshape(())],
               lambda c, ps: op(c, "pad", ps, PadAttrs(lo, hi, inner)), "pad")
    elif kind == "concatenate":
        dim = data.draw(st.integers(0, rank - 1))
        n = data.draw(st.integers(1, 4))
        parts = [tuple(data.draw(st.integers(0, 4)) if k == dim else d
                       for k, d in enumerate(dims)) for _ in range(n)]
        shapes = [Shape.array(t, p) for p in parts]
        _check(shapes, [_data(t, p, k) for k, p in enumerate(parts)],
               lambda c, ps: op(c, "concatenate", ps, ConcatenateAttrs(dim)), "concatenate")
    else:
        sizes = tuple(data.draw(st.integers(0, d)) for d in dims)
        starts = [np.int32(data.draw(st.integers(-8, 8))) for _ in dims]
        shapes = [Shape.array(t, dims)] + [Shape.array(ET.S32, ())] * rank
        _check(shapes, [x] + starts,
               lambda c, ps: op(c, "dynamic_slice", ps, DynamicSliceAttrs(sizes)),
               "dynamic_slice")


# ---- segmented roots (the innermost loop split where the op changes course) ----
def _check_split(shapes: Sequence[Shape], args: Sequence[Any],
                 body: Callable[[Computation, list[Instruction]], Instruction],
                 opcode: str, threads: int = 2) -> Any:
    """Like _check, compiled for `threads` threads (big kernels split their outer loop)."""
    mod = module(shapes, body)
    ref = InterpreterBackend().compile(mod).run(list(args))
    exe = CpuBackend().compile(mod, {"num_threads": threads})
    got = exe.run(list(args))
    np.testing.assert_array_equal(np.asarray(got).reshape(-1).view(np.uint8),
                                  np.asarray(ref).reshape(-1).view(np.uint8))
    assert opcode not in {o for _, o in exe.fallbacks()}, exe.explain()
    return exe


@pytest.mark.parametrize("threads", [1, 2])
def test_segmented_concatenate_rank1_split_across_threads(threads: int) -> None:
    t = ET.F32
    dims = [(300001,), (5,), (262147,)]
    shapes = [Shape.array(t, d) for d in dims]
    args = [_data(t, d, k) for k, d in enumerate(dims)]

    def body(c: Computation, ps: list[Instruction]) -> Instruction:
        return op(c, "concatenate", [ps[0], ps[1], ps[0], ps[2]], ConcatenateAttrs(0))

    exe = _check_split(shapes, args, body, "concatenate", threads)
    assert exe.kernel_specs[0].splittable


@pytest.mark.parametrize("lo,hi", [(3, -5), (-7, 9), (0, 4), (5, 0)])
def test_segmented_pad_rank1_split_across_threads(lo: int, hi: int) -> None:
    t = ET.S16
    shapes = [Shape.array(t, (600003,)), Shape.array(t, ())]
    args = [_data(t, (600003,)), np.int16(-9)]
    _check_split(shapes, args, lambda c, ps: op(c, "pad", ps, PadAttrs((lo,), (hi,), (0,))),
                 "pad")


@pytest.mark.parametrize("start", [-5, 0, 10, 599000, 10 ** 9])
def test_segmented_dynamic_update_slice_rank1(start: int) -> None:
    t = ET.F64
    shapes = [Shape.array(t, (600001,)), Shape.array(t, (1001,)), Shape.array(ET.S32, ())]
    args = [_data(t, (600001,)), _data(t, (1001,), 1), np.int32(start)]
    _check_split(shapes, args, lambda c, ps: op(c, "dynamic_update_slice", ps),
                 "dynamic_update_slice")


def test_segmented_roots_run_in_lanes() -> None:
    """Concatenate/pad/dynamic_update_slice along the innermost dimension at a kernel's root:
    one loop per segment, in explicit vectors."""
    t = ET.F32
    shapes = [Shape.array(t, (16, 64)), Shape.array(t, (16, 37)), Shape.array(t, ()),
              Shape.array(ET.S32, ())]
    args = [_data(t, (16, 64)), _data(t, (16, 37), 1), np.float32(7), np.int32(9)]

    def body(c: Computation, ps: list[Instruction]) -> list[Instruction]:
        x, y, v, i = ps
        cat = op(c, "concatenate", [x, y, x], ConcatenateAttrs(1))
        pad = op(c, "pad", [x, v], PadAttrs((1, 3), (2, 5), (0, 0)))
        dus = op(c, "dynamic_update_slice", [x, y, i, i])
        return [cat, pad, dus]

    mod = module(shapes, body)
    ref, got, exe = run_both(mod, args)
    for r, g in zip(ref, got):
        np.testing.assert_array_equal(g, r)
    assert not exe.fallbacks()
    assert len(exe.kernel_specs) == 3 and all(k.explicit for k in exe.kernel_specs)
    assert all(k.align == 1 for k in exe.kernel_specs)


def test_segmented_concatenate_big_result() -> None:
    """A result of >= 8 MiB (stored non-temporally elsewhere): segments start unaligned, so
    they store normally."""
    t = ET.F32
    shapes = [Shape.array(t, (1024, 1021)), Shape.array(t, (1024, 1027))]
    args = [_data(t, (1024, 1021)), _data(t, (1024, 1027), 1)]
    _check_split(shapes, args, lambda c, ps: op(c, "concatenate", ps, ConcatenateAttrs(1)),
                 "concatenate")


# ---- native while loops ----
#: jax.lax.scan(lambda c, x: (c + x, c * x), zeros(2), xs) as JAX lowers it: the body reads
#: xs[i] (dynamic_slice), calls a two-result function, writes ys[i] (dynamic_update_slice).
SCAN = """
func.func public @main(%arg0: tensor<6x2xf32>) -> (tensor<2xf32>, tensor<6x2xf32>) {
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<2xf32>
  %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %0 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<6x2xf32>
  %c = stablehlo.constant dense<0> : tensor<i64>
  %1:4 = stablehlo.while(%iterArg = %arg0, %iterArg_1 = %c, %iterArg_2 = %cst, %iterArg_3 = %0) : tensor<6x2xf32>, tensor<i64>, tensor<2xf32>, tensor<6x2xf32>
  cond {
    %c_4 = stablehlo.constant dense<6> : tensor<i64>
    %2 = stablehlo.compare LT, %iterArg_1, %c_4, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %2 : tensor<i1>
  } do {
    %2 = func.call @dynamic_index_in_dim(%iterArg, %iterArg_1) : (tensor<6x2xf32>, tensor<i64>) -> tensor<2xf32>
    %3:2 = func.call @closed_call(%iterArg_2, %2) : (tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
    %4 = func.call @dynamic_update_index_in_dim(%iterArg_3, %3#1, %iterArg_1) : (tensor<6x2xf32>, tensor<2xf32>, tensor<i64>) -> tensor<6x2xf32>
    %c_4 = stablehlo.constant dense<1> : tensor<i64>
    %5 = stablehlo.add %iterArg_1, %c_4 : tensor<i64>
    stablehlo.return %iterArg, %5, %3#0, %4 : tensor<6x2xf32>, tensor<i64>, tensor<2xf32>, tensor<6x2xf32>
  }
  return %1#2, %1#3 : tensor<2xf32>, tensor<6x2xf32>
}
func.func private @dynamic_index_in_dim(%arg0: tensor<6x2xf32>, %arg1: tensor<i64>) -> tensor<2xf32> {
  %c = stablehlo.constant dense<0> : tensor<i64>
  %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, sizes = [1, 2] : (tensor<6x2xf32>, tensor<i64>, tensor<i64>) -> tensor<1x2xf32>
  %1 = stablehlo.reshape %0 : (tensor<1x2xf32>) -> tensor<2xf32>
  return %1 : tensor<2xf32>
}
func.func private @closed_call(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %0 = stablehlo.add %arg0, %arg1 : tensor<2xf32>
  %1 = stablehlo.multiply %arg0, %arg1 : tensor<2xf32>
  return %0, %1 : tensor<2xf32>, tensor<2xf32>
}
func.func private @dynamic_update_index_in_dim(%arg0: tensor<6x2xf32>, %arg1: tensor<2xf32>, %arg2: tensor<i64>) -> tensor<6x2xf32> {
  %0 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<2xf32>) -> tensor<1x2xf32>
  %c = stablehlo.constant dense<0> : tensor<i64>
  %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c : (tensor<6x2xf32>, tensor<1x2xf32>, tensor<i64>, tensor<i64>) -> tensor<6x2xf32>
  return %1 : tensor<6x2xf32>
}
"""


def test_scan_with_dynamic_slices_is_a_native_while_loop() -> None:
    """Every op of the scan body is a kernel once the two-result call is inlined, so the
    whole loop runs natively."""
    cpu = xlapy.compile(SCAN, backend="cpu")
    assert "native while loop" in cpu._exe.explain()
    assert not cpu._exe.fallbacks()
    xs = (np.arange(12, dtype=np.float32).reshape(6, 2) - 5) / 4
    want = xlapy.compile(SCAN, backend="interpreter")(xs)
    for g, w in zip(cpu(xs), want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("t", [ET.F32, ET.BF16, ET.S8, ET.F64])
def test_gather_along_offset_dims_runs_in_lanes(t: ET) -> None:
    """x[idx] and x[:, :, idx]-like windows: the lane runs along an offset dimension, the
    starts (read at the batch position) are uniform."""
    dims = (23, 3, 67)
    rows = _gather((1, 2), (0,), (0,), 1, (1, 2, 67))
    win = _gather((0, 1, 2), (), (0, 2), 0, (2, 3, 40))
    for attrs, idims, raw in [(rows, (20, 1), np.arange(-3, 37, 2).reshape(20, 1)),
                              (win, (2,), np.array([21, 99]))]:
        shapes = [Shape.array(t, dims), Shape.array(ET.S32, idims)]
        exe = _check(shapes, [_data(t, dims), raw.astype(np.int32)],
                     lambda c, ps, attrs=attrs: op(c, "gather", ps, attrs), "gather")
        assert exe.kernel_specs[0].explicit


# ---- dynamic_iota ----
DYNAMIC_IOTA = """
func.func @main(%x: tensor<3x17xi32>) -> tensor<3x17xi32> {
  %shape = stablehlo.constant dense<[3, 17]> : tensor<2xi64>
  %0 = stablehlo.dynamic_iota %shape, dim = DIM : (tensor<2xi64>) -> tensor<3x17xi32>
  %1 = stablehlo.add %0, %x : tensor<3x17xi32>
  return %1 : tensor<3x17xi32>
}
"""


@pytest.mark.parametrize("dim", [0, 1])
def test_dynamic_iota_of_a_constant_shape_is_an_iota(dim: int) -> None:
    text = DYNAMIC_IOTA.replace("DIM", str(dim))
    cpu = xlapy.compile(text, backend="cpu")
    assert not cpu._exe.fallbacks() and len(cpu._exe.kernel_specs) == 1
    x = np.arange(51, dtype=np.int32).reshape(3, 17) * 7
    np.testing.assert_array_equal(cpu(x), xlapy.compile(text, backend="interpreter")(x))


def test_dynamic_iota_of_a_run_time_shape_stays_on_the_interpreter() -> None:
    """Its shape check ("dynamic shape not supported") is the interpreter's."""
    text = """
func.func @main(%s: tensor<1xi64>) -> tensor<4xi32> {
  %0 = stablehlo.dynamic_iota %s, dim = 0 : (tensor<1xi64>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}
"""
    cpu = xlapy.compile(text, backend="cpu")
    assert [o for _, o in cpu._exe.fallbacks()] == ["dynamic_iota"]
    np.testing.assert_array_equal(cpu(np.array([4])), np.arange(4, dtype=np.int32))
    with pytest.raises(xlapy.errors.XlapyError, match="dynamic shape"):
        cpu(np.array([5]))


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("t", [ET.F32, ET.U8, ET.BF16])
def test_concatenate_of_many_operands(dim: int, t: ET) -> None:
    """More operands than MAX_SEGMENTS: one load through tables when all are buffers (a
    repeated one and empty ones included), else the branch tree."""
    sizes = [(k * 7) % 5 for k in range(40)]
    dims = [tuple(n if j == dim else (3, 4, 17)[j] for j in range(3)) for n in sizes]
    shapes = [Shape.array(t, d) for d in dims]
    args = [_data(t, d, k) for k, d in enumerate(dims)]

    def leaves(c: Computation, ps: list[Instruction]) -> Instruction:
        return op(c, "concatenate", ps + [ps[1]], ConcatenateAttrs(dim))

    def fused(c: Computation, ps: list[Instruction]) -> Instruction:
        return op(c, "concatenate", [op(c, "negate", [ps[1]])] + ps, ConcatenateAttrs(dim))

    _check(shapes, args, leaves, "concatenate")
    if t is not ET.U8:
        _check(shapes, args, fused, "concatenate")


def test_concatenate_of_many_operands_uses_tables() -> None:
    """Past 16 operands a concatenate loads through constant tables (slot, offset per
    operand: 16 bytes each) instead of a branch per operand (10 s to compile 1000 operands);
    measured by the object's growth, not by a timing."""

    def size(n: int) -> int:
        shapes = [Shape.array(ET.F32, (3,))] * n
        args = [np.full(3, k, np.float32) for k in range(n)]
        exe = _check(shapes, args, lambda c, ps: op(c, "concatenate", ps, ConcatenateAttrs(0)),
                     "concatenate")
        return sum(len(obj) for _, obj in exe.all_objects())

    assert size(1000) - size(100) < 24 * 900
