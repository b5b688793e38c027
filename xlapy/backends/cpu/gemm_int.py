"""Integer GEMM as a JIT-compiled loop: exact products with wraparound, for dot_general on
integer (and pred) operands, which BLAS does not do and numpy does with a slow generic loop.

Integer arithmetic modulo 2^w does not depend on the order of the additions, so accumulating
in a w-bit register for a w-bit result equals the interpreter's 64-bit accumulation wrapped to
w bits (xlapy/ops/linalg.py). The accumulator is the result width, at least 32 bits (pred
results count in 64 bits: only the true count's zeroness matters). Each product is taken in
the narrowest integer type that holds it exactly (8 x 8 bits -> i16: AVX2 multiplies 16 of
those per instruction instead of 8 i32), then extended to the accumulator.

The loop is `for row: c[row, :] = 0; for kk: c[row, :] += a[row, kk] * b[kk, :]` over
contiguous [batch, m, k] x [batch, k, n] -> [batch, m, n]; LLVM vectorizes the inner loop
over n (the accumulator row stays in L1). Four k steps share one pass over the row, a
quarter of the accumulator loads and stores. One module per (operand types, accumulator,
target), compiled once per process.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import cache, target
from xlapy.backends.cpu.llvm_util import (
    _OBJECTS,
    I8P,
    I64,
    VOID,
    Engine,
    for_range,
    new_module,
)
from xlapy.backends.cpu.once import once
from xlapy.types import ElementType as ET

#: k steps per pass over the accumulator row.
K_UNROLL = 4
#: Multiply-adds below which a product is not split over threads.
SPLIT_MACS = 1 << 21
_SIG = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 3), *([ctypes.c_int64] * 5))


def accumulator(result: ET) -> np.dtype | None:
    """The accumulator dtype for an integer/pred dot with this result type, else None."""
    if result.is_pred:
        return np.dtype(np.int64)
    if not result.is_integer:
        return None
    bits = max(result.bits, 32)
    return np.dtype(f"{'i' if result.is_signed else 'u'}{bits // 8}")


def _int_type(bits: int) -> ir.IntType:
    return ir.IntType(bits)


def _emit(lhs: np.dtype, rhs: np.dtype, acc: np.dtype) -> ir.Module:
    """void igemm(a, b, c, row0, row1, m, n, k): rows [row0, row1) of the batch * m."""
    mod = new_module("xlapy_igemm")
    fn = ir.Function(mod, ir.FunctionType(VOID, [I8P, I8P, I8P, I64, I64, I64, I64, I64]),
                     name="igemm")
    for arg in fn.args[:3]:
        arg.add_attribute("noalias")
    pa, pb, pc, row0, row1, m, n, k = fn.args
    ta, tb = _int_type(lhs.itemsize * 8), _int_type(rhs.itemsize * 8)
    tc = _int_type(acc.itemsize * 8)
    signed = lhs.kind == "i"  # both operands have the same signedness (dot_general_c1)
    pbits = min(acc.itemsize * 8, 1 << (lhs.itemsize * 8 + rhs.itemsize * 8 - 1).bit_length())
    tp = _int_type(max(pbits, 16))
    ext = (lambda b, v, t: b.sext(v, t)) if signed else (lambda b, v, t: b.zext(v, t))

    def widen(b: ir.IRBuilder, v: ir.Value, t: ir.IntType) -> ir.Value:
        return v if v.type.width == t.width else ext(b, v, t)

    b = ir.IRBuilder(fn.append_basic_block("entry"))
    a = b.bitcast(pa, ta.as_pointer())
    bb = b.bitcast(pb, tb.as_pointer())
    c = b.bitcast(pc, tc.as_pointer())
    k_main = b.mul(b.sdiv(k, I64(K_UNROLL)), I64(K_UNROLL))
    zero = ir.Constant(tc, 0)
    with for_range(b, row0, row1, "r") as r:
        crow = b.gep(c, [b.mul(r, n)])
        arow = b.gep(a, [b.mul(r, k)])
        bmat = b.gep(bb, [b.mul(b.sdiv(r, m), b.mul(k, n))])
        with for_range(b, I64(0), n, "z") as j:
            b.store(zero, b.gep(crow, [j]))

        def step(kk: ir.Value, count: int) -> None:
            avs = [widen(b, b.load(b.gep(arow, [b.add(kk, I64(u))])), tp)
                   for u in range(count)]
            brows = [b.gep(bmat, [b.mul(b.add(kk, I64(u)), n)]) for u in range(count)]
            with for_range(b, I64(0), n, "j") as j:
                p = b.gep(crow, [j])
                total = b.load(p)
                for av, brow in zip(avs, brows):
                    bv = widen(b, b.load(b.gep(brow, [j])), tp)
                    prod = b.mul(av, bv)
                    total = b.add(total, widen(b, prod, tc))
                b.store(total, p)

        with for_range(b, I64(0), k_main, "k", step=K_UNROLL) as kk:
            step(kk, K_UNROLL)
        with for_range(b, k_main, k, "kt") as kk:
            step(kk, 1)
    b.ret_void()
    return mod


@once
def _compiled(lhs: np.dtype, rhs: np.dtype, acc: np.dtype, key: str) -> tuple[Engine, object]:
    eng = cache.engine(_emit(lhs, rhs, acc), "O3", exports=["igemm"])  # disk-cached too
    return eng, _SIG(eng.address("igemm"))


def empty_product(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> bool:
    """Whether the batched product c[batch, m, n] = a[batch, m, k] @ b[batch, k, n] needs no
    kernel: nothing to write, or empty sums (k == 0: zeros written here; the tile kernels'
    loops run at least one k step)."""
    if c.size == 0:
        return True
    if a.shape[2] == 0:
        c[...] = 0
        return True
    return False


def igemm(lhs: np.dtype, rhs: np.dtype, acc: np.dtype, threads: int = 1
          ) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    """A function (a[batch, m, k], b[batch, k, n], c[batch, m, n]) for contiguous integer
    (or bool) arrays, c of dtype `acc`, compiled for the current target; a big product is
    split by rows over `threads` threads (exact: the bits do not depend on the split)."""
    lhs, rhs = (np.dtype(np.uint8) if d == np.bool_ else np.dtype(d) for d in (lhs, rhs))
    eng, fn = _compiled(lhs, rhs, np.dtype(acc), target.current().key)
    sink = _OBJECTS.get()  # the executable's objects name it on every compile, cached or not
    if sink is not None and not any(obj is eng.object for _, obj in sink):
        sink.append(("igemm", eng.object))

    def run(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        nb, m, k = a.shape
        n = b.shape[2]
        if nb * m * n == 0:
            return
        rows = nb * m
        ptrs = (a.ctypes.data, b.ctypes.data, c.ctypes.data)
        parts = min(threads, rows) if rows * n * k >= SPLIT_MACS else 1
        if parts < 2:
            fn(*ptrs, 0, rows, m, n, k)  # type: ignore[operator]
            return
        from xlapy.backends.cpu import parallel

        cuts = [rows * j // parts for j in range(parts + 1)]
        pool = parallel.pool(threads)
        addr = ctypes.cast(fn, ctypes.c_void_p).value or 0
        futs = [pool.submit(addr, *ptrs, cuts[j], cuts[j + 1], m, n, k, keep=(a, b, c))
                for j in range(1, parts)]
        fn(*ptrs, cuts[0], cuts[1], m, n, k)  # type: ignore[operator]
        for f in futs:
            f.result()

    return run


__all__ = ["accumulator", "empty_product", "igemm", "K_UNROLL", "SPLIT_MACS"]
