"""Library thunks: dot_general through BLAS (numpy's matmul, transposes folded into views),
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


def dot_plan(instr: Instruction) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None:
    """A function (lhs, rhs, out) for an f32/f64 dot_general, or None to fall back."""
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
    out_shape = tuple(bshape) + (m, n)

    def run(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
        xv = x.transpose(lperm).reshape(tuple(bshape) + (m, k))
        yv = y.transpose(rperm).reshape(tuple(bshape) + (k, n))
        np.matmul(xv, yv, out=out.reshape(out_shape))

    return run


def library_kind(instr: Instruction) -> str | None:
    if instr.opcode == "dot_general" and dot_plan(instr) is not None:
        return "blas"
    if instr.opcode in LIBRARY_VIA_KERNEL:
        return "numpy/scipy"
    return None


__all__ = ["dot_plan", "library_kind", "LIBRARY_VIA_KERNEL", "Any"]
