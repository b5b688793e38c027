"""Columns of a leaf's short rows read with the kernel's lanes along the rows.

A reduce over a short last dimension folded element by element (short_reduce.py: logsumexp,
cross entropy, a norm over 3-16 columns) is a kernel over the rows whose every read is
one column of a leaf, `x[:, c]`, a stride of a row's length between lanes. LaneCheck took
only unit-stride reads, so the kernel was scalar code left to LLVM's loop vectorizer, which
vectorizes power-of-two strides (jax.nn.logsumexp over [65536, 8]: 0.15 ms) but not others
(over 10 columns 0.74 ms, XLA 0.56). Here a vector of rows loads as one tile, its rows'
elements contiguous, and each column read is one shuffle of the tile (the tile loaded once
per vector of rows, shared by the columns: the emitter's memo); the kernel stays explicit
vector code, compiled with the light pipeline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import masked_emit
from xlapy.backends.cpu.lanes import Lane, index_key
from xlapy.backends.cpu.llvm_util import I32, i64, type_bytes


def load(em: Any, slot: int, et: Any, idx: Sequence[Any], dims: Sequence[int]
         ) -> ir.Value | None:
    """The column vector a leaf read at idx returns when idx holds a Lane along a dimension
    p followed by constant indices over a row of 2+ elements (LaneCheck admits it through a
    pinning slice), else None (a unit-stride read)."""
    p = next((d for d, v in enumerate(idx) if isinstance(v, Lane)), None)
    if p is None or math.prod(dims[p + 1:]) == 1:
        return None
    if not all(isinstance(v, ir.Constant) for v in idx[p + 1:]):
        raise RuntimeError("internal error: a column read at a non-constant column")
    cols = math.prod(dims[p + 1:])
    col = 0  # the column: the constant indices past p, row-major in the row
    for d in range(p + 1, len(dims)):
        col = col * dims[d] + idx[d].constant
    rows = list(idx[:p + 1])
    key = ("tile", slot, tuple(dims), tuple(index_key(v) for v in rows))
    b = em.b
    if _transposes(em, cols):
        split = em.memo.get(key)
        if split is None:
            split = em.memo[key] = _deinterleave(
                b, _tile(em, slot, et, rows, dims, cols, cols), cols)
        return ew.from_storage(b, split[col], et)
    tile = em.memo.get(key)
    if tile is None:
        tile = em.memo[key] = _tile(em, slot, et, rows, dims, cols, 1)[0]
    mask = ir.Constant(ir.VectorType(I32, em.width), [q * cols + col for q in range(em.width)])
    return ew.from_storage(b, b.shuffle_vector(tile, ir.Constant(tile.type, None), mask), et)


def _transposes(em: Any, cols: int) -> bool:
    """Whether the tile is split into all its columns at once (log2(cols) rounds of
    two-vector shuffles, cols shuffles each): a power-of-two row length and enough slices
    in the kernel that a shuffle per column (cols - 1 two-vector shuffles each) costs more."""
    if cols & (cols - 1):
        return False
    reads = em.__dict__.get("_column_slices")
    if reads is None:  # (counted once per kernel)
        reads, seen, todo = 0, set(), [em.root]
        while todo:
            i = todo.pop()
            if id(i) in seen or id(i) in em.leaves:
                continue
            seen.add(id(i))
            reads += i.opcode == "slice"
            todo.extend(i.operands)
        em._column_slices = reads
    return reads * (cols - 1) > cols * (cols.bit_length() - 1)


def _deinterleave(b: ir.IRBuilder, parts: list[ir.Value], cols: int) -> list[ir.Value]:
    """The columns of a tile of `cols` vectors (rows of `cols` elements, row-major): split
    into its even and odd elements, each half recursively."""
    if cols == 1:
        return parts
    w = parts[0].type.count
    halves = []
    for r in (0, 1):
        mask = ir.Constant(ir.VectorType(I32, w), list(range(r, 2 * w, 2)))
        halves.append(_deinterleave(b, [b.shuffle_vector(parts[2 * k], parts[2 * k + 1], mask)
                                        for k in range(len(parts) // 2)], cols // 2))
    return [halves[c % 2][c // 2] for c in range(cols)]


def _tile(em: Any, slot: int, et: Any, rows: list[Any], dims: Sequence[int], cols: int,
          parts: int) -> list[ir.Value]:
    """The lanes' rows, whole, in `parts` vector loads (of a masked tail, the live rows
    only)."""
    b = em.b
    n = em.width * cols // parts
    lane = rows[-1]
    first = em.linear([*rows[:-1], em._lane0(lane)], dims[:len(rows)])
    base = b.gep(em.ptr(slot, et), [b.mul(first, i64(cols), flags=["nsw"])], inbounds=True)
    st = ew.storage_type(et)
    align = type_bytes(st)
    out = []
    for k in range(parts):
        vp = b.bitcast(b.gep(base, [i64(k * n)], inbounds=True),
                       ir.VectorType(st, n).as_pointer())
        live = min(n, max(0, lane.live * cols - k * n)) if lane.live else n
        out.append(b.load(vp, align=align) if live == n else
                   masked_emit.access(b, vp, align, live) if live else
                   ir.Constant(vp.type.pointee, None))
    return out


__all__ = ["load"]
