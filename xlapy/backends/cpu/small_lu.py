"""Batches of small real LU factorizations (?getrf), lower Cholesky factorizations (?potrf)
and left triangular solves (?trsm) as JIT loops with each matrix's rows in vector registers:
jnp.linalg.inv / solve / cholesky / cho_solve under vmap (complex getrf and trsm:
small_lu_complex.py; complex QR: small_qr_complex.py; through the same functions).

LAPACK costs ~200 ns a call before any arithmetic (OpenBLAS takes its locked buffer
allocator, and getrf wants the batch transposed to Fortran order and back): 65536 4 x 4
inverses took 28 ms (getrf 14.7, each trsm 4.8), XLA's jaxlib the same 24 (it calls the same
LAPACK). Here a matrix of n <= MAX_N rows is n vectors: the pivot search, the row swap (a
select per row) and the rank-1 update of each column are unrolled straight-line code.

The arithmetic is unblocked LAPACK's (sgetf2: the first largest pivot, multipliers scaled by
the pivot's reciprocal, a division below the smallest normal; info the first zero pivot;
strsm: the reference loop order, divisions by the diagonal; spotf2 as OpenBLAS runs it on
the transposed view, left-looking, stopping at the first non-positive pivot with the state
LAPACK leaves), so results agree with LAPACK
within rounding, not bit for bit: OpenBLAS's own kernels (a left-looking getf2 whose dot and
gemv sums are ordered by the CPU's kernel) give other bits on other CPUs anyway.
small_qr.py's geqrf and orgqr are functions of this module's kind too (built, cached and
run through `function` and `runner`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import cache, parallel, small_lu_complex, target
from xlapy.backends.cpu.batch_call import check_info
from xlapy.backends.cpu.llvm_util import (
    F32,
    F64,
    I32,
    I64,
    broadcast,
    for_range,
    i64,
    intrinsic,
    new_module,
    sfx,
)
from xlapy.backends.cpu.threads import call
from xlapy.backends.cpu.thunks import ptr

#: The largest matrices (n x n; a trsm's right-hand sides: n rows of at most MAX_N) taken.
#: Xeon (Sapphire Rapids), 2 threads, 8192 f32 getrf through LAPACK's loop -> here: n = 4
#: 1.71 -> 0.17 ms, 8 5.07 -> 0.71, 16 10.7 -> 3.0 (trsm 3.9 -> 0.98); the unrolled code's
#: cold compile (cached on disk after) 10 / 27 / ~110 ms, at 24 0.6-1.2 s, at 48 19-35 s.
MAX_N = 16
#: Matrix elements (a batch's) from which it splits over the threads.
SPLIT_ELEMENTS = 1 << 14
NAME = "xlapy_small"
_SFMIN = {t: float(np.finfo(np.float32 if t in "sc" else np.float64).tiny) for t in "sdcz"}
#: (the LLVM type of an element or of its parts, the NumPy type) by LAPACK prefix.
_TYPES = {"s": (F32, np.float32), "d": (F64, np.float64), "c": (F32, np.complex64),
          "z": (F64, np.complex128)}


def _load_rows(b: ir.IRBuilder, base: ir.Value, rows: int, cols: int, vt: ir.VectorType,
               size: int) -> list[ir.Value]:
    out = []
    for i in range(rows):
        v = b.load(b.bitcast(b.gep(base, [i64(i * cols)]), vt.as_pointer()))
        v.align = size
        out.append(v)
    return out


def _store_rows(b: ir.IRBuilder, base: ir.Value, rows: list[ir.Value], cols: int,
                size: int) -> None:
    for i, v in enumerate(rows):
        b.store(v, b.bitcast(b.gep(base, [i64(i * cols)]), v.type.as_pointer())).align = size


def _fmuladd(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    """x * y + z, fused where the target has FMA (as OpenBLAS's kernels: one rounding)."""
    return intrinsic(b, f"llvm.fmuladd.{sfx(x.type)}", x.type, [x, y, z])


def _getrf_body(b: ir.IRBuilder, t: str, n: int, a: ir.Value, piv: ir.Value,
                info_at: ir.Value) -> None:
    """Factor the n x n row-major matrix at `a` in place; 1-based pivots to piv[0:n], the
    first zero pivot's 1-based index (or 0) to *info_at."""
    et, _ = _TYPES[t]
    size = 4 if et == F32 else 8
    vt = ir.VectorType(et, n)
    fabs = f"llvm.fabs.{'f32' if et == F32 else 'f64'}"
    rows = _load_rows(b, a, n, n, vt, size)
    info: ir.Value = ir.Constant(I32, 0)
    for j in range(n):
        col = [b.extract_element(rows[i], ir.Constant(I32, j)) for i in range(j, n)]
        best, p = intrinsic(b, fabs, et, [col[0]]), ir.Constant(I32, j)
        for i in range(j + 1, n):  # the first largest magnitude (isamax: NaNs never win)
            v = intrinsic(b, fabs, et, [col[i - j]])
            gt = b.fcmp_ordered(">", v, best)
            best, p = b.select(gt, v, best), b.select(gt, ir.Constant(I32, i), p)
        b.store(b.add(p, ir.Constant(I32, 1)), b.gep(piv, [i64(j)]))
        top = rows[j]
        for i in range(j + 1, n):  # swap rows j and p
            here = b.icmp_signed("==", p, ir.Constant(I32, i))
            rows[j] = b.select(here, rows[i], rows[j])
            rows[i] = b.select(here, top, rows[i])
        pivot = b.extract_element(rows[j], ir.Constant(I32, j))
        zero = b.fcmp_ordered("==", pivot, ir.Constant(et, 0.0))
        first = b.and_(zero, b.icmp_signed("==", info, ir.Constant(I32, 0)))
        info = b.select(first, ir.Constant(I32, j + 1), info)
        if j == n - 1:
            break
        recip = b.fdiv(ir.Constant(et, 1.0), pivot)
        tiny = b.fcmp_ordered("<", intrinsic(b, fabs, et, [pivot]), ir.Constant(et, _SFMIN[t]))
        keep = ir.Constant(ir.VectorType(I32, n), [k if k <= j else n + k for k in range(n)])
        for i in range(j + 1, n):
            c = b.extract_element(rows[i], ir.Constant(I32, j))
            lv = b.select(zero, c, b.select(tiny, b.fdiv(c, pivot), b.fmul(c, recip)))
            upd = _fmuladd(b, broadcast(b, b.fneg(lv), n), rows[j], rows[i])
            rows[i] = b.insert_element(b.shuffle_vector(rows[i], upd, keep), lv,
                                       ir.Constant(I32, j))
    _store_rows(b, a, rows, n, size)
    b.store(info, info_at)


def _trsm_body(b: ir.IRBuilder, t: str, s: int, m: int, flags: tuple[bool, bool, int, bool],
               a: ir.Value, x: ir.Value) -> None:
    """op(A) X = B in place of the s x m row-major B at x, A s x s row-major at a (flags:
    left (always), lower, trans (0 / 1 / 2), unit): each row of X one vector, in the order
    and with the divisions of the reference strsm."""
    _, lower, trans, unit = flags
    et, _ = _TYPES[t]
    size = 4 if et == F32 else 8
    rows = _load_rows(b, x, s, m, ir.VectorType(et, m), size)

    def at(i: int, k: int) -> ir.Value:
        r, c = (i, k) if trans == 0 else (k, i)
        return b.load(b.gep(a, [i64(r * s + c)]))

    down = lower != (trans != 0)  # the effective triangle is lower: solve from the top
    for i in (range(s) if down else range(s - 1, -1, -1)):
        v = rows[i]
        for k in (range(i) if down else range(s - 1, i, -1)):
            v = _fmuladd(b, broadcast(b, b.fneg(at(i, k)), m), rows[k], v)
        if not unit:
            v = b.fdiv(v, broadcast(b, at(i, i), m))
        rows[i] = v
    _store_rows(b, x, rows, m, size)


def _potrf_body(b: ir.IRBuilder, t: str, n: int, a: ir.Value, info_at: ir.Value) -> None:
    """The lower Cholesky factor of the n x n row-major matrix at `a` in place (its upper
    triangle left as given), as OpenBLAS's potf2 on the transposed view computes it (left-
    looking: column j from the finished ones, a dot of row j with itself, then each row's
    dot with row j scaled by 1 / L[j][j]); at the first non-positive pivot d it stores d,
    stops (nothing after it changes, as LAPACK returns there) and *info_at = j + 1."""
    et, _ = _TYPES[t]
    size = 4 if et == F32 else 8
    vt = ir.VectorType(et, n)
    rows = _load_rows(b, a, n, n, vt, size)
    info: ir.Value = ir.Constant(I32, 0)
    live: ir.Value = ir.Constant(ir.IntType(1), 1)
    zero = ir.Constant(vt, None)

    def dot(x: ir.Value, y: ir.Value, j: int) -> ir.Value:  # lanes below j, in order
        lanes = b.shuffle_vector(b.fmul(x, y), zero, ir.Constant(
            ir.VectorType(I32, n), [k if k < j else n for k in range(n)]))
        return intrinsic(b, f"llvm.vector.reduce.fadd.{sfx(vt)}", et,
                         [ir.Constant(et, -0.0), lanes])

    for j in range(n):
        lane = ir.Constant(I32, j)
        d = b.extract_element(rows[j], lane)
        if j:
            d = b.fsub(d, dot(rows[j], rows[j], j))
        bad = b.fcmp_ordered("<=", d, ir.Constant(et, 0.0))  # (a NaN goes on, as potf2's)
        root = intrinsic(b, f"llvm.sqrt.{sfx(et)}", et, [d])
        pivot = b.select(bad, d, root)
        rows[j] = b.select(live, b.insert_element(rows[j], pivot, lane), rows[j])
        first = b.and_(live, bad)
        info = b.select(first, ir.Constant(I32, j + 1), info)
        live = b.and_(live, b.not_(bad))
        if j == n - 1:
            break
        recip = b.fdiv(ir.Constant(et, 1.0), root)
        for i in range(j + 1, n):
            c = b.extract_element(rows[i], lane)
            if j:
                c = b.fsub(c, dot(rows[j], rows[i], j))
            rows[i] = b.select(live, b.insert_element(rows[i], b.fmul(c, recip), lane),
                               rows[i])
    _store_rows(b, a, rows, n, size)
    b.store(info, info_at)


def _module(kind: str, t: str, dims: tuple[int, ...], flags: tuple[Any, ...]) -> ir.Module:
    """NAME(p0, p1, p2, lo, hi) over matrices lo..hi of the batch: getrf (a, pivots, info),
    a factored in place; potrf (a, 0, info) likewise; trsm (a, x, 0), x solved in place
    against a; geqrf (a, tau, 0), a factored in place; orgqr (a, tau, 0), a replaced by Q.
    (A native loop's step calls it as it calls batch_call's loops: loop_lapack.py.)"""
    mod = new_module(f"{NAME}_{kind}")
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [I64] * 5), name=NAME)
    p0, p1, p2, lo, hi = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    et, _ = _TYPES[t]
    a0 = b.inttoptr(p0, et.as_pointer())
    w = 2 if t in "cz" else 1  # (parts an element)
    with for_range(b, lo, hi, "m") as k:
        if kind == "getrf":
            (n,) = dims
            a = b.gep(a0, [b.mul(k, i64(w * n * n))])
            piv = b.gep(b.inttoptr(p1, I32.as_pointer()), [b.mul(k, i64(n))])
            info = b.gep(b.inttoptr(p2, I32.as_pointer()), [k])
            if w == 2:
                small_lu_complex.getrf_body(b, n, a, piv, info, _SFMIN[t])
            else:
                _getrf_body(b, t, n, a, piv, info)
        elif kind == "potrf":
            (n,) = dims
            _potrf_body(b, t, n, b.gep(a0, [b.mul(k, i64(n * n))]),
                        b.gep(b.inttoptr(p2, I32.as_pointer()), [k]))
        elif kind == "trsm":
            s, m = dims
            x = b.gep(b.inttoptr(p1, et.as_pointer()), [b.mul(k, i64(w * s * m))])
            a = b.gep(a0, [b.mul(k, i64(w * s * s))])
            if w == 2:
                small_lu_complex.trsm_body(b, s, m, flags, a, x)
            else:
                _trsm_body(b, t, s, m, flags, a, x)
        else:  # geqrf (a, tau, 0) / orgqr (a, tau, 0): small_qr's, on these rows
            from xlapy.backends.cpu import small_qr, small_qr_complex
            m, n = dims[:2]
            k_ = dims[2] if kind == "orgqr" else min(m, n)
            a = b.gep(a0, [b.mul(k, i64(w * m * n))])
            tau = b.gep(b.inttoptr(p1, et.as_pointer()), [b.mul(k, i64(w * k_))])
            qr = small_qr_complex if w == 2 else small_qr
            if kind == "geqrf":
                qr.geqrf_body(b, t, m, n, a, tau)
            else:
                qr.orgqr_body(b, t, m, n, k_, a, tau)
    b.ret_void()
    return mod


#: The engines built (each owns its function's code: kept for the process; one per key,
#: under the lock: an engine replaced by a racing thread's would free code in use).
_ENGINES: dict[Any, Any] = {}
_BUILDING = threading.Lock()


def function(kind: str, t: str, dims: tuple[int, ...], flags: tuple[Any, ...] = ()) -> int:
    """The address of NAME for these matrices, built for the current target (once)."""
    ident = ("small_lu", kind, t, dims, flags, target.current())
    with _BUILDING:
        eng = _ENGINES.get(ident)
        if eng is None:
            eng = _ENGINES[ident] = cache.library_engine(
                ident[:-1], lambda: _module(kind, t, dims, flags), "small-lu", light=True,
                vectorize=False, exports=[NAME])
        return eng.address(NAME)


def takes(routine: str, t: str, operands: list[tuple[int, ...]],
          flags: tuple[Any, ...]) -> tuple[str, tuple[int, ...]] | None:
    """(kind, dims) of the function for a getrf / potrf of a [.., n, n], a trsm of a [.., s,
    s], b [.., s, m] (flags: left, lower, trans, unit), a geqrf of a [.., m, n] or an orgqr
    of a [.., m, n], tau [.., k] (small_qr.py's), or None: a right solve, more than
    MAX_N rows or columns, a target that cannot run here, a complex potrf (complex getrf,
    trsm: small_lu_complex.py; geqrf, orgqr (ungqr): small_qr_complex.py)."""
    routine = "orgqr" if routine == "ungqr" else routine  # (complex orgqr's LAPACK name)
    if t not in _TYPES or routine not in ("getrf", "potrf", "trsm", "geqrf", "orgqr") or \
            not target.current().runs_here or t in "cz" and routine == "potrf":
        return None
    *_, m, n = operands[0]
    if routine in ("geqrf", "orgqr"):  # (orgqr: a [.., m, n], tau [.., k], m >= n >= k)
        if not (1 <= m <= MAX_N and 1 <= n <= MAX_N):
            return None
        if routine == "geqrf":
            return "geqrf", (m, n)
        k = operands[1][-1]
        return ("orgqr", (m, n, k)) if m >= n >= k else None
    if routine in ("getrf", "potrf"):  # (potrf: the lower factor only, flags (lower,))
        ok = m == n and 1 <= n <= MAX_N and (routine == "getrf" or flags[0])
        return (routine, (n,)) if ok else None
    rows, cols = operands[1][-2:]
    if not flags[0] or rows != n or not 1 <= n <= MAX_N or not 1 <= cols <= MAX_N:
        return None
    return "trsm", (n, cols)


def runner(kind: str, t: str, dims: tuple[int, ...], flags: tuple[Any, ...]
           ) -> Callable[[int, int, tuple[int, int, int]], None]:
    """run(batch, threads, pointers): the function over the batch, split over the threads
    from SPLIT_ELEMENTS (each range whole on one thread: the bits never depend on it)."""
    tgt = target.current()
    fn: list[int] = []
    each = math.prod(dims) * (1 if kind in ("trsm", "orgqr") else min(dims))

    def run(batch: int, threads: int, ptrs: tuple[int, int, int]) -> None:
        if not fn:
            with target.use(tgt):
                fn.append(function(kind, t, dims, flags))
        parts = max(1, min(threads, batch * each // SPLIT_ELEMENTS))
        if parts == 1:
            call(fn[0], *ptrs, 0, batch)
            return
        cuts = [batch * k // parts for k in range(parts + 1)]
        pool = parallel.pool(threads)
        futs = [pool.submit(fn[0], *ptrs, cuts[k], cuts[k + 1]) for k in range(1, parts)]
        call(fn[0], *ptrs, cuts[0], cuts[1])
        for f in futs:
            f.result()

    return run


def _factor(kind: str, t: str, n: int, check: Callable[[int], int]
            ) -> Callable[..., tuple[np.ndarray, ...]]:
    """run(a [B.., n, n]) -> (a factored, (getrf: its 1-based int32 pivots,) info (int32))."""
    go = runner(kind, t, (n,), ())
    dt = _TYPES[t][1]

    def run(a: np.ndarray, threads: int = 1) -> tuple[np.ndarray, ...]:
        lead = a.shape[:-2]
        c = np.array(a, dtype=dt, order="C")  # (a copy: factored in place)
        piv = [np.empty((*lead, n), np.int32)] if kind == "getrf" else []
        info = np.empty(lead, np.int32)
        go(math.prod(lead), threads, (ptr(c), ptr(piv[0]) if piv else 0, ptr(info)))
        check_info(info, check)
        return (c, *piv, info)

    run.every = True  # type: ignore[attr-defined]  (one matrix too: lapack._with_batch)
    return run


def getrf(t: str, m: int, n: int, check: Callable[[int], int]
          ) -> Callable[..., tuple[np.ndarray, ...]] | None:
    """run(a [B.., n, n]) -> (lu, pivots (1-based, int32), info (int32)) as
    lapack_batch.getrf, or None where the function does not take it (`takes`)."""
    return None if takes("getrf", t, [(m, n)], ()) is None else _factor("getrf", t, n, check)


def potrf(t: str, lower: bool, n: int, check: Callable[[int], int]
          ) -> Callable[..., tuple[np.ndarray, ...]] | None:
    """run(a [B.., n, n]) -> (the lower factor, the upper triangle as given; info (int32))
    as lapack_batch.potrf, or None where the function does not take it (`takes`)."""
    return None if takes("potrf", t, [(n, n)], (lower,)) is None else \
        _factor("potrf", t, n, check)


def trsm(t: str, flags: tuple[bool, bool, int, bool], s: int, b_dims: tuple[int, int]
         ) -> Callable[..., tuple[np.ndarray]] | None:
    """run(a [B.., s, s], b [B.., s, m]) -> (op(a)^-1 b,) as lapack_batch.trsm for a left
    solve (b_dims: b's last two), or None where the function does not take it (`takes`)."""
    if takes("trsm", t, [(s, s), b_dims], flags) is None:
        return None
    m = b_dims[1]
    go = runner("trsm", t, (s, m), flags)
    dt = _TYPES[t][1]

    def run(a: np.ndarray, b: np.ndarray, threads: int = 1) -> tuple[np.ndarray]:
        lead = b.shape[:-2]
        if a.shape[:-2] != lead:
            a = np.broadcast_to(a, (*lead, s, s))
        a = np.ascontiguousarray(a, dtype=dt)
        x = np.array(b, dtype=dt, order="C")  # (a copy: solved in place)
        go(math.prod(lead), threads, (ptr(a), ptr(x), 0))
        return (x,)

    run.every = True  # type: ignore[attr-defined]
    return run


__all__ = ["getrf", "potrf", "trsm", "function", "takes", "runner", "MAX_N", "SPLIT_ELEMENTS",
           "NAME"]
