"""Native reduce whose region is not one binary op (kernels.py's reduce roots): variadic
reduce as jnp.argmax/argmin emit it (value + iota index, a comparator region of compare /
select / or / and) and any other region of scalar element-wise ops (region_emit.py).

Exact to the interpreter's fold (ops/reduction.py `fold_last_axis`): per output element the
reduced elements in row-major order over the sorted reduced dimensions; up to
SEQUENTIAL_LIMIT of them fold left to right from the init values, more combine as the
interpreter's pairwise tree (neighbours level by level, an odd last one carried up), here
computed in one pass with a stack of partial blocks (a binary counter: element i merges with
the blocks its trailing one bits close, the leftovers combine right to left), and the init
values go on the left of the total.

Vector lanes hold independent output elements, each folding as the scalar code does: along
a kept last dimension (contiguous loads), short trailing rows a lane each (one load, a
shuffle a column: `_rows`), longer ones a lane each too, each column one gather
(`_row_gather`: jnp.argmax over 4096 rows of 1024 6.0 -> 0.55 ms, XLA 6.4).
"""

from __future__ import annotations

import math
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import region_emit
from xlapy.backends.cpu.lanes import vector_width
from xlapy.backends.cpu.llvm_util import I32, I64, broadcast, for_range, i64, splat
from xlapy.backends.cpu.op_emit import OpEmitter, strides
from xlapy.ir import Instruction
from xlapy.ops.reduction import SEQUENTIAL_LIMIT

#: Stack depth of the pairwise tree: partial blocks of distinct power-of-two sizes.
_DEPTH = 64
#: Aligned blocks of this many elements fold as one straight-line subtree (no stack).
LOG_BLOCK = 4
BLOCK = 1 << LOG_BLOCK
#: Alignment assumed of element loads and stores (vector ones at any element: 1 byte).
_ALIGN = 1
#: Longest rows folded a row per lane (`_rows`): a segmentation map's argmax over 21
#: classes ran each row's tree scalar, 1.07 ms for 2 x 128 x 128 (XLA's whole program 0.25).
ROW_LANES = 32
#: Elements up to which a scalar fold compiles light too: O3 sped argmax's trees over rows
#: of 1000 by a fifth (6.5 against 8.4 ms for 4M elements) but costs ~50-90 ms of LLVM a
#: kernel, which a small one never earns back (jax.random.categorical over [1024, 100]).
LIGHT_TREE = 1 << 18


def emitter(instr: Instruction) -> type[OpEmitter] | None:
    if instr.opcode != "reduce" or len(instr.called) != 1:
        return None
    n = len(instr.operands) // 2
    shapes = [o.shape for o in instr.operands]
    if n < 1 or not all(s.is_array and region_emit.types_ok(s.element_type) for s in shapes):
        return None
    comp = instr.called[0]
    if not region_emit.supported(comp) or len(region_emit.results(comp)) != n:
        return None
    return ReduceRegionEmitter


def computed_iota(user: Instruction, value: Instruction) -> bool:
    """Whether `user` is a native reduce that computes its operand `value`, an integer iota
    along a dimension it reduces (jnp.argmax's indices), from the element's index: the
    iota gets no buffer (fusion_plan.unread). A [65536, 10] argmax wrote and read 2.6 MB of
    indices per call."""
    if user.opcode != "reduce" or value.opcode != "iota" or emitter(user) is None:
        return False
    at = [k for k, o in enumerate(user.operands) if o is value]
    return bool(at) and all(k < len(user.operands) // 2 for k in at) and \
        _reduced_iota(value, user) is not None


def _reduced_iota(x: Instruction, instr: Instruction) -> int | None:
    """The position among `instr`'s sorted reduced dimensions of the one along which its
    operand `x` is an integer iota, else None."""
    if x.opcode != "iota" or not x.shape.element_type.is_integer:
        return None
    red = sorted(instr.attrs.dimensions)
    d = x.attrs.iota_dimension
    return red.index(d) if d in red else None


class ReduceRegionEmitter(OpEmitter):
    label = "native reduce"

    @staticmethod
    def operands(instr: Instruction) -> list[Instruction]:
        """What each operand slot holds: for an iota it computes (`computed_iota`), the
        slot of the init value paired with it, never read for it."""
        n = len(instr.operands) // 2
        return [instr.operands[n + k] if k < n and _reduced_iota(o, instr) is not None else o
                for k, o in enumerate(instr.operands)]

    def body(self, begin: ir.Value, end: ir.Value) -> tuple[int, bool, int]:
        b = self.b
        instr = self.instr
        n = len(instr.operands) // 2
        xs = instr.operands[:n]
        types = [x.shape.element_type for x in xs]
        dims = list(xs[0].shape.dimensions)
        red = sorted(instr.attrs.dimensions)
        kept = [d for d in range(len(dims)) if d not in red]
        odims = [dims[d] for d in kept]
        rdims = [dims[d] for d in red]
        length = math.prod(rdims)
        comp = self.instr.called[0]
        st = strides(dims)
        ostr = strides(odims)
        outs = [self.result(k, t) if self.tupled else self.ptr(self.out, t)
                for k, t in enumerate(types)]
        inits = [self.load(self.ins[n + k], t, i64(0)) for k, t in enumerate(types)]
        iotas = [_reduced_iota(x, instr) for x in xs]
        w = vector_width()
        # lanes along the last dimension when it is kept (contiguous in operands and
        # results): each lane folds its own output element as the scalar code does
        lanes = w if odims and kept[-1] == len(dims) - 1 and odims[-1] >= w > 1 and \
            length and not any(t.is_complex for t in types) else 0
        gathered = bool(odims) and _row_gathers(w, red, len(dims), length, math.prod(odims),
                                                types)
        slots: dict[int, tuple[list[Any], ...]] = {}
        for width in {0, lanes, w if gathered else 0}:
            cts = [ew.compute_type(t) for t in types]
            if width:
                cts = [ir.VectorType(ct, width) for ct in cts]
            with b.goto_entry_block():
                slots[width] = (
                    [b.alloca(ct, name=f"acc{k}") for k, ct in enumerate(cts)],
                    [b.alloca(ct, name=f"cur{k}") for k, ct in enumerate(cts)],
                    [b.alloca(ir.ArrayType(ct, _DEPTH), name=f"stack{k}")
                     for k, ct in enumerate(cts)],
                    [b.alloca(I64, name="sp")], [b.alloca(I64, name="level")])

        def at(ptr: ir.Value, off: ir.Value, width: int) -> ir.Value:
            p = b.gep(ptr, [off], inbounds=True)
            return b.bitcast(p, ir.VectorType(p.type.pointee, width).as_pointer()) \
                if width else p

        def per_output(oidx: list[ir.Value], width: int = 0, rows: bool = False) -> None:
            """Output element oidx (with `width`, that many: the next along the last kept
            dimension, or with `rows` the next rows, each a lane gathering its own)."""
            acc, cur, stack, (sp,), (level,) = slots[width]

            def fn(a: list[ir.Value], x: list[ir.Value]) -> list[ir.Value]:
                return region_emit.emit(b, comp, [*a, *x], width)

            def element(ridx: list[ir.Value]) -> list[ir.Value]:
                off: ir.Value = i64(0)
                for v, d in zip(oidx, kept):
                    off = b.add(off, b.mul(v, i64(st[d])))
                for v, d in zip(ridx, red):
                    off = b.add(off, b.mul(v, i64(st[d])))
                if rows:
                    return [_row_gather(b, self.ptr(self.ins[k], t), off, length, width, t)
                            if iotas[k] is None else _index(b, ridx[iotas[k]], t, width)
                            for k, t in enumerate(types)]
                return [ew.from_storage(b, b.load(at(self.ptr(self.ins[k], t), off, width),
                                                  align=_ALIGN), t)
                        if iotas[k] is None else _index(b, ridx[iotas[k]], t, width)
                        for k, t in enumerate(types)]

            def element_at(r: ir.Value) -> list[ir.Value]:
                """The element at position r of the reduced elements' row-major order."""
                ridx = []
                for s_, n_ in zip(strides(rdims), rdims):
                    q = b.udiv(r, i64(s_)) if s_ != 1 else r
                    ridx.append(b.urem(q, i64(n_)) if len(rdims) > 1 else q)
                return element(ridx)

            def get(ps: list[ir.Value]) -> list[ir.Value]:
                return [b.load(p) for p in ps]

            def put(ps: list[ir.Value], vs: list[ir.Value]) -> None:
                for p, v in zip(ps, vs):
                    b.store(v, p)

            def slot(k: int, top: ir.Value) -> ir.Value:
                return b.gep(stack[k], [i64(0), top], inbounds=True)

            put(acc, [broadcast(b, v, width) if width else v for v in inits])
            if 0 < length <= SEQUENTIAL_LIMIT:
                self.loops(rdims, lambda r: put(acc, fn(get(acc), element(r))), name="r")
            elif length:
                b.store(i64(0), sp)
                blocks = length // BLOCK

                def push(i: ir.Value, first: int) -> None:
                    """Merge cur with the blocks the trailing one bits of i (from bit
                    `first`) close, then push it."""
                    b.store(i64(first), level)
                    test = b.append_basic_block("merge.test")
                    merge = b.append_basic_block("merge")
                    done = b.append_basic_block("merge.done")
                    b.branch(test)
                    b.position_at_end(test)
                    bit = b.and_(b.lshr(i, b.load(level)), i64(1))
                    b.cbranch(b.icmp_unsigned("!=", bit, i64(0)), merge, done)
                    b.position_at_end(merge)
                    top = b.sub(b.load(sp), i64(1))
                    b.store(top, sp)
                    put(cur, fn([b.load(slot(k, top)) for k in range(n)], get(cur)))
                    b.store(b.add(b.load(level), i64(1)), level)
                    b.branch(test)
                    b.position_at_end(done)
                    here = b.load(sp)
                    for k in range(n):
                        b.store(b.load(cur[k]), slot(k, here))
                    b.store(b.add(here, i64(1)), sp)

                # Whole aligned blocks of BLOCK elements: their subtree straight-line.
                with for_range(b, i64(0), i64(blocks), name="blk") as j:
                    base = b.mul(j, i64(BLOCK))
                    vals = [element_at(b.add(base, i64(e))) for e in range(BLOCK)]
                    while len(vals) > 1:
                        vals = [fn(vals[2 * q], vals[2 * q + 1]) for q in range(len(vals) // 2)]
                    put(cur, vals[0])
                    push(base, LOG_BLOCK)
                with for_range(b, i64(blocks * BLOCK), i64(length), name="t") as i:
                    put(cur, element_at(i))
                    push(i, 0)
                # leftover blocks, right to left: cur = stack[top]; cur = fn(stack[j], cur)
                top = b.sub(b.load(sp), i64(1))
                put(cur, [b.load(slot(k, top)) for k in range(n)])
                with for_range(b, i64(1), b.load(sp), name="left") as j:
                    put(cur, fn([b.load(slot(k, b.sub(top, j))) for k in range(n)], get(cur)))
                put(acc, fn(get(acc), get(cur)))
            o: ir.Value = i64(0)
            for v, s in zip(oidx, ostr):
                o = b.add(o, b.mul(v, i64(s)))
            for k, t in enumerate(types):
                b.store(ew.to_storage(b, b.load(acc[k]), t), at(outs[k], o, width),
                        align=_ALIGN)

        if not odims:
            per_output([])
            return 1, False, max(length, 1)
        rows = math.prod(odims[1:])
        cost = max(math.prod(odims) * length, 1)
        # Vector lanes along the outputs (rows or columns) hold its work: the light pipeline
        # compiles it (jnp.argmin over the columns of [2048, 512]: 119 -> 47 ms, run time
        # the same). Scalar folds keep O3 unless small (LIGHT_TREE; `explicit` is what
        # picks the light pipeline).
        by_rows = _row_lanes(w, red, len(dims), length, math.prod(odims), types)
        self.explicit = bool(lanes) or by_rows or gathered or cost <= LIGHT_TREE
        if by_rows or gathered:
            # a vector of consecutive rows at a time (short ones shuffled out of one load,
            # long ones gathered column by column, each lane the scalar tree), then the last
            # few alone
            def flat(o: ir.Value) -> list[ir.Value]:
                return [b.urem(b.udiv(o, i64(s_)), i64(n_)) if s_ > 1 or len(odims) > 1 else o
                        for s_, n_ in zip(ostr, odims)]

            lo, hi = b.mul(begin, i64(rows)), b.mul(end, i64(rows))
            full = b.add(lo, b.mul(b.udiv(b.sub(hi, lo), i64(w)), i64(w)))
            with for_range(b, lo, full, name="ov", step=w) as o:
                if by_rows:
                    self._rows(o, w, length, red, types, inits, outs)
                else:
                    per_output(flat(o), w, rows=True)
            with for_range(b, full, hi, name="os") as o:
                per_output(flat(o))
            return odims[0], True, cost
        if not lanes:
            self.loops(odims, per_output, (begin, end), name="o")
            return odims[0], True, cost

        # whole vectors of columns (splits at multiples of a vector): no scalar rest, nor
        # its code (half of argmin over [2048, 512]'s IR: 26 -> 13 ms of LLVM)
        whole = odims[-1] % lanes == 0
        if whole and len(odims) == 1:
            self.align = lanes

        def columns(oidx: list[ir.Value]) -> None:
            lo, hi = (begin, end) if not oidx else (i64(0), i64(odims[-1]))
            full = hi if whole else \
                b.add(lo, b.mul(b.udiv(b.sub(hi, lo), i64(lanes)), i64(lanes)))
            with for_range(b, lo, full, name="ov", step=lanes) as c:
                per_output([*oidx, c], lanes)
            if not whole:
                with for_range(b, full, hi, name="os") as c:
                    per_output([*oidx, c])

        if len(odims) == 1:
            columns([])
        else:
            self.loops(odims[:-1], columns, (begin, end), name="o")
        return odims[0], True, cost

    def _rows(self, o: ir.Value, w: int, length: int, red: list[int], types: list[Any],
              inits: list[ir.Value], outs: list[ir.Value]) -> None:
        """Output elements o .. o + w - 1 (rows of `length` contiguous elements), a lane
        each, every lane folding its row left to right from the inits as the scalar code
        does (jnp.argmin over 16 columns folded one row at a time, its compare / select
        chain a row's latency: 0.63 ms for 8192 rows against XLA's 0.08). The w rows are one
        load, each column a shuffle of it; an iota along a reduced dimension (argmax's
        indices) is the column's position, not loaded."""
        b = self.b
        dims = self.instr.operands[0].shape.dimensions
        first = len(dims) - len(red)
        rdims = dims[first:]
        start = b.mul(o, i64(length))
        iotas = [_reduced_iota(x, self.instr) for x in self.instr.operands[:len(types)]]
        tiles: list[ir.Value | None] = []
        for k, t in enumerate(types):
            if iotas[k] is not None:
                tiles.append(None)
                continue
            p = b.gep(self.ptr(self.ins[k], t), [start], inbounds=True)
            vt = ir.VectorType(ew.storage_type(t), w * length)
            tiles.append(b.load(b.bitcast(p, vt.as_pointer()), align=_ALIGN))
        def fn(a: list[ir.Value], x: list[ir.Value]) -> list[ir.Value]:
            return region_emit.emit(b, self.instr.called[0], [*a, *x], w)

        cols = []
        for j in range(length):
            column = ir.Constant(ir.VectorType(I32, w), [q * length + j for q in range(w)])
            xs = []
            for tile, t, d in zip(tiles, types, iotas):
                if d is not None:  # an iota along reduced dimension d: j's index there
                    pos = j // math.prod(rdims[d + 1:]) % rdims[d]
                    xs.append(splat(ir.VectorType(ew.compute_type(t), w), pos))
                else:
                    xs.append(ew.from_storage(
                        b, b.shuffle_vector(tile, ir.Constant(tile.type, None), column), t))
            cols.append(xs)
        acc = [broadcast(b, v, w) for v in inits]
        if length <= SEQUENTIAL_LIMIT:
            for xs in cols:
                acc = fn(acc, xs)
        else:  # the interpreter's pairwise tree: neighbours level by level, an odd last up
            while len(cols) > 1:
                cols = [fn(cols[2 * q], cols[2 * q + 1]) for q in range(len(cols) // 2)] + \
                    cols[len(cols) - len(cols) % 2:]
            acc = fn(acc, cols[0])
        for k, t in enumerate(types):
            p = b.gep(outs[k], [o], inbounds=True)
            v = ew.to_storage(b, acc[k], t)
            b.store(v, b.bitcast(p, v.type.as_pointer()), align=_ALIGN)


def _index(b: ir.IRBuilder, v: ir.Value, t: Any, width: int) -> ir.Value:
    """Index v (i64) as a value of integer type t, splat over `width` lanes (0: scalar)."""
    ct = ew.compute_type(t)
    x = b.trunc(v, ct) if ct.width < 64 else v
    return broadcast(b, x, width) if width else x


def _row_gather(b: ir.IRBuilder, base: ir.Value, off: ir.Value, length: int, w: int,
                t: Any) -> ir.Value:
    """The elements at off, off + length, ... (w rows' same column) as one gather."""
    from xlapy.backends.cpu.gather_lanes import element_pointers, masked_gather

    lanes = ir.Constant(ir.VectorType(I32, w), [q * length for q in range(w)])
    ptrs = element_pointers(b, base, [off, lanes], w)
    return ew.from_storage(b, masked_gather(b, ptrs, ew.storage_type(t), w), t)


def _row_gathers(w: int, red: list[int], rank: int, length: int, outputs: int,
                 types: list[Any]) -> bool:
    """Whether a reduce folds rows longer than ROW_LANES a lane each, gathering each
    column (`_row_gather`), every lane the scalar tree of its row: jnp.argmax over rows of
    1024 had run that tree scalar, 6.0 ms for 4096 rows (XLA 7.4, jnp.max 0.3)."""
    return w > 1 and red == list(range(rank - len(red), rank)) and length > ROW_LANES and \
        outputs >= w and outputs * length < 1 << 31 and \
        not any(t.is_complex or t.bits < 8 for t in types)


def _row_lanes(w: int, red: list[int], rank: int, length: int, outputs: int,
               types: list[Any]) -> bool:
    """Whether a reduce folds whole rows a lane each (`_rows`): it reduces the trailing
    dimensions, at most ROW_LANES elements (past SEQUENTIAL_LIMIT in the interpreter's
    pairwise tree, unrolled; longer rows take the scalar tree, straight-line blocks of 16),
    into at least a vector of outputs."""
    return w > 1 and red == list(range(rank - len(red), rank)) and \
        0 < length <= ROW_LANES and outputs >= w and \
        not any(t.is_complex for t in types)


__all__ = ["emitter", "ReduceRegionEmitter"]
