"""Tiled loops for kernels that read a big operand transposed.

A kernel walks its output in row-major order. Through a transpose that swaps the last two
dimensions, its innermost loop then reads the operand down a column: one element per cache
line and, once the operand's rows are a page or more apart, one page per element. A 4096 x
1024 f32 transpose took 12.9 ms here (2.5 GB/s; XLA 1.5 ms), and so did every kernel that
fuses one (the weight gradient `(x^T g)^T` of a dense layer).

Such a kernel runs its last two output dimensions in square blocks instead, a cache line of
the operand's elements a side (`TILE_BYTES`): within a block each of the operand's lines is
read whole, and the block's lines stay in L1 until it is done. 4096 x 1024 f32: 12.9 ->
1.33 ms (XLA 1.46-1.59); blocks of 32 ran 1.65, of 64 2.09, of 8 3.0. The values are the
same (each element is computed as before, only in another order); the thread split (the
first dimension's [begin, end)) is unchanged.

A whole block of 4-byte elements read through a transpose of only the last two dimensions
of a leaf is staged: its 16 source rows load as vectors, four 8 x 8 register transposes
store it into a stack block in the output's order, and the block's rows are emitted in
vectors reading that instead (where every other read of the kernel is unit-stride along
the rows too: LaneCheck, the transpose counted as a leaf). The kernel compiles as explicit
vector code (its edge loops read columns: no vectorizer helps them; letting LLVM vectorize
the staged loops instead cost 25-30 ms more of a cold compile). The element loop had been
one scalar load, flush, operation and store per element: on Zen 4 the 4096 x 1024 f32
`x.T + 0` took 4.4 ms (XLA 2.6-2.9), instruction-bound at ~8 cycles an element.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.index_emit import INDEX_OPS
from xlapy.backends.cpu.lanes import Lane, LaneCheck, index_key, vector_width
from xlapy.backends.cpu.llvm_util import for_range, i64, smin
from xlapy.ir import Instruction

#: Bytes of the operand's elements per side of a block (16 x 16 f32; 8 x 8 f64).
TILE_BYTES = 64
#: Transposed operands of fewer bytes keep the plain loops (they stay in L2 either way).
MIN_BYTES = 1 << 20
#: The side of a staged block (4-byte elements: TILE_BYTES // 4), in 8 x 8 register blocks.
STAGE = 16
#: shufflevector masks of an 8 x 8 transpose: interleave rows, then pairs, then quads.
_PAIRS = ([0, 8, 1, 9, 4, 12, 5, 13], [2, 10, 3, 11, 6, 14, 7, 15])
_QUADS = ([0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15])
_HALVES = ([0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15])


#: Ops that generate an operand at an index other than their own (the rest are elementwise).
_REINDEXING = frozenset({"broadcast_in_dim", "reshape", "transpose", "slice", "reverse", "iota",
                         "dynamic_iota", "constant", "reduce", "bitcast_convert",
                         "reduce_precision"}) | INDEX_OPS


def _reaches(x: Instruction, t: Instruction, leaves: dict[int, int]) -> bool:
    """Whether the kernel generates `t` on the way to `x`."""
    stack, seen = [x], set()
    while stack:
        i = stack.pop()
        if i is t:
            return True
        if id(i) in seen or id(i) in leaves:
            continue
        seen.add(id(i))
        stack.extend(i.operands)
    return False


def _read_in_place(root: Instruction, t: Instruction, leaves: dict[int, int]) -> bool:
    """Whether the kernel reads `t` at its own element only: every op between root and t
    is elementwise (the staged block has no other element of t)."""
    stack, seen = [root], set()
    while stack:
        i = stack.pop()
        if i is t or id(i) in seen or (id(i) in leaves and i is not root):
            continue
        seen.add(id(i))
        for o in i.operands:
            if i.opcode in _REINDEXING or o.shape.dimensions != i.shape.dimensions:
                if _reaches(o, t, leaves):
                    return False
            else:
                stack.append(o)
    return True


def transpose8(b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """The 8 columns of the 8 x 8 block whose rows are the 8-lane vectors `rows`."""
    def sh(x: ir.Value, y: ir.Value, mask: list[int]) -> ir.Value:
        return b.shuffle_vector(x, y, ir.Constant(ir.VectorType(ir.IntType(32), 8), mask))

    a = [sh(rows[k - k % 2], rows[k - k % 2 + 1], _PAIRS[k % 2]) for k in range(8)]
    q = [sh(a[4 * (k // 4) + (k % 4) // 2], a[4 * (k // 4) + (k % 4) // 2 + 2], _QUADS[k % 2])
         for k in range(8)]
    return [sh(q[k % 4], q[k % 4 + 4], _HALVES[k // 4]) for k in range(8)]


def _swaps_inner(instr: Instruction, root: Instruction) -> int:
    """The block side (elements) for a transpose of root's shape whose output's innermost
    dimension is an outer one of its operand and whose next-to-innermost is the operand's
    innermost (a column read), of MIN_BYTES or more; else 0."""
    if instr.opcode != "transpose" or instr.shape.dimensions != root.shape.dimensions:
        return 0
    perm = list(instr.attrs.permutation)
    dims, r, size = instr.shape.dimensions, len(perm), instr.shape.dtype.itemsize
    big = int(np.prod(dims)) * size >= MIN_BYTES
    side = max(8, TILE_BYTES // size)
    # (matrices smaller than a block both ways: each is read whole by the plain loops, which
    # the block loops only slowed - jnp.swapaxes of 65536 3 x 3: 0.34 -> 0.23 ms, 4 x 6 0.67
    # -> 0.42, 15 x 15 0.52 -> 0.35)
    small = r >= 2 and dims[-1] < side and dims[-2] < side
    return side if r >= 2 and perm[-1] != r - 1 and perm[-2] == r - 1 and big and \
        not small else 0


class TileEmitter:
    """`_tile_nest` for KernelEmitter's `_nest` (its `b`, `root`, `leaves`, `rows`, `width`,
    `segmented`)."""

    b: ir.IRBuilder
    root: Instruction
    leaves: dict[int, int]
    rows: list[Instruction]
    width: int
    segmented: bool

    def _tiled(self) -> int:
        """The block side when the kernel reads a big operand through a transpose of its
        inner two dimensions (scalar loops, no row reductions), else 0: decided once."""
        got = self.__dict__.get("_tile_decision")
        if got is None:
            got = 0
            root = self.root
            if not self.rows and not self.width and not self.segmented and \
                    root.opcode != "reduce" and root.shape.is_array and root.shape.rank >= 2:
                stack, seen = [root], set()
                while stack and not got:
                    i = stack.pop()
                    if id(i) in seen or (id(i) in self.leaves and i is not root):
                        continue
                    seen.add(id(i))
                    got = _swaps_inner(i, root)
                    self.__dict__["_tile_transpose"] = i if got else None
                    stack.extend(i.operands)
            self.__dict__["_tile_decision"] = got
        return got

    def _tile_nest(self, dims: Sequence[int], begin: ir.Value, end: ir.Value,
                   body: Callable[[list[Any]], None], idx: list[Any] | None) -> bool:
        """The loops over `dims` with the last two in square blocks, calling body(idx)
        innermost, if the kernel is `_tiled` (else False: the caller emits its own)."""
        tile = self._tiled()
        if idx or len(dims) < 2 or not tile:
            return False
        stageable = self._stageable()
        b, r = self.b, len(dims)

        def bound(d: int) -> tuple[ir.Value, ir.Value]:
            return (begin, end) if d == 0 else (i64(0), i64(dims[d]))

        def outer(prefix: list[Any], d: int) -> None:
            if d < r - 2:
                lo, hi = bound(d)
                with for_range(b, lo, hi, name=f"t{d}") as i:
                    outer(prefix + [i], d + 1)
                return
            lo, hi = bound(d)
            with for_range(b, lo, hi, name="ti", step=tile) as i0:
                i1 = smin(b, b.add(i0, i64(tile)), hi)
                with for_range(b, i64(0), i64(dims[-1]), name="tj", step=tile) as j0:
                    j1 = smin(b, b.add(j0, i64(tile)), i64(dims[-1]))
                    if stageable:
                        staged_or_edge(prefix, i0, i1, j0, j1)
                    else:
                        block(prefix, i0, i1, j0, j1)

        def staged_or_edge(prefix: list[Any], i0: ir.Value, i1: ir.Value, j0: ir.Value,
                           j1: ir.Value) -> None:
            whole = b.and_(b.icmp_signed("==", b.sub(i1, i0), i64(STAGE)),
                           b.icmp_signed("==", b.sub(j1, j0), i64(STAGE)))
            with b.if_else(whole) as (staged, edge):
                with staged:
                    self._stage(prefix, i0, j0)
                    lanes(prefix, i0, j0)
                with edge:
                    block(prefix, i0, i1, j0, j1)

        def lanes(prefix: list[Any], i0: ir.Value, j0: ir.Value) -> None:
            """The staged block's rows in vectors of the target's width (width is set for
            them only: the edge blocks stay scalar)."""
            w = self.width = vector_width()
            with for_range(b, i0, b.add(i0, i64(STAGE)), name="si") as i:
                for jv in range(0, STAGE, w):
                    idx = prefix + [i, Lane(j0, jv)]
                    self.__dict__["_staged_at"] = (tuple(index_key(v) for v in idx), i, i0,
                                                   jv)
                    body(idx)
            self.width = 0
            self.__dict__["_staged_at"] = None

        def block(prefix: list[Any], i0: ir.Value, i1: ir.Value, j0: ir.Value,
                  j1: ir.Value) -> None:
            with for_range(b, i0, i1, name="ii") as i:
                with for_range(b, j0, j1, name="jj") as j:
                    body(prefix + [i, j])

        outer([], 0)
        return True

    def _stageable(self) -> bool:
        """The tiled transpose reads a leaf of 4-byte elements and swaps only its last two
        dimensions (the blocks are STAGE a side, the lane width divides STAGE), the kernel
        reads it only at its own element (`_read_in_place`), and LaneCheck admits the rest
        of the kernel in vectors, the transpose counted as a leaf."""
        t = self.__dict__.get("_tile_transpose")
        if t is None or self._tiled() != STAGE or id(t.operands[0]) not in self.leaves:
            return False
        perm, r = list(t.attrs.permutation), len(t.attrs.permutation)
        st = ew.storage_type(t.shape.element_type)
        four = isinstance(st, ir.FloatType) or (isinstance(st, ir.IntType) and st.width == 32)
        w = vector_width()
        return perm == [*range(r - 2), r - 1, r - 2] and four and w > 1 and STAGE % w == 0 \
            and _read_in_place(self.root, t, self.leaves) and LaneCheck(
                {**self.leaves, id(t): -1}, self.rows, lambda _: None).kernel(self.root,
                                                                              self.rows)

    def _stage(self, prefix: list[Any], i0: ir.Value, j0: ir.Value) -> None:
        """The block at output (i0, j0) of the transposed leaf into the stack block, row
        i - i0 holding output columns j0 ... j0 + STAGE - 1."""
        b, t = self.b, self.__dict__["_tile_transpose"]
        src = t.operands[0]
        base = self.ptr(self.leaves[id(src)], src.shape.element_type)
        st = base.type.pointee
        if self.__dict__.get("_stage_buf") is None:
            with b.goto_entry_block():
                self.__dict__["_stage_buf"] = b.alloca(ir.ArrayType(st, STAGE * STAGE),
                                                       name="stage")
                self.__dict__["_stage_buf"].align = 32
        buf, v8 = self.__dict__["_stage_buf"], ir.VectorType(st, 8).as_pointer()
        for rq in (0, 8):
            for cq in (0, 8):
                rows = []
                for r in range(8):
                    at = prefix + [b.add(j0, i64(rq + r)), b.add(i0, i64(cq))]
                    p = b.gep(base, [self.linear(at, src.shape.dimensions)])
                    rows.append(b.load(b.bitcast(p, v8), align=4))
                for c, col in enumerate(transpose8(b, rows)):
                    q = b.gep(buf, [i64(0), i64((cq + c) * STAGE + rq)])
                    b.store(col, b.bitcast(q, v8), align=4)

    def staged(self, instr: Instruction, idx: Sequence[Any]) -> ir.Value | None:
        """The tiled transpose's elements at the current vector of a staged block, read
        from the stack block; None anywhere else."""
        at = self.__dict__.get("_staged_at")
        if at is None or instr is not self.__dict__.get("_tile_transpose"):
            return None
        keys, i, i0, jv = at
        if tuple(index_key(v) for v in idx) != keys:
            return None
        b = self.b
        off = b.add(b.mul(b.sub(i, i0), i64(STAGE)), i64(jv))
        p = b.gep(self.__dict__["_stage_buf"], [i64(0), off])
        v = self._access(p, idx)  # type: ignore[attr-defined]
        return ew.from_storage(b, v, instr.shape.element_type)

    @property
    def staged_lanes(self) -> bool:
        """Whether the kernel's staged blocks were emitted in vectors (it is compiled as
        explicit vector code: its other loops read columns, which no vectorizer helps)."""
        return self.__dict__.get("_stage_buf") is not None


__all__ = ["TileEmitter", "TILE_BYTES", "MIN_BYTES", "STAGE", "transpose8"]
