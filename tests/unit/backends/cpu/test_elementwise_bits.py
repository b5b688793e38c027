"""bitcast_convert (same width) and reduce_precision compiled in kernels, and the f8 /
sub-byte integer types (elementwise_bits.py): bit for bit against the interpreter,
exhaustive over the 16-bit and smaller types, never through the interpreter fallback."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.backends.cpu.util import module, op, run_both, values
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import elementwise_libm as libm
from xlapy.ops.base import OPS
from xlapy.ops.elementwise_convert import BitcastConvertAttrs, ConvertAttrs, ReducePrecisionAttrs
from xlapy.types import ElementType as ET
from xlapy.types import Shape

SAME_WIDTH = {16: [ET.S16, ET.U16, ET.F16, ET.BF16], 32: [ET.S32, ET.U32, ET.F32],
              64: [ET.S64, ET.U64, ET.F64], 8: [ET.S8, ET.U8]}
#: (exponent_bits, mantissa_bits): the IEEE and f8 layouts, the smallest, and no-ops.
REDUCTIONS = [(5, 10), (8, 7), (8, 23), (4, 3), (5, 2), (11, 52), (2, 1), (1, 0), (3, 4)]


def _inputs(t: ET) -> np.ndarray:
    """Every bit pattern of a 16/8-bit type; random values and patterns otherwise."""
    if t.bits <= 16:
        return np.arange(1 << t.bits, dtype=f"u{t.bits // 8}").view(t.dtype)
    rng = np.random.default_rng(21)
    x = values(t, 4096, rng)
    u = f"u{t.bits // 8}"
    raw = rng.integers(0, 1 << 62, 4096, dtype=np.int64).astype(np.uint64) * np.uint64(3)
    return np.concatenate([x.view(u), raw.astype(u)]).view(t.dtype)


def _quiet_16bit_snan(x: np.ndarray, t: ET) -> np.ndarray:
    """Where the bits are a NaN whose payload kernels do not keep (their compute type is
    f32, see elementwise_bits.py): signaling NaNs of f16/bf16, any NaN of the f8 types with
    several NaN codes."""
    if t in (ET.F8E5M2, ET.F8E4M3, ET.F8E3M4):
        with np.errstate(invalid="ignore"):
            return np.isnan(x.view(t.dtype).astype(np.float32))
    if t not in (ET.F16, ET.BF16):
        return np.zeros(x.shape, bool)
    u = x.view(np.uint16) & np.uint16(0x7FFF)
    e_mask, q_bit = (0x7C00, 0x0200) if t is ET.F16 else (0x7F80, 0x0040)
    return ((u & e_mask) == e_mask) & ((u & (e_mask ^ 0x7FFF)) != 0) & ((u & q_bit) == 0)


def _check(got: np.ndarray, ref: np.ndarray, x: np.ndarray, s: ET, t: ET, what: str) -> None:
    assert got.dtype == ref.dtype and got.shape == ref.shape, what
    u = f"u{ref.itemsize}"
    snan = _quiet_16bit_snan(ref, t)
    bad = (got.view(u) != ref.view(u)) & ~snan
    assert not bad.any(), (f"{what}: {int(bad.sum())} differ; first input bits "
                           f"{x[bad][0].view(f'u{x.itemsize}'):#x}: ours "
                           f"{got[bad][0].view(u):#x}, interpreter {ref[bad][0].view(u):#x}")
    if snan.any() and t.is_float:  # still a NaN
        with np.errstate(invalid="ignore"):
            assert np.isnan(got[snan].astype(np.float32)).all(), what


@pytest.mark.parametrize("s", [t for ts in SAME_WIDTH.values() for t in ts], ids=str)
def test_bitcast_convert_same_width(s: ET) -> None:
    targets = SAME_WIDTH[s.bits]
    x = _inputs(s)
    mod = module([Shape.array(s, x.shape)],
                 lambda c, p: [op(c, "bitcast_convert", p, BitcastConvertAttrs(t))
                               for t in targets])
    with np.errstate(all="ignore"):
        ref, got, exe = run_both(mod, [x])
    assert not exe.fallbacks(), exe.explain()
    for t, r, g in zip(targets, ref, got):
        _check(g, r, x, s, t, f"bitcast {s}->{t}")


@pytest.mark.parametrize("t", [ET.F16, ET.BF16, ET.F32, ET.F64], ids=str)
def test_reduce_precision_bit_exact(t: ET) -> None:
    x = _inputs(t)
    mod = module([Shape.array(t, x.shape)],
                 lambda c, p: [op(c, "reduce_precision", p, ReducePrecisionAttrs(e, m))
                               for e, m in REDUCTIONS])
    with np.errstate(all="ignore"):
        ref, got, exe = run_both(mod, [x])
    assert not exe.fallbacks(), exe.explain()
    for (e, m), r, g in zip(REDUCTIONS, ref, got):
        _check(g, r, x, t, t, f"reduce_precision {t} e{e}m{m}")


@pytest.mark.parametrize("t", [ET.F16, ET.BF16, ET.F32, ET.F64], ids=str)
def test_reduce_precision_nan_without_mantissa_is_signed_inf(t: ET) -> None:
    """The spec truncates the mantissa: with mantissa_bits = 0 a NaN has nowhere to stay a
    NaN and becomes an infinity of its sign (conformance reduce_precision.mlir:10); with
    mantissa bits it stays the input NaN. Both backends alike (XLA CPU keeps the NaN)."""
    x = np.array([np.nan, -np.nan, 1.5, np.inf], np.float64).astype(t.dtype)
    mod = module([Shape.array(t, x.shape)],
                 lambda c, p: [op(c, "reduce_precision", p, ReducePrecisionAttrs(e, m))
                               for e, m in [(5, 0), (1, 0), (5, 2)]])
    ref, got, exe = run_both(mod, [x])
    assert not exe.fallbacks(), exe.explain()
    for r in (ref, got):
        for out in r[:2]:
            o = out.astype(np.float64)
            assert np.isposinf(o[0]) and np.isneginf(o[1]), o
        assert np.isnan(r[2].astype(np.float64)[:2]).all()


OTHER_WIDTHS = [(s, t) for s in [ET.U8, ET.S8, ET.S4, ET.U4, ET.F16, ET.BF16, ET.S16, ET.F32,
                                   ET.U32, ET.F64, ET.S64, ET.F8E4M3FN, ET.F8E5M2]
                for t in [ET.U8, ET.S4, ET.F16, ET.BF16, ET.U16, ET.F32, ET.S32, ET.F64, ET.U64,
                          ET.F8E5M2]
                if s.bits != t.bits and max(s.bits, t.bits) % min(s.bits, t.bits) == 0]


@pytest.mark.parametrize("s,t", OTHER_WIDTHS, ids=str)
def test_bitcast_convert_other_widths(s: ET, t: ET) -> None:
    """A narrower result splits each element along a new minor dimension, a wider one
    joins the operand's minor dimension (little-endian), in scalar kernels."""
    k = max(s.bits, t.bits) // min(s.bits, t.bits)
    shape = (5, 96) if s.bits > t.bits else (5, 96, k)
    rng = np.random.default_rng(23)
    if s.bits < 8:
        x = _every_value(s)[rng.integers(0, 1 << s.bits, int(np.prod(shape)))]
    else:
        raw = rng.integers(0, 1 << 62, int(np.prod(shape)), dtype=np.int64).astype(np.uint64)
        raw = raw * np.uint64(7) if s.bits == 64 else raw % np.uint64(1 << s.bits)
        x = raw.astype(f"u{s.bits // 8}").view(s.dtype)
    x = x.reshape(shape)
    if s in (ET.F8E5M2, ET.F8E4M3, ET.F8E3M4):  # their NaN payloads come back canonical
        with np.errstate(invalid="ignore"):
            x[np.isnan(x.astype(np.float32))] = np.float32(np.nan).astype(s.dtype)
    mod = module([Shape.array(s, shape)],
                 lambda c, p: op(c, "bitcast_convert", p, BitcastConvertAttrs(t)))
    with np.errstate(all="ignore"):
        ref, got, exe = run_both(mod, [x])
    assert not exe.fallbacks(), exe.explain()
    # (the message shows the interpreter's bits where they differ)
    _check(got.reshape(-1), ref.reshape(-1), ref.reshape(-1), t, t, f"bitcast {s}->{t}")


# ---- f8 and sub-byte integers ------------------------------------------------------------------
SMALL = sorted(ew.F8 | ew.SMALL_INTS, key=str)


def _every_value(t: ET) -> np.ndarray:
    """Every value of a one-byte (or sub-byte) type, once (f4/f6: the codes with the upper
    bits of the byte zero, as stored)."""
    if t.is_float:
        return np.arange(1 << t.bits, dtype=np.uint8).view(t.dtype)
    lo = -(1 << (t.bits - 1)) if t.is_signed else 0
    return np.arange(lo, lo + (1 << t.bits)).astype(t.dtype)


def _same_values(got: np.ndarray, ref: np.ndarray, what: str, inexact: bool = False) -> None:
    """Bit-identical; NaN matches NaN. `inexact` (polynomial ops computed in f32): within one
    ulp of the narrow type, and the sign of a zero free (math_poly's sin(-0) is +0)."""
    assert got.dtype == ref.dtype and got.shape == ref.shape, what
    if ref.dtype.kind in "biu" or not ew_float(ref):
        bad = got != ref
    else:
        with np.errstate(all="ignore"):
            g, r = got.astype(np.float64), ref.astype(np.float64)
        nan = np.isnan(g) & np.isnan(r)
        if inexact:
            spacing = np.abs(np.nextafter(r.astype(ref.dtype), np.inf).astype(np.float64) - r)
            bad = ~(nan | (g == r) | (np.abs(g - r) <= spacing))
        else:
            bad = ~(nan | ((g == r) & (np.signbit(g) == np.signbit(r))))
    if np.any(bad):
        i = int(np.argmax(bad))
        raise AssertionError(f"{what}: {int(bad.sum())} differ; first at {i}: ours "
                             f"{got[i]!r}, interpreter {ref[i]!r}")


def ew_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f" or "float" in str(a.dtype)


@pytest.mark.parametrize("t", SMALL, ids=str)
def test_small_types_every_op_on_every_pair(t: ET) -> None:
    """Every unary op on every value and every binary op on every pair of values, bit for
    bit (the polynomial ops within one ulp), all in kernels."""
    x = _every_value(t)
    xx, yy = np.repeat(x, x.size), np.tile(x, x.size)
    unary = [n for n, (ts, _) in sorted(ew.TABLE.items()) if t in ts and OPS[n].arity == 1]
    binary = sorted({n for n, (ts, _) in ew.TABLE.items() if t in ts and OPS[n].arity == 2}
                    | {n for n in libm.TABLE if libm.supports(n, t) and OPS[n].arity == 2})
    unary += [n for n in libm.TABLE if libm.supports(n, t) and OPS[n].arity == 1]
    sh = Shape.array(t, xx.shape)
    mod = module([sh, sh], lambda c, p: [op(c, n, [p[0]]) for n in unary]
                 + [op(c, n, p) for n in binary])
    with np.errstate(all="ignore"):
        ref, got, exe = run_both(mod, [xx, yy])
    assert not exe.fallbacks(), exe.explain()
    for n, r, g in zip(unary + binary, ref, got):
        _same_values(g, r, f"{n} {t}", inexact=n in ew.INEXACT)


def _into_inputs(s: ET) -> np.ndarray:
    """Sources for conversions into the small types: every 8/16-bit pattern; for f32/f64
    every f8 value, the midpoints between neighbours (ties) and random patterns."""
    if s.bits <= 16 and s is not ET.PRED:
        if s.is_float or s.bits == 16 or s.bits == 8:
            return np.arange(1 << s.bits, dtype=f"u{max(s.bits, 8) // 8}").view(s.dtype) \
                if s.bits >= 8 else _every_value(s)
        return _every_value(s)
    if s is ET.PRED:
        return np.array([False, True])
    rng = np.random.default_rng(22)
    with np.errstate(all="ignore"):
        vals = np.concatenate([_every_value(t).astype(np.float64) for t in sorted(ew.F8,
                                                                                 key=str)])
        vals = np.unique(vals[np.isfinite(vals)])
        mids = (vals[:-1] + vals[1:]) / 2
        nb = s.bits
        raw = rng.integers(0, 1 << 62, 8192, dtype=np.int64).astype(np.uint64)
        raw = (raw % np.uint64(1 << nb)) if nb < 64 else raw * np.uint64(3)
        if s.is_integer:
            return np.concatenate([raw.astype(f"u{nb // 8}").view(s.dtype),
                                   np.arange(-300, 300).astype(s.dtype)])
        extra = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1e30, -1e30, 1e-30])
        return np.concatenate([vals, mids, -mids, extra, raw.astype(f"u{nb // 8}")
                               .view(s.dtype).astype(np.float64)]).astype(s.dtype)


@pytest.mark.parametrize("s", sorted(ew.SUPPORTED, key=str), ids=str)
def test_convert_into_and_out_of_small_types(s: ET) -> None:
    """Every conversion pair with a small type on either side, bit for bit."""
    targets = [t for t in sorted(ew.SUPPORTED, key=str) if t != s
               and (t in SMALL or s in SMALL)]
    x = _every_value(s) if s in SMALL else _into_inputs(s)
    mod = module([Shape.array(s, x.shape)],
                 lambda c, p: [op(c, "convert", p, ConvertAttrs(t)) for t in targets])
    with np.errstate(all="ignore"):
        ref, got, exe = run_both(mod, [x])
    assert not exe.fallbacks(), exe.explain()
    for t, r, g in zip(targets, ref, got):
        _same_values(g, r, f"convert {s}->{t}")


@pytest.mark.parametrize("t", sorted(ew.F8, key=str), ids=str)
def test_f8_reduce_precision_and_bitcast(t: ET) -> None:
    """(f4/f6: bitcast to u4 for f4; f6 has no same-width integer.)"""
    x = _every_value(t)
    to = {8: ET.U8, 4: ET.U4}.get(t.bits)
    mod = module([Shape.array(t, x.shape)],
                 lambda c, p: [op(c, "reduce_precision", p, ReducePrecisionAttrs(e, m))
                               for e, m in REDUCTIONS]
                 + [op(c, "bitcast_convert", p, BitcastConvertAttrs(to or ET.U8))
                    if to else p[0]])
    with np.errstate(all="ignore"):
        ref, got, exe = run_both(mod, [x])
    assert not exe.fallbacks(), exe.explain()
    *reduced, (bits_ref, bits_got) = list(zip(ref, got))
    for (e, m), (r, g) in zip(REDUCTIONS, reduced):
        _same_values(g, r, f"e{e}m{m} {t}")
    # The IEEE-like f8 types have several NaN codes; kernels keep NaN and its sign only
    # (ml_dtypes' decoding, see elementwise_bits.py).
    with np.errstate(invalid="ignore"):
        nan = np.isnan(x.astype(np.float32))
    if to is None:
        return
    _same_values(bits_got[~nan], bits_ref[~nan], f"bitcast {t}")
    back = bits_got[nan].view(t.dtype)
    assert np.isnan(back.astype(np.float32)).all()
    assert (np.signbit(back.astype(np.float32)) == np.signbit(x[nan].astype(np.float32))).all()


@pytest.mark.parametrize("t", [ET.S2, ET.S4], ids=str)
def test_signed_sub_byte_popcnt_is_native(t: ET) -> None:
    """s2/s4 popcnt: the bits of the 8-bit sign extension, wrapped to the type (the
    interpreter's definition, XLA CPU's), now in the kernels; every value, with a long
    enough array for the vector path."""
    x = np.tile(_every_value(t), 16)
    mod = module([Shape.array(t, x.shape)], lambda c, p: op(c, "popcnt", p))
    ref, got, exe = run_both(mod, [x])
    np.testing.assert_array_equal(np.asarray(got).view(np.int8), np.asarray(ref).view(np.int8))
    assert not exe.fallbacks()


@pytest.mark.parametrize("s,t,shape", [(ET.PRED, ET.S64, (3, 64)), (ET.F64, ET.PRED, (3,)),
                                       (ET.PRED, ET.U8, (4, 8)), (ET.U16, ET.PRED, (5,))],
                         ids=str)
def test_bitcast_convert_pred_is_one_bit(s: ET, t: ET, shape: tuple[int, ...]) -> None:
    """The spec's num_bits(i1) = 1: pred[64] <-> s64, pred[8] <-> u8 (XLA rejects these)."""
    rng = np.random.default_rng(24)
    x = rng.random(shape) < 0.5 if s is ET.PRED else \
        rng.integers(0, 1 << 16, shape).astype(np.uint16) if s is ET.U16 else \
        rng.standard_normal(shape).astype(s.dtype)
    mod = module([Shape.array(s, shape)],
                 lambda c, p: op(c, "bitcast_convert", p, BitcastConvertAttrs(t)))
    ref, got, exe = run_both(mod, [x])
    assert not exe.fallbacks(), exe.explain()
    np.testing.assert_array_equal(got, ref)
