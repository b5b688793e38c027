"""The register tables of the f32 log (math_poly.Math.log): log(x) = k ln2 + log(c) + log1p(r)
with x = 2^k z, z in [OFF, 2 OFF), c = 1 / invc the centre of z's interval (its top `bits`
mantissa bits), r = z invc - 1 (|r| < 1/32 with 16 intervals, 1/16 with 8), log1p(r) =
r + r^2 P(r) (degree 3 or 4).

Why: the atanh form (2 atanh((m - 1) / (m + 1))) costs ~28 vector ops a vector, a division
among them; here ~18: the tables are one register each, read with a lane permute (vpermps:
16 entries in a zmm on AVX-512, 8 in a ymm on AVX2), as glibc's logf reads its table (in
double; these sums are f32: k ln2_hi + log(c)_hi is exact, multiples of 2^-16 under 2^7, the
rest are the small terms, added first). Within 1 ulp (test_ulp_table.py); the same bits in
every lane, tail and scalar of one target (x86 with AVX2 and FMA: `permute`), since the
scalar code reads the same table. Other targets keep the atanh form.

f64 on AVX-512 (`table64`, `permute64`): 16 entries in two zmm halves read with vpermi2pd,
log(c) = hi + lo with hi a multiple of 2^-32 (k ln2_hi + hi exact with fdlibm's 32-bit
ln2_hi), log1p's P Taylor's to r^11: within 0.53 ulp where the atanh form measured 0.82, at
its speed in f64 kernels and 5-10% faster inside f32 x ** y (its log in f64).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import target
from xlapy.backends.cpu.llvm_util import F32, F64, I32, intrinsic

#: z's range starts here (bits of ~0.6992: [OFF, 2 OFF) holds 1 well inside).
OFF = 0x3F330000
#: ln2 as a multiple of 2^-16 (k ln2_hi exact for every f32 exponent) and the rest.
LN2_HI = round(math.log(2.0) * 2 ** 16) / 2 ** 16
LN2_LO = float(np.float32(math.log(2.0) - LN2_HI))


@dataclass(frozen=True)
class Table:
    """One table size's entries (f32 values) and log1p's polynomial P (low order first)."""

    bits: int
    invc: tuple[float, ...]
    logc_hi: tuple[float, ...]
    logc_lo: tuple[float, ...]
    poly: tuple[float, ...]


#: The f64 log's z range starts at the same value (0.69921875), its table has 16 entries
#: (two zmm registers, read with vpermi2pd) and log1p's P is Taylor's to r^11 (|r| < 0.031:
#: the next term is under 2^-56 of the result).
OFF64 = 0x3FE6600000000000
#: f64 ln2 as fdlibm splits it (32 significant bits: k ln2_hi exact) and the rest.
LN2_HI64, LN2_LO64 = float.fromhex("0x1.62e42feep-1"), float.fromhex("0x1.a39ef35793c76p-33")


@functools.cache
def table64() -> Table:
    """The f64 table: c the centre of each of 16 intervals of z (1 exactly for the one
    holding 1), log(c) = hi + lo with hi a multiple of 2^-32 (k ln2_hi + hi exact), from 40
    digits of decimal arithmetic."""
    import decimal

    ctx = decimal.Context(prec=40)
    width = 1 << (52 - 4)
    invc, hi, lo = [], [], []
    for j in range(16):
        a, b = (np.array([OFF64 + j * width, OFF64 + (j + 1) * width - 1], np.uint64)
                .view(np.float64))
        ic = 1.0 if a <= 1.0 <= b else float(2.0 / (a + b))
        logc = -ctx.ln(decimal.Decimal(ic))
        h = float(round(logc * 2 ** 32) / 2 ** 32)
        invc.append(ic)
        hi.append(h)
        lo.append(float(ctx.subtract(logc, decimal.Decimal(h))))
    return Table(4, tuple(invc), tuple(hi), tuple(lo),
                 tuple((-1.0) ** (k + 1) / (k + 2) for k in range(12)))


@functools.cache
def table(n: int) -> Table:
    """The n-entry table (n = 16 or 8): c the centre of each interval of z, 1 exactly for
    the one holding 1 (log(x) near 1 is r + r^2 P(r) alone); P fitted to (log1p(r) - r) /
    r^2 over every interval's r in double, within ~2^-24 of it."""
    bits = n.bit_length() - 1
    width = 1 << (23 - bits)
    invc, hi, lo, rs = [], [], [], []
    for j in range(n):
        a, b = (np.array([OFF + j * width, OFF + (j + 1) * width - 1], np.uint32)
                .view(np.float32).astype(np.float64))
        ic = 1.0 if a <= 1.0 <= b else float(np.float32(2.0 / (a + b)))
        logc = -math.log(ic)
        h = round(logc * 2 ** 16) / 2 ** 16
        invc.append(ic)
        hi.append(h)
        lo.append(float(np.float32(logc - h)))
        rs.append(np.linspace(a * ic - 1.0, b * ic - 1.0, 2000))
    r = np.concatenate(rs)
    r = r[r != 0.0]
    target_p = (np.log1p(r) - r) / (r * r)
    degree = 3 if n == 16 else 4
    coeffs = np.polynomial.polynomial.polyfit(r, target_p, degree, w=np.abs(r) + 1e-3)
    return Table(bits, tuple(invc), tuple(hi), tuple(lo),
                 tuple(float(np.float32(c)) for c in coeffs))


Permute = Callable[[ir.IRBuilder, Sequence[float], ir.Value], ir.Value]


def size() -> int:
    """The table size of the current target: 16 with AVX-512, 8 with AVX2 + FMA, else 0
    (the atanh form)."""
    t = target.current()
    if not (t.is_x86 and t.has("fma") and t.has("avx2")):
        return 0
    return 16 if t.has("avx512f") else 8


def permute(t: ir.Type) -> Permute | None:
    """Table lookups for f32 values of type t on this target (None: no table here):
    permute(b, values, i) = values[i mod n] per lane; f64 ones: `permute64`."""
    n = size()
    if (t.element if isinstance(t, ir.VectorType) else t) == F64:
        return permute64(t) if n == 16 else None
    if n == 0 or (t.element if isinstance(t, ir.VectorType) else t) != F32:
        return None
    lanes = t.count if isinstance(t, ir.VectorType) else 1

    def vec(values: Sequence[float], w: int) -> ir.Constant:
        return ir.Constant(ir.VectorType(F32, w), [ir.Constant(F32, v) for v in values])

    def look(b: ir.IRBuilder, values: Sequence[float], i: ir.Value) -> ir.Value:
        if lanes > n and lanes % n == 0:  # (vectors of several registers: each part)
            return _in_parts(b, i, n, lambda j: look_n(b, values, j))
        return look_n(b, values, i)

    def look_n(b: ir.IRBuilder, values: Sequence[float], i: ir.Value) -> ir.Value:
        w = i.type.count if isinstance(i.type, ir.VectorType) else 1
        vt = ir.VectorType(F32, w)
        if w == 16 and n == 16:  # vpermps zmm
            return intrinsic(b, "llvm.x86.avx512.permvar.sf.512", vt, [vec(values, 16), i])
        if w == 8 and n == 8:  # vpermps ymm
            return intrinsic(b, "llvm.x86.avx2.permps", vt, [vec(values, 8), i])
        if w == 8 and n == 16:  # vpermt2ps ymm (AVX512VL): the table's two halves
            return intrinsic(b, "llvm.x86.avx512.vpermi2var.ps.256", vt,
                             [vec(values[:8], 8), i, vec(values[8:], 8)])
        return _by_lane(b, vec(values, n), i)

    return look


def permute64(t: ir.Type) -> Permute:
    """f64 lookups in a 16-entry table: vpermi2pd of its two zmm halves per 8 lanes (an
    AVX-512 target), lane by lane for other widths (scalar code: the same entries)."""
    lanes = t.count if isinstance(t, ir.VectorType) else 1

    def vec(values: Sequence[float]) -> ir.Constant:
        return ir.Constant(ir.VectorType(F64, len(values)), [ir.Constant(F64, v) for v in values])

    def look(b: ir.IRBuilder, values: Sequence[float], i: ir.Value) -> ir.Value:
        if lanes % 8:
            return _by_lane(b, vec(values), i)
        return _in_parts(b, i, 8, lambda j: intrinsic(
            b, "llvm.x86.avx512.vpermi2var.pd.512", ir.VectorType(F64, 8),
            [vec(values[:8]), j, vec(values[8:])]))

    return look


def _in_parts(b: ir.IRBuilder, i: ir.Value, part: int,
              look: Callable[[ir.Value], ir.Value]) -> ir.Value:
    """look() of each `part` lanes of index vector i, the results joined in lane order."""
    lanes = i.type.count
    if lanes == part:
        return look(i)
    parts = [look(b.shuffle_vector(i, ir.Constant(i.type, ir.Undefined), ir.Constant(
        ir.VectorType(I32, part), list(range(h, h + part))))) for h in range(0, lanes, part)]
    while len(parts) > 1:
        w = parts[0].type.count
        both = ir.Constant(ir.VectorType(I32, 2 * w), list(range(2 * w)))
        parts = [b.shuffle_vector(parts[k], parts[k + 1], both)
                 for k in range(0, len(parts), 2)]
    return parts[0]


def _by_lane(b: ir.IRBuilder, table_v: ir.Constant, i: ir.Value) -> ir.Value:
    """table_v[i mod its length] lane by lane (a scalar, or a width with no permute): the
    same entries as the permutes."""
    n = table_v.type.count
    it = i.type.element if isinstance(i.type, ir.VectorType) else i.type
    mask = ir.Constant(it, n - 1)
    if not isinstance(i.type, ir.VectorType):
        return b.extract_element(table_v, b.and_(i, mask))
    w = i.type.count
    out = ir.Constant(ir.VectorType(table_v.type.element, w), ir.Undefined)
    for k in range(w):
        lane = b.and_(b.extract_element(i, ir.Constant(I32, k)), mask)
        out = b.insert_element(out, b.extract_element(table_v, lane), ir.Constant(I32, k))
    return out


def log(m: Any, x: ir.Value, sub: ir.Value | None, corr: ir.Value | None,
        permute: Permute) -> ir.Value:
    """f32 log(x) of a positive normal x for math_poly.Math `m` (its builder and helpers; a
    subnormal x came scaled by 2^24, `sub` where so): x = 2^k z, z in [OFF, 2 OFF), c =
    1 / invc of z's interval, r + p_lo = z invc - 1 exactly, log(x) = k ln2 + log(c) + r +
    r^2 P(r), summed small terms first (+ `corr`, far below the result's ulp)."""
    b = m.b
    tab = table64() if m.is64 else table(size())
    off, ln2_hi, ln2_lo = (OFF64, LN2_HI64, LN2_LO64) if m.is64 else (OFF, LN2_HI, LN2_LO)
    ix = b.bitcast(x, m.ity)
    tmp = b.sub(ix, m.ic(off))
    k = b.ashr(tmp, m.ic(m.mant))
    if sub is not None:
        k = b.select(sub, b.sub(k, m.ic(m.mant + 1)), k)
    z = b.bitcast(b.sub(ix, b.and_(tmp, m.ic(-1 << m.mant))), m.t)
    i = b.lshr(tmp, m.ic(m.mant - tab.bits))  # (the permute reads the low bits)
    invc = permute(b, tab.invc, i)
    p_hi = b.fmul(z, invc)
    p_lo = m.fma(z, invc, b.fneg(p_hi))  # (z invc = p_hi + p_lo exactly)
    r = b.fsub(p_hi, m.c(1.0))  # (exact: p_hi in [1/2, 2])
    # log1p(r + p_lo) = log1p(r) + p_lo (1 - r + ...): P at r alone missed r p_lo, up to an
    # ulp of a result near 1 (x = 1.0236, r = -0.057)
    p_lo = m.fma(b.fneg(r), p_lo, p_lo)
    kf = b.sitofp(k, m.t)
    small = m.fma(kf, m.c(ln2_lo), permute(b, tab.logc_lo, i))
    if corr is not None:
        small = b.fadd(small, corr)
    small = m.fma(b.fmul(r, r), m.horner(list(tab.poly), r), small)
    big = m.fma(kf, m.c(ln2_hi), permute(b, tab.logc_hi, i))
    # big + r exactly as s + err (|big| >= |r| or big = 0): near 1 they cancel, where r's
    # own rounding was an ulp of the result
    s = b.fadd(big, r)
    err = b.fsub(r, b.fsub(s, big))
    return b.fadd(s, b.fadd(b.fadd(err, p_lo), small))


__all__ = ["OFF", "OFF64", "LN2_HI", "LN2_LO", "Table", "table", "table64", "size", "permute",
           "permute64", "log"]
