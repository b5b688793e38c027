"""jaxlib's LAPACK custom calls and `cholesky` inside the object: the JIT runs them through
scipy's LAPACK (backends/cpu/lapack.py), which an object cannot call, so each gets loop code
here (lapack_kit.py), one function `void name(i8** operands, i8** results, i8* scratch)`
per instruction, batched over the leading dimensions:

- potrf (uplo L / U) and the `cholesky` op: left-looking Cholesky (LAPACK's potf2 order of
  sums); potrf leaves the other triangle as given and reports `info` = the first column
  whose pivot is not positive (jax turns such a matrix into NaNs); cholesky computes in the
  interpreter's accumulation type, zeroes the other triangle and writes NaN into the
  triangle of a matrix that is not positive definite (the interpreter's and JIT's result);
- getrf: LU with partial pivoting (getf2: pivot = the first largest |re| + |im| in the
  column, LAPACK's i?amax), 1-based pivots, `info` = the first zero pivot;
- trsm: aot/linalg.py's substitution loops with the FFI's side / uplo / trans_x / diag;
- geqrf, orgqr / ungqr (lapack_qr.py), syevd / heevd and gesdd (lapack_eig.py);
- geev, eigenvalues only (lapack_geev.py: LAPACK's balance, Hessenberg, QR path);
  eigenvectors are refused (`Unimplemented`).

A target a program's registry replaced is left alone (handles() is False), as the JIT
leaves those to the interpreter. An empty matrix
gives what the JIT gives (custom_call_targets.empty_matrix_results): identities for square
results, zeros elsewhere.
"""

from __future__ import annotations

import re
from math import prod
from types import SimpleNamespace
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.aot.errors import Unimplemented
from xlapy.aot.lapack_kit import I32, Kit, Var, i32
from xlapy.backends.cpu.llvm_util import i64
from xlapy.errors import XlapyError
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET
from xlapy.types import Shape
from xlapy.types.element_type import from_dtype

TARGET = re.compile(r"^lapack_([sdcz])(potrf|getrf|geqrf|orgqr|ungqr|syevd|heevd|gesdd|geev"
                    r"|trsm)_ffi$")
TYPES = {"s": ET.F32, "d": ET.F64, "c": ET.C64, "z": ET.C128}


def handles(instr: Instruction) -> bool:
    """The instruction is one this module compiles (or refuses by name: geev with
    eigenvectors)."""
    if instr.opcode == "cholesky":
        return True
    if instr.opcode != "custom_call":
        return False
    from xlapy.ops.misc import CUSTOM_CALL_TARGETS

    name = instr.attrs.call_target_name
    registered = CUSTOM_CALL_TARGETS.get(name)
    return TARGET.match(name) is not None and \
        getattr(registered, "__module__", None) == "xlapy.ops.custom_call_targets"


def emit(mod: ir.Module, name: str, instr: Instruction) -> tuple[ir.Function, int]:
    """The routine's function and the scratch bytes it needs."""
    if instr.opcode == "cholesky":
        return _cholesky(mod, name, instr)
    target = instr.attrs.call_target_name
    t, routine = TARGET.match(target).groups()
    from xlapy.aot import lapack_eig, lapack_geev, lapack_qr

    routines = {"potrf": _potrf, "getrf": _getrf, "trsm": _trsm, "geqrf": lapack_qr.geqrf,
                "orgqr": lapack_qr.orgqr, "ungqr": lapack_qr.orgqr,
                "syevd": lapack_eig.syevd, "heevd": lapack_eig.syevd,
                "gesdd": lapack_eig.gesdd, "geev": lapack_geev.geev}
    a = instr.operands[0].shape
    if 0 in a.dimensions[-2:]:
        return _empty(mod, name, instr), 0
    try:
        return routines[routine](mod, name, instr, TYPES[t])
    except XlapyError as e:
        if isinstance(e, Unimplemented):
            raise
        raise Unimplemented("custom_call", f"{target}: {e}") from e


def leaves(instr: Instruction) -> list[Shape]:
    s = instr.shape
    return list(s.tuple_shapes) if s.is_tuple else [s]


def char(instr: Instruction, key: str, allowed: str, default: str | None) -> str:
    """An FFI attribute as its LAPACK character (custom_call_targets' reading)."""
    from xlapy.ops.custom_call_targets import _char, _config

    return _char(_config(instr.attrs), key, allowed, default, instr.attrs.call_target_name)


def batch_of(shape: Shape, rank: int = 2) -> int:
    return prod(shape.dimensions[:shape.rank - rank])


def copy_matrix(k: Kit, src: ir.Value, dst: ir.Value, count: int) -> None:
    """count elements src -> dst (same type)."""
    with k.loop(0, count, name="cp") as i:
        k.st(dst, i, k.ld(src, i))


def _empty(mod: ir.Module, name: str, instr: Instruction) -> ir.Function:
    """Results for empty matrices: identities for square matrix results, zeros elsewhere."""
    k = Kit(mod, name, ET.F32)
    for j, s in enumerate(leaves(instr)):
        p = k.result(j, s.element_type)
        zero = ir.Constant(p.type.pointee, None)
        n = prod(s.dimensions)
        with k.loop(0, n, name="z") as i:
            k.st(p, i, zero)
        if s.rank >= 2 and s.dimensions[-1] == s.dimensions[-2] and n:
            one = _one(p.type.pointee)
            d = s.dimensions[-1]
            with k.loop(0, n // (d * d), name="b") as bi, k.loop(0, d, name="d") as i:
                k.st(p, k.idx(k.b.mul(bi, i64(d * d)), k.b.mul(i, i64(d + 1))), one)
    return k.done()


def _one(t: ir.Type) -> ir.Constant:
    if isinstance(t, ir.LiteralStructType):
        return ir.Constant(t, [ir.Constant(t.elements[0], 1.0), ir.Constant(t.elements[1], 0.0)])
    if isinstance(t, ir.IntType):
        return ir.Constant(t, 1)
    return ir.Constant(t, 1.0)


# ---- Cholesky -------------------------------------------------------------------------------
def factor_cholesky(k: Kit, w: ir.Value, base: ir.Value, n: int, lower: bool) -> Var:
    """Factor the Hermitian matrix whose `lower` (else upper) triangle is at w + base (n x n
    row-major) in place: L with A = L L^H into the lower triangle, or U = L^H into the upper.
    Returns the info variable (i32: 0, or the 1-based column of the first non-positive
    pivot; columns after it are left as they are)."""
    b = k.b

    def pos(i: ir.Value, j: ir.Value) -> ir.Value:
        return k.at(base, i, n, j) if lower else k.at(base, j, n, i)

    def get(i: ir.Value, j: ir.Value) -> ir.Value:
        v = k.ld(w, pos(i, j))
        return v if lower else k.conj(v)

    def put(i: ir.Value, j: ir.Value, v: ir.Value) -> None:
        k.st(w, pos(i, j), v if lower else k.conj(v))

    info = k.var(i32(0), "info")
    d = k.var(k.rc(0.0), "d")
    s = k.var(k.c(0.0), "s")
    with k.loop(0, n, name="j") as j:
        with k.when(b.icmp_signed("==", info.get(), i32(0))):
            d.set(k.re(get(j, j)))
            with k.loop(i64(0), j, name="kd") as kk:
                d.set(b.fsub(d.get(), k.abs2(get(j, kk))))
            with k.branches(b.fcmp_ordered(">", d.get(), k.rc(0.0))) as (ok, bad):
                with ok:
                    r = k.sqrt(d.get())
                    put(j, j, k.of_real(r))
                    with k.loop(b.add(j, i64(1)), i64(n), name="i") as i:
                        s.set(get(i, j))
                        with k.loop(i64(0), j, name="ks") as kk:
                            s.set(k.sub(s.get(), k.mul(get(i, kk), k.conj(get(j, kk)))))
                        put(i, j, k.div(s.get(), k.of_real(r)))
                with bad:
                    put(j, j, k.of_real(d.get()))
                    info.set(b.trunc(b.add(j, i64(1)), I32))
    return info


def _potrf(mod: ir.Module, name: str, instr: Instruction, et: ET) -> tuple[ir.Function, int]:
    lower = char(instr, "uplo", "LU", "L") == "L"
    a = instr.operands[0].shape
    n = a.dimensions[-1]
    k = Kit(mod, name, et)
    src, out = k.operand(0, et), k.result(0, et)
    info_out = k.result(1, ET.S32)
    copy_matrix(k, src, out, prod(a.dimensions))
    with k.loop(0, batch_of(a), name="batch") as bi:
        info = factor_cholesky(k, out, k.b.mul(bi, i64(n * n)), n, lower)
        k.st(info_out, bi, info.get())
    return k.done(), 0


def _cholesky(mod: ir.Module, name: str, instr: Instruction) -> tuple[ir.Function, int]:
    """The op: computed in the accumulation type in scratch (one matrix), the chosen
    triangle rounded once into the result, zeros in the other; NaN in the triangle of a
    matrix that is not positive definite."""
    from xlapy.ops.linalg import accumulate_dtype

    et = instr.shape.element_type
    if et not in (ET.BF16, ET.F16, ET.F32, ET.F64, ET.C64, ET.C128):
        raise Unimplemented("cholesky", f"element type {et}")
    acc = from_dtype(np.dtype(accumulate_dtype(et)))
    lower = instr.attrs.lower
    dims = instr.shape.dimensions
    n = dims[-1]
    k = Kit(mod, name, acc)
    b = k.b
    src, out = k.operand(0, et), k.result(0, et)
    w = k.scratch(0, k.t)
    nan = k.of_real(k.rc(float("nan")))
    if n == 0:
        return k.done(), 0
    with k.loop(0, batch_of(instr.shape), name="batch") as bi:
        base = b.mul(bi, i64(n * n))
        with k.loop(0, n * n, name="in") as i:
            k.st(w, i, k.load_as(src, b.add(base, i), et))
        info = factor_cholesky(k, w, i64(0), n, lower)
        failed = b.icmp_signed("!=", info.get(), i32(0))
        with k.loop(0, n, name="r") as i, k.loop(0, n, name="c") as j:
            ij = k.at(i64(0), i, n, j)
            inside = b.icmp_signed(">=" if lower else "<=", i, j)
            v = b.select(inside, b.select(failed, nan, k.ld(w, ij)), k.c(0.0))
            k.store_as(out, b.add(base, ij), v, et)
    return k.done(), n * n * np.dtype(acc.dtype).itemsize


# ---- LU -------------------------------------------------------------------------------------
def _getrf(mod: ir.Module, name: str, instr: Instruction, et: ET) -> tuple[ir.Function, int]:
    a = instr.operands[0].shape
    m, n = a.dimensions[-2:]
    kmin = min(m, n)
    k = Kit(mod, name, et)
    b = k.b
    src, lu = k.operand(0, et), k.result(0, et)
    piv_out, info_out = k.result(1, ET.S32), k.result(2, ET.S32)
    copy_matrix(k, src, lu, prod(a.dimensions))
    info = k.var(i32(0), "info")
    best, p = k.var(k.rc(0.0), "best"), k.var(i64(0), "p")
    with k.loop(0, batch_of(a), name="batch") as bi:
        base = b.mul(bi, i64(m * n))
        info.set(i32(0))
        with k.loop(0, kmin, name="j") as j:
            p.set(j)
            best.set(k.cabs1(k.ld(lu, k.at(base, j, n, j))))
            with k.loop(b.add(j, i64(1)), i64(m), name="pi") as i:
                v = k.cabs1(k.ld(lu, k.at(base, i, n, j)))
                with k.when(b.fcmp_ordered(">", v, best.get())):
                    best.set(v)
                    p.set(i)
            pj = p.get()
            k.st(piv_out, k.idx(b.mul(bi, i64(kmin)), j), b.trunc(b.add(pj, i64(1)), I32))
            pivot = k.ld(lu, k.at(base, pj, n, j))
            with k.branches(k.is_zero(pivot)) as (zero, nonzero):
                with zero:
                    with k.when(b.icmp_signed("==", info.get(), i32(0))):
                        info.set(b.trunc(b.add(j, i64(1)), I32))
                with nonzero:
                    with k.when(b.icmp_signed("!=", pj, j)):
                        with k.loop(0, n, name="sw") as c:
                            x, y = k.at(base, j, n, c), k.at(base, pj, n, c)
                            vx, vy = k.ld(lu, x), k.ld(lu, y)
                            k.st(lu, x, vy)
                            k.st(lu, y, vx)
                    d = k.ld(lu, k.at(base, j, n, j))
                    with k.loop(b.add(j, i64(1)), i64(m), name="sc") as i:
                        at = k.at(base, i, n, j)
                        k.st(lu, at, k.div(k.ld(lu, at), d))
            with k.loop(b.add(j, i64(1)), i64(m), name="ui") as i:
                l_ij = k.ld(lu, k.at(base, i, n, j))
                with k.loop(b.add(j, i64(1)), i64(n), name="uc") as c:
                    at = k.at(base, i, n, c)
                    k.st(lu, at, k.sub(k.ld(lu, at), k.mul(l_ij, k.ld(lu, k.at(base, j, n, c)))))
        k.st(info_out, bi, info.get())
    return k.done(), 0


# ---- triangular solve -----------------------------------------------------------------------
def _trsm(mod: ir.Module, name: str, instr: Instruction, et: ET) -> tuple[ir.Function, int]:
    """linalg.py's solve (the triangular_solve op's loops) with the FFI's attributes."""
    from xlapy.aot.linalg import emit_triangular_solve
    from xlapy.ops.linalg import Transpose

    attrs = SimpleNamespace(
        left_side=char(instr, "side", "LR", None) == "L",
        lower=char(instr, "uplo", "LU", None) == "L",
        transpose_a=[Transpose.NO_TRANSPOSE, Transpose.TRANSPOSE, Transpose.ADJOINT][
            "NTC".index(char(instr, "trans_x", "NTC", None))],
        unit_diagonal=char(instr, "diag", "NU", None) == "U")
    solve: Any = SimpleNamespace(operands=instr.operands, shape=leaves(instr)[0], attrs=attrs,
                                 opcode="triangular_solve")
    inner, need = emit_triangular_solve(mod, f"{name}_solve", solve)
    k = Kit(mod, name, et)
    b = k.b
    ptrs = [b.load(b.gep(arr, [i64(j)])) for arr, j in
            ((k._ins, 0), (k._ins, 1), (k._outs, 0))]
    b.call(inner, [*ptrs, k._scratch])
    return k.done(), need


__all__ = ["handles", "emit", "factor_cholesky", "char", "leaves", "batch_of", "copy_matrix",
           "TYPES"]
