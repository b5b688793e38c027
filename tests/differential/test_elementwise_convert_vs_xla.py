"""convert, bitcast_convert and reduce_precision vs XLA's CPU backend, bit-exact.

XLA's side is the StableHLO op itself compiled by jax's CPU backend (jax's own
convert_element_type rewrites pred and complex conversions, so it would not test XLA's
convert); reduce_precision also goes through `jax.lax.reduce_precision`. Every result is
compared bitwise (NaN payloads aside for convert, signed zeros included).
"""

from __future__ import annotations

import zlib
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from tests.differential.compare import assert_same, jax_x64
from tests.differential.elementwise_ref import (
    COMPLEX_TYPES,
    FLOAT_TYPES,
    INT_TYPES,
    E,
    ours,
    stablehlo,
    values,
)
from xlapy.ops.elementwise_convert import (
    BitcastConvertAttrs,
    ConvertAttrs,
    ReducePrecisionAttrs,
)
from xlapy.types import ElementType

jax = jax_x64()
ALL = [E.PRED] + INT_TYPES + FLOAT_TYPES + COMPLEX_TYPES


def _edges(s: ElementType) -> list[Any]:
    """Values at the rounding/saturation boundaries of every target type."""
    if s.is_pred:
        return [True, False]
    if s.is_integer:
        return [0, 1, -1, 127, -128, 255, 256, 2**15, -(2**15) - 1, 2**24 + 1, 2**31 - 1,
                -(2**31), 2**32 - 1, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1, 7, -8, 15]
    return [0.5, 1.5, 2.5, -0.5, -1.5, 127.5, 128.0, -128.5, -129.0, 255.5, 256.0, -1.0,
            -0.99, 65504.0, 65519.0, 65520.0, 448.0, 464.0, 57344.0, 61440.0, 2.0**31,
            -(2.0**31), 2.0**31 - 128, 2.0**32, 2.0**63, -(2.0**63), 2.0**64, 1e20, -1e20,
            1 + 2.0**-8, 1 + 3 * 2.0**-8, 1 + 2.0**-11, 1 + 2.0**-24, 1 + 2.0**-53,
            6e-8, 3e-8, 2.0**-14, 2.0**-15, 1e-39, -1e-39, 3e38, 3.5e38, 1e300, -1e300,
            1.5e-45, 5e-324, 7.5, -8.5, 15.5, 16.0, 2.0**-126, 2.0**-127]


def _input(s: ElementType, rng: np.random.Generator) -> np.ndarray:
    """Random values of `s` (with its own edges) plus every boundary it can hold."""
    x = values(s, 64, rng)
    with np.errstate(all="ignore"):
        if s.is_integer:
            info = ml_dtypes.iinfo(s.dtype)
            e = np.array([v for v in _edges(s) if info.min <= v <= info.max],
                         dtype=object).astype(np.int64 if info.min < 0 else np.uint64)
            extra = e.astype(s.dtype)
        elif s.is_complex:
            e = np.array(_edges(E.F64))
            extra = (e + 1j * np.roll(e, 1)).astype(s.dtype)
        else:
            extra = np.array(_edges(s)).astype(s.dtype)
    return np.concatenate([x, extra])


def _bits(a: np.ndarray) -> np.ndarray:
    """Bit patterns of float arrays (so that NaN payloads and signed zeros compare)."""
    if a.dtype.kind == "c":
        a = a.view(np.float32 if a.dtype == np.complex64 else np.float64)
    if a.dtype.kind == "f" or a.dtype.name.startswith(("bfloat", "float8")):
        return a.view(np.dtype(f"uint{8 * a.dtype.itemsize}"))
    return a


def _same_floats(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Exact values, NaN == NaN, and equal sign bits on non-NaN values."""
    assert_same(got, want, what=what)
    if got.dtype.kind == "c":
        got, want = (a.view(np.float32 if a.dtype == np.complex64 else np.float64)
                     for a in (got, want))
    if got.dtype.kind == "f" or got.dtype.name.startswith(("bfloat", "float8")):
        g, w = got.astype(np.float64), want.astype(np.float64)
        ok = np.isnan(w) | (np.signbit(g) == np.signbit(w))
        assert ok.all(), f"{what}: sign differs at {np.flatnonzero(~ok)[:5]}: " \
                         f"ours {got[~ok][:5]} XLA {want[~ok][:5]}"


# ---- convert ------------------------------------------------------------------------------------
@pytest.mark.parametrize("s", ALL, ids=[t.value for t in ALL])
def test_convert_every_pair(s: ElementType) -> None:
    """`s` to every element type: NaN/inf/out-of-range saturation, rounding, denormals."""
    rng = np.random.default_rng(zlib.crc32(s.value.encode()))
    x = _input(s, rng)
    for t in ALL:
        if t == s:
            continue
        got = ours("convert", [x], ConvertAttrs(t))
        want = stablehlo("convert", [x], (t, x.shape))
        _same_floats(got, want, f"convert {s.value} -> {t.value}")


# ---- bitcast_convert ----------------------------------------------------------------------------
_SAME_WIDTH = [[E.S8, E.U8, E.F8E4M3FN, E.F8E5M2], [E.S16, E.U16, E.F16, E.BF16],
               [E.S32, E.U32, E.F32], [E.S64, E.U64, E.F64]]
_BITCASTS = [(s, t) for group in _SAME_WIDTH for s in group for t in group if s != t] + [
    (E.F32, E.U8), (E.U8, E.F32), (E.U8, E.F16), (E.F16, E.S8), (E.S64, E.S16),
    (E.S16, E.S64), (E.F64, E.F32), (E.F32, E.F64), (E.U8, E.F64), (E.F64, E.BF16),
    (E.BF16, E.U64), (E.U32, E.F16), (E.F8E5M2, E.U16)]


def _raw(t: ElementType, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Arbitrary bit patterns of type `t` (NaNs, denormals and all)."""
    n = int(np.prod(shape)) * t.bits // 8
    return rng.integers(0, 256, n, dtype=np.uint8).view(t.dtype).reshape(shape)


@pytest.mark.parametrize("s,t", _BITCASTS, ids=[f"{s.value}-{t.value}" for s, t in _BITCASTS])
def test_bitcast_convert(s: ElementType, t: ElementType) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{s.value}{t.value}".encode()))
    shape: tuple[int, ...] = (3, 5)
    if t.bits > s.bits:
        shape = (*shape, t.bits // s.bits)
    x = _raw(s, shape, rng)
    got = ours("bitcast_convert", [x], BitcastConvertAttrs(t))
    out_shape = shape[:-1] if t.bits > s.bits else \
        (*shape, s.bits // t.bits) if t.bits < s.bits else shape
    want = stablehlo("bitcast_convert", [x], (t, out_shape))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"bitcast {s} -> {t}")


@pytest.mark.parametrize("t", COMPLEX_TYPES, ids=[t.value for t in COMPLEX_TYPES])
def test_bitcast_convert_complex_same_type(t: ElementType) -> None:
    rng = np.random.default_rng(5)
    x = _raw(t, (4, 2), rng)
    got = ours("bitcast_convert", [x], BitcastConvertAttrs(t))
    np.testing.assert_array_equal(_bits(got), _bits(stablehlo("bitcast_convert", [x],
                                                               (t, x.shape))))


# ---- reduce_precision ---------------------------------------------------------------------------
_RP_BITS = [(8, 7), (5, 10), (5, 2), (4, 3), (5, 0), (1, 0), (2, 1), (3, 4), (8, 23),
            (11, 52), (11, 3), (15, 20), (6, 40), (10, 9)]
_RP_TYPES = [E.F16, E.BF16, E.F32, E.F64, E.F8E4M3FN, E.F8E5M2]


@pytest.mark.parametrize("t", _RP_TYPES, ids=[t.value for t in _RP_TYPES])
def test_reduce_precision(t: ElementType) -> None:
    """NaN/inf/denormal/overflow/ties, against stablehlo.reduce_precision and jax.lax."""
    rng = np.random.default_rng(zlib.crc32(f"rp{t.value}".encode()))
    x = np.concatenate([_input(t, rng), _raw(t, (64,), rng)])
    for e, m in _RP_BITS:
        got = ours("reduce_precision", [x], ReducePrecisionAttrs(e, m))
        want = stablehlo("reduce_precision", [x], (t, x.shape),
                         f"{{exponent_bits = {e} : i32, mantissa_bits = {m} : i32}}")
        if m == 0:
            # The one place xlapy follows the spec against XLA CPU: a NaN reduced to no
            # mantissa bits is an infinity of its sign (the spec's truncation, checked by
            # the conformance test reduce_precision.mlir:10); XLA CPU keeps the NaN.
            nan = np.isnan(x.astype(np.float64))
            g = got[nan].astype(np.float64)
            if t in (E.F8E4M3FN,):  # no infinity: the inf converts back to NaN
                assert np.isnan(g).all()
            else:
                assert np.isinf(g).all() and (np.signbit(g) == np.signbit(
                    x[nan].astype(np.float64))).all(), f"e{e}m0 of NaN: {g[:4]}"
            xs, got, want = x[~nan], got[~nan], want[~nan]
        else:
            xs = x
        _same_floats(got, want, f"reduce_precision {t.value} e{e}m{m}")
        np.testing.assert_array_equal(
            _bits(got)[~np.isnan(got.astype(np.float64))],
            _bits(want)[~np.isnan(got.astype(np.float64))], err_msg=f"e{e}m{m}")
        if t in (E.F32, E.F64, E.F16, E.BF16):
            via_jax = np.asarray(jax.jit(lambda a, e=e, m=m: jax.lax.reduce_precision(
                a, exponent_bits=e, mantissa_bits=m))(xs))
            _same_floats(got, via_jax, f"jax.lax.reduce_precision {t.value} e{e}m{m}")
