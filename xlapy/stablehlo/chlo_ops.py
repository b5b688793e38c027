"""chlo.top_k, chlo.ragged_dot and chlo.scan: structured chlo ops evaluated directly.

Semantics follow the CHLO dialect reference and its stablehlo decompositions
(`--chlo-legalize-to-stablehlo`), which the conformance files check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.attrs import Precision
from xlapy.ops.base import VARIADIC, EvalContext, OpDef, Region, check, register
from xlapy.ops.control_flow import call_results, region_results, results_shape
from xlapy.ops.elementwise import total_order_key
from xlapy.types import ElementType, Shape, from_dtype


@dataclass(frozen=True)
class TopKAttrs:
    k: int
    largest: bool = True


@register
class TopK(OpDef):
    """chlo.top_k: CHLO §top_k; XLA TopK. The `k` largest along the last dimension (sorted,
    ties by lower index, floats in total order so NaN is largest, pred with true above false,
    as XLA) and their s32 indices."""

    name = "chlo.top_k"
    arity = 1
    attrs = TopKAttrs
    family = "chlo"

    def infer(self, operands: Sequence[Shape], attrs: TopKAttrs,
              regions: Sequence[Region]) -> Shape:
        (x,) = operands
        check(x.is_array and x.rank >= 1, "top_k_c1", f"operand {x} needs rank >= 1")
        check(not x.element_type.is_complex, "top_k_c1",
              f"operand element type {x.element_type} is not ordered")
        check(0 <= attrs.k <= x.dimensions[-1], "top_k_c2",
              f"k = {attrs.k} is outside [0, {x.dimensions[-1]}]")
        dims = list(x.dimensions[:-1]) + [attrs.k]
        return Shape.tuple([Shape.array(x.element_type, dims),
                            Shape.array(ElementType.S32, dims)])

    def evaluate(self, operands: Sequence[Any], attrs: TopKAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        (x,) = operands
        key = total_order_key(x) if x.dtype.kind not in "iub" else x.astype(np.int64)
        order = np.argsort(~key if attrs.largest else key, axis=-1, kind="stable")
        idx = order[..., :attrs.k]
        return (np.take_along_axis(x, idx, axis=-1), idx.astype(np.int32))


@dataclass(frozen=True)
class RaggedDotAttrs:
    lhs_batching_dimensions: tuple[int, ...] = ()
    rhs_batching_dimensions: tuple[int, ...] = ()
    lhs_contracting_dimensions: tuple[int, ...] = ()
    rhs_contracting_dimensions: tuple[int, ...] = ()
    lhs_ragged_dimensions: tuple[int, ...] = ()
    rhs_group_dimensions: tuple[int, ...] = ()
    precision_config: tuple[Precision, ...] = ()


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@register
class RaggedDot(OpDef):
    """chlo.ragged_dot: CHLO §ragged_dot; a dot_general whose lhs ragged dimension is cut into
    groups (`group_sizes`), group g using rhs[g] (mode 1: ragged non-contracting dimension).

    Rows past the sum of the group sizes are zero."""

    name = "chlo.ragged_dot"
    arity = 3
    attrs = RaggedDotAttrs
    family = "chlo"

    def _mode(self, lhs: Shape, a: RaggedDotAttrs) -> int:
        check(len(a.lhs_ragged_dimensions) == 1, "ragged_dot_c3",
              "expects exactly one lhs ragged dimension")
        r = a.lhs_ragged_dimensions[0]
        check(0 <= r < lhs.rank, "ragged_dot_c3", f"lhs ragged dimension {r} is out of range")
        if r in a.lhs_contracting_dimensions:
            return 2
        return 3 if r in a.lhs_batching_dimensions else 1

    def infer(self, operands: Sequence[Shape], attrs: RaggedDotAttrs,
              regions: Sequence[Region]) -> Shape:
        lhs, rhs, groups = operands
        a = attrs
        check(lhs.is_array and rhs.is_array and groups.is_array, "ragged_dot_c1",
              "operands must be tensors")
        check(groups.element_type.is_integer and groups.rank == 1, "ragged_dot_c6",
              f"group_sizes is {groups}; expected a 1-d integer tensor")
        check(len(a.lhs_batching_dimensions) == len(a.rhs_batching_dimensions) and
              len(a.lhs_contracting_dimensions) == len(a.rhs_contracting_dimensions),
              "ragged_dot_c2", "lhs and rhs batching/contracting dimension counts differ")
        for ld, rd in zip(a.lhs_batching_dimensions + a.lhs_contracting_dimensions,
                          a.rhs_batching_dimensions + a.rhs_contracting_dimensions):
            check(0 <= ld < lhs.rank and 0 <= rd < rhs.rank and
                  lhs.dimensions[ld] == rhs.dimensions[rd], "ragged_dot_c2",
                  f"lhs dimension {ld} and rhs dimension {rd} do not match")
        mode = self._mode(lhs, a)
        check(mode == 1, "ragged_dot_mode",
              f"ragged dimension in the {'contracting' if mode == 2 else 'batching'} "
              "dimensions (ragged_dot mode 2/3) is not supported yet")
        check(len(a.rhs_group_dimensions) == 1, "ragged_dot_c4",
              "mode 1 needs exactly one rhs group dimension")
        g = a.rhs_group_dimensions[0]
        check(0 <= g < rhs.rank and groups.dimensions[-1:] == (rhs.dimensions[g],),
              "ragged_dot_c5", f"group_sizes {groups} does not match rhs group dimension {g}")
        lfree = [d for d in range(lhs.rank) if d not in a.lhs_batching_dimensions +
                 a.lhs_contracting_dimensions]
        rfree = [d for d in range(rhs.rank) if d not in a.rhs_batching_dimensions +
                 a.rhs_contracting_dimensions + (g,)]
        dims = [lhs.dimensions[d] for d in a.lhs_batching_dimensions]
        dims += [lhs.dimensions[d] for d in lfree] + [rhs.dimensions[d] for d in rfree]
        return Shape.array(lhs.element_type, dims)

    def evaluate(self, operands: Sequence[Any], attrs: RaggedDotAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        lhs, rhs, groups = operands
        a = attrs
        g = a.rhs_group_dimensions[0]
        ls = [_LETTERS[i] for i in range(lhs.ndim)]
        rs = [_LETTERS[lhs.ndim + i] for i in range(rhs.ndim)]
        for ld, rd in zip(a.lhs_batching_dimensions + a.lhs_contracting_dimensions,
                          a.rhs_batching_dimensions + a.rhs_contracting_dimensions):
            rs[rd] = ls[ld]
        lfree = [d for d in range(lhs.ndim) if d not in a.lhs_batching_dimensions +
                 a.lhs_contracting_dimensions]
        rfree = [d for d in range(rhs.ndim) if d not in a.rhs_batching_dimensions +
                 a.rhs_contracting_dimensions + (g,)]
        out = [ls[d] for d in a.lhs_batching_dimensions] + [ls[d] for d in lfree] + \
            [rs[d] for d in rfree]
        rs_g = [s for i, s in enumerate(rs) if i != g]
        spec = f"{''.join(ls)},{''.join(rs_g)}->{''.join(out)}"
        et = from_dtype(lhs.dtype)  # bf16/f8 are numpy kind 'V': ask the element type
        wide = np.float64 if et.is_float else np.complex128 if et.is_complex else np.int64
        r = a.lhs_ragged_dimensions[0]
        axis = out.index(ls[r])
        n = lhs.shape[r]
        res = np.zeros(result.dimensions, wide)
        bounds = np.concatenate([[0], np.cumsum(np.asarray(groups, np.int64))])
        row = np.arange(n)
        for k in range(rhs.shape[g]):
            lo, hi = int(bounds[k]), int(bounds[k + 1])
            if hi <= lo:
                continue
            part = np.einsum(spec, lhs.astype(wide), np.take(rhs, k, axis=g).astype(wide))
            mask = ((row >= lo) & (row < hi)).reshape([-1 if i == axis else 1
                                                       for i in range(len(out))])
            res = np.where(mask, part, res)
        return res.astype(result.element_type.dtype)


@dataclass(frozen=True)
class ScanAttrs:
    dimension: int
    num_inputs: int
    is_reverse: bool = False


@register
class Scan(OpDef):
    """chlo.scan: CHLO §scan. The body maps (input slices..., carries...) to (output
    slices..., new carries...) at each position along `dimension` (from the end when
    `is_reverse`); results are the stacked outputs, then the final carries."""

    name = "chlo.scan"
    arity = VARIADIC
    attrs = ScanAttrs
    num_regions = 1
    family = "chlo"

    def infer(self, operands: Sequence[Shape], attrs: ScanAttrs,
              regions: Sequence[Region]) -> Shape:
        n = attrs.num_inputs
        check(0 <= n <= len(operands), "scan_c1", f"num_inputs {n} is out of range")
        inputs, inits = operands[:n], operands[n:]
        check(n > 0, "scan_c1", "expects at least one input")
        d = attrs.dimension
        for s in inputs:
            check(s.is_array and 0 <= d < s.rank, "scan_c2",
                  f"dimension {d} is out of range for input {s}")
            check(s.dimensions[d] == inputs[0].dimensions[d], "scan_c2",
                  "inputs differ in the size of the scan dimension")
        length = inputs[0].dimensions[d]
        params = regions[0].parameter_shapes
        slices = [Shape.array(s.element_type, s.dimensions[:d] + s.dimensions[d + 1:])
                  for s in inputs]
        check(list(params) == slices + list(inits), "scan_c3",
              f"body takes ({', '.join(map(str, params))}); expected the input slices and "
              f"carries ({', '.join(map(str, slices + list(inits)))})")
        outs = region_results(regions[0])
        k = len(outs) - len(inits)
        check(k >= 0 and list(outs[k:]) == list(inits), "scan_c4",
              f"body returns ({', '.join(map(str, outs))}); its last results must be the "
              f"carries ({', '.join(map(str, inits))})")
        stacked = []
        for o in outs[:k]:
            check(o.is_array and d <= o.rank, "scan_c5", f"body output {o} cannot be stacked")
            stacked.append(Shape.array(o.element_type,
                                       o.dimensions[:d] + (length,) + o.dimensions[d:]))
        return results_shape(stacked + list(inits))

    def evaluate(self, operands: Sequence[Any], attrs: ScanAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        n, d = attrs.num_inputs, attrs.dimension
        inputs, carries = list(operands[:n]), list(operands[n:])
        length = inputs[0].shape[d]
        shapes = list(result.tuple_shapes) if result.is_tuple else [result]
        k = len(shapes) - len(carries)
        outs = [np.empty(s.dimensions, s.element_type.dtype) for s in shapes[:k]]
        steps = range(length - 1, -1, -1) if attrs.is_reverse else range(length)
        for i in steps:
            args = [np.array(np.take(x, i, axis=d)) for x in inputs] + carries
            vals = call_results(ctx, 0, args, len(shapes))
            for o, v in zip(outs, vals[:k]):
                index = [slice(None)] * o.ndim
                index[d] = i  # type: ignore[call-overload]
                o[tuple(index)] = v
            carries = list(vals[k:])
        values = outs + carries
        return values[0] if len(values) == 1 else tuple(values)
