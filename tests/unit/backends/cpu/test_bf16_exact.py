"""bf16 roundings of values that hold a bf16 already are skipped (bf16_exact.py): x * 2^k of
a bf16 under FTZ, a max/min of bf16s, a row buffer of rounded values read back, the stored
bits of a rounded value. The bits do not change: the kernels' results equal those of the
same kernels compiled with every rounding kept, and the exact ops equal the interpreter's,
on special values (NaN payloads quiet and signaling, denormals, the denormal boundary,
overflow to inf, zeros of both signs), in both denormal modes, on 1 and 2 threads."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from llvmlite import ir

import xlapy
from xlapy import denormal
from xlapy.backends.cpu import bf16_exact, cache, flush_ftz
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.llvm_util import F32
from xlapy.types import ElementType as ET

_R, _C = 16, 256
_X, _V, _XB = f"tensor<{_R}x{_C}xf32>", f"tensor<{_R}xbf16>", f"tensor<{_R}x{_C}xbf16>"
# attention_bf16's softmax (its scores in f32, as the widened GEMM writes them) and exact ops.
_PROGRAM = f"""
func.func public @main(%x: {_X}) -> ({_XB}, {_V}, {_XB}, {_V}, {_XB}) {{
  %xb = stablehlo.convert %x : ({_X}) -> {_XB}
  %c = stablehlo.constant dense<1.250000e-01> : tensor<bf16>
  %cb = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<bf16>) -> {_XB}
  %s = stablehlo.multiply %xb, %cb : {_XB}
  %ninf = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %m0 = stablehlo.reduce(%s init: %ninf) applies stablehlo.maximum across dimensions = [1]
    : ({_XB}, tensor<bf16>) -> {_V}
  %nb = stablehlo.broadcast_in_dim %ninf, dims = [] : (tensor<bf16>) -> {_V}
  %m = stablehlo.maximum %nb, %m0 : {_V}
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : ({_V}) -> {_XB}
  %d = stablehlo.subtract %s, %mb : {_XB}
  %e = stablehlo.exponential %d : {_XB}
  %ef = stablehlo.convert %e : ({_XB}) -> {_X}
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%ef init: %z) applies stablehlo.add across dimensions = [1]
    : ({_X}, tensor<f32>) -> tensor<{_R}xf32>
  %sv = stablehlo.convert %sum : (tensor<{_R}xf32>) -> {_V}
  %sb = stablehlo.broadcast_in_dim %sv, dims = [0] : ({_V}) -> {_XB}
  %y = stablehlo.divide %e, %sb : {_XB}
  %four = stablehlo.constant dense<4.0> : tensor<bf16>
  %fb = stablehlo.broadcast_in_dim %four, dims = [] : (tensor<bf16>) -> {_XB}
  %big = stablehlo.multiply %s, %fb : {_XB}
  %nbig = stablehlo.negate %big : {_XB}
  %h = stablehlo.constant dense<0.5> : tensor<bf16>
  %hb = stablehlo.broadcast_in_dim %h, dims = [] : (tensor<bf16>) -> {_XB}
  %half = stablehlo.divide %nbig, %hb : {_XB}
  %mx = stablehlo.maximum %half, %s : {_XB}
  %pinf = stablehlo.constant dense<0x7F80> : tensor<bf16>
  %mn = stablehlo.reduce(%mx init: %pinf) applies stablehlo.minimum across dimensions = [1]
    : ({_XB}, tensor<bf16>) -> {_V}
  return %y, %m, %mx, %mn, %s : {_XB}, {_V}, {_XB}, {_V}, {_XB}
}}
"""


# ...and with the scores a bf16 input (a loaded bf16 may be a signaling NaN: x * 0.125 of it
# is quiet, so the product needs no rounding either).
_PROGRAM_BF16 = _PROGRAM.replace(f"%x: {_X}", f"%xb: {_XB}").replace(
    f"  %xb = stablehlo.convert %x : ({_X}) -> {_XB}\n", "")


def _scores() -> np.ndarray:
    """Rows of special f32 values: NaN payloads (quiet, signaling, both signs), denormals
    and the denormal boundary (times 0.125 under FTZ: zero), huge values (times -8: -inf),
    infinities, zeros of both signs, and plain rows; some rows hold no special value."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((_R, _C)) * 6).astype(np.float32)
    u = x.view(np.uint32)
    tiny = 2.0 ** -126
    specials = np.array([tiny, -tiny, tiny * 7.5, tiny * 9, -tiny * 8.25, 1e-40, -3e-39,
                         tiny * 1.9921875, -tiny * 1.0078125, tiny * 3.984375,
                         2.0 ** -120, 3e38, -3e38, 1e38, np.inf, -np.inf, 0.0, -0.0,
                         1.00390625, 1.01171875, -2.00390625], np.float32)
    for r in range(_R - 4):
        cols = rng.choice(_C, 12, replace=False)
        x[r, cols] = rng.choice(specials, 12)
    u[1, 3], u[2, 200], u[3, 17], u[4, 9] = 0x7FC0ABCD, 0x7F800123, 0xFF80F00F, 0xFFC00001
    x[5, :] = rng.choice(np.array([tiny, -tiny, 1e-40, -1e-41, 0.0, -0.0], np.float32), _C)
    x[6, :] = -0.0
    x[7, :] = -np.inf
    return x


def _bits(outs: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    return [np.asarray(o).view(np.uint16) for o in outs]


def _bf16_scores() -> np.ndarray:
    """_scores rounded to bf16, with signaling NaNs (payloads, both signs) planted."""
    with np.errstate(invalid="ignore"):  # (the NaN payloads' cast)
        x = _scores().astype(ml_dtypes.bfloat16)
    u = x.view(np.uint16)
    u[1, 5], u[2, 100], u[8, 0], u[9, 255] = 0x7F81, 0xFF85, 0x7F8F, 0xFFBF
    return x


def _compile(program: str, opts: dict[str, object]) -> Any:
    cache.clear_memory()
    return xlapy.compile(program, backend="cpu", options=opts)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("mode", ["ftz", "ieee"])
@pytest.mark.parametrize("program", ["f32", "bf16"])
def test_skipped_roundings_change_no_bit(program: str, mode: str, threads: int,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    text, x = (_PROGRAM, _scores()) if program == "f32" else (_PROGRAM_BF16, _bf16_scores())
    opts = {"denormal": mode, "num_threads": threads}
    fast = _compile(text, opts)
    got = _bits(fast(x))
    with monkeypatch.context() as m:  # every rounding kept (the code before bf16_exact)
        m.setattr(bf16_exact, "is_bf16", lambda *a, **k: False)
        m.setattr(bf16_exact, "widened", lambda *a, **k: False)
        slow = _compile(text, opts)
        want = _bits(slow(x))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert len(fast._exe.kernel_ir) < len(slow._exe.kernel_ir)  # roundings were skipped
    # The exact ops (no exp) are the interpreter's, bit for bit (a max of two NaNs may
    # keep the other's sign, as before: NaN lanes are compared as NaN).
    ref = _bits(xlapy.compile(text, backend="interpreter", options={"denormal": mode})(x))
    for k in (1, 2, 3, 4):
        nan = (ref[k] & 0x7FFF) > 0x7F80
        np.testing.assert_array_equal(got[k][~nan], ref[k][~nan])
        assert ((got[k][nan] & 0x7FFF) > 0x7F80).all()


def _builder() -> tuple[ir.IRBuilder, ir.Value]:
    vt = ir.VectorType(F32, 8)
    fn = ir.Function(ir.Module(), ir.FunctionType(vt, [vt]), "f")
    return ir.IRBuilder(fn.append_basic_block()), fn.args[0]


def _splat(v: float) -> ir.Constant:
    return ir.Constant(ir.VectorType(F32, 8), [v] * 8)


def test_what_is_known_to_be_a_bf16() -> None:
    b, arg = _builder()
    r = ew.round_to(b, arg, ET.BF16)
    assert not bf16_exact.is_bf16(arg) and bf16_exact.is_bf16(r)
    assert ew.round_to(b, r, ET.BF16) is r  # rounded once only
    assert bf16_exact.is_bf16(_splat(0.125)) and bf16_exact.is_bf16(_splat(-3.0))
    assert not bf16_exact.is_bf16(_splat(1.0 + 2.0 ** -9))
    assert not bf16_exact.is_bf16(_splat(float("nan")))
    assert bf16_exact.is_bf16(b.fneg(r))
    assert bf16_exact.is_bf16(ew.select(b, b.fcmp_ordered("<", r, arg), r, _splat(2.0)))
    assert not bf16_exact.is_bf16(ew.select(b, b.fcmp_ordered("<", r, arg), r, arg))
    assert not bf16_exact.is_bf16(b.fadd(r, r))  # arithmetic rounds


@pytest.mark.parametrize("mode", ["ftz", "ieee"])
def test_a_product_by_a_power_of_two_only_under_ftz(mode: str) -> None:
    b, arg = _builder()
    r = ew.round_to(b, arg, ET.BF16)
    with denormal.use(mode), flush_ftz.in_kernel():
        under = [bf16_exact.is_bf16(b.fmul(r, _splat(c))) for c in (0.125, -4.0, 2.0 ** 100)]
        other = [bf16_exact.is_bf16(b.fmul(r, _splat(c))) for c in (0.1, 3.0, 0.0)]
        div = bf16_exact.is_bf16(b.fdiv(r, _splat(0.5)))
        rdiv = bf16_exact.is_bf16(b.fdiv(_splat(0.5), r))
    assert under == [mode == "ftz"] * 3 and div == (mode == "ftz")
    assert other == [False] * 3 and not rdiv
    assert not bf16_exact.is_bf16(b.fmul(r, _splat(0.125)))  # outside a kernel: FTZ unknown


@pytest.mark.parametrize("mode", ["ftz", "ieee"])
def test_a_loaded_bf16_times_a_power_of_two_is_one(mode: str) -> None:
    """A widened bf16 (from_storage) may be a signaling NaN, so it is no `is_bf16` itself;
    its product by 2^k under FTZ is (the product quiets the NaN)."""
    vt = ir.VectorType(ir.IntType(16), 8)
    fn = ir.Function(ir.Module(), ir.FunctionType(vt, [vt]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    x = ew.from_storage(b, fn.args[0], ET.BF16)
    assert bf16_exact.widened(x) and not bf16_exact.is_bf16(x)
    assert not bf16_exact.widened(b.fadd(x, x))
    with denormal.use(mode), flush_ftz.in_kernel():
        assert bf16_exact.is_bf16(b.fmul(x, _splat(0.125))) == (mode == "ftz")
        assert bf16_exact.is_bf16(b.fdiv(x, _splat(2.0))) == (mode == "ftz")
        assert not bf16_exact.is_bf16(b.fmul(x, _splat(3.0)))
        f16 = ew.from_storage(b, fn.args[0], ET.F16)  # (an fpext: not a bf16's bits)
        assert not bf16_exact.is_bf16(b.fmul(f16, _splat(0.125)))


def test_the_stored_bits_of_a_bf16_are_its_upper_half() -> None:
    b, arg = _builder()
    r = ew.round_to(b, arg, ET.BF16)
    bits = ew.to_storage(b, r, ET.BF16)
    assert bits.opname == "trunc" and bits.operands[0].opname == "lshr"
