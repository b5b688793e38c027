"""Element-wise ops the kernels compute by calling the runtime library (rtlib.py): f64
power, atan2 and cbrt through libm (what the interpreter calls too: pow, atan2, cbrt), float
remainder through rtlib's bit-level fmod (f32: only the lanes libm_f32.remainder cannot do
exactly in f64); and integer power, squared out in IR as XLA CPU emits it. f32 (bf16, f16)
power, atan2 and cbrt are f64 vector code (libm_f32.py).

A call takes scalars: vector operands (lanes.py's explicit SIMD kernels) are split into
lanes, one call each. Inputs are flushed (DAZ) and results flushed (FTZ) where the
interpreter flushes them: libm computes some results with integer operations, which FTZ
does not touch. remainder flushes its divisor only (XLA CPU's fmod, see
xlapy/ops/elementwise.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import libm_f32
from xlapy.backends.cpu.llvm_util import F32, F64, I32, elem, splat
from xlapy.backends.cpu.math_poly import Math
from xlapy.types import ElementType as ET

Emit = Callable[[ir.IRBuilder, Sequence[ir.Value], ET], ir.Value]

#: libm (or rtlib) names per compute type: (f32, f64).
_CALLS = {"power": ("powf", "pow"), "atan2": ("atan2f", "atan2"), "cbrt": ("cbrtf", "cbrt"),
          "remainder": ("xlapy_fmodf", "xlapy_fmod")}


def _call(b: ir.IRBuilder, opcode: str, args: Sequence[ir.Value]) -> ir.Value:
    """The runtime function of `opcode` on each lane of `args` (scalars or vectors)."""
    t = args[0].type
    e = elem(t)
    name = _CALLS[opcode][0 if e == F32 else 1]
    mod = b.module
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(e, [e] * len(args)), name=name)
        fn.attributes.add("nounwind")
    if not isinstance(t, ir.VectorType):
        return b.call(fn, list(args))
    out: ir.Value = ir.Constant(t, None)
    for k in range(t.count):
        lane = ir.Constant(I32, k)
        out = b.insert_element(out, b.call(fn, [b.extract_element(a, lane) for a in args]),
                               lane)
    return out


#: f32 (and bf16/f16, computed in f32) as f64 vector code instead of a call per lane.
_VECTOR = {"power": libm_f32.power, "atan2": libm_f32.atan2, "cbrt": libm_f32.cbrt}


def _float(opcode: str) -> Emit:
    def emit(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
        args = [ew.flush(b, x) for x in a]
        if elem(args[0].type) == F32 and opcode in _VECTOR:
            return ew.flush(b, _VECTOR[opcode](b, *args))
        return ew.flush(b, _call(b, opcode, args))

    return emit


def _cbrt(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    """libm's cbrt; f64 then takes one Newton step as the interpreter does
    (ops/elementwise_unary.py `cbrt_newton`: glibc's cbrt is up to 3 ulp off, the step
    leaves the last rounding only): y^2 = a + al and a y = p + pl exactly by FMAs, y^3 - x
    = (p - x) + pl + al y, |x| < 2^-600 or > 2^900 scaled by 2^+-600 (y by 2^+-200)."""
    if elem(a[0].type) == F32:
        return _float("cbrt")(b, a, t)
    x = ew.flush(b, a[0])
    y = _call(b, "cbrt", [x])
    if elem(x.type) == F64:
        m = Math(b, x.type)
        ax = m.un("fabs", x)
        up = b.fcmp_ordered("<", ax, m.c(2.0 ** -600))
        down = b.fcmp_ordered(">", ax, m.c(2.0 ** 900))

        def scale(v: ir.Value, e: int) -> ir.Value:
            return b.select(up, b.fmul(v, m.c(2.0 ** e)),
                            b.select(down, b.fmul(v, m.c(2.0 ** -e)), v))

        xs, ys = scale(x, 600), scale(y, 200)
        sq = b.fmul(ys, ys)
        sq_lo = m.fma(ys, ys, b.fneg(sq))
        p = b.fmul(sq, ys)
        p_lo = m.fma(sq, ys, b.fneg(p))
        res = m.fma(sq_lo, ys, b.fadd(b.fsub(p, xs), p_lo))
        y1 = scale(b.fsub(ys, b.fdiv(res, b.fmul(m.c(3.0), sq))), -200)
        ok = b.and_(b.fcmp_ordered("<", ax, m.c(math.inf)), b.fcmp_ordered("!=", x, m.c(0.0)))
        y = b.select(ok, y1, y)
    return ew.flush(b, y)


def _fmod(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    x, y = a
    y = ew.flush(b, y)
    if elem(x.type) == F32:  # vector code, rtlib's call for the lanes it cannot do exactly
        return libm_f32.remainder(b, x, y, lambda: _call(b, "remainder", [x, y]))
    return _call(b, "remainder", [x, y])


def _ipow(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    """XLA CPU's integer pow (see xlapy/ops/elementwise.py `_power`): six squaring steps
    over exponent bits 0..5; an exponent >= 64 (unsigned) with an even base gives 0; a
    negative exponent gives 1 for base 1, +-1 for base -1 (signed), else 0."""
    x, u = a
    it = x.type
    one, zero = splat(it, 1), splat(it, 0)
    out, base = one, x
    for i in range(min(6, t.bits)):  # the exponent's bits above t.bits are zero
        bit = b.icmp_unsigned("!=", b.and_(u, splat(it, 1 << i)), zero)
        out = b.select(bit, b.mul(out, base), out)
        base = b.mul(base, base)
    if t.bits > 6:
        even = b.icmp_unsigned("==", b.and_(x, one), zero)
        out = b.select(b.and_(b.icmp_unsigned(">=", u, splat(it, 64)), even), zero, out)
    if not t.is_signed:
        return out
    neg = b.icmp_signed("<", u, zero)
    odd = b.icmp_unsigned("!=", b.and_(u, one), zero)
    m1 = splat(it, -1)
    neg_pow = b.select(b.icmp_unsigned("==", x, one), one,
                       b.select(b.icmp_unsigned("==", x, m1), b.select(odd, m1, one), zero))
    return b.select(neg, neg_pow, out)


def _power(b: ir.IRBuilder, a: Sequence[ir.Value], t: ET) -> ir.Value:
    return _float("power")(b, a, t) if elem(a[0].type) in (F32, F64) else _ipow(b, a, t)


#: opcode -> (element types compiled, emitter); every one is inexact against the
#: interpreter only where libm differs from itself (none: the same functions are called).
TABLE: dict[str, tuple[frozenset[ET], Emit]] = {
    "power": (ew.FLOATS | ew.INTS, _power),
    "atan2": (ew.FLOATS, _float("atan2")),
    "cbrt": (ew.FLOATS, _cbrt),
    "remainder": (ew.FLOATS, _fmod),
}


def supports(opcode: str, t: ET) -> bool:
    row = TABLE.get(opcode)
    return row is not None and t in row[0]


def emit(b: ir.IRBuilder, opcode: str, args: Sequence[ir.Value], t: ET, out: ET) -> ir.Value:
    """The op on compute values of operand type `t`, rounded to the result type `out`
    (each emitter flushes what XLA CPU flushes)."""
    return ew.round_to(b, TABLE[opcode][1](b, args, t), out)
