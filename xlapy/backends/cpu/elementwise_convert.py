"""convert between element types as LLVM IR, XLA CPU's rules: saturating float -> int (NaN
-> 0), ints to bf16 through f32, bf16 <-> f32 bit-level (no flush), complex through
elementwise_complex.py. Part of elementwise.py's table (its helpers: flush, round_to)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import elementwise_complex as _cx
from xlapy.backends.cpu.llvm_util import F16, F32, F64, I8, intrinsic, like, sfx, splat
from xlapy.types import ElementType as ET


def convert_supported(s: ET, t: ET) -> bool:
    if s not in ew.SUPPORTED or t not in ew.SUPPORTED:
        return False
    return not (s is ET.F64 and t is ET.BF16)


def _to_int_saturated(b: ir.IRBuilder, v: ir.Value, t: ET, ct: ir.Type) -> ir.Value:
    """llvm.fptosi.sat / fptoui.sat of a float vector, as vector code: LLVM's x86 lowering
    of the vector intrinsics is one cvttss2si and two cmovs per lane (f32 -> s32 over 1M
    elements: 0.66 ms, XLA 0.19). Clamped into the range first (so the plain conversion is
    defined), then the values at or past 2^(bits-1) (2^bits unsigned) set to the maximum
    and NaN to 0: the intrinsic's results exactly. Neither select where the clamp gives
    it already: below 2^(mantissa bits) the largest float under 2^bits truncates to the
    maximum (u8: 255.99998 -> 255), and maxnum(NaN, 0) is the unsigned 0 (jnp.clip(x * 255,
    0, 255).astype(uint8) of 1.2M f32: 23 -> 13 vector ops per 8 lanes on AVX2)."""
    t_np = np.float64 if v.type.element == F64 else np.float32
    lo = -2.0 ** (t.bits - 1) if t.is_signed else 0.0
    top = 2.0 ** (t.bits - 1) if t.is_signed else 2.0 ** t.bits  # the first value past max
    hi = float(np.nextafter(t_np(top), t_np(0)))  # the largest float below it
    x = intrinsic(b, f"llvm.maxnum.{sfx(v.type)}", v.type, [v, splat(v.type, lo)])
    x = intrinsic(b, f"llvm.minnum.{sfx(v.type)}", v.type, [x, splat(v.type, hi)])
    r = (b.fptosi if t.is_signed else b.fptoui)(x, ct)
    top_int = (1 << (t.bits - 1)) - 1 if t.is_signed else (1 << t.bits) - 1
    if int(hi) != top_int:
        r = b.select(b.fcmp_ordered(">=", v, splat(v.type, top)), splat(ct, top_int), r)
    if lo == 0.0:
        return r
    return b.select(b.fcmp_unordered("uno", v, v), splat(ct, 0), r)


def convert(b: ir.IRBuilder, x: ir.Value, s: ET, t: ET) -> ir.Value:
    """XLA CPU convert: saturating float->int (NaN -> 0), ints to bf16 through f32."""
    if s in _cx.COMPLEX or t in _cx.COMPLEX:
        return _cx.convert(b, x, s, t)
    ct = like(x.type, ew.compute_type(t))
    if s == t:
        return x
    if t is ET.PRED:
        if ew._isfloat(x):
            # bf16 -> pred compares the bits unflushed on XLA CPU; f16/f32/f64 flush first.
            v = x if s is ET.BF16 else ew.flush(b, x)
            return b.fcmp_unordered("une", v, splat(x.type, 0.0))
        return b.icmp_unsigned("!=", x, splat(x.type, 0))
    if s is ET.PRED:
        v = b.zext(x, like(x.type, I8))
        return b.uitofp(v, ct) if t.is_float else b.zext(v, ct) if t.bits > 8 else \
            b.trunc(v, ct) if t.bits < 8 else v
    f32, f64, f16 = like(x.type, F32), like(x.type, F64), like(x.type, F16)
    if t.is_float:
        if s.is_integer:
            v = (b.sitofp if s.is_signed else b.uitofp)(x, f64 if t is ET.F64 else f32)
        elif (s, t) in ((ET.BF16, ET.F32), (ET.F32, ET.BF16)):
            return ew.round_to(b, x, t)  # bit-level paths: no flush (as the interpreter)
        else:
            v = ew.flush(b, x)
            v = b.fpext(v, ct) if ct == f64 and v.type == f32 else \
                b.fptrunc(v, f16) if t is ET.F16 and v.type == f64 else \
                b.fptrunc(v, ct) if ct == f32 and v.type == f64 else v
            if v.type == f16:
                return b.fpext(v, f32)
        return ew.round_to(b, ew.flush(b, v), t)
    if s.is_float:
        v = ew.flush(b, x)
        if isinstance(v.type, ir.VectorType):
            return _to_int_saturated(b, v, t, ct)
        name = "llvm.fptosi.sat" if t.is_signed else "llvm.fptoui.sat"
        return intrinsic(b, f"{name}.{sfx(ct)}.{sfx(v.type)}", ct, [v])
    # integer -> integer: wrap (trunc) or extend by the source's signedness.
    if t.bits < s.bits:
        return b.trunc(x, ct)
    if t.bits > s.bits:
        return b.sext(x, ct) if s.is_signed else b.zext(x, ct)
    return x
