"""dot_general through cuBLAS (ctypes over libcublas, from the nvidia-cublas-cu12 wheel or
the CUDA toolkit): f32/f64 GEMMs with leading batch dimensions, each operand with at most
one free dimension and one contracting dimension, in either order (a transposed operand
is a cuBLAS transpose flag, not a copy).

Row-major C[M, N] = A[M, K] B[K, N] is column-major C^T = B^T A^T, so cuBLAS gets the
operands swapped. Other dots (several contracting dimensions, integer types, mixed types)
are not planned here (the executable runs them on the host, listed by explain())."""

from __future__ import annotations

import ctypes
import functools
import os
from dataclasses import dataclass
from pathlib import Path

from xlapy.backends.gpu.driver import CudaError
from xlapy.errors import Unimplemented
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
_TYPES = {ET.F32: ("cublasSgemmStridedBatched", ctypes.c_float),
          ET.F64: ("cublasDgemmStridedBatched", ctypes.c_double)}


@dataclass(frozen=True)
class Gemm:
    """A batched GEMM in cuBLAS's (column-major) terms: C^T[N, M] = op(X) op(Y)."""

    batch: int
    m: int
    n: int
    k: int
    trans_x: int  # the rhs
    trans_y: int  # the lhs
    ldx: int
    ldy: int
    et: ET


def _side(dims: tuple[int, ...], batch: tuple[int, ...], contract: tuple[int, ...]
          ) -> tuple[int, int, bool] | None:
    """(free size, contracting size, contracting dimension before the free one) of one
    operand, or None if it is not [batch..., free?, contracting] in some order."""
    nb = len(batch)
    if tuple(batch) != tuple(range(nb)) or len(contract) != 1 or len(dims) - nb not in (1, 2):
        return None
    c = contract[0]
    free = [d for d in range(nb, len(dims)) if d != c]
    return (dims[free[0]] if free else 1, dims[c], bool(free) and c < free[0])


def plan(instr: Instruction) -> Gemm | None:
    """The GEMM of a dot_general cuBLAS computes, or None."""
    if instr.opcode != "dot_general":
        return None
    lhs, rhs = (o.shape for o in instr.operands)
    et = instr.shape.element_type
    if et not in _TYPES or lhs.element_type is not et or rhs.element_type is not et:
        return None
    a = instr.attrs
    if a.algorithm is not None:
        return None
    ls = _side(lhs.dimensions, a.lhs_batching_dimensions, a.lhs_contracting_dimensions)
    rs = _side(rhs.dimensions, a.rhs_batching_dimensions, a.rhs_contracting_dimensions)
    if ls is None or rs is None:
        return None
    m, k, lhs_t = ls
    n, _, rhs_contract_first = rs
    batch = 1
    for d in a.lhs_batching_dimensions:
        batch *= lhs.dimensions[d]
    # rhs stored [K, N]: column-major it is B^T (N x K), ld N; stored [N, K]: transposed.
    rhs_kn = rhs_contract_first or n == 1 and rhs.rank - len(a.rhs_batching_dimensions) == 1
    trans_x, ldx = (CUBLAS_OP_N, n) if rhs_kn else (CUBLAS_OP_T, k)
    trans_y, ldy = (CUBLAS_OP_T, m) if lhs_t else (CUBLAS_OP_N, k)
    return Gemm(batch, m, n, k, trans_x, trans_y, ldx, ldy, et)


@functools.cache
def _lib() -> ctypes.CDLL:
    paths = [os.environ.get("XLAPY_CUBLAS", "")]
    try:
        import nvidia.cublas as wheel  # the nvidia-cublas-cu12 wheel

        paths += [str(Path(p) / "lib" / "libcublas.so.12") for p in wheel.__path__]
    except ImportError:
        pass
    paths += ["libcublas.so.12", "libcublas.so.13", "libcublas.so"]
    errors = []
    for p in filter(None, paths):
        try:
            return ctypes.CDLL(p)
        except OSError as e:
            errors.append(str(e))
    raise Unimplemented("cuBLAS not found (pip install 'xlapy[gpu]' for the "
                        f"nvidia-cublas-cu12 wheel): {'; '.join(errors)}")


@functools.cache
def _handle() -> ctypes.c_void_p:
    h = ctypes.c_void_p()
    _check("cublasCreate_v2", _lib().cublasCreate_v2(ctypes.byref(h)))
    return h


def _check(name: str, rc: int) -> None:
    if rc != 0:
        raise CudaError(f"{name} failed: cuBLAS status {rc}")


def run(g: Gemm, lhs: int, rhs: int, out: int) -> None:
    """out[batch, M, N] = lhs . rhs on device pointers (row-major, as planned)."""
    if g.m == 0 or g.n == 0 or g.batch == 0:
        return
    name, scalar = _TYPES[g.et]
    one, zero = scalar(1.0), scalar(0.0)
    _check(name, getattr(_lib(), name)(
        _handle(), g.trans_x, g.trans_y, g.n, g.m, g.k, ctypes.byref(one),
        ctypes.c_void_p(rhs), g.ldx, ctypes.c_longlong(g.n * g.k),
        ctypes.c_void_p(lhs), g.ldy, ctypes.c_longlong(g.m * g.k),
        ctypes.byref(zero), ctypes.c_void_p(out), g.n, ctypes.c_longlong(g.m * g.n),
        g.batch))
