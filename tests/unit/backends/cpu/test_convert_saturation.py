"""Float -> integer converts in vector kernels (elementwise_convert._to_int_saturated): XLA
CPU's saturating conversion (NaN -> 0, out of range -> the type's min or max) exactly as the
interpreter computes it, for every float and integer type, at every range boundary, in
lanes and in the scalar tail."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy

FLOATS = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}
INTS = ["i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64"]


def _values(dtype: type) -> np.ndarray:
    """Specials, each power-of-two range edge with its neighbours in `dtype`, halves."""
    v = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 1e-40, -1e-40]
    for k in (7, 8, 15, 16, 31, 32, 63, 64):
        for e in (2.0 ** k, -(2.0 ** k)):
            v += [e, e - 1, e + 1, e - 0.5]
    x = np.array(v, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        edge = x.astype(dtype)
        up = np.nextafter(edge.astype(np.float64), np.inf).astype(dtype)
        down = np.nextafter(edge.astype(np.float64), -np.inf).astype(dtype)
    rng = np.random.default_rng(3)
    rand = (rng.standard_normal(64) * 10.0 ** rng.integers(0, 20, 64)).astype(dtype)
    return np.concatenate([edge, up, down, rand, edge[:7]])  # 7: a scalar tail too


@pytest.mark.parametrize("t", INTS)
@pytest.mark.parametrize("s", list(FLOATS))
def test_saturating_converts_match_the_interpreter(s: str, t: str) -> None:
    x = _values(FLOATS[s])
    n = x.shape[0]
    text = f"""
func.func @main(%x: tensor<{n}x{s}>) -> tensor<{n}x{t}> {{
  %y = stablehlo.convert %x : (tensor<{n}x{s}>) -> tensor<{n}x{t}>
  return %y : tensor<{n}x{t}>
}}
"""
    want = np.asarray(xlapy.compile(text, "interpreter")(x))
    got = np.asarray(xlapy.compile(text, "cpu")(x))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("t", "selects"), [("ui8", 0), ("ui16", 0), ("i8", 1), ("i16", 1),
                                             ("ui32", 1), ("i32", 2)])
def test_the_clamp_alone_where_it_saturates(t: str, selects: int) -> None:
    """Below 2^24 the largest f32 under 2^bits truncates to the maximum and maxnum(NaN, 0)
    is the unsigned 0: no select for them (jnp.clip(x * 255, 0, 255).astype(uint8) on AVX2:
    0.35-0.41 -> 0.17 ms, XLA 0.24-0.36); the wide types keep the range select, the signed
    ones the NaN select."""
    from llvmlite import ir

    from xlapy.backends.cpu import elementwise_convert
    from xlapy.backends.cpu.llvm_util import F32
    from xlapy.types import ElementType as ET

    et = {"ui8": ET.U8, "ui16": ET.U16, "i8": ET.S8, "i16": ET.S16, "ui32": ET.U32,
          "i32": ET.S32}[t]
    vt = ir.VectorType(F32, 8)
    mod = ir.Module()
    fn = ir.Function(mod, ir.FunctionType(ir.VectorType(ir.IntType(et.bits), 8), [vt]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(elementwise_convert._to_int_saturated(b, fn.args[0], et,
                                                ir.VectorType(ir.IntType(et.bits), 8)))
    assert str(mod).count(" select ") == selects
