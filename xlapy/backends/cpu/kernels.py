"""Loop nests for fused computations: one LLVM function per kernel.

A kernel computes one root instruction from leaf buffers. Producers between the leaves and
the root (element-wise ops, broadcast, reshape, transpose, slice, reverse, iota, convert,
compare, select, clamp, scalar constants) are generated per output index, so a chain of them
costs one pass over memory. A `reduce` root (a reducer that is one binary op of its two
parameters) walks its input in memory order: the trailing reduced dimensions accumulate in a
register (a vector reduction once LLVM vectorizes it, float sums reassociated), a kept
innermost dimension accumulates into the output row (column reductions vectorize too).

Every kernel has the signature `void(i8** buffers, i64 begin, i64 end)`; [begin, end) is a
range of its outermost loop (`Kernel.outer`), so the thread pool can split it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import (
    bf16_exact,
    column_lanes,
    exp_range,
    flush_ftz,
    latency,
    libm_f32,
    masked_emit,
    minor_stack,
    reverse_emit,
    rotate_emit,
    row_divide,
)
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import elementwise_bits as ewb
from xlapy.backends.cpu import elementwise_complex as ewc
from xlapy.backends.cpu import elementwise_convert as ewconv
from xlapy.backends.cpu.fp_env import kernel_mxcsr, restore_mxcsr
from xlapy.backends.cpu.hoist_emit import HoistEmitter
from xlapy.backends.cpu.index_emit import INDEX_OPS, IndexEmitter, inner_cuts, segmentable
from xlapy.backends.cpu.interleave_emit import InterleaveEmitter
from xlapy.backends.cpu.kernel_collapse import collapsed
from xlapy.backends.cpu.kernel_flat import flatten, peel_reshape
from xlapy.backends.cpu.kernel_ops import PRODUCERS, fusible, is_scalar_constant
from xlapy.backends.cpu.lane_split import LaneSplitEmitter
from xlapy.backends.cpu.lanes import (
    Lane,
    LaneCheck,
    LanePattern,
    has_lane,
    index_key,
    row_strides,
    vector_width,
)
from xlapy.backends.cpu.llvm_util import (
    I32,
    I64,
    KERNEL_TYPE,
    broadcast,
    for_range,
    i64,
    store_fence,
    type_bytes,
)
from xlapy.backends.cpu.masked_emit import masked_ok, row_width
from xlapy.backends.cpu.math_poly import Math
from xlapy.backends.cpu.periodic_emit import PeriodicEmitter
from xlapy.backends.cpu.reduce_emit import ReductionEmitter, reducer_op
from xlapy.backends.cpu.residue_emit import residue_loop, residues
from xlapy.backends.cpu.row_prefetch import RowPrefetchEmitter
from xlapy.backends.cpu.select_emit import select as emit_select
from xlapy.backends.cpu.tile_emit import TileEmitter
from xlapy.ir import Instruction
from xlapy.passes.hlo_builder import prefix_slice
from xlapy.types import ElementType as ET


@dataclass
class Kernel:
    """A compiled kernel's interface: its name, the buffer slots it reads, the slot it writes,
    the extent of its outer loop and a cost estimate (elements times ops) for threading."""

    name: str
    root: Instruction
    inputs: list[int]
    output: int
    outer: int
    cost: int
    splittable: bool
    #: A reduce over dimension 0 whose range [begin, end) of that dimension can run on
    #: several threads, each into its own partial output, the partials then added (the
    #: reducer is associative for the type and the init its identity; see PARTIAL_REDUCE).
    partial: str | None = None
    #: Written in explicit vectors (lanes.py): the light pipeline compiles it.
    explicit: bool = False
    #: The thread pool splits [0, outer) at multiples of this.
    align: int = 1
    #: (global, value): i64 globals of the kernel's module set once it is linked.
    cells: tuple[tuple[str, int], ...] = ()
    #: The slots of sibling roots it computes too, at the same indices (multi_output.py).
    extra: tuple[int, ...] = ()
    #: It reads fp_env.ENV_SET in its `hi` argument (a loop body's kernel: fp_env.driven).
    env_arg: bool = False

    @property
    def outputs(self) -> tuple[int, ...]:
        """Every slot the kernel writes: its own, then its siblings'."""
        return (self.output, *self.extra)


class KernelEmitter(IndexEmitter, ReductionEmitter, HoistEmitter, RowPrefetchEmitter,
                    PeriodicEmitter, TileEmitter, LaneSplitEmitter, InterleaveEmitter,
                    minor_stack.MinorStackEmitter):
    """Emits one kernel function into `mod`: `root` computed from `leaves` (id -> slot)."""

    FLAT = True  # a short last dimension emitted flat (kernel_flat.py)

    def __init__(self, mod: ir.Module, name: str, root: Instruction, leaves: dict[int, int],
                 out_slot: int, rows: Sequence[Instruction] = (), streaming: bool = False,
                 extra: Sequence[tuple[Instruction, int]] = (), row_unit: int = 0) -> None:
        """`row_unit`: an element-wise kernel emitted flat whose outer range counts rows of
        that many elements (a batch chain's tail, batch_chain.py; else the usual nest)."""
        self.spec_root = root  # (the kernel's; `root` may be its flat copy, rows walked flat)
        self.extra = list(extra)  # sibling roots and their slots (multi_output.py)
        peeled = peel_reshape(root, leaves, rows, extra)
        if peeled is not root and root.opcode != "reduce" and \
                LaneCheck(leaves, rows, reducer_op, True).kernel(root, rows):
            peeled = root  # its lanes split the reshape's index (lane_split.py): as it is
        root = self.nest_root = peeled
        flat = flatten(root, leaves, rows, bool(row_unit)) if self.FLAT and not extra \
            else None
        root, leaves = flat or (root, leaves)
        if not flat and self.FLAT and not extra and not rows:  # (kernel_collapse.py)
            root, leaves = collapsed(root, leaves)
        self.flat_rows = (row_unit or int(np.prod(self.nest_root.shape.dimensions[1:]))) \
            if flat else 0
        self.rows = list(rows)  # row reductions computed per outermost index, in order
        # a big result: stored non-temporally (a flat one's rows start at whole vectors)
        self.streaming = streaming and not (flat and self.flat_rows % vector_width())
        self.fenced = False  # non-temporal stores were emitted (an sfence ends the kernel)
        self._parallel = False  # emitting an element-wise nest (for_range's `parallel`)
        self.row_vals: dict[int, ir.Value] = {}
        #: A row reduction's operand the rest of the kernel also reads, kept per row in a
        #: stack buffer (softmax's exp(x - max) is computed once, not twice).
        self.row_cache: dict[int, ir.Value] = {}
        self.row_cache_flushed: set[int] = set()  # rows stored with no denormals
        self.row_cache_bf16: set[int] = set()  # rows stored as bf16s (bf16_exact.py)
        self.row_index: list[ir.Value] = []  # the leading indices of the current row
        #: The rank of the row reductions' results: the kernel's outer loop runs over those
        #: leading dimensions flattened (one loop of their product), rows contiguous.
        self.row_depth = self.rows[0].shape.rank if self.rows else 0
        self._begin_row()  # (row_prefetch.py's pass counting)
        self.mod, self.name, self.root, self.leaves, self.out_slot = \
            mod, name, root, leaves, out_slot
        self.fn = ir.Function(mod, KERNEL_TYPE, name=name)
        self.fn.args[0].add_attribute("noalias")
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.ptrs: dict[int, ir.Value] = {}
        self.memo: dict[tuple[int, tuple[int, ...]], ir.Value] = {}
        self._phases = []  # loop-invariant hoisting (hoist_emit.py)
        self._into = []
        self._offsets = {}
        self.ops, self.heavy = 0, 0  # ops; transcendental ops (each a long dependent chain)
        self.forced: dict[int, Any] = {}
        #: An index-op root whose innermost loop runs in segments (index_emit.segments).
        self.segmented = id(root) not in leaves and segmentable(root)
        #: Lanes of the innermost loops (0: scalar IR for LLVM's loop vectorizer).
        check = LaneCheck(leaves, self.rows, reducer_op, splits=not (
            self.segmented or self.rows or root.opcode == "reduce"))
        self.width = vector_width() if all(check.kernel(r, self.rows, self.segmented) for r in
                                           [root, *(x for x, _ in self.extra)]) else 0
        #: A stack along a short last dimension, lanes along the one before (minor_stack.py).
        self.stack = 0 if self.width and not minor_stack.short(root) else \
            minor_stack.width(root, leaves, self.rows, self.extra, reducer_op)
        if self.stack:
            self.width, self.segmented = vector_width(), False
        self.cuts = {} if self.width or self.segmented or rows or extra or flat or \
            root.opcode == "reduce" else inner_cuts(root, leaves)
        if self.cuts:  # branches inside along the lane: segments where each takes one case
            self.width, self.segmented = vector_width(), True
        #: Residues of the scalar innermost loop (residue_emit.py; 1: a plain loop).
        self.residues = 1 if self.width or self.segmented or rows else residues(root, leaves)
        self.align = self.residues if root.shape.rank == 1 and not flat else 1  # splits
        dims = root.shape.dimensions
        #: A constant-length rest of a lane loop is one masked vector (masked_emit.py).
        self.masked = bool(self.width) and not self.stack and masked_ok(root, leaves)
        if self.rows:  # rows shorter than a vector (softmax: 10 classes)
            cols = self.rows[0].operands[0].shape.dimensions[-1]
            self.width = row_width(cols, self.width, self.masked)
        elif dims and root.opcode != "reduce":  # ([n, n, 3] pairs: xmm, not masked zmm)
            self.width = row_width(dims[-2] if self.stack else dims[-1], self.width,
                                   self.masked)
        self.summand = self.summed() if self.width and not self.rows else None
        if self.summand is not None:  # (a sum of exp, log1p...: widened too, interleave_emit)
            dims = self.summand.shape.dimensions
        if self.width and not self.rows and dims:
            # Two (four) vectors per lane group: a long dependent chain per element (the
            # GELU chain) leaves the out-of-order window with one group in flight; LLVM
            # splits each wide op into independent vector-width parts, interleaved.
            k = self._interleave(self._weight()) if root.opcode != "reduce" or \
                self.summand else 0
            if not self.stack:  # (1- and 2-byte values: as many bytes a step as f32's)
                k = max(k, self._narrow_lanes())
            while k > 1 and (dims[-1] % (k * self.width) or check.split):
                k //= 2
            if k > 1:
                self.width *= k

    # ---- buffers ----
    def ptr(self, slot: int, t: ET) -> ir.Value:
        if slot not in self.ptrs:
            b = self.b
            with b.goto_block(self.fn.entry_basic_block):
                b.position_at_start(self.fn.entry_basic_block)
                raw = b.load(b.gep(self.fn.args[0], [i64(slot)]))
                self.ptrs[slot] = b.bitcast(raw, ew.storage_type(t).as_pointer())
        return self.ptrs[slot]

    def linear(self, idx: Sequence[ir.Value], dims: Sequence[int]) -> ir.Value:
        terms = [(v, s) for v, s, n in zip(idx, row_strides(dims), dims) if n != 1]
        fixed, terms = self.fixed_offset(terms)  # (hoist_emit: the row's part, once)
        return self.offset_sum(terms, i64(0) if fixed is None else fixed)

    def offset_sum(self, terms: Sequence[tuple[Any, int]], off: ir.Value) -> ir.Value:
        """off + the sum of index * stride over `terms`."""
        b = self.b
        for v, s in terms:
            if isinstance(v, Lane):
                v = self._lane0(v)
            term = v if s == 1 else b.mul(v, i64(s), flags=["nsw"])
            off = term if isinstance(off, ir.Constant) and off.constant == 0 else \
                b.add(off, term, flags=["nsw"])
        return off

    def load(self, slot: int, t: ET, idx: Sequence[ir.Value], dims: Sequence[int]) -> ir.Value:
        b = self.b
        if any(isinstance(v, LanePattern) for v in idx):
            return self.pattern_load(slot, t, idx, dims)
        if (col := column_lanes.load(self, slot, t, idx, dims)) is not None:
            return col  # (a column of short rows, the lanes along the rows)
        p = b.gep(self.ptr(slot, t), [self.linear(idx, dims)], inbounds=True)
        v = self._access(p, idx)
        if self.rows and has_lane(idx):
            self._prefetch_ahead(slot, p, idx, dims, type_bytes(ew.storage_type(t)))
        return ew.from_storage(b, v, t)

    def _lane0(self, v: Lane) -> ir.Value:
        return self.b.add(v.base, i64(v.off), flags=["nsw"]) if v.off else v.base

    def _access(self, p: ir.Value, idx: Sequence[Any], value: ir.Value | None = None
                ) -> ir.Value:
        """Load from (or store `value` to) element pointer p: W lanes if idx holds a Lane."""
        return masked_emit.lane_access(self.b, p, idx, self.width, value)

    def _unify(self, vals: Sequence[ir.Value]) -> list[ir.Value]:
        """Uniform (scalar) operands broadcast when another operand is a lane vector."""
        if not any(isinstance(v.type, ir.VectorType) for v in vals):
            return list(vals)
        return [self.splat(v) for v in vals]

    # ---- per-index generation ----
    def gen(self, instr: Instruction, idx: Sequence[ir.Value]) -> ir.Value:
        key = (id(instr), tuple(index_key(v) for v in idx))
        v = self.memo.get(key)
        if v is None:
            phase = self._invariant(idx)
            if phase is not None:  # fixed in the loop being emitted: computed before it
                return self._hoisted(phase, key, instr, idx)
            v = self._gen(instr, idx)
            self.memo[key] = v
        return v

    def _gen(self, instr: Instruction, idx: Sequence[ir.Value]) -> ir.Value:
        b = self.b
        sh = instr.shape
        et = sh.element_type
        if id(instr) in self.leaves:
            return self.load(self.leaves[id(instr)], et, idx, sh.dimensions)
        if (staged := self.staged(instr, idx)) is not None:  # (tile_emit.py)
            return staged
        buf = self.row_cache.get(id(instr))
        if buf is not None and len(idx) == self.row_depth + 1 and \
                self.in_row(idx[:-1], sh.dimensions):
            last = idx[-1]
            col = self._lane0(last) if isinstance(last, Lane) else last
            whole = last.whole if isinstance(last, Lane) else last  # (reduce_emit's row cache)
            v = self._access(b.gep(buf, [i64(0), col], inbounds=True), [*idx[:-1], whole])
            if id(instr) in self.row_cache_bf16:
                bf16_exact.mark(v)
            return ew.mark_flushed(v) if id(instr) in self.row_cache_flushed else v
        op = instr.opcode
        if op == "reduce":
            v = self.row_vals.get(id(instr))
            if v is None or len(idx) != self.row_depth or not self.in_row(idx, sh.dimensions):
                raise RuntimeError(f"internal error: reduce %{instr.name} reached in kernel "
                                   f"{self.name} outside its row")
            return v
        ops = instr.operands
        a = instr.attrs
        if op == "constant":
            if not is_scalar_constant(instr):
                raise KeyError(f"array constant %{instr.name} must be a leaf")
            return ew.constant(np.asarray(a.literal.to_numpy()).reshape(()).item(), et)
        if op == "broadcast_in_dim":
            src = ops[0].shape.dimensions
            return self.gen(ops[0], [idx[d] if src[i] != 1 else i64(0)
                                     for i, d in enumerate(a.broadcast_dimensions)])
        if op == "transpose":
            sub: list[Any] = [None] * len(idx)
            for i, p in enumerate(a.permutation):
                sub[p] = idx[i]
            return self.gen(ops[0], sub)
        if op == "reshape":
            src = ops[0].operands[0] if prefix_slice(ops[0]) else ops[0]
            if id(src) in self.leaves and not any(isinstance(v, LanePattern) for v in idx):
                # a buffer (or its first rows) reshaped is the same row-major elements: the
                # offset of idx in the reshape's dims (no division into the buffer's own
                # indices and back: narrow_columns' rows of a c64[100003, 3])
                return self.load(self.leaves[id(src)], et, idx, sh.dimensions)
            return self.gen(ops[0], self._reshape_index(idx, sh.dimensions,
                                                        ops[0].shape.dimensions))
        if op == "slice":
            return self.gen(ops[0], [
                self._affine(v, st, s) for v, st, s in zip(idx, a.start_indices, a.strides)])
        if op == "reverse":
            return reverse_emit.gen(self, instr, idx)
        if op in ("iota", "dynamic_iota"):  # (dynamic_iota: static_dynamic_iota)
            v = idx[a.iota_dimension]
            if isinstance(v, LanePattern):
                v = self.pattern_iota(v)
            elif isinstance(v, Lane):
                n = self.width
                v = b.add(broadcast(b, self._lane0(v), n),
                          ir.Constant(ir.VectorType(I64, n), list(range(n))))
            return ewconv.convert(b, v, ET.S64, et)
        if op in INDEX_OPS:
            return self.gen_index_op(instr, idx)
        self.ops += 1
        if op in ew.INEXACT:
            self.heavy += 1
        if ewc.involved(instr):
            return ewc.emit(b, instr, [self.gen(o, idx if o.shape.rank else []) for o in ops])
        if op == "convert":
            s = ops[0].shape.element_type
            return ewconv.convert(b, self.gen(ops[0], idx), s, et)
        if op == "compare":
            t = ops[0].shape.element_type
            x, y = self._unify([self.gen(ops[0], idx), self.gen(ops[1], idx)])
            return ew.compare(b, x, y, t, a)
        if op == "select":
            return emit_select(self, instr, idx)
        if op == "clamp":
            lo, x, hi = self._unify([self.gen(o, idx if o.shape.rank else []) for o in ops])
            return ew.emit(b, "minimum", [ew.emit(b, "maximum", [x, lo], et, et), hi], et, et)
        if op == "or" and (rot := rotate_emit.match(instr)) is not None:
            return rotate_emit.emit(self, *rot, list(idx))
        if op in ewb.OPS:
            return ewb.emit(b, instr, idx, self.gen)
        if op == "exponential" and et in (ET.F32, ET.F64) and \
                ops[0].shape.element_type == et and exp_range.at_most_zero(ops[0]):
            x = flush_ftz.operand(b, exp_range.difference(self, ops[0], idx), op, ew.flush)
            return Math(b, x.type).exp(x, nonpos=True)  # (softmax's x - max)
        t = ops[0].shape.element_type
        args = [self.gen(o, idx) for o in ops]
        if op == "divide" and t in (ET.F32, ET.F64):  # by a value fixed per row: a product
            n, d = args
            phase = self.hoisted_phase(d)
            nonneg = ops[0].opcode == "exponential"  # (a row of one vector: one divps)
            if row_divide.applies(n, d, phase is not None, nonneg) and \
                    instr.shape.dimensions[-1] > n.type.count:
                return row_divide.emit(b, n, d, lambda k, f: self.at_phase(phase, k, f),
                                       nonneg=nonneg)
        if op == "power" and (v := libm_f32.row_power(self, args, t)) is not None:
            return v  # (a base uniform along the row: its log once)
        return ew.emit(b, op, self._unify(args), t, et)

    def _affine(self, v: ir.Value, start: int, stride: int) -> ir.Value:
        b = self.b
        if isinstance(v, Lane):  # LaneCheck admits unit strides only
            return v.shifted(start)
        if isinstance(v, ir.Constant):  # (column_lanes: a constant column)
            return i64(v.constant * stride + start)
        if stride != 1:
            v = b.mul(v, i64(stride), flags=["nsw"])
        return b.add(v, i64(start), flags=["nsw"]) if start else v

    # ---- bodies ----
    def build(self) -> Kernel:
        b = self.b
        saved, hi, env_arg = kernel_mxcsr(b, self.fn.args[2])
        begin, end = (b.mul(v, i64(self.flat_rows)) if self.flat_rows else v
                      for v in (self.fn.args[1], hi))
        # (row reductions count whole: logsumexp over 4096 x 1024 had run on one thread)
        size = max([int(np.prod(r.operands[0].shape.dimensions)) for r in self.rows] + [
            int(np.prod((self.root.operands[0] if self.root.opcode == "reduce" else
                         self.root).shape.dimensions))])
        with flush_ftz.in_kernel(), latency.in_loop(env_arg, size):  # (FTZ set from here)
            if self.root.opcode == "reduce" and id(self.root) not in self.leaves:
                outer, split = self._reduce(begin, end)
            else:
                outer, split = (self._stack_elementwise if self.stack else
                                self._elementwise)(begin, end)
        if self.fenced:  # order the non-temporal stores before the caller's completion flag
            store_fence(b)
        restore_mxcsr(b, saved)
        b.ret_void()
        leaves_in, outer = sorted(set(self.leaves.values())), \
            int(np.prod(self.nest_root.shape.dimensions)) // self.flat_rows if self.flat_rows \
            else outer
        return Kernel(self.name, self.spec_root, leaves_in, self.out_slot, outer,
                      size * max(self.ops, 1), split, getattr(self, "partial", None),
                      explicit=bool(self.width) or self._scalar_only() or self.staged_lanes,
                      align=self.align, extra=tuple(s for _, s in self.extra),
                      env_arg=env_arg)

    def _scalar_only(self) -> bool:
        """No loop LLVM's vectorizer would vectorize: the light pipeline does as well."""
        dims = (self.root.operands[0] if self.root.opcode == "reduce" else self.root).shape.dims
        return int(np.prod(dims)) < 4 * vector_width() and all(
            r.operands[0].shape.dimensions[-1] < vector_width() for r in self.rows)

    def _nest(self, dims: Sequence[int], begin: ir.Value, end: ir.Value,
              body: Any, idx: list[ir.Value] | None = None, lanes: bool = True) -> None:
        """Loops over `dims` (the first over [begin, end)), body(idx) innermost, the row
        reductions inside the first loop before the others; `lanes`: vectors along the last."""
        if self._tile_nest(dims, begin, end, body, idx):  # a column read of a big operand
            return
        idx = idx or []
        d = len(idx)
        if d == 0 and self.row_depth > 1:  # one loop over the leading dimensions' product
            with for_range(self.b, begin, end, name="rows") as p:
                self._nest(dims, begin, end, body, self._unflatten(p, dims[:self.row_depth]),
                           lanes)
            return
        if d == self.row_depth and self.rows:
            self._row_reductions(idx)
        if d == len(dims):
            body(idx)
            return
        lo, hi = (begin, end) if d == 0 else (i64(0), i64(dims[d]))
        if d == len(dims) - 1:  # the innermost loop: what the outer fix, once (scalars too)
            with self._phase(idx, nested=d > self.row_depth):
                self._next_pass()
                self._innermost(dims, begin, end, body, idx, lanes, lo, hi)
            return
        if d < self.row_depth:
            self._innermost(dims, begin, end, body, idx, lanes, lo, hi)
            return
        # an outer loop: what the indices outside it fix, once (below the row's reductions)
        with self._phase(idx, nested=d > self.row_depth):
            self._innermost(dims, begin, end, body, idx, lanes, lo, hi)

    def _innermost(self, dims: Sequence[int], begin: ir.Value, end: ir.Value, body: Any,
                   idx: list[ir.Value], lanes: bool, lo: ir.Value, hi: ir.Value) -> None:
        """The loop over dims[len(idx)] of _nest (the innermost or one outside it)."""
        d = len(idx)
        if d == len(dims) - 1 and self.segmented and lanes:
            self._segments(lo, hi, d, lambda i: self._nest(dims, begin, end, body,
                                                           idx + [i]))
            return
        if d == len(dims) - 1 and self.width and lanes and d >= self.row_depth:
            self._lane_loop(lo, hi, f"d{d}", lambda i: self._nest(dims, begin, end, body,
                                                                  idx + [i]), dims[d])
            return
        if d == len(dims) - 1 and self.residues > 1:  # (residue_emit.py)
            return residue_loop(self.b, lo, hi, self.residues, f"d{d}r", lambda i: self._nest(
                dims, begin, end, body, idx + [i], lanes))
        with for_range(self.b, lo, hi, name=f"d{d}",
                       interleave=self._interleave if d == len(dims) - 1 else 0,
                       parallel=self._parallel and d == len(dims) - 1) as i:
            self._nest(dims, begin, end, body, idx + [i], lanes)

    def _segments(self, lo: ir.Value, hi: ir.Value, d: int, body: Any) -> None:
        """The innermost loop over [lo, hi) as one loop per segment of the root (each
        clipped to [lo, hi): the outermost loop's range is a thread's), its case forced."""
        b = self.b
        for a, z, cases in self.segments(self.root):
            start = i64(a) if isinstance(a, int) else a
            stop = i64(z) if isinstance(z, int) else z
            if d == 0:
                start = b.select(b.icmp_signed(">", start, lo), start, lo)
                stop = b.select(b.icmp_signed("<", stop, hi), stop, hi)
                # An empty intersection stays empty (the lane loop assumes stop >= start).
                stop = b.select(b.icmp_signed("<", stop, start), start, stop)
            self.forced.update(cases)
            self._lane_loop(start, stop, f"d{d}s", body)
        self.forced.clear()

    def _lane_loop(self, lo: ir.Value, hi: ir.Value, name: str, body: Any,
                   extent: int = 0) -> None:
        """[lo, hi): W lanes per iteration (`body(Lane)`), then the rest one at a time. An
        extent W divides splits at multiples of W (Kernel.align): no scalar rest (nor code)."""
        b, w = self.b, self.width
        if not w:
            with for_range(b, lo, hi, name=name) as i:
                body(i)
            return
        if isinstance(lo, ir.Constant) and isinstance(hi, ir.Constant):
            n = hi.constant - lo.constant
            mid: ir.Value = i64(lo.constant + n // w * w)
            rest = n % w != 0
        elif extent and extent % w == 0 and not self.flat_rows:  # (flat: rows are split)
            self.align = w
            mid, rest = hi, False
        else:
            mid = b.add(lo, b.and_(b.sub(hi, lo), i64(-w)), flags=["nsw"])
            rest = True
        if not isinstance(mid, ir.Constant) or mid.constant > lo.constant:
            with for_range(b, lo, mid, name=f"{name}v", step=w) as i:
                body(Lane(i))
        if rest and self.masked and isinstance(mid, ir.Constant) and \
                isinstance(hi, ir.Constant):
            body(Lane(mid, live=hi.constant - mid.constant))
        elif rest:
            with for_range(b, mid, hi, name=name) as i:
                body(i)

    def _elementwise(self, begin: ir.Value, end: ir.Value) -> tuple[int, bool]:
        dims, et = self.root.shape.dimensions, self.root.shape.element_type
        out = self.ptr(self.out_slot, et)
        # Non-temporal stores for a big result (`streaming`): no read-for-ownership of every
        # output line (softmax 9.6 -> 8.3 ms, layernorm 2.8 -> 2.1). Each vector store is
        # aligned to its size (<= 64): whole vectors per row, recycle.output's 64-byte buffer.
        vbytes = self.width * type_bytes(ew.storage_type(et))
        stream = self.streaming and bool(dims) and vbytes >= 16 and \
            dims[-1] % self.width == 0 and not self.segmented  # (segments start unaligned)
        self.fenced = stream

        def body(idx: list[ir.Value]) -> None:
            self.memo.clear()
            v = ew.to_storage(self.b, self.gen(self.root, idx), et)
            st = self._access(self.b.gep(out, [self.linear(idx, dims)], inbounds=True), idx, v)
            if stream and has_lane(idx):
                st.align = min(vbytes, 64)
                st.set_metadata("nontemporal", self.mod.add_metadata([ir.Constant(I32, 1)]))
            for x, slot in self.extra:  # (the memo shares what the roots have in common)
                t = x.shape.element_type
                v = ew.to_storage(self.b, self.gen(x, idx), t)
                self._access(self.b.gep(self.ptr(slot, t), [self.linear(idx, dims)],
                                        inbounds=True), idx, v)

        if not dims:
            body([])
            return 1, False
        self._parallel = True  # (each element's loop iteration writes only its element)
        self._nest(dims, begin, end, body)
        self._parallel = False
        return int(np.prod(dims[:max(self.row_depth, 1)])), True


__all__ = ["Kernel", "KernelEmitter", "fusible", "reducer_op", "PRODUCERS", "I64"]
