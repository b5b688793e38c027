"""Complex chlo.asin, acos, asinh, acosh, atanh and atan as IR: the twins of
ops/complex_chlo.py (XLA's chlo decompositions), step for step, so that the cpu kernels and
the interpreter give the same bits.

The same real functions as the interpreter: XLA's f32 log and its log1p (xla_math_emit),
libm's atan2 and f64 log (flushed after the call: the interpreter flushes libm's results),
correctly rounded sqrt, and an explicit `llvm.fma` where the interpreter fuses (atanh).
Every other step is plain IEEE arithmetic; the kernels run with FTZ set, which flushes
their results as the interpreter's `flush` does, and the caller flushes the operands
(DAZ) and the result parts (elementwise_complex._unary).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import complex_xla_emit as cx
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import xla_math_emit
from xlapy.backends.cpu.llvm_util import F32, intrinsic

Parts = tuple[ir.Value, ir.Value]


class _E:
    """Scalar IR helpers on one part type (f32 or f64), numpy's rounding of constants."""

    def __init__(self, b: ir.IRBuilder, t: ir.Type) -> None:
        self.b, self.t = b, t
        self.nt = np.float32 if t == F32 else np.float64

    def k(self, v: float) -> ir.Constant:
        """`v` rounded to the part type, as the interpreter's `t(v)`."""
        return ir.Constant(self.t, float(self.nt(v)))

    def sqrt(self, v: ir.Value) -> ir.Value:
        return intrinsic(self.b, f"llvm.sqrt.{cx.sfx(v)}", self.t, [v])

    def max(self, x: ir.Value, y: ir.Value) -> ir.Value:  # np.maximum: NaN-propagating
        return intrinsic(self.b, f"llvm.maximum.{cx.sfx(x)}", self.t, [x, y])

    def min(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return intrinsic(self.b, f"llvm.minimum.{cx.sfx(x)}", self.t, [x, y])

    def lt(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered("<", x, y)

    def ge(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered(">=", x, y)

    def log(self, v: ir.Value) -> ir.Value:
        """complex_chlo._log: XLA's f32 log, libm's f64 log."""
        if self.t == F32:
            return xla_math_emit.log32(self.b, v)
        return ew.flush(self.b, cx.real_call(self.b, "log", v))

    def log1p(self, v: ir.Value) -> ir.Value:
        return cx.xla_log1p(self.b, v)

    def atan2(self, y: ir.Value, x: ir.Value) -> ir.Value:
        return ew.flush(self.b, cx.real_call(self.b, "atan2", y, x))

    def neg_where(self, cond: ir.Value, v: ir.Value) -> ir.Value:
        return self.b.select(cond, self.b.fneg(v), v)


def _hypot(e: _E, a: ir.Value, y: ir.Value) -> ir.Value:
    """complex_chlo._hypot."""
    b = e.b
    mx, mn = e.max(a, y), e.min(a, y)
    q = b.fdiv(mn, mx)
    r = b.fmul(q, q)
    sqa = e.sqrt(b.fadd(r, e.k(1)))
    near = b.and_(b.fcmp_ordered("==", sqa, e.k(1)), b.fcmp_ordered(">", r, e.k(0)))
    out = b.select(near, b.fadd(mx, b.fdiv(b.fmul(mx, r), e.k(2))), b.fmul(mx, sqa))
    return b.select(b.fcmp_ordered("==", mx, mn), b.fmul(mx, e.k(math.sqrt(2))), out)


def _kernel(e: _E, x: ir.Value, y: ir.Value) -> Parts:
    """complex_chlo._kernel: (re_k, im_k) for x, y >= 0."""
    b = e.b
    info = np.finfo(e.nt)
    safe_max_f = float(e.nt(math.sqrt(float(info.max)) / 8))
    safe_max, safe_min = e.k(safe_max_f), e.k(math.sqrt(float(info.tiny)) * 4)
    one, half = e.k(1), e.k(0.5)
    xp1, xm1 = b.fadd(x, one), b.fsub(x, one)
    r = _hypot(e, cx.fabs(b, xp1), y)
    s = _hypot(e, cx.fabs(b, xm1), y)
    a = b.fmul(b.fadd(r, s), half)
    half_apx = b.fmul(b.fadd(a, x), half)
    yy = b.fmul(y, y)
    rpxp1 = b.fadd(r, xp1)
    smxm1, spxm1 = b.fsub(s, xm1), b.fadd(s, xm1)
    small_x = e.sqrt(b.fmul(half_apx, b.fadd(b.fdiv(yy, rpxp1), smxm1)))
    big_x = b.fmul(y, e.sqrt(b.fadd(b.fdiv(half_apx, rpxp1), b.fdiv(half_apx, spxm1))))
    re_k = b.select(e.ge(e.max(x, y), safe_max), y,
                    b.select(b.fcmp_ordered("<=", x, one), small_x, big_x))
    opt = b.select(e.lt(x, e.k(safe_max_f * 1e12)), e.k(safe_max_f * 1e-6),
                   e.k(safe_max_f * 1e2))
    y_big = e.ge(y, opt)
    mx = b.select(y_big, y, x)
    finite_big = b.and_(y_big, b.fcmp_unordered("!=", y, e.k(math.inf)))
    xoy = b.select(finite_big, b.fdiv(x, y), e.k(0))
    huge = b.fadd(b.fadd(e.log(mx), e.k(math.log(2))),
                  b.fmul(e.log1p(b.fmul(xoy, xoy)), half))
    tiny_y = b.and_(e.lt(y, safe_min), e.lt(x, one))
    ap1 = b.fadd(a, one)
    half_yy = b.fmul(yy, half)
    d = b.fdiv(half_yy, rpxp1)
    am1 = b.select(tiny_y, b.fneg(b.fdiv(b.fmul(xp1, xm1), ap1)),
                   b.select(e.ge(x, one), b.fadd(d, b.fmul(spxm1, half)),
                            b.select(b.fcmp_ordered("<=", a, e.k(1.5)),
                                     b.fadd(d, b.fdiv(half_yy, smxm1)), b.fsub(a, one))))
    sq = e.sqrt(b.fmul(am1, ap1))
    im_k = b.select(e.ge(mx, b.select(y_big, opt, safe_max)), huge,
                    b.select(tiny_y, b.fdiv(y, sq), e.log1p(b.fadd(am1, sq))))
    return re_k, im_k


def _asin(e: _E, re: ir.Value, im: ir.Value) -> Parts:
    re_k, im_k = _kernel(e, cx.fabs(e.b, re), cx.fabs(e.b, im))
    return e.atan2(re, re_k), e.neg_where(e.lt(im, e.k(0)), im_k)


def _acos(e: _E, re: ir.Value, im: ir.Value) -> Parts:
    re_k, im_k = _kernel(e, cx.fabs(e.b, re), cx.fabs(e.b, im))
    return e.atan2(re_k, re), e.neg_where(e.b.not_(e.lt(im, e.k(0))), im_k)


def _asinh(e: _E, re: ir.Value, im: ir.Value) -> Parts:
    re_k, im_k = _kernel(e, cx.fabs(e.b, im), cx.fabs(e.b, re))
    return e.neg_where(e.lt(re, e.k(0)), im_k), e.atan2(im, re_k)


def _acosh(e: _E, re: ir.Value, im: ir.Value) -> Parts:
    re_k, im_k = _kernel(e, cx.fabs(e.b, re), cx.fabs(e.b, im))
    return im_k, e.neg_where(e.lt(im, e.k(0)), e.atan2(re_k, re))


def _atanh(e: _E, x: ir.Value, y: ir.Value) -> Parts:
    """complex_chlo.atanh."""
    b = e.b
    f32 = e.t == F32
    one = e.k(1)
    big = e.k(2.0 ** 48 if f32 else 2.0 ** 106)
    eps_big = e.k(2.0 ** 24 + 2 if f32 else 2.0 ** 53 + 2)
    ax, ay = cx.fabs(b, x), cx.fabs(b, y)
    moderate = b.and_(e.lt(ax, big), e.lt(ay, big))
    one_m = b.fsub(one, ax)
    yy = b.fmul(y, y)
    q_mod = b.fdiv(ax, cx.fma(b, one_m, one_m, yy))
    inf_part = b.or_(cx.isinf(b, x), cx.isinf(b, y))
    q_big = b.fdiv(b.fdiv(one, b.fadd(b.fdiv(ax, y), b.fdiv(y, ax))), y)
    q = b.select(moderate, q_mod,
                 b.select(e.lt(b.fmul(ay, eps_big), ax), b.fdiv(one, ax),
                          b.select(inf_part, e.k(0), q_big)))
    sign_x = b.select(e.ge(x, e.k(0)), one, e.k(-1))
    re = b.fmul(b.fmul(sign_x, e.log1p(b.fmul(q, e.k(4)))), e.k(0.25))
    arg = e.atan2(b.fadd(y, y), cx.fma(b, one_m, b.fadd(ax, one), b.fneg(yy)))
    im = b.select(moderate, arg,
                  b.fmul(b.select(e.ge(y, e.k(0)), one, e.k(-1)), e.k(math.pi)))
    return re, b.fmul(im, e.k(0.5))


def _atan(e: _E, re: ir.Value, im: ir.Value) -> Parts:
    """complex_chlo.atan: -i atanh(i z)."""
    a_re, a_im = _atanh(e, e.b.fneg(im), re)
    return a_im, e.b.fneg(a_re)


_FNS: dict[str, Callable[[_E, ir.Value, ir.Value], Parts]] = {
    "chlo.asin": _asin, "chlo.acos": _acos, "chlo.asinh": _asinh, "chlo.acosh": _acosh,
    "chlo.atanh": _atanh, "chlo.atan": _atan}
#: The complex chlo ops emitted here.
OPS = frozenset(_FNS)


def emit(b: ir.IRBuilder, op: str, re: ir.Value, im: ir.Value) -> Parts:
    """The parts of chlo `op` (in OPS) of re + i im (flushed parts)."""
    return _FNS[op](_E(b, re.type), re, im)
