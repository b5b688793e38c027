"""Which f32 compute values already hold a bf16, so rounding them to bf16 is the identity.

Why: a bf16 kernel rounds every op's result (elementwise.round_to), also where the value is
a bf16 already: x * 0.125 of a bf16 x, a max of bf16s, a row buffer of rounded values read
back, the reduce result converted for storage. Without AVX512-BF16 (x86-64-v3) a rounding is
~10 vector IR instructions, and x86 instruction selection costs ~30 us per instruction:
x86-64-v3's attention_bf16 softmax kernel rounded 14 vectors per element where 8 change a
bit, the most of its cold compile. Skipping them changes no bit: elementwise._bf16_round of
a value `is_bf16` returns is its input (the low 16 bits are zero, so adding 0x7FFF + lsb
carries nothing into the upper half; a NaN is quiet already, so or-ing the quiet bit is a
no-op), and elementwise._bf16_bits of it is its upper half.

`is_bf16(x)`: x's bits are those of a bf16 widened to f32, a NaN a quiet one. Known so are
rounding results (`mark`), constants that are bf16s, and what moves or picks such values
without arithmetic (select, negate, abs, copysign, max/min, lane moves). A product by a
power of two 2^k is one too where kernels flush (FTZ set: `flush_ftz.in_kernel`, the `ftz`
denormal mode): the bf16 significand is kept (at most 8 bits), a result that would be
denormal is flushed to a signed zero, one that overflows is an infinity, a NaN stays the
same quiet NaN. Without the flush x * 2^-k can be an f32 denormal with more than a bf16's
bits, so it is not.
"""

from __future__ import annotations

import math
import struct
from typing import Any

from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import flush_ftz
from xlapy.backends.cpu.llvm_util import F32, I32, like, splat

#: Calls whose result is one of their float arguments (or its magnitude, or its sign moved).
_PICK_CALLS = ("llvm.maximum.", "llvm.minimum.", "llvm.maxnum.", "llvm.minnum.",
               "llvm.fabs.")


def mark(x: ir.Value) -> ir.Value:
    """Record that `x` holds a bf16 (a rounding's result, a load of rounded values)."""
    x._xlapy_bf16 = True  # type: ignore[attr-defined]
    return x


def quiet(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """`x` (`is_bf16(x, signaling=True)`) with a NaN's quiet bit set: its bf16 rounding."""
    it = like(x.type, I32)
    bits = b.bitcast(x, it)
    out = b.select(b.fcmp_unordered("uno", x, x), b.or_(bits, splat(it, 0x400000)), bits)
    return mark(b.bitcast(out, x.type))


def _f32(x: ir.Type) -> bool:
    return x == F32 or isinstance(x, ir.VectorType) and x.element == F32


def _bf16_constant(c: ir.Constant) -> bool:
    """Every lane of f32 constant `c` is a bf16 (NaN lanes: no)."""
    if c.constant is None or c.constant is ir.Undefined:
        return True  # zeroinitializer, undef
    for v in c.constant if isinstance(c.type, ir.VectorType) else [c]:
        f = v.constant if isinstance(v, ir.Constant) else v
        if f is None or f is ir.Undefined:
            continue
        if not isinstance(f, float) or math.isnan(f):
            return False
        try:
            bits = struct.unpack("<I", struct.pack("<f", f))[0]
        except OverflowError:  # not an f32 at all
            return False
        if bits & 0xFFFF or struct.unpack("<f", struct.pack("<I", bits))[0] != f:
            return False
    return True


def _power_of_two(c: ir.Value) -> bool:
    """`c` is an f32 constant whose every lane is the same +-2^k (finite, nonzero)."""
    if not isinstance(c, ir.Constant) or c.constant is None or c.constant is ir.Undefined:
        return False
    vals = c.constant if isinstance(c.type, ir.VectorType) else [c]
    fs = {v.constant if isinstance(v, ir.Constant) else v for v in vals}
    if len(fs) != 1:
        return False
    f = fs.pop()
    if not isinstance(f, float) or not math.isfinite(f) or f == 0.0:
        return False
    m, _ = math.frexp(abs(f))
    return m == 0.5 and _bf16_constant(ir.Constant(F32, f))


def widened(x: ir.Value) -> bool:
    """`x` is a bf16 widened to f32 (elementwise.from_storage: a load's bits shifted into
    the upper half): a bf16 but for a NaN, which may be a signaling one."""
    if not (isinstance(x, ir.Instruction) and x.opname == "bitcast" and _f32(x.type)):
        return False
    shl = x.operands[0]
    if not (isinstance(shl, ir.Instruction) and shl.opname == "shl"):
        return False
    ext, k = shl.operands
    return isinstance(ext, ir.Instruction) and ext.opname == "zext" and \
        _elem_bits(ext.operands[0].type) == 16 and _lanes_equal(k, 16)


def _elem_bits(t: ir.Type) -> int:
    e = t.element if isinstance(t, ir.VectorType) else t
    return e.width if isinstance(e, ir.IntType) else 0


def _lanes_equal(c: ir.Value, n: int) -> bool:
    """`c` is the integer constant n, or a vector of it in every lane."""
    if not isinstance(c, ir.Constant) or c.constant is None or c.constant is ir.Undefined:
        return False
    vals = c.constant if isinstance(c.type, ir.VectorType) else [c]
    return all((v.constant if isinstance(v, ir.Constant) else v) == n for v in vals)


def _flushing() -> bool:
    """Results of float arithmetic emitted now are flushed (a kernel body, `ftz` mode)."""
    return denormal.flushing() and getattr(flush_ftz._state, "on", False)


def is_bf16(x: ir.Value, depth: int = 6, signaling: bool = False) -> bool:
    """Whether `x` (an f32 scalar or vector) holds a bf16: rounding it to bf16 is a no-op.
    `signaling`: or a bf16 but for a NaN that may be a signaling one (`widened` loads and
    what picks among them: a max / min of loaded bf16s), whose rounding only quiets a NaN
    (elementwise._bf16_round: 3 vector instructions instead of ~10)."""
    if not _f32(x.type):
        return False
    if isinstance(x, ir.Constant):
        return _bf16_constant(x)
    if getattr(x, "_xlapy_bf16", False) or signaling and widened(x):
        return True
    if depth <= 0 or not isinstance(x, ir.Instruction):
        return False
    op = x.opname
    ops = x.operands
    if op in ("fneg", "extractelement"):
        return is_bf16(ops[0], depth - 1, signaling)
    if op in ("shufflevector", "insertelement"):  # lanes moved or broadcast
        return is_bf16(ops[0], depth - 1, signaling) and is_bf16(ops[1], depth - 1, signaling)
    if op == "select":
        return is_bf16(ops[1], depth - 1, signaling) and is_bf16(ops[2], depth - 1, signaling)
    if op == "bitcast":
        # elementwise.select: bitcast(select(p, bitcast(a), bitcast(b))) on integer bits.
        src = ops[0]
        if not isinstance(src, ir.Instruction) or src.opname != "select":
            return False
        return all(isinstance(v, ir.Instruction) and v.opname == "bitcast"
                   and v.operands[0].type == x.type
                   and is_bf16(v.operands[0], depth - 1, signaling) for v in src.operands[1:])
    if op in ("fmul", "fdiv") and _flushing():
        a, c = ops
        if op == "fmul" and _power_of_two(a):
            a, c = c, a
        # (a loaded bf16 may be a signaling NaN, which the product quiets)
        return _power_of_two(c) and (widened(a) or is_bf16(a, depth - 1, signaling))
    if op == "call":
        name = getattr(x.callee, "name", "")
        if name.startswith(_PICK_CALLS):
            return all(is_bf16(a, depth - 1, signaling) for a in x.args if a.type == x.type)
        if name.startswith("llvm.copysign."):
            return is_bf16(x.args[0], depth - 1, signaling)
    return False


#: Float arithmetic that x86 computes with a quiet NaN result: the default NaN, or a NaN
#: operand's payload with the quiet bit set.
_QUIETING = frozenset({"fadd", "fsub", "fmul", "fdiv"})
_QUIETING_CALLS = ("llvm.fma.", "llvm.fmuladd.", "llvm.sqrt.", "llvm.canonicalize.")


def _lanes(c: ir.Constant) -> list[Any] | None:
    """The lane values of a scalar or vector constant; None for zeroinitializer / undef."""
    if c.constant is None or c.constant is ir.Undefined:
        return None
    vals = c.constant if isinstance(c.type, ir.VectorType) else [c]
    return [v.constant if isinstance(v, ir.Constant) else v for v in vals]


def _foldable_constant(c: ir.Value) -> bool:
    """`c` is a constant with a lane of +-0 or +-1: with it LLVM may fold the op into its
    other operand (x * 1, x + -0, x - 0, x / 1, negations), which then is not quieted."""
    if not isinstance(c, ir.Constant):
        return False
    vals = _lanes(c)
    return vals is None or any(v in (0.0, 1.0, -1.0, None) for v in vals)  # (None: zeros)


def _nan_constant_clean(c: ir.Constant) -> bool:
    """No lane of f32 constant `c` is a NaN with bits in its low half (llvmlite's constants
    carry no NaN payload to check: any NaN lane counts)."""
    return not any(isinstance(f, float) and math.isnan(f) for f in _lanes(c) or [])


def _low_clean(x: ir.Value, depth: int) -> bool:
    """Every NaN `x` can hold has the low 16 bits of its f32 zero (quiet or not)."""
    if not _f32(x.type):
        return False
    if isinstance(x, ir.Constant):
        return _nan_constant_clean(x)
    if is_bf16(x, depth) or widened(x):
        return True
    if depth <= 0 or not isinstance(x, ir.Instruction):
        return False
    op, ops = x.opname, list(x.operands)
    if op == "select":
        ops = ops[1:]
    elif op == "call":
        name = getattr(x.callee, "name", "")
        if not name.startswith(_QUIETING_CALLS + _PICK_CALLS + ("llvm.copysign.",)):
            return False
        ops = list(x.args)
    elif op not in _QUIETING | {"fneg", "extractelement", "shufflevector", "insertelement"}:
        return False
    return all(_low_clean(o, depth - 1) for o in ops if _f32(o.type))


def quiet_clean(v: ir.Value, depth: int = 6) -> bool:
    """Whether every NaN `v` can hold is quiet with the low 16 bits of its f32 zero, so its
    bf16 rounding by adding 0x7FFF + lsb already gives the NaN rule's bits (the upper half,
    quiet) and needs no NaN select: 3 of a rounding's ~10 vector instructions, a quarter of
    a bf16 layer norm's time on x86-64-v3 (Zen 3: 1.98 -> 1.52 ms). So is the result of
    arithmetic x86 computes (its NaN the default one or an operand's, quieted) on operands
    whose NaNs have those bits zero (bf16s: loaded, rounded), unless a constant operand
    lets LLVM fold the op away and pass a signaling NaN on."""
    if not isinstance(v, ir.Instruction) or not _f32(v.type):
        return False
    if v.opname in _QUIETING:
        ops = list(v.operands)
    elif v.opname == "call" and getattr(v.callee, "name", "").startswith(_QUIETING_CALLS):
        ops = list(v.args)
    else:
        return False
    return not any(_foldable_constant(o) for o in ops) and \
        all(_low_clean(o, depth - 1) for o in ops)


__all__ = ["is_bf16", "mark", "quiet", "quiet_clean", "widened"]
