"""Eigenvalues of a nonsymmetric matrix inside the object: jaxlib's `lapack_?geev_ffi` with
compute_left = compute_right = 'N' (jnp.linalg.eigvals), as LAPACK 3.12's path for it (the
one scipy's OpenBLAS 0.3.30, which jaxlib calls, runs for n < 75):

1. ?gebal 'B': rows, then columns, that isolate an eigenvalue are permuted to the bottom /
   top (their eigenvalues are diagonal entries), then rows and columns of the rest scaled
   by powers of two until their 2-norms balance (exact: only rounding afterwards changes);
2. ?gehd2: Householder reduction of rows / columns ilo..ihi to upper Hessenberg form;
3. real: dlahqr, Francis double-shift QR with Ahues-Kressner deflation and exceptional
   shifts every 10 iterations without a deflation, 2x2 blocks standardized as dlanv2 does
   (a complex pair: (re, +im) then (re, -im)) (lapack_hqr.py); complex: zlahqr,
   single-shift QR with Wilkinson's shift on a Hessenberg matrix with a real subdiagonal
   (lapack_zhqr.py). `info` = the 1-based row where 30 * max(10, n) iterations did not
   converge.

Following LAPACK's order of operations keeps its order of eigenvalues (a property of the
converged Schur form), which jnp.linalg.eigvals returns as it comes. Not kept: ?geev's
scaling of a matrix whose largest entry is beyond 1e+-150 (f64) and the underflow guards
of larfg / dlanv2, so such matrices lose accuracy. Eigenvectors (compute_left or
compute_right 'V': LAPACK's ?trevc on the Schur form) are refused (`Unimplemented`).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from xlapy.aot.errors import Unimplemented
from xlapy.aot.lapack import batch_of, char, leaves
from xlapy.aot.lapack_hqr import Real, lahqr
from xlapy.aot.lapack_kit import Kit, Var, i32
from xlapy.aot.lapack_zhqr import zlahqr
from xlapy.backends.cpu.llvm_util import i64
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: dgebal's passes over the rows are bounded by the exponent range (2^+-1100 / 2 per
#: step): a cap that no finite matrix reaches stops a NaN from looping.
SCALE_PASSES = 4096


def geev(mod: ir.Module, name: str, instr: Instruction, et: ET) -> tuple[ir.Function, int]:
    target = instr.attrs.call_target_name
    if "V" in (char(instr, "compute_left", "NV", "V"), char(instr, "compute_right", "NV", "V")):
        raise Unimplemented("custom_call", f"{target}: eigenvectors of a nonsymmetric matrix "
                            "(LAPACK's ?trevc on the Schur form) have no in-object "
                            "implementation; eigenvalues only (compute_left = compute_right "
                            "= 'N', jnp.linalg.eigvals) are compiled")
    a = instr.operands[0].shape
    n = a.dimensions[-1]
    k = Kit(mod, name, et)
    b = k.b
    src = k.operand(0, et)
    outs = leaves(instr)
    nw = 1 if et.is_complex else 2  # w, or wr and wi
    ws = [k.result(j, outs[j].element_type) for j in range(nw)]
    vl, vr = (k.result(j, outs[j].element_type) for j in (nw, nw + 1))
    info_out = k.result(nw + 2, ET.S32)
    for p, s in ((vl, outs[nw]), (vr, outs[nw + 1])):  # not computed: zeros
        with k.loop(0, int(np.prod(s.dimensions)), name="zv") as i:
            k.st(p, i, ir.Constant(p.type.pointee, None))
    h = k.scratch(0, k.t)
    scale = k.scratch(n * n * np.dtype(et.dtype).itemsize, k.r)
    info = k.var(i32(0), "info")
    with k.loop(0, batch_of(a), name="batch") as bi:
        base = b.mul(bi, i64(n * n))
        with k.loop(0, n * n, name="in") as i:
            k.st(h, i, k.ld(src, b.add(base, i)))
        info.set(i32(0))
        lo, hi = _balance(k, h, scale, n)
        _hessenberg(k, h, n, lo, hi)
        wb = [b.gep(w, [b.mul(bi, i64(n))]) for w in ws]
        with k.loop(0, n, name="iso") as i:  # eigenvalues isolated by the balancing
            outside = b.or_(b.icmp_signed("<", i, lo), b.icmp_signed(">", i, hi))
            with k.when(outside):
                k.st(wb[0], i, k.ld(h, k.at(i64(0), i, n, i)))
                if not et.is_complex:
                    k.st(wb[1], i, k.rc(0.0))
        if et.is_complex:
            zlahqr(k, h, n, lo, hi, wb[0], info)
        else:
            lahqr(k, h, n, lo, hi, wb[0], wb[1], info)
        k.st(info_out, bi, info.get())
    return k.done(), 2 * n * n * np.dtype(et.dtype).itemsize


def _swap(k: Kit, h: ir.Value, n: int, x: ir.Value, y: ir.Value, lo: ir.Value, hi: ir.Value,
          rows: bool) -> None:
    """Swap rows (rows=True) or columns x and y over the other index range [lo, hi)."""
    with k.loop(lo, hi, name="swp") as t:
        px = k.at(i64(0), x, n, t) if rows else k.at(i64(0), t, n, x)
        py = k.at(i64(0), y, n, t) if rows else k.at(i64(0), t, n, y)
        vx, vy = k.ld(h, px), k.ld(h, py)
        k.st(h, px, vy)
        k.st(h, py, vx)


def _balance(k: Kit, h: ir.Value, scale: ir.Value, n: int) -> tuple[ir.Value, ir.Value]:
    """dgebal 'B' (LAPACK 3.12); returns 0-based (ilo, ihi)."""
    b, r = k.b, Real(k)
    one1, zero1 = ir.Constant(ir.IntType(1), 1), ir.Constant(ir.IntType(1), 0)
    lo, hi = k.var(i64(0), "lo"), k.var(i64(n - 1), "hi")
    done, noconv, can = k.var(zero1, "done"), k.var(one1, "noconv"), k.var(one1, "can")

    def nonzero(i: ir.Value, j: ir.Value) -> ir.Value:
        return b.and_(b.icmp_signed("!=", i, j),
                      b.not_(k.is_zero(k.ld(h, k.at(i64(0), i, n, j)))))

    with k.loop(0, n + 1, name="rpass"):  # rows isolating an eigenvalue, pushed down
        with k.when(b.and_(noconv.get(), b.not_(done.get()))):
            noconv.set(zero1)
            with k.down(0, b.add(hi.get(), i64(1)), name="ri") as i:
                with k.when(b.not_(done.get())):
                    can.set(one1)
                    with k.loop(i64(0), b.add(hi.get(), i64(1)), name="rj") as j:
                        with k.when(nonzero(i, j)):
                            can.set(zero1)
                    with k.when(can.get()):
                        ll = hi.get()
                        with k.when(b.icmp_signed("!=", i, ll)):
                            _swap(k, h, n, i, ll, i64(0), b.add(ll, i64(1)), rows=False)
                            _swap(k, h, n, i, ll, lo.get(), i64(n), rows=True)
                        noconv.set(one1)
                        with k.branches(b.icmp_signed("==", ll, i64(0))) as (last, more):
                            with last:
                                done.set(one1)
                            with more:
                                hi.set(b.sub(ll, i64(1)))
    noconv.set(one1)
    with k.loop(0, n + 1, name="cpass"):  # columns isolating an eigenvalue, pushed left
        with k.when(b.and_(noconv.get(), b.not_(done.get()))):
            noconv.set(zero1)
            with k.loop(lo.get(), b.add(hi.get(), i64(1)), name="cj") as j:
                can.set(one1)
                with k.loop(lo.get(), b.add(hi.get(), i64(1)), name="ci") as i:
                    with k.when(nonzero(i, j)):
                        can.set(zero1)
                with k.when(can.get()):
                    kk = lo.get()
                    with k.when(b.icmp_signed("!=", j, kk)):
                        _swap(k, h, n, j, kk, i64(0), b.add(hi.get(), i64(1)), rows=False)
                        _swap(k, h, n, j, kk, kk, i64(n), rows=True)
                    noconv.set(one1)
                    lo.set(b.add(kk, i64(1)))
    with k.when(b.not_(done.get())):
        _scale(k, r, h, scale, n, lo.get(), hi.get())
    # a fully isolated matrix (done): ilo = ihi = 0
    return (b.select(done.get(), i64(0), lo.get()), b.select(done.get(), i64(0), hi.get()))


def _scale(k: Kit, r: Real, h: ir.Value, scale: ir.Value, n: int, lo: ir.Value,
           hi: ir.Value) -> None:
    """dgebal's norm-balancing loop over rows / columns lo..hi (powers of two)."""
    b = k.b
    one1, zero1 = ir.Constant(ir.IntType(1), 1), ir.Constant(ir.IntType(1), 0)
    radix, factor = 2.0, 0.95
    sfmin1 = r.safmin / r.eps
    sfmax1, sfmin2 = 1 / sfmin1, sfmin1 * radix
    sfmax2 = 1 / sfmin2
    end = b.add(hi, i64(1))
    with k.loop(lo, end, name="s1") as i:
        k.st(scale, i, r.c(1.0))
    noconv = k.var(one1, "sconv")
    v = {x: k.var(r.c(0.0), x) for x in ("c", "r", "ca", "ra", "g", "f", "s", "bca", "bra")}
    go = k.var(one1, "go")

    def acc(name: str, x: ir.Value, square: bool) -> None:
        """A 2-norm's sum of squares, or i?amax's pick (the first largest |re| + |im|,
        whose modulus counts)."""
        if square:
            v[name].set(b.fadd(v[name].get(), k.abs2(x)))
            return
        best = v[f"b{name}"]
        with k.when(b.fcmp_ordered(">", k.cabs1(x), best.get())):
            best.set(k.cabs1(x))
            v[name].set(k.sqrt(k.abs2(x)) if k.cx else r.abs(x))

    with k.loop(0, SCALE_PASSES, name="spass"):
        with k.when(noconv.get()):
            noconv.set(zero1)
            with k.loop(lo, end, name="si") as i:
                for x in ("c", "r", "ca", "ra"):
                    v[x].set(r.c(0.0))
                for x in ("bca", "bra"):
                    v[x].set(r.c(-1.0))
                with k.loop(lo, end, name="sn") as t:
                    acc("c", k.ld(h, k.at(i64(0), t, n, i)), True)
                    acc("r", k.ld(h, k.at(i64(0), i, n, t)), True)
                with k.loop(i64(0), end, name="sca") as t:
                    acc("ca", k.ld(h, k.at(i64(0), t, n, i)), False)
                with k.loop(lo, i64(n), name="sra") as t:
                    acc("ra", k.ld(h, k.at(i64(0), i, n, t)), False)
                c, rr = k.sqrt(v["c"].get()), k.sqrt(v["r"].get())
                v["c"].set(c)
                v["r"].set(rr)
                with k.when(b.and_(r.ne(c, r.c(0.0)), r.ne(rr, r.c(0.0)))):
                    _balance_one(k, r, v, go, radix, sfmax2, sfmin2)
                    f = v["f"].get()
                    s_i = k.ld(scale, i)
                    ok = b.fcmp_ordered("<", b.fadd(v["c"].get(), v["r"].get()),
                                        b.fmul(r.c(factor), v["s"].get()))
                    small = b.and_(b.and_(r.lt(f, r.c(1.0)), r.lt(s_i, r.c(1.0))),
                                   r.le(b.fmul(f, s_i), r.c(sfmin1)))
                    big = b.and_(b.and_(r.lt(r.c(1.0), f), r.lt(r.c(1.0), s_i)),
                                 b.fcmp_ordered(">=", s_i, b.fdiv(r.c(sfmax1), f)))
                    with k.when(b.and_(ok, b.not_(b.or_(small, big)))):
                        g = b.fdiv(r.c(1.0), f)
                        k.st(scale, i, b.fmul(s_i, f))
                        noconv.set(one1)
                        with k.loop(lo, i64(n), name="srow") as t:
                            at = k.at(i64(0), i, n, t)
                            k.st(h, at, k.scale(g, k.ld(h, at)))
                        with k.loop(i64(0), end, name="scol") as t:
                            at = k.at(i64(0), t, n, i)
                            k.st(h, at, k.scale(f, k.ld(h, at)))


def _balance_one(k: Kit, r: Real, v: dict[str, Var], go: Var, radix: float, sfmax2: float,
                 sfmin2: float) -> None:
    """f: the power of two that balances column norm c against row norm r."""
    b = k.b
    one1, zero1 = ir.Constant(ir.IntType(1), 1), ir.Constant(ir.IntType(1), 0)
    g, f, c, rr, ca, ra = (v[x] for x in ("g", "f", "c", "r", "ca", "ra"))
    g.set(b.fdiv(rr.get(), r.c(radix)))
    f.set(r.c(1.0))
    v["s"].set(b.fadd(c.get(), rr.get()))
    go.set(one1)
    with k.loop(0, SCALE_PASSES, name="up"):
        cont = b.and_(b.and_(r.lt(c.get(), g.get()),
                             r.lt(r.max(f.get(), c.get(), ca.get()), r.c(sfmax2))),
                      r.lt(r.c(sfmin2), r.min(rr.get(), g.get(), ra.get())))
        with k.when(b.and_(go.get(), cont)):
            for x, op in ((f, "m"), (c, "m"), (ca, "m"), (rr, "d"), (g, "d"), (ra, "d")):
                x.set(b.fmul(x.get(), r.c(radix)) if op == "m" else
                      b.fdiv(x.get(), r.c(radix)))
        go.set(b.and_(go.get(), cont))
    g.set(b.fdiv(c.get(), r.c(radix)))
    go.set(one1)
    with k.loop(0, SCALE_PASSES, name="dn"):
        cont = b.and_(b.and_(b.fcmp_ordered(">=", g.get(), rr.get()),
                             r.lt(r.max(rr.get(), ra.get()), r.c(sfmax2))),
                      r.lt(r.c(sfmin2), r.min(f.get(), c.get(), g.get(), ca.get())))
        with k.when(b.and_(go.get(), cont)):
            for x, op in ((f, "d"), (c, "d"), (g, "d"), (ca, "d"), (rr, "m"), (ra, "m")):
                x.set(b.fmul(x.get(), r.c(radix)) if op == "m" else
                      b.fdiv(x.get(), r.c(radix)))
        go.set(b.and_(go.get(), cont))
    go.set(zero1)


def _hessenberg(k: Kit, h: ir.Value, n: int, lo: ir.Value, hi: ir.Value) -> None:
    """dgehd2 / zgehd2 on rows / columns lo..hi (reflector j: larfg on column j below the
    subdiagonal; H(j) applied from the right to rows 0..hi, H(j)^H from the left to the
    columns right of j); then every entry below the subdiagonal is zero."""
    b, r = k.b, Real(k)
    xn2, w = k.var(r.c(0.0), "xn2"), k.var(k.c(0.0), "w")
    end = b.add(hi, i64(1))
    with k.loop(lo, hi, name="hj") as i:
        top = k.at(i64(0), b.add(i, i64(1)), n, i)
        alpha = k.ld(h, top)
        xn2.set(r.c(0.0))
        with k.loop(b.add(i, i64(2)), end, name="hx") as t:
            xn2.set(b.fadd(xn2.get(), k.abs2(k.ld(h, k.at(i64(0), t, n, i)))))
        ar, ai = k.re(alpha), k.im(alpha)
        trivial = b.and_(r.eq(xn2.get(), r.c(0.0)), r.eq(ai, r.c(0.0)))
        beta = b.fneg(k.copysign(k.sqrt(b.fadd(k.abs2(alpha), xn2.get())), ar))
        tau = b.select(trivial, k.c(0.0), k.of_parts(b.fdiv(b.fsub(beta, ar), beta),
                                                     b.fdiv(b.fneg(ai), beta)))
        with k.when(b.not_(trivial)):
            scal = k.div(k.c(1.0), k.sub(alpha, k.of_real(beta)))
            with k.loop(b.add(i, i64(2)), end, name="hs") as t:
                at = k.at(i64(0), t, n, i)
                k.st(h, at, k.mul(k.ld(h, at), scal))
        k.st(h, top, k.c(1.0))  # v = h[i+1 .. hi, i] with v[0] = 1

        def vj(t: ir.Value) -> ir.Value:
            return k.ld(h, k.at(i64(0), t, n, i))

        with k.loop(i64(0), end, name="hr") as row:  # right: C[0..hi, i+1..hi] (I - tau v v^H)
            w.set(k.c(0.0))
            with k.loop(b.add(i, i64(1)), end, name="hrs") as t:
                w.set(k.add(w.get(), k.mul(k.ld(h, k.at(i64(0), row, n, t)), vj(t))))
            tw = k.mul(tau, w.get())
            with k.loop(b.add(i, i64(1)), end, name="hru") as t:
                at = k.at(i64(0), row, n, t)
                k.st(h, at, k.sub(k.ld(h, at), k.mul(tw, k.conj(vj(t)))))
        with k.loop(b.add(i, i64(1)), i64(n), name="hl") as col:  # left: (I - tau v v^H)^H C
            w.set(k.c(0.0))
            with k.loop(b.add(i, i64(1)), end, name="hls") as t:
                w.set(k.add(w.get(), k.mul(k.conj(vj(t)), k.ld(h, k.at(i64(0), t, n, col)))))
            tw = k.mul(k.conj(tau), w.get())
            with k.loop(b.add(i, i64(1)), end, name="hlu") as t:
                at = k.at(i64(0), t, n, col)
                k.st(h, at, k.sub(k.ld(h, at), k.mul(tw, vj(t))))
        k.st(h, top, b.select(trivial, alpha, k.of_real(beta)))
    with k.loop(0, n, name="zr") as i, k.loop(i64(0), b.sub(i, i64(1)), name="zc") as j:
        k.st(h, k.at(i64(0), i, n, j), k.c(0.0))


__all__ = ["geev"]
