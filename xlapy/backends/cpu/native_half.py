"""f16 arithmetic in half registers on AVX512-FP16 targets (vaddph, vsubph, vmulph), with
the bits of the f32 form every other target computes (elementwise.py: each op in f32, its
result rounded to f16 and widened back)."""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

from xlapy.backends.cpu import target
from xlapy.backends.cpu.llvm_util import F16, like
from xlapy.types import ElementType as ET

#: f16 ops AVX512-FP16 computes itself (vaddph, vsubph, vmulph). Not divide: vdivph ran
#: slower than vdivps with the two conversions (Sapphire Rapids, 4M elements, same process:
#: x / y 0.46 -> 0.62 ms, x / row 0.43 -> 0.66).
_HALF_OPS = {"add": "fadd", "subtract": "fsub", "multiply": "fmul"}


def emit(b: ir.IRBuilder, opcode: str, args: Sequence[ir.Value], t: ET,
         out: ET) -> ir.Value | None:
    """An f16 add, subtract or multiply as one half-precision instruction where the target
    has AVX512-FP16, else None. The f32 form (op, then round to f16 and widen back) costs
    two conversions an op, 4 uops a zmm on Intel: an f16 GELU ran at 1.64x XLA's time on
    Sapphire Rapids. Same bits: f32 has 24 >= 2 * 11 + 2 significand bits, so rounding
    the exact result to f32 and then to f16 equals rounding it to f16 once, and f16
    values widened to f32 are never f32 denormals (no flush applies). The operands are
    narrowed (exact: they hold f16 values) and the result widened; code generation folds
    each narrow of a widen, so a chain of these ops stays in half registers."""
    name = _HALF_OPS.get(opcode)
    if name is None or t is not ET.F16 or out is not ET.F16 or \
            not target.current().has("avx512fp16"):
        return None
    h = like(args[0].type, F16)
    x, y = (b.fptrunc(a, h) for a in args)
    return b.fpext(getattr(b, name)(x, y), args[0].type)
