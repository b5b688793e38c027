"""Native reduce_window and select_and_scatter (op_emit.py functions), exact to the
interpreter (xlapy/ops/reduction_window.py) but for cumulative float windows, which fold in
XLA CPU's order (below).

reduce_window: every output element folds its window in the interpreter's order: the init
value, then the window positions in row-major order, a position outside the (base-dilated,
padded) operand contributing the init value, as the interpreter's padded copy does. Output
rows along the last dimension accumulate in the output buffer, window position by window
position, so the innermost loop runs over contiguous channels (NHWC pooling vectorizes).
The cumulative form (jnp.cumsum/cumprod/cummax/cumlogsumexp: a window as long as its axis,
low padding one less; reversed, high padding one less: cumsum(reverse=True), cumsum's
gradient) of one operand folds in XLA CPU's order where the order can change bits (floats,
any length past 16 forward, any reversed; cumulative_emit.py), so cumsum gives jax's bits;
integer reducers keep a running scan (a suffix scan reversed), the same bits in any order.
Either needs the init value idempotent under the reducer (init op init == init, checked at
run time: then the padding folds to init), else each element folds its window whole. A fold
of every suffix had taken n^2 / 2 steps a column (1024 x 512 f32: 17.9 ms against XLA's
1.9; in XLA's order now 0.57). Split over threads along the output's dimension 0 (each
element's fold is fixed, so the bits never depend on the thread count).

select_and_scatter: per source element in row-major order, the window's valid positions in
row-major order choose one (the running choice kept while select(best, candidate) holds),
then out[chosen] = scatter(out[chosen], source) - sequential, as the interpreter's rounds
apply updates to one target in source order. A window of one row with unit stride along
dimension 0 (pooling over NHWC's batch) keeps each source row's updates in its own result
row: the rows split over threads (max-pool gradient 16x32x32x64: 9.3 -> 4.7 ms).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from llvmlite import ir

from xlapy.backends.cpu import cumulative_emit, region_emit
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.lanes import vector_width
from xlapy.backends.cpu.llvm_util import I1, I64, for_range, i64
from xlapy.backends.cpu.op_emit import OpEmitter
from xlapy.backends.cpu.window_slide import SlideEmitter
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: Largest window stride along the last dimension whose columns fold as vectors (each a
#: contiguous load of (lanes - 1) * stride + 1 elements, then every stride-th).
MAX_VECTOR_STRIDE = 4


def window_vec(v: Sequence[int] | None, rank: int, fill: int = 1) -> list[int]:
    return [fill] * rank if v is None else list(v)


def window_pads(v: Sequence[Sequence[int]] | None, rank: int) -> list[tuple[int, int]]:
    return [(0, 0)] * rank if v is None else [(int(p[0]), int(p[1])) for p in v]


def emitter(instr: Instruction) -> type[OpEmitter] | None:
    op = instr.opcode
    if op == "reduce_window":
        n = len(instr.operands) // 2
        if n < 1 or len(instr.called) != 1:
            return None
        xs, inits = instr.operands[:n], instr.operands[n:]
        if not all(x.shape.is_array and region_emit.types_ok(x.shape.element_type)
                   for x in xs) or not all(i.shape.is_array and i.shape.rank == 0
                                           for i in inits):
            return None
        comp = instr.called[0]
        if not region_emit.supported(comp) or len(region_emit.results(comp)) != n:
            return None
        return ReduceWindowEmitter
    if op == "select_and_scatter":
        x, src, init = instr.operands
        if not (x.shape.is_array and region_emit.types_ok(x.shape.element_type)
                and len(instr.called) == 2):
            return None
        sel, sca = instr.called
        if not (region_emit.supported(sel) and region_emit.supported(sca)
                and len(region_emit.results(sel)) == 1
                and len(region_emit.results(sca)) == 1):
            return None
        return SelectAndScatterEmitter
    return None


def _clamp(b: ir.IRBuilder, v: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """v limited to [lo, hi] (lo <= hi)."""
    v = b.select(b.icmp_signed("<", v, lo), lo, v)
    return b.select(b.icmp_signed(">", v, hi), hi, v)


def _storage_bits(b: ir.IRBuilder, v: ir.Value, t: ET) -> ir.Value:
    """v's stored bits as an integer (to compare values bit for bit)."""
    s = ew.to_storage(b, v, t)
    if isinstance(s.type, ir.IntType):
        return s
    return b.bitcast(s, ir.IntType({"half": 16, "float": 32, "double": 64}[str(s.type)]))


class ReduceWindowEmitter(OpEmitter, SlideEmitter):
    """reduce_window of N operands (N results: a TupleKernel when N > 1)."""

    label = "native reduce_window"

    def body(self, begin: ir.Value, end: ir.Value) -> tuple[int, bool, int]:
        instr = self.instr
        self.n = n = len(instr.operands) // 2
        x = instr.operands[0]
        self.ets = [o.shape.element_type for o in instr.operands[:n]]
        self.comp = instr.called[0]
        dims = list(x.shape.dimensions)
        r = len(dims)
        a = instr.attrs
        self.win = list(a.window_dimensions)
        self.st = window_vec(a.window_strides, r)
        self.bd = window_vec(a.base_dilations, r)
        self.wd = window_vec(a.window_dilations, r)
        self.pad = window_pads(a.padding, r)
        self.dims = dims
        shapes = list(instr.shape.tuple_shapes) if self.tupled else [instr.shape]
        self.odims = list(shapes[0].dimensions)
        self.xp = [self.ptr(self.ins[k], t) for k, t in enumerate(self.ets)]
        self.op = [self.result(k, t) if self.tupled else self.ptr(self.out, t)
                   for k, t in enumerate(self.ets)]
        self.init = [self.load(self.ins[n + k], t, i64(0)) for k, t in enumerate(self.ets)]
        cost = math.prod(self.odims) * max(math.prod(self.win), 1) * n
        scan = self._scan_axis()
        if scan is not None:
            return self._scan(*scan, begin, end, cost)
        return self._generic(begin, end, cost)

    def red(self, acc: list[ir.Value], v: list[ir.Value]) -> list[ir.Value]:
        return region_emit.emit(self.b, self.comp, [*acc, *v])

    def ld(self, ps: list[ir.Value], at: ir.Value) -> list[ir.Value]:
        b = self.b
        return [ew.from_storage(b, b.load(b.gep(p, [at], inbounds=True)), t)
                for p, t in zip(ps, self.ets)]

    def st_(self, ps: list[ir.Value], at: ir.Value, vs: list[ir.Value]) -> None:
        b = self.b
        for p, t, v in zip(ps, self.ets, vs):
            b.store(ew.to_storage(b, v, t), b.gep(p, [at], inbounds=True))

    # ---- the cumulative form ----
    def _scan_axis(self) -> tuple[int, bool] | None:
        """(the axis of a cumulative window, whether reversed), else None: forward, low
        padding n - 1; reversed (jnp.cumsum(reverse=True), cumsum's gradient), high padding
        n - 1, one operand."""
        r = len(self.dims)
        found = None
        for d in range(r):
            n = self.dims[d]
            if self.st[d] != 1 or self.bd[d] != 1 or self.wd[d] != 1:
                return None
            if self.win[d] == 1 and self.pad[d] == (0, 0):
                continue
            rev = self.pad[d] == (0, n - 1) and self.n == 1
            if found is not None or n < 2 or self.win[d] != n or \
                    (self.pad[d] != (n - 1, 0) and not rev):
                return None
            found = (d, rev)
        return found

    def _scan(self, axis: int, rev: bool, begin: ir.Value, end: ir.Value, cost: int
              ) -> tuple[int, bool, int]:
        b = self.b
        outer = math.prod(self.dims[:axis])
        n = self.dims[axis]
        inner = math.prod(self.dims[axis + 1:])
        if axis == 0:
            begin, end = i64(0), i64(1)
        xp, op, init = self.xp, self.op, self.init
        idem: ir.Value = ir.Constant(I1, 1)
        for v, i0, t in zip(self.red(init, init), init, self.ets):
            idem = b.and_(idem, b.icmp_unsigned("==", _storage_bits(b, v, t),
                                                _storage_bits(b, i0, t)))
        accp = self._acc_slots()
        tree = self.n == 1 and cumulative_emit.needed(region_emit.binary_kind(self.comp),
                                                      self.ets[0], n, rev)
        with for_range(b, begin, end, name="p") as p:
            row0 = b.mul(p, i64(n * inner), flags=["nsw"])
            with b.if_else(idem) as (scan, fold):
                with scan:
                    if tree:  # XLA CPU's order (cumulative_emit.py)
                        cumulative_emit.emit(self, row0, n, inner, rev)
                    else:
                        self._running(row0, n, inner, rev)
                with fold:  # init op init != init: the padding counts, fold per element
                    with for_range(b, i64(0), i64(n), name="fi") as i:
                        with for_range(b, i64(0), i64(inner), name="fk") as k:
                            for a_, v in zip(accp, init):
                                b.store(v, a_)
                            with for_range(b, i64(0), i64(n), name="fw") as w:
                                src = b.add(i, w) if rev else b.add(b.sub(i, i64(n - 1)), w)
                                ok = b.and_(b.icmp_signed(">=", src, i64(0)),
                                            b.icmp_signed("<", src, i64(n)))
                                safe = b.select(ok, src, i64(0))
                                at = b.add(row0, b.add(b.mul(safe, i64(inner)), k))
                                vs = [ew.select(b, ok, v, i0)
                                      for v, i0 in zip(self.ld(xp, at), init)]
                                new = self.red([b.load(a_) for a_ in accp], vs)
                                for a_, v in zip(accp, new):
                                    b.store(v, a_)
                            at = b.add(row0, b.add(b.mul(i, i64(inner)), k))
                            self.st_(op, at, [b.load(a_) for a_ in accp])
        return outer if axis else 1, axis > 0, cost

    def _running(self, row0: ir.Value, n: int, inner: int, rev: bool) -> None:
        """A running scan (forward) or suffix scan (reversed) of one row: the bits of every
        order where cumulative_emit.needed says so."""
        b = self.b
        xp, op, init = self.xp, self.op, self.init
        first = i64((n - 1) * inner if rev else 0)
        with for_range(b, i64(0), i64(inner), name="k0") as k:
            at = b.add(b.add(row0, first), k, flags=["nsw"])
            v = self.red(init, self.ld(xp, at))
            self.st_(op, at, self.red(v, init) if rev else v)  # (its padding)
        with for_range(b, i64(1), i64(n), name="i") as i:
            row = b.sub(i64(n - 1), i) if rev else i
            rowi = b.add(row0, b.mul(row, i64(inner), flags=["nsw"]),
                         flags=["nsw"])
            with for_range(b, i64(0), i64(inner), name="k") as k:
                at = b.add(rowi, k, flags=["nsw"])
                if rev:  # init op x[i] op out[i + 1]: a suffix, right to left
                    nxt = self.ld(op, b.add(at, i64(inner)))
                    self.st_(op, at, self.red(
                        self.red(init, self.ld(xp, at)), nxt))
                else:
                    prev = self.ld(op, b.sub(at, i64(inner)))
                    self.st_(op, at, self.red(prev, self.ld(xp, at)))

    def _acc_slots(self) -> list[ir.Value]:
        b = self.b
        with b.goto_entry_block():
            return [b.alloca(ew.compute_type(t), name=f"acc{k}")
                    for k, t in enumerate(self.ets)]

    # ---- any window ----
    def _coord(self, d: int, o: ir.Value, w: ir.Value) -> tuple[ir.Value | None, ir.Value]:
        """(valid, operand index) of output index o, window position w along dimension d."""
        b = self.b
        st, wd, bd, (lo, _) = self.st[d], self.wd[d], self.bd[d], self.pad[d]
        n = self.dims[d]
        q = b.add(b.mul(o, i64(st)), b.mul(w, i64(wd)))
        if lo:
            q = b.sub(q, i64(lo))
        size = 0 if n == 0 else (n - 1) * bd + 1
        ok = b.and_(b.icmp_signed(">=", q, i64(0)), b.icmp_signed("<", q, i64(size)))
        if bd == 1:
            return ok, q
        ok = b.and_(ok, b.icmp_signed("==", b.srem(q, i64(bd)), i64(0)))
        return ok, b.sdiv(q, i64(bd))

    def _valid_columns(self, w: ir.Value, jr: tuple[ir.Value, ir.Value]
                       ) -> tuple[ir.Value, ir.Value]:
        """[j0, j1) within jr: the output columns whose element at window position w of the
        last dimension lies in the operand (j * stride + w * wdil - low in [0, n)), as
        _coord tests one at a time; every column outside reads the padding (init)."""
        b = self.b
        d = len(self.dims) - 1
        st, wd, bd, (lo, _) = self.st[d], self.wd[d], self.bd[d], self.pad[d]
        size = 0 if self.dims[d] == 0 else (self.dims[d] - 1) * bd + 1
        off = b.sub(b.mul(w, i64(wd)), i64(lo))  # q = j * st + off

        # j0 = ceil(-off / st) = -floor(off / st), j1 = floor((size - 1 - off) / st) + 1
        def floordiv(a: ir.Value) -> ir.Value:
            q = b.sdiv(a, i64(st))
            neg = b.and_(b.icmp_signed("<", a, i64(0)),
                         b.icmp_signed("!=", b.srem(a, i64(st)), i64(0)))
            return b.sub(q, b.zext(neg, I64))

        j0 = _clamp(b, b.sub(i64(0), floordiv(off)), *jr)  # ceil(-off / st)
        j1 = _clamp(b, b.add(floordiv(b.sub(i64(size - 1), off)), i64(1)), *jr)
        return j0, b.select(b.icmp_signed("<", j1, j0), j0, j1)

    def _fold_vectors(self, lo: ir.Value, hi: ir.Value, base: ir.Value, xbase: ir.Value,
                      w: ir.Value) -> ir.Value:
        """Output columns [lo, hi) (every one reading the operand at window position w of the
        last dimension) folded a vector of them at a time, where one f32/f64 operand with
        stride up to MAX_VECTOR_STRIDE allows: the operand elements of a vector of columns
        are one contiguous load, every stride-th taken (NCHW max pooling 3 x 3 / 2 was a
        scalar loop: 2.9 ms against XLA's 2.2). Each column folds the same values in the
        same order as the scalar loop. Returns the first column left to that loop."""
        b = self.b
        d = len(self.dims) - 1
        st = self.st[d]
        lanes = vector_width()
        if self.n != 1 or self.ets[0] not in (ET.F32, ET.F64) or lanes < 2 or \
                not 1 <= st <= MAX_VECTOR_STRIDE or self.bd[d] != 1:
            return lo
        if self.ets[0] is ET.F64:
            lanes //= 2
        t = ew.compute_type(self.ets[0])
        size = self.ets[0].bits // 8
        span = (lanes - 1) * st + 1
        off = b.sub(b.mul(w, i64(self.wd[d])), i64(self.pad[d][0]))  # q = j * st + off
        blocks = b.sdiv(b.sub(hi, lo), i64(lanes))
        with for_range(b, i64(0), blocks, name="jv") as k:
            j = b.add(lo, b.mul(k, i64(lanes)))
            at = b.gep(self.op[0], [b.add(base, j)], inbounds=True)
            acc_p = b.bitcast(at, ir.VectorType(t, lanes).as_pointer())
            acc = b.load(acc_p, align=size)
            src = b.gep(self.xp[0], [b.add(xbase, b.add(b.mul(j, i64(st)), off))],
                        inbounds=True)
            wide = b.load(b.bitcast(src, ir.VectorType(t, span).as_pointer()),
                          align=size)
            v = wide if st == 1 else b.shuffle_vector(
                wide, ir.Constant(ir.VectorType(t, span), ir.Undefined),
                ir.Constant(ir.VectorType(ir.IntType(32), lanes), [i * st for i in range(lanes)]))
            b.store(self.red([acc], [v])[0], acc_p, align=size)
        return b.add(lo, b.mul(blocks, i64(lanes)))

    def _trivial_last(self) -> bool:
        r = len(self.dims)
        return (self.win[r - 1] == 1 and self.st[r - 1] == 1 and self.bd[r - 1] == 1
                and self.pad[r - 1] == (0, 0))

    def _generic(self, begin: ir.Value, end: ir.Value, cost: int) -> tuple[int, bool, int]:
        b = self.b
        r = len(self.dims)
        xp, op, init = self.xp, self.op, self.init
        odims = self.odims
        empty = math.prod(self.dims) == 0
        if r == 0:
            v = init if empty else self.ld(xp, i64(0))
            self.st_(op, i64(0), self.red(init, v))
            return 1, False, cost
        last = odims[-1]
        trivial = self._trivial_last()

        def row(pre: list[ir.Value], jr: tuple[ir.Value, ir.Value]) -> None:
            base = self.linear(pre + [i64(0)], odims)
            with for_range(b, jr[0], jr[1], name="ij") as j:
                self.st_(op, b.add(base, j), init)

            def window(w: list[ir.Value]) -> None:
                ok: ir.Value = ir.Constant(I1, 1)
                xs: list[ir.Value] = []
                for d in range(r - 1):
                    okd, q = self._coord(d, pre[d], w[d])
                    ok = b.and_(ok, okd)
                    xs.append(q)
                if empty:
                    ok = ir.Constant(I1, 0)
                xbase = self.linear(xs + [i64(0)], self.dims)

                def fold(lo: ir.Value, hi: ir.Value, valid: bool, name: str = "j",
                         checked: bool = False) -> None:
                    with for_range(b, lo, hi, name=name) as j:
                        at = b.add(base, j)
                        if not valid:
                            vs = init
                        elif trivial:
                            vs = self.ld(xp, b.add(xbase, j))
                        elif checked:
                            okj, q = self._coord(r - 1, j, w[r - 1])
                            safe = b.select(okj, b.add(xbase, q), i64(0))
                            vs = [ew.select(b, okj, v, i0)
                                  for v, i0 in zip(self.ld(xp, safe), init)]
                        else:  # (valid at every j of the range: _valid_columns)
                            q = self._coord(r - 1, j, w[r - 1])[1]
                            vs = self.ld(xp, b.add(xbase, q))
                        self.st_(op, at, self.red(self.ld(op, at), vs))

                def step(valid: bool) -> None:
                    if not valid or trivial or self.bd[r - 1] != 1:  # (dilated: a test each)
                        fold(jr[0], jr[1], valid, checked=True)
                        return
                    # the columns this window position reads inside the operand, and the
                    # padding on either side: no test per element (NCHW pooling's last
                    # dimension is windowed: max 3x3 / 2 SAME ran 3.3x XLA's time)
                    j0, j1 = self._valid_columns(w[r - 1], jr)
                    fold(jr[0], j0, False, "jl")
                    fold(self._fold_vectors(j0, j1, base, xbase, w[r - 1]), j1, True)
                    fold(j1, jr[1], False, "jh")

                with b.if_else(ok) as (yes, no):
                    with yes:
                        step(True)
                    with no:
                        step(False)

            self.loops(self.win, window, name="w")

        if self.slides():  # (window_slide.py: the interior columns in registers)
            jr = (begin, end) if r == 1 else (i64(0), i64(last))
            self.loops(odims[:-1], lambda pre: self._slide_row(pre, jr, row),
                       None if r == 1 else (begin, end))
        elif r == 1:
            row([], (begin, end))
        else:
            self.loops(odims[:-1], lambda pre: row(pre, (i64(0), i64(last))), (begin, end))
        return odims[0], True, cost

    def _slide_row(self, pre: list[ir.Value], jr: tuple[ir.Value, ir.Value],
                   row: Callable[..., None]) -> None:
        """Columns jr of one output row: the interior ones folded in registers, the others
        (padding, a short rest) by the generic `row`."""
        b = self.b
        j0, j1 = self.interior()
        a = _clamp(b, i64(j0), *jr)
        z = _clamp(b, i64(j1), a, jr[1])
        base = self.linear(pre + [i64(0)], self.odims)
        xbase = self.linear([self._coord(d, v, i64(0))[1] for d, v in enumerate(pre)] +
                            [i64(0)], self.dims)  # (outer windows of one element: valid)
        rest = self.slide(base, xbase, a, z)
        row(pre, (jr[0], a))
        row(pre, (rest, jr[1]))


class SelectAndScatterEmitter(OpEmitter):
    label = "native select_and_scatter"

    def body(self, begin: ir.Value, end: ir.Value) -> tuple[int, bool, int]:
        b = self.b
        instr = self.instr
        x, src, _ = instr.operands
        et = x.shape.element_type
        dims = list(x.shape.dimensions)
        sdims = list(src.shape.dimensions)
        r = len(dims)
        a = instr.attrs
        win = list(a.window_dimensions)
        st = window_vec(a.window_strides, r)
        pad = window_pads(a.padding, r)
        sel, sca = instr.called
        sx, ss, si = self.ins
        so = self.out
        init = self.load(si, et, i64(0))
        # Source row n (dimension 0) only ever reaches result row n when the window is one
        # row with unit stride and no padding there (pooling over NHWC's batch): the rows
        # are independent, split over threads (every target still sees its updates in
        # source order, from one thread).
        split = r > 0 and win[0] == 1 and st[0] == 1 and pad[0] == (0, 0) and \
            sdims[0] == dims[0] and dims[0] >= 2
        if not split:
            begin, end = i64(0), i64(dims[0] if r else 1)
        row = math.prod(dims[1:]) if r else 1
        with for_range(b, b.mul(begin, i64(row)), b.mul(end, i64(row)), name="fill") as e:
            self.store(so, et, e, init)
        with b.goto_entry_block():
            best = b.alloca(ew.compute_type(et), name="best")
            chosen = b.alloca(I64, name="chosen")
        if math.prod(dims) == 0:
            return 1, False, 1

        def per_source(s: list[ir.Value]) -> None:
            b.store(i64(-1), chosen)
            b.store(ew.constant(0, et), best)

            def per_pos(w: list[ir.Value]) -> None:
                ok: ir.Value = ir.Constant(I1, 1)
                qs = []
                for d in range(r):
                    q = b.add(b.mul(s[d], i64(st[d])), w[d])
                    if pad[d][0]:
                        q = b.sub(q, i64(pad[d][0]))
                    ok = b.and_(ok, b.and_(b.icmp_signed(">=", q, i64(0)),
                                           b.icmp_signed("<", q, i64(dims[d]))))
                    qs.append(q)
                with b.if_then(ok):
                    lin = self.linear(qs, dims)
                    cand = self.load(sx, et, lin)
                    have = b.icmp_signed(">=", b.load(chosen), i64(0))
                    keep = region_emit.emit(b, sel, [b.load(best), cand])[0]
                    with b.if_then(b.not_(b.and_(have, keep))):
                        b.store(cand, best)
                        b.store(lin, chosen)

            self.loops(win, per_pos, name="w")
            c = b.load(chosen)
            with b.if_then(b.icmp_signed(">=", c, i64(0))):
                v = self.load(ss, et, self.linear(s, sdims))
                self.store(so, et, c, region_emit.emit(b, sca, [self.load(so, et, c), v])[0])

        self.loops(sdims, per_source, first=(begin, end) if split else None, name="s")
        cost = max(math.prod(sdims) * max(math.prod(win), 1), 1)
        return (dims[0], True, cost) if split else (1, False, cost)


__all__ = ["emitter", "ReduceWindowEmitter", "SelectAndScatterEmitter"]
