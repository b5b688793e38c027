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

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.llvm_util import (
    I64,
    KERNEL_TYPE,
    for_range,
    i64,
    intrinsic,
    restore_mxcsr,
    set_ftz_daz,
)
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: Producers a kernel can generate per index (besides the element-wise table).
PRODUCERS = frozenset({"broadcast_in_dim", "reshape", "transpose", "slice", "reverse", "iota",
                       "convert", "compare", "select", "clamp", "constant"})
REDUCERS = frozenset({"add", "multiply", "maximum", "minimum", "and", "or", "xor"})
#: Interleave count of innermost loops whose body weighs (ops + 10 per transcendental) at
#: least INTERLEAVE_WEIGHT (measured on the GELU chain: 27 ms -> 21 at 2, 16 at 4, with
#: compile 37 -> 47 -> 59 ms).
INTERLEAVE = 2
INTERLEAVE_WEIGHT = 24
#: Reducers whose partial results over a split of a reduced dimension combine exactly (up
#: to the float sum's reassociation, which the kernels allow anyway): add on f32/f64/ints
#: with a zero init; integer max/min/and/or with any init (they are idempotent).
PARTIAL_INTS = frozenset({ET.S8, ET.S16, ET.S32, ET.S64, ET.U8, ET.U16, ET.U32, ET.U64})


def _types_ok(instr: Instruction) -> bool:
    shapes = [instr.shape] + [o.shape for o in instr.operands]
    return all(s.is_array and s.element_type in ew.SUPPORTED for s in shapes)


def fusible(instr: Instruction) -> bool:
    """Whether a kernel can compute this instruction per output index (or as a reduce root)."""
    if not _types_ok(instr):
        return False
    op = instr.opcode
    if op == "constant":
        return True
    if op in ("broadcast_in_dim", "reshape", "transpose", "slice", "reverse", "iota",
              "compare", "select", "clamp"):
        return True
    if op == "convert":
        return ew.convert_supported(instr.operands[0].shape.element_type,
                                    instr.shape.element_type)
    if op == "reduce":
        return reducer_op(instr) is not None
    return ew.supports(op, instr.operands[0].shape.element_type) if instr.operands else False


def reducer_op(instr: Instruction) -> str | None:
    """The binary opcode of a single-input reduce's reducer, or None if it is anything else."""
    if len(instr.operands) != 2 or len(instr.called) != 1:
        return None
    comp = instr.called[0]
    root = comp.root
    if root is None or root.opcode not in REDUCERS or len(comp.instructions) != 3:
        return None
    params = comp.parameters
    if len(params) != 2 or {id(o) for o in root.operands} != {id(p) for p in params}:
        return None
    if not ew.supports(root.opcode, instr.shape.element_type):
        return None
    return root.opcode


def row_reduce(instr: Instruction) -> bool:
    """A reduce of a rank-2 value over dimension 1 with a simple reducer: a kernel can
    compute it per row, inside its outermost loop (KernelEmitter's `rows`)."""
    return (instr.opcode == "reduce" and reducer_op(instr) is not None
            and instr.operands[0].shape.rank == 2 and tuple(instr.attrs.dimensions) == (1,))


def is_scalar_constant(instr: Instruction) -> bool:
    return instr.opcode == "constant" and instr.shape.is_array and \
        int(np.prod(instr.shape.dimensions)) == 1


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


def _strides(dims: Sequence[int]) -> list[int]:
    out = [1] * len(dims)
    for d in range(len(dims) - 2, -1, -1):
        out[d] = out[d + 1] * dims[d + 1]
    return out


class KernelEmitter:
    """Emits one kernel function into `mod`: `root` computed from `leaves` (id -> slot)."""

    def __init__(self, mod: ir.Module, name: str, root: Instruction,
                 leaves: dict[int, int], out_slot: int,
                 rows: Sequence[Instruction] = ()) -> None:
        self.rows = list(rows)  # row reductions computed per outermost index, in order
        self.row_vals: dict[int, ir.Value] = {}
        #: A row reduction's operand the rest of the kernel also reads, kept per row in a
        #: stack buffer (softmax's exp(x - max) is computed once, not twice).
        self.row_cache: dict[int, ir.Value] = {}
        self.row_index: ir.Value | None = None
        self.mod = mod
        self.name = name
        self.root = root
        self.leaves = leaves
        self.out_slot = out_slot
        self.fn = ir.Function(mod, KERNEL_TYPE, name=name)
        self.fn.args[0].add_attribute("noalias")
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.ptrs: dict[int, ir.Value] = {}
        self.memo: dict[tuple[int, tuple[int, ...]], ir.Value] = {}
        self.ops = 0
        self.heavy = 0  # transcendental ops (each a long dependent chain)

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
        b = self.b
        off: ir.Value = i64(0)
        for v, s, n in zip(idx, _strides(dims), dims):
            if n == 1:
                continue
            term = v if s == 1 else b.mul(v, i64(s), flags=["nsw"])
            off = term if isinstance(off, ir.Constant) and off.constant == 0 else \
                b.add(off, term, flags=["nsw"])
        return off

    def load(self, slot: int, t: ET, idx: Sequence[ir.Value], dims: Sequence[int]) -> ir.Value:
        b = self.b
        p = b.gep(self.ptr(slot, t), [self.linear(idx, dims)], inbounds=True)
        return ew.from_storage(b, b.load(p), t)

    # ---- per-index generation ----
    def gen(self, instr: Instruction, idx: Sequence[ir.Value]) -> ir.Value:
        key = (id(instr), tuple(id(v) for v in idx))
        v = self.memo.get(key)
        if v is None:
            v = self._gen(instr, idx)
            self.memo[key] = v
        return v

    def _gen(self, instr: Instruction, idx: Sequence[ir.Value]) -> ir.Value:
        b = self.b
        sh = instr.shape
        et = sh.element_type
        if id(instr) in self.leaves:
            return self.load(self.leaves[id(instr)], et, idx, sh.dimensions)
        buf = self.row_cache.get(id(instr))
        if buf is not None and len(idx) == 2 and idx[0] is self.row_index:
            return b.load(b.gep(buf, [i64(0), idx[1]], inbounds=True))
        op = instr.opcode
        if op == "reduce":
            v = self.row_vals.get(id(instr))
            if v is None or len(idx) != 1 or idx[0] is not self.row_index:
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
            return self.gen(ops[0], self._reshape_index(idx, sh.dimensions,
                                                        ops[0].shape.dimensions))
        if op == "slice":
            return self.gen(ops[0], [
                self._affine(v, st, s) for v, st, s in zip(idx, a.start_indices, a.strides)])
        if op == "reverse":
            dims = sh.dimensions
            return self.gen(ops[0], [b.sub(i64(dims[d] - 1), v) if d in a.dimensions else v
                                     for d, v in enumerate(idx)])
        if op == "iota":
            return ew.convert(b, idx[a.iota_dimension], ET.S64, et)
        self.ops += 1
        if op in ew.INEXACT:
            self.heavy += 1
        if op == "convert":
            s = ops[0].shape.element_type
            return ew.convert(b, self.gen(ops[0], idx), s, et)
        if op == "compare":
            t = ops[0].shape.element_type
            return ew.compare(b, self.gen(ops[0], idx), self.gen(ops[1], idx), t, a)
        if op == "select":
            pred = self.gen(ops[0], idx if ops[0].shape.rank else [])
            return ew.select(b, pred, self.gen(ops[1], idx), self.gen(ops[2], idx))
        if op == "clamp":
            lo = self.gen(ops[0], idx if ops[0].shape.rank else [])
            hi = self.gen(ops[2], idx if ops[2].shape.rank else [])
            x = self.gen(ops[1], idx)
            mx = ew.emit(b, "maximum", [x, lo], et, et)
            return ew.emit(b, "minimum", [mx, hi], et, et)
        t = ops[0].shape.element_type
        return ew.emit(b, op, [self.gen(o, idx) for o in ops], t, et)

    def _affine(self, v: ir.Value, start: int, stride: int) -> ir.Value:
        b = self.b
        if stride != 1:
            v = b.mul(v, i64(stride), flags=["nsw"])
        return b.add(v, i64(start), flags=["nsw"]) if start else v

    def _reshape_index(self, idx: Sequence[ir.Value], out: Sequence[int],
                       src: Sequence[int]) -> list[ir.Value]:
        """Operand indices of a reshape; shared trailing/leading dims map directly."""
        b = self.b
        out_l, src_l = list(out), list(src)
        # Peel identical leading dimensions.
        lead = 0
        while lead < min(len(out_l), len(src_l)) and out_l[lead] == src_l[lead]:
            lead += 1
        trail = 0
        while (trail < min(len(out_l), len(src_l)) - lead
               and out_l[-1 - trail] == src_l[-1 - trail]):
            trail += 1
        mid_out = out_l[lead:len(out_l) - trail]
        mid_src = src_l[lead:len(src_l) - trail]
        lin = self.linear(idx[lead:len(idx) - trail], mid_out)
        mid: list[ir.Value] = []
        for s, n in zip(_strides(mid_src), mid_src):
            if n == 1:
                mid.append(i64(0))
                continue
            q = b.udiv(lin, i64(s)) if s != 1 else lin
            mid.append(b.urem(q, i64(n)))
        return list(idx[:lead]) + mid + list(idx[len(idx) - trail:])

    # ---- bodies ----
    def build(self) -> Kernel:
        b = self.b
        saved = set_ftz_daz(b)
        begin, end = self.fn.args[1], self.fn.args[2]
        if self.root.opcode == "reduce" and id(self.root) not in self.leaves:
            outer, split = self._reduce(begin, end)
        else:
            outer, split = self._elementwise(begin, end)
        restore_mxcsr(b, saved)
        b.ret_void()
        size = int(np.prod(self.root.operands[0].shape.dimensions)) \
            if self.root.opcode == "reduce" else int(np.prod(self.root.shape.dimensions))
        leaves_in = sorted(set(self.leaves.values()))
        return Kernel(self.name, self.root, leaves_in, self.out_slot, outer,
                      size * max(self.ops, 1), split, getattr(self, "partial", None))

    def _nest(self, dims: Sequence[int], begin: ir.Value, end: ir.Value,
              body: Any, idx: list[ir.Value] | None = None) -> None:
        """Loops over `dims` (the first over [begin, end)), calling body(idx) innermost; the
        row reductions are computed inside the first loop, before the others."""
        idx = idx or []
        d = len(idx)
        if d == 1 and self.rows:
            self._row_reductions(idx[0])
        if d == len(dims):
            body(idx)
            return
        lo, hi = (begin, end) if d == 0 else (i64(0), i64(dims[d]))
        with for_range(self.b, lo, hi, name=f"d{d}",
                       interleave=self._interleave if d == len(dims) - 1 else 0) as i:
            self._nest(dims, begin, end, body, idx + [i])

    def _interleave(self) -> int:
        """Vector bodies per iteration of the innermost loop (asked once its body is built):
        a long dependent chain per element (the GELU chain: 7 tanh in a row) leaves the
        out-of-order window with one iteration in flight, so two independent ones run ~1.3x
        faster; short bodies gain nothing and would only compile slower."""
        dims = self.root.shape.dimensions
        if not dims or dims[-1] < 64 or int(np.prod(dims)) < 1 << 14:
            return 0  # small kernels: compile time matters more
        return INTERLEAVE if self.ops + 10 * self.heavy >= INTERLEAVE_WEIGHT else 0

    def _row_reductions(self, r: ir.Value) -> None:
        """acc = init; for c: acc = acc (op) x[r, c], for each row reduction in order."""
        b = self.b
        self.row_index = r
        self.row_vals.clear()
        self.row_cache.clear()
        for red in self.rows:
            x, init = red.operands
            et = red.shape.element_type
            op = reducer_op(red)
            assert op is not None
            self.memo.clear()
            init_c = self.gen(init, [])
            if op in ("maximum", "minimum") and ew._isfloat(init_c):
                init_c = ew.flush(b, init_c)
            init_c = ew.round_to(b, init_c, et)
            cols = x.shape.dimensions[1]
            with b.goto_entry_block():
                accp = b.alloca(ew.compute_type(et), name=f"row.{red.name}")
                cache = None
                if self._worth_caching(x, red, cols):
                    cache = b.alloca(ir.ArrayType(ew.compute_type(x.shape.element_type), cols),
                                     name=f"rowbuf.{red.name}")
            b.store(init_c, accp)
            with for_range(b, i64(0), i64(cols), name="rc") as c:
                self.memo.clear()
                v = self.gen(x, [r, c])
                if cache is not None:
                    b.store(v, b.gep(cache, [i64(0), c], inbounds=True))
                b.store(self._combine(op, et, b.load(accp), v), accp)
            if cache is not None:
                self.row_cache[id(x)] = cache
            self.memo.clear()
            self.row_vals[id(red)] = ew.round_to(b, b.load(accp), et)
            self.ops += 1

    def _worth_caching(self, x: Instruction, red: Instruction, cols: int) -> bool:
        """x (a row reduction's operand) is computed here, read by something else too, holds
        a transcendental, and a row of it fits in 64 KiB of stack."""
        if id(x) in self.leaves or id(x) in self.row_cache or len(x.users) < 2:
            return False
        if cols * 8 > 1 << 16:
            return False
        stack, seen = [x], set()
        while stack:
            i = stack.pop()
            if id(i) in seen or id(i) in self.leaves:
                continue
            seen.add(id(i))
            if i.opcode in ew.INEXACT:
                return True
            if i.opcode != "reduce":
                stack.extend(i.operands)
        return False

    def _combine(self, op: str, et: ET, acc: ir.Value, v: ir.Value) -> ir.Value:
        """One reduction step; float add/multiply reassociate (vector accumulators)."""
        b = self.b
        if op == "add" and ew._isfloat(v) and et in (ET.F32, ET.F64):
            return b.fadd(acc, v, flags=["reassoc", "nsz"])
        if op == "multiply" and ew._isfloat(v) and et in (ET.F32, ET.F64):
            return b.fmul(acc, v, flags=["reassoc", "nsz"])
        if op in ("maximum", "minimum") and ew._isfloat(v):
            # acc is already flushed (init and every step): flushing only v keeps the
            # recurrence a plain llvm.maximum/minimum, which LLVM vectorizes.
            return intrinsic(b, f"llvm.{op}.{ew._fsfx(v)}", v.type, [acc, ew.flush(b, v)])
        return ew.emit(b, op, [acc, v], et, et)

    def _elementwise(self, begin: ir.Value, end: ir.Value) -> tuple[int, bool]:
        sh = self.root.shape
        dims = sh.dimensions
        et = sh.element_type
        out = self.ptr(self.out_slot, et)

        def body(idx: list[ir.Value]) -> None:
            self.memo.clear()
            v = ew.to_storage(self.b, self.gen(self.root, idx), et)
            self.b.store(v, self.b.gep(out, [self.linear(idx, dims)], inbounds=True))

        if not dims:
            body([])
            return 1, False
        self._nest(dims, begin, end, body)
        return dims[0], True

    def _reduce(self, begin: ir.Value, end: ir.Value) -> tuple[int, bool]:
        b = self.b
        x, init = self.root.operands
        et = self.root.shape.element_type
        op = reducer_op(self.root)
        assert op is not None
        dims = x.shape.dimensions
        red = set(self.root.attrs.dimensions)
        kept = [d for d in range(len(dims)) if d not in red]
        out_dims = [dims[d] for d in kept]
        out = self.ptr(self.out_slot, et)
        n = len(dims)
        s = n
        while s > 0 and (s - 1) in red:
            s -= 1
        split = bool(dims) and 0 not in red
        self.partial = _partial_kind(op, et, init) if dims and not split else None
        outer = dims[0] if split or self.partial else 1
        if not split and not self.partial:
            begin, end = i64(0), i64(dims[0] if dims else 1)
        # Initialize this range of the output.
        init_c = self.gen(init, [])
        if op in ("maximum", "minimum") and ew._isfloat(init_c):
            init_c = ew.flush(b, init_c)
        init_v = ew.to_storage(b, init_c, et)
        row = int(np.prod(out_dims[1:])) if split else int(np.prod(out_dims))
        lo = b.mul(begin, i64(row)) if split else i64(0)
        hi = b.mul(end, i64(row)) if split else i64(row)
        with for_range(b, lo, hi, name="init") as o:
            b.store(init_v, b.gep(out, [o], inbounds=True))
        self.ops += 1

        def combine(acc: ir.Value, v: ir.Value) -> ir.Value:
            return self._combine(op, et, acc, v)

        def out_ptr(idx: list[ir.Value]) -> ir.Value:
            return b.gep(out, [self.linear([idx[d] for d in kept], out_dims)], inbounds=True)

        def outer_body(idx: list[ir.Value], rng: tuple[ir.Value, ir.Value] | None = None
                       ) -> None:
            p = out_ptr(idx)
            if s == n:  # innermost kept: accumulate straight into the output row
                self.memo.clear()
                acc = ew.from_storage(b, b.load(p), et)
                b.store(ew.to_storage(b, combine(acc, self.gen(x, idx)), et), p)
                return
            with b.goto_entry_block():
                accp = b.alloca(ew.compute_type(et), name="acc")
            b.store(ew.from_storage(b, b.load(p), et), accp)

            def inner(full: list[ir.Value]) -> None:
                self.memo.clear()
                b.store(combine(b.load(accp), self.gen(x, full)), accp)

            self._nest_from(dims, idx, inner, rng)
            b.store(ew.to_storage(b, b.load(accp), et), p)

        if s == 0:
            outer_body([], (begin, end))
        else:
            self._nest(dims[:s], begin, end, outer_body)
        return outer, split

    def _nest_from(self, dims: Sequence[int], idx: list[ir.Value], body: Any,
                   rng: tuple[ir.Value, ir.Value] | None = None) -> None:
        """Loops over dims[len(idx):]; `rng` bounds the first of them (else its extent)."""
        d = len(idx)
        if d == len(dims):
            body(idx)
            return
        lo, hi = rng if rng is not None else (i64(0), i64(dims[d]))
        with for_range(self.b, lo, hi, name=f"r{d}") as i:
            self._nest_from(dims, idx + [i], body)


def _partial_kind(op: str, et: ET, init: Instruction) -> str | None:
    """How partial reduce outputs combine ("add", "maximum", ...), or None if they cannot."""
    if op in ("maximum", "minimum", "and", "or"):
        return op if et in PARTIAL_INTS else None
    if op != "add" or not (et in PARTIAL_INTS or et in (ET.F32, ET.F64)):
        return None
    if init.opcode != "constant":
        return None
    return op if np.asarray(init.attrs.literal.to_numpy()).reshape(()).item() == 0 else None


__all__ = ["Kernel", "KernelEmitter", "fusible", "reducer_op", "PRODUCERS", "I64"]
