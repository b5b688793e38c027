"""A fused multiply-add on numpy arrays, rounded once: x * y + z exactly, then to nearest.

XLA CPU lets LLVM contract `a * b + c` into one FMA instruction (its complex multiply and
divide do: xlapy/ops/complex_xla.py), so the interpreter needs the same single rounding.
NumPy has no fma ufunc, and a C call an element (as ops/libm.py does) costs half a
microsecond; this is whole-array arithmetic instead:

* f32: the product of two f32 is exact in f64; the f64 sum is rounded to odd (the sticky
  bit kept in its last place), after which one rounding to f32 is correct (Boldo and
  Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using
  rounding to odd", IEEE TC 2008).
* f64: the operands are scaled by powers of two (frexp), the product split exactly
  (Veltkamp / Dekker), then the same paper's algorithm: TwoSum of z and the high product,
  the two low parts added with rounding to odd, one final rounding; scaled back.

Zeros, infinities and NaNs take `x * y + z` (exact there). A result below the smallest
normal may differ from a hardware FMA's in its last bit (it is rounded twice); every
caller flushes such results to zero (FTZ) as XLA CPU does.
"""

from __future__ import annotations

import numpy as np


def _round_to_odd_sum(s: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """s = RN(x + y) turned into RO(x + y): where the sum was inexact and s is even, the
    neighbour of s towards the exact sum (which is odd)."""
    bb = s - x
    err = (x - (s - bb)) + (y - bb)  # TwoSum: x + y = s + err exactly
    ints = np.uint32 if s.dtype == np.float32 else np.uint64
    even = (s.view(ints) & 1) == 0
    fix = (err != 0) & even & np.isfinite(s)
    if fix.any():
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf).astype(s.dtype)), s)
    return s


def _fma32(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    p = x.astype(np.float64) * y.astype(np.float64)  # exact (48 bits)
    zz = z.astype(np.float64)
    s = p + zz
    s = _round_to_odd_sum(s, p, zz)
    return s.astype(np.float32)


_SPLIT = 134217729.0  # 2^27 + 1


def two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a * b = p + e exactly (Dekker's product: numpy has no fma), for |a|, |b| < 2^996 and
    products far enough above the subnormals."""
    p = a * b

    def split(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c = _SPLIT * v
        hi = c - (c - v)
        return hi, v - hi

    ah, al = split(a)
    bh, bl = split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def _fma64(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    # Exact for zero, infinite or NaN operands, but: a finite x y may overflow (z infinite:
    # z) or underflow to a zero of the wrong sign (z zero: x y, rounded once).
    p = x * y
    plain = np.where(np.isinf(z) & np.isfinite(x) & np.isfinite(y), z, p + z)
    plain = np.where((z == 0) & (x != 0) & (y != 0), p, plain)
    ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(z) & (x != 0) & (y != 0) & (z != 0)
    if not ok.any():
        return plain
    one = np.float64(1.0)
    mx, ex = np.frexp(np.where(ok, x, one))
    my, ey = np.frexp(np.where(ok, y, one))
    zs = np.where(ok, z, one)
    e = ex + ey  # x y = mx my 2^e, 1/4 <= |mx my| < 1
    ez = np.frexp(zs)[1]
    # z far above x y: the sum rounds to z. Far below: only its sign matters (a sticky bit).
    far_up = ez - e > 110
    far_down = e - ez > 110
    zs = np.where(far_down, np.copysign(np.float64(2.0 ** -200), zs),
                  np.ldexp(zs, np.where(far_up | far_down, 0, -e)))
    uh, ul = two_prod(mx, my)
    th = zs + uh
    bb = th - zs
    tl = (zs - (th - bb)) + (uh - bb)  # TwoSum: zs + uh = th + tl
    v = _round_to_odd_sum(tl + ul, tl, ul)
    r = np.ldexp(th + v, e)
    out = np.where(far_up, z, r)
    return np.where(ok, out, plain)


def fma(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """x * y + z rounded once, element-wise (f32 or f64 arrays, broadcast)."""
    x, y, z = np.broadcast_arrays(*(np.asarray(v) for v in (x, y, z)))
    dtype = np.result_type(x, y, z)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"fma takes f32 or f64 arrays, not {dtype}")
    x, y, z = (np.asarray(v, dtype) for v in (x, y, z))
    with np.errstate(all="ignore"):
        return (_fma32 if dtype == np.float32 else _fma64)(x, y, z)
