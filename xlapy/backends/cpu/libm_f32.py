"""f32 atan2, power and cbrt as vector code evaluated in f64 and rounded once; f32 fmod
exact in f64 (`remainder`).

A libm call per lane (elementwise_libm.py) costs 10-13 ns an element: jnp.arctan2 of 1M f32
took 13 ms, jnp.arctan (atan2 after chlo lowering) 7.7 ms, `x ** 1.7` 2.5 ms, as XLA's
own. Here the f32 operands widen to f64, where each function is a short straight-line
evaluation with a relative error far below f32's half ulp (atan2 2^-43, power ~2^-45,
cbrt ~2^-46), then one rounding: within 1 ulp of the correctly rounded value, as glibc's
atan2f/powf/cbrtf are. The interpreter rounds libm's f64 functions once (ops/libm.py
`wide`), so the two agree bit for bit save where the exact result lies within the error of
a tie between two f32 values: an exact tie only comes from power (2^-150, 257^3, 66049^1.5),
which rounds it either way (1 ulp). f64 operands keep libm (its accuracy needs more than f64
arithmetic).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.llvm_util import F64, I32, any_lane, broadcast, like, splat
from xlapy.backends.cpu.math_coeffs import ATAN_F32
from xlapy.backends.cpu.math_poly import Math
from xlapy.types import ElementType as ET


def _wide(b: ir.IRBuilder, x: ir.Value) -> tuple[Math, ir.Value]:
    m = Math(b, like(x.type, F64))
    return m, b.fpext(x, m.t)


def _signbit(m: Math, v: ir.Value) -> ir.Value:
    return m.b.icmp_signed("<", m.b.bitcast(v, m.ity), m.ic(0))


def atan2(b: ir.IRBuilder, y: ir.Value, x: ir.Value) -> ir.Value:
    """atan2(y, x): with a = min(|y|, |x|) and c = max, t = a / c, or (a - c) / (a + c)
    past tan(pi/8) (one division either way; the subtraction and sum are exact in f64),
    atan(t) = t + t z P(z) on |t| <= tan(pi/8), then pi/4, pi/2 - r, pi - r and y's sign
    by quadrant. Both infinite: a = c = 1 (pi/4); both zero: c = 1 (0, or pi for x = -0)."""
    m, yd = _wide(b, y)
    xd = b.fpext(x, m.t)
    ay, ax = m.un("fabs", yd), m.un("fabs", xd)
    swap = b.fcmp_ordered(">", ay, ax)
    a, c = b.select(swap, ax, ay), b.select(swap, ay, ax)
    inf = m.c(math.inf)
    both_inf = b.and_(b.fcmp_ordered("==", a, inf), b.fcmp_ordered("==", c, inf))
    a = b.select(both_inf, m.c(1.0), a)
    c = b.select(b.or_(both_inf, b.fcmp_ordered("==", c, m.c(0.0))), m.c(1.0), c)
    big = b.fcmp_ordered(">", a, b.fmul(c, m.c(math.tan(math.pi / 8))))
    t = b.fdiv(b.select(big, b.fsub(a, c), a), b.select(big, b.fadd(a, c), c))
    z = b.fmul(t, t)
    r = m.fma(b.fmul(t, z), m.horner(list(ATAN_F32), z), t)
    r = b.fadd(r, b.select(big, m.c(math.pi / 4), m.c(0.0)))
    r = b.select(swap, b.fsub(m.c(math.pi / 2), r), r)
    r = b.select(_signbit(m, xd), b.fsub(m.c(math.pi), r), r)
    r = m.bin("copysign", r, yd)
    nan = b.fcmp_unordered("uno", yd, xd)
    return b.fptrunc(b.select(nan, b.fadd(yd, xd), r), x.type)


def power(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """x^y = exp(y log|x|) in f64 (log within 1 ulp of f64, exp to 2^-42), negated for a
    negative x (or -0) and an odd integer y, with C99's special cases: 1 for y = 0 or x = 1
    (even NaN), for x = -1 and y = +-inf; NaN for a finite negative x and a non-integer y.
    y = 2 is x * x, exact in f64 (one rounding: JAX lowers `x ** 2.0` to this power)."""
    return power_of(b, power_base(b, x), y)


def power_base(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(x in f64, log|x| in f64): the part of x^y that depends on x alone, computed once
    for a base uniform along a row of exponents (jnp.vander's x[:, None] ** e[None, :];
    the kernel hoists it out of the row's loop, as LLVM's loop vectorizer did of the
    scalar IR: [65536, 16] 1.60 -> 1.2 ms on Zen 4)."""
    m, xd = _wide(b, x)
    return xd, m.log(m.un("fabs", xd))


def row_power(em: Any, args: Sequence[ir.Value], t: ET) -> ir.Value | None:
    """An f32 power of a scalar base and a vector of exponents in KernelEmitter `em`, the
    base's part emitted once where it was hoisted (em.once); else None."""
    x, y = args
    if t is not ET.F32 or not isinstance(y.type, ir.VectorType) or \
            isinstance(x.type, ir.VectorType):
        return None
    b = em.b
    base = em.once(x, "pow", lambda v: power_base(b, ew.flush(b, v)))
    return ew.flush(b, power_of(b, base, ew.flush(b, y)))


def power_of(b: ir.IRBuilder, base: tuple[ir.Value, ir.Value], y: ir.Value) -> ir.Value:
    """x^y from power_base(x) (scalars broadcast to y's lanes)."""
    xd, lx = base
    if isinstance(y.type, ir.VectorType) and not isinstance(xd.type, ir.VectorType):
        xd, lx = broadcast(b, xd, y.type.count), broadcast(b, lx, y.type.count)
    m = Math(b, xd.type)
    yd = b.fpext(y, m.t)
    v = m.exp(b.fmul(yd, lx), terms=12)
    is_int = b.fcmp_ordered("==", m.un("rint", yd), yd)
    small = b.fcmp_ordered("<", m.un("fabs", yd), m.c(2.0 ** 24))  # f32 beyond: even
    yi = b.fptosi(b.select(small, yd, m.c(0.0)), like(m.t, I32))
    odd = b.and_(b.and_(small, is_int), b.trunc(yi, like(m.t, ir.IntType(1))))
    v = b.select(b.and_(odd, _signbit(m, xd)), b.fneg(v), v)
    v = b.select(b.fcmp_ordered("==", yd, m.c(2.0)), b.fmul(xd, xd), v)
    finite_neg = b.and_(b.fcmp_ordered("<", xd, m.c(0.0)),
                        b.fcmp_ordered("!=", xd, m.c(-math.inf)))
    v = b.select(b.and_(finite_neg, b.not_(is_int)), m.c(math.nan), v)
    one = b.or_(b.fcmp_ordered("==", xd, m.c(1.0)), b.fcmp_ordered("==", yd, m.c(0.0)))
    one = b.or_(one, b.and_(b.fcmp_ordered("==", xd, m.c(-1.0)),
                            b.fcmp_ordered("==", m.un("fabs", yd), m.c(math.inf))))
    return b.fptrunc(b.select(one, m.c(1.0), v), y.type)


#: fdlibm's s_cbrt.c: the high word's third plus B1 (within 6% of cbrt), then a polynomial
#: in r = t^3 / x to 23 bits.
_CBRT_B1 = 715094163
_CBRT_P = (1.87595182427177009643, -1.88497979543377169875, 1.621429720105354466140,
           -0.758397934778766047437, 0.145996192886612446982)


def cbrt(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """fdlibm's cbrt on |x| widened to f64 (every f32, subnormals too, is a normal f64 there,
    so the exponent trick needs no scaling): the estimate from the high word, the polynomial
    step to 23 bits, one Newton step to ~46; x's sign; +-0, +-inf and NaN are x itself."""
    m, xd = _wide(b, x)
    ax = m.un("fabs", xd)
    i32 = like(m.t, I32)
    hi = b.trunc(b.lshr(b.bitcast(ax, m.ity), m.ic(32)), i32)
    t_hi = b.add(b.zext(b.udiv(hi, splat(i32, 3)), m.ity), m.ic(_CBRT_B1))
    t = b.bitcast(b.shl(t_hi, m.ic(32)), m.t)
    r = b.fmul(b.fmul(t, t), b.fdiv(t, ax))
    p0, p1, p2, p3, p4 = (m.c(p) for p in _CBRT_P)
    lo = m.fma(r, m.fma(r, p2, p1), p0)
    t = b.fmul(t, m.fma(b.fmul(b.fmul(r, r), r), m.fma(r, p4, p3), lo))
    q = b.fdiv(ax, b.fmul(t, t))
    t = m.fma(t, b.fdiv(b.fsub(q, t), b.fadd(b.fadd(t, t), q)), t)
    special = b.or_(b.fcmp_unordered("uno", xd, xd),
                    b.or_(b.fcmp_ordered("==", ax, m.c(0.0)),
                          b.fcmp_ordered("==", ax, m.c(math.inf))))
    return b.fptrunc(b.select(special, xd, m.bin("copysign", t, xd)), x.type)



def remainder(b: ir.IRBuilder, x: ir.Value, y: ir.Value,
              exact: Callable[[], ir.Value]) -> ir.Value:
    """C fmod, exact: with quotients below 2^29, n = trunc(|x| / |y|) (one too big where
    the f64 quotient rounds up to an integer) and |x| - n |y| are exact in f64 (53 bits hold
    n |y|), so r = |x| - n |y|, plus |y| where negative, is the remainder; x's sign. A
    subnormal r is built from its bits (fptrunc would flush it under MXCSR's FTZ; fmod does
    not flush). Lanes with a larger quotient, an infinite or NaN operand or y = 0 take
    `exact()` (rtlib's fmod on the bits), computed only when a vector has one. jnp.mod of
    1M f32: 4.2 ms as an rtlib call a lane (XLA 6.3)."""
    m, xd = _wide(b, x)
    ax, ay = m.un("fabs", xd), m.un("fabs", b.fpext(y, m.t))
    fast = b.and_(b.fcmp_ordered("<", ax, b.fmul(ay, m.c(2.0 ** 29))),
                  b.fcmp_ordered("<", ay, m.c(math.inf)))
    n = m.un("trunc", b.fdiv(ax, ay))
    r = b.fsub(ax, b.fmul(n, ay))
    r = b.select(b.fcmp_ordered("<", r, m.c(0.0)), b.fadd(r, ay), r)
    i32 = like(m.t, I32)
    tiny = b.bitcast(b.fptosi(b.fmul(r, m.c(2.0 ** 149)), i32), x.type)
    r32 = b.select(b.fcmp_ordered("<", r, m.c(2.0 ** -126)), tiny, b.fptrunc(r, x.type))
    out = Math(b, x.type).bin("copysign", r32, x)
    slow = b.not_(fast)
    before = b.block
    with b.if_then(any_lane(b, slow), likely=False):
        picked = b.select(slow, exact(), out)
        after_slow = b.block
    phi = b.phi(out.type)
    phi.add_incoming(out, before)
    phi.add_incoming(picked, after_slow)
    return phi
