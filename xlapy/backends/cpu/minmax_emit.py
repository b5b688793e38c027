"""A float row max/min in two instructions per vector, exact by falling back per row.

`llvm.maximum` (NaN-propagating, -0 < +0) lowers to about six vector instructions on x86
(sign test, two blends, max, NaN compare, blend) and more with AVX2: the 8192x1024 row max
and softmax's max pass were compute-bound on it. A plain compare-and-select
`v > acc ? v : acc` is one maxps, and equals llvm.maximum over a row unless the row holds a
NaN (the select skips it) or its maximum is a zero (which of -0 / +0 it keeps depends on the
order). So the fast loop also adds the values into a second accumulator - a lane of it is
NaN if any of its values is (or +inf meets -inf there: a false alarm, harmless) - and a
row whose fast result is a zero or whose sums hold a NaN lane is computed again with the
exact loop. Denormals compare exactly (no DAZ) and the result is flushed once at the end,
as in the exact loop. The bits are the exact loop's in every case.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from xlapy.backends.cpu.lanes import Lane, horizontal
from xlapy.backends.cpu.llvm_util import for_range, i64, splat
from xlapy.backends.cpu.masked_emit import mask
from xlapy.types import ElementType as ET

#: Vector accumulator pairs (select, sum) of the fast loop: the select is a 4-cycle chain.
FAST_CHAINS = 4
#: Reduce types of the fast loop: f32/f64, and bf16/f16 rows, whose values are computed in
#: f32 (each a bf16/f16 widened, so compared exactly): the exact llvm.maximum loop ran a
#: bf16 softmax's max pass (4 x 8 x 256 x 256, rows of 256) at ~10 vector ops a vector.
FAST_TYPES = (ET.F32, ET.F64, ET.BF16, ET.F16)


def fast_ok(op: str, et: ET, cols: int, width: int, masked: bool = False) -> bool:
    """Whether a row of `cols` columns gets the fast loop: float max/min (FAST_TYPES), lanes
    on, whole groups of FAST_CHAINS vectors of columns (no scalar rest), or one vector
    (`masked`: a masked one, masked_emit.py)."""
    if op not in ("maximum", "minimum") or et not in FAST_TYPES or not width:
        return False
    if cols <= width:
        return cols == width or (masked and cols > 1)
    return cols % (FAST_CHAINS * width) == 0


class MinMaxEmitter:
    """The fast row max/min for ReductionEmitter (KernelEmitter's `b`, `width`, `splat`)."""

    b: ir.IRBuilder
    width: int
    splat: Callable[[ir.Value], ir.Value]
    _combine: Callable[..., ir.Value]

    def _fast_row(self, op: str, et: ET, cols: int, name: str, accp: ir.Value,
                  value: Callable[[Lane], ir.Value], exact: Callable[[], None],
                  init: ir.Value | None = None) -> None:
        """*accp (op)= the row's max/min of value(Lane) over [0, cols): the fast loop, and
        `exact()` (the whole exact row into *accp, a scalar loop: rows it runs for are
        rare, and a second vector loop cost compile time) for a row it cannot answer.
        `init`: what *accp holds before, if known; the reducer's identity (-inf for max)
        needs no combining with the fast result (never NaN)."""
        b, w = self.b, self.width
        group = w * FAST_CHAINS
        vt = ir.VectorType(accp.type.pointee, w)
        start = float("-inf") if op == "maximum" else float("inf")  # the reducer's identity
        ident = splat(vt, start)
        pred = ">" if op == "maximum" else "<"

        def pick(v: ir.Value, acc: ir.Value) -> ir.Value:  # one maxps / minps
            return b.select(b.fcmp_ordered(pred, v, acc), v, acc)

        if cols <= w:  # one vector (a masked one: dead lanes at the identity)
            v = self.splat(value(Lane(i64(0), live=cols % w)))
            live = mask(w, cols)
            m = b.select(live, v, ident) if cols < w else v
            m1 = horizontal(b, m, lambda p, q: pick(q, p))
            nan = b.and_(b.fcmp_unordered("uno", v, v), live)
            self._fast_finish(op, et, accp, m1, b.bitcast(nan, ir.IntType(w)), exact, init)
            return
        # The accumulators are phis (not stack slots): a third of the IR instructions
        # fewer to build, print and parse (the loop runs at least once: cols >= group).
        pre = b.block
        with for_range(b, i64(0), i64(cols), name=f"{name}f", step=group) as c:
            sel = [b.phi(vt, name="fast.sel") for _ in range(FAST_CHAINS)]
            tot = [b.phi(vt, name="fast.sum") for _ in range(FAST_CHAINS)]
            sel2, tot2 = [], []
            for j in range(FAST_CHAINS):
                col = c if j == 0 else b.add(c, i64(j * w), flags=["nsw"])
                v = self.splat(value(Lane(col)))
                sel2.append(pick(v, sel[j]))
                tot2.append(b.fadd(tot[j], v))
            for phis, start, nxt in ((sel, ident, sel2), (tot, splat(vt, 0.0), tot2)):
                for p, q in zip(phis, nxt):
                    p.add_incoming(start, pre)
                    p.add_incoming(q, b.block)
        m, s = sel2[0], tot2[0]
        for j in range(1, FAST_CHAINS):
            m = pick(sel2[j], m)
            s = b.fadd(s, tot2[j])
        m1 = horizontal(b, m, lambda p, q: pick(q, p))
        # A lane of the sums is NaN iff some value was (or +inf met -inf in it): no need
        # to add the lanes up.
        nan = b.bitcast(b.fcmp_unordered("uno", s, s), ir.IntType(w))
        self._fast_finish(op, et, accp, m1, nan, exact, init)

    def _fast_finish(self, op: str, et: ET, accp: ir.Value, m1: ir.Value, nan: ir.Value,
                     exact: Callable[[], None], init: ir.Value | None) -> None:
        """*accp (op)= m1, the fast result, unless a lane saw a NaN (`nan`'s bits) or m1 is
        a zero (either sign): then the exact row."""
        b = self.b
        redo = b.or_(b.icmp_unsigned("!=", nan, ir.Constant(nan.type, 0)),
                     b.fcmp_ordered("==", m1, ir.Constant(m1.type, 0.0)))
        with b.if_else(redo, likely=False) as (slow, fast):
            with slow:
                exact()
            with fast:
                start = float("-inf") if op == "maximum" else float("inf")
                first = isinstance(init, ir.Constant) and init.constant == start
                b.store(m1 if first else self._combine(op, et, b.load(accp), m1, late=True),
                        accp)


__all__ = ["MinMaxEmitter", "fast_ok", "FAST_CHAINS"]
