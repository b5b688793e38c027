"""Transcendental functions as inline, vectorizable LLVM IR (no libm calls).

libm calls scalarize the loops they sit in (0.6 GB/s for `tanhf`); these straight-line
polynomial forms vectorize to AVX-512 (design.md). Each function works on f32 or f64 values
(bf16/f16 compute in f32 and round once). Coefficients (math_coeffs.py) are Taylor series
where those converge fast enough, or Chebyshev fits made once per process (float64 least
squares on Chebyshev nodes), evaluated in IR with Clenshaw's recurrence, which is stable at
any degree.

Measured maximum errors (tests/unit/backends/cpu/test_math_poly.py prints and bounds them;
references in float64 for f32 and long double for f64, denormal results flushed as XLA does;
test_ulp_table.py measures against correctly rounded references over every binade):

=============  =========  =========  ==============================================
function       f32 ulp    f64 ulp    notes
=============  =========  =========  ==============================================
exp            <= 1       <= 1       Cody-Waite ln2 split, on |r| <= ln2/2 Taylor (f64)
                                     or a degree-6 minimax fit (f32, math_coeffs.EXP_F32)
log            <= 1       <= 1       log(m) = 2 atanh((m-1)/(m+1)), m in [0.7, 1.4],
                                     summed as fdlibm's e_log
log1p          <= 1       <= 1       log(u) + (x - (u - 1)) / u, u = 1 + x (fdlibm)
expm1          <= 1       <= 1       Taylor below 1, (2^n - 1) + 2^n expm1(r) above
tanh           <= 5       <= 2       f32: x P(x^2) / Q(x^2), a (4, 4) rational (as XLA's,
                                     also 5 ulp; in f64 within 1 ulp but the GELU
                                     chain 1.85x slower); f64: -m / (2 + m),
                                     m = expm1(-2|x|) (one series, no branch)
logistic       <= 1       <= 3       1 / (1 + exp(-x)) (f32: in f64)
erf            <= 1       <= 1       f32: x (C0 + z P(z)) below 1, 1 - a fit of erfc
                                     above, in f32; f64: Taylor below 1 (2/sqrt(pi)
                                     as hi + lo), a Chebyshev fit of erfcx above
erfc (chlo)    <= 5       -          f32: below 1 an f64 polynomial, rounded once (0.502);
                                     above Cephes' erfcf with x^2 exact into exp (4.7;
                                     f64: chlo_special.py's HLO)
erf_inv (chlo) <= 1       -          f32: x p(w), w = -log(1 - x^2), in f64, rounded once
                                     (0.51; f64: chlo_lowering.py's HLO)
sin, cos, tan  <= 1       <= 1       Cody-Waite by pi/2 below 2^20 (f32: in f64, the
                                     polynomials too; f64: 4-part pi/2 and
                                     double-doubles, trig_dd.py), Payne-Hanek above
                                     (trig_reduce.py), taken only when a lane needs it;
                                     test_ulp_table.py
=============  =========  =========  ==============================================
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import erf_f32, latency, log_table, target, trig_dd, trig_reduce
from xlapy.backends.cpu.llvm_util import (
    F64,
    I32,
    I64,
    any_lane,
    elem,
    intrinsic,
    like,
    sfx,
    splat,
)
from xlapy.backends.cpu.math_coeffs import (
    ERF_TOP,
    ERFCX_F64,
    EXP_F32,
    EXP_ONE_SCALE_MAX,
    TANH_P32,
    TANH_Q32,
    TANH_TOP32,
    fit,
    ln2_parts,
    pio2_parts,
    taylor_exp,
    two_over_sqrt_pi,
)
from xlapy.ops.erf_f32 import ERF_SMALL, ERFC_P, ERFC_R, ERFINV32_A, ERFINV32_B


class Math:
    """Emits math on one float type (f32 or f64, scalar or vector) with builder `b`."""

    def __init__(self, b: ir.IRBuilder, t: ir.Type) -> None:
        self.b = b
        self.t = t
        self.is64 = elem(t) == F64
        self.ity = like(t, I64 if self.is64 else I32)
        self.mant = 52 if self.is64 else 23
        self.bias = 1023 if self.is64 else 127
        self.tiny = 2.0 ** (1 - self.bias)  # the smallest normal

    # ---- small helpers ----
    def c(self, v: float) -> ir.Constant:
        return splat(self.t, float(np.float64(v)) if self.is64 else float(np.float32(v)))

    def ic(self, v: int) -> ir.Constant:
        return splat(self.ity, v)

    def fma(self, a: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
        return intrinsic(self.b, f"llvm.fma.{self._sfx}", self.t, [a, x, y])

    def un(self, name: str, x: ir.Value) -> ir.Value:
        return intrinsic(self.b, f"llvm.{name}.{self._sfx}", self.t, [x])

    def bin(self, name: str, x: ir.Value, y: ir.Value) -> ir.Value:
        return intrinsic(self.b, f"llvm.{name}.{self._sfx}", self.t, [x, y])

    @property
    def _sfx(self) -> str:
        return sfx(self.t)

    def horner(self, coeffs: list[float], x: ir.Value) -> ir.Value:
        """sum(coeffs[k] * x**k) by Horner's rule with fused multiply-adds."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(k))
        return acc

    def estrin(self, coeffs: list[float], x: ir.Value) -> ir.Value:
        """sum(coeffs[k] * x**k) by Estrin's scheme: pairs c_2k + c_2k+1 x, then pairs of
        those with x^2, x^4, ...: log2(n) dependent fused multiply-adds where Horner's rule
        chains n - 1 (a loop carry through sin waits on its polynomial)."""
        b = self.b
        terms = [self.fma(self.c(coeffs[k + 1]), x, self.c(coeffs[k])) if k + 1 < len(coeffs)
                 else self.c(coeffs[k]) for k in range(0, len(coeffs), 2)]
        power = x
        while len(terms) > 1:
            power = b.fmul(power, power)
            terms = [self.fma(terms[k + 1], power, terms[k]) if k + 1 < len(terms) else terms[k]
                     for k in range(0, len(terms), 2)]
        return terms[0]

    def clenshaw(self, coeffs: Sequence[float], x: ir.Value, lo: float, hi: float
                 ) -> ir.Value:
        """A Chebyshev series on [lo, hi] at x (Clenshaw's recurrence)."""
        b = self.b
        t = self.fma(x, self.c(2.0 / (hi - lo)), self.c(-(hi + lo) / (hi - lo)))
        t2 = b.fadd(t, t)
        b1, b2 = self.c(0.0), self.c(0.0)
        for ck in coeffs[:0:-1]:
            b1, b2 = b.fadd(self.fma(t2, b1, self.c(ck)), b.fneg(b2)), b1
        return b.fadd(self.fma(t, b1, self.c(coeffs[0])), b.fneg(b2))

    def select_nan(self, x: ir.Value, r: ir.Value) -> ir.Value:
        """NaN inputs give NaN (x itself)."""
        return self.b.select(self.b.fcmp_unordered("uno", x, x), x, r)

    def ldexp(self, p: ir.Value, ni: ir.Value) -> ir.Value:
        """p * 2**ni for an integer ni in [-2*bias, 2*bias] (two exact scalings)."""
        b = self.b
        n1 = b.ashr(ni, self.ic(1))
        n2 = b.sub(ni, n1)
        s1 = b.bitcast(b.shl(b.add(n1, self.ic(self.bias)), self.ic(self.mant)), self.t)
        s2 = b.bitcast(b.shl(b.add(n2, self.ic(self.bias)), self.ic(self.mant)), self.t)
        return b.fmul(b.fmul(p, s1), s2)

    def scalef(self, p: ir.Value, n: ir.Value) -> ir.Value | None:
        """p * 2**n for integer-valued float n, as AVX-512's vscalefps/pd per 512 bits
        (overflow to inf, FTZ flushing tiny results as the multiplies of `ldexp` do), or None
        where there is no such instruction (scalars, narrower vectors, no AVX-512). One
        instruction instead of ldexp's ten: less code to run and to compile."""
        name = f"llvm.x86.avx512.mask.scalef.{'pd' if self.is64 else 'ps'}.512"
        return self._avx512(name, [p, n], lambda chunk, mask_t: [
            ir.Constant(chunk, None), ir.Constant(mask_t, -1), ir.Constant(I32, 4)])

    def _avx512(self, name: str, args: list[ir.Value],
                extra: Callable[[ir.Type, ir.Type], list[ir.Value]]) -> ir.Value | None:
        """The 512-bit intrinsic `name` on each 512-bit chunk of the vector `args` (with the
        trailing operands extra(chunk type, mask type)), or None for scalars, vectors that
        are not whole 512-bit chunks and targets without AVX-512."""
        t = self.t
        per = 8 if self.is64 else 16
        if not isinstance(t, ir.VectorType) or t.count % per or \
                not target.current().has("avx512f"):
            return None
        b = self.b
        chunk = ir.VectorType(elem(t), per)
        mask_t = ir.IntType(per)
        parts = []
        for k in range(t.count // per):
            lanes = ir.Constant(ir.VectorType(I32, per), [k * per + j for j in range(per)])
            vs = [v if t.count == per else b.shuffle_vector(v, v, lanes) for v in args]
            parts.append(intrinsic(b, name, chunk, vs + extra(chunk, mask_t)))
        while len(parts) > 1:  # concatenate pairwise
            width = parts[0].type.count
            both = ir.Constant(ir.VectorType(I32, 2 * width), list(range(2 * width)))
            parts = [b.shuffle_vector(parts[i], parts[i + 1], both)
                     for i in range(0, len(parts), 2)]
        return parts[0]

    def recip28(self, d: ir.Value) -> ir.Value:
        """1 / d for a result rounded to f32 later: a correctly rounded division. (AVX-512's
        vrcp14 plus a Newton step was faster, but only vector lanes took it, so a value's
        f32 result depended on its position in the array and on the CPU.)"""
        return self.b.fdiv(self.c(1.0), d)

    # ---- functions ----
    def exp(self, x: ir.Value, terms: int | None = None, nonpos: bool = False) -> ir.Value:
        """exp(x) = 2^n e^r. The clamp keeps NaN (compare-and-select: one maxps/minps, where
        maxnum/minnum would drop it) and its bounds lie past overflow and past the flush of
        denormal results, so inf, 0 and NaN need no selects; n = round(x log2 e) comes from
        the magic-number addition (its integer in the low bits), defined for NaN too.
        `terms`: fewer Taylor terms, for f64 values that are rounded to f32 later.
        `nonpos`: every lane is <= 0 or NaN (exp_range.py): no upper clamp, no big lanes."""
        b = self.b
        one = self._one_scale(terms)
        lo, hi = (-746.0, 709.9) if self.is64 else (-88.0 if one else -104.0, 88.8)
        xc = b.select(b.fcmp_ordered("<", x, self.c(lo)), self.c(lo), x)
        if not nonpos:
            xc = b.select(b.fcmp_ordered(">", xc, self.c(hi)), self.c(hi), xc)
        magic = 1.5 * 2.0 ** self.mant + (self.bias if one else 0)
        t, n, r = self._ln2_split(xc, magic)
        coeffs = taylor_exp(terms or 14) if self.is64 or terms else list(EXP_F32)
        p = self.horner(coeffs, r)
        scaled = self.scalef(p, n)
        if scaled is not None:
            return scaled
        magic_bits = int(np.float64(magic).view(np.int64)) if self.is64 else \
            int(np.float32(magic).view(np.int32))
        if one:
            return self._exp_scale(p, t, xc, magic_bits, nonpos)
        return self.ldexp(p, b.sub(b.bitcast(t, self.ity), self.ic(magic_bits)))

    def _ln2_split(self, x: ir.Value, magic: float) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(t, n, r) with x = n ln2 + r, |r| <= ln2 / 2: t = x log2 e + magic holds round(x
        log2 e) in its low bits, n = t - magic, r by Cody-Waite's two-part ln2."""
        b = self.b
        t = self.fma(x, self.c(1.0 / math.log(2.0)), self.c(magic))
        n = b.fsub(t, self.c(magic))
        ln2_hi, ln2_lo = ln2_parts(self.is64)
        return t, n, self.fma(n, self.c(-ln2_lo), self.fma(n, self.c(-ln2_hi), x))

    def _one_scale(self, terms: int | None) -> bool:
        """exp's 2^n is one multiply (`_exp_scale`): f32 vectors without vscalefps, FTZ."""
        t = self.t
        return not self.is64 and terms is None and denormal.flushing() and \
            isinstance(t, ir.VectorType) and not (
                t.count % 16 == 0 and target.current().has("avx512f"))

    def _exp_scale(self, p: ir.Value, t: ir.Value, xc: ir.Value, magic_bits: int,
                   nonpos: bool = False) -> ir.Value:
        """p * 2^n where t's low bits hold n + 127 (the magic number carries the bias):
        2^n is t's bits shifted into the exponent field, one multiply instead of ldexp's
        two scalings (AVX2: 9 vector ops -> 2; x86-64-v3 softmax's exp pass ~30 -> ~24).
        Valid for n + 127 in [0, 254]: the clamp at -88 keeps n >= -127, whose 2^n is
        +0, and p 2^-127 < 2^-126 flushes to that anyway (FTZ); n = 128 (x above ~88.38,
        finite results up to 88.72) takes ldexp, for the whole vector: the same bits."""
        b = self.b

        def one_multiply() -> ir.Value:  # p * (t's bits shifted into the exponent field)
            return b.fmul(p, b.bitcast(b.shl(b.bitcast(t, self.ity), self.ic(self.mant)),
                                       self.t))

        if nonpos:  # no lane above 0: the fast scale only
            return one_multiply()
        big = b.fcmp_ordered(">", xc, self.c(EXP_ONE_SCALE_MAX))
        w = self.t.count
        anybig = intrinsic(b, f"llvm.vector.reduce.or.v{w}i1", ir.IntType(1), [big])
        with b.if_else(anybig, likely=False) as (slow, fast):
            with slow:
                q_slow = self.ldexp(p, b.sub(b.bitcast(t, self.ity), self.ic(magic_bits)))
                slow_end = b.block
            with fast:
                q_fast = one_multiply()
                fast_end = b.block
        q = b.phi(self.t)
        q.add_incoming(q_slow, slow_end)
        q.add_incoming(q_fast, fast_end)
        return q

    def log(self, x: ir.Value, corr: ir.Value | None = None, terms: int | None = None
            ) -> ir.Value:
        """log(x) (+ corr, a correction far below x's ulp, added with the smallest terms).
        `terms`: fewer atanh terms, for f64 values that are rounded to f32 later."""
        b = self.b
        xin, sub = x, None
        if not denormal.flushing():  # a subnormal x: scale it normal, take the scale off k
            sub = b.fcmp_ordered("<", self.un("fabs", x), self.c(self.tiny))
            x = b.select(sub, b.fmul(x, self.c(2.0 ** (self.mant + 1))), x)
        table = None if terms else log_table.permute(self.t)
        out = log_table.log(self, x, sub, corr, table) if table else \
            self._log_atanh(x, sub, corr, terms)
        x = xin
        out = b.select(b.fcmp_ordered("==", x, self.c(math.inf)), x, out)
        out = b.select(b.fcmp_ordered("==", x, self.c(0.0)), self.c(-math.inf), out)
        out = b.select(b.fcmp_ordered("<", x, self.c(0.0)), self.c(math.nan), out)
        return self.select_nan(x, out)

    def _log_atanh(self, x: ir.Value, sub: ir.Value | None, corr: ir.Value | None,
                   terms: int | None) -> ir.Value:
        """log(x) of a positive normal x as 2 atanh((m - 1) / (m + 1)) + k ln2 (where
        log_table has no register table: f64 without AVX-512, f32 without AVX2 and FMA;
        and with `terms`)."""
        b = self.b
        bits = b.bitcast(x, self.ity)
        # m in [sqrt(1/2), sqrt(2)): subtract the exponent of x / sqrt(1/2).
        off = splat(self.ity, int(np.float64(math.sqrt(0.5)).view(np.int64)) if self.is64
                          else int(np.float32(math.sqrt(0.5)).view(np.int32)))
        mask = splat(self.ity, (1 << self.mant) - 1)
        k = b.ashr(b.sub(bits, off), splat(self.ity, self.mant))
        mbits = b.add(b.and_(b.sub(bits, off), mask), off)
        m = b.bitcast(mbits, self.t)
        f = b.fsub(m, self.c(1.0))
        s = b.fdiv(f, b.fadd(m, self.c(1.0)))
        z = b.fmul(s, s)
        terms = terms or (13 if self.is64 else 6)
        # R = 2 atanh(s) / s - 2 = z (2/3 + 2/5 z + ...); log(m) = f - (hfsq - s (hfsq + R))
        # with hfsq = f^2 / 2, summed as fdlibm's e_log.c does (small terms first: < 1 ulp,
        # where 2s + s R measured 2)
        r = b.fmul(z, self.horner([2.0 / (2 * i + 1) for i in range(1, terms)], z))
        hfsq = b.fmul(b.fmul(self.c(0.5), f), f)
        if sub is not None:
            k = b.select(sub, b.sub(k, self.ic(self.mant + 1)), k)
        kf = b.sitofp(k, self.t)
        ln2_hi, ln2_lo = ln2_parts(self.is64)
        lo = b.fmul(kf, self.c(ln2_lo))
        inner = self.fma(s, b.fadd(hfsq, r), lo if corr is None else b.fadd(lo, corr))
        return self.fma(kf, self.c(ln2_hi), b.fsub(f, b.fsub(hfsq, inner)))

    def log1p(self, x: ir.Value) -> ir.Value:
        """log(u) + (x - (u - 1)) / u with u = 1 + x rounded: the second term is log's
        first-order correction for u's rounding (fdlibm's s_log1p); x itself where u = 1."""
        b = self.b
        u = b.fadd(x, self.c(1.0))
        d = b.fsub(u, self.c(1.0))
        exact = b.fcmp_ordered("==", d, self.c(0.0))
        corr = b.fdiv(b.fsub(x, d), b.select(exact, self.c(1.0), u))
        out = b.select(exact, x, self.log(u, corr))
        return self.select_nan(x, out)

    def expm1(self, x: ir.Value) -> ir.Value:
        """Below 1 in magnitude the Taylor series x + x^2 (1/2 + x/6 + ...); above, with
        x = n ln 2 + r: (2^n - 1) + 2^n expm1(r), one rounding (the fma), expm1(r) by Taylor
        on |r| <= ln2/2, up to the overflow (x clamped just past it; n past the largest
        exponent: 2^(n-1) (...) doubled, exact). Within 1 ulp (Kahan's (u - 1) x / log(u)
        measured 2). A whole exp(x) - 1 for x past 20 cost as much again as the rest
        (jax.nn.elu 1.07x XLA's time)."""
        b = self.b
        n_small = 21 if self.is64 else 13
        small = self.fma(b.fmul(x, x), self.horner(
            [1.0 / math.factorial(k) for k in range(2, n_small)], x), x)
        lo_clamp = -60.0 if self.is64 else -30.0
        xc = b.select(b.fcmp_ordered("<", x, self.c(lo_clamp)), self.c(lo_clamp), x)
        top = 710.0 if self.is64 else 89.0  # (past log(max float): n = bias + 1)
        xc = b.select(b.fcmp_ordered(">", xc, self.c(top)), self.c(top), xc)
        n = self.un("rint", b.fmul(xc, self.c(1.0 / math.log(2.0))))
        ln2_hi, ln2_lo = ln2_parts(self.is64)
        r = self.fma(n, self.c(-ln2_lo), self.fma(n, self.c(-ln2_hi), xc))
        q = self.fma(b.fmul(r, r), self.horner(
            [1.0 / math.factorial(k) for k in range(2, 17 if self.is64 else 10)], r), r)
        over = b.fcmp_ordered(">", n, self.c(float(self.bias)))
        ni = b.fptosi(b.select(over, self.c(float(self.bias)), n), self.ity)
        two_n = b.bitcast(b.shl(b.add(ni, self.ic(self.bias)), self.ic(self.mant)), self.t)
        mid = self.fma(two_n, q, b.fsub(two_n, self.c(1.0)))
        out = b.fmul(mid, b.select(over, self.c(2.0), self.c(1.0)))
        out = b.select(b.fcmp_ordered("<", self.un("fabs", x), self.c(1.0)), small, out)
        out = b.select(b.fcmp_ordered("==", x, self.c(0.0)), x, out)  # -0 stays -0
        return self.select_nan(x, out)

    def tanh(self, x: ir.Value) -> ir.Value:
        """f64: tanh(a) = -m / (2 + m), m = expm1(-2a), a = min(|x|, 19.1) (tanh rounds to 1
        beyond), with -2a = n ln2 + r: numerator and denominator each (1 -+ 2^n) -+ 2^n q,
        one rounding, q = expm1(r) by Taylor to r^13 on |r| <= ln2/2. One polynomial where
        the series below 0.5 and 1 - 2 / (e^2a + 1) above took two (61 instructions -> 38;
        2M f64 1.5 -> 1.0 ms, XLA 0.85-1.0), within 2 ulp (the two measured 1; XLA's
        rational 6)."""
        if not self.is64:
            return self._tanh32(x)
        b = self.b
        ax = self.un("fabs", x)
        a = b.select(b.fcmp_ordered(">", ax, self.c(19.1)), self.c(19.1), ax)  # (NaN stays)
        y = b.fmul(a, self.c(-2.0))
        magic = 1.5 * 2.0 ** self.mant
        t, _, r = self._ln2_split(y, magic)
        q = self.fma(b.fmul(r, r), self.horner(
            [1.0 / math.factorial(k) for k in range(2, 14)], r), r)
        ni = b.sub(b.bitcast(t, self.ity), self.ic(int(np.float64(magic).view(np.int64))))
        two_n = b.bitcast(b.shl(b.add(ni, self.ic(self.bias)), self.ic(self.mant)), self.t)
        one = self.c(1.0)  # n in [-56, 0]: 2^n is normal, 1 -+ 2^n exact down to 2^-53
        num = self.fma(b.fneg(two_n), q, b.fsub(one, two_n))  # -m = 1 - 2^n e^r
        out = b.fdiv(num, self.fma(two_n, q, b.fadd(one, two_n)))  # 2 + m = 1 + 2^n e^r
        # tanh(x) rounds to x below 2^-27; keeps the smallest normals.
        out = b.select(b.fcmp_ordered("<", ax, self.c(2.0 ** -27)), ax, out)
        return self.select_nan(x, self.bin("copysign", out, x))

    def _tanh32(self, x: ir.Value) -> ir.Value:
        """f32 tanh(|x|) = a P(a^2) / Q(a^2), a = min(|x|, 9.2) (tanh rounds to 1 beyond),
        then min(., 1) and x's sign: ~12 vector ops and one division, where the exp form took
        ~50 (GELU chain 2x faster). P(0) = Q(0) = 1 exactly, so tiny x give x itself; NaN
        passes through every select (ordered compares are false)."""
        b = self.b
        ax = self.un("fabs", x)
        a = b.select(b.fcmp_ordered(">", ax, self.c(TANH_TOP32)), self.c(TANH_TOP32), ax)
        z = b.fmul(a, a)
        r = b.fdiv(b.fmul(a, self.horner(TANH_P32, z)), self.horner(TANH_Q32, z))
        r = b.select(b.fcmp_ordered(">", r, self.c(1.0)), self.c(1.0), r)
        return self.bin("copysign", r, x)

    def logistic(self, x: ir.Value) -> ir.Value:
        """1 / (1 + exp(-x)) (XLA's form); f32 evaluates it in f64 and rounds once (within
        1 ulp; XLA's three f32 roundings measured 2). In f64 and the `ieee` denormal mode,
        exp(x) below -700, where exp(-x) overflows before the subnormal results (under FTZ
        those flush to 0 either way, so the ftz code skips the second exp)."""
        b = self.b
        if not self.is64:  # exp to 2e-10 (9 terms), 1 / (1 + e) to 2^-28: 0.01 ulp of f32
            m = Math(b, like(self.t, F64))
            # -x at most 200 (the f32 result is 0 from 104 on): e stays finite for recip28
            nx = b.fneg(b.fpext(x, m.t))
            nx = b.select(b.fcmp_ordered(">", nx, m.c(200.0)), m.c(200.0), nx)
            e = m.exp(nx, terms=10)
            return b.fptrunc(m.recip28(b.fadd(m.c(1.0), e)), self.t)
        e = self.exp(b.fneg(x))
        out = b.fdiv(self.c(1.0), b.fadd(self.c(1.0), e))
        if denormal.flushing():
            return out
        low = b.fcmp_ordered("<", x, self.c(-700.0))
        return b.select(low, self.exp(x), out)

    def erf(self, x: ir.Value) -> ir.Value:
        b = self.b
        if not self.is64:
            return erf_f32.erf(self, x)
        ax = self.un("fabs", x)
        z = b.fmul(x, x)
        small = self._erf_small(x, z, 19)
        top = ERF_TOP[self.is64]
        axc = self.bin("minnum", ax, self.c(top))
        h = self.clenshaw(ERFCX_F64 if self.is64 else fit("erfcx"), axc, 1.0, top)
        large = b.fsub(self.c(1.0), b.fmul(self.exp(b.fneg(b.fmul(axc, axc))), h))
        large = b.select(b.fcmp_ordered(">=", ax, self.c(top)), self.c(1.0), large)
        large = self.bin("copysign", large, x)
        out = b.select(b.fcmp_ordered("<", ax, self.c(1.0)), small, large)
        return self.keep_zero(x, self.select_nan(x, out))

    def erfc(self, x: ir.Value) -> ir.Value:
        """erfc of f32 values (f64: passes/chlo_special.py), chlo_lowering's formulas
        (ops/erf_f32.py): below |x| = 1, 1 - x P(x^2) in f64, rounded once (within 0.51
        ulp); above, Cephes' erfcf, exp(-x^2) / |x| R(1 / x^2), 2 minus it for x < 0. Here,
        not as that HLO, for fused multiply-adds: its f64 polynomial, a multiply and an add
        a step, was 40% of exact GELU's time (1.4x XLA's; 1024^2 on Zen 3)."""
        b = self.b
        m = Math(b, like(self.t, F64))
        xd = b.fpext(x, m.t)
        erf = m.horner(list(ERF_SMALL[::-1]), b.fmul(xd, xd))
        small = b.fptrunc(m.fma(b.fneg(xd), erf, m.c(1.0)), self.t)
        a = self.un("fabs", x)
        ac = b.select(b.fcmp_ordered(">", a, self.c(10.0)), self.c(10.0), a)  # (inf: no NaN)
        hi = b.fmul(ac, ac)  # x^2 = hi + lo exactly; exp(-hi) (1 - lo): the rounding of x^2
        z = self.exp(b.fneg(hi), nonpos=True)  # would cost x^2 2^-24 relative (64 ulp at 9)
        z = self.fma(z, b.fneg(self.fma(ac, ac, b.fneg(hi))), z)
        q = b.fdiv(self.c(1.0), a)
        w = b.fmul(q, q)
        p = b.select(b.fcmp_ordered("<", a, self.c(2.0)), self.horner(list(ERFC_P[::-1]), w),
                     self.horner(list(ERFC_R[::-1]), w))
        y = b.fmul(b.fmul(z, q), p)
        y = b.select(b.fcmp_ordered("<", x, self.c(0.0)), b.fsub(self.c(2.0), y), y)
        return b.select(b.fcmp_ordered("<", a, self.c(1.0)), small, y)

    def erf_inv(self, x: ir.Value) -> ir.Value:
        """erf_inv of f32 values (f64: chlo_lowering's refined HLO), its formulas in f64 with
        fused multiply-adds, rounded once (ops/erf_f32.py): x p(w), w = -log((1 - |x|)(1 +
        |x|)) (7 atanh terms: 1e-12, far below f32's ulp), p the fit in w - 3.125 below w =
        6.25, in sqrt(w) - 3.25 above, the latter (a square root, 11 terms) computed only
        for a vector with such a lane (|x| > 0.998). x * inf at |x| = 1, NaN past it."""
        b = self.b
        m = Math(b, like(self.t, F64))
        xd = b.fpext(x, m.t)
        a = m.un("fabs", xd)
        w = b.fneg(m.log(b.fmul(b.fsub(m.c(1.0), a), b.fadd(m.c(1.0), a)), terms=7))
        near = b.fcmp_unordered("uge", w, m.c(6.25))  # (NaN too)
        p = m.horner(list(ERFINV32_A[::-1]), b.fsub(w, m.c(3.125)))
        before = b.block
        with b.if_then(any_lane(b, near), likely=False):
            t = b.fsub(m.un("sqrt", b.select(near, w, m.c(6.25))), m.c(3.25))
            far = b.select(near, m.horner(list(ERFINV32_B[::-1]), t), p)
            after = b.block
        picked = b.phi(p.type)
        picked.add_incoming(p, before)
        picked.add_incoming(far, after)
        out = b.fptrunc(b.fmul(picked, xd), self.t)
        edge = b.fcmp_ordered("==", self.un("fabs", x), self.c(1.0))
        return b.select(edge, b.fmul(x, self.c(math.inf)), out)

    def _reduce(self, x: ir.Value) -> tuple[Math, ir.Value, ir.Value, ir.Value]:
        """(m, r, rl, q): x = q pi/2 + r + rl, r in f64 (f32 too: the f64 evaluation of the
        polynomials, rounded once, keeps sin/cos/tan within 1 ulp), rl what r's rounding
        lost (f64; 0 for f32) and q an integer."""
        b = self.b
        m = Math(b, like(self.t, F64))
        xd = b.fpext(x, m.t) if not self.is64 else x
        k = m.un("rint", b.fmul(xd, m.c(2.0 / math.pi)))
        if self.is64:
            r, rl = trig_dd.cody_waite(m, xd, k, pio2_parts(4))
        else:
            # |k| < 2^20 here (Payne-Hanek above): k p1 exact, r to ~2^-63 absolute, where
            # f32 values come no closer than ~2^-30 to a multiple of pi/2
            p1, p2 = pio2_parts(2)
            r = m.fma(k, m.c(-p2), m.fma(k, m.c(-p1), xd))
            rl = m.c(0.0)
        r, rl, k = self._huge_reduction(m, xd, r, rl, k)
        return m, r, rl, b.fptosi(k, m.ity)

    def _sin_cos_poly(self, m: Math, r: ir.Value) -> tuple[ir.Value, ir.Value]:
        """Taylor sin(r), cos(r) on |r| <= pi/4 in f64 for an f32 result (7 terms), by
        Estrin's scheme where latency counts (latency.py)."""
        z = self.b.fmul(r, r)
        n = 7
        poly = m.estrin if latency.bound() else m.horner
        s = self.b.fmul(r, poly([(-1) ** i / math.factorial(2 * i + 1) for i in range(n)], z))
        c = poly([(-1) ** i / math.factorial(2 * i) for i in range(n)], z)
        return s, c

    def _finish(self, x: ir.Value, v: ir.Value) -> ir.Value:
        """v in x's type; NaN for NaN and infinite x."""
        b = self.b
        if not self.is64:
            v = b.fptrunc(v, self.t)
        inf = b.fcmp_ordered("==", self.un("fabs", x), self.c(math.inf))
        return self.select_nan(x, b.select(inf, self.c(math.nan), v))

    def _erf_small(self, x: ir.Value, z: ir.Value, n: int) -> ir.Value:
        """erf below 1: the Taylor series (2/sqrt(pi)) (x + x z P(z)), z = x^2, n terms, its
        leading product fused with the rest (a Chebyshev fit of erf(x)/x measured 6 ulp in
        f64 near 0.5)."""
        b = self.b
        tail = b.fmul(b.fmul(x, z), self.horner(
            [(-1) ** k / (math.factorial(k) * (2 * k + 1)) for k in range(1, n)], z))
        k_hi, k_lo = two_over_sqrt_pi(self.is64)
        rest = self.fma(x, self.c(k_lo), b.fmul(self.c(k_hi), tail))
        return self.fma(x, self.c(k_hi), rest)

    def _sincos(self, x: ir.Value, cos: bool) -> ir.Value:
        """sin or cos: reduce by pi/2 (f32 in f64), then Taylor on |r| <= pi/4."""
        b = self.b
        m, r, rl, q = self._reduce(x)
        if cos:
            q = b.add(q, m.ic(1))
        if self.is64:  # double-doubles summed once (trig_dd.py)
            s_hi, s_lo, c_hi, c_lo = trig_dd.sin_cos(m, r, rl)
            s, c = b.fadd(s_hi, s_lo), b.fadd(c_hi, c_lo)
        else:
            s, c = self._sin_cos_poly(m, r)
        odd = b.icmp_unsigned("!=", b.and_(q, m.ic(1)), m.ic(0))
        neg = b.icmp_unsigned("!=", b.and_(q, m.ic(2)), m.ic(0))
        v = b.select(odd, c, s)
        return self._finish(x, b.select(neg, b.fneg(v), v))

    def _huge_reduction(self, m: Math, xd: ir.Value, r: ir.Value, rl: ir.Value, k: ir.Value
                        ) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(r, rl, k) from trig_reduce (Payne-Hanek) in the lanes where |x| >= 2^20, where
        the Cody-Waite reduction is inexact, computed only when some lane needs it (a branch:
        the common path stays one compare)."""
        b = self.b
        huge = b.fcmp_ordered(">=", m.un("fabs", xd), m.c(2.0 ** 20))
        before = b.block
        with b.if_then(any_lane(b, huge), likely=False):
            big = trig_reduce.reduce_wide(m, xd, self.is64)
            sel = [b.select(huge, v_big, v) for v_big, v in zip(big, (r, rl, k))]
            slow = b.block
        out = []
        for v, v_sel in zip((r, rl, k), sel):
            phi = b.phi(v.type)
            phi.add_incoming(v, before)
            phi.add_incoming(v_sel, slow)
            out.append(phi)
        return out[0], out[1], out[2]

    def keep_zero(self, x: ir.Value, v: ir.Value) -> ir.Value:
        """x where x is +-0 (an odd function's zero keeps its sign: sin(-0) = -0), else v."""
        return self.b.select(self.b.fcmp_ordered("==", x, self.c(0.0)), x, v)

    def sin(self, x: ir.Value) -> ir.Value:
        return self.keep_zero(x, self._sincos(x, False))

    def cos(self, x: ir.Value) -> ir.Value:
        return self._sincos(x, True)

    def tan(self, x: ir.Value) -> ir.Value:
        """sin(r) / cos(r), or -cos(r) / sin(r) for odd quadrants, one reduction. f32: in
        f64; f64: as double-doubles (trig_dd.py). Both within 1 ulp."""
        b = self.b
        m, r, rl, q = self._reduce(x)
        odd = b.icmp_unsigned("!=", b.and_(q, m.ic(1)), m.ic(0))
        if self.is64:  # -0 stays -0 (the double-double sum would give +0)
            v = trig_dd.tan(m, r, rl, odd)
            return self._finish(x, b.select(b.fcmp_ordered("==", x, self.c(0.0)), x, v))
        s, c = self._sin_cos_poly(m, r)
        num, den = b.select(odd, b.fneg(c), s), b.select(odd, s, c)
        # 1 / den to 2^-28 suffices (den is nonzero: r = 0 only at x = 0, an even q)
        return self.keep_zero(x, self._finish(x, b.fmul(num, m.recip28(den))))


