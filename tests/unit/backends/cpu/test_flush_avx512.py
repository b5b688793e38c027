"""flush_avx512.py: the flush of loaded floats through vfpclass on AVX-512 gives the bits of
the and/compare/select flush - the interpreter's - for denormals of both signs, the
smallest normal, zeros, infinities and NaN payloads, f32 and f64, in the vector body and
the scalar rest (which keeps the compare)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import target

TEXT = """
func.func @main(%x: tensor<{n}x{t}>) -> tensor<{n}x{t}> {{
  %one = stablehlo.constant dense<1.0> : tensor<{n}x{t}>
  %y = stablehlo.multiply %x, %one : tensor<{n}x{t}>
  return %y : tensor<{n}x{t}>
}}
"""


@pytest.mark.parametrize(("t", "dt", "it"), [("f32", np.float32, np.uint32),
                                             ("f64", np.float64, np.uint64)])
def test_flush_bits(t: str, dt: type, it: type) -> None:
    info = np.finfo(dt)
    specials = np.array([info.smallest_subnormal, -info.smallest_subnormal,
                         info.tiny * (1 - info.eps), -info.tiny * (1 - info.eps), info.tiny,
                         -info.tiny, 0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.0,
                         info.max], dt)
    nan_payload = np.array([0x7FC00123 if it is np.uint32 else 0x7FF8000000000123], it)
    x = np.concatenate([specials, nan_payload.view(dt)] * 5 + [specials[:3]])  # + a rest
    text = TEXT.format(n=x.size, t=t)
    got = xlapy.compile(text, backend="cpu")(x)
    want = xlapy.compile(text, backend="interpreter")(x)
    assert got.view(it).tolist() == want.view(it).tolist()
    assert (got[:4] == 0).all() and np.signbit(got[1]) and np.signbit(got[3])


def test_vfpclass_is_used_on_avx512() -> None:
    from llvmlite import ir

    from xlapy.backends.cpu.flush_avx512 import is_denormal
    from xlapy.backends.cpu.llvm_util import F32

    b = ir.IRBuilder(ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), [
        ir.VectorType(F32, 16), F32]), "f").append_basic_block())
    vec, scalar = b.function.args
    assert (is_denormal(b, vec) is not None) == target.current().has("avx512f")
    assert is_denormal(b, scalar) is None
