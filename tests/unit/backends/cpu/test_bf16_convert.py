"""bf16_convert: f32 -> bf16 rounding by vcvtneps2bf16 (AVX512-BF16) for values known to hold
no denormal in the `ftz` mode. The bits equal the IR rounding's (round to nearest even; NaN
as (bits >> 16) | 0x40) for 16- and 8-lane vectors and scalars, in place (round_to) and
narrowed (to_storage); elsewhere (a value that may be denormal, the `ieee` mode, a target
without AVX512-BF16) the IR rounding stays."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest
from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import bf16_convert, target
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.llvm_util import F32, I16, I64, VOID, Engine, for_range, new_module
from xlapy.types import ElementType as ET

_HW = target.current().has("avx512bf16") and target.current().has("avx512vl")


def _module(lanes: int) -> ir.Module:
    """void conv(float* x, float* out, i16* half, i64 n): out = round_to(flush(x)),
    half = to_storage(flush(x)), `lanes` at a time (1: scalars)."""
    mod = new_module(f"bf16_convert_test{lanes}")
    vt = F32 if lanes == 1 else ir.VectorType(F32, lanes)
    ht = I16 if lanes == 1 else ir.VectorType(I16, lanes)
    fn = ir.Function(mod, ir.FunctionType(VOID, [F32.as_pointer(), F32.as_pointer(),
                                                 I16.as_pointer(), I64]), name="conv")
    x, out, half, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    with for_range(b, ir.Constant(I64, 0), n, step=lanes) as i:
        v = ew.flush(b, b.load(b.bitcast(b.gep(x, [i]), vt.as_pointer()), align=4))
        b.store(ew.round_to(b, v, ET.BF16), b.bitcast(b.gep(out, [i]), vt.as_pointer()),
                align=4)
        b.store(ew.to_storage(b, v, ET.BF16), b.bitcast(b.gep(half, [i]), ht.as_pointer()),
                align=2)
    b.ret_void()
    return mod


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(3)
    special = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,
               0xFF812345, 0x00000001, 0x807FFFFF, 0x00800000, 0x80800000, 0x00807FFF,
               0x00808000, 0x00818000, 0x7F7FFFFF, 0x7F7F8000, 0x7F7F7FFF, 0x3F808000,
               0x3F818000, 0x3F807FFF, 0x3F80C000, 0x007FFFFF]
    bits = np.concatenate([rng.integers(0, 1 << 32, 1 << 15, dtype=np.uint64),
                           special]).astype(np.uint32)
    return np.concatenate([bits, np.zeros((-len(bits)) % 16, np.uint32)]).view(np.float32)


def _expected(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(round_to, to_storage) bits of flush(x): RNE, denormals to signed zero, NaN kept
    quiet with its sign and top payload."""
    bits = x.view(np.uint32)
    tiny = (bits & 0x7F800000) == 0
    flushed = np.where(tiny, bits & 0x80000000, bits).astype(np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        h = flushed.astype(ml_dtypes.bfloat16).view(np.uint16).copy()
    nan = np.isnan(flushed)
    h[nan] = ((flushed.view(np.uint32)[nan] >> 16) | 0x40).astype(np.uint16)
    return (h.astype(np.uint32) << 16), h


@pytest.mark.parametrize("lanes", [16, 8, 1])
def test_hardware_rounding_equals_the_ir_rounding(lanes: int) -> None:
    with denormal.use("ftz"):
        mod = _module(lanes)
    assert ("cvtneps2bf16" in str(mod)) == _HW
    x = _inputs()
    out = np.empty_like(x)
    half = np.empty(len(x), np.uint16)
    eng = Engine(mod, exports=["conv"])
    f = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 3, ctypes.c_int64)(eng.address("conv"))
    f(x.ctypes.data, out.ctypes.data, half.ctypes.data, len(x))
    want_round, want_half = _expected(x)
    np.testing.assert_array_equal(half, want_half)
    np.testing.assert_array_equal(out.view(np.uint32), want_round)


def test_ir_rounding_where_the_instruction_would_differ() -> None:
    """A loaded value may be denormal (the instruction reads it as zero), and the `ieee`
    mode keeps denormals: the IR rounding there; 4- and 32-lane vectors too."""
    b = ir.IRBuilder(ir.Function(new_module("t"), ir.FunctionType(VOID, [F32]), "f")
                     .append_basic_block())
    arg = b.function.args[0]
    with denormal.use("ftz"):
        assert not bf16_convert.usable(arg, ew.is_flushed(arg))
        for n in (4, 32):
            assert not bf16_convert.usable(ir.Constant(ir.VectorType(F32, n), None), True)
    with denormal.use("ieee"):
        assert not bf16_convert.usable(b.fmul(arg, arg), True)
    with denormal.use("ftz"):
        assert bf16_convert.usable(b.fmul(arg, arg), True) == _HW
