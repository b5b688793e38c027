"""Software prefetch of the next rows in row kernels (softmax, layernorm).

A row kernel makes several passes over each row: the first reads it from memory (L3 here),
the later ones from L1. Rows of 4 KB start on a new page, where the hardware streamers
stop, so each row's first pass waited for its lines while the later passes (softmax's exp,
layernorm's variance) kept the memory system idle. So the first later pass that reads an
input again from L1 also prefetches the same columns `ahead` rows further, one prefetch
per vector: the loads of the next rows overlap this row's arithmetic (softmax 0.98 -> 0.86
ms on 2 threads, layernorm 0.72 -> 0.65, against a 0.60-0.66 ms copy of the same bytes).
A mixin of KernelEmitter: `load` calls `_prefetch_ahead` for each vector load of a leaf.
Prefetches never fault, so rows past a thread's range or the buffer's end cost nothing but
the instruction; the values computed are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu.lanes import Lane, index_key, row_strides
from xlapy.backends.cpu.llvm_util import i64, prefetch
from xlapy.ir import Instruction

#: How far ahead to prefetch, in bytes of each input: whole rows, at least one. A 4 KB
#: row (softmax's 1024 f32) is fetched four rows ahead, a 1 KB row sixteen. One row ahead
#: (4096) left the first pass waiting on Zen 4: softmax over 4096 x 1024, same process,
#: min / p10 of 200 rounds, 0.879 / 1.074 -> 0.812 / 0.926 ms (x86-64-v3 code: 1.096 / 1.233
#: -> 1.032 / 1.134); layernorm 0.709 / 0.875 -> 0.645 / 0.781; attention and the
#: transformer block alike (their rows are in L2).
AHEAD_BYTES = 16384
#: Rows longer than this are not prefetched (a row further than L2 holds would be evicted
#: before it is read). Up to there it pays even past L1 (48 KB here), where the next row
#: evicts this one's lines to L2: softmax over rows of 8192 / 16384 / 65536 f32 (32 KB to
#: 256 KB) 2.33 -> 1.95, 3.68 -> 2.75, 3.65 -> 2.77 ms; layernorm over 8192: 2.48 -> 2.19.
MAX_ROW_BYTES = 256 << 10


class RowPrefetchEmitter:
    """Prefetching for KernelEmitter (its `b`, `rows`, `row_depth`, `width`), and where a
    row's indices are (`in_row`, `_unflatten`)."""

    b: ir.IRBuilder
    rows: list[Instruction]
    row_depth: int
    row_index: list[ir.Value]
    width: int
    #: The index of the current pass over the row (row reductions in order, then the
    #: root's innermost loop); -1 outside a row.
    row_pass: int
    #: slot -> the pass that first read that leaf in the current row.
    row_reads: dict[int, int]
    #: slot -> the pass that prefetches that leaf's next rows.
    row_prefetching: dict[int, int]

    def _begin_row(self) -> None:
        """A new row: its passes counted from 0, no leaf read yet."""
        self.row_pass = -1
        self.row_reads = {}
        self.row_prefetching = {}

    def _next_pass(self) -> None:
        """A column loop over the current row starts (a row reduction or the root's)."""
        if self.rows:
            self.row_pass += 1

    def _prefetch_ahead(self, slot: int, p: ir.Value, idx: Sequence[Any],
                        dims: Sequence[int], nbytes: int) -> None:
        """After a vector load of leaf `slot` at element pointer p (index idx of a value of
        `dims`, `nbytes` per element): prefetch the same columns `ahead` rows on, if this
        is the first later pass of the row to read the leaf again."""
        if not self._row_operand(idx, dims):
            return
        row_bytes = dims[-1] * nbytes
        if row_bytes > MAX_ROW_BYTES:
            return
        first = self.row_reads.setdefault(slot, self.row_pass)
        if first == self.row_pass:
            return
        if self.row_prefetching.setdefault(slot, self.row_pass) != self.row_pass:
            return
        b = self.b
        ahead = max(1, AHEAD_BYTES // row_bytes)
        # (not inbounds: may lie past the buffer); into L1
        prefetch(b, b.gep(p, [i64(ahead * dims[-1])]))

    def _row_operand(self, idx: Sequence[Any], dims: Sequence[int]) -> bool:
        """idx reads W lanes of the current row of a row-major array whose leading
        dimensions are the rows' (its next row lies dims[-1] elements further)."""
        if not self.rows or self.row_pass < 0 or len(idx) != self.row_depth + 1:
            return False
        if not isinstance(idx[-1], Lane) or any(isinstance(v, Lane) for v in idx[:-1]):
            return False
        return tuple(dims[:-1]) == tuple(self.rows[0].shape.dimensions) and \
            self.in_row(idx[:-1], dims[:-1])

    def _unflatten(self, p: ir.Value, dims: Sequence[int]) -> list[ir.Value]:
        """The indices of row p of the leading `dims` (0 along an extent-1 dimension)."""
        b, out = self.b, []
        for d, (n, s) in enumerate(zip(dims, row_strides(dims))):
            if n == 1:
                out.append(i64(0))
                continue
            v = p if s == 1 else b.udiv(p, i64(s))
            out.append(v if d == 0 else b.urem(v, i64(n)))
        return out

    def in_row(self, idx: Sequence[ir.Value], dims: Sequence[int]) -> bool:
        """idx (of a value with leading `dims`) is the current row's (extent 1: index 0)."""
        return len(idx) == len(self.row_index) and all(
            n == 1 or index_key(v) == index_key(r)
            for v, r, n in zip(idx, self.row_index, dims))


__all__ = ["RowPrefetchEmitter", "AHEAD_BYTES", "MAX_ROW_BYTES"]
