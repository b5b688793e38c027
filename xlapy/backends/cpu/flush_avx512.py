"""The denormal test of `elementwise.flush` in one AVX-512 instruction.

A kernel flushes every float it loads (FTZ without DAZ, elementwise.py): |x| < tiny as
and + compare + masked select, three vector instructions per loaded vector - layernorm's
last pass flushes x, scale and bias, nine of its ~16. vfpclassps/pd with the denormal class
(imm 0x20) is the compare on its own, the abs not needed: two instructions. Same result bits
(a denormal to the zero of its sign, everything else - NaN too - unchanged)."""

from __future__ import annotations

from llvmlite import ir

from xlapy.backends.cpu import target
from xlapy.backends.cpu.llvm_util import F32, F64, I32, intrinsic

#: vfpclass's class bit for denormals.
DENORMAL = 0x20


def is_denormal(b: ir.IRBuilder, x: ir.Value) -> ir.Value | None:
    """<n x i1> lanes of a 512-bit f32/f64 vector x that are denormal, or None where there
    is no such instruction (scalars, other widths, no AVX-512)."""
    t = x.type
    if not isinstance(t, ir.VectorType) or t.element not in (F32, F64) or \
            not target.current().has("avx512f"):
        return None
    per = 16 if t.element == F32 else 8
    if t.count != per:
        return None
    kind = "ps" if t.element == F32 else "pd"
    return intrinsic(b, f"llvm.x86.avx512.fpclass.{kind}.512", ir.VectorType(ir.IntType(1), per),
                     [x, ir.Constant(I32, DENORMAL)])


__all__ = ["is_denormal", "DENORMAL"]
