"""triangular_solve as a loop nest in the object: the JIT calls scipy / BLAS for it.

`void solve(i8* a, i8* b, i8* out, i8* x)` for real and complex types (ADJOINT conjugates):
per batch, the system is
brought to the canonical `T x = r` with T lower or upper triangular (op(a) for a left-side
solve, op(a)^T for a right-side one, whose x and r are then the transposes) and solved by
substitution in the interpreter's accumulation type (ops/linalg.py: f32 for bf16/f16/f32,
f64 for f64), row by row: x_i = (r_i - sum_k T_ik x_k) / T_ii, the sum in increasing k, as
the interpreter's. `x` is scratch for one batch's solution (m * n accumulator elements);
the result is rounded once into `out`. Only the triangle `lower` names is read; a unit
diagonal is taken as ones.
"""

from __future__ import annotations

from math import prod

import numpy as np
from llvmlite import ir

from xlapy.aot.gemm import loop_function, narrow, widen
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import elementwise_complex as ewc
from xlapy.backends.cpu.llvm_util import for_range, i64
from xlapy.ir import Instruction
from xlapy.types.element_type import from_dtype


def emit_triangular_solve(mod: ir.Module, name: str, instr: Instruction
                          ) -> tuple[ir.Function, int]:
    """The solve's function and the bytes of scratch it needs."""
    from xlapy.ops.linalg import Transpose, accumulate_dtype

    a_shape, b_shape = (o.shape for o in instr.operands)
    et = instr.shape.element_type
    attrs = instr.attrs
    acc_dt = np.dtype(accumulate_dtype(et))
    acc_t = from_dtype(acc_dt)
    at = ew.compute_type(acc_t)
    m = a_shape.dimensions[-1]
    rows, cols = b_shape.dimensions[-2:]
    n = cols if attrs.left_side else rows  # right-hand sides
    batch = prod(b_shape.dimensions[:-2])
    # t: the canonical matrix is a's transpose; lower_eff: it is lower triangular.
    t = (attrs.transpose_a is not Transpose.NO_TRANSPOSE) != (not attrs.left_side)
    lower_eff = attrs.lower != t
    fn, b, (pa, pb, po, px) = loop_function(mod, name, et, et, et, at, noalias=False)
    acc = b.alloca(at)
    if batch * m * n == 0:
        b.ret_void()
        return fn, 0

    def rhs_at(base: ir.Value, i: ir.Value, j: ir.Value) -> ir.Value:
        """Element (i, j) of the canonical right-hand side / solution in b's layout."""
        return b.add(base, b.add(b.mul(i, i64(n)), j) if attrs.left_side else
                     b.add(b.mul(j, i64(m)), i))

    def t_at(base: ir.Value, i: ir.Value, k: ir.Value) -> ir.Value:
        return b.add(base, b.add(b.mul(k, i64(m)), i) if t else b.add(b.mul(i, i64(m)), k))

    conj = attrs.transpose_a is Transpose.ADJOINT and et.is_complex

    def load_a(off: ir.Value) -> ir.Value:
        v = widen(b, ew.from_storage(b, b.load(b.gep(pa, [off])), et), et, acc_t)
        if conj:
            re, im = ewc.parts(b, v)
            v = ewc.pack(b, re, b.fneg(im))
        return v

    def op(name: str, x: ir.Value, y: ir.Value) -> ir.Value:
        """x op y in the accumulation type (complex or real)."""
        if acc_t.is_complex:
            return ewc.binary(b, name, [x, y])
        return {"multiply": b.fmul, "add": b.fadd, "subtract": b.fsub,
                "divide": b.fdiv}[name](x, y)

    with for_range(b, i64(0), i64(batch), name="batch") as bi:
        abase = b.mul(bi, i64(m * m))
        bbase = b.mul(bi, i64(m * n))
        with for_range(b, i64(0), i64(m), name="step") as step:
            i = step if lower_eff else b.sub(i64(m - 1), step)
            lo, hi = (i64(0), i) if lower_eff else (b.add(i, i64(1)), i64(m))
            diag = ew.constant(1, acc_t) if attrs.unit_diagonal else \
                load_a(t_at(abase, i, i))
            with for_range(b, i64(0), i64(n), name="j") as j:
                r = widen(b, ew.from_storage(b, b.load(b.gep(pb, [rhs_at(bbase, i, j)])), et),
                          et, acc_t)
                b.store(ew.constant(0, acc_t), acc)
                with for_range(b, lo, hi, name="k") as k:
                    prod_ = op("multiply", load_a(t_at(abase, i, k)),
                               b.load(b.gep(px, [b.add(b.mul(k, i64(n)), j)])))
                    b.store(op("add", b.load(acc), prod_), acc)
                x = op("divide", op("subtract", r, b.load(acc)), diag)
                b.store(x, b.gep(px, [b.add(b.mul(i, i64(n)), j)]))
        with for_range(b, i64(0), i64(m), name="oi") as i, \
                for_range(b, i64(0), i64(n), name="oj") as j:
            v = narrow(b, b.load(b.gep(px, [b.add(b.mul(i, i64(n)), j)])), acc_t, et)
            b.store(v, b.gep(po, [rhs_at(bbase, i, j)]))
    b.ret_void()
    return fn, m * n * acc_dt.itemsize


__all__ = ["emit_triangular_solve"]
