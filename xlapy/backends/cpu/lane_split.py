"""Reshape indices, and vector lanes through a reshape that splits the lane's dimension.

Group norm (JAX reshapes [n, h, w, c] to [n, h, w, g, c / g] for its statistics and back),
kron and tiling index an operand at (c // s) % n along the lane's dimension c. With the
lanes' first index a multiple of the width W (lanes.LaneCheck tracks it), each such index
is one value for all lanes (s a multiple of W), start + k // s, or (k // s) % n for lane k
(lanes.split_rule): a `LanePattern`. A leaf read at pattern indices covers the elements
[e, e + m) for some m <= W (LaneCheck admits no other): one short load and a shuffle. The
kernel otherwise went to LLVM's loop vectorizer as scalar IR with a division and remainder
per element (group norm's normalization: 1.7x XLA's time).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.lanes import (
    Lane,
    LanePattern,
    index_key,
    pattern_offsets,
    row_strides,
    shared_dims,
    split_rule,
    unit_map,
)
from xlapy.backends.cpu.llvm_util import I32, I64, broadcast, i64, type_bytes


class LaneSplitEmitter:
    """KernelEmitter's reshape indices and pattern reads (a mixin)."""

    b: ir.IRBuilder
    width: int
    stack: int  # (KernelEmitter's: a minor stack's columns, its vectors whole)

    def _reshape_index(self, idx: Sequence[Any], out: Sequence[int],
                       src: Sequence[int]) -> list[Any]:
        """Operand indices of a reshape; shared trailing/leading dims map directly."""
        b = self.b
        units = unit_map(out, src) if any(isinstance(v, LanePattern) for v in idx) else None
        if units is not None:  # (as lanes.merged)
            back = {s: o for o, s in units.items()}
            return [idx[back[d]] if d in back else i64(0) for d in range(len(src))]
        lead, trail = shared_dims(out, src)
        mid_out, mid_src = list(out[lead:len(out) - trail]), list(src[lead:len(src) - trail])
        part = list(idx[lead:len(idx) - trail])
        split = bool(part) and isinstance(part[-1], Lane)
        if split:  # split lanes (LaneCheck: aligned, the last dimension or pinned columns)
            if part[-1].off % self.width:
                raise RuntimeError("internal error: a reshape splits unaligned lanes")
            part[-1] = self._lane0(part[-1])  # type: ignore[attr-defined]
        elif any(isinstance(v, LanePattern) for v in part):  # (lanes.merged: whole lanes)
            split = True
            part = [v.start if isinstance(v, LanePattern) else v for v in part]
        # Indices the loop being emitted fixes are divided before it, so what reads the
        # operand there is hoisted too (hoist_emit): a softmax's probability split [h, 16, 16]
        # for the sum over t of p[h, t] * v[t, h, :] was an exp and a divide per vector.
        phase = None if split else self._invariant(part)  # type: ignore[attr-defined]
        key = ("reshape", tuple(index_key(v) for v in part), tuple(mid_out), tuple(mid_src))

        def once(k: Any, make: Any) -> ir.Value:
            return make() if phase is None else self.at_phase(  # type: ignore[attr-defined]
                phase, (key, k), make)

        lin = once("lin", lambda: self.linear(part, mid_out))  # type: ignore[attr-defined]
        mid: list[Any] = []
        total = math.prod(mid_src)
        whole = bool(self.stack)  # (LaneCheck.whole: a minor stack's lanes)
        for s, n in zip(row_strides(mid_src), mid_src):
            if n == 1:
                mid.append(i64(0))
                continue

            def index(s: int = s, n: int = n) -> ir.Value:  # (lin // s) % n
                return b.urem(b.udiv(lin, i64(s)) if s != 1 else lin, i64(n))
            how = split_rule(s, n, self.width, whole and s * n == total) if split else \
                "uniform"
            if how == "periodic":
                mid.append(LanePattern(i64(0), tuple((k // s) % n for k in range(self.width))))
            elif how == "div":
                start = index()
                mid.append(Lane(start) if s == 1 else
                           LanePattern(start, tuple(k // s for k in range(self.width))))
            elif how == "uniform":
                mid.append(once(s, index))
            else:
                raise RuntimeError("internal error: a reshape splits lanes unevenly")
        return list(idx[:lead]) + mid + list(idx[len(idx) - trail:])

    def pattern_load(self, slot: int, t: Any, idx: Sequence[Any],
                     dims: Sequence[int]) -> ir.Value:
        """W lanes read at indices with LanePatterns: the m elements they cover, loaded
        once, shuffled into lane order."""
        b = self.b
        pats = {d: v.pattern for d, v in enumerate(idx) if isinstance(v, LanePattern)}
        starts = [v.start if isinstance(v, LanePattern) else v for v in idx]
        offs = pattern_offsets(pats, dims)
        q = max(pats)
        if math.prod(dims[q + 1:]) > 1 and all(isinstance(v, ir.Constant) for v in idx[q + 1:]):
            return self._pattern_column(slot, t, starts, dims, q, offs)
        p = b.gep(self.ptr(slot, t), [self.linear(starts, dims)],  # type: ignore[attr-defined]
                  inbounds=True)
        st = p.type.pointee
        m = max(offs) + 1
        v = b.load(b.bitcast(p, ir.VectorType(st, m).as_pointer()), align=type_bytes(st))
        if offs != list(range(m)):
            v = b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined),
                                 ir.Constant(ir.VectorType(I32, len(offs)), offs))
        return ew.from_storage(b, v, t)

    def _pattern_column(self, slot: int, t: Any, starts: list[Any], dims: Sequence[int],
                        q: int, offs: list[int]) -> ir.Value:
        """A pattern read of one column (constant indices past dimension q) of short rows:
        the whole rows the lanes cover loaded once (the memo: a minor stack's columns share
        the tile), the column's lanes shuffled out."""
        b = self.b
        col = sum(v.constant * st for v, st in zip(starts[q + 1:], row_strides(dims)[q + 1:]))
        key = ("pattern tile", slot, tuple(dims), tuple(index_key(v) for v in starts[:q + 1]),
               tuple(offs))
        tile = self.memo.get(key)  # type: ignore[attr-defined]
        if tile is None:
            at = self.linear(list(starts[:q + 1]) + [i64(0)] * (len(dims) - q - 1), dims)  # type: ignore
            p = b.gep(self.ptr(slot, t), [at], inbounds=True)  # type: ignore[attr-defined]
            st = p.type.pointee
            m = max(offs) + math.prod(dims[q + 1:])
            tile = b.load(b.bitcast(p, ir.VectorType(st, m).as_pointer()), align=type_bytes(st))
            self.memo[key] = tile  # type: ignore[attr-defined]
        v = b.shuffle_vector(tile, ir.Constant(tile.type, ir.Undefined),
                             ir.Constant(ir.VectorType(I32, len(offs)), [o + col for o in offs]))
        return ew.from_storage(b, v, t)

    def pattern_iota(self, v: LanePattern) -> ir.Value:
        """The index vector start + pattern (an iota along a split lane dimension)."""
        n = len(v.pattern)
        return self.b.add(broadcast(self.b, v.start, n),
                          ir.Constant(ir.VectorType(I64, n), list(v.pattern)))


__all__ = ["LaneSplitEmitter"]
