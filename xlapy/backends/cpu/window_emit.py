"""Native reduce_window and select_and_scatter (op_emit.py functions), exact to the
interpreter (xlapy/ops/reduction_window.py).

reduce_window: every output element folds its window in the interpreter's order: the init
value, then the window positions in row-major order, a position outside the (base-dilated,
padded) operand contributing the init value, as the interpreter's padded copy does. Output
rows along the last dimension accumulate in the output buffer, window position by window
position, so the innermost loop runs over contiguous channels (NHWC pooling vectorizes).
The cumulative form (jnp.cumsum/cumprod/cummax/cummin: a window as long as its axis, low
padding one less) is a running scan when the init value is idempotent under the reducer
(init op init == init, checked at run time: then the leading padding folds to init),
else the same fold per element. Split over threads along the output's dimension 0 (each
element's fold is fixed, so the bits never depend on the thread count).

select_and_scatter: per source element in row-major order, the window's valid positions in
row-major order choose one (the running choice kept while select(best, candidate) holds),
then out[chosen] = scatter(out[chosen], source) - sequential, as the interpreter's rounds
apply updates to one target in source order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import region_emit
from xlapy.backends.cpu.llvm_util import I1, I64, for_range, i64
from xlapy.backends.cpu.op_emit import OpEmitter
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET


def _vec(v: Sequence[int] | None, rank: int, fill: int = 1) -> list[int]:
    return [fill] * rank if v is None else list(v)


def _pads(v: Sequence[Sequence[int]] | None, rank: int) -> list[tuple[int, int]]:
    return [(0, 0)] * rank if v is None else [(int(p[0]), int(p[1])) for p in v]


def emitter(instr: Instruction) -> type[OpEmitter] | None:
    op = instr.opcode
    if op == "reduce_window":
        if len(instr.operands) != 2 or not instr.shape.is_array or len(instr.called) != 1:
            return None
        x, init = instr.operands
        if not (x.shape.is_array and region_emit.types_ok(x.shape.element_type)
                and init.shape.is_array and init.shape.rank == 0):
            return None
        comp = instr.called[0]
        if not region_emit.supported(comp) or len(region_emit.results(comp)) != 1:
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


def _storage_bits(b: ir.IRBuilder, v: ir.Value, t: ET) -> ir.Value:
    """v's stored bits as an integer (to compare values bit for bit)."""
    s = ew.to_storage(b, v, t)
    if isinstance(s.type, ir.IntType):
        return s
    return b.bitcast(s, ir.IntType({"half": 16, "float": 32, "double": 64}[str(s.type)]))


class ReduceWindowEmitter(OpEmitter):
    label = "native reduce_window"

    def body(self, begin: ir.Value, end: ir.Value) -> tuple[int, bool, int]:
        instr = self.instr
        x = instr.operands[0]
        self.et = x.shape.element_type
        self.comp = instr.called[0]
        dims = list(x.shape.dimensions)
        r = len(dims)
        a = instr.attrs
        self.win = list(a.window_dimensions)
        self.st = _vec(a.window_strides, r)
        self.bd = _vec(a.base_dilations, r)
        self.wd = _vec(a.window_dilations, r)
        self.pad = _pads(a.padding, r)
        self.dims = dims
        self.odims = list(instr.shape.dimensions)
        self.init = self.load(self.ins[1], self.et, i64(0))
        cost = math.prod(self.odims) * max(math.prod(self.win), 1)
        axis = self._scan_axis()
        if axis is not None:
            return self._scan(axis, begin, end, cost)
        return self._generic(begin, end, cost)

    def red(self, acc: ir.Value, v: ir.Value) -> ir.Value:
        return region_emit.emit(self.b, self.comp, [acc, v])[0]

    # ---- the cumulative form ----
    def _scan_axis(self) -> int | None:
        """The axis of a cumulative window (forward: low padding n - 1), else None."""
        r = len(self.dims)
        found = None
        for d in range(r):
            n = self.dims[d]
            if self.st[d] != 1 or self.bd[d] != 1 or self.wd[d] != 1:
                return None
            if self.win[d] == 1 and self.pad[d] == (0, 0):
                continue
            if found is not None or n < 2 or self.win[d] != n or self.pad[d] != (n - 1, 0):
                return None
            found = d
        return found

    def _scan(self, axis: int, begin: ir.Value, end: ir.Value, cost: int
              ) -> tuple[int, bool, int]:
        b, et = self.b, self.et
        outer = math.prod(self.dims[:axis])
        n = self.dims[axis]
        inner = math.prod(self.dims[axis + 1:])
        if axis == 0:
            begin, end = i64(0), i64(1)
        sx, so = self.ins[0], self.out
        init = self.init
        idem = b.icmp_unsigned("==", _storage_bits(b, self.red(init, init), et),
                               _storage_bits(b, init, et))
        with for_range(b, begin, end, name="p") as p:
            row0 = b.mul(p, i64(n * inner), flags=["nsw"])
            with b.if_else(idem) as (scan, fold):
                with scan:
                    with for_range(b, i64(0), i64(inner), name="k0") as k:
                        at = b.add(row0, k, flags=["nsw"])
                        self.store(so, et, at, self.red(init, self.load(sx, et, at)))
                    with for_range(b, i64(1), i64(n), name="i") as i:
                        rowi = b.add(row0, b.mul(i, i64(inner), flags=["nsw"]), flags=["nsw"])
                        with for_range(b, i64(0), i64(inner), name="k") as k:
                            at = b.add(rowi, k, flags=["nsw"])
                            prev = self.load(so, et, b.sub(at, i64(inner)))
                            self.store(so, et, at, self.red(prev, self.load(sx, et, at)))
                with fold:  # init op init != init: the padding counts, fold per element
                    with for_range(b, i64(0), i64(n), name="fi") as i:
                        with for_range(b, i64(0), i64(inner), name="fk") as k:
                            accp = self._acc_slot()
                            b.store(init, accp)
                            with for_range(b, i64(0), i64(n), name="fw") as w:
                                src = b.add(b.sub(i, i64(n - 1)), w)
                                ok = b.icmp_signed(">=", src, i64(0))
                                safe = b.select(ok, src, i64(0))
                                at = b.add(row0, b.add(b.mul(safe, i64(inner)), k))
                                v = ew.select(b, ok, self.load(sx, et, at), init)
                                b.store(self.red(b.load(accp), v), accp)
                            at = b.add(row0, b.add(b.mul(i, i64(inner)), k))
                            self.store(so, et, at, b.load(accp))
        return outer if axis else 1, axis > 0, cost

    def _acc_slot(self) -> ir.Value:
        b = self.b
        if not hasattr(self, "_accp"):
            with b.goto_entry_block():
                self._accp = b.alloca(ew.compute_type(self.et), name="acc")
        return self._accp

    # ---- any window ----
    def _coord(self, d: int, o: ir.Value, w: ir.Value) -> tuple[ir.Value | None, ir.Value]:
        """(valid or None when always valid, operand index) of output index o, window
        position w along dimension d."""
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

    def _trivial_last(self) -> bool:
        r = len(self.dims)
        return (self.win[r - 1] == 1 and self.st[r - 1] == 1 and self.bd[r - 1] == 1
                and self.pad[r - 1] == (0, 0))

    def _generic(self, begin: ir.Value, end: ir.Value, cost: int) -> tuple[int, bool, int]:
        b, et = self.b, self.et
        r = len(self.dims)
        sx, so = self.ins[0], self.out
        odims = self.odims
        empty = math.prod(self.dims) == 0
        if r == 0:
            v = self.init if empty else self.load(sx, et, i64(0))
            self.store(so, et, i64(0), self.red(self.init, v))
            return 1, False, cost
        last = odims[-1]
        trivial = self._trivial_last()

        def row(pre: list[ir.Value], jr: tuple[ir.Value, ir.Value]) -> None:
            base = self.linear(pre + [i64(0)], odims)
            with for_range(b, jr[0], jr[1], name="ij") as j:
                self.store(so, et, b.add(base, j), self.init)

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

                def step(valid: bool) -> None:
                    with for_range(b, jr[0], jr[1], name="j") as j:
                        at = b.add(base, j)
                        if not valid:
                            v = self.init
                        elif trivial:
                            v = self.load(sx, et, b.add(xbase, j))
                        else:
                            okj, q = self._coord(r - 1, j, w[r - 1])
                            safe = b.select(okj, b.add(xbase, q), i64(0))
                            v = ew.select(b, okj, self.load(sx, et, safe), self.init)
                        self.store(so, et, at, self.red(self.load(so, et, at), v))

                with b.if_else(ok) as (yes, no):
                    with yes:
                        step(True)
                    with no:
                        step(False)

            self.loops(self.win, window, name="w")

        if r == 1:
            row([], (begin, end))
        else:
            self.loops(odims[:-1], lambda pre: row(pre, (i64(0), i64(last))), (begin, end))
        return odims[0], True, cost


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
        st = _vec(a.window_strides, r)
        pad = _pads(a.padding, r)
        sel, sca = instr.called
        sx, ss, si = self.ins
        so = self.out
        init = self.load(si, et, i64(0))
        with for_range(b, i64(0), i64(math.prod(dims)), name="fill") as e:
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

        self.loops(sdims, per_source, name="s")
        return 1, False, max(math.prod(sdims) * max(math.prod(win), 1), 1)


__all__ = ["emitter", "ReduceWindowEmitter", "SelectAndScatterEmitter"]
