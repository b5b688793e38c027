"""Library thunks: dot_general through BLAS (?gemm pointers, blas.py; transposes folded into
the call; bf16/f16 computed in f32 and rounded once, as XLA's CPU backend) or, for integers
and pred, the JIT integer GEMM (gemm_int.py); convolution as JIT register-blocked loops
(conv_general.py; conv.py). Linear algebra, FFT and simple sorts: lapack.py.
(Ops lapack.py does not plan - a sort with another comparator - are interpreter fallbacks.)

A dot thunk permutes the operands to (batch..., M, K) x (batch..., K, N) views once per call
(no copies for the common layouts: numpy passes the transpose flag to sgemm/dgemm) and writes
straight into the output buffer (through an accumulator array when the result type is
narrower).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlapy.backends.cpu import (
    dot_shapes,
    gemm_amx,
    gemm_i16,
    gemm_int,
    gemm_skinny,
    gemm_small,
    outer_product,
    recycle,
)
from xlapy.backends.cpu.dot_views import reshaped
from xlapy.backends.cpu.transpose_lib import c_order, gathered, transposed_view
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: Ops run as library thunks through their (numpy/scipy) interpreter kernel: none now.
#: (fft, cholesky, triangular_solve and sort run lapack.py's thunks; a sort it does not take -
#: a complex key, a comparator that is not element-wise - is an interpreter fallback; every
#: convolution is conv_plan's.)
LIBRARY_VIA_KERNEL: frozenset[str] = frozenset()


def dot_accumulator(instr: Instruction) -> np.dtype | None:
    """The dtype a dot_general computes in, as the interpreter's (xlapy/ops/linalg.py): f32
    for bf16/f16 operands (XLA's CPU upcast), 64-bit for integers (the GEMM loop wraps in the
    result width instead: gemm_int.py), the wider of the operands' and a float/complex result
    type; None for what no library thunk computes."""
    from xlapy.ops.linalg import accumulate_dtype

    ts = [o.shape.element_type for o in instr.operands]
    et = instr.shape.element_type
    if et.is_float or et.is_complex:
        ts.append(et)
    acc = np.result_type(*(accumulate_dtype(t) for t in ts))
    return acc if acc.char in "fdFDlLqQ" else None


def dot_cost(instr: Instruction) -> int:
    """Multiply-adds of a dot_general: result elements times the contracted extent."""
    lhs = instr.operands[0].shape
    k = int(np.prod([lhs.dimensions[d] for d in instr.attrs.lhs_contracting_dimensions]))
    return instr.shape.num_elements * k


def exact_float(instr: Instruction) -> np.dtype | None:
    """f32 (else f64) when an integer dot_general computes exactly in it: the operand types'
    magnitudes times the contracted extent k fit its mantissa (_exact_float)."""
    lhs, rhs = (o.shape for o in instr.operands)
    k = int(np.prod([lhs.dimensions[d] for d in instr.attrs.lhs_contracting_dimensions]))
    if not (lhs.element_type.is_integer and rhs.element_type.is_integer):
        return None
    return _exact_float(lhs.dtype, rhs.dtype, k, instr.shape.dtype)


def _exact_float(lhs: np.dtype, rhs: np.dtype, k: int, out: np.dtype) -> np.dtype | None:
    """f32 (else f64) when an integer product of these operand types over k terms computes
    exactly in it: every partial sum is an integer of magnitude at most max|lhs| max|rhs| k,
    exact while that is at most 2^24 (2^53), whatever order BLAS adds in. Only for a signed
    result that holds that bound too (no wraparound to reproduce)."""
    if lhs.kind not in "iu" or rhs.kind not in "iu" or out.kind != "i" or out.itemsize < 4:
        return None

    def most(t: np.dtype) -> int:
        info = np.iinfo(t)
        return max(-int(info.min), int(info.max))

    bound = most(lhs) * most(rhs) * max(k, 1)
    if bound > np.iinfo(out).max:
        return None
    if bound <= 1 << 24:
        return np.dtype(np.float32)
    return np.dtype(np.float64) if bound <= 1 << 53 else None


def _extents(instr: Instruction) -> tuple[list[int], list[int], int, int, int, int]:
    """(lhs permutation, rhs permutation, batch, m, n, k) of a dot_general: the operands
    transposed by the permutations are [batch, m, k] and [batch, k, n] products."""
    a = instr.attrs
    lhs, rhs = (o.shape for o in instr.operands)
    lb, rb = list(a.lhs_batching_dimensions), list(a.rhs_batching_dimensions)
    lc, rc = list(a.lhs_contracting_dimensions), list(a.rhs_contracting_dimensions)
    lf = [d for d in range(lhs.rank) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.rank) if d not in rb and d not in rc]
    size = lambda shape, ds: math.prod(shape.dimensions[d] for d in ds)  # noqa: E731
    return (lb + lf + lc, rb + rc + rf, size(lhs, lb), size(lhs, lf), size(rhs, rf),
            size(lhs, lc))


def dot_plan(instr: Instruction, threads: int = 1
             ) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None:
    """A function (lhs, rhs, out) for a dot_general on `threads` threads, or None to fall
    back. Float and complex products run BLAS ?gemm in the accumulation type (operands
    converted first, the result rounded once into `out`); integer and pred products run the
    JIT integer GEMM (gemm_int.py), exact with wraparound - or BLAS in f32/f64 when no sum
    can leave the mantissa (`exact_float`), an s8 x s8 -> s32 matmul for one."""
    from xlapy.backends.cpu import gemm_int

    lhs, rhs = (o.shape for o in instr.operands)
    et = instr.shape.element_type
    acc = dot_accumulator(instr)
    if acc is None:
        return None
    small = _small(instr)
    if small is not None:  # a JIT loop nest reading the rhs in place (no packing)
        return gemm_small.runner(small, threads)
    skinny = _skinny(instr)
    if skinny is not None:  # a few rows against a big W, read once in place
        m, n, k, f64 = skinny
        return gemm_skinny.runner(m, n, k, f64, threads)
    lperm, rperm, nbatch, m, n, k = _extents(instr)
    out_dtype = instr.shape.dtype
    amx = int8_amx(instr)
    vnni = amx or int8_vnni(instr)
    i16 = not vnni and int8_i16(instr)
    wide = exact_float(instr) if acc.kind in "iu" and not (vnni or i16) else None
    if wide is not None:
        acc = wide

    if acc.kind in "iu":
        iacc = gemm_int.accumulator(et)
        if iacc is None:
            return None
        if amx:  # 8-bit operands on AMX tiles, exact modulo 2^32 like the loop
            kernel = gemm_amx.igemm8(threads, signed=lhs.element_type == ET.S8)
        elif vnni:  # s8 x s8 in 32 bits, exact modulo 2^32 like the loop
            from xlapy.backends.cpu import gemm_vnni

            kernel = gemm_vnni.igemm8(threads)
        elif i16:  # 8-bit operands widened to s16 pairs (pmaddwd), exact like the loop
            kernel = gemm_i16.igemm8(threads, signed=lhs.element_type == ET.S8)
        else:
            kernel = gemm_int.igemm(lhs.dtype, rhs.dtype, iacc, threads)
        direct = iacc == out_dtype

        def run_int(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
            xv = c_order(x.transpose(lperm)).reshape((nbatch, m, k))
            yv = c_order(y.transpose(rperm)).reshape((nbatch, k, n))
            c = out.reshape((nbatch, m, n)) if direct else np.empty((nbatch, m, n), iacc)
            kernel(xv, yv, c)
            if not direct:  # wrap to the result width (pred: nonzero)
                out[...] = (c != 0 if et.is_pred else c).reshape(out.shape)

        return run_int

    from xlapy.backends.cpu import gemm_bf16

    if gemm_bf16.takes(instr):  # bf16 operands read as they are, f32 sums (AMX or vdpbf16ps)
        amx = gemm_bf16.gemm(threads)

        def run_amx(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
            amx(x.transpose(lperm).reshape((nbatch, m, k)),
                y.transpose(rperm).reshape((nbatch, k, n)), out.reshape((nbatch, m, n)))

        return run_amx

    from xlapy.backends.cpu import gemv
    from xlapy.backends.cpu.blas import batched_gemm, by_batch, gemm

    direct = acc == out_dtype
    same = lhs.dtype == rhs.dtype == acc
    matvec = gemv.takes_matvec(m, n, k, acc)
    rows1 = m == 1 and n > 1 and nbatch > 1 and n * k >= ROWS1_MIN and \
        np.dtype(acc).char in "fd" and gemv.available()
    _build_ahead(m, n, k, acc, matvec, rperm == sorted(rperm))
    each = gemm_small.batch_shape(m, n, k, np.dtype(acc) == np.float64, nbatch) \
        if np.dtype(acc).char in "fd" else None
    small_batch = None if each is None else gemm_small.batched_runner(each, threads)
    # a product split over the threads: gemm_small's rows where it takes the shape alone
    one = gemm_small.shape(m, n, k, np.dtype(acc) == np.float64) \
        if np.dtype(acc).char in "fd" and not by_batch(nbatch, m, n, k) else None
    split_small = None if one is None else gemm_small.runner(one, threads)
    # The wide copies of bf16/f16 operands and the wide result are reused across calls
    # (recycle.py): fresh, an attention's 32 MB of them cost ~3 ms of page faults a call.
    keep: dict[int, Any] = {}
    # operands a reshape would copy (a batch of dimensions that do not merge) go through
    # transpose_lib's routine; strided views BLAS reads as they are stay views
    gx, gy = (_copied(o.dimensions, p, s) for o, p, s in
              ((lhs, lperm, (nbatch, m, k)), (rhs, rperm, (nbatch, k, n))))

    def run(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
        if not same:  # bf16/f16 (or mixed) operands: computed in f32, rounded once;
            # integers within exact_float's bound: exact in f32/f64, converted back
            x, y = _widened(keep, 0, x, acc), _widened(keep, 1, y, acc)
        xv = (gathered(x, lperm, threads) if gx else x.transpose(lperm)).reshape((nbatch, m, k))
        yv = (gathered(y, rperm, threads) if gy else y.transpose(rperm)).reshape((nbatch, k, n))
        ov = out.reshape((nbatch, m, n)) if direct else \
            recycle.output(keep, 2, (nbatch, m, n), acc)
        if k == 1 and (nbatch > 1 or m * n >= OUTER_MIN):
            # outer products (a contraction of extent 1; none at all is element-wise,
            # algebraic_rules.dot_outer): one multiply
            # per element, for all of the batch at once (a BLAS call per batch element of
            # one rank-1 update was 2.3 ms for 256 x [128] x [64]); 0 + it, as the sum's
            # init does to -0, IEEE like BLAS (element-wise kernels would flush denormals)
            if not outer_product.outer(xv, yv, ov, threads):  # (f32/f64: one native pass)
                np.multiply(xv, yv, out=ov)
                if ov.dtype.kind in "fc":
                    np.add(ov, 0, out=ov)
        elif k == 0 or (nbatch > 16 and m * n * k < BATCH_GEMM_FLOPS):
            np.matmul(xv, yv, out=ov)  # tiny products: NumPy's loop beats a call per batch
        elif matvec:  # a [m, k] @ [k] product reads the matrix once at its bandwidth
            for j in range(nbatch):
                gemv.matvec(xv[j], yv[j], ov[j], threads)
        elif rows1:  # [1, k] @ [k, n] products: each streams its matrix on every thread
            # (gemv.py's loops; one single-threaded BLAS call a product, 32 x [1, 4096] @
            # [4096, 1024]: 49.7 ms, XLA 30)
            for j in range(nbatch):
                gemm(xv[j], yv[j], ov[j], 0.0, threads)
        elif by_batch(nbatch, m, n, k):
            if small_batch is None or not small_batch(xv, yv, ov):
                batched_gemm(xv, yv, ov, threads)
        elif split_small is not None:
            for j in range(nbatch):
                split_small(xv[j], yv[j], ov[j])
        else:
            for j in range(nbatch):
                gemm(xv[j], yv[j], ov[j], 0.0, threads)
        if not direct:
            out[...] = ov.reshape(out.shape)

    return run


def _copied(dims: Sequence[int], perm: Sequence[int], shape: tuple[int, ...]) -> bool:
    """Whether a C-contiguous array of `dims`, transposed by `perm`, is copied by a reshape
    to `shape` (tried on a strided view of no memory)."""
    try:
        reshaped(transposed_view(dims, perm), shape)
    except (ValueError, AttributeError):
        return True
    return False


#: Matrix elements from which each [1, k] @ [k, n] product of a batch is its own threaded
#: gemv call (below, a call's ~15 us outweighs streaming the matrix on both cores).
ROWS1_MIN = 1 << 18
#: Elements from which a single (unbatched) outer product is numpy's multiply, not BLAS.
OUTER_MIN = 1 << 12


def _build_ahead(m: int, n: int, k: int, acc: Any, matvec: bool, rhs_rows: bool) -> None:
    """Ask for the library kernel a product's first run will likely build (gemv's dot form,
    its row form for batch-1 rows, gemm_f32's module) to be built while the compile returns
    (once.py): a guess from the whole product's shape (`rhs_rows`: the rhs is [k, n] in
    memory), harmless where the run then takes another path. The batch-1 MLP's first call
    waited 27 ms for the row form's module."""
    from xlapy.backends.cpu import gemm_f32, gemv

    f64 = np.dtype(acc) == np.float64
    if matvec:
        gemv.build_ahead(f64)
    elif m == 1 and n > 1 and np.dtype(acc).char in "fd" and gemv.available():
        gemv.build_ahead(f64, "rows" if rhs_rows else "cols")
    elif np.dtype(acc) == np.float32 and gemm_f32.routes(m, n, k, b"N", b"N", 0.0):
        gemm_f32.build_ahead()


def int8_vnni(instr: Instruction) -> bool:
    """An s8 x s8 dot_general with an s32 accumulator (an s8/s16/s32 result) on a target
    with AVX-512 VNNI: computed by gemm_vnni.py (4x the multiply-adds of f32 BLAS)."""
    from xlapy.backends.cpu import gemm_int, gemm_vnni

    if any(o.shape.element_type != ET.S8 for o in instr.operands):
        return False
    iacc = gemm_int.accumulator(instr.shape.element_type)
    return iacc == np.int32 and gemm_vnni.available()


def int8_amx(instr: Instruction) -> bool:
    """An s8 x s8 or u8 x u8 dot_general with a 32-bit accumulator (an 8/16/32-bit result)
    on a target with AMX-INT8 that runs here: computed by gemm_amx.py (16x VNNI's work per
    instruction)."""
    kinds = {o.shape.element_type for o in instr.operands}
    if kinds not in ({ET.S8}, {ET.U8}):
        return False
    iacc = gemm_int.accumulator(instr.shape.element_type)
    return iacc is not None and iacc.itemsize == 4 and gemm_amx.available()


def int8_i16(instr: Instruction) -> bool:
    """An s8 x s8 or u8 x u8 dot_general with a 32-bit accumulator on an x86 target that
    runs here (AVX2, SSE4, AVX-512 without VNNI): gemm_i16.py's pmaddwd kernel (check
    int8_amx and int8_vnni first: they are faster where they apply)."""
    kinds = {o.shape.element_type for o in instr.operands}
    if kinds not in ({ET.S8}, {ET.U8}):
        return False
    iacc = gemm_int.accumulator(instr.shape.element_type)
    return iacc is not None and iacc.itemsize == 4 and gemm_i16.available()


def _widened(keep: dict[int, Any], key: int, x: np.ndarray, acc: Any) -> np.ndarray:
    """x in the accumulation type: itself, or a copy in a buffer reused across calls."""
    if x.dtype == acc:
        return x
    wide = recycle.output(keep, key, x.shape, acc)
    wide[...] = x
    return wide


#: Multiply-adds per batch below which a many-batch dot stays one NumPy matmul.
BATCH_GEMM_FLOPS = 1 << 14


def ragged_dot_plan(instr: Instruction) -> Callable[..., np.ndarray]:
    """run(lhs, rhs, group_sizes) for chlo.ragged_dot (mode 1, the only one it infers): per
    group k, the rows [lo, hi) of the lhs ragged dimension times rhs[k] through one batched
    matmul (BLAS dgemm/zgemm for floats, exact int64 for integers) in the interpreter's
    wide type, written into those rows; rows in no group stay zero; a later group's rows
    override an earlier one's where negative sizes make them overlap (the interpreter's
    masks). Floats round once to the result type."""
    a = instr.attrs
    lhs, rhs = (o.shape for o in instr.operands[:2])
    g, r = a.rhs_group_dimensions[0], a.lhs_ragged_dimensions[0]
    et = lhs.element_type
    wide = np.dtype(np.complex128 if et.is_complex else np.float64 if et.is_float
                    else np.int64)
    lb, lc = list(a.lhs_batching_dimensions), list(a.lhs_contracting_dimensions)
    shift = [d - (d > g) for d in range(rhs.rank)]  # rhs dimensions once g is taken out
    rb = [shift[d] for d in a.rhs_batching_dimensions]
    rc = [shift[d] for d in a.rhs_contracting_dimensions]
    lf = [d for d in range(lhs.rank) if d not in lb and d not in lc]
    rf = [shift[d] for d in range(rhs.rank) if d != g and d not in a.rhs_batching_dimensions
          and d not in a.rhs_contracting_dimensions]
    bdims = [lhs.dimensions[d] for d in lb]
    fdims = [lhs.dimensions[d] for d in lf]
    ndims = [d for i, d in enumerate(rhs.dimensions) if i != g]
    ndims = [ndims[d] for d in rf]
    nb, k = int(np.prod(bdims)), int(np.prod([lhs.dimensions[d] for d in lc]))
    n = int(np.prod(ndims))
    axis = len(lb) + lf.index(r)  # the ragged dimension in the result
    rows = lhs.dimensions[r]
    dims, out_dtype = tuple(instr.shape.dimensions), instr.shape.dtype

    def run(x: np.ndarray, y: np.ndarray, groups: np.ndarray) -> np.ndarray:
        res = np.zeros(dims, wide)
        bounds = np.concatenate([[0], np.cumsum(np.asarray(groups, np.int64))])
        for grp in range(y.shape[g]):
            lo, hi = max(int(bounds[grp]), 0), min(int(bounds[grp + 1]), rows)
            if hi <= lo:
                continue
            xs = np.take(x, np.arange(lo, hi), axis=r).astype(wide)
            yk = np.take(y, grp, axis=g).astype(wide)
            m = xs.size // max(nb * k, 1) if xs.size else 0
            xv = xs.transpose(lb + lf + lc).reshape(nb, m, k)
            yv = yk.transpose(rb + rc + rf).reshape(nb, k, n)
            fd = list(fdims)
            fd[lf.index(r)] = hi - lo
            part = np.matmul(xv, yv).reshape(bdims + fd + ndims)
            where = [slice(None)] * len(dims)
            where[axis] = slice(lo, hi)
            res[tuple(where)] = part
        return res.astype(out_dtype)

    return run


def _small(instr: Instruction) -> gemm_small.GemmShape | None:
    """gemm_small's shape of a plain dot_general it computes, or None; not a matrix-vector
    product gemv.matvec takes (one column of 16 lanes a register block: 1000x1000 @
    1000x1, 2 threads, 180 -> 73 us, 4096x256 111 -> 65, 300x300 19.5 -> 16.2)."""
    from xlapy.backends.cpu import gemv

    s = gemm_small.of_instruction(instr, flat=True)
    if s is None or gemv.takes_matvec(s.m, s.n, s.k, np.float64 if s.f64 else np.float32) \
            or gemm_small.skinny_first(s):
        return None
    return s


def _matvec(instr: Instruction) -> bool:
    """Whether an unbatched dot_general runs as gemv.matvec ([m, k] @ [k, 1], or a vector
    rhs: jnp's matrix @ vector, which the report had called "blas")."""
    from xlapy.backends.cpu import gemv

    if instr.attrs.lhs_batching_dimensions:
        return False
    _, _, _, m, n, k = _extents(instr)
    return k > 1 and gemv.takes_matvec(m, n, k, dot_accumulator(instr))


def _row_times_matrix(instr: Instruction) -> bool:
    """Whether a plain 2-D dot_general is a [1, k] @ [k, n] product blas.gemm hands to
    gemv's JIT loops."""
    from xlapy.backends.cpu import gemv

    plain = dot_shapes.plain_dot(instr)
    return plain is not None and plain[0] == 1 and min(plain[1], plain[2]) > 0 and \
        gemv.available()


def _skinny(instr: Instruction) -> tuple[int, int, int, bool] | None:
    """(m, n, k, f64) of a plain dot_general gemm_skinny.py computes, or None."""
    plain = dot_shapes.plain_dot(instr)
    if plain is None:
        return None
    m, n, k, rhs_t, f64 = plain
    return (m, n, k, f64) if gemm_skinny.takes(m, n, k, f64, rhs_t) else None


def library_kind(instr: Instruction) -> str | None:
    if instr.opcode == "dot_general" and dot_plan(instr) is not None:
        from xlapy.backends.cpu import gemm_bf16

        if gemm_bf16.takes(instr):
            return f"bf16 gemm ({'amx' if gemm_bf16.tiles() else 'avx512-bf16'})"
        if dot_accumulator(instr).kind in "fc":  # type: ignore[union-attr]
            if _small(instr) is not None:
                return "jit gemm"
            if _skinny(instr) is not None:
                return "jit gemm (skinny)"
            if _matvec(instr):
                return "jit gemv (matvec)"
            return "jit gemv" if _row_times_matrix(instr) else "blas"
        if int8_amx(instr):
            return "int gemm (amx)"
        if int8_vnni(instr):
            return "int gemm (vnni)"
        if int8_i16(instr):
            return "int gemm (pmaddwd)"
        wide = exact_float(instr)
        return "int gemm" if wide is None else f"blas (exact in {wide})"
    if instr.opcode == "convolution":
        from xlapy.backends.cpu.conv_general import conv_route

        return f"conv-{conv_route(instr)}"
    if instr.opcode in LIBRARY_VIA_KERNEL:
        return "numpy/scipy"
    return None


def conv_plan(instr: Instruction, threads: int = 1
              ) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None:
    """A function (lhs, rhs, out) computing a convolution on `threads` threads. Which path:
    conv_general.conv_route - the channels-first direct kernel (conv.py) for unit-stride
    f32/f64 NCHW windows, else the general channels-last loop nest (conv_general.py)."""
    from xlapy.backends.cpu.conv import direct_plan
    from xlapy.backends.cpu.conv_general import conv_route, general_plan

    route = conv_route(instr)
    direct = direct_plan(instr, threads) if route == "nchw-direct" else None
    return direct if direct is not None else general_plan(instr, threads)


__all__ = ["conv_plan", "dot_accumulator", "dot_plan", "ragged_dot_plan", "library_kind",
           "LIBRARY_VIA_KERNEL", "Any"]
