"""Power-of-two f32 FFTs as one JIT function (text IR, ir_text.py): a radix-4 Stockham
transform in split form (real and imaginary parts in arrays of their own), vectorized along
each stage's butterflies with the target's vector width W.

Why: the PyPI FFT libraries here (ducc0, numpy's and scipy's pocketfft) are built for SSE
only, and each call is a Python call: a 256 x 4096 rfft ran 1.7x XLA's time on Zen 4 and
a fori_loop of 1024-point fft/ifft 1.9x.

Stockham (decimation in time, self-sorting), radix 4: stage Ns = 1, 4, 16, ... (after one
radix-2 stage Ns = 1 when log2(n) is odd) reads butterfly j (j < n/4) from x[j + r n/4],
r = 0..3, multiplies x_r by w^r, w = exp(-+2 pi i k / 4Ns) (k = j mod Ns), and writes the
4-point DFT to y[(j / Ns) 4Ns + k + s Ns], s = 0..3: half the passes over the scratch of
radix 2 (whose 4096-point transforms spilled L1 and ran 1.3x DUCC's time). The stages with
Ns < W interleave their outputs in blocks of Ns then 2Ns lanes (shuffles; twiddles periodic
vectors); the rest write whole vectors, twiddles contiguous loads from the stage's tables.
Each element's value depends only on n and the direction, never on the row split.

A real transform of n = 2N points is an N-point complex one of its even and odd elements
as real and imaginary parts, then a pass that separates the two (`_post`); the inverse runs
that pass first (`_pre`), on the N + 1 half spectrum with the imaginary parts of its first
and last elements dropped (numpy's and XLA's c2r read only their real parts).

The function: fft(in, out, r0, r1, nc, tw, scratch, kind, ldin, ldout) transforms rows
[r0, r1) (row strides ldin, ldout in floats; complex data interleaved as c64) with nc the
complex core's length (n for kinds 0 fft and 1 ifft, n / 2 for 2 rfft and 3 irfft), `tw`
the direction's table (fft_jit.table) and `scratch` 4 (nc + W) floats of the calling
thread's. Inverse transforms scale by 1 / nc at the end, as numpy's.
"""

from __future__ import annotations

from xlapy.backends.cpu.ir_text import FunctionText, Value

NAME = "xlapy_fft_f32"
#: A native loop's step (loop_library.py): STEP(d, _, _) with d the words [table, operand
#: slot, result, rows, nc, tw, scratch, kind, ldin, ldout] runs NAME over all rows of the
#: operand the loop's table points at.
STEP = "xlapy_fft_step"
#: kind codes.
FFT, IFFT, RFFT, IRFFT = 0, 1, 2, 3


def log2(n: int) -> int:
    return n.bit_length() - 1


class _Emit:
    def __init__(self, w: int) -> None:
        self.w = w
        self.v = f"<{w} x float>"
        self.f = FunctionText(
            f"define void @{NAME}(float* noalias %in, float* noalias %out, i64 %r0, i64 %r1, "
            f"i64 %nc, float* noalias %tw, float* noalias %scratch, i64 %kind, i64 %ldin, "
            f"i64 %ldout)")

    # vectors
    def vload(self, base: str, at: Value) -> str:
        f, v = self.f, self.v
        p = f.cast(f.gep("float", base, at), "float*", f"{v}*")
        return f.op(f"load {v}, {v}* {p}, align 4")

    def vstore(self, x: str, base: str, at: Value) -> None:
        f, v = self.f, self.v
        p = f.cast(f.gep("float", base, at), "float*", f"{v}*")
        f.do(f"store {v} {x}, {v}* {p}, align 4")

    def shuffle(self, a: str, b: str, mask: list[int]) -> str:
        m = ", ".join(f"i32 {i}" for i in mask)
        return self.f.op(f"shufflevector {self.v} {a}, {self.v} {b}, <{len(mask)} x i32> <{m}>")

    def arith(self, op: str, a: str, b: str) -> str:
        return self.f.op(f"{op} {self.v} {a}, {b}")

    def fma(self, a: str, b: str, c: str) -> str:
        """a * b + c (fused where the target has FMA)."""
        v = self.v
        return self.f.op(f"call {v} @llvm.fmuladd.v{self.w}f32({v} {a}, {v} {b}, {v} {c})")

    def splat(self, x: str) -> str:
        f, v = self.f, self.v
        one = f.op(f"insertelement {v} poison, float {x}, i32 0")
        return f.op(f"shufflevector {v} {one}, {v} poison, <{self.w} x i32> zeroinitializer")

    def cmul(self, ar: str, ai: str, br: str, bi: str) -> tuple[str, str]:
        """(ar + i ai)(br + i bi)."""
        re = self.fma(ar, br, self.f.op(f"fneg {self.v} {self.arith('fmul', ai, bi)}"))
        im = self.fma(ar, bi, self.arith("fmul", ai, br))
        return re, im

    def reverse(self, x: str) -> str:
        return self.shuffle(x, x, list(range(self.w - 1, -1, -1)))

    def deinterleave(self, src: str, at: Value) -> tuple[str, str]:
        """(re, im) of the W complex numbers at src + at (floats)."""
        x0, x1 = self.vload(src, at), self.vload(src, self.f.add(at, self.w))
        return (self.shuffle(x0, x1, list(range(0, 2 * self.w, 2))),
                self.shuffle(x0, x1, list(range(1, 2 * self.w, 2))))

    def zip(self, a: str, b: str, m: int) -> tuple[str, str]:
        """The two w-vectors of a and b interleaved in blocks of m lanes (`_blocks`)."""
        mask = _blocks(self.w, m)
        return self.shuffle(a, b, mask[:self.w]), self.shuffle(a, b, mask[self.w:])

    def interleave(self, re: str, im: str, dst: str, at: Value) -> None:
        """Stores re and im lane by lane (c64 values) at dst + at (floats)."""
        lo, hi = self.zip(re, im, 1)
        self.vstore(lo, dst, at)
        self.vstore(hi, dst, self.f.add(at, self.w))


def _blocks(w: int, m: int) -> list[int]:
    """The mask interleaving two w-vectors in blocks of m lanes (2w lanes out)."""
    mask = []
    for p in range(2 * w):
        q, r = divmod(p, 2 * m)
        mask.append(q * m + r if r < m else w + q * m + r - m)
    return mask


def _stage_pairs(e: _Emit, src: tuple[str, str], dst: tuple[str, str]) -> None:
    """The radix-2 stage Ns = 1 (an odd log2(nc)'s first): y[2j] = x[j] + x[j + nc/2],
    y[2j + 1] = their difference."""
    f, w = e.f, e.w
    half = f.binop("sdiv", "%nc", 2)
    with f.loop(0, f.binop("sdiv", half, w), "sp") as v:
        j0 = f.mul(v, w)
        j1 = f.add(j0, half)
        for part in (0, 1):
            a, b = e.vload(src[part], j0), e.vload(src[part], j1)
            e.interleave(e.arith("fadd", a, b), e.arith("fsub", a, b), dst[part], f.mul(j0, 2))


def _butterfly4(e: _Emit, v: list[tuple[str, str]], tw: list[tuple[str, str]] | None,
                sign: str) -> list[tuple[str, str]]:
    """The 4-point DFT of v[r] * tw[r-1]: y0 = a0 + a2, y1 = a1 + s i (v1 - v3) ... with
    a0 = v0 + v2, a1 = v0 - v2, a2 = v1 + v3; s = -1 forward (`sign` splats 1 forward, -1
    inverse: multiplying by it is exact, so y1, y3 are single roundings as adds would be)."""
    if tw is not None:
        v = [v[0]] + [e.cmul(*v[r], *tw[r - 1]) for r in (1, 2, 3)]
    (v0r, v0i), (v1r, v1i), (v2r, v2i), (v3r, v3i) = v
    a0 = (e.arith("fadd", v0r, v2r), e.arith("fadd", v0i, v2i))
    a1 = (e.arith("fsub", v0r, v2r), e.arith("fsub", v0i, v2i))
    a2 = (e.arith("fadd", v1r, v3r), e.arith("fadd", v1i, v3i))
    dr, di = e.arith("fsub", v1r, v3r), e.arith("fsub", v1i, v3i)
    neg = e.f.op(f"fneg {e.v} {sign}")
    y0 = (e.arith("fadd", a0[0], a2[0]), e.arith("fadd", a0[1], a2[1]))
    y2 = (e.arith("fsub", a0[0], a2[0]), e.arith("fsub", a0[1], a2[1]))
    y1 = (e.fma(sign, di, a1[0]), e.fma(neg, dr, a1[1]))
    y3 = (e.fma(neg, di, a1[0]), e.fma(sign, dr, a1[1]))
    return [y0, y1, y2, y3]


def _stage4_small(e: _Emit, ns: int, src: tuple[str, str], dst: tuple[str, str],
                  sign: str) -> None:
    """Radix-4 stage Ns < W: the four outputs interleaved in blocks of Ns (then 2Ns) lanes;
    the twiddles periodic vectors at nc + (3 log2(Ns) + r) W."""
    f, w = e.f, e.w
    q = f.binop("sdiv", "%nc", 4)
    tw = None
    if ns > 1:
        at = [f.add("%nc", (3 * log2(ns) + r) * w) for r in range(3)]
        tw = [(e.vload("%tw", x), e.vload("%twi", x)) for x in at]
    with f.loop(0, f.binop("sdiv", q, w), "s4") as v:
        j0 = f.mul(v, w)
        idx = [f.add(j0, f.mul(q, r)) for r in range(4)]
        ys = _butterfly4(e, [(e.vload(src[0], x), e.vload(src[1], x)) for x in idx], tw, sign)
        out = f.mul(j0, 4)
        for part in (0, 1):
            y = [t[part] for t in ys]
            p, r = e.zip(y[0], y[1], ns), e.zip(y[2], y[3], ns)
            for c, x in enumerate([*e.zip(p[0], r[0], 2 * ns), *e.zip(p[1], r[1], 2 * ns)]):
                e.vstore(x, dst[part], f.add(out, c * w))


def _stage4_big(e: _Emit, ns: str, src: tuple[str, str], dst: tuple[str, str],
                sign: str) -> None:
    """Radix-4 stage Ns >= W (a runtime value): whole vectors; twiddles w1 = tw[2Ns + k],
    w2 = tw[Ns + k] (the radix-2 table's) and w3 = tw3[Ns + k]."""
    f, w = e.f, e.w
    q = f.binop("sdiv", "%nc", 4)
    groups = f.binop("sdiv", q, ns)
    per = f.binop("sdiv", ns, w)
    ns2 = f.mul(ns, 2)
    with f.loop(0, groups, "sg") as g:
        base_in = f.mul(g, ns)
        base_out = f.mul(base_in, 4)
        with f.loop(0, per, "sk") as v:
            k = f.mul(v, w)
            i0 = f.add(base_in, k)
            idx = [f.add(i0, f.mul(q, r)) for r in range(4)]
            at = [f.add(ns2, k), f.add(ns, k)]
            tw = [(e.vload("%tw", x), e.vload("%twi", x)) for x in at]
            tw.append((e.vload("%tw3", at[1]), e.vload("%tw3i", at[1])))
            ys = _butterfly4(e, [(e.vload(src[0], x), e.vload(src[1], x)) for x in idx], tw,
                             sign)
            o0 = f.add(base_out, k)
            for r, y in enumerate(ys):
                o = f.add(o0, f.mul(ns, r))
                e.vstore(y[0], dst[0], o)
                e.vstore(y[1], dst[1], o)


def _mirror(e: _Emit, x: tuple[str, str], k0: str | int
            ) -> tuple[tuple[str, str], tuple[str, str], tuple[str, str]]:
    """For k = k0 .. k0 + W - 1 (split x): x[k] + conj(x[N - k]), x[k] - conj(x[N - k])
    (N - k read as a reversed vector) and the real transforms' twiddle at k (re, im)."""
    f, w = e.f, e.w
    back = f.add(f.binop("sub", "%nc", k0), 1 - w)
    xr, xi = e.vload(x[0], k0), e.vload(x[1], k0)
    rr, ri = e.reverse(e.vload(x[0], back)), e.reverse(e.vload(x[1], back))
    return ((e.arith("fadd", xr, rr), e.arith("fsub", xi, ri)),
            (e.arith("fsub", xr, rr), e.arith("fadd", xi, ri)),
            (e.vload("%twp", k0), e.vload("%twpi", k0)))


def _post(e: _Emit, fin: tuple[str, str], row: str) -> None:
    """rfft: the N-point transform F of the even/odd pairs -> X[0..N] (interleaved)."""
    f, w = e.f, e.w
    half = e.splat("0.5")
    n = "%nc"
    for part in (0, 1):  # F[N] = F[0]: the reversed loads read it
        f.store("float", f.load("float", fin[part]), f.gep("float", fin[part], n))
    with f.loop(0, f.binop("sdiv", n, w), "rp") as v:
        k0 = f.mul(v, w)
        (a_r, a_i), (b_r, b_i), (c, s) = _mirror(e, fin, k0)
        xr = e.arith("fmul", half, e.fma(c, b_i, e.fma(s, b_r, a_r)))
        xi = e.arith("fmul", half, e.fma(s, b_i, e.arith("fsub", a_i, e.arith("fmul", c, b_r))))
        e.interleave(xr, xi, row, f.mul(k0, 2))
    last = f.op(f"fsub float {f.load('float', fin[0])}, {f.load('float', fin[1])}")
    at = f.mul(n, 2)
    f.store("float", last, f.gep("float", row, at))
    f.store("float", "0.0", f.gep("float", row, f.add(at, 1)))


def _pre(e: _Emit, a: tuple[str, str], b: tuple[str, str]) -> None:
    """irfft: X[0..N] (split, in a) -> the N-point spectrum Z of the even/odd pairs (in b)."""
    f, w = e.f, e.w
    half = e.splat("0.5")
    n = "%nc"
    with f.loop(0, f.binop("sdiv", n, w), "rq") as v:
        k0 = f.mul(v, w)
        (a_r, a_i), (b_r, b_i), (c, s) = _mirror(e, a, k0)
        zr = e.arith("fsub", a_r, e.fma(c, b_i, e.arith("fmul", s, b_r)))
        zi = e.arith("fsub", e.fma(c, b_r, a_i), e.arith("fmul", s, b_i))
        e.vstore(e.arith("fmul", half, zr), b[0], k0)
        e.vstore(e.arith("fmul", half, zi), b[1], k0)


def _small(w: int, start: int) -> list[int]:
    """The radix-4 stages Ns = start, 4 start, ... under w."""
    out = []
    while start < w:
        out.append(start)
        start *= 4
    return out


def function(w: int) -> str:
    """The module text of NAME for vectors of w floats (w a power of two >= 4)."""
    e = _Emit(w)
    f = e.f
    lw = log2(w)
    table = f.add("%nc", 3 * lw * w)  # floats of each part of the stage table
    f.do(f"%twi = getelementptr float, float* %tw, i64 {table}")
    f.do(f"%twp = getelementptr float, float* %twi, i64 {table}")
    f.do("%twpi = getelementptr float, float* %twp, i64 %nc")
    f.do("%tw3 = getelementptr float, float* %twpi, i64 %nc")
    f.do("%tw3i = getelementptr float, float* %tw3, i64 %nc")
    pad = f.add("%nc", w)
    bufs = [f.gep("float", "%scratch", f.mul(pad, i)) for i in range(4)]
    a, b = (bufs[0], bufs[1]), (bufs[2], bufs[3])
    kind = "%kind"
    irfft = f.icmp("eq", kind, IRFFT)
    inverse = f.op(f"or i1 {f.icmp('eq', kind, IFFT)}, {irfft}")
    ncf = f.op("sitofp i64 %nc to float")
    scale = f.op(f"select i1 {inverse}, float {f.op(f'fdiv float 1.0, {ncf}')}, float 1.0")
    scale_v = e.splat(scale)
    sign = e.splat(f.op(f"select i1 {inverse}, float -1.0, float 1.0"))
    stages = f.op("call i64 @llvm.cttz.i64(i64 %nc, i1 true)")
    first = f.op(f"zext i1 {irfft} to i64")  # irfft's stages start in b
    with f.loop("%r0", "%r1", "row") as r:
        src = f.gep("float", "%in", f.mul(r, "%ldin"))
        dst = f.gep("float", "%out", f.mul(r, "%ldout"))
        with f.loop(0, f.binop("sdiv", "%nc", w), "di") as v:
            t0 = f.mul(v, w)
            re, im = e.deinterleave(src, f.mul(t0, 2))
            e.vstore(re, a[0], t0)
            e.vstore(im, a[1], t0)
        with f.if_then(irfft):  # X[N] (its real part; X[0]'s and X[N]'s imaginary parts: 0)
            at = f.mul("%nc", 2)
            f.store("float", f.load("float", f.gep("float", src, at)), f.gep("float", a[0], "%nc"))
            f.store("float", "0.0", f.gep("float", a[1], "%nc"))
            f.store("float", "0.0", a[1])
            _pre(e, a, b)

        def pick(parity: str) -> tuple[tuple[str, str], tuple[str, str]]:
            odd = f.op(f"trunc i64 {parity} to i1")
            s = tuple(f.op(f"select i1 {odd}, float* {y}, float* {x}") for x, y in zip(a, b))
            d = tuple(f.op(f"select i1 {odd}, float* {x}, float* {y}") for x, y in zip(a, b))
            return s, d  # type: ignore[return-value]

        # log2(nc) odd: the radix-2 stage Ns = 1, then radix-4 from Ns = 2; else from 1
        odd_path, even_path, merge = f.if_else(f.op(f"trunc i64 {stages} to i1"))
        ends = []
        for label, small, pairs in ((odd_path, _small(w, 2), True),
                                    (even_path, _small(w, 1), False)):
            f.label(label)
            done = 0
            if pairs:
                _stage_pairs(e, *pick(f.op(f"and i64 {f.add(first, 0)}, 1")))
                done = 1
            for ns in small:
                _stage4_small(e, ns, *pick(f.op(f"and i64 {f.add(first, done)}, 1")), sign)
                done += 1
            big = (small[-1] * 4) if small else (2 if pairs else 1)
            ends.append((f.block, big, done))
            f.do(f"br label %{merge}")
        f.label(merge)
        ns0 = f.op("phi i64 " + ", ".join(f"[{b}, %{blk}]" for blk, b, _ in ends))
        done0 = f.op("phi i64 " + ", ".join(f"[{d}, %{blk}]" for blk, _, d in ends))
        rest = f.binop("sdiv", f.binop("sub", stages, f.op(
            f"call i64 @llvm.cttz.i64(i64 {ns0}, i1 true)")), 2)
        with f.loop(0, rest, "st") as t:
            ns = f.op(f"shl i64 {ns0}, {f.mul(t, 2)}")
            _stage4_big(e, ns, *pick(f.op(f"and i64 {f.add(first, f.add(done0, t))}, 1")),
                        sign)
        total = f.add(done0, rest)
        fin, _ = pick(f.op(f"and i64 {f.add(first, total)}, 1"))
        then, other, end = f.if_else(f.icmp("eq", kind, RFFT))
        f.label(then)
        _post(e, fin, dst)
        f.do(f"br label %{end}")
        f.label(other)
        with f.loop(0, f.binop("sdiv", "%nc", w), "io") as v:
            t0 = f.mul(v, w)
            re = e.arith("fmul", e.vload(fin[0], t0), scale_v)
            im = e.arith("fmul", e.vload(fin[1], t0), scale_v)
            e.interleave(re, im, dst, f.mul(t0, 2))
        f.do(f"br label %{end}")
        f.label(end)
    f.do("ret void")
    v = e.v
    decls = [f"declare {v} @llvm.fmuladd.v{w}f32({v}, {v}, {v})",
             "declare i64 @llvm.cttz.i64(i64, i1)"]
    return "\n".join(decls) + "\n" + f.text() + _step()


def _step() -> str:
    f = FunctionText(f"define void @{STEP}(i8** %d0, i64 %lo, i64 %hi)")
    d = f.cast("%d0", "i8**", "i64*")
    words = [f.load("i64", f.gep("i64", d, i)) for i in range(10)]
    table = f.op(f"inttoptr i64 {words[0]} to i64*")
    src = f.load("i64", f.gep("i64", table, words[1]))
    ptrs = {0: src, 1: words[2], 5: words[5], 6: words[6]}
    args = []
    for j, word in enumerate([None, None, None, *words[3:]]):
        if j in ptrs:
            args.append(f"float* {f.op(f'inttoptr i64 {ptrs[j]} to float*')}")
        elif j == 2:
            args.append("i64 0")
        else:
            args.append(f"i64 {word}")
    f.do(f"call void @{NAME}({', '.join(args)})")
    f.do("ret void")
    return f.text()


__all__ = ["function", "NAME", "STEP", "FFT", "IFFT", "RFFT", "IRFFT"]
