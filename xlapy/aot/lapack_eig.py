"""Hermitian eigendecomposition and SVD inside the object: jaxlib's `lapack_?syevd_ffi` /
`lapack_?heevd_ffi` and `lapack_?gesdd_ffi` by Jacobi rotations, which need nothing but
loops, + - * / and sqrt, and are at least as accurate as LAPACK's divide and conquer
(Demmel and Veselic, "Jacobi's method is more accurate than QR", 1992).

syevd: cyclic two-sided Jacobi on the Hermitian matrix rebuilt from the `uplo` triangle.
Pair (p, q) with a_pq = g e (g = |a_pq|, |e| = 1) is rotated by J = [[c, s e], [-s conj(e),
c]] (c, s from theta = (a_qq - a_pp) / 2g as in Golub and Van Loan's sym.schur2), which
zeroes a_pq: A <- J^H A J, V <- V J. Eigenvalues come sorted ascending, eigenvectors are
V's columns.

gesdd: one-sided (Hestenes) Jacobi on the tall one of A and A^H: the same rotation on the
Gram matrix's pair (||t_p||^2, ||t_q||^2, t_p^H t_q) applied to the columns of T and V, until
every pair of columns is orthogonal. Singular values are the column norms, sorted
descending; U's columns the normalized ones, completed to an orthonormal basis (Gram-Schmidt
on unit vectors, twice) where the rank or mode 'A' needs more columns.

A rotation is skipped when |a_pq| <= eps sqrt(|a_pp a_qq|) (the relative criterion that
makes Jacobi accurate) or below eps^2 times the matrix's norm (rounding noise); sweeps stop
once none is made, after at most MAX_SWEEPS (quadratic convergence needs far fewer). Each
eigenvector and singular vector pair is unique only up to a unit factor (sign or phase),
and LAPACK's choice is not a rule that can be reproduced: the AOT tests compare such results
after fixing each vector's phase (tests/aot/test_aot_corpus.py).
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod

import numpy as np
from llvmlite import ir

from xlapy.aot.lapack import batch_of, char, copy_matrix, leaves
from xlapy.aot.lapack_kit import Kit, i32
from xlapy.backends.cpu.llvm_util import i64
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET
from xlapy.types import Shape

MAX_SWEEPS = 40


def _eps(k: Kit) -> float:
    return float(np.finfo(np.float32 if k.rt is ET.F32 else np.float64).eps) / 2


class Rotation:
    """c, s and the phase e of the Jacobi rotation of a pair (a_pp, a_qq, a_pq = g e)."""

    def __init__(self, k: Kit, app: ir.Value, aqq: ir.Value, apq: ir.Value, g: ir.Value
                 ) -> None:
        b = k.b
        one = k.rc(1.0)
        theta = b.fdiv(b.fsub(aqq, app), b.fmul(k.rc(2.0), g))
        at = k.fabs(theta)
        big = b.select(b.fcmp_ordered(">", at, one), at, one)  # sqrt(theta^2 + 1), no overflow
        hyp = b.fmul(big, k.sqrt(b.fadd(_sq(b, b.fdiv(theta, big)), _sq(b, b.fdiv(one, big)))))
        t = b.fdiv(k.copysign(one, theta), b.fadd(at, hyp))
        self.c = b.fdiv(one, k.sqrt(b.fadd(_sq(b, t), one)))
        self.s = b.fmul(t, self.c)
        self.e = k.div(apq, k.of_real(g)) if k.cx else k.copysign(one, apq)
        self.k = k

    def columns(self, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(x, y) J: x' = c x - s conj(e) y, y' = s e x + c y."""
        k = self.k
        se = k.scale(self.s, self.e) if k.cx else k.b.fmul(self.s, self.e)
        return (k.sub(k.scale(self.c, x), k.mul(k.conj(se), y)),
                k.add(k.mul(se, x), k.scale(self.c, y)))

    def rows(self, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
        """J^H (x; y): x' = c x - s e y, y' = s conj(e) x + c y."""
        k = self.k
        se = k.scale(self.s, self.e) if k.cx else k.b.fmul(self.s, self.e)
        return (k.sub(k.scale(self.c, x), k.mul(se, y)),
                k.add(k.mul(k.conj(se), x), k.scale(self.c, y)))


def _sq(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.fmul(x, x)


def _rotate_columns(k: Kit, w: ir.Value, rows: int, ld: int, p: ir.Value, q: ir.Value,
                    rot: Rotation) -> None:
    with k.loop(0, rows, name="rcol") as i:
        ip, iq = k.at(i64(0), i, ld, p), k.at(i64(0), i, ld, q)
        x, y = rot.columns(k.ld(w, ip), k.ld(w, iq))
        k.st(w, ip, x)
        k.st(w, iq, y)


def _identity(k: Kit, v: ir.Value, n: int) -> None:
    b = k.b
    with k.loop(0, n, name="ir") as i, k.loop(0, n, name="ic") as j:
        k.st(v, k.at(i64(0), i, n, j), b.select(b.icmp_signed("==", i, j), k.c(1.0), k.c(0.0)))


def _sweeps(k: Kit, pair: Callable[[ir.Value, ir.Value], ir.Value], n: int) -> None:
    """Cyclic sweeps over the pairs p < q of n until one rotates nothing: `pair(p, q)`
    emits one pair's test and rotation and returns an i1 "rotated"."""
    b = k.b
    busy = k.var(ir.Constant(ir.IntType(1), 1), "busy")
    with k.loop(0, MAX_SWEEPS, name="sweep"):
        with k.when(busy.get()):
            busy.set(ir.Constant(ir.IntType(1), 0))
            with k.loop(0, n, name="p") as p, k.loop(b.add(p, i64(1)), i64(n), name="q") as q:
                with k.when(pair(p, q)):
                    busy.set(ir.Constant(ir.IntType(1), 1))


def _worth(k: Kit, g: ir.Value, app: ir.Value, aqq: ir.Value, floor: ir.Value) -> ir.Value:
    """Rotate: g > eps sqrt(|app aqq|) and g > floor."""
    b = k.b
    rel = b.fmul(k.rc(_eps(k)), k.sqrt(k.fabs(b.fmul(app, aqq))))
    return b.and_(b.fcmp_ordered(">", g, rel), b.fcmp_ordered(">", g, floor))


def syevd(mod: ir.Module, name: str, instr: Instruction, et: ET) -> tuple[ir.Function, int]:
    lower = char(instr, "uplo", "LU", "L") == "L"
    vectors = char(instr, "mode", "VN", "V") == "V"
    a = instr.operands[0].shape
    n = a.dimensions[-1]
    k = Kit(mod, name, et)
    b = k.b
    src, out0 = k.operand(0, et), k.result(0, et)
    w_out, info_out = k.result(1, k.rt), k.result(2, ET.S32)
    item = np.dtype(et.dtype).itemsize
    work = k.scratch(0, k.t)
    v = out0 if vectors else k.scratch(n * n * item, k.t)
    if not vectors:
        copy_matrix(k, src, out0, prod(a.dimensions))
    floor = k.var(k.rc(0.0), "floor")
    with k.loop(0, batch_of(a), name="batch") as bi:
        base = b.mul(bi, i64(n * n))
        vb = base if vectors else i64(0)
        vm = b.gep(v, [vb])
        norm2 = k.var(k.rc(0.0), "norm2")
        with k.loop(0, n, name="hr") as i, k.loop(0, n, name="hc") as j:
            mine = b.icmp_signed(">=" if lower else "<=", i, j)
            x = b.select(mine, k.ld(src, k.at(base, i, n, j)),
                         k.conj(k.ld(src, k.at(base, j, n, i))))
            x = b.select(b.icmp_signed("==", i, j), k.of_real(k.re(x)), x)
            k.st(work, k.at(i64(0), i, n, j), x)
            norm2.set(b.fadd(norm2.get(), k.abs2(x)))
        floor.set(b.fmul(k.rc(_eps(k) ** 2), k.sqrt(norm2.get())))
        _identity(k, vm, n)

        def pair(p: ir.Value, q: ir.Value) -> ir.Value:
            pq = k.at(i64(0), p, n, q)
            apq = k.ld(work, pq)
            g = k.sqrt(k.abs2(apq))
            app, aqq = (k.re(k.ld(work, k.at(i64(0), x, n, x))) for x in (p, q))
            go = _worth(k, g, app, aqq, floor.get())
            with k.when(go):
                rot = Rotation(k, app, aqq, apq, g)
                _rotate_columns(k, work, n, n, p, q, rot)
                with k.loop(0, n, name="rrow") as c:
                    pc, qc = k.at(i64(0), p, n, c), k.at(i64(0), q, n, c)
                    x, y = rot.rows(k.ld(work, pc), k.ld(work, qc))
                    k.st(work, pc, x)
                    k.st(work, qc, y)
                for x, y in ((p, q), (q, p)):
                    k.st(work, k.at(i64(0), x, n, y), k.c(0.0))
                for x in (p, q):
                    xx = k.at(i64(0), x, n, x)
                    k.st(work, xx, k.of_real(k.re(k.ld(work, xx))))
                _rotate_columns(k, vm, n, n, p, q, rot)
            return go

        _sweeps(k, pair, n)
        wb = b.gep(w_out, [b.mul(bi, i64(n))])
        with k.loop(0, n, name="wd") as i:
            k.st(wb, i, k.re(k.ld(work, k.at(i64(0), i, n, i))))
        _sort(k, wb, vm, n, n, ascending=True)
        k.st(info_out, bi, i32(0))
    return k.done(), (1 if vectors else 2) * n * n * item


def _sort(k: Kit, vals: ir.Value, cols: ir.Value, rows: int, ld: int, ascending: bool,
          n: int | None = None, extra: tuple[ir.Value, int, int] | None = None) -> None:
    """Selection sort of `vals` (n real values), swapping the columns of `cols` (rows x ld)
    and of `extra` (pointer, rows, ld) alike."""
    b = k.b
    n = rows if n is None else n
    best = k.var(i64(0), "best")
    with k.loop(0, n, name="si") as i:
        best.set(i)
        with k.loop(b.add(i, i64(1)), i64(n), name="sj") as j:
            better = b.fcmp_ordered("<" if ascending else ">", k.ld(vals, j),
                                    k.ld(vals, best.get()))
            with k.when(better):
                best.set(j)
        p = best.get()
        with k.when(b.icmp_signed("!=", p, i)):
            x, y = k.ld(vals, i), k.ld(vals, p)
            k.st(vals, i, y)
            k.st(vals, p, x)
            for ptr, r, lda in [(cols, rows, ld)] + ([extra] if extra else []):
                with k.loop(0, r, name="sw") as row:
                    ri, rp = k.at(i64(0), row, lda, i), k.at(i64(0), row, lda, p)
                    x, y = k.ld(ptr, ri), k.ld(ptr, rp)
                    k.st(ptr, ri, y)
                    k.st(ptr, rp, x)


def gesdd(mod: ir.Module, name: str, instr: Instruction, et: ET) -> tuple[ir.Function, int]:
    a = instr.operands[0].shape
    m, n = a.dimensions[-2:]
    outs = leaves(instr)
    full = outs[2].dimensions[-2:] == (m, m) and outs[3].dimensions[-2:] == (n, n)
    mode = char(instr, "mode", "ASN", "A" if full else "S")
    tall = m >= n
    r, c = (m, n) if tall else (n, m)  # T: r x c (stored with row length r), V: c x c
    k = Kit(mod, name, et)
    b = k.b
    src = k.operand(0, et)
    a_out, s_out, u_out, vt_out = (k.result(j, t) for j, t in
                                   enumerate((et, k.rt, et, et)))
    info_out = k.result(4, ET.S32)
    item = np.dtype(et.dtype).itemsize
    t = k.scratch(0, k.t)
    v = k.scratch(r * r * item, k.t)
    copy_matrix(k, src, a_out, prod(a.dimensions))
    if mode == "N":  # no vectors: zeros, as the JIT gives
        for p, s in ((u_out, outs[2]), (vt_out, outs[3])):
            with k.loop(0, prod(s.dimensions), name="zero") as i:
                k.st(p, i, k.c(0.0))
    # only the relative test: U's columns must be orthogonal however small their norms
    # (a rank-deficient A's noise-level singular values too); the floor is underflow's
    floor = k.rc(float(np.finfo(np.float32 if k.rt is ET.F32 else np.float64).tiny))
    acc = k.var(k.c(0.0), "acc")
    na, nb = k.var(k.rc(0.0), "na"), k.var(k.rc(0.0), "nb")
    with k.loop(0, batch_of(a), name="batch") as bi:
        base = b.mul(bi, i64(m * n))
        with k.loop(0, r, name="tr") as i, k.loop(0, c, name="tc") as j:
            x = k.ld(src, k.at(base, i, n, j)) if tall else \
                k.conj(k.ld(src, k.at(base, j, n, i)))
            k.st(t, k.at(i64(0), i, r, j), x)
        _identity(k, v, c)

        def pair(p: ir.Value, q: ir.Value) -> ir.Value:
            na.set(k.rc(0.0))
            nb.set(k.rc(0.0))
            acc.set(k.c(0.0))
            with k.loop(0, r, name="g") as i:
                tp, tq = k.ld(t, k.at(i64(0), i, r, p)), k.ld(t, k.at(i64(0), i, r, q))
                na.set(b.fadd(na.get(), k.abs2(tp)))
                nb.set(b.fadd(nb.get(), k.abs2(tq)))
                acc.set(k.add(acc.get(), k.mul(k.conj(tp), tq)))
            g = k.sqrt(k.abs2(acc.get()))
            go = _worth(k, g, na.get(), nb.get(), floor)
            with k.when(go):
                rot = Rotation(k, na.get(), nb.get(), acc.get(), g)
                _rotate_columns(k, t, r, r, p, q, rot)
                _rotate_columns(k, v, c, c, p, q, rot)
            return go

        _sweeps(k, pair, c)
        sb = b.gep(s_out, [b.mul(bi, i64(c))])
        with k.loop(0, c, name="sn") as j:
            na.set(k.rc(0.0))
            with k.loop(0, r, name="sr") as i:
                na.set(b.fadd(na.get(), k.abs2(k.ld(t, k.at(i64(0), i, r, j)))))
            k.st(sb, j, k.sqrt(na.get()))
        _sort(k, sb, t, r, r, ascending=False, n=c, extra=(v, c, c))
        if mode != "N":
            _orthonormal_columns(k, t, sb, r, c, r if mode == "A" else c)
            _write_vectors(k, bi, t, v, u_out, vt_out, m, n, r, c, tall, outs)
        k.st(info_out, bi, i32(0))
    return k.done(), (r * r + c * c) * item


def _orthonormal_columns(k: Kit, t: ir.Value, sigma: ir.Value, r: int, c: int,
                         width: int) -> None:
    """T's first `width` columns orthonormal: columns with sigma > 0 divided by it, the
    others (zero singular values, and columns c .. width) Gram-Schmidt completions."""
    b = k.b
    rank = k.var(i64(0), "rank")
    with k.loop(0, c, name="nu") as j:
        s = k.ld(sigma, j)
        with k.when(b.fcmp_ordered(">", s, k.rc(0.0))):
            rank.set(b.add(j, i64(1)))
            with k.loop(0, r, name="nr") as i:
                at = k.at(i64(0), i, r, j)
                k.st(t, at, k.div(k.ld(t, at), k.of_real(s)))
    best, best_norm = k.var(i64(0), "bi"), k.var(k.rc(-1.0), "bn")
    dot, nrm = k.var(k.c(0.0), "dot"), k.var(k.rc(0.0), "nrm")

    def candidate(j: ir.Value, e: ir.Value) -> None:
        """Column j := e_e orthogonalized twice against columns 0 .. j."""
        with k.loop(0, r, name="ce") as i:
            k.st(t, k.at(i64(0), i, r, j), b.select(b.icmp_signed("==", i, e), k.c(1.0),
                                                    k.c(0.0)))
        for _ in range(2):
            with k.loop(i64(0), j, name="cp") as p:
                dot.set(k.c(0.0))
                with k.loop(0, r, name="cd") as i:
                    dot.set(k.add(dot.get(), k.mul(k.conj(k.ld(t, k.at(i64(0), i, r, p))),
                                                   k.ld(t, k.at(i64(0), i, r, j)))))
                with k.loop(0, r, name="cs") as i:
                    at = k.at(i64(0), i, r, j)
                    k.st(t, at, k.sub(k.ld(t, at),
                                      k.mul(dot.get(), k.ld(t, k.at(i64(0), i, r, p)))))
        nrm.set(k.rc(0.0))
        with k.loop(0, r, name="cn") as i:
            nrm.set(b.fadd(nrm.get(), k.abs2(k.ld(t, k.at(i64(0), i, r, j)))))

    with k.loop(rank.get(), i64(width), name="cj") as j:
        best_norm.set(k.rc(-1.0))
        with k.loop(0, r, name="ctry") as e:
            candidate(j, e)
            with k.when(b.fcmp_ordered(">", nrm.get(), best_norm.get())):
                best_norm.set(nrm.get())
                best.set(e)
        candidate(j, best.get())
        inv = k.of_real(k.sqrt(nrm.get()))
        with k.loop(0, r, name="cz") as i:
            at = k.at(i64(0), i, r, j)
            k.st(t, at, k.div(k.ld(t, at), inv))


def _write_vectors(k: Kit, bi: ir.Value, t: ir.Value, v: ir.Value, u_out: ir.Value,
                   vt_out: ir.Value, m: int, n: int, r: int, c: int, tall: bool,
                   outs: list[Shape]) -> None:
    """u and vt from T (r x r, row length r) and V (c x c): A = T S V^H when m >= n, else
    A^H = T S V^H, so u = V and vt = T^H."""
    b = k.b
    ucols = outs[2].dimensions[-1]
    vrows = outs[3].dimensions[-2]
    ub = b.gep(u_out, [b.mul(bi, i64(m * ucols))])
    vb = b.gep(vt_out, [b.mul(bi, i64(vrows * n))])
    with k.loop(0, m, name="ur") as i, k.loop(0, ucols, name="uc") as j:
        x = k.ld(t, k.at(i64(0), i, r, j)) if tall else k.ld(v, k.at(i64(0), i, c, j))
        k.st(ub, k.at(i64(0), i, ucols, j), x)
    with k.loop(0, vrows, name="vr") as i, k.loop(0, n, name="vc") as j:
        x = k.ld(v, k.at(i64(0), j, c, i)) if tall else k.ld(t, k.at(i64(0), j, r, i))
        k.st(vb, k.at(i64(0), i, n, j), k.conj(x))


__all__ = ["syevd", "gesdd", "MAX_SWEEPS", "Rotation"]

