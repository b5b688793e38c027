"""f16 arithmetic in half registers on AVX512-FP16 targets (vaddph, vsubph, vmulph), with
the bits of the f32 form every other target computes (elementwise.py: each op in f32, its
result rounded to f16 and widened back); on every target, no rounding after the ops whose
f32 result is already an f16 value."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from xlapy.backends.cpu import target
from xlapy.backends.cpu.llvm_util import F16, intrinsic, like, sfx, splat
from xlapy.types import ElementType as ET

#: f16 ops AVX512-FP16 computes itself (vaddph, vsubph, vmulph). Not divide: vdivph ran
#: slower than vdivps with the two conversions (Sapphire Rapids, 4M elements, same process:
#: x / y 0.46 -> 0.62 ms, x / row 0.43 -> 0.66).
_HALF_OPS = {"add": "fadd", "subtract": "fsub", "multiply": "fmul"}
#: f16 ops whose f32 result is an f16 value (an operand's, a NaN, an integer an f16 holds,
#: or +-1 / +-0): its rounding, a vcvtps2ph + vcvtph2ps round trip, changes nothing (jnp.clip
#: chain of 4M f16: 0.59 -> 0.48-0.51 ms). An f16 of magnitude 1024 or more is an integer
#: already, and below that floor, ceil and the roundings give integers of at most 1024.
_EXACT = frozenset({"maximum", "minimum", "abs", "negate", "floor", "ceil",
                    "round_nearest_afz", "round_nearest_even", "sign"})

#: Rounding ops as LLVM intrinsics (on half vectors where the target has AVX512-FP16).
_ROUNDING = {"floor": "floor", "ceil": "ceil", "round_nearest_even": "roundeven",
             "round_nearest_afz": "round"}


def emit(b: ir.IRBuilder, opcode: str, args: Sequence[ir.Value], t: ET, out: ET,
         compute: Callable[[ir.IRBuilder, Sequence[ir.Value], ET], ir.Value]
         ) -> ir.Value | None:
    """An f16 max, min, abs, negate, floor, ceil, rounding or sign unrounded (`_EXACT`: on
    half vectors where the target has AVX512-FP16, else as `compute` gives it in f32); an
    f16 add, subtract or multiply as one half-precision instruction where the target has
    AVX512-FP16, else None. The f32 form (op, then round to f16 and widen back) costs
    two conversions an op, 4 uops a zmm on Intel: an f16 GELU ran at 1.64x XLA's time on
    Sapphire Rapids. Same bits: f32 has 24 >= 2 * 11 + 2 significand bits, so rounding
    the exact result to f32 and then to f16 equals rounding it to f16 once, and f16
    values widened to f32 are never f32 denormals (no flush applies). The operands are
    narrowed (exact: they hold f16 values) and the result widened; code generation folds
    each narrow of a widen, so a chain of these ops stays in half registers."""
    if t is not ET.F16 or out is not ET.F16:
        return None
    native = target.current().has("avx512fp16")
    if opcode in _EXACT:
        if native and isinstance(args[0].type, ir.VectorType):
            h = like(args[0].type, F16)
            return b.fpext(_in_half(b, opcode, [b.fptrunc(a, h) for a in args]), args[0].type)
        return compute(b, args, t)
    name = _HALF_OPS.get(opcode)
    if name is None or not native:
        return None
    h = like(args[0].type, F16)
    x, y = (b.fptrunc(a, h) for a in args)
    return b.fpext(getattr(b, name)(x, y), args[0].type)


def _in_half(b: ir.IRBuilder, opcode: str, xs: Sequence[ir.Value]) -> ir.Value:
    """An `_EXACT` op on half vectors, as elementwise.py computes it in f32 (vrndscaleph,
    vmaxph, ...: no conversions around it; an f16 value needs no flush in f32, so none here):
    a chain of f16 roundings, signs and clamps ran at 1.8x XLA's time, converting around
    each."""
    x = xs[0]
    ty = x.type
    if opcode in _ROUNDING:
        return intrinsic(b, f"llvm.{_ROUNDING[opcode]}.{sfx(ty)}", ty, [x])
    if opcode in ("maximum", "minimum"):
        return intrinsic(b, f"llvm.{opcode}.{sfx(ty)}", ty, list(xs))
    if opcode == "abs":
        return intrinsic(b, f"llvm.fabs.{sfx(ty)}", ty, [x])
    if opcode == "negate":
        return b.fneg(x)
    one = intrinsic(b, f"llvm.copysign.{sfx(ty)}", ty, [splat(ty, 1.0), x])  # sign
    return b.select(b.fcmp_unordered("ueq", x, splat(ty, 0.0)), x, one)  # zero or NaN: x
