"""Reductions inside kernels: row reductions computed per outermost index (softmax's max and
sum), and reduce roots (row, column, full, over any dimensions), with vector accumulators
in lanes (lanes.py) or scalar ones for LLVM's vectorizer. A mixin of KernelEmitter: it
uses the emitter's gen, loops and buffers.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import bf16_exact, target
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import elementwise_complex as ewc
from xlapy.backends.cpu.column_registers import ColumnRegisterEmitter
from xlapy.backends.cpu.complex_reduce_emit import (
    COLUMN_FLOATS,
    PRODUCT_CHAINS,
    SCALAR_SUM_BLOCK,
    ComplexReduceEmitter,
)
from xlapy.backends.cpu.lanes import Lane, accumulator_start, has_lane, horizontal, live_lanes
from xlapy.backends.cpu.llvm_util import for_range, i64, intrinsic, smin
from xlapy.backends.cpu.masked_emit import live_only
from xlapy.backends.cpu.minmax_emit import MinMaxEmitter, fast_ok
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

REDUCERS = frozenset({"add", "multiply", "maximum", "minimum", "and", "or", "xor"})
#: Reducers whose partial results over a split of a reduced dimension combine exactly (up
#: to the float sum's reassociation, which the kernels allow anyway): add on f32/f64/ints
#: and (PARTIAL_COMPLEX elements on) complex types with a zero init; integer
#: max/min/and/or and f32/f64 max/min with any init (they are idempotent; the float partials
#: combine as the kernels fold, -0 < +0: thunks.ordered_combine).
PARTIAL_INTS = frozenset({ET.S8, ET.S16, ET.S32, ET.S64, ET.U8, ET.U16, ET.U32, ET.U64})
#: Fewest elements a complex sum splits into partial sums from: smaller ones keep a kernel
#: a fused loop can take (loop_fused.py takes no partial one).
PARTIAL_COMPLEX = 1 << 16
#: The same for a float max / min, whose partials combine in numpy (thunks.ordered_combine):
#: expm's 1-norms of 128 x 128 matrices took 0.46 -> 0.57 ms split. Over rows: f32[65536, 64]
#: .max(0) 0.74 -> 0.41 ms, [4096, 1024] 0.72 -> 0.30, [1M, 8] 3.6 -> 2.0 (Zen 4, 2 threads).
PARTIAL_FLOAT = 1 << 16
#: Independent vector accumulators of a float max/min along a row. One llvm.maximum step is
#: a chain of about 7 cycles on x86 (sign test, blend, max, NaN select), so a single
#: accumulator computed 16 floats per 7 cycles: half the memory bandwidth of the 8192x1024
#: row max. max/min are exact in any order, so the result bits do not change.
MINMAX_CHAINS = 4
#: ...for a row of bf16 arithmetic where rounding to bf16 is integer code (no AVX512-BF16:
#: about ten vector instructions per op), so one step is long enough that two chains hide
#: the max's latency; and each chain less is a copy of the row expression less to compile
#: (x86-64-v3 attention_bf16's softmax kernel: 1.6 ms of its 10.7 ms code generation; a
#: row max of 4096x1024 bf16 x * 0.5 + 1: 1.80 -> 1.26 ms, fewer spills of the 16 ymm
#: registers). With AVX512-BF16 the step is short and four chains stay (2 were 10% slower).
NARROW_MINMAX_CHAINS = 2
#: The same for a float add/multiply (f32/f64, reassociated anyway): one vaddps chain is
#: 4 cycles per vector, a quarter of what two ports sustain - layernorm's two row sums ran
#: at half its memory bandwidth. The sum's order (so its last bits) changes with the count.
SUM_CHAINS = 4
#: ...for a row expression of at most this many arithmetic ops and no transcendental: a
#: longer one (softmax's exp) is bound by its own throughput, not the add's latency, and
#: four copies of it cost compile time for nothing.
SUM_CHAIN_OPS = 4
#: Vectors a long single-chain float sum (a whole array's, a column's) adds into a block
#: accumulator before adding the block into its running sum: jnp.sum of 1M floats had each
#: lane round 65536 times in a row, 5-7x XLA's (and numpy's pairwise) error; in blocks of
#: 256 a lane's chain is ~2 x 256 long, and blocks add into superblocks of 256 blocks
#: first (_nest_blocked). One vector add a block: no time.
SUM_BLOCK = 256


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



class ReductionEmitter(MinMaxEmitter, ComplexReduceEmitter, ColumnRegisterEmitter):
    """Reduction emission for KernelEmitter (which defines the attributes used here)."""

    b: ir.IRBuilder
    root: Instruction
    rows: list[Instruction]
    width: int
    masked: bool
    memo: dict[Any, ir.Value]
    ops: int
    _phase: Any  # HoistEmitter's
    _begin_row: Any  # RowPrefetchEmitter's
    _next_pass: Any

    def _row_reductions(self, r: list[ir.Value]) -> None:
        """acc = init; for c: acc = acc (op) x[r..., c], for each row reduction in order."""
        self.row_index = list(r)
        self._begin_row()
        self.row_vals.clear()
        self.row_cache.clear()
        self.row_cache_flushed.clear()
        self.row_cache_bf16.clear()
        for red in self.rows:
            self._row_reduction(red, r)

    def _row_reduction(self, red: Instruction, r: list[ir.Value]) -> None:
        """One row reduction of `_row_reductions`: its value for row r in row_vals."""
        b = self.b
        x, init = red.operands
        et = red.shape.element_type
        op = reducer_op(red)
        assert op is not None
        self._next_pass()
        self.memo.clear()
        init_c = self.gen(init, [])
        if op in ("maximum", "minimum") and ew._isfloat(init_c):
            init_c = ew.flush(b, init_c)
        init_c = ew.round_to(b, init_c, et)
        cols = x.shape.dimensions[-1]
        row = [i64(0) if n == 1 else v for v, n in zip(r, red.shape.dimensions)]
        with b.goto_entry_block():
            accp = b.alloca(ew.compute_type(et), name=f"row.{red.name}")
            cache = None
            if self._worth_caching(x, red, cols):
                cache = b.alloca(ir.ArrayType(ew.compute_type(x.shape.element_type),
                                              -(-cols // self.width) * self.width
                                              if self.masked else cols),
                                 name=f"rowbuf.{red.name}")
        b.store(init_c, accp)
        flushed = [True]  # every value stored into the row cache is known flushed
        bf16s = [True]  # ... and every value a step reads is a bf16 (bf16_exact.py)
        step = functools.partial(self._row_step, row, x, op, et, cache, accp, flushed, bf16s)

        def exact() -> None:  # (its vector accumulators made here: the fast row needs none)
            lanes = self._lane_acc(op, et, self.width and (cols >= self.width or self.masked))
            chains = self._chains(op, et, lanes, cols, x)
            done = self._chain_loop(cols, "rcu", chains, step)
            self._lane_loop(i64(done), i64(cols), "rc", functools.partial(step, lanes))
            self._fold_chains(op, et, lanes, chains)
            self._fold_lanes(op, et, lanes, accp)

        def scalar() -> None:  # the fast loop's rare exact rows: small code, not fast
            with for_range(b, i64(0), i64(cols), name="rcs") as c:
                step(None, c)

        with self._phase(r):  # (hoist_emit: what the row fixes is computed once)
            if fast_ok(op, et, cols, self.width, self.masked):
                def fast_value(c: Lane) -> ir.Value:  # (the fast result is one of them)
                    v = self._row_value(x, row, c)
                    bf16s[0] = bf16s[0] and bf16_exact.is_bf16(v)
                    if cache is not None:  # (an exact row stores its values again)
                        self._cache_store(cache, c, self._live(op, et, self.splat(v), c.live),
                                          flushed)
                    return v

                self._fast_row(op, et, cols, "rcu", accp, fast_value, scalar, init_c)
            else:
                exact()
        if cache is not None:
            self.row_cache[id(x)] = cache
            if flushed[0]:
                self.row_cache_flushed.add(id(x))
            if bf16s[0]:
                self.row_cache_bf16.add(id(x))
        self.memo.clear()
        acc = b.load(accp)
        if bf16s[0] and op in ("maximum", "minimum") and bf16_exact.is_bf16(init_c):
            bf16_exact.mark(acc)  # picks one of its bf16s: rounding it changes nothing
        val = ew.round_to(b, self._late_flush(op, acc), et)
        # Every step's result is flushed (FTZ; max/min flushed once, here), so a
        # non-empty row's value is too: its users need not flush it per element.
        self.row_vals[id(red)] = ew.mark_flushed(val) if cols and ew._isfloat(val) \
            else val
        self.ops += 1

    def _row_value(self, x: Instruction, r: list[ir.Value], c: Lane) -> ir.Value:
        """x[r, c] (W lanes) for the fast row max/min."""
        self.memo.clear()
        return self.gen(x, [*r, c])

    def _row_step(self, r: list[ir.Value], x: Instruction, op: str, et: ET, cache: ir.Value | None,
                  accp: ir.Value, flushed: list[bool], bf16s: list[bool], lanes: ir.Value | None,
                  c: Any) -> None:
        """One column (or W lanes of columns) of a row reduction: x[r, c] into the (lane)
        accumulator, and into the row cache if there is one. `bf16s[0]` is cleared when
        x[r, c] is not known to be a bf16."""
        b = self.b
        self.memo.clear()
        v = self.gen(x, [*r, c])
        if isinstance(c, Lane):
            v = self._live(op, et, self.splat(v), c.live)
        bf16s[0] = bf16s[0] and bf16_exact.is_bf16(v)
        if cache is not None:
            self._cache_store(cache, c, v, flushed)
        acc = lanes if isinstance(c, Lane) else accp
        b.store(self._combine(op, et, b.load(acc), v, late=True), acc)

    def _cache_store(self, cache: ir.Value, c: Any, v: ir.Value, flushed: list[bool]) -> None:
        """x[r, c] (a value, or W lanes) into the row cache; `flushed[0]` cleared unless it
        is known flushed."""
        col = self._lane0(c) if isinstance(c, Lane) else c
        # (whole vectors: a masked store, and a load of it, are slow; AVX2's on AMD are
        # microcode, and a load cannot take its value from a masked store)
        self._access(self.b.gep(cache, [i64(0), col], inbounds=True),
                     [c.whole if isinstance(c, Lane) else c], v)
        flushed[0] = flushed[0] and ew._isfloat(v) and ew.is_flushed(v)

    def _lane_acc(self, op: str, et: ET, used: bool) -> ir.Value | None:
        """A vector accumulator (stack slot) at the reducer's identity, if lanes run."""
        if not used:
            return None
        b = self.b
        start = accumulator_start(op, et, self.width)
        with b.goto_entry_block():
            slot = b.alloca(start.type, name="lanes")
        b.store(start, slot)
        return slot

    def _live(self, op: str, et: ET, v: ir.Value, live: int) -> ir.Value:
        """Lane vector v of a masked tail (`live` lanes real) with the reducer's identity in
        its dead lanes (masked_emit.py); v itself for whole lanes."""
        return live_only(self.b, v, live, accumulator_start(op, et, self.width)) if live \
            else v

    def _cheap(self, x: Instruction, most: int = SUM_CHAIN_OPS) -> bool:
        """x's expression in this kernel has at most `most` arithmetic ops and no
        transcendental (data movement, leaves and row values are free)."""
        free = ("constant", "broadcast_in_dim", "transpose", "reshape", "slice", "reverse",
                "iota", "convert")
        stack, seen, ops = [x], set(), 0
        while stack:
            i = stack.pop()
            if id(i) in seen or id(i) in self.leaves or i.opcode == "reduce":
                continue
            seen.add(id(i))
            if i.opcode in ew.INEXACT:
                return False
            if i.opcode not in free:
                ops += 1
                if ops > most:
                    return False
            stack.extend(i.operands)
        return True

    def _rounding_row(self, et: ET, x: Instruction | None) -> bool:
        """A bf16 row expression with arithmetic (each op rounded by integer code: no
        AVX512-BF16 on the target)."""
        return et is ET.BF16 and x is not None and not self._cheap(x, 0) and \
            not target.current().has("avx512bf16")

    def _chains(self, op: str, et: ET, lanes: ir.Value | None, cols: int,
                x: Instruction | None = None) -> list[ir.Value]:
        """The vector accumulators (`lanes` first) of a float max/min (MINMAX_CHAINS) or an
        f32/f64 add/multiply of a cheap row expression x (SUM_CHAINS) along `cols` columns
        when that many vectors fit the row, else just `lanes`."""
        if lanes is None:
            return []
        if op in ("maximum", "minimum") and et.is_float:
            n = NARROW_MINMAX_CHAINS if self._rounding_row(et, x) else MINMAX_CHAINS
        elif op in ("add", "multiply") and et in (ET.F32, ET.F64) and x is not None \
                and self._cheap(x):
            n = SUM_CHAINS
        else:
            return [lanes]
        if cols < n * self.width:
            return [lanes]
        return [lanes] + [self._lane_acc(op, et, True) for _ in range(n - 1)]

    def _chain_loop(self, cols: int, name: str, chains: list[ir.Value],
                    step: Any) -> int:
        """step(slot, Lane) over [0, n) columns, W lanes into each of the `chains` slots in
        turn, for the largest n that is a multiple of W * len(chains); returns n (0 for
        fewer than two chains: the caller's lane loop covers every column)."""
        if len(chains) < 2:
            return 0
        w = self.width
        n = cols // (w * len(chains)) * (w * len(chains))
        with for_range(self.b, i64(0), i64(n), name=name, step=w * len(chains)) as c:
            for j, slot in enumerate(chains):
                step(slot, Lane(c if j == 0 else self.b.add(c, i64(j * w), flags=["nsw"])))
        return n

    def _fold_chains(self, op: str, et: ET, lanes: ir.Value | None,
                     chains: list[ir.Value]) -> None:
        """*lanes = the vector combination of every chain's slot (max/min: exact; sums:
        reassociated)."""
        b = self.b
        for slot in chains[1:]:
            b.store(self._combine(op, et, b.load(lanes), b.load(slot), late=True), lanes)

    def _fold_lanes(self, op: str, et: ET, lanes: ir.Value | None, accp: ir.Value) -> None:
        """*accp = *accp (op) (the lanes of *lanes combined); max/min flushed by the caller
        (`_late_flush`)."""
        if lanes is None:
            return
        b = self.b
        v = horizontal(b, b.load(lanes), lambda p, q: self._combine(op, et, p, q, True))
        b.store(self._combine(op, et, b.load(accp), v, late=True), accp)

    def _worth_caching(self, x: Instruction, red: Instruction, cols: int) -> bool:
        """x (a row reduction's operand) is computed here, read by something else too, holds
        a transcendental or bf16 arithmetic rounded by integer code (`_rounding_row`: ~10
        vector instructions an op, and as many to compile again where it is read: x86-64-v3
        attention_bf16's scaled scores, read by the row max and the exp), and a row of it
        fits in 64 KiB of stack."""
        if id(x) in self.leaves or id(x) in self.row_cache or len(x.users) < 2:
            return False
        if cols * 8 > 1 << 16:
            return False
        if self._rounding_row(x.shape.element_type, x):
            return True
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

    def _combine(self, op: str, et: ET, acc: ir.Value, v: ir.Value,
                 flushed: bool = False, late: bool = False) -> ir.Value:
        """One reduction step; float add/multiply reassociate (vector accumulators).
        `flushed`: v is a partial result (already flushed). `late`: the accumulator is
        flushed once when done (`_late_flush`), so a float max/min step skips the flush of v:
        flushing is monotone (denormals to a signed zero, and -0 < +0 as llvm.maximum
        orders them), so flush(max(xs)) == max(flush(x) for x in xs), NaN included. Four
        vector instructions fewer per step (softmax's row max), and less to compile."""
        b = self.b
        if op == "add" and ew._isfloat(v) and et in (ET.F32, ET.F64):
            return b.fadd(acc, v, flags=["reassoc", "nsz"])
        if op == "multiply" and ew._isfloat(v) and et in (ET.F32, ET.F64):
            return b.fmul(acc, v, flags=["reassoc", "nsz"])
        if op == "add" and et in (ET.C64, ET.C128):
            # two float sums side by side, reassociated as theirs: LLVM's vectorizer takes
            # the loop (interleaved loads), where the complex add's two serial chains ran
            # one element a step (the row sums of a 256 x 4096 c64: 1.0 -> 0.2 ms, XLA 0.4-0.6)
            (ar, ai), (vr, vi) = ewc.parts(b, acc), ewc.parts(b, v)
            return ewc.pack(b, b.fadd(ar, vr, flags=["reassoc", "nsz"]),
                           b.fadd(ai, vi, flags=["reassoc", "nsz"]))
        if op in ("maximum", "minimum") and ew._isfloat(v):
            # acc is already flushed (init and every step): flushing only v keeps the
            # recurrence a plain llvm.maximum/minimum, which LLVM vectorizes.
            v = v if flushed or late else ew.flush(b, v)
            return intrinsic(b, f"llvm.{op}.{ew._fsfx(v)}", v.type, [acc, v])
        return ew.emit(b, op, [acc, v], et, et)

    def _late_flush(self, op: str, acc: ir.Value) -> ir.Value:
        """A finished accumulator of `_combine(..., late=True)` steps, flushed."""
        if op in ("maximum", "minimum") and ew._isfloat(acc):
            return ew.flush(self.b, acc)
        return acc

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
        self.partial = _partial_kind(op, et, init, int(np.prod(dims))) \
            if dims and not split else None
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

        # A float max/min accumulated straight into the output rows (s == n) skips each
        # element's flush (`_combine`'s late) and flushes this range of the output once at
        # the end: four of its nine vector instructions a step on AVX2 (f32[65536, 64].max(0)
        # on Zen 3; its time there, 1.4x XLA's, moved less than that machine's noise).
        late_rows = 0 < s == n and op in ("maximum", "minimum") and ew._isfloat(init_c)

        def combine(acc: ir.Value, v: ir.Value) -> ir.Value:
            return self._combine(op, et, acc, v, late=late_rows)

        def out_ptr(idx: list[ir.Value]) -> ir.Value:
            return b.gep(out, [self.linear([idx[d] for d in kept], out_dims)], inbounds=True)

        def outer_body(idx: list[ir.Value], rng: tuple[ir.Value, ir.Value] | None = None
                       ) -> None:
            p = out_ptr(idx)
            if s == n:  # innermost kept: accumulate straight into the output row
                self.memo.clear()
                acc, v = self._unify([ew.from_storage(b, self._access(p, idx), et),
                                      self.gen(x, idx)])
                self._access(p, idx, ew.to_storage(b, combine(acc, v), et))
                return
            with b.goto_entry_block():
                accp = b.alloca(ew.compute_type(et), name="acc")
            b.store(ew.from_storage(b, b.load(p), et), accp)
            lanes = self._lane_acc(op, et, bool(self.width) and (
                dims[-1] >= self.width or (n == 1 and rng is not None) or self.masked))

            def inner(full: list[ir.Value], slot: ir.Value | None = None) -> None:
                self.memo.clear()
                v = self.gen(x, full)
                acc = slot or accp
                if has_lane(full):
                    acc, v = slot or lanes, self._live(op, et, self.splat(v), live_lanes(full))
                b.store(self._combine(op, et, b.load(acc), v, late=True), acc)

            # Reducing only the innermost dimension (a row max): independent accumulators.
            chains = self._chains(op, et, lanes, dims[-1], x) if len(idx) == n - 1 and \
                rng is None else [lanes]

            def exact() -> None:
                done = self._chain_loop(dims[-1], "ru", chains, lambda slot, c: inner(
                    idx + [c], slot))
                if lanes is None and op == "add" and et in (ET.C64, ET.C128) and \
                        int(np.prod(dims[len(idx):])) > SCALAR_SUM_BLOCK:
                    self._nest_scalar_blocked(dims, idx, inner, rng, accp, et)
                elif lanes is None and op == "multiply" and et in (ET.C64, ET.C128) and \
                        len(idx) == n - 1 and rng is None and dims[-1] >= 2 * PRODUCT_CHAINS:
                    self._complex_product_chains(dims[-1], idx, inner, accp, et)
                elif done or lanes is None or op != "add" or et not in (ET.F32, ET.F64):
                    self._nest_from(dims, idx, inner, (i64(done), i64(dims[-1])) if done
                                    else rng)
                else:  # one long chain per lane: summed in blocks (SUM_BLOCK)
                    self._nest_blocked(dims, idx, inner, rng, lanes, op, et,
                                       SUM_CHAINS if self._cheap(x) else 1)
                self._fold_chains(op, et, lanes, chains)
                self._fold_lanes(op, et, lanes, accp)

            def value(c: Lane) -> ir.Value:
                self.memo.clear()
                return self.gen(x, idx + [c])

            def scalar() -> None:  # the fast loop's rare exact rows: small code
                with for_range(b, i64(0), i64(dims[-1]), name="rus") as c:
                    inner(idx + [c])

            # (hoist_emit: what the outer indices fix - xent's log of the row's sum, its
            # label - is computed once per output, not per vector: 0.25 -> 0.044 ms there)
            with self._phase(idx):
                if (len(chains) > 1 or (dims[-1] <= self.width and len(idx) == n - 1 and
                                         rng is None)) and \
                        fast_ok(op, et, dims[-1], self.width, self.masked):
                    self._fast_row(op, et, dims[-1], "ru", accp, value, scalar)
                else:
                    exact()
            b.store(ew.to_storage(b, self._late_flush(op, b.load(accp)), et), p)

        if s == 0:
            outer_body([], (begin, end))
        elif op == "add" and et in (ET.C64, ET.C128) and (lead := _middle(red, n)) is not None \
                and 2 * int(np.prod(dims[max(red) + 1:])) <= COLUMN_FLOATS:
            self._complex_columns(dims, lead, max(red) + 1, (begin, end), out, x, et)
        elif s < n or not self._column_registers(op, et, x, dims, red, begin, end, out):
            self._nest(dims[:s], begin, end, outer_body, lanes=s == n)
            if late_rows:
                with for_range(b, lo, hi, name="flush") as o:
                    q = b.gep(out, [o], inbounds=True)
                    b.store(ew.to_storage(b, self._late_flush(op, ew.from_storage(
                        b, b.load(q), et)), et), q)
        return outer, split

    def _nest_blocked(self, dims: Sequence[int], idx: list[ir.Value], body: Any,
                      rng: tuple[ir.Value, ir.Value] | None, lanes: ir.Value, op: str,
                      et: ET, chains: int) -> None:
        """_nest_from for a float sum into the one vector accumulator `lanes`: its vectors
        are added SUM_BLOCK at a time into `chains` block accumulators in turn (body(idx,
        slot)), then the block (their tree) into `lanes`: each lane's chain of roundings is
        ~2 sqrt(n) long, not n. One chain is a vaddps latency a vector (3-4 cycles): the sum
        of 64M floats read 18.6 GB/s on a Zen 3 core; 4 chains: one core 14.4 -> 12.6 ms, two
        8.3 -> 6.8-7.7 ms (XLA 6.6-7.1). Sum chains only (`_cheap` x): each is a copy of x."""
        b, w = self.b, self.width
        d = len(idx)
        lo, hi = rng if rng is not None else (i64(0), i64(dims[d]))
        if d < len(dims) - 1:  # (what the outer reduced indices fix: once, hoist_emit)
            with for_range(b, lo, hi, name=f"r{d}") as i, self._phase(idx + [i], True):
                self._nest_blocked(dims, idx + [i], body, None, lanes, op, et, chains)
            return
        with b.goto_entry_block():
            blks = [b.alloca(lanes.type.pointee, name="block") for _ in range(chains)]
            sup = b.alloca(lanes.type.pointee, name="superblock")
        if isinstance(lo, ir.Constant) and isinstance(hi, ir.Constant):  # (as _lane_loop)
            mid: ir.Value = i64(lo.constant + (hi.constant - lo.constant) // w * w)
            rest = mid.constant < hi.constant
        else:
            mid, rest = b.add(lo, b.and_(b.sub(hi, lo), i64(-w)), flags=["nsw"]), True
        # blocks add into a superblock of SUM_BLOCK of them, superblocks into `lanes`: a
        # lane's chain ~3 cbrt(n) long (a chunk of 2M floats in 4-lane vectors, x86-64-v2:
        # 2048 blocks in a row were 3.5e-5 off)
        span = w * SUM_BLOCK * SUM_BLOCK
        with for_range(b, lo, mid, name=f"r{d}s", step=span) as sj:
            b.store(accumulator_start(op, et, w), sup)
            send = smin(b, b.add(sj, i64(span), flags=["nsw"]), mid)
            self._blocks(idx, sj, send, body, blks, sup, op, et, chains)
            b.store(self._combine(op, et, b.load(lanes), b.load(sup), late=True), lanes)
        if rest:
            with for_range(b, mid, hi, name=f"r{d}") as i:
                body(idx + [i])

    def _blocks(self, idx: list[Any], lo: ir.Value, mid: ir.Value, body: Any,
                blks: list[ir.Value], lanes: ir.Value, op: str, et: ET, chains: int) -> None:
        """_nest_blocked's blocks of SUM_BLOCK vectors over [lo, mid) of the last index (the
        one after idx), each block's tree added into `lanes`."""
        b, w, d = self.b, self.width, len(idx)
        with for_range(b, lo, mid, name=f"r{d}b", step=w * SUM_BLOCK) as j:
            for blk in blks:
                b.store(accumulator_start(op, et, w), blk)
            end = smin(b, b.add(j, i64(w * SUM_BLOCK), flags=["nsw"]), mid)
            whole = j
            if chains > 1:
                whole = b.add(j, b.and_(b.sub(end, j), i64(-w * chains)), flags=["nsw"])
                with for_range(b, j, whole, name=f"r{d}c", step=w * chains) as i:
                    for t, blk in enumerate(blks):
                        at = i if t == 0 else b.add(i, i64(t * w), flags=["nsw"])
                        body(idx + [Lane(at)], blk)
            with for_range(b, whole, end, name=f"r{d}v", step=w) as i:
                body(idx + [Lane(i)], blks[0])
            vals = [b.load(blk) for blk in blks]
            while len(vals) > 1:  # a tree: ((b0 + b1) + (b2 + b3))
                vals = [self._combine(op, et, vals[t], vals[t + 1], late=True)
                        if t + 1 < len(vals) else vals[t] for t in range(0, len(vals), 2)]
            b.store(self._combine(op, et, b.load(lanes), vals[0], late=True), lanes)

    def _nest_from(self, dims: Sequence[int], idx: list[ir.Value], body: Any,
                   rng: tuple[ir.Value, ir.Value] | None = None) -> None:
        """Loops over dims[len(idx):]; `rng` bounds the first of them (else its extent)."""
        d = len(idx)
        if d == len(dims):
            body(idx)
            return
        lo, hi = rng if rng is not None else (i64(0), i64(dims[d]))
        if d == len(dims) - 1:
            self._lane_loop(lo, hi, f"r{d}", lambda i: body(idx + [i]))
            return
        with for_range(self.b, lo, hi, name=f"r{d}") as i, self._phase(idx + [i], True):
            self._nest_from(dims, idx + [i], body)


def _middle(red: set[int], n: int) -> int | None:
    """The first of reduced dimensions `red` (of n) if they are one consecutive run before
    the last dimension, else None."""
    lo, hi = min(red, default=n), max(red, default=n)
    return lo if red and hi < n - 1 and red == set(range(lo, hi + 1)) else None


def _partial_kind(op: str, et: ET, init: Instruction, n: int) -> str | None:
    """How partial outputs of a reduce of `n` elements combine ("add", "maximum", ...), or
    None if they cannot (or, a small complex sum, need not)."""
    if op in ("maximum", "minimum", "and", "or"):
        return op if et in PARTIAL_INTS or op in ("maximum", "minimum") and \
            et in (ET.F32, ET.F64, ET.BF16, ET.F16) and n >= PARTIAL_FLOAT else None
    if op != "add" or not (et in PARTIAL_INTS or et in (ET.F32, ET.F64) or
                           (et.is_complex and n >= PARTIAL_COMPLEX)):
        return None
    if init.opcode != "constant":
        return None
    return op if np.asarray(init.attrs.literal.to_numpy()).reshape(()).item() == 0 else None
