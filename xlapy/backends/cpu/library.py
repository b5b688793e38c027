"""Library thunks: dot_general through BLAS (sgemm/dgemm pointers, blas.py; transposes folded
into the call), convolution as direct register-blocked loops (conv.py) or shift-GEMM (conv_plan),
and the ops whose interpreter kernels already are numpy/scipy library calls (convolution as
GEMM, sort, FFT, cholesky, triangular_solve) run through those kernels.

A dot thunk permutes the operands to (batch..., M, K) x (batch..., K, N) views once per call
(no copies for the common layouts: numpy passes the transpose flag to sgemm/dgemm) and writes
straight into the output buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: Ops run as library thunks through their (numpy/scipy) interpreter kernel.
LIBRARY_VIA_KERNEL = frozenset({"convolution", "sort", "fft", "cholesky", "triangular_solve"})


def dot_plan(instr: Instruction, threads: int = 1
             ) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None:
    """A function (lhs, rhs, out) for an f32/f64 dot_general on `threads` threads, or None
    to fall back."""
    a = instr.attrs
    lhs, rhs = (o.shape for o in instr.operands)
    et = instr.shape.element_type
    if not (lhs.element_type == rhs.element_type == et and et in (ET.F32, ET.F64)):
        return None
    lb, rb = list(a.lhs_batching_dimensions), list(a.rhs_batching_dimensions)
    lc, rc = list(a.lhs_contracting_dimensions), list(a.rhs_contracting_dimensions)
    lf = [d for d in range(lhs.rank) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.rank) if d not in rb and d not in rc]
    bshape = [lhs.dimensions[d] for d in lb]
    m = int(np.prod([lhs.dimensions[d] for d in lf]))
    k = int(np.prod([lhs.dimensions[d] for d in lc]))
    n = int(np.prod([rhs.dimensions[d] for d in rf]))
    lperm, rperm = lb + lf + lc, rb + rc + rf

    nbatch = int(np.prod(bshape))
    from xlapy.backends.cpu.blas import gemm

    def run(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
        xv = x.transpose(lperm).reshape((nbatch, m, k))
        yv = y.transpose(rperm).reshape((nbatch, k, n))
        ov = out.reshape((nbatch, m, n))
        if nbatch > 16 or k == 0:
            np.matmul(xv, yv, out=ov)
            return
        for j in range(nbatch):
            gemm(xv[j], yv[j], ov[j], 0.0, threads)

    return run


def library_kind(instr: Instruction) -> str | None:
    if instr.opcode == "dot_general" and dot_plan(instr) is not None:
        return "blas"
    if instr.opcode == "convolution" and conv_plan(instr) is not None:
        return "blas"
    if instr.opcode in LIBRARY_VIA_KERNEL:
        return "numpy/scipy"
    return None


def conv_plan(instr: Instruction, threads: int = 1
              ) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None:
    """A function (lhs, rhs, out) for a float32/float64 convolution with unit strides, no
    lhs dilation, reversal or grouping, else None (the interpreter kernel runs it).

    Shift-GEMM, no im2col: the input goes to [C, N * padded spatial] (zero padded, plus a
    tail), and for each kernel position the product W[:, :, pos] (O x C) times the input
    columns shifted by that position's flat offset accumulates into an [O, N * padded]
    buffer through sgemm/dgemm (beta = 1). Positions past the valid output are garbage
    that the final strided copy drops. f32 accumulates in f32 (as XLA's CPU convolution).
    """
    from xlapy.backends.cpu.blas import gemm
    from xlapy.backends.cpu.conv import direct_plan

    direct = direct_plan(instr, threads)  # 2-D, unit strides: register-blocked direct loops
    if direct is not None:
        return direct
    a = instr.attrs
    lhs, rhs = (o.shape for o in instr.operands)
    et = instr.shape.element_type
    if not (lhs.element_type == rhs.element_type == et and et in (ET.F32, ET.F64)):
        return None
    dn = a.dimension_numbers
    s = lhs.rank - 2
    if (a.feature_group_count != 1 or a.batch_group_count != 1
            or any(v != 1 for v in a.window_strides) or any(v != 1 for v in a.lhs_dilation)
            or any(a.window_reversal) or any(lo < 0 or hi < 0 for lo, hi in a.padding)):
        return None
    pad = list(a.padding) or [(0, 0)] * s
    dil = list(a.rhs_dilation) or [1] * s
    n = lhs.dimensions[dn.input_batch_dimension]
    c = lhs.dimensions[dn.input_feature_dimension]
    sp = [lhs.dimensions[d] for d in dn.input_spatial_dimensions]
    o = rhs.dimensions[dn.kernel_output_feature_dimension]
    ks = [rhs.dimensions[d] for d in dn.kernel_spatial_dimensions]
    padded = [x + lo + hi for x, (lo, hi) in zip(sp, pad)]
    out_sp = [p - (k - 1) * d for p, k, d in zip(padded, ks, dil)]
    if min(out_sp + [n, c, o] + ks, default=1) <= 0:
        return None
    pstr = [1] * s
    for d in range(s - 2, -1, -1):
        pstr[d] = pstr[d + 1] * padded[d + 1]
    plane = int(np.prod(padded))
    total = n * plane
    positions = list(np.ndindex(*ks))
    offsets = [sum(p * dd * st for p, dd, st in zip(pos, dil, pstr)) for pos in positions]
    tail = max(offsets)
    dtype = instr.shape.dtype
    xperm = [dn.input_feature_dimension, dn.input_batch_dimension, *dn.input_spatial_dimensions]
    wperm = [*dn.kernel_spatial_dimensions, dn.kernel_output_feature_dimension,
             dn.kernel_input_feature_dimension]
    operm = [0] * (s + 2)
    for src, dst in enumerate((dn.output_feature_dimension, dn.output_batch_dimension,
                               *dn.output_spatial_dimensions)):
        operm[dst] = src
    interior = (slice(None), slice(None)) + tuple(
        slice(lo, lo + x) for x, (lo, _) in zip(sp, pad))
    valid = (slice(None), slice(None)) + tuple(slice(0, v) for v in out_sp)

    def run(x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
        xp = np.zeros((c, total + tail), dtype)
        xp[:, :total].reshape(c, n, *padded)[interior] = x.transpose(xperm)
        wk = np.ascontiguousarray(w.transpose(wperm)).reshape(len(positions), o, c)
        acc = np.empty((o, total), dtype)
        for j, off in enumerate(offsets):
            gemm(wk[j], xp[:, off:off + total], acc, 0.0 if j == 0 else 1.0, threads)
        res = acc.reshape(o, n, *padded)[valid]
        out[...] = res.transpose(operm)

    return run


__all__ = ["conv_plan", "dot_plan", "library_kind", "LIBRARY_VIA_KERNEL", "Any"]
