"""Argument reduction by pi/2 for huge arguments (Payne-Hanek), as vector IR.

math_poly's sin/cos/tan reduce by Cody-Waite (x - k pi/2 with a 3-part pi/2), exact while
k pi/2's parts multiply exactly: |x| < 2^20. Beyond that (up to f32's and f64's largest
values) this module gives x (2/pi) mod 4 to about 2^-100 absolute: 2/pi is cut into 53-bit
chunks C_j (bits of 2/pi computed here with integer arithmetic); each product x C_j is split
exactly into p + e (a multiply and an FMA), each part loses its multiples of 4 exactly
(v - 4 rint(v / 4)), and the small remainders are summed with TwoSum into a double-double.
Every lane computes every chunk (22 for f64, 5 for f32): about 25x a Cody-Waite reduction,
so math_poly branches here only when a lane needs it (large arguments are rare).

For f64, chunks below 2^-1022 would be subnormal (and flushed under FTZ): arguments from
2^600 up use x 2^-512 and chunks C_j 2^512 (those chunks whose products are not all
multiples of 4), arguments below use the unscaled chunks down to 2^-742.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from llvmlite import ir

from xlapy.backends.cpu import target, trig_dd
from xlapy.backends.cpu.llvm_util import F64, for_range, i64

if TYPE_CHECKING:
    from xlapy.backends.cpu.math_poly import Math

_CHUNK = 53
#: f64 arguments from here on use the scaled chunk set.
_F64_BIG = 2.0 ** 600
_F64_SCALE = 512


@functools.cache
def _two_over_pi_bits(bits: int) -> int:
    """floor(2/pi * 2^bits), from pi by Machin's formula in integers (guard bits added)."""
    guard = 64
    one = 1 << (bits + guard)

    def atan_inv(n: int) -> int:  # atan(1/n) * one
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total

    pi = 16 * atan_inv(5) - 4 * atan_inv(239)
    return (2 * one * one // pi) >> guard


@functools.cache
def chunks(first: int, last: int, scale: int = 0) -> tuple[float, ...]:
    """C_first .. C_last: C_j holds bits [53 j, 53 (j + 1)) after the binary point of 2/pi,
    times 2^scale (each exact in a double)."""
    total = _CHUNK * (last + 1)
    b = _two_over_pi_bits(total)
    out = []
    for j in range(first, last + 1):
        word = (b >> (total - _CHUNK * (j + 1))) & ((1 << _CHUNK) - 1)
        out.append(math.ldexp(float(word), scale - _CHUNK * (j + 1)))
    return tuple(out)


def _mod4_sum(m: Math, x: ir.Value, cs: tuple[float, ...]) -> tuple[ir.Value, ir.Value]:
    """x * sum(cs) mod 4 as a double-double (hi, lo) (not normalized to [0, 4))."""
    b = m.b
    hi = lo = m.c(0.0)
    for c in cs:
        cv = m.c(c)
        p = b.fmul(x, cv)
        e = m.fma(x, cv, b.fneg(p))
        for v in (p, e):
            q = m.un("rint", b.fmul(v, m.c(0.25)))
            v = m.fma(q, m.c(-4.0), v)
            hi, err = trig_dd.two_sum(m, hi, v)
            lo = b.fadd(lo, err)
    return hi, lo


def reduce(m: Math, x: ir.Value, is64: bool) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(r, rl, k) with x = (k + f) pi/2 (k integer-valued, |f| <= 1/2) and f pi/2 = r + rl
    in radians as a double-double (rl: what r's rounding lost, for trig_dd's tan), k as a
    double. `m` is a Math on doubles; `x` doubles holding the argument (f32 arguments
    widened exactly)."""
    b = m.b
    if is64:
        hi, lo = _mod4_sum(m, x, chunks(0, 13))
        xs = b.fmul(x, m.c(2.0 ** -_F64_SCALE))
        bhi, blo = _mod4_sum(m, xs, chunks(9, 21, _F64_SCALE))
        big = b.fcmp_ordered(">=", m.un("fabs", x), m.c(_F64_BIG))
        hi, lo = b.select(big, bhi, hi), b.select(big, blo, lo)
    else:
        hi, lo = _mod4_sum(m, x, chunks(0, 4))
    k = m.un("rint", hi)
    f, fe = trig_dd.two_sum(m, b.fsub(hi, k), lo)
    k2 = m.un("rint", f)
    k, f = b.fadd(k, k2), b.fsub(f, k2)  # exact (Sterbenz)
    # (f + fe) pi/2 with pi/2 as a double-double: f P1 + (f P1's rounding error + f P2 + fe P1)
    p1 = math.pi / 2
    p2 = float.fromhex("0x1.1a62633145c07p-54")  # pi/2 - p1
    r_hi = b.fmul(f, m.c(p1))
    r_lo = m.fma(f, m.c(p1), b.fneg(r_hi))
    r_lo = m.fma(f, m.c(p2), m.fma(fe, m.c(p1), r_lo))
    r, rl = trig_dd.fast_two_sum(m, r_hi, r_lo)
    return r, rl, k
def reduce_wide(m: Math, xd: ir.Value, is64: bool) -> tuple[ir.Value, ir.Value, ir.Value]:
    """`reduce` of the doubles xd; a vector wider than the target's registers goes
    through memory a register's worth at a time in a loop: the same operations on each lane
    (the same bits), emitted once. Emitted at xd's width, a sin of 16 f32 lanes was
    <16 x double> code LLVM splits in two (four on AVX2): 12 of the 17 ms of code generation
    of a fori_loop body's tanh and sin (jax_run's fori_nested)."""
    b = m.b
    t = xd.type
    n = max(2, target.current().vector_bits // 64)
    if not isinstance(t, ir.VectorType) or t.count <= n or t.count % n:
        return reduce(m, xd, is64)
    fn = b.block.parent
    with b.goto_block(fn.entry_basic_block):
        b.position_at_start(fn.entry_basic_block)
        bufs = [b.alloca(t) for _ in range(4)]  # x, r, rl, k
    b.store(xd, bufs[0])
    part = ir.VectorType(F64, n)
    ptrs = [b.bitcast(p, part.as_pointer()) for p in bufs]
    with for_range(b, i64(0), i64(t.count // n), "ph") as c:
        x = b.load(b.gep(ptrs[0], [c]), align=8)
        for p, v in zip(ptrs[1:], reduce(type(m)(b, part), x, is64)):
            b.store(v, b.gep(p, [c]), align=8)
    return b.load(bufs[1]), b.load(bufs[2]), b.load(bufs[3])


