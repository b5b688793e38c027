"""Index paths through short_reduce's folds, for the cpu fusion's recomputation counts
(fusion_plan.py).

A fold over the T columns of a short row reads what it reduces through T column slices
(x[..., c], each one element of the last dimension): T index paths of one value, which the
fusion took for T recomputations (a buffer for exp(x - max) in jax.nn.logsumexp, 2x the
fold's time) though each element is generated once. And a row value broadcast back along
the row (the fold's max) reached through the T slices is one value per row, generated once
(the emitter's memo), not T times (logsumexp over 16 columns counted past the kernel size
limit, fusion_plan.MAX_GENERATED, and split into three kernels).
"""

from __future__ import annotations

from typing import Any

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


def expands(i: Instruction) -> bool:
    """A broadcast out of a smaller array (a row value back over its rows): the fusion
    charges a consumer nothing of the value's chain (10-class cross entropy: x - max(x)
    over [65536, 10] was buffered for two kernels, the fold of the max recomputed per row
    in scalar code, 1.8 ms; the max's own buffer is a tenth of it, in lanes)."""
    return i.opcode == "broadcast_in_dim" and i.operands[0].shape.rank > 0 and \
        i.shape.num_elements >= 2 * i.operands[0].shape.num_elements


__all__ = ["MAX_SLICES", "column_slice", "disjoint_slices", "expands", "forget_columns"]
