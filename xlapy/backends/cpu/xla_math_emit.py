"""XLA CPU's own exp (f32, f64) and f32 log as IR, the twins of ops/xla_math.py: the
complex functions whose XLA formula calls them (complex pow) give XLA's bits on both
backends. Each fused step is an explicit `llvm.fma` (the kernels carry no contraction
flags), so the result is the same with or without an FMA instruction (x86-64-v2: libm's
fma)."""

from __future__ import annotations

import struct

from llvmlite import ir

from xlapy.backends.cpu.llvm_util import F32, F64, I32, I64, intrinsic


def c32(bits: int) -> ir.Constant:
    return ir.Constant(F32, struct.unpack("<f", struct.pack("<I", bits))[0])


def c64(bits: int) -> ir.Constant:
    return ir.Constant(F64, struct.unpack("<d", struct.pack("<Q", bits))[0])


def _fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    sfx = "f32" if x.type == F32 else "f64"
    return intrinsic(b, f"llvm.fma.{sfx}", x.type, [x, y, z])


def _clamp_keep_nan(b: ir.IRBuilder, x: ir.Value, lo: ir.Constant, hi: ir.Constant) -> ir.Value:
    """max(lo, min(hi, x)) as XLA's selects: a NaN passes through."""
    x = b.select(b.fcmp_unordered(">=", x, lo), x, lo)
    return b.select(b.fcmp_unordered("<=", x, hi), x, hi)


def exp32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """ops/xla_math._exp32."""
    def k(v: float) -> ir.Constant:
        return ir.Constant(F32, v)

    x = _clamp_keep_nan(b, x, k(-87.8), k(88.8))
    n = intrinsic(b, "llvm.floor.f32", F32, [_fma(b, x, c32(0x3FB8AA3B), k(0.5))])
    n = _clamp_keep_nan(b, n, k(-127.0), k(127.0))
    r = _fma(b, b.fneg(c32(0x3F318000)), n, x)
    r = _fma(b, b.fneg(c32(0xB95E8083)), n, r)
    p = _fma(b, r, c32(0x39506967), c32(0x3AB743CE))
    for c in (c32(0x3C088908), c32(0x3D2AA9C1), c32(0x3E2AAAAA), k(0.5)):
        p = _fma(b, p, r, c)
    y = b.fadd(k(1.0), _fma(b, p, b.fmul(r, r), r))
    n = b.select(b.fcmp_ordered("ord", n, n), n, k(0.0))  # (NaN: y is NaN)
    bits = b.shl(b.add(b.fptosi(n, I32), ir.Constant(I32, 127)), ir.Constant(I32, 23))
    return b.fmul(y, b.bitcast(bits, F32))


def exp64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """ops/xla_math._exp64."""
    def k(v: float) -> ir.Constant:
        return ir.Constant(F64, v)

    lo, hi = c64(0xC086232BDD7ABCD2), c64(0x40862E42FEFA39EF)
    xc = intrinsic(b, "llvm.maximum.f64", F64, [intrinsic(b, "llvm.minimum.f64", F64, [x, hi]),
                                                lo])
    n = intrinsic(b, "llvm.floor.f64", F64, [_fma(b, xc, c64(0x3FF71547652B82FE), k(0.5))])
    g = _fma(b, b.fneg(c64(0x3FE62E4000000000)), n, xc)
    g = _fma(b, b.fneg(c64(0x3EB7F7D1CF79ABCA)), n, g)
    gg = b.fmul(g, g)
    p = _fma(b, gg, c64(0x3F2089CDD5E44BE8), c64(0x3F9F06D10CCA2C7E))
    pg = b.fmul(_fma(b, p, gg, k(1.0)), g)
    q = _fma(b, gg, c64(0x3EC92EB6BC365FA0), c64(0x3F64AE39B508B6C0))
    q = _fma(b, q, gg, c64(0x3FCD17099887E074))
    q = _fma(b, q, gg, k(2.0))
    e = _fma(b, b.fdiv(pg, b.fsub(q, pg)), k(2.0), k(1.0))
    # n as an integer (0 for NaN: the value is NaN anyway), clamped to +-2099
    n_ok = b.select(b.fcmp_ordered("ord", n, n), n, k(0.0))
    ni = b.sext(b.fptosi(n_ok, I32), I64)
    ni = b.select(b.icmp_signed("<", ni, ir.Constant(I64, -2099)), ir.Constant(I64, -2099), ni)
    ni = b.select(b.icmp_signed(">", ni, ir.Constant(I64, 2099)), ir.Constant(I64, 2099), ni)
    bb = b.ashr(ni, ir.Constant(I64, 2))
    one = ir.Constant(I64, 0x3FF0000000000000)
    s = b.bitcast(b.add(b.shl(bb, ir.Constant(I64, 52)), one), F64)
    rest = b.sub(ni, b.mul(bb, ir.Constant(I64, 3)))
    t = b.bitcast(b.add(b.shl(rest, ir.Constant(I64, 52)), one), F64)
    out = b.fmul(b.fmul(b.fmul(b.fmul(e, s), s), s), t)
    out = b.select(b.fcmp_ordered("<", x, lo), k(0.0), out)
    return b.select(b.fcmp_ordered(">", x, hi), k(float("inf")), out)


def log32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """ops/xla_math.log32."""
    def k(v: float) -> ir.Constant:
        return ir.Constant(F32, v)

    tiny = c32(0x00800000)
    xc = b.select(b.fcmp_ordered(">", x, tiny), x, tiny)
    bits = b.bitcast(xc, I32)
    e = b.sub(b.lshr(bits, ir.Constant(I32, 23)), ir.Constant(I32, 127))
    e = b.fadd(b.sitofp(e, F32), k(1.0))
    m = b.bitcast(b.or_(b.and_(bits, ir.Constant(I32, 0x807FFFFF)),
                        ir.Constant(I32, 0x3F000000)), F32)
    small = b.fcmp_ordered("<", m, c32(0x3F3504F3))
    e = b.fsub(e, b.select(small, k(1.0), k(0.0)))
    u = b.fadd(b.fsub(m, k(1.0)), b.select(small, m, k(0.0)))
    u2 = b.fmul(u, u)
    u3 = b.fmul(u2, u)
    p = [c32(v) for v in (0x3D9021BB, 0xBDEBD1B8, 0x3DEF251A, 0xBDFE5D4F, 0x3E11E9BF,
                           0xBE2AAE50, 0x3E4CCEAC, 0xBE7FFFFC, 0x3EAAAAAA)]
    y = _fma(b, _fma(b, u, p[0], p[1]), u, p[2])
    y1 = _fma(b, _fma(b, u, p[3], p[4]), u, p[5])
    y2 = _fma(b, _fma(b, u, p[6], p[7]), u, p[8])
    y = _fma(b, _fma(b, y, u3, y1), u3, y2)
    y = _fma(b, y, u3, b.fmul(c32(0xB95E8083), e))
    out = _fma(b, c32(0x3F318000), e, b.fadd(_fma(b, k(-0.5), u2, u), y))
    out = b.select(b.fcmp_ordered("==", x, k(0.0)), k(float("-inf")), out)
    out = b.select(b.fcmp_ordered("==", x, k(float("inf"))), k(float("inf")), out)
    return b.select(b.fcmp_unordered("<", x, k(0.0)), k(float("nan")), out)


def log1p(b: ir.IRBuilder, x: ir.Value, log_f64: ir.Function) -> ir.Value:
    """ops/xla_math.log1p (`log_f64`: libm's log, for f64)."""
    import numpy as np

    from xlapy.ops.xla_math import LOG1P_CUT, LOG1P_P, LOG1P_Q

    t = x.type
    f32 = t == F32

    def k(v: float) -> ir.Constant:
        return ir.Constant(t, float(np.float32(v)) if f32 else v)

    zero_x = b.fmul(x, k(0.0))
    p, q = b.fadd(zero_x, k(LOG1P_P[0])), b.fadd(zero_x, k(1.0))
    for c in LOG1P_P[1:]:
        p = _fma(b, p, x, k(c))
    for c in LOG1P_Q[1:]:
        q = _fma(b, q, x, k(c))
    z = b.fmul(x, x)
    rat = b.fadd(b.fmul(b.fmul(x, z), b.fdiv(p, q)), b.fmul(z, k(-0.5)))
    small = b.fadd(x, rat)
    u = b.fadd(x, k(1.0))
    large = log32(b, u) if f32 else b.call(log_f64, [u])
    cut = ir.Constant(t, float(LOG1P_CUT[np.dtype(np.float32 if f32 else np.float64)]))
    abs_x = intrinsic(b, f"llvm.fabs.{'f32' if f32 else 'f64'}", t, [x])
    return b.select(b.fcmp_ordered("<", abs_x, cut), small, large)


def tanh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """ops/xla_math.tanh."""
    import numpy as np

    from xlapy.ops.xla_math import TANH

    t = x.type
    f32 = t == F32
    c = TANH[np.dtype(np.float32 if f32 else np.float64)]
    cb = c32 if f32 else c64
    lim = cb(c["clamp"])
    neg_lim = ir.Constant(t, -lim.constant)
    xc = b.select(b.fcmp_ordered("<", x, neg_lim), neg_lim, x)
    xc = b.select(b.fcmp_ordered(">", xc, lim), lim, xc)
    x2 = b.fmul(xc, xc)
    p, q = [cb(v) for v in c["p"]], [cb(v) for v in c["q"]]
    num = _fma(b, x2, p[0], p[1])
    for k in p[2:]:
        num = _fma(b, x2, num, k)
    den = _fma(b, x2, q[0], q[1])
    for k in q[2:]:
        den = _fma(b, x2, den, k)
    out = b.fdiv(b.fmul(xc, num), den)
    sfx = "f32" if f32 else "f64"
    ax = intrinsic(b, f"llvm.fabs.{sfx}", t, [x])
    if c["tiny"]:
        out = b.select(b.fcmp_ordered("<", ax, ir.Constant(t, c["tiny"])), x, out)
    one = intrinsic(b, f"llvm.copysign.{sfx}", t, [ir.Constant(t, 1.0), x])
    return b.select(b.fcmp_ordered(">=", ax, ir.Constant(t, 20.0)), one, out)
