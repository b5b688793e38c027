"""elementwise.round_to on bf16 (the per-op rounding of bf16 kernels) masks the rounded bits in
32-bit lanes - no narrowing to i16 and widening back, which vector kernels (no instcombine)
would keep - and equals ml_dtypes' round to nearest even, NaN kept quiet, bit for bit."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.llvm_util import F32, I64, VOID, Engine, for_range, new_module
from xlapy.types import ElementType as ET

_W = 8


def _module() -> ir.Module:
    """void round_all(float* x, float* out, i64 n): out = round_to(x, bf16), 8 lanes."""
    mod = new_module("bf16_round_test")
    vt = ir.VectorType(F32, _W)
    fn = ir.Function(mod, ir.FunctionType(VOID, [F32.as_pointer(), F32.as_pointer(), I64]),
                     name="round_all")
    x, out, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    with for_range(b, ir.Constant(I64, 0), n, step=_W) as i:
        v = b.load(b.bitcast(b.gep(x, [i]), vt.as_pointer()), align=4)
        b.store(ew.round_to(b, v, ET.BF16), b.bitcast(b.gep(out, [i]), vt.as_pointer()),
                align=4)
    b.ret_void()
    return mod


def test_bf16_round_is_masked_and_exact() -> None:
    mod = _module()
    assert "trunc" not in str(mod) and "zext" not in str(mod)
    rng = np.random.default_rng(0)
    bits = np.concatenate([rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint64),
                           [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                            0x7F800001, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0x3F808000,
                            0x3F818000, 0x3F807FFF, 0x7F7F8000]]).astype(np.uint32)
    bits = np.concatenate([bits, np.zeros((-len(bits)) % _W, np.uint32)])
    x = bits.view(np.float32)
    out = np.empty_like(x)
    eng = Engine(mod, exports=["round_all"])
    f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        eng.address("round_all"))
    f(x.ctypes.data, out.ctypes.data, len(x))
    with np.errstate(all="ignore"):
        want = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    nan = np.isnan(want)
    assert (out.view(np.uint32)[~nan] == want.view(np.uint32)[~nan]).all()
    # NaN: the quiet NaN of the same sign and top mantissa bits (to_storage's rule)
    assert (out.view(np.uint32)[nan] == ((bits[nan] | 0x400000) & 0xFFFF0000)).all()
