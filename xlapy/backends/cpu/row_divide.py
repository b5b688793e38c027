"""Division by a value fixed per row (softmax's exp / sum) as a product, with the bits of
the division.

A vector divps takes about as long as the rest of softmax's last pass (AVX-512: one per 8-10
cycles, on one port), and the divisor is the same along the row. XLA rewrites the divide
into e * (1 / sum), whose results differ from the division's in the last bit. Here the
reciprocal y = 1 / d is computed once before the column loop (hoist_emit.py), and per
vector q0 = a * y, e = fma(d, q0, -a), q = fma(-e, y, q0): with y = RN(1/d) and q0 within
an ulp of a / d, the residual e is exact and q = RN(a / d) (Markstein's theorem; Muller et
al., Handbook of Floating-Point Arithmetic, ch. 4), provided nothing underflows or
overflows. That holds when d is in [LO, HI] (positive: a zero a's quotient then keeps its
sign) and every lane of a is zero or of magnitude in [LO, HI]; any other vector (NaN, inf,
denormals, tiny or huge values, a negative divisor) takes the division itself. With AVX2
(x86-64-v3) a ymm divps is 8 lanes per ~5 cycles and the general range test costs as much
(no unsigned compares, no mask registers: softmax 1.454 -> 1.499 ms there), so AVX2 takes
the product form only for an exp numerator, whose test needs no sign mask (softmax 0.964
-> 0.922 ms, same process); AVX-512 for every numerator (`general`), but f32 on AMD Zen,
whose divider keeps up: there a signed numerator's test and branch (~10 ops a vector) cost
more than the vdivps they save (Zen 4, 2 threads, interleaved runs: sum(log1p(x * x / 3))
of 1M 0.45-0.50 -> 0.37 ms, x / s over 4096 x 1024 0.37-0.42 -> 0.27-0.32, (x * x / 3).sum()
0.10-0.11 -> 0.085, rows over their norms alike); softmax's exp numerator keeps it there
(0.74-0.78 ms against 0.97-0.98 dividing). A bf16 division (an f32 one, rounded) keeps the
divps: its rounding's ~8 integer ops a vector hide the divider, so the test only adds work
(x86-64-v3, a bf16 softmax of 4 x 8 x 256 x 256, same process: 1.10 -> 1.24 ms).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import target
from xlapy.backends.cpu.llvm_util import F32, F64, broadcast, elem, intrinsic, sfx, splat

#: Magnitudes of a and d for which the product form is exact: quotients in [2^-2E, 2^2E],
#: residuals representable (f32 ones fall below the normal range for |a| < 2^-79; f64:
#: 2^-917), no overflow. f32: E = 60, f64: E = 450.
_EXP = {32: 60, 64: 450}


def _bounds(bits: int) -> tuple[int, int]:
    """The bit patterns of 2^-E and 2^E (of the float type of `bits` bits)."""
    e = _EXP[bits]
    ft = np.float32 if bits == 32 else np.float64
    it = np.uint32 if bits == 32 else np.uint64
    return (int(np.array(2.0 ** -e, ft).view(it)), int(np.array(2.0 ** e, ft).view(it)))


def applies(a: ir.Value, d: ir.Value, hoisted: bool, nonneg: bool = False) -> bool:
    """a (W lanes of f32/f64) / d (a scalar computed before the loop) on AVX-512, or with
    AVX2 + FMA for an exp numerator (`nonneg`, emit's shorter test)."""
    if not hoisted or not isinstance(a.type, ir.VectorType) or \
            isinstance(d.type, ir.VectorType) or elem(a.type) not in (F32, F64):
        return False
    t = target.current()
    if nonneg:
        return t.has("avx512f") or t.has("avx2") and t.has("fma")
    return t.has("avx512f") and general(t, elem(a.type) == F64)


def general(t: target.CpuTarget, f64: bool) -> bool:
    """Whether AVX-512 target t takes the product form for numerators of any sign: not
    f32 on AMD Zen (module docstring; f64 keeps it: not measured there)."""
    return f64 or not t.cpu.startswith("znver")


def emit(b: ir.IRBuilder, a: ir.Value, d: ir.Value,
         before: Callable[[Any, Callable[[], ir.Value]], ir.Value],
         nonneg: bool = False) -> ir.Value:
    """a / d with the division's bits (both flushed as the division flushes them);
    before(key, make) emits make() once before the column loop. `nonneg`: a is expected
    to be >= 0 (an exp, softmax's): the range test then reads a's bits as they are, one
    vector instruction fewer (no sign mask); a vector with a negative lane (sign bit set:
    out of range) divides, so the bits are right whatever a holds."""
    vt = a.type
    w = vt.count
    bits = 64 if elem(vt) == F64 else 32
    it = ir.IntType(bits)
    lo, hi = _bounds(bits)
    a = ew.flush(b, a)
    df = before(("rowdiv.d", id(d)), lambda: ew.flush(b, d))
    ds = before(("rowdiv.ds", id(d), w), lambda: broadcast(b, df, w))
    ys = before(("rowdiv.y", id(d), w),
                lambda: broadcast(b, b.fdiv(ir.Constant(df.type, 1.0), df), w))
    row_ok = before(("rowdiv.ok", id(d)), lambda: b.and_(
        b.fcmp_ordered(">=", df, ir.Constant(df.type, 2.0 ** -_EXP[bits])),
        b.fcmp_ordered("<=", df, ir.Constant(df.type, 2.0 ** _EXP[bits]))))
    mag = b.bitcast(a, ir.VectorType(it, w))
    if not nonneg:
        mag = b.and_(mag, splat(mag.type, (1 << (bits - 1)) - 1))
    in_range = b.icmp_unsigned("<", b.sub(mag, splat(mag.type, lo)),
                               splat(mag.type, hi - lo + 1))
    ok = b.or_(in_range, b.icmp_unsigned("==", mag, splat(mag.type, 0)))
    all_ok = intrinsic(b, f"llvm.vector.reduce.and.v{w}i1", ir.IntType(1), [ok])
    with b.if_else(b.and_(row_ok, all_ok), likely=True) as (fast, slow):
        with fast:
            fma = f"llvm.fma.{sfx(vt)}"
            q0 = b.fmul(a, ys)
            e = intrinsic(b, fma, vt, [ds, q0, b.fneg(a)])
            q = intrinsic(b, fma, vt, [b.fneg(e), ys, q0])
            fast_end = b.block
        with slow:
            qd = b.fdiv(a, ds)
            slow_end = b.block
    phi = b.phi(vt)
    phi.add_incoming(q, fast_end)
    phi.add_incoming(qd, slow_end)
    # (both an fma's and a division's: flushed, as arithmetic is - a bf16 result's rounding
    # is then one vcvtneps2bf16: l2-normalizing 8192 x 768 bf16 rows 0.95 -> 0.74 ms)
    return ew.mark_flushed(phi)


__all__ = ["applies", "emit"]
