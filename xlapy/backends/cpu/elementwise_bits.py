"""Bit-level element-wise ops in kernels: bitcast_convert between types of one width and
reduce_precision, exact to the interpreter (xlapy/ops/elementwise_convert.py); and the
storage of the 8-bit floats and sub-byte integers, exact to ml_dtypes (which the
interpreter computes with).

f8 types compute in f32 (one byte in memory): loading decodes the byte exactly, storing
rounds an f32 to nearest even with the type's rules (ml_dtypes' conversion: IEEE-like types
overflow to inf, "fn" types to NaN, "fnuz" types to their one NaN and have no -0). A NaN
decodes to the quiet f32 NaN of its sign, as in ml_dtypes, so the NaN payloads of the
IEEE-like f8 types (e5m2, e4m3, e3m4: several NaN codes) come back canonical from any
kernel op but data movement (which stores the bits it loaded: stored_bits.py); the fn/fnuz
types have one NaN (per sign) and are exact.
The MX types f4e2m1fn, f6e2m3fn and f6e3m2fn ("sat": no inf, no NaN, the sign in their top
bit, one byte in memory) compute in f32 the same way: out-of-range values and infinities
saturate to the largest magnitude, and a NaN stores as -0 (XLA's rule, which the
interpreter follows: ops/elementwise.to_saturating). f8e8m0fnu (no sign, no zero) is not compiled.
s2/s4/u2/u4 compute as i2/i4 (arithmetic wraps as the interpreter's 8-bit compute does
after its wrap) and are stored as the low bits of one byte, the upper bits zero (ml_dtypes).

Values travel in their compute types (elementwise.py), so the stored bits are rebuilt
first: f32/f64 compute values are their bits; a bf16 value is the top half of its f32
(exact: every bf16 compute value is a bf16); an f16 value converts back exactly. A
signaling NaN of f16/bf16 is quieted on the way, as by every kernel op on those types but
data movement (their compute type is f32); other NaN payloads and every other value are
kept.

reduce_precision on an f8 type reduces in f16 or f32 and rounds back, as the interpreter.
bitcast_convert between widths reads one operand element per output element's piece
(narrowing: the last output index picks it) or joins the pieces of the operand's last
dimension (widening), little-endian as the interpreter; its kernels are scalar (lanes.py).
pred is one bit wide, as the spec counts it (pred[64] <-> s64; XLA rejects those).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.llvm_util import (
    F16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    intrinsic,
    like,
    splat,
)
from xlapy.ir import Instruction
from xlapy.ops.elementwise_convert import _upcast_type as upcast_type
from xlapy.types import ElementType as ET

#: The ops this module emits (kernels.py asks `fusible` and calls `emit` for them).
OPS = frozenset({"bitcast_convert", "reduce_precision"})

#: IEEE layouts reduce_precision works on: type -> (exponent bits, mantissa bits).
_IEEE = {ET.F16: (5, 10), ET.BF16: (8, 7), ET.F32: (8, 23), ET.F64: (11, 52)}


def fusible(instr: Instruction) -> bool:
    s = instr.operands[0].shape.element_type
    t = instr.shape.element_type
    if s not in ew.SUPPORTED or t not in ew.SUPPORTED:
        return False
    if instr.opcode == "bitcast_convert":
        return True  # (other widths: lanes.py keeps such kernels scalar)
    return s.is_float


def to_bits(b: ir.IRBuilder, v: ir.Value, t: ET) -> ir.Value:
    """The stored bits (an integer of t.bits) of compute value `v` of type `t` (pred: one
    bit, as the spec counts it)."""
    if t.is_integer or t is ET.PRED:
        return v
    if t in F8:
        u = f8_encode(b, v, t)
        return u if t.bits == 8 else b.trunc(u, like(v.type, ir.IntType(t.bits)))
    if t is ET.BF16:
        wide = b.bitcast(v, like(v.type, I32))
        return b.trunc(b.lshr(wide, splat(wide.type, 16)), like(v.type, I16))
    if t is ET.F16:
        return b.bitcast(b.fptrunc(v, like(v.type, F16)), like(v.type, I16))
    return b.bitcast(v, like(v.type, ir.IntType(t.bits)))


def from_bits(b: ir.IRBuilder, u: ir.Value, t: ET) -> ir.Value:
    """The compute value of type `t` stored as bits `u`."""
    if t.is_integer or t is ET.PRED:
        return u
    if t in F8 and t.bits < 8:
        u = b.zext(u, like(u.type, I8))
    if t is ET.BF16 or t in F8:
        return ew.from_storage(b, u, t)
    if t is ET.F16:
        return b.fpext(b.bitcast(u, like(u.type, F16)), like(u.type, F32))
    return b.bitcast(u, like(u.type, F32 if t is ET.F32 else F64))


def _reduce_precision(b: ir.IRBuilder, x: ir.Value, t: ET, exponent_bits: int,
                      mantissa_bits: int) -> ir.Value:
    """XLA's ReducePrecision on the bits (xlapy/ops/elementwise_convert.py
    `reduce_precision_bits`): round the mantissa to nearest even, then send exponents out
    of the reduced range to inf or a signed zero; NaN stays the input NaN, or becomes an
    infinity of its sign with no mantissa bits (the spec's truncation)."""
    src_e, src_m = _IEEE[t]
    n = t.bits
    u0 = u = to_bits(b, x, t)
    it = u.type

    def c(v: int) -> ir.Constant:
        return splat(it, v & ((1 << n) - 1))

    if mantissa_bits < src_m:
        shift = src_m - mantissa_bits
        last = 1 << shift
        bias = (last >> 1) - 1
        rounding = b.add(b.lshr(b.and_(u, c(last)), c(shift)), c(bias))
        u = b.and_(b.add(u, rounding), c(~(last - 1)))
    if exponent_bits < src_e:
        exp_mask = ((1 << src_e) - 1) << src_m
        bias_src = (1 << (src_e - 1)) - 1
        bias_red = (1 << (exponent_bits - 1)) - 1
        max_e, min_e = bias_src + bias_red, bias_src - bias_red
        e = b.and_(u, c(exp_mask))
        signed_zero = b.and_(u, c(1 << (n - 1)))
        over = b.icmp_unsigned(">", e, c(max_e << src_m))
        under = b.icmp_unsigned("<=", e, c(min_e << src_m))
        u = b.select(over, b.or_(signed_zero, c(exp_mask)), b.select(under, signed_zero, u))
    if mantissa_bits == 0:
        exp_all = ((1 << src_e) - 1) << src_m
        u0 = b.or_(b.and_(u0, c(1 << (n - 1))), c(exp_all))
    return from_bits(b, b.select(b.fcmp_unordered("uno", x, x), u0, u), t)


def emit(b: ir.IRBuilder, instr: Instruction, idx: Sequence[ir.Value],
         gen: Callable[[Instruction, Sequence[ir.Value]], ir.Value]) -> ir.Value:
    """`instr` (one of OPS) at output index `idx`; gen(operand, index) is the kernel's
    compute value of the operand there."""
    src = instr.operands[0]
    s = src.shape.element_type
    t = instr.shape.element_type
    if instr.opcode == "bitcast_convert" and s.bits > t.bits:
        # The last output index picks a t.bits piece, little-endian (the spec's order).
        bits = to_bits(b, gen(src, idx[:-1]), s)
        shift = b.mul(idx[-1], ir.Constant(I64, t.bits))
        shift = b.trunc(shift, bits.type) if s.bits < 64 else shift
        return from_bits(b, b.trunc(b.lshr(bits, shift), ir.IntType(t.bits)), t)
    if instr.opcode == "bitcast_convert" and s.bits < t.bits:
        out: ir.Value = ir.Constant(ir.IntType(t.bits), 0)
        for j in range(t.bits // s.bits):
            part = b.zext(to_bits(b, gen(src, [*idx, ir.Constant(I64, j)]), s), out.type)
            out = b.or_(out, b.shl(part, ir.Constant(out.type, j * s.bits)))
        return from_bits(b, out, t)
    x = gen(src, idx)
    if instr.opcode == "bitcast_convert":
        return x if s is t else from_bits(b, to_bits(b, x, s), t)
    a = instr.attrs
    if s in _IEEE:
        return _reduce_precision(b, x, s, a.exponent_bits, a.mantissa_bits)
    # f8: as XLA (and the interpreter), in f16 when f16 holds every value exactly, else in
    # f32, then rounded back.
    wide = upcast_type(s)
    return ew.round_to(b, _reduce_precision(b, x, wide, a.exponent_bits, a.mantissa_bits), s)


# ---- f8 and sub-byte integer storage --------------------------------------------------------
#: 8-bit float layouts: type -> (exponent bits, mantissa bits, bias, special-value rules).
F8 = {ET.F8E4M3FN: (4, 3, 7, "fn"), ET.F8E5M2: (5, 2, 15, "ieee"),
      ET.F8E4M3FNUZ: (4, 3, 8, "fnuz"), ET.F8E5M2FNUZ: (5, 2, 16, "fnuz"),
      ET.F8E4M3B11FNUZ: (4, 3, 11, "fnuz"), ET.F8E4M3: (4, 3, 7, "ieee"),
      ET.F8E3M4: (3, 4, 3, "ieee"),
      ET.F4E2M1FN: (2, 1, 1, "sat"), ET.F6E2M3FN: (2, 3, 1, "sat"),
      ET.F6E3M2FN: (3, 2, 3, "sat")}
assert set(F8) == ew.F8


def _nan_code(kind: str, e: int, m: int) -> int:
    """The (positive) NaN code ml_dtypes gives for an f32 NaN."""
    return 0x80 if kind == "fnuz" else 0x7F if kind == "fn" else \
        (((1 << e) - 1) << m) | (1 << (m - 1))


def f8_decode(b: ir.IRBuilder, u: ir.Value, t: ET) -> ir.Value:
    """f8 bits (i8, scalar or vector) -> the exact f32 value."""
    e, m, bias, kind = F8[t]
    it = like(u.type, I32)
    w = b.zext(u, it)

    def c(v: int) -> ir.Constant:
        return splat(it, v)

    top = e + m  # the sign bit
    sign = b.shl(b.and_(w, c(1 << top)), c(31 - top))
    ex = b.and_(b.lshr(w, c(m)), c((1 << e) - 1))
    man = b.and_(w, c((1 << m) - 1))
    normal = b.or_(b.shl(b.add(ex, c(127 - bias)), c(23)), b.shl(man, c(23 - m)))
    ft = like(u.type, F32)
    sub = b.fmul(b.uitofp(man, ft), splat(ft, 2.0 ** (1 - bias - m)))  # exact, f32-normal
    mag = b.select(b.icmp_unsigned("==", ex, c(0)), b.bitcast(sub, it), normal)
    nan = c(0x7FC00000)
    if kind == "ieee":
        top = b.icmp_unsigned("==", ex, c((1 << e) - 1))
        special = b.select(b.icmp_unsigned("==", man, c(0)), c(0x7F800000), nan)
        mag = b.select(top, special, mag)
    elif kind == "fn":
        mag = b.select(b.icmp_unsigned("==", b.and_(w, c(0x7F)), c(0x7F)), nan, mag)
    elif kind == "sat":  # every code is a finite value
        pass
    else:  # fnuz: 0x80 is the NaN (ml_dtypes decodes it with the sign set)
        mag = b.select(b.icmp_unsigned("==", w, c(0x80)), nan, mag)
    return b.bitcast(b.or_(sign, mag), ft)


def f8_encode(b: ir.IRBuilder, x: ir.Value, t: ET) -> ir.Value:
    """f32 -> f8 bits (i8), rounded to nearest even as ml_dtypes converts."""
    e, m, bias, kind = F8[t]
    it = like(x.type, I32)

    def c(v: int) -> ir.Constant:
        return splat(it, v)

    bits = b.bitcast(x, it)
    sign = b.lshr(bits, c(31))
    a = b.and_(bits, c(0x7FFFFFFF))
    # Normal results: rebias, round the 23 - m dropped bits to nearest even.
    shift = 23 - m
    r = b.sub(a, c((127 - bias) << 23))
    odd = b.and_(b.lshr(r, c(shift)), c(1))
    q = b.lshr(b.add(b.add(r, c((1 << (shift - 1)) - 1)), odd), c(shift))
    # Subnormal results: |x| in units of the smallest subnormal, rounded (an exact scaling).
    ft = x.type
    ax = b.bitcast(a, ft)
    units = intrinsic(b, f"llvm.roundeven.{_sfx(ft)}", ft,
                      [b.fmul(ax, splat(ft, 2.0 ** (bias - 1 + m)))])
    q_sub = b.fptoui(units, it)
    min_normal = (127 - bias + 1) << 23
    q = b.select(b.icmp_unsigned("<", a, c(min_normal)), q_sub, q)
    inf_code = ((1 << e) - 1) << m
    nan = c(_nan_code(kind, e, m))
    is_nan = b.icmp_unsigned(">", a, c(0x7F800000))
    if kind == "ieee":
        q = b.select(b.icmp_unsigned(">", q, c(inf_code)), c(inf_code), q)  # inf included
        q = b.select(is_nan, nan, q)
    elif kind == "fn":
        q = b.select(b.icmp_unsigned(">", q, c(0x7E)), nan, q)  # inf, NaN, overflow
    elif kind == "sat":  # inf and overflow: the largest; NaN: -0 (ops/elementwise.SATURATING)
        top = (1 << (e + m)) - 1
        q = b.select(b.icmp_unsigned(">", q, c(top)), c(top), q)
        q = b.select(is_nan, c(0), q)
        sign = b.select(is_nan, c(1), sign)
        return b.trunc(b.or_(q, b.shl(sign, c(e + m))), like(x.type, I8))
    else:
        over = b.or_(b.icmp_unsigned(">", q, c(0x7F)), is_nan)
        sign = b.select(b.or_(over, b.icmp_unsigned("==", q, c(0))), c(0), sign)  # no -0
        q = b.select(over, nan, q)
    return b.trunc(b.or_(q, b.shl(sign, c(7))), like(x.type, I8))


def _sfx(t: ir.Type) -> str:
    return f"v{t.count}f32" if isinstance(t, ir.VectorType) else "f32"
