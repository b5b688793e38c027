"""Indexing ops: gather (here) and scatter (`indexing_scatter`), with batching dimensions.

Both ops map an index vector (one per batch position of the index tensor) plus a window offset
to an operand index. Evaluation computes every index vector at once with numpy; out-of-bounds
starts follow XLA: gather clamps the start so the whole slice fits, scatter drops the whole
update window when any part of it would fall outside the operand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.base import EvalContext, OpDef, Region, check, register
from xlapy.types import Shape


@dataclass(frozen=True)
class GatherDimensionNumbers:
    """stablehlo `#stablehlo.gather<...>`: how start indices and slices map to the result."""

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    index_vector_dim: int
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


@dataclass(frozen=True)
class GatherAttrs:
    dimension_numbers: GatherDimensionNumbers
    slice_sizes: tuple[int, ...]
    indices_are_sorted: bool = False


# ---- helpers shared with scatter -------------------------------------------------------------
def is_sorted_unique(dims: Sequence[int]) -> bool:
    return all(a < b for a, b in zip(dims, dims[1:]))


def is_unique(dims: Sequence[int]) -> bool:
    return len(set(dims)) == len(dims)


def in_range(dims: Sequence[int], bound: int) -> bool:
    return all(0 <= d < bound for d in dims)


def batch_dims_of_indices(rank: int, index_vector_dim: int) -> list[int]:
    """The index tensor's dimensions other than `index_vector_dim`, in order."""
    return [d for d in range(rank) if d != index_vector_dim]


def index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """The index tensor as int64 `batch_shape + (K,)`; huge u64 values saturate (stay OOB)."""
    if indices.dtype == np.uint64:
        indices = np.minimum(indices, np.uint64(np.iinfo(np.int64).max))
    idx = indices.astype(np.int64)
    if index_vector_dim == idx.ndim:
        return idx[..., None]
    return np.moveaxis(idx, index_vector_dim, -1)


def batch_iota(batch_shape: tuple[int, ...], axis: int) -> np.ndarray:
    """Positions along batch axis `axis`, shaped to broadcast against `batch_shape`."""
    shape = [1] * len(batch_shape)
    shape[axis] = batch_shape[axis]
    return np.arange(batch_shape[axis], dtype=np.int64).reshape(shape)


def batching_axis(indices_dim: int, index_vector_dim: int) -> int:
    """Batch-shape axis of index-tensor dimension `indices_dim` (index_vector_dim removed)."""
    return indices_dim if indices_dim < index_vector_dim else indices_dim - 1


def window_index_arrays(starts: Sequence[np.ndarray], sizes: Sequence[int],
                        batch_rank: int) -> tuple[np.ndarray, ...]:
    """Per operand dim d: start[d] + arange(sizes[d]), broadcastable to batch + sizes."""
    rank = len(sizes)
    out = []
    for d, (s, n) in enumerate(zip(starts, sizes)):
        s = np.asarray(s, dtype=np.int64)
        s = s.reshape(s.shape + (1,) * (batch_rank - s.ndim + rank)) if s.ndim else \
            s.reshape((1,) * (batch_rank + rank))
        offs = np.arange(n, dtype=np.int64).reshape(
            (1,) * batch_rank + tuple(n if i == d else 1 for i in range(rank)))
        out.append(s + offs)
    return tuple(out)


def _check_index_type(shape: Shape, label: str, what: str) -> None:
    check(shape.is_array and shape.element_type.is_integer, label,
          f"{what} must be a tensor of integer type, got {shape}")


# ---- gather -----------------------------------------------------------------------------------
@register
class Gather(OpDef):
    """stablehlo.gather: spec §gather (with batching dims); XLA Gather."""

    name = "gather"
    arity = 2
    attrs = GatherAttrs
    family = "indexing"

    def infer(self, operands: Sequence[Shape], attrs: GatherAttrs,
              regions: Sequence[Region]) -> Shape:
        operand, start = operands
        check(operand.is_array, "gather_i1", f"operand must be a tensor, got {operand}")
        _check_index_type(start, "gather_i2", "start_indices")
        dn = attrs.dimension_numbers
        ivd, sizes = dn.index_vector_dim, tuple(attrs.slice_sizes)
        offset, collapsed = tuple(dn.offset_dims), tuple(dn.collapsed_slice_dims)
        obd, sibd = tuple(dn.operand_batching_dims), tuple(dn.start_indices_batching_dims)
        sim = tuple(dn.start_index_map)
        rank, srank = operand.rank, start.rank
        check(0 <= ivd <= srank, "gather_c2",
              f"index_vector_dim {ivd} is out of range [0, {srank}]")
        vec = start.dimensions[ivd] if ivd < srank else 1
        check(len(sim) == vec, "gather_c3",
              f"start_index_map {list(sim)} has {len(sim)} entries but the index vector has "
              f"{vec}")
        check(is_sorted_unique(offset), "gather_c4",
              f"offset_dims {list(offset)} must be unique and sorted")
        check(is_unique(collapsed + obd), "gather_c6",
              f"collapsed_slice_dims {list(collapsed)} and operand_batching_dims {list(obd)} "
              "must be unique together")
        check(is_sorted_unique(collapsed), "gather_c7",
              f"collapsed_slice_dims {list(collapsed)} must be sorted")
        check(in_range(collapsed, rank), "gather_c8",
              f"collapsed_slice_dims {list(collapsed)} out of range for operand rank {rank}")
        check(is_sorted_unique(obd), "gather_c10",
              f"operand_batching_dims {list(obd)} must be sorted")
        check(in_range(obd, rank), "gather_c11",
              f"operand_batching_dims {list(obd)} out of range for operand rank {rank}")
        check(is_unique(sibd), "gather_c13",
              f"start_indices_batching_dims {list(sibd)} has duplicates")
        check(in_range(sibd, srank), "gather_c14",
              f"start_indices_batching_dims {list(sibd)} out of range for start_indices rank "
              f"{srank}")
        check(ivd not in sibd, "gather_c15",
              f"index_vector_dim {ivd} is in start_indices_batching_dims {list(sibd)}")
        check(len(obd) == len(sibd), "gather_c16",
              f"operand_batching_dims {list(obd)} and start_indices_batching_dims "
              f"{list(sibd)} differ in size")
        check(is_unique(sim + obd), "gather_c18",
              f"start_index_map {list(sim)} and operand_batching_dims {list(obd)} must be "
              "unique together")
        check(in_range(sim, rank), "gather_c19",
              f"start_index_map {list(sim)} out of range for operand rank {rank}")
        check(len(sizes) == rank, "gather_c20",
              f"slice_sizes {list(sizes)} has {len(sizes)} entries, operand rank is {rank}")
        check(rank == len(offset) + len(collapsed) + len(obd), "gather_c1",
              f"operand rank {rank} != size(offset_dims) {len(offset)} + "
              f"size(collapsed_slice_dims) {len(collapsed)} + size(operand_batching_dims) "
              f"{len(obd)}")
        for d in collapsed:
            check(sizes[d] <= 1, "gather_c9",
                  f"slice_sizes[{d}] = {sizes[d]} must be <= 1 for collapsed dimension {d}")
        for d in obd:
            check(sizes[d] <= 1, "gather_c12",
                  f"slice_sizes[{d}] = {sizes[d]} must be <= 1 for batching dimension {d}")
        for o, s in zip(obd, sibd):
            check(operand.dimensions[o] == start.dimensions[s], "gather_c17",
                  f"operand dimension {o} (size {operand.dimensions[o]}) and start_indices "
                  f"dimension {s} (size {start.dimensions[s]}) must have equal sizes")
        for d, n in enumerate(sizes):
            check(0 <= n <= operand.dimensions[d], "gather_c21",
                  f"slice_sizes[{d}] = {n} is out of range [0, {operand.dimensions[d]}]")
        batch = [start.dimensions[d] for d in batch_dims_of_indices(srank, ivd)]
        offset_sizes = [n for d, n in enumerate(sizes) if d not in collapsed and d not in obd]
        result_rank = len(batch) + len(offset_sizes)
        check(in_range(offset, result_rank), "gather_c5",
              f"offset_dims {list(offset)} out of range for result rank {result_rank}")
        dims: list[int] = []
        b_iter, o_iter = iter(batch), iter(offset_sizes)
        for r in range(result_rank):
            dims.append(next(o_iter) if r in offset else next(b_iter))
        return Shape.array(operand.element_type, dims)

    def evaluate(self, operands: Sequence[Any], attrs: GatherAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        operand, start = operands
        dn = attrs.dimension_numbers
        sizes = tuple(attrs.slice_sizes)
        dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
        if result.num_elements == 0 or any(sizes[d] == 0 for d in dropped):
            # Nothing to read (a zero-size collapsed slice has no defined value: zeros).
            return np.zeros(result.dimensions, dtype=result.dtype)
        idx = index_vectors(start, dn.index_vector_dim)
        batch_shape = idx.shape[:-1]
        nb = len(batch_shape)
        starts: list[Any] = [0] * operand.ndim
        for k, d in enumerate(dn.start_index_map):
            # XLA clamps the start so that the whole slice lies inside the operand.
            starts[d] = np.clip(idx[..., k], 0, operand.shape[d] - sizes[d])
        for o, s in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
            starts[o] = batch_iota(batch_shape, batching_axis(s, dn.index_vector_dim))
        gathered = operand[window_index_arrays(starts, sizes, nb)]
        gathered = np.broadcast_to(gathered, batch_shape + sizes)
        offset_sizes = tuple(n for d, n in enumerate(sizes) if d not in dropped)
        arr = gathered.reshape(batch_shape + offset_sizes)
        perm, b = [], 0
        for r in range(result.rank):
            if r in dn.offset_dims:
                perm.append(nb + dn.offset_dims.index(r))
            else:
                perm.append(b)
                b += 1
        return np.transpose(arr, perm).copy(order="C")


from xlapy.ops import indexing_scatter  # noqa: E402,F401  (registers scatter)
