"""stablehlo.scatter: variadic scatter with batching dims and XLA's drop-out-of-bounds rule.

Evaluation computes every target index at once; common update computations (add, multiply,
max, min, and, or, xor, subtract, replace, keep) are recognized from the region's root. Updates
are applied in the order XLA's CPU backend applies them (scatter positions in row-major order,
then window positions): integers and booleans with numpy's unbuffered `ufunc.at`; floats and
complex in rounds of distinct targets through the registered element-wise op, so denormal
flushing, signed zeros and NaNs follow that op exactly. Any other update computation is
called per update element, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy import denormal
from xlapy.ops.base import NO_ATTRS, EvalContext, OpDef, Region, check, get_op, register
from xlapy.ops.indexing import (
    _check_index_type,
    batch_dims_of_indices,
    batch_iota,
    batching_axis,
    in_range,
    index_vectors,
    is_sorted_unique,
    is_unique,
    window_index_arrays,
)
from xlapy.types import Shape, from_dtype


@dataclass(frozen=True)
class ScatterDimensionNumbers:
    """stablehlo `#stablehlo.scatter<...>`: how indices and update windows map to inputs."""

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    index_vector_dim: int
    input_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


@dataclass(frozen=True)
class ScatterAttrs:
    scatter_dimension_numbers: ScatterDimensionNumbers
    indices_are_sorted: bool = False
    unique_indices: bool = False


@register
class Scatter(OpDef):
    """stablehlo.scatter: spec §scatter (with batching dims); XLA Scatter (variadic).

    Operands are `inputs..., scatter_indices, updates...`; the result is the bare shape for
    one input and a tuple for several.
    """

    name = "scatter"
    attrs = ScatterAttrs
    num_regions = 1
    family = "indexing"

    def infer(self, operands: Sequence[Shape], attrs: ScatterAttrs,
              regions: Sequence[Region]) -> Shape:
        check(len(operands) >= 3 and len(operands) % 2 == 1, "scatter_c5",
              f"expects N >= 1 inputs, one scatter_indices and N updates; got "
              f"{len(operands)} operands")
        n = (len(operands) - 1) // 2
        inputs, indices, updates = operands[:n], operands[n], operands[n + 1:]
        for i, s in enumerate(inputs):
            check(s.is_array, "scatter_i1", f"input {i} must be a tensor, got {s}")
        for i, s in enumerate(updates):
            check(s.is_array, "scatter_i3", f"update {i} must be a tensor, got {s}")
        _check_index_type(indices, "scatter_i2", "scatter_indices")
        first, upd0 = inputs[0], updates[0]
        check(all(s.dimensions == first.dimensions for s in inputs), "scatter_c1",
              "all inputs must have the same shape")
        check(all(s.dimensions == upd0.dimensions for s in updates), "scatter_c3",
              "all updates must have the same shape")
        for k, (i, u) in enumerate(zip(inputs, updates)):
            check(i.element_type == u.element_type, "scatter_c6",
                  f"updates[{k}] has element type {u.element_type} but inputs[{k}] has "
                  f"{i.element_type}")
        dn = attrs.scatter_dimension_numbers
        uwd, iwd = tuple(dn.update_window_dims), tuple(dn.inserted_window_dims)
        ibd, sibd = tuple(dn.input_batching_dims), tuple(dn.scatter_indices_batching_dims)
        sdod, ivd = tuple(dn.scatter_dims_to_operand_dims), dn.index_vector_dim
        rank, srank, urank = first.rank, indices.rank, upd0.rank
        check(0 <= ivd <= srank, "scatter_c22",
              f"index_vector_dim {ivd} is out of range [0, {srank}]")
        check(is_sorted_unique(uwd), "scatter_c7",
              f"update_window_dims {list(uwd)} must be unique and sorted")
        check(in_range(uwd, urank), "scatter_c8",
              f"update_window_dims {list(uwd)} out of range for updates rank {urank}")
        check(is_unique(iwd + ibd), "scatter_c9",
              f"inserted_window_dims {list(iwd)} and input_batching_dims {list(ibd)} must be "
              "unique together")
        check(is_sorted_unique(iwd), "scatter_c10",
              f"inserted_window_dims {list(iwd)} must be sorted")
        check(in_range(iwd, rank), "scatter_c11",
              f"inserted_window_dims {list(iwd)} out of range for input rank {rank}")
        check(is_sorted_unique(ibd), "scatter_c12",
              f"input_batching_dims {list(ibd)} must be sorted")
        check(in_range(ibd, rank), "scatter_c13",
              f"input_batching_dims {list(ibd)} out of range for input rank {rank}")
        check(is_unique(sibd), "scatter_c14",
              f"scatter_indices_batching_dims {list(sibd)} has duplicates")
        check(in_range(sibd, srank), "scatter_c15",
              f"scatter_indices_batching_dims {list(sibd)} out of range for scatter_indices "
              f"rank {srank}")
        check(ivd not in sibd, "scatter_c16",
              f"index_vector_dim {ivd} is in scatter_indices_batching_dims {list(sibd)}")
        check(len(ibd) == len(sibd), "scatter_c17",
              f"input_batching_dims {list(ibd)} and scatter_indices_batching_dims "
              f"{list(sibd)} differ in size")
        for o, s in zip(ibd, sibd):
            check(first.dimensions[o] == indices.dimensions[s], "scatter_c18",
                  f"input dimension {o} (size {first.dimensions[o]}) and scatter_indices "
                  f"dimension {s} (size {indices.dimensions[s]}) must have equal sizes")
        vec = indices.dimensions[ivd] if ivd < srank else 1
        check(len(sdod) == vec, "scatter_c19",
              f"scatter_dims_to_operand_dims {list(sdod)} has {len(sdod)} entries but the "
              f"index vector has {vec}")
        check(is_unique(sdod + ibd), "scatter_c20",
              f"scatter_dims_to_operand_dims {list(sdod)} and input_batching_dims "
              f"{list(ibd)} must be unique together")
        check(in_range(sdod, rank), "scatter_c21",
              f"scatter_dims_to_operand_dims {list(sdod)} out of range for input rank {rank}")
        check(rank == len(uwd) + len(iwd) + len(ibd), "scatter_c2",
              f"input rank {rank} != size(update_window_dims) {len(uwd)} + "
              f"size(inserted_window_dims) {len(iwd)} + size(input_batching_dims) {len(ibd)}")
        _check_update_shape(first, indices, upd0, uwd, iwd, ibd, ivd)
        _check_region(regions[0], inputs)
        return inputs[0] if n == 1 else Shape.tuple(list(inputs))

    def evaluate(self, operands: Sequence[Any], attrs: ScatterAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        n = (len(operands) - 1) // 2
        inputs, indices, updates = operands[:n], operands[n], operands[n + 1:]
        outs = [np.array(x, copy=True) for x in inputs]
        targets, values = _scatter_targets(inputs[0].shape, indices, updates,
                                           attrs.scatter_dimension_numbers)
        if targets.size:
            kinds = _combiner_kinds(ctx, n)
            flat = [o.reshape(-1) for o in outs]  # views: outs are fresh contiguous copies
            if kinds is not None:
                for k in range(n):
                    _apply_fast(kinds[k], flat[k], targets, values[k], ctx)
            else:
                _apply_region(ctx, flat, targets, values)
        return outs[0] if n == 1 else tuple(outs)


def _check_update_shape(first: Shape, indices: Shape, upd0: Shape, uwd: tuple[int, ...],
                        iwd: tuple[int, ...], ibd: tuple[int, ...], ivd: int) -> None:
    """(C4): updates = scatter batch dims at update_scatter_dims + windows <= input dims."""
    scatter_sizes = [indices.dimensions[d] for d in batch_dims_of_indices(indices.rank, ivd)]
    check(upd0.rank == len(scatter_sizes) + len(uwd), "scatter_c4",
          f"updates rank {upd0.rank} != {len(scatter_sizes)} scatter dims + {len(uwd)} "
          "update_window_dims")
    usd = [d for d in range(upd0.rank) if d not in uwd]
    for k, d in enumerate(usd):
        check(upd0.dimensions[d] == scatter_sizes[k], "scatter_c4",
              f"updates dimension {d} has size {upd0.dimensions[d]} but scatter_indices "
              f"gives {scatter_sizes[k]}")
    window_input_dims = [d for d in range(first.rank) if d not in iwd and d not in ibd]
    for d, o in zip(uwd, window_input_dims):
        check(upd0.dimensions[d] <= first.dimensions[o], "scatter_c4",
              f"updates window dimension {d} has size {upd0.dimensions[d]}, more than input "
              f"dimension {o} of size {first.dimensions[o]}")


def _check_region(region: Region, inputs: Sequence[Shape]) -> None:
    """(C23): (E0..EN-1, E0..EN-1) -> (E0..EN-1), all scalars."""
    n = len(inputs)
    want = [Shape.scalar(s.element_type) for s in inputs]
    params = list(region.parameter_shapes)
    check(params == want + want, "scatter_c23",
          f"update_computation parameters {[str(p) for p in params]} must be "
          f"{[str(w) for w in want + want]}")
    res = region.result_shape
    results = list(res.tuple_shapes) if res.is_tuple else [res]
    check(results == want and (n > 1 or not res.is_tuple or len(results) == 1), "scatter_c23",
          f"update_computation returns {res}, expected {', '.join(map(str, want))}")


def _scatter_targets(shape: tuple[int, ...], indices: np.ndarray, updates: Sequence[np.ndarray],
                     dn: ScatterDimensionNumbers) -> tuple[np.ndarray, list[np.ndarray]]:
    """Flat input positions and the matching update values of every in-bounds update element.

    Order is XLA's: scatter positions row-major, then each window row-major. A window with
    any part out of bounds is dropped whole.
    """
    rank = len(shape)
    ivd = dn.index_vector_dim
    idx = index_vectors(indices, ivd)
    batch_shape = idx.shape[:-1]
    nb = len(batch_shape)
    uwd = tuple(dn.update_window_dims)
    usd = [d for d in range(updates[0].ndim) if d not in uwd]
    window_dims = [d for d in range(rank)
                   if d not in dn.inserted_window_dims and d not in dn.input_batching_dims]
    sizes = [1] * rank
    for d, u in zip(window_dims, uwd):
        sizes[d] = updates[0].shape[u]
    starts: list[Any] = [np.zeros((1,) * nb, dtype=np.int64)] * rank
    for k, d in enumerate(dn.scatter_dims_to_operand_dims):
        starts[d] = idx[..., k]
    for o, s in zip(dn.input_batching_dims, dn.scatter_indices_batching_dims):
        starts[o] = batch_iota(batch_shape, batching_axis(s, ivd))
    valid = np.ones(batch_shape, dtype=bool)
    for d in range(rank):
        valid &= (starts[d] >= 0) & (starts[d] <= shape[d] - sizes[d])
    full = batch_shape + tuple(sizes)
    pos = window_index_arrays(starts, sizes, nb)
    # Out-of-bounds windows are masked below, so clip only to keep ravel_multi_index happy.
    pos = tuple(np.clip(p, 0, max(n - 1, 0)) for p, n in zip(pos, shape))
    mask = np.broadcast_to(valid.reshape(batch_shape + (1,) * rank), full)
    if not mask.any() or 0 in shape:
        return np.zeros(0, dtype=np.int64), [np.zeros(0, u.dtype) for u in updates]
    flat_pos = np.ravel_multi_index(tuple(np.broadcast_to(p, full) for p in pos), shape)
    targets = flat_pos[mask]
    values = [np.transpose(u, usd + list(uwd)).reshape(full)[mask] for u in updates]
    return targets, values


# ---- update computations ----------------------------------------------------------------------
_BINARY_KINDS = {"add", "multiply", "maximum", "minimum", "and", "or", "xor", "subtract"}
_COMMUTATIVE = _BINARY_KINDS - {"subtract"}


def _combiner_kinds(ctx: EvalContext, n: int) -> list[str] | None:
    """Per result k, the kind of f(input_k, update_k) the region computes, or None if general."""
    instr = getattr(ctx, "instruction", None)
    called = getattr(instr, "called", None)
    if not called:
        return None
    region = called[0]
    root = getattr(region, "root", None)
    params = getattr(region, "parameters", None)
    if root is None or params is None or len(params) != 2 * n:
        return None
    if n == 1:
        elems = [root.operands[0]] if root.opcode == "tuple" and len(root.operands) == 1 \
            else [root]
    elif root.opcode == "tuple" and len(root.operands) == n:
        elems = list(root.operands)
    else:
        return None
    kinds = []
    for k, e in enumerate(elems):
        cur, upd = params[k], params[n + k]
        if e is upd:
            kinds.append("replace")
        elif e is cur:
            kinds.append("keep")
        elif e.opcode in _BINARY_KINDS and len(e.operands) == 2 and not e.called and (
                (e.operands[0] is cur and e.operands[1] is upd)
                or (e.opcode in _COMMUTATIVE and e.operands[0] is upd
                    and e.operands[1] is cur)):
            kinds.append(e.opcode)
        else:
            return None
    return kinds


def _ufunc(kind: str, dtype: np.dtype) -> Callable[..., Any] | None:
    if dtype == np.bool_:
        return {"add": np.logical_or, "multiply": np.logical_and, "maximum": np.logical_or,
                "minimum": np.logical_and, "and": np.logical_and, "or": np.logical_or,
                "xor": np.logical_xor}.get(kind)
    return {"add": np.add, "multiply": np.multiply, "maximum": np.maximum,
            "minimum": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
            "xor": np.bitwise_xor, "subtract": np.subtract}[kind]


def _apply_fast(kind: str, out: np.ndarray, targets: np.ndarray, values: np.ndarray,
                ctx: EvalContext) -> None:
    """`out[t] = f(out[t], v)` for every (t, v) in order, without calling the region."""
    if kind == "keep":
        return
    if kind == "replace":
        # The last update to each position wins.
        rev = targets[::-1]
        _, first = np.unique(rev, return_index=True)
        keep = len(targets) - 1 - first
        out[targets[keep]] = values[keep]
        return
    if out.dtype.kind in "biu" or out.dtype == np.bool_:
        fn = _ufunc(kind, out.dtype)
        if fn is not None:
            with np.errstate(all="ignore"):
                fn.at(out, targets, values)  # type: ignore[attr-defined]
            return
    rounds = _rounds(targets)
    if len(rounds) > _MAX_ROUNDS and kind in ("add", "multiply", "subtract"):
        # Very long chains on one position: one sequential ufunc pass over denormal-flushed
        # operands (exact unless an intermediate result itself is denormal).
        flat = _flush(out)
        with np.errstate(all="ignore"):
            _ufunc(kind, out.dtype).at(flat, targets, _flush(values))  # type: ignore[union-attr]
        out[...] = _flush(flat)
        return
    op = get_op(kind)
    et = from_dtype(out.dtype)
    for sel in rounds:
        t = targets[sel]
        shape = Shape.array(et, t.shape)
        out[t] = op.evaluate([out[t], values[sel]], NO_ATTRS, shape, ctx)


_MAX_ROUNDS = 4096


def _flush(x: np.ndarray) -> np.ndarray:
    """f32/f64 (and complex parts) denormals to signed zero, as XLA's CPU backend does (a copy;
    none flushed in the `ieee` denormal mode)."""
    if not denormal.flushing():
        return x.copy()
    if x.dtype.kind == "c":
        out = x.copy()
        out.real, out.imag = _flush(x.real.copy()), _flush(x.imag.copy())
        return out
    if x.dtype in (np.float32, np.float64):
        with np.errstate(invalid="ignore"):
            return np.where(np.abs(x) < np.finfo(x.dtype).tiny, x * 0, x)
    return x.copy()


def _rounds(targets: np.ndarray) -> list[np.ndarray]:
    """Positions split into rounds: round r holds each target's r-th update (all distinct)."""
    order = np.argsort(targets, kind="stable")
    st = targets[order]
    starts = np.flatnonzero(np.r_[True, st[1:] != st[:-1]])
    lengths = np.diff(np.r_[starts, len(st)])
    rank = np.empty(len(st), dtype=np.int64)
    rank[order] = np.arange(len(st)) - np.repeat(starts, lengths)
    by_rank = np.argsort(rank, kind="stable")
    return np.split(by_rank, np.cumsum(np.bincount(rank))[:-1])


def _apply_region(ctx: EvalContext, flat: list[np.ndarray], targets: np.ndarray,
                  values: list[np.ndarray]) -> None:
    """The general path: call the update computation per update element, in order."""
    n = len(flat)
    for j, t in enumerate(targets.tolist()):
        cur = [f[t:t + 1].reshape(()).copy() for f in flat]
        upd = [v[j:j + 1].reshape(()) for v in values]
        res = ctx.call(0, *cur, *upd)
        if n == 1 and not isinstance(res, tuple):
            res = (res,)
        for k in range(n):
            flat[k][t] = res[k]
