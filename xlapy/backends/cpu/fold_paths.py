"""Index paths through short_reduce's folds, for the cpu fusion's recomputation counts
(fusion_plan.py).

A fold over the T columns of a short row reads what it reduces through T column slices
(x[..., c], each one element of the last dimension): T index paths of one value, which the
fusion took for T recomputations (a buffer for exp(x - max) in jax.nn.logsumexp, 2x the
fold's time) though each element is generated once. And a row value broadcast back along
the row (the fold's max) reached through the T slices is one value per row, generated once
(the emitter's memo), not T times (logsumexp over 16 columns counted past the kernel size
limit, fusion_plan.MAX_GENERATED, and split into three kernels). Likewise the columns of
a kernel with its lanes along short rows (minor_stack.py): a value read whole and by column
slices is generated once per column (`column_step`).
"""

from __future__ import annotations

from typing import Any

from xlapy.backends.cpu.lanes import vector_width
from xlapy.backends.cpu.minor_stack import MAX_STACK
from xlapy.ir import Instruction

#: Slices of one value checked pairwise for disjoint windows (`disjoint_slices`).
MAX_SLICES = 64


def disjoint_slices(instr: Instruction, user_paths: list[Any]) -> bool:
    """Whether every user of `instr` is a column slice of it (one element of the last
    dimension: short_reduce's folds) read at one index path, no two sharing an element:
    each element is generated once (logsumexp over rows of 8 folded as 8 column slices of
    exp(x - max)), in lanes (column_lanes.py). Strided slices keep their buffer."""
    users = instr.users
    if len(users) > MAX_SLICES or any(not column_slice(u) or p is None or len(p) != 1
                                      for u, p in zip(users, user_paths)):
        return False
    wins = [(u.attrs.start_indices, u.attrs.limit_indices, u.attrs.strides) for u in users]
    return all(_apart(wins[i], wins[j]) for i in range(len(wins)) for j in range(i))


def _apart(a: tuple[Any, Any, Any], b: tuple[Any, Any, Any]) -> bool:
    """Two slice windows with no element in common: apart along some dimension (ranges that
    do not meet, or one stride whose starts differ modulo it)."""
    for s0, l0, t0, s1, l1, t1 in zip(*a, *b):
        if l0 <= s1 or l1 <= s0 or (t0 == t1 and (s0 - s1) % t0):
            return True
    return False


def column_slice(i: Instruction) -> bool:
    """A fold's column: a slice of one element of the last dimension (rank >= 2)."""
    return i.opcode == "slice" and i.shape.dimensions[-1] == 1 < i.shape.rank


def forget_columns(i: Instruction, path: tuple[int, ...], cols: set[int]) -> tuple[int, ...]:
    """The index path below `i`: a column slice is noted in `cols`; a broadcast along the
    last dimension drops the columns from the path (its operand does not vary with them)."""
    if column_slice(i) or (i.opcode == "reshape" and column_slice(i.operands[0])):
        cols.add(id(i))  # (the fold's reshape of its column too)
    elif i.opcode == "broadcast_in_dim" and i.shape.rank - 1 not in i.attrs.broadcast_dimensions:
        return tuple(p for p in path if p not in cols)
    return path


def stack_root(root: Instruction) -> bool:
    """A kernel root minor_stack.py may run with its lanes along the rows (its shape: short
    rows, at least a vector of them; whether it does is the emitter's LaneCheck)."""
    dims = root.shape.dimensions
    return root.shape.rank >= 2 and root.opcode != "reduce" and \
        2 <= dims[-1] <= MAX_STACK and dims[-2] >= vector_width()


def column_step(i: Instruction) -> bool:
    """An index op that moves only along short rows (a last dimension of at most
    MAX_STACK): a column slice, a concatenate of columns, a reshape adding or dropping a
    unit last dimension. A kernel with its lanes along the rows (minor_stack.py) generates a
    value read through such ops at its columns once each (the memo), so they add no index
    path (quaternion rotation's v + w t + u x t reads t = 2 u x v whole and by columns)."""
    dims = i.shape.dimensions
    if i.opcode == "reshape":
        a, b = sorted((dims, i.operands[0].shape.dimensions), key=len)
        return len(b) == len(a) + 1 and tuple(b) == (*a, 1) and \
            (len(a) < 2 or a[-1] <= MAX_STACK)
    if i.shape.rank < 2 or dims[-1] > MAX_STACK:
        return False
    if i.opcode == "slice":
        return all(s == 0 and lim == n and t == 1 for s, lim, t, n in zip(
            i.attrs.start_indices[:-1], i.attrs.limit_indices[:-1], i.attrs.strides[:-1],
            i.operands[0].shape.dimensions[:-1]))
    return i.opcode == "concatenate" and i.attrs.dimension == i.shape.rank - 1


def expands(i: Instruction) -> bool:
    """A broadcast out of a smaller array (a row value back over its rows): the fusion
    charges a consumer nothing of the value's chain (10-class cross entropy: x - max(x)
    over [65536, 10] was buffered for two kernels, the fold of the max recomputed per row
    in scalar code, 1.8 ms; the max's own buffer is a tenth of it, in lanes)."""
    return i.opcode == "broadcast_in_dim" and i.operands[0].shape.rank > 0 and \
        i.shape.num_elements >= 2 * i.operands[0].shape.num_elements


__all__ = ["MAX_SLICES", "column_slice", "column_step", "disjoint_slices", "expands",
           "forget_columns", "stack_root"]
