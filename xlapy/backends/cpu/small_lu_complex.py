"""small_lu's getrf and trsm on complex matrices (c64, c128): jnp.linalg.solve / inv of
batches of small complex matrices, which paid LAPACK's per-call cost (~200 ns) per matrix
as the real ones did (4096 4 x 4 c64 solves 1.2x XLA's time).

A row of n complex elements is two vectors in registers, its real and its imaginary parts
(split from the interleaved storage by a shuffle as it is loaded, merged back as it is
stored). The arithmetic is unblocked LAPACK's, as small_lu's: cgetf2's pivot the first
largest |re| + |im| (icamax), the multipliers scaled by the pivot's reciprocal (Smith's
formula, as OpenBLAS's zgetf2 computes it) or divided by the pivot below the smallest
normal modulus; ctrsm's order with Smith's division by the diagonal; a conjugate transpose
conjugates A's elements as read. Results agree with LAPACK within rounding.
"""

from __future__ import annotations

from llvmlite import ir

from xlapy.backends.cpu.llvm_util import F32, I32, broadcast, i64, intrinsic, sfx

Pair = tuple[ir.Value, ir.Value]


def _lanes(pick: list[int]) -> ir.Constant:
    return ir.Constant(ir.VectorType(I32, len(pick)), pick)


def load_rows(b: ir.IRBuilder, base: ir.Value, rows: int, cols: int) -> list[Pair]:
    """(real parts, imaginary parts) of each of `rows` rows of `cols` complex elements."""
    et = base.type.pointee
    vt = ir.VectorType(et, 2 * cols)
    out = []
    for i in range(rows):
        v = b.load(b.bitcast(b.gep(base, [i64(2 * i * cols)]), vt.as_pointer()))
        v.align = 4 if et == F32 else 8
        out.append((b.shuffle_vector(v, v, _lanes(list(range(0, 2 * cols, 2)))),
                    b.shuffle_vector(v, v, _lanes(list(range(1, 2 * cols, 2))))))
    return out


def store_rows(b: ir.IRBuilder, base: ir.Value, rows: list[Pair], cols: int) -> None:
    for i, (re, im) in enumerate(rows):
        v = b.shuffle_vector(re, im, _lanes([k // 2 + (cols if k % 2 else 0)
                                                   for k in range(2 * cols)]))
        st = b.store(v, b.bitcast(b.gep(base, [i64(2 * i * cols)]), v.type.as_pointer()))
        st.align = 4 if re.type.element == F32 else 8


def fabs(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return intrinsic(b, f"llvm.fabs.{sfx(x.type)}", x.type, [x])


def fmuladd(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    return intrinsic(b, f"llvm.fmuladd.{sfx(x.type)}", x.type, [x, y, z])


def _smith(b: ir.IRBuilder, d: Pair) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(big, ratio, den) of Smith's division by d = (dr, di): big when |dr| >= |di|, then
    ratio = di / dr and den = dr + di ratio, else ratio = dr / di and den = di + dr ratio."""
    dr, di = d
    big = b.fcmp_ordered(">=", fabs(b, dr), fabs(b, di))
    ratio = b.select(big, b.fdiv(di, dr), b.fdiv(dr, di))
    den = b.select(big, b.fadd(dr, b.fmul(di, ratio)), b.fadd(di, b.fmul(dr, ratio)))
    return big, ratio, den


def divide(b: ir.IRBuilder, c: Pair, d: Pair, lanes: int = 0) -> Pair:
    """c / d by Smith's formula; c may be vectors of `lanes` elements (d scalars)."""
    big, ratio, den = _smith(b, d)
    if lanes:
        ratio, den = broadcast(b, ratio, lanes), broadcast(b, den, lanes)
    cr, ci = c
    re_big = b.fdiv(b.fadd(cr, b.fmul(ci, ratio)), den)
    im_big = b.fdiv(b.fsub(ci, b.fmul(cr, ratio)), den)
    re_small = b.fdiv(b.fadd(b.fmul(cr, ratio), ci), den)
    im_small = b.fdiv(b.fsub(b.fmul(ci, ratio), cr), den)
    return b.select(big, re_big, re_small), b.select(big, im_big, im_small)


def reciprocal(b: ir.IRBuilder, d: Pair) -> Pair:
    """1 / d by Smith's formula."""
    et = d[0].type
    big, ratio, den = _smith(b, d)
    inv = b.fdiv(ir.Constant(et, 1.0), den)
    neg = b.fneg(b.fmul(ratio, inv))
    return b.select(big, inv, b.fmul(ratio, inv)), b.select(big, neg, b.fneg(inv))


def multiply(b: ir.IRBuilder, x: Pair, y: Pair) -> Pair:
    (xr, xi), (yr, yi) = x, y
    return (b.fsub(b.fmul(xr, yr), b.fmul(xi, yi)), b.fadd(b.fmul(xr, yi), b.fmul(xi, yr)))


def _minus_times(b: ir.IRBuilder, s: Pair, v: Pair, acc: Pair, lanes: int) -> Pair:
    """acc - s v for a complex scalar s and complex vectors v, acc."""
    sr, si = broadcast(b, s[0], lanes), broadcast(b, s[1], lanes)
    (vr, vi), (ar, ai) = v, acc
    return (fmuladd(b, b.fneg(sr), vr, fmuladd(b, si, vi, ar)),
            fmuladd(b, b.fneg(sr), vi, fmuladd(b, b.fneg(si), vr, ai)))


def _modulus(b: ir.IRBuilder, z: Pair) -> ir.Value:
    """|z| without overflow: max(|re|, |im|) sqrt(1 + (min / max)^2) (0 for 0)."""
    et = z[0].type
    x, y = fabs(b, z[0]), fabs(b, z[1])
    hi = b.select(b.fcmp_ordered(">=", x, y), x, y)
    lo = b.select(b.fcmp_ordered(">=", x, y), y, x)
    q = b.fdiv(lo, hi)
    root = intrinsic(b, f"llvm.sqrt.{sfx(et)}", et, [fmuladd(b, q, q, ir.Constant(et, 1.0))])
    return b.select(b.fcmp_ordered("==", hi, ir.Constant(et, 0.0)), hi, b.fmul(hi, root))


def getrf_body(b: ir.IRBuilder, n: int, a: ir.Value, piv: ir.Value, info_at: ir.Value,
               sfmin: float) -> None:
    """small_lu._getrf_body for an n x n row-major complex matrix at `a` (its parts' type)."""
    et = a.type.pointee
    rows = load_rows(b, a, n, n)
    info: ir.Value = ir.Constant(I32, 0)
    zero_c = ir.Constant(et, 0.0)
    for j in range(n):
        lane = ir.Constant(I32, j)
        col = [(b.extract_element(re, lane), b.extract_element(im, lane))
               for re, im in rows[j:]]
        mags = [b.fadd(fabs(b, r), fabs(b, i)) for r, i in col]
        best, p = mags[0], ir.Constant(I32, j)
        for i in range(j + 1, n):  # the first largest |re| + |im| (icamax: NaNs never win)
            gt = b.fcmp_ordered(">", mags[i - j], best)
            best, p = b.select(gt, mags[i - j], best), b.select(gt, ir.Constant(I32, i), p)
        b.store(b.add(p, ir.Constant(I32, 1)), b.gep(piv, [i64(j)]))
        top = rows[j]
        for i in range(j + 1, n):  # swap rows j and p
            here = b.icmp_signed("==", p, ir.Constant(I32, i))
            rows[j] = (b.select(here, rows[i][0], rows[j][0]),
                       b.select(here, rows[i][1], rows[j][1]))
            rows[i] = (b.select(here, top[0], rows[i][0]), b.select(here, top[1], rows[i][1]))
        pivot = (b.extract_element(rows[j][0], lane), b.extract_element(rows[j][1], lane))
        zero = b.and_(b.fcmp_ordered("==", pivot[0], zero_c),
                      b.fcmp_ordered("==", pivot[1], zero_c))
        first = b.and_(zero, b.icmp_signed("==", info, ir.Constant(I32, 0)))
        info = b.select(first, ir.Constant(I32, j + 1), info)
        if j == n - 1:
            break
        recip = reciprocal(b, pivot)
        tiny = b.fcmp_ordered("<", _modulus(b, pivot), ir.Constant(et, sfmin))
        keep = _lanes([k if k <= j else n + k for k in range(n)])
        for i in range(j + 1, n):
            c = (b.extract_element(rows[i][0], lane), b.extract_element(rows[i][1], lane))
            scaled = multiply(b, c, recip)
            divided = divide(b, c, pivot)
            lv = tuple(b.select(zero, c[h], b.select(tiny, divided[h], scaled[h]))
                       for h in range(2))
            upd = _minus_times(b, (lv[0], lv[1]), rows[j], rows[i], n)
            rows[i] = tuple(b.insert_element(b.shuffle_vector(rows[i][h], upd[h], keep),
                                             lv[h], lane) for h in range(2))  # type: ignore
    store_rows(b, a, rows, n)
    b.store(info, info_at)


def trsm_body(b: ir.IRBuilder, s: int, m: int, flags: tuple[bool, bool, int, bool],
              a: ir.Value, x: ir.Value) -> None:
    """small_lu._trsm_body for complex s x s A at `a` and s x m B at `x` (trans 2: A's
    conjugate transpose)."""
    _, lower, trans, unit = flags
    rows = load_rows(b, x, s, m)

    def at(i: int, k: int) -> Pair:
        r, c = (i, k) if trans == 0 else (k, i)
        re = b.load(b.gep(a, [i64(2 * (r * s + c))]))
        im = b.load(b.gep(a, [i64(2 * (r * s + c) + 1)]))
        return (re, b.fneg(im)) if trans == 2 else (re, im)

    down = lower != (trans != 0)
    for i in (range(s) if down else range(s - 1, -1, -1)):
        v = rows[i]
        for k in (range(i) if down else range(s - 1, i, -1)):
            v = _minus_times(b, at(i, k), rows[k], v, m)
        if not unit:
            v = divide(b, v, at(i, i), m)
        rows[i] = v
    store_rows(b, x, rows, m)


__all__ = ["divide", "fabs", "fmuladd", "getrf_body", "load_rows", "multiply", "reciprocal",
           "store_rows", "trsm_body"]
