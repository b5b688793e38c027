"""A stack along a short last dimension (`jnp.stack([h, s, v], -1)`) with its lanes along
the dimension before: each stacked value a vector of W rows, interleaved into C x W
consecutive elements and stored at once.

With lanes along the last dimension (3 or 4 long) such a kernel has none: LaneCheck takes a
unit-stride lane only, which a concatenate along the lane does not give, so the kernel was
scalar code left to LLVM's loop vectorizer. That vectorizes straight-line code, but not an
op whose rare lanes branch to a library call (remainder's fmod, power, atan2): dm-pix's
rgb_to_hsv (a `% 6` in the hue) ran 2.6x XLA's time, jnp.stack of two powers 2.7x, of a
`% 1.0` and a product 1.9x. Here each stacked operand is generated with the lane along
the rows, the C vectors shuffled into one of C x W elements (row-major: the rows' C
values each), one store.

The same holds for an element-wise root computed from such columns (a stack times a scalar:
6.4 ms for 1M rows of 3, now 0.46; quaternion rotation v + w t + u x t, 1.9 -> 0.19): the
root is generated at each of its C columns (constants: a concatenate picks its operand, a
leaf's column is one shuffle, column_lanes.py), what the columns share generated once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.lanes import Lane, LaneCheck, vector_width
from xlapy.backends.cpu.llvm_util import I32, i64, type_bytes
from xlapy.ir import Instruction

#: The longest last dimension stacked this way (C x W elements a store).
MAX_STACK = 8


def width(root: Instruction, leaves: dict[int, int], rows: Sequence[Instruction],
          extra: Sequence[Any], reducer: Any) -> int:
    """C when root (a concatenate along its last dimension of C, 2..MAX_STACK, or an
    element-wise op of one) is generated with the lane along the dimension before, at least
    a vector of rows long; else 0."""
    dims = root.shape.dimensions
    if id(root) in leaves or rows or extra or len(dims) < 2 or root.opcode == "reduce" or \
            not 2 <= dims[-1] <= MAX_STACK or dims[-2] < vector_width() or \
            root.shape.element_type.is_complex:
        return 0
    check = LaneCheck(leaves, (), reducer, splits=True, whole=True)  # (repeats: lane_split)
    return dims[-1] if check.value(root, len(dims) - 2, pinned=True) else 0


def short(root: Instruction) -> bool:
    """Whether root's last dimension holds fewer elements than a vector's lanes: its masked
    lanes would leave most of each vector idle, the stack's lanes fill it."""
    dims = root.shape.dimensions
    return len(dims) >= 2 and dims[-1] < vector_width()


def interleave(b: ir.IRBuilder, vals: Sequence[ir.Value]) -> ir.Value:
    """C vectors of W lanes as one of C x W: lane l of vector c at l * C + c."""
    c, w = len(vals), vals[0].type.count
    n = 1 << (c - 1).bit_length()  # (shuffles join equal types: pad to a power of two)
    parts = list(vals) + [ir.Constant(vals[0].type, None)] * (n - c)
    while len(parts) > 1:  # concatenated in order: vector c at [c * W, c * W + W)
        k = parts[0].type.count
        join = ir.Constant(ir.VectorType(I32, 2 * k), list(range(2 * k)))
        parts = [b.shuffle_vector(x, y, join) for x, y in zip(parts[::2], parts[1::2])]
    whole = parts[0]
    order = [j * w + lane for lane in range(w) for j in range(c)]
    return b.shuffle_vector(whole, ir.Constant(whole.type, None),
                            ir.Constant(ir.VectorType(I32, c * w), order))


class MinorStackEmitter:
    """KernelEmitter's elementwise loop for a `width` root (its `stack`: C)."""

    b: ir.IRBuilder
    root: Instruction
    memo: dict[Any, ir.Value]

    def _stack_elementwise(self, begin: ir.Value, end: ir.Value) -> tuple[int, bool]:
        dims, et = self.root.shape.dimensions, self.root.shape.element_type
        out = self.ptr(self.out_slot, et)  # type: ignore[attr-defined]
        b = self.b
        size = type_bytes(ew.storage_type(et))

        def body(idx: list[Any]) -> None:
            self.memo.clear()  # (the C columns share what they have in common)
            vals = [ew.to_storage(b, self.gen(self.root, [*idx, i64(c)]), et)  # type: ignore
                    for c in range(dims[-1])]
            if isinstance(idx[-1], Lane):
                v = interleave(b, [self.splat(v) for v in vals])  # type: ignore
                base = b.gep(out, [self.linear([*idx, i64(0)], dims)],  # type: ignore
                             inbounds=True)
                b.store(v, b.bitcast(base, v.type.as_pointer())).align = size
                return
            for j, v in enumerate(vals):  # (the rows past the last whole vector)
                at = self.linear([*idx, i64(j)], dims)  # type: ignore[attr-defined]
                b.store(v, b.gep(out, [at], inbounds=True))

        self._nest(list(dims[:-1]), begin, end, body)  # type: ignore[attr-defined]
        return dims[0], True


__all__ = ["MinorStackEmitter", "width", "interleave", "MAX_STACK"]
