"""A reshape that merges a stack's short last dimension ([.., n, C] -> [.., n C], C <= 8)
moved after the element-wise ops that read it (XLA's ReshapeMover, for this case).

Unpacking int4 weights stacks the two nibbles of each byte and merges them into a row,
`jnp.stack([lo, hi], -1).reshape(r, -1).astype(f32) * scale`: the kernel computing the
scaled row read its element k through the reshape as column k % 2 of the stack, a division
and a branch per element in scalar code (1024 x 1024: 0.57 ms, XLA 0.41). With the reshape
last, the kernel's root is the element-wise ops on the [.., n, C] stack, its row-major
elements the output's (kernel_flat.peel_reshape), which minor_stack.py computes with lanes
along the rows, the C columns interleaved into one store. The values are the same (each
element computed by the same ops).

An element-wise op moves when each operand is such a reshape of a stack of one shape (a
concatenate along its last dimension, or an op moved here), a broadcast of a scalar, or a
scalar; the reshape stays for its other users.

The stack's other side, x[..., ::2] and x[..., 1::2] (interleaved rotary embeddings, even
and odd features), is a strided slice along the kernel's lanes, which LaneCheck does not
take: as a column of x viewed as rows of 2 it is one shuffle of a tile of whole rows
(`StridedSlicesAsColumns`).
"""

from __future__ import annotations

from xlapy.backends.cpu.minor_stack import MAX_STACK
from xlapy.ir import Computation, Instruction
from xlapy.passes.dce import DeadCodeElimination
from xlapy.passes.fusion_decision import SAME_INDEX, is_elementwise
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass, sort_instructions
from xlapy.types import ElementType, Shape


def _stack(x: Instruction, moved: set[int]) -> bool:
    """A stack along a short last dimension, or an op this pass moved onto one."""
    dims = x.shape.dimensions
    if id(x) in moved:
        return True
    return x.opcode == "concatenate" and x.shape.rank >= 2 and \
        x.attrs.dimension == x.shape.rank - 1 and 2 <= dims[-1] <= MAX_STACK


def _merged(r: Instruction, moved: set[int]) -> tuple[int, ...] | None:
    """The stack's dims when `r` reshapes a stack [.., n, C] into [.., n C], else None."""
    if r.opcode != "reshape" or not r.operands[0].shape.is_array:
        return None
    src, out = tuple(r.operands[0].shape.dimensions), tuple(r.shape.dimensions)
    if len(src) != len(out) + 1 or len(src) < 2 or src[:-2] != out[:-1] or \
            src[-2] * src[-1] != out[-1] or not _stack(r.operands[0], moved):
        return None
    return src


#: Result types of the ops moved: the minor stack's (narrow float and sub-byte types keep
#: their kernels as they were: a bitcast to f8e8m0 runs on the interpreter).
TYPES = frozenset({ElementType.PRED, ElementType.S8, ElementType.S16, ElementType.S32,
                   ElementType.S64, ElementType.U8, ElementType.U16, ElementType.U32,
                   ElementType.U64, ElementType.BF16, ElementType.F16, ElementType.F32,
                   ElementType.F64})


def _plan(i: Instruction, moved: set[int]) -> tuple[int, ...] | None:
    """The stack dims element-wise op `i` moves onto, or None."""
    if not (is_elementwise(i) or i.opcode in SAME_INDEX) or not i.shape.is_array or \
            i.called or i.opcode == "bitcast_convert" or i.shape.element_type not in TYPES:
        return None
    dims: tuple[int, ...] | None = None
    for o in i.operands:
        if o.shape.rank == 0 or (o.opcode == "broadcast_in_dim" and
                                 o.operands[0].shape.rank == 0):
            continue
        d = _merged(o, moved)
        if d is None or (dims is not None and d != dims):
            return None
        dims = d
    return dims


class SinkStackReshapes(ComputationPass):
    """Moves stack-merging reshapes after the element-wise ops reading them (module
    docstring)."""

    name = "sink-stack-reshapes"

    def run_on_computation(self, comp: Computation) -> bool:
        moved: set[int] = set()
        e = Emitter(comp)
        for i in list(comp.instructions):  # (operands first: a chain moves op by op)
            dims = _plan(i, moved)
            if dims is None:
                continue
            ops = [o if o.shape.rank == 0 else
                   e.bcast(o.operands[0], dims, []) if o.opcode == "broadcast_in_dim" else
                   o.operands[0] for o in i.operands]
            new = comp.add(Instruction(i.opcode, ops, Shape.array(i.shape.element_type, dims),
                                       i.attrs, i.called, i.name))
            moved.add(id(new))
            i.replace_all_uses_with(e.reshape(new, shape=tuple(i.shape.dimensions)))
        return _tidy(comp, bool(moved))


def _tidy(comp: Computation, changed: bool) -> bool:
    """After a rewrite: what it left unread removed (the replaced ops, their reshapes and
    broadcasts), the order restored."""
    if changed:
        DeadCodeElimination(remove_computations=False).run_on_computation(comp)
        sort_instructions(comp)
    return changed


def strided_column(i: Instruction) -> tuple[int, int] | None:
    """(stride s, start k) when `i` slices every s-th element of its operand's last
    dimension from k < s (x[..., k::s], 2 <= s <= MAX_STACK, the dimension a multiple of s,
    the others whole), else None."""
    if i.opcode != "slice" or i.shape.element_type not in TYPES or i.shape.rank < 1:
        return None
    a, src = i.attrs, i.operands[0].shape.dimensions
    *lead, (k, lim, st) = zip(a.start_indices, a.limit_indices, a.strides)
    if any(s0 != 0 or l0 != d or t0 != 1 for (s0, l0, t0), d in zip(lead, src)) or \
            not 2 <= st <= MAX_STACK or k >= st or src[-1] % st or \
            i.shape.dimensions[-1] != src[-1] // st:
        return None
    return st, k


class StridedSlicesAsColumns(ComputationPass):
    """x[..., k::s] as column k of x viewed as rows of s, reshape(x, [.., n, s])[..., k]
    (the same elements): a kernel reads such a column with its lanes along the rows, one
    shuffle of a tile of whole rows (column_lanes.py), where a strided slice along its lanes
    left it scalar code (interleaved rotary embeddings on bf16 rows: 4.0 ms, XLA 0.9)."""

    name = "strided-slices-as-columns"

    def run_on_computation(self, comp: Computation) -> bool:
        e = Emitter(comp)
        found = [(i, sk) for i in comp.instructions if (sk := strided_column(i)) is not None]
        for i, (st, k) in found:
            x = i.operands[0]
            *lead, n = i.shape.dimensions
            rows = e.reshape(x, shape=(*lead, n, st))
            col = e.slice(rows, start_indices=(0,) * (len(lead) + 1) + (k,),
                          limit_indices=(*lead, n, k + 1), strides=(1,) * (len(lead) + 2))
            i.replace_all_uses_with(e.reshape(col, shape=(*lead, n)))
        return _tidy(comp, bool(found))


__all__ = ["SinkStackReshapes", "StridedSlicesAsColumns", "strided_column", "TYPES"]
