"""A kernel whose last dimension is shorter than a vector, emitted with its trailing
dimensions merged where no op of it moves them (KernelEmitter's `collapse`).

Why: a kernel's vector lanes run along its last dimension; NHWC images of 3 channels put
3 of 8 lanes to work, masked loads and stores a pixel. Padding, cropping, concatenating or
randomly cropping such images moves whole pixels: [8, 128, 128, 3] padded by 4 pixels took
0.26-0.34 ms against XLA's 0.13-0.24, a random crop (dynamic_slice) 2.5x XLA's time. Viewed
as [8, 128, 384] the same pad is 12 floats at each end of rows of 384, whole vectors.
`flatten` (kernel_flat.py) does this for element-wise kernels; this is its sibling for
kernels with index ops.

Merging dimensions m.. of every value into one keeps each element at its row-major place
(the same buffers viewed in another shape) when no op moves elements within those
dimensions except along m itself, by whole rows of the dimensions after it: a pad,
slice (stride 1), concatenate or dynamic_slice along m scales its offsets by the rows'
size; along earlier dimensions they are unchanged. Reverse, broadcast, iota and transpose
on a dimension d need d < m (they move elements within the merged group). Each element is
computed by the same ops: the same bits.

A reduce kernel takes the same copy of its operand (`merge_reduced`) when dimensions m.. of
it are all reduced: they fold as one contiguous dimension (a sum of f32[1M, 4] ran a row of
4 behind a loop of 1M, 5.7x XLA's time); the fold's order changes, which a sum's rounding
may show (the backend's choice, as its vector lanes are).
"""

from __future__ import annotations

import math

import numpy as np

from xlapy.backends.cpu.index_emit import inner_cuts, segmentable
from xlapy.backends.cpu.lanes import LaneCheck, vector_width
from xlapy.backends.cpu.masked_emit import kernel_values
from xlapy.backends.cpu.reduce_emit import reducer_op
from xlapy.ir import Instruction
from xlapy.ir.computation import make_instruction
from xlapy.ops.core import ConstantAttrs
from xlapy.ops.elementwise_convert import ConvertAttrs
from xlapy.ops.shape import (
    BroadcastInDimAttrs,
    IotaAttrs,
    PadAttrs,
    SliceAttrs,
    TransposeAttrs,
)
from xlapy.ops.shape_dynamic import DynamicSliceAttrs
from xlapy.passes.fusion_decision import SAME_INDEX, is_elementwise
from xlapy.types import ElementType, Literal, Shape


class _Fixed(Exception):
    """A value whose op the merge cannot express."""


def _bound(i: Instruction, leaves: dict[int, int]) -> int:
    """The smallest m at which i's op leaves dimensions m+1.. alone and moves dimension m
    only by whole rows (0: none moved); raises _Fixed for an op the merge cannot take."""
    sh = i.shape
    if id(i) in leaves or sh.rank == 0:
        return 0
    op, a, r = i.opcode, i.attrs, sh.rank
    dims = sh.dimensions
    if (is_elementwise(i) or op in SAME_INDEX) and not i.called:
        return 0
    if op == "broadcast_in_dim":  # (an operand of the same rank: `collapse` checks)
        src = i.operands[0].shape.dimensions
        return max((d + 1 for d in range(len(src)) if src[d] != dims[d]), default=0)
    if op == "pad":
        moved = [d + (1 if a.interior_padding[d] else 0) for d in range(r)
                 if a.edge_padding_low[d] or a.edge_padding_high[d] or a.interior_padding[d]]
        return max(moved, default=0)
    if op == "slice":
        src = i.operands[0].shape.dimensions
        moved = [d + (1 if a.strides[d] != 1 else 0) for d in range(r)
                 if a.start_indices[d] or a.limit_indices[d] != src[d] or a.strides[d] != 1]
        return max(moved, default=0)
    if op == "concatenate":
        return int(a.dimension)
    if op == "dynamic_slice":
        src = i.operands[0].shape.dimensions
        return max((d for d in range(r) if a.slice_sizes[d] != src[d]), default=0)
    if op == "reverse":
        return max((d + 1 for d in a.dimensions), default=0)
    if op == "iota":
        return int(a.iota_dimension) + 1
    if op == "transpose":
        return max((d + 1 for d, p in enumerate(a.permutation) if d != p), default=0)
    raise _Fixed


def collapse(root: Instruction, leaves: dict[int, int]
             ) -> tuple[Instruction, dict[int, int]] | None:
    """(a copy of the kernel of `root` with dimensions m.. merged, its leaves) when its
    last dimension is shorter than a vector, the merged rows are at least one, and the
    copy's lanes run explicitly; else None."""
    sh = root.shape
    if not sh.is_array or sh.rank < 2 or id(root) in leaves:
        return None
    dims = tuple(sh.dimensions)
    w = vector_width()
    if w < 2 or dims[-1] >= w:
        return None
    r = sh.rank
    arrays = [i for i in kernel_values(root, leaves) if i.shape.is_array and i.shape.rank]
    try:
        for i in arrays:
            _mergeable(i, r, dims[-1], leaves)
        m = max(_bound(i, leaves) for i in arrays)
    except _Fixed:
        return None
    if m >= r - 1 or math.prod(dims[m:]) < w or \
            any(tuple(i.shape.dimensions[m + 1:]) != dims[m + 1:] for i in arrays):
        return None
    try:
        new_root, new_leaves = _Merge(m, leaves).copy(root)
    except _Fixed:
        return None
    seg = segmentable(new_root)
    check = LaneCheck(new_leaves, [], reducer_op, splits=not seg)
    # (an element-wise root over a concatenate along m: segments where each takes one
    # operand, index_emit.inner_cuts, as KernelEmitter makes them)
    return (new_root, new_leaves) if check.kernel(new_root, [], seg) or (
        not seg and inner_cuts(new_root, new_leaves)) else None


def collapsed(root: Instruction, leaves: dict[int, int]
              ) -> tuple[Instruction, dict[int, int]]:
    """`collapse`'s copy of the kernel, else `merge_reduced`'s, else (root, leaves)."""
    return collapse(root, leaves) or merge_reduced(root, leaves) or (root, leaves)


def merge_reduced(root: Instruction, leaves: dict[int, int]
                  ) -> tuple[Instruction, dict[int, int]] | None:
    """(a copy of reduce `root` with its operand's trailing reduced dimensions merged into
    one, its leaves), else None. Each merged element keeps its row-major place; the fold
    runs along one contiguous dimension. A sum of f32[1M, 4] ran a 4-element row at a time
    behind an outer loop of 1M (5.7x XLA's time), of c64[1M, 4] 3.7x."""
    if root.opcode != "reduce" or id(root) in leaves or len(root.operands) != 2 or \
            not root.shape.is_array:
        return None
    x, init = root.operands
    dims = tuple(x.shape.dimensions)
    r, red = len(dims), set(root.attrs.dimensions)
    m = r
    while m > 0 and m - 1 in red:
        m -= 1
    arrays = [i for i in kernel_values(x, leaves) if i.shape.is_array and i.shape.rank]
    try:
        for i in arrays:
            _mergeable(i, r, dims[-1], leaves, complex_ok=True)
        m = max([m] + [_bound(i, leaves) for i in arrays])
    except _Fixed:
        return None
    if r - m < 2 or any(tuple(i.shape.dimensions[m + 1:]) != dims[m + 1:] for i in arrays):
        return None
    try:
        new_x, new_leaves = _Merge(m, leaves).copy(x)
    except _Fixed:
        return None
    attrs = type(root.attrs)(tuple(sorted(d for d in red if d < m)) + (m,))
    return Instruction("reduce", [new_x, init], root.shape, attrs, root.called,
                       root.name), new_leaves


def _mergeable(i: Instruction, r: int, last: int, leaves: dict[int, int],
               complex_ok: bool = False) -> None:
    """Raises _Fixed unless array value `i` is real (or `complex_ok`), of the root's rank and
    last dimension, and (a broadcast of an array) maps its operand's dimensions one to one."""
    s = i.shape
    if (s.element_type.is_complex and not complex_ok) or s.rank != r or \
            s.dimensions[-1] != last:
        raise _Fixed
    if i.opcode == "broadcast_in_dim" and id(i) not in leaves and \
            i.operands[0].shape.rank and \
            tuple(i.attrs.broadcast_dimensions) != tuple(range(r)):
        raise _Fixed


class _Merge:
    """Copies values with dimensions m.. merged into one."""

    def __init__(self, m: int, leaves: dict[int, int]) -> None:
        self.m = m
        self.leaves = leaves
        self.out = dict(leaves)
        self.made: dict[int, Instruction] = {}

    def dims(self, s: Shape) -> tuple[int, ...]:
        d = tuple(s.dimensions)
        return d[:self.m] + (math.prod(d[self.m:]),)

    def copy(self, i: Instruction) -> tuple[Instruction, dict[int, int]]:
        return self._copy(i), self.out

    def _copy(self, i: Instruction) -> Instruction:
        got = self.made.get(id(i))
        if got is not None:
            return got
        s = i.shape
        if s.rank == 0:
            return i  # (computed as it is: its own leaves stay in the map)
        m, dims = self.m, tuple(s.dimensions)
        merged = Shape.array(s.element_type, self.dims(s))
        inner = math.prod(dims[m + 1:])
        op, a = i.opcode, i.attrs
        if id(i) in self.leaves:
            out = Instruction("parameter", [], merged, name=i.name)
            self.out[id(out)] = self.leaves[id(i)]
        elif op == "broadcast_in_dim":  # a scalar's, or the identity map of x's dims
            x = i.operands[0]
            out = make_instruction(op, [x], BroadcastInDimAttrs(merged.dimensions, ())) \
                if x.shape.rank == 0 else \
                make_instruction(op, [self._copy(x)], BroadcastInDimAttrs(
                    merged.dimensions, tuple(range(m + 1))))
        elif op == "pad":
            lo, hi, mid = (list(v[:m + 1]) for v in (a.edge_padding_low,
                                                     a.edge_padding_high, a.interior_padding))
            lo[m], hi[m] = lo[m] * inner, hi[m] * inner
            out = make_instruction(op, [self._copy(i.operands[0]), i.operands[1]],
                                   PadAttrs(tuple(lo), tuple(hi), tuple(mid)))
        elif op == "slice":
            st, lim, step = (list(v[:m + 1]) for v in (a.start_indices, a.limit_indices,
                                                       a.strides))
            st[m], lim[m] = st[m] * inner, lim[m] * inner
            out = make_instruction(op, [self._copy(i.operands[0])],
                                   SliceAttrs(tuple(st), tuple(lim), tuple(step)))
        elif op == "dynamic_slice":
            out = self._dynamic_slice(i, inner)
        elif op == "iota":
            out = make_instruction(op, [], IotaAttrs(merged, a.iota_dimension))
        elif op == "transpose":
            out = make_instruction(op, [self._copy(i.operands[0])],
                                   TransposeAttrs(tuple(a.permutation[:m]) + (m,)))
        else:  # element-wise, concatenate, reverse: their attrs hold for the merged shape
            out = Instruction(op, [self._copy(o) for o in i.operands], merged, a, i.called,
                              i.name)
        if tuple(out.shape.dimensions) != merged.dimensions:
            raise _Fixed
        self.made[id(i)] = out
        return out

    def _dynamic_slice(self, i: Instruction, inner: int) -> Instruction:
        """The start along m clamped as the op would (to [0, extent - size]) and then
        scaled: clamping the scaled start in the merged dimension is then a no-op. Starts
        are s64 (a narrow index type could not hold the scaled one)."""
        m = self.m
        x, *starts = i.operands
        size = i.attrs.slice_sizes
        hi = x.shape.dimensions[m] - size[m]
        wide = [s if s.shape.element_type == ElementType.S64 else
                make_instruction("convert", [s], ConvertAttrs(ElementType.S64))
                for s in starts[:m + 1]]
        clamped = make_instruction("clamp", [_s64(0), wide[m], _s64(hi)])
        wide[m] = make_instruction("multiply", [clamped, _s64(inner)])
        return make_instruction("dynamic_slice", [self._copy(x), *wide],
                                DynamicSliceAttrs(tuple(size[:m]) + (size[m] * inner,)))


def _s64(v: int) -> Instruction:
    return make_instruction("constant", [], ConstantAttrs(
        Literal.from_numpy(np.asarray(v, np.int64))))


__all__ = ["collapse", "collapsed", "merge_reduced"]
