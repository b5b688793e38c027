"""Index and data-movement ops generated per output index inside a kernel (XLA's elemental
emitter): concatenate, pad, dynamic_slice, dynamic_update_slice and gather.

Each maps an output index to one operand index (or to a padding value), so a chain through
them still costs one pass over memory and they fuse with their producers and consumers.
Where the operand depends on the index (which concatenate operand, padding or not, inside
the update window or not) the emitter branches: only the chosen side is computed, so an
operand is never read outside its bounds. Run-time starts (dynamic_slice,
dynamic_update_slice, gather) are clamped as the interpreter clamps them
(clamp(start, 0, dim - size), unsigned indices compared unsigned, so a huge u64 clamps high).

A kernel whose root is a concatenate, pad or dynamic_update_slice that branches along the
innermost dimension splits its innermost loop into segments instead (`segments`): one loop
per range of that dimension where the branch goes one way, each with the case forced, so the
loops have no branch on it and may run in lanes (a 1024 x 1024 concatenate along dimension
1 is two copy loops per row).

Lanes (lanes.LaneCheck, `index_lane_ok`): a branch condition must not depend on the
innermost (lane) index, so these ops are vectorizable only along dimensions where they are a
plain shift: concatenate along another dimension, pad that only crops there, dynamic_slice
along any dimension (its start is uniform), dynamic_update_slice where the update spans the
whole dimension, gather along an offset dimension (its starts come from the batch indices).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import gather_lanes
from xlapy.backends.cpu.lanes import Lane, LaneCheck
from xlapy.backends.cpu.llvm_util import I64, broadcast, i64, like, splat
from xlapy.ir import Instruction
from xlapy.ops.indexing import batch_dims_of_indices
from xlapy.types import ElementType as ET

#: The ops this module generates (kernel_ops.fusible admits them).
INDEX_OPS = frozenset({"concatenate", "pad", "dynamic_slice", "dynamic_update_slice",
                       "gather"})


def index_to_i64(b: ir.IRBuilder, v: ir.Value, et: ET) -> ir.Value:
    """An integer index value (compute type of `et`; scalar or vector) widened to i64 with
    its signedness."""
    t = like(v.type, I64)
    if v.type == t:
        return v
    return b.sext(v, t) if et.is_signed else b.zext(v, t)


def clamp_start(b: ir.IRBuilder, v: ir.Value, et: ET, hi: int) -> ir.Value:
    """clamp(v, 0, hi) on the index's mathematical value (hi >= 0; scalar or vector, as i64):
    signed indices clamp both ways, unsigned ones only from above (compared unsigned, so no
    u64 wraps negative). An index narrower than 64 bits clamps in its own width (no bound
    past its largest value) and is widened after: the same value, without the 64-bit
    compares on twice the vectors (an s32 gather on AVX-512: 10 instructions a vector)."""
    bits = (v.type.element if isinstance(v.type, ir.VectorType) else v.type).width
    most = (1 << (bits - 1 if et.is_signed else bits)) - 1  # the type's largest value
    zero, top = splat(v.type, 0), splat(v.type, min(hi, most))
    if et.is_signed:
        v = b.select(b.icmp_signed("<", v, zero), zero, v)
    if hi < most:
        v = b.select((b.icmp_signed if et.is_signed else b.icmp_unsigned)(">", v, top), top, v)
    return v if bits == 64 else b.zext(v, like(v.type, I64))  # (a non-negative value)


def _shift(b: ir.IRBuilder, v: Any, by: ir.Value | int) -> Any:
    """Index v + by (by an i64 value or a Python int); a lane index stays a lane index."""
    if isinstance(by, int):
        if by == 0:
            return v
        if isinstance(v, Lane):
            return v.shifted(by)
        if isinstance(v, ir.Constant):  # (a minor stack's column stays a constant)
            return i64(v.constant + by)
        return b.add(v, i64(by), flags=["nsw"])
    if isinstance(v, Lane):
        return v.moved(b.add(v.base, by, flags=["nsw"]))
    return b.add(v, by, flags=["nsw"])


def _minus(b: ir.IRBuilder, v: Any, by: ir.Value | int) -> Any:
    """Index v - by (a run-time i64 or a Python int); a lane index stays a lane index."""
    if isinstance(by, int):
        return _shift(b, v, -by)
    if isinstance(v, Lane):
        return v.moved(b.sub(v.base, by, flags=["nsw"]))
    return b.sub(v, by, flags=["nsw"])


#: Concatenates of more operands than this keep one innermost loop (a loop per operand made
#: a 1000-operand concatenate compile for 12 s): one load through tables when every operand
#: is a buffer (`_concat_table`), else a branch tree.
MAX_SEGMENTS = 16


def segmentable(instr: Instruction) -> bool:
    """Whether a kernel rooted at `instr` splits its innermost loop into segments (an index
    op that would branch along its last dimension)."""
    sh = instr.shape
    if not sh.is_array or sh.rank == 0 or sh.num_elements == 0:
        return False
    last = sh.rank - 1
    op = instr.opcode
    a = instr.attrs
    if op == "concatenate":
        return a.dimension == last and len(instr.operands) <= MAX_SEGMENTS
    if op == "pad":
        return (instr.operands[0].shape.num_elements > 0 and a.interior_padding[last] == 0
                and (a.edge_padding_low[last] > 0 or a.edge_padding_high[last] > 0))
    if op == "dynamic_update_slice":
        operand, update = instr.operands[:2]
        return (update.shape.num_elements > 0
                and update.shape.dimensions[last] != operand.shape.dimensions[last])
    return False


Bound = ir.Value | int


def inner_cuts(root: Instruction, leaves: dict[int, int]
               ) -> dict[tuple[int, int], tuple[Instruction, int, int]]:
    """The concatenates and pads inside an element-wise kernel that branch along its lane
    (LaneCheck.cuts) when with them forced per segment the kernel runs in lanes, in at most
    MAX_SEGMENTS segments; else {}. A stencil over jnp.pad(u, 1, mode="edge") read its
    neighbours through two concatenates, one scalar branch tree per element: 146 us a step
    of 256 x 256 (XLA 68)."""
    check = LaneCheck(leaves, [], lambda _: None, cuts=True)
    if not check.kernel(root, []) or not check.cuts or len(_inner_segments(
            check.cuts.values(), root.shape.dimensions[-1])) > MAX_SEGMENTS:
        return {}
    return check.cuts


def _inner_segments(cuts: Any, extent: int) -> list[tuple[Bound, Bound, dict[Any, Any]]]:
    """The segments of an innermost loop over [0, extent) where each cut (instr, lane
    dimension, shift off: its index is the loop's + off) takes one case: a concatenate's
    operand (its position among the non-empty ones), a pad's "pad" or "in"."""
    starts: list[tuple[Any, list[tuple[int, Any]]]] = []  # (key, [(its index, case)])
    for instr, p, off in cuts:
        if instr.opcode == "concatenate":
            at, pos, cases = 0, 0, []
            for o in instr.operands:
                if o.shape.dimensions[p]:
                    cases.append((at, pos))
                    pos += 1
                at += o.shape.dimensions[p]
        else:  # pad
            lo = instr.attrs.edge_padding_low[p]
            cases = [(-(1 << 62), "pad"), (lo, "in"),
                     (lo + instr.operands[0].shape.dimensions[p], "pad")]
        starts.append(((id(instr), off), [(i - off, c) for i, c in cases]))
    cuts_at = sorted({0, extent, *(j for _, cs in starts for j, _ in cs if 0 < j < extent)})
    # (an op under a pad's cut is not read where that pad pads: any case there)
    return [(a, z, {key: ([c for j, c in cs if j <= a] or [cs[0][1]])[-1]
                    for key, cs in starts}) for a, z in zip(cuts_at, cuts_at[1:])]


def _scalar(v: Any, what: str) -> ir.Value:
    if isinstance(v, Lane):  # LaneCheck keeps lanes off every branching dimension
        raise RuntimeError(f"internal error: {what} reached with a lane index")
    return v


class IndexEmitter:
    """Mixin of KernelEmitter: the per-index generation of INDEX_OPS."""

    b: ir.IRBuilder
    fn: ir.Function
    leaves: dict[int, int]
    memo: dict[Any, ir.Value]
    width: int
    #: id(root) (or (id, lane shift) of an op inside: `cuts`) -> the case its innermost
    #: dimension (its lane's) takes in the segment being emitted.
    forced: dict[Any, Any]
    #: The ops inside the kernel that branch along the lane (LaneCheck.cuts).
    cuts: dict[tuple[int, int], tuple[Instruction, int, int]]

    # KernelEmitter's: per-index generation, a linear buffer offset, a load (or store).
    gen: Callable[[Instruction, Sequence[Any]], ir.Value]
    linear: Callable[[Sequence[Any], Sequence[int]], ir.Value]
    _access: Callable[..., ir.Value]
    _no_hoist: Callable[[], Any]  # HoistEmitter's
    _invariant: Callable[[Sequence[Any]], Any]
    at_phase: Callable[[Any, Any, Callable[[], ir.Value]], ir.Value]

    def _at(self, instr: Instruction, sub: Sequence[Any]) -> ir.Value:
        """gen(instr, sub), keeping `sub` alive: the memo keys index values by id, so a
        temporary index constant must not be freed and its id reused within the kernel."""
        self.__dict__.setdefault("_index_pins", []).append(sub)
        return self.gen(instr, sub)

    def gen_index_op(self, instr: Instruction, idx: Sequence[Any]) -> ir.Value:
        op = instr.opcode
        if op == "concatenate":
            return self._concatenate(instr, idx)
        if op == "pad":
            return self._pad(instr, idx)
        if op == "dynamic_slice":
            return self._dynamic_slice(instr, idx)
        if op == "dynamic_update_slice":
            return self._dynamic_update_slice(instr, idx)
        if op == "gather":
            return self._gather(instr, idx)
        raise KeyError(op)

    # ---- segments ----
    def segments(self, root: Instruction) -> list[tuple[Bound, Bound, dict[Any, Any]]]:
        """[(lo, hi, cases)]: the ranges of the innermost output index of a `segmentable`
        root, or where the `cuts` inside the kernel take one case each, with the cases to
        force (`forced`) while its loop is emitted."""
        if self.cuts:
            return _inner_segments(self.cuts.values(), root.shape.dimensions[-1])
        return [(a, z, {id(root): case}) for a, z, case in self._root_segments(root)]

    def _root_segments(self, root: Instruction) -> list[tuple[Bound, Bound, Any]]:
        last = root.shape.rank - 1
        extent = root.shape.dimensions[last]
        a = root.attrs
        if root.opcode == "concatenate":
            out: list[tuple[Bound, Bound, Any]] = []
            off = 0
            for o in root.operands:  # case: the position among the non-empty operands
                n = o.shape.dimensions[last]
                if n:
                    out.append((off, off + n, len(out)))
                off += n
            return out
        if root.opcode == "pad":
            lo = a.edge_padding_low[last]
            n = root.operands[0].shape.dimensions[last]
            start, stop = min(max(lo, 0), extent), min(max(lo + n, 0), extent)
            cut = [(0, start, "pad"), (start, stop, "in"), (stop, extent, "pad")]
            return [c for c in cut if c[1] > c[0]]
        operand, update, *starts = root.operands  # dynamic_update_slice
        u = update.shape.dimensions[last]
        s = self._start(starts[last], operand.shape.dimensions[last] - u)
        end = self.b.add(s, i64(u), flags=["nsw"])
        return [(0, s, "old"), (s, end, ("new", s)), (end, extent, "old")]

    # ---- branches ----
    def _branch(self, cond: ir.Value, then: Callable[[], ir.Value],
                other: Callable[[], ir.Value]) -> ir.Value:
        """then() if cond else other(): each side in its own block (values generated in one
        are not reused in the other, nor after the merge), joined by a phi."""
        b = self.b
        fn = b.function
        t_bb = fn.append_basic_block("idx.then")
        o_bb = fn.append_basic_block("idx.else")
        merge = fn.append_basic_block("idx.merge")
        b.cbranch(cond, t_bb, o_bb)
        saved = self.memo
        vals: list[ir.Value] = []
        ends: list[ir.Block] = []
        for bb, make in ((t_bb, then), (o_bb, other)):
            b.position_at_end(bb)
            self.memo = dict(saved)
            with self._no_hoist():  # (a load here may be valid only under cond)
                vals.append(make())
            ends.append(b.block)
        self.memo = saved
        vector = next((v.type for v in vals if isinstance(v.type, ir.VectorType)), None)
        for k, end in enumerate(ends):
            b.position_at_end(end)
            if vector is not None:
                vals[k] = broadcast(b, vals[k], vector.count)
            b.branch(merge)
        b.position_at_end(merge)
        phi = b.phi(vals[0].type)
        for v, end in zip(vals, ends):
            phi.add_incoming(v, end)
        return phi

    def _all(self, conds: Sequence[ir.Value]) -> ir.Value:
        b = self.b
        out = conds[0]
        for c in conds[1:]:
            out = b.and_(out, c)
        return out

    def _start(self, operand: Instruction, hi: int) -> ir.Value:
        """A run-time start index (a scalar operand) clamped to [0, hi]."""
        if hi <= 0:
            return i64(0)

        def make() -> ir.Value:
            return clamp_start(self.b, self.gen(operand, []), operand.shape.element_type, hi)
        phase = self._invariant([])  # once before the column loop, not per vector of it
        return make() if phase is None else self.at_phase(phase, ("start", id(operand), hi),
                                                           make)

    # ---- ops ----
    def _concatenate(self, instr: Instruction, idx: Sequence[Any]) -> ir.Value:
        d = instr.attrs.dimension
        parts: list[tuple[Instruction, int]] = []
        off = 0
        for o in instr.operands:
            n = o.shape.dimensions[d]
            if n:
                parts.append((o, off))
            off += n
        if not parts:  # an empty result: never generated per element
            return ew.constant(0, instr.shape.element_type)
        b = self.b

        def part(lo: int, hi: int) -> ir.Value:
            if hi - lo == 1:
                o, start = parts[lo]
                sub = list(idx)
                sub[d] = _shift(b, idx[d], -start)
                return self._at(o, sub)
            mid = (lo + hi) // 2
            if isinstance(idx[d], ir.Constant):  # (a column of a minor stack: no branch)
                return part(lo, mid) if idx[d].constant < parts[mid][1] else part(mid, hi)
            cond = b.icmp_signed("<", _scalar(idx[d], "concatenate"), i64(parts[mid][1]))
            return self._branch(cond, lambda: part(lo, mid), lambda: part(mid, hi))

        k = self.forced.get((id(instr), idx[d].off) if isinstance(idx[d], Lane) else id(instr),
                            self.forced.get(id(instr)))
        if k is not None:  # a segment of the innermost loop: part k throughout
            return part(k, k + 1)
        if len(parts) > MAX_SEGMENTS and all(id(o) in self.leaves for o, _ in parts):
            return self._concat_table(instr, parts, idx)
        return part(0, len(parts))

    def _concat_table(self, instr: Instruction, parts: Sequence[tuple[Instruction, int]],
                      idx: Sequence[Any]) -> ir.Value:
        """A concatenate of many leaf buffers as one load: the operand found by a binary
        search of a constant table of offsets, its buffer slot and size from tables too
        (a branch per operand made a 1000-operand concatenate compile for 10 s)."""
        b = self.b
        d = instr.attrs.dimension
        dims = instr.shape.dimensions
        et = instr.shape.element_type
        size = 1 << (len(parts) - 1).bit_length()  # padded with offsets no index reaches
        big = (1 << 63) - 1
        offs = self._table([off for _, off in parts] + [big] * (size - len(parts)))
        ns = self._table([o.shape.dimensions[d] for o, _ in parts])
        slots = self._table([self.leaves[id(o)] for o, _ in parts])
        i = _scalar(idx[d], "concatenate")
        k: ir.Value = i64(0)
        step = size // 2
        while step:
            c = b.add(k, i64(step))
            k = b.select(b.icmp_signed("<=", self._entry(offs, c), i), c, k)
            step //= 2
        n, off = self._entry(ns, k), self._entry(offs, k)
        raw = b.load(b.gep(self.fn.args[0], [self._entry(slots, k)]))
        base = b.bitcast(raw, ew.storage_type(et).as_pointer())
        inner = 1
        for x in dims[d + 1:]:
            inner *= x
        lin = b.add(b.mul(self.linear(idx[:d], dims[:d]), n), b.sub(i, off))
        lin = b.add(b.mul(lin, i64(inner)), self.linear(idx[d + 1:], dims[d + 1:]))
        p = b.gep(base, [lin], inbounds=True)
        return ew.from_storage(b, self._access(p, idx), et)

    def _table(self, values: Sequence[int]) -> ir.GlobalVariable:
        """A constant i64 array in the kernel's module."""
        mod = self.b.module
        t = ir.ArrayType(I64, len(values))
        g = ir.GlobalVariable(mod, t, name=mod.get_unique_name(f"{self.fn.name}.table"))
        g.global_constant = True
        g.linkage = "internal"
        g.initializer = ir.Constant(t, list(values))
        return g

    def _entry(self, table: ir.GlobalVariable, k: ir.Value) -> ir.Value:
        return self.b.load(self.b.gep(table, [i64(0), k], inbounds=True))

    def _pad(self, instr: Instruction, idx: Sequence[Any]) -> ir.Value:
        operand, value = instr.operands
        a = instr.attrs
        dims = operand.shape.dimensions
        case = self.forced.get(id(instr))
        lane = next((k for k, v in enumerate(idx) if isinstance(v, Lane)), None)
        if case is None and lane is not None:  # a cut inside the kernel (its lane's case)
            case = self.forced.get((id(instr), idx[lane].off))
        else:
            lane = len(dims) - 1  # (the root's case is its last dimension's)
        if any(n == 0 for n in dims) or case == "pad":
            return self.gen(value, [])
        b = self.b
        conds: list[ir.Value] = []
        sub: list[Any] = []
        for k, (n, lo, hi, inner) in enumerate(zip(dims, a.edge_padding_low,
                                                   a.edge_padding_high, a.interior_padding)):
            v = idx[k]
            if (lo <= 0 and hi <= 0 and inner == 0) or (k == lane and case == "in"):
                sub.append(_shift(b, v, -lo))  # inside along k (cropped only, or a segment)
                continue
            rel = b.sub(_scalar(v, "pad"), i64(lo))
            # 0 <= rel <= (n - 1) * (inner + 1), as one unsigned compare.
            conds.append(b.icmp_unsigned("<=", rel, i64((n - 1) * (inner + 1))))
            if inner:
                conds.append(b.icmp_unsigned("==", b.urem(rel, i64(inner + 1)), i64(0)))
                rel = b.udiv(rel, i64(inner + 1))
            sub.append(rel)
        if not conds:
            return self._at(operand, sub)
        return self._branch(self._all(conds), lambda: self._at(operand, sub),
                            lambda: self.gen(value, []))

    def _dynamic_slice(self, instr: Instruction, idx: Sequence[Any]) -> ir.Value:
        operand, *starts = instr.operands
        sizes = instr.attrs.slice_sizes
        sub = [_shift(self.b, v, self._start(s, n - size))
               for v, s, n, size in zip(idx, starts, operand.shape.dimensions, sizes)]
        return self._at(operand, sub)

    def _dynamic_update_slice(self, instr: Instruction, idx: Sequence[Any]) -> ir.Value:
        operand, update, *starts = instr.operands
        dims, udims = operand.shape.dimensions, update.shape.dimensions
        case = self.forced.get(id(instr))
        if any(u == 0 for u in udims) or case == "old":
            return self.gen(operand, idx)
        b = self.b
        conds: list[ir.Value] = []
        sub: list[Any] = []
        last = len(dims) - 1
        for k, (v, s, n, u) in enumerate(zip(idx, starts, dims, udims)):
            if u == n:  # the window spans the dimension (its start clamps to 0)
                sub.append(v)
                continue
            if k == last and case is not None:  # a segment inside the window along k
                sub.append(_minus(b, v, case[1]))
                continue
            rel = b.sub(_scalar(v, "dynamic_update_slice"), self._start(s, n - u))
            conds.append(b.icmp_unsigned("<", rel, i64(u)))
            sub.append(rel)
        if not conds:
            return self._at(update, sub)
        return self._branch(self._all(conds), lambda: self._at(update, sub),
                            lambda: self.gen(operand, idx))

    def _gather(self, instr: Instruction, idx: Sequence[Any]) -> ir.Value:
        operand, indices = instr.operands
        a = instr.attrs
        dn = a.dimension_numbers
        sizes = tuple(a.slice_sizes)
        dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
        if any(sizes[d] == 0 for d in dropped):  # the interpreter's zeros
            return ew.constant(0, instr.shape.element_type)
        b = self.b
        rank = instr.shape.rank
        if any(isinstance(idx[r], Lane) for r in range(rank) if r not in dn.offset_dims):
            return gather_lanes.emit(self, instr, idx)  # (LaneCheck: gather_lanes.eligible)
        batch = [_scalar(idx[r], "gather") for r in range(rank) if r not in dn.offset_dims]
        offsets = iter(idx[r] for r in dn.offset_dims)
        srank = indices.shape.rank
        ivd = dn.index_vector_dim
        # The batch position as an index of the start-index tensor (ivd left out).
        ibatch = dict(zip(batch_dims_of_indices(srank, ivd), batch))
        sub: list[Any] = []
        dims = operand.shape.dimensions
        for d in range(operand.shape.rank):
            if d in dn.operand_batching_dims:
                s = dn.start_indices_batching_dims[list(dn.operand_batching_dims).index(d)]
                sub.append(ibatch[s])
                continue
            off = i64(0) if d in dropped else next(offsets)
            if d not in dn.start_index_map:
                sub.append(off)
                continue
            hi = dims[d] - sizes[d]
            if hi <= 0:
                sub.append(off)
                continue
            k = list(dn.start_index_map).index(d)
            at = [ibatch[j] if j != ivd else i64(k) for j in range(srank)]
            start = clamp_start(b, self._at(indices, at), indices.shape.element_type, hi)
            sub.append(start if d in dropped else _shift(b, off, start))
        return self._at(operand, sub)


__all__ = ["INDEX_OPS", "IndexEmitter", "clamp_start", "index_to_i64", "inner_cuts",
           "segmentable"]
