"""f32 -> bf16 rounding by AVX512-BF16's `vcvtneps2bf16` where it gives the IR rounding's bits.

Why: elementwise.py rounds to bf16 with integer IR (add 0x7FFF + lsb, NaN select, mask or
shift): ~10 IR instructions per rounding, and a bf16 softmax row kernel rounds after every op
(9 vector roundings in attention_bf16's kernel). X86 instruction selection of that kernel is
most of the program's cold compile (~30 us per IR instruction in llvmlite's LLVM); the
instruction is one IR call, one machine instruction.

Same bits: `vcvtneps2bf16` rounds to nearest even and returns a NaN as
`(bits >> 16) | 0x40` (sign and top payload kept, quieted), as elementwise._bf16_bits does. It
differs in one case only: a denormal input counts as zero (DAZ) where the IR rounds it to a
bf16 denormal. So it is used only for values known to hold no denormal (`flushed`: results of
arithmetic under FTZ, elementwise.is_flushed) in the `ftz` denormal mode; a normal f32 never
rounds to a bf16 denormal (2^-126 is a bf16), so the output side never flushes either.
"""

from __future__ import annotations

from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import target
from xlapy.backends.cpu.llvm_util import intrinsic
from xlapy.backends.cpu.rtlib import _BFloat  # llvmlite has no bfloat type; rtlib's

_F32 = ir.FloatType()
_I16 = ir.IntType(16)
#: Lanes -> the intrinsic taking <lanes x float>, returning <lanes x bfloat>.
_INTRINSICS = {16: "llvm.x86.avx512bf16.cvtneps2bf16.512",
               8: "llvm.x86.avx512bf16.cvtneps2bf16.256"}


def usable(v: ir.Value, flushed: bool) -> bool:
    """Whether `bits` converts `v`: an f32 scalar or 8/16-lane vector with no denormal
    (`flushed`), the `ftz` mode, a target with AVX512-BF16 (and VL below 512 bits)."""
    t = target.current()
    if not (flushed and denormal.flushing() and t.is_x86 and t.has("avx512bf16")):
        return False
    ty = v.type
    if ty == _F32:
        return t.has("avx512vl")
    if isinstance(ty, ir.VectorType) and ty.element == _F32 and ty.count in _INTRINSICS:
        return t.has("avx512f") if ty.count == 16 else t.has("avx512vl")
    return False


def bits(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """The bf16 bits (i16 or <N x i16>) of `v` rounded to nearest even (`usable(v)`)."""
    scalar = not isinstance(v.type, ir.VectorType)
    x = b.insert_element(ir.Constant(ir.VectorType(_F32, 8), None), v, ir.IntType(32)(0)) \
        if scalar else v
    n = x.type.count
    h = b.bitcast(intrinsic(b, _INTRINSICS[n], ir.VectorType(_BFloat(), n), [x]),
                  ir.VectorType(_I16, n))
    return b.extract_element(h, ir.IntType(32)(0)) if scalar else h


__all__ = ["bits", "usable"]
