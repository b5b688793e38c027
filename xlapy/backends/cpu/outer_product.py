"""Products with one term per element (a dot_general contracting one dimension of extent 1:
batched outer products) as one native pass over the output. (A dot with no contracting
dimension at all, JAX's per-example gradients, is element-wise by the time the backend sees
it: algebraic_rules.dot_outer.)

library.py ran them as numpy's `x * y` then `+ 0` (the sum's init: -0 products become +0),
two single-threaded passes over the output: jax_probe per_example_grad's 256 x [128] x [64]
outer products (8 MB) took 0.80 ms of its 1.2 (XLA's whole program 0.85). Here each output
row is x[r] * y[b] + 0 in vectors, rows split over the threads. IEEE arithmetic like BLAS and
numpy (the routine leaves MXCSR alone: denormal products stay), and `x * y + 0` never becomes
an FMA (no fast-math flags), so the bits are numpy's.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import cache, target
from xlapy.backends.cpu.llvm_util import F32, F64, I64, VOID, broadcast, for_range, i64, new_module
from xlapy.backends.cpu.once import once
from xlapy.backends.cpu.transpose_lib import c_order

NAME = "xlapy_outer"
_CALL = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 3 + [ctypes.c_int64] * 4))


def _emit(f64: bool, lanes: int) -> ir.Module:
    """NAME(x [R], y [R / m, n], out [R, n], m, n, begin, end): out[r] = x[r] y[r / m] + 0
    for rows r in [begin, end)."""
    t, size = (F64, 8) if f64 else (F32, 4)
    mod = new_module(NAME)
    fn = ir.Function(mod, ir.FunctionType(VOID, [t.as_pointer()] * 3 + [I64] * 4), name=NAME)
    x, y, out, m, n, begin, end = fn.args
    for a in (x, y, out):
        a.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    vt = ir.VectorType(t, lanes)
    nv = b.and_(n, i64(-lanes))
    zero, vzero = ir.Constant(t, 0.0), ir.Constant(vt, [0.0] * lanes)
    with for_range(b, begin, end, name="r") as r:
        xr = b.load(b.gep(x, [r], inbounds=True))
        xs = broadcast(b, xr, lanes)
        yrow = b.gep(y, [b.mul(b.sdiv(r, m), n)], inbounds=True)
        orow = b.gep(out, [b.mul(r, n)], inbounds=True)
        with for_range(b, i64(0), nv, name="j", step=lanes) as j:
            yv = b.load(b.bitcast(b.gep(yrow, [j], inbounds=True), vt.as_pointer()),
                        align=size)
            b.store(b.fadd(b.fmul(xs, yv), vzero),
                    b.bitcast(b.gep(orow, [j], inbounds=True), vt.as_pointer()), align=size)
        with for_range(b, nv, n, name="jt") as j:
            v = b.fadd(b.fmul(xr, b.load(b.gep(yrow, [j], inbounds=True))), zero)
            b.store(v, b.gep(orow, [j], inbounds=True))
    b.ret_void()
    return mod


@once
def _routine(f64: bool, tgt: target.CpuTarget) -> tuple[Any, Any]:
    """(engine, ctypes function) of the routine for target `tgt`, in its vector width."""
    lanes = tgt.vector_bits // (64 if f64 else 32)
    eng = cache.library_engine((NAME, f64, lanes), lambda: _emit(f64, lanes),
                               f"{NAME}-light", light=True, vectorize=False, exports=[NAME])
    return eng, _CALL(eng.address(NAME))


def outer(x: np.ndarray, y: np.ndarray, out: np.ndarray, threads: int) -> bool:
    """out[B, m, n] = x[B, m, 1] * y[B, 1, n] + 0 for f32/f64 on a target that runs here;
    False (nothing computed) otherwise."""
    from xlapy.backends.cpu.conv import split_rows

    t = target.current()
    if out.dtype not in (np.float32, np.float64) or not (x.dtype == y.dtype == out.dtype) \
            or not t.runs_here or not out.flags.c_contiguous:
        return False
    f64 = out.dtype == np.float64
    fn = _routine(f64, t)[1]
    nb, m, n = out.shape
    xc, yc = c_order(x.reshape(nb, m)), c_order(y.reshape(nb, n))
    split_rows(fn, (xc.ctypes.data, yc.ctypes.data, out.ctypes.data, m, n), nb * m, out.size,
               threads)  # (split from conv.SPLIT_MACS elements)
    return True


__all__ = ["outer"]
