"""f16 arithmetic in half registers on AVX512-FP16 targets (vaddph, vsubph, vmulph), with
the bits of the f32 form every other target computes (elementwise.py: each op in f32, its
result rounded to f16 and widened back); on every target, no rounding after the ops whose
f32 result is already an f16 value."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from xlapy.backends.cpu import target
from xlapy.backends.cpu.llvm_util import F16, like
from xlapy.types import ElementType as ET

#: f16 ops AVX512-FP16 computes itself (vaddph, vsubph, vmulph). Not divide: vdivph ran
#: slower than vdivps with the two conversions (Sapphire Rapids, 4M elements, same process:
#: x / y 0.46 -> 0.62 ms, x / row 0.43 -> 0.66).
_HALF_OPS = {"add": "fadd", "subtract": "fsub", "multiply": "fmul"}
#: f16 ops whose f32 result is an operand's value (or a NaN): its rounding, a vcvtps2ph +
#: vcvtph2ps round trip, changes nothing (jnp.clip chain of 4M f16: 0.59 -> 0.48-0.51 ms).
_EXACT = frozenset({"maximum", "minimum", "abs", "negate"})


def emit(b: ir.IRBuilder, opcode: str, args: Sequence[ir.Value], t: ET, out: ET,
         compute: Callable[[ir.IRBuilder, Sequence[ir.Value], ET], ir.Value]
         ) -> ir.Value | None:
    """An f16 max, min, abs or negate as `compute` gives it in f32, unrounded (`_EXACT`); an
    f16 add, subtract or multiply as one half-precision instruction where the target
    has AVX512-FP16, else None. The f32 form (op, then round to f16 and widen back) costs
    two conversions an op, 4 uops a zmm on Intel: an f16 GELU ran at 1.64x XLA's time on
    Sapphire Rapids. Same bits: f32 has 24 >= 2 * 11 + 2 significand bits, so rounding
    the exact result to f32 and then to f16 equals rounding it to f16 once, and f16
    values widened to f32 are never f32 denormals (no flush applies). The operands are
    narrowed (exact: they hold f16 values) and the result widened; code generation folds
    each narrow of a widen, so a chain of these ops stays in half registers."""
    if t is not ET.F16 or out is not ET.F16:
        return None
    if opcode in _EXACT:
        return compute(b, args, t)
    name = _HALF_OPS.get(opcode)
    if name is None or not target.current().has("avx512fp16"):
        return None
    h = like(args[0].type, F16)
    x, y = (b.fptrunc(a, h) for a in args)
    return b.fpext(getattr(b, name)(x, y), args[0].type)
