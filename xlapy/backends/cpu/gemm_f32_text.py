"""gemm_f32's hot code as text (ir_text.py): the MR x 16 nv register kernels and the packing
of A's tiles and B's panels, two modules compiled at -O3 on compile threads while the driver
(gemm_f32.py, -O0) is built; the driver calls them through its table.

Written with llvmlite's IR objects these took ~20 ms of Python to build and print, holding
the GIL on the build-ahead thread while a program's first call waited for them (the MLP's
first call: the kernels are built once per process). Here an instruction is an f-string.
"""

from __future__ import annotations

from xlapy.backends.cpu.ir_text import FunctionText, Value

V8 = "<8 x float>"


def _fma(w: int) -> str:
    v = f"<{w} x float>"
    return f"declare {v} @llvm.fma.v{w}f32({v}, {v}, {v})"


def _vec(f: FunctionText, base: str, at: Value, w: int = 16) -> str:
    """A <w x float>* at base + at (floats)."""
    return f.cast(f.gep("float", base, at), "float*", f"<{w} x float>*")


def _vec8(f: FunctionText, base: str, at: Value) -> str:
    """A <8 x float>* at base + at (floats)."""
    return f.cast(f.gep("float", base, at), "float*", f"{V8}*")


def kernel(name: str, nv: int, mr: int, nr: int, unroll: int, w: int = 16) -> str:
    """name(ap, bp, kc, c, ldc, first): c[mr, w nv] (row stride ldc) = (first ? 0 : c) +
    the A tile ([k][mr]) @ the panel's first w nv columns ([k][nr]), one FMA chain per
    element in k order; `unroll` k steps per iteration, the rest one at a time (unroll 1:
    one loop); vectors of w floats."""
    V = f"<{w} x float>"
    f = FunctionText(f"define void @{name}(float* noalias %ap, float* noalias %bp, i64 %kc, "
                     f"float* noalias %c, i64 %ldc, i1 %first)")
    f.do("br i1 %first, label %start, label %load")
    f.label("load")  # a later k block continues C's sums; the first never reads C
    loaded = []
    for r in range(mr):
        row = f.mul(r, "%ldc")
        for v in range(nv):
            p = _vec(f, "%c", f.add(row, w * v), w)
            loaded.append(f.op(f"load {V}, {V}* {p}, align 4"))
    f.do("br label %start")
    f.label("start")
    accs = [f.op(f"phi {V} [zeroinitializer, %entry], [{x}, %load]") for x in loaded]

    def step(k: Value, accs: list[str]) -> list[str]:
        bk = f.gep("float", "%bp", f.mul(k, nr))
        ak = f.gep("float", "%ap", f.mul(k, mr))
        bv = [f.op(f"load {V}, {V}* {_vec(f, bk, w * v, w)}, align 64") for v in range(nv)]
        new = []
        for r in range(mr):
            s = f.load("float", f.gep("float", ak, r))
            one = f.op(f"insertelement {V} zeroinitializer, float {s}, i32 0")
            s = f.op(f"shufflevector {V} {one}, {V} zeroinitializer, <{w} x i32> "
                     f"zeroinitializer")
            for v in range(nv):
                new.append(f.op(f"call {V} @llvm.fma.v{w}f32({V} {s}, {V} {bv[v]}, "
                                f"{V} {accs[r * nv + v]})"))
        return new

    def loop(lo: Value, hi: Value, n: int, accs: list[str]) -> list[str]:
        """accs after steps lo .. hi (hi - lo a multiple of n), as phis."""
        pre = f.block
        body, done = f.fresh("k")[1:], f.fresh("k.end")[1:]
        f.do(f"br i1 {f.icmp('slt', lo, hi)}, label %{body}, label %{done}")
        f.label(body)
        k, at = f.fresh("k"), f.later()
        phis = [(f.fresh("acc"), f.later()) for _ in accs]
        cur = [p for p, _ in phis]
        for u in range(n):
            cur = step(f.add(k, u), cur)
        nxt = f.op(f"add nsw i64 {k}, {n}")
        f.write_at(at, f"{k} = phi i64 [{lo}, %{pre}], [{nxt}, %{body}]")
        for (p, line), x0, x1 in zip(phis, accs, cur):
            f.write_at(line, f"{p} = phi {V} [{x0}, %{pre}], [{x1}, %{body}]")
        f.do(f"br i1 {f.icmp('slt', nxt, hi)}, label %{body}, label %{done}")
        f.label(done)
        return [f.op(f"phi {V} [{x0}, %{pre}], [{x1}, %{body}]") for x0, x1 in zip(accs, cur)]

    if unroll > 1:
        whole = f.mul(f.binop("sdiv", "%kc", unroll), unroll)
        accs = loop(0, whole, unroll, accs)
        accs = loop(whole, "%kc", 1, accs)
    else:
        accs = loop(0, "%kc", 1, accs)
    for r in range(mr):
        row = f.mul(r, "%ldc")
        for v in range(nv):
            f.do(f"store {V} {accs[r * nv + v]}, {V}* {_vec(f, '%c', f.add(row, w * v), w)}, "
                 f"align 4")
    f.do("ret void")
    return f.text()


def pack_a(name: str, mr: int) -> str:
    """name(a, lda, mc, kc, ap): ap[t][k][r] = a[(t*mr + r) * lda + k], 0 past mc rows."""
    return _pack_a(name, mr, False)


def pack_a_t(name: str, mr: int) -> str:
    """name(a, lda, mc, kc, ap) for an A stored transposed (A[i, k] = a[k * lda + i]):
    ap[t][k][r] = a[k * lda + t*mr + r], 0 past mc rows; whole tiles one vector a k."""
    return _pack_a(name, mr, True)


def _pack_a(name: str, mr: int, transposed: bool) -> str:
    f = FunctionText(f"define void @{name}(float* %a, i64 %lda, i64 %mc, i64 %kc, float* %ap)")
    tiles = f.binop("sdiv", f.add("%mc", mr - 1), mr)
    full = f.binop("sdiv", "%mc", mr)
    tile_floats = f.mul("%kc", mr)
    vt = f"<{mr} x float>"
    with f.loop(0, full, "t") as t:
        dst = f.gep("float", "%ap", f.mul(t, tile_floats))
        if transposed:
            src = f.gep("float", "%a", f.mul(t, mr))
            with f.loop(0, "%kc", "k") as k:
                p = f.cast(f.gep("float", src, f.mul(k, "%lda")), "float*", f"{vt}*")
                x = f.op(f"load {vt}, {vt}* {p}, align 4")
                q = f.cast(f.gep("float", dst, f.mul(k, mr)), "float*", f"{vt}*")
                f.do(f"store {vt} {x}, {vt}* {q}, align 4")
        else:
            rows = [f.gep("float", "%a", f.mul(f.add(f.mul(t, mr), r), "%lda"))
                    for r in range(mr)]
            with f.loop(0, "%kc", "k") as k:
                at = f.mul(k, mr)
                for r in range(mr):
                    f.store("float", f.load("float", f.gep("float", rows[r], k)),
                            f.gep("float", dst, f.add(at, r)))
    with f.loop(full, tiles, "tt") as t:  # the last, partial tile: zeros past mc
        dst = f.gep("float", "%ap", f.mul(t, tile_floats))
        with f.loop(0, "%kc", "kt") as k:
            with f.loop(0, mr, "rt") as r:
                row = f.add(f.mul(t, mr), r)
                inside = f.icmp("slt", row, "%mc")
                row0 = f.op(f"select i1 {inside}, i64 {row}, i64 0")
                at = f.add(f.mul(k, "%lda"), row0) if transposed else \
                    f.add(f.mul(row0, "%lda"), k)
                x = f.load("float", f.gep("float", "%a", at))
                f.store("float", f.op(f"select i1 {inside}, float {x}, float 0.0"),
                        f.gep("float", dst, f.add(f.mul(k, mr), r)))
    f.do("ret void")
    return f.text()


def pack_b(name: str, nv: int, w: int = 16) -> str:
    """name(b, ldb, kc, nr, bp): bp[k][j] = b[k * ldb + j] for j < nr, 0 up to w nv."""
    nr = w * nv
    V = f"<{w} x float>"
    f = FunctionText(f"define void @{name}(float* %b, i64 %ldb, i64 %kc, i64 %nr, float* %bp)")
    then, other, end = f.if_else(f.icmp("eq", "%nr", nr))
    f.label(then)
    with f.loop(0, "%kc", "k") as k:
        row, at = f.mul(k, "%ldb"), f.mul(k, nr)
        for v in range(nv):
            x = f.op(f"load {V}, {V}* {_vec(f, '%b', f.add(row, w * v), w)}, align 4")
            f.do(f"store {V} {x}, {V}* {_vec(f, '%bp', f.add(at, w * v), w)}, align 64")
    f.do(f"br label %{end}")
    f.label(other)
    _partial_panel(f, nr, False)
    f.do(f"br label %{end}")
    f.label(end)
    f.do("ret void")
    return f.text()


def _partial_panel(f: FunctionText, nr: int, transposed: bool) -> None:
    """pack_b's (pack_b_t's) panel of fewer than nr columns: one float at a time, zeros
    past %nr."""
    with f.loop(0, "%kc", "kp") as k:
        at = f.mul(k, nr)
        with f.loop(0, nr, "j") as j:
            inside = f.icmp("slt", j, "%nr")
            j0 = f.op(f"select i1 {inside}, i64 {j}, i64 0")
            src = f.add(f.mul(j0, "%ldb"), k) if transposed else f.add(f.mul(k, "%ldb"), j0)
            x = f.load("float", f.gep("float", "%b", src))
            f.store("float", f.op(f"select i1 {inside}, float {x}, float 0.0"),
                    f.gep("float", "%bp", f.add(at, j)))


def _transpose8(f: FunctionText, rows: list[str]) -> list[str]:
    """The 8 columns of the 8 x 8 block whose rows are `rows` (<8 x float> values): three
    butterfly stages, each swapping the off-diagonal h x h blocks of every 2h x 2h block
    (h = 4, 2, 1)."""
    for h in (4, 2, 1):
        lo = [c if c & h == 0 else 8 + c - h for c in range(8)]  # row i's, then i+h's
        hi = [c + h if c & h == 0 else 8 + c for c in range(8)]
        out = list(rows)
        for i in (i for i in range(8) if not i & h):
            for at, mask in ((i, lo), (i + h, hi)):
                m = ", ".join(f"i32 {v}" for v in mask)
                out[at] = f.op(f"shufflevector {V8} {rows[i]}, {V8} {rows[i + h]}, "
                               f"<8 x i32> <{m}>")
        rows = out
    return rows


def pack_b_t(name: str, nv: int, w: int = 16) -> str:
    """name(b, ldb, kc, nr, bp) for a B stored transposed (B[k, j] = b[j * ldb + k]):
    bp[k][j] = b[j * ldb + k] for j < nr, 0 up to w nv. Whole panels go in 8 x 8 blocks
    (8 row loads, `_transpose8`, 8 stores) in a loop over the panel's w nv / 8 column
    groups: unrolled, or in 16 x 16 blocks, the module took 45 ms more to compile; the last
    kc % 8 rows go one float at a time."""
    nr = w * nv
    f = FunctionText(f"define void @{name}(float* %b, i64 %ldb, i64 %kc, i64 %nr, float* %bp)")
    then, other, end = f.if_else(f.icmp("eq", "%nr", nr))
    f.label(then)
    blocks = f.binop("sdiv", "%kc", 8)
    with f.loop(0, blocks, "kb") as kb:
        k0 = f.mul(kb, 8)
        with f.loop(0, nr // 8, "g") as g:
            src = f.gep("float", "%b", f.add(f.mul(f.mul(g, 8), "%ldb"), k0))
            rows = [f.op(f"load {V8}, {V8}* {_vec8(f, src, f.mul(j, '%ldb'))}, align 4")
                    for j in range(8)]
            dst = f.gep("float", "%bp", f.add(f.mul(k0, nr), f.mul(g, 8)))
            for kk, col in enumerate(_transpose8(f, rows)):
                f.do(f"store {V8} {col}, {V8}* {_vec8(f, dst, kk * nr)}, align 4")
    with f.loop(f.mul(blocks, 8), "%kc", "kr") as k:
        with f.loop(0, nr, "jr") as j:
            x = f.load("float", f.gep("float", "%b", f.add(f.mul(j, "%ldb"), k)))
            f.store("float", x, f.gep("float", "%bp", f.add(f.mul(k, nr), j)))
    f.do(f"br label %{end}")
    f.label(other)
    _partial_panel(f, nr, True)
    f.do(f"br label %{end}")
    f.label(end)
    f.do("ret void")
    return f.text()


def modules(prefix: str, mr: int, nv: int, unroll: int, w: int = 16
            ) -> list[tuple[str, list[str]]]:
    """The hot code as two modules of about equal code generation time (~11 ms each, so
    they compile on two threads), each (text, its functions): {prefix}_kernel{nv} (the
    widest, unrolled) with {prefix}_pack_b and {prefix}_pack_a_t; {prefix}_kernel1 ..
    kernel{nv-1} with {prefix}_pack_a and {prefix}_pack_b_t. Vectors of w floats."""
    nr = w * nv
    wide, narrow = f"{prefix}_kernel{nv}", [f"{prefix}_kernel{k}" for k in range(1, nv)]
    first = [kernel(wide, nv, mr, nr, unroll, w), pack_b(f"{prefix}_pack_b", nv, w),
             pack_a_t(f"{prefix}_pack_a_t", mr)]
    second = [kernel(name, k, mr, nr, 1, w) for k, name in enumerate(narrow, 1)]
    second += [pack_a(f"{prefix}_pack_a", mr), pack_b_t(f"{prefix}_pack_b_t", nv, w)]
    return [("\n".join([_fma(w), *first]), [wide, f"{prefix}_pack_b", f"{prefix}_pack_a_t"]),
            ("\n".join([_fma(w), *second]), [*narrow, f"{prefix}_pack_a", f"{prefix}_pack_b_t"])]


__all__ = ["kernel", "modules", "pack_a", "pack_a_t", "pack_b", "pack_b_t"]
