"""Scalar loop code for the in-object LAPACK routines (lapack.py, lapack_qr.py,
lapack_eig.py): one function `void name(i8** ins, i8** outs, i8* scratch)` per instruction
and a small vocabulary over one compute type (f32, f64, c64 or c128) so a routine reads like
its LAPACK reference loop: loads and stores, + - * / on real or complex values, conj, |z|^2,
sqrt, mutable variables (allocas that mem2reg turns into registers) and loops.

Complex values are `{re, im}` structs, the storage layout of c64 / c128; products and
quotients are the cpu backend's (elementwise_complex.py), so an object and the JIT's fused
kernels agree on them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import elementwise_complex as ewc
from xlapy.backends.cpu import elementwise_convert as ewconv
from xlapy.backends.cpu.llvm_util import I8P, I32, I64, VOID, for_range, i64, intrinsic
from xlapy.types import ElementType as ET

#: Signature of every routine: operand buffers, result buffers, scratch.
LAPACK_TYPE = ir.FunctionType(VOID, [I8P.as_pointer(), I8P.as_pointer(), I8P])


class Kit:
    """The routine's function, its builder and scalar helpers in compute type `et`."""

    def __init__(self, mod: ir.Module, name: str, et: ET) -> None:
        self.fn = ir.Function(mod, LAPACK_TYPE, name=name)
        self.fn.linkage = "internal"
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.et = et
        self.cx = et.is_complex
        self.rt = ewc.part_type(et) if self.cx else et
        self.t = ew.compute_type(et)
        self.r = ew.compute_type(self.rt)
        self._ins, self._outs, self._scratch = self.fn.args

    # ---- buffers ----
    def operand(self, k: int, et: ET) -> ir.Value:
        b = self.b
        return b.bitcast(b.load(b.gep(self._ins, [i64(k)])), ew.storage_type(et).as_pointer())

    def result(self, k: int, et: ET) -> ir.Value:
        b = self.b
        return b.bitcast(b.load(b.gep(self._outs, [i64(k)])), ew.storage_type(et).as_pointer())

    def scratch(self, at: int, t: ir.Type) -> ir.Value:
        return self.b.bitcast(self.b.gep(self._scratch, [i64(at)]), t.as_pointer())

    def ld(self, p: ir.Value, idx: ir.Value) -> ir.Value:
        return self.b.load(self.b.gep(p, [idx]))

    def st(self, p: ir.Value, idx: ir.Value, v: ir.Value) -> None:
        self.b.store(v, self.b.gep(p, [idx]))

    def load_as(self, p: ir.Value, idx: ir.Value, et: ET) -> ir.Value:
        """A storage element of `et` as a compute value of this kit's type."""
        return ewconv.convert(self.b, ew.from_storage(self.b, self.ld(p, idx), et), et, self.et)

    def store_as(self, p: ir.Value, idx: ir.Value, v: ir.Value, et: ET) -> None:
        """A compute value stored as an element of `et` (rounded once)."""
        self.st(p, idx, ew.to_storage(self.b, ewconv.convert(self.b, v, self.et, et), et))

    # ---- arithmetic in the compute type ----
    def c(self, v: complex | float) -> ir.Value:
        return ew.constant(v, self.et)

    def rc(self, v: float) -> ir.Constant:
        return ir.Constant(self.r, float(v))

    def _op(self, name: str, x: ir.Value, y: ir.Value) -> ir.Value:
        b = self.b
        if self.cx:
            return ewc.binary(b, name, [x, y])
        return {"add": b.fadd, "subtract": b.fsub, "multiply": b.fmul,
                "divide": b.fdiv}[name](x, y)

    def add(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self._op("add", x, y)

    def sub(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self._op("subtract", x, y)

    def mul(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self._op("multiply", x, y)

    def div(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self._op("divide", x, y)

    def conj(self, z: ir.Value) -> ir.Value:
        if not self.cx:
            return z
        re, im = ewc.parts(self.b, z)
        return ewc.pack(self.b, re, self.b.fneg(im))

    def re(self, z: ir.Value) -> ir.Value:
        return ewc.parts(self.b, z)[0] if self.cx else z

    def im(self, z: ir.Value) -> ir.Value:
        return ewc.parts(self.b, z)[1] if self.cx else self.rc(0.0)

    def of_real(self, x: ir.Value) -> ir.Value:
        return ewc.pack(self.b, x, self.rc(0.0)) if self.cx else x

    def of_parts(self, re: ir.Value, im: ir.Value) -> ir.Value:
        """re + i im (im dropped for a real type)."""
        return ewc.pack(self.b, re, im) if self.cx else re

    def scale(self, x: ir.Value, z: ir.Value) -> ir.Value:
        """real x times z."""
        b = self.b
        if not self.cx:
            return b.fmul(x, z)
        re, im = ewc.parts(b, z)
        return ewc.pack(b, b.fmul(x, re), b.fmul(x, im))

    def abs2(self, z: ir.Value) -> ir.Value:
        """|z|^2 as a real value."""
        b = self.b
        if not self.cx:
            return b.fmul(z, z)
        re, im = ewc.parts(b, z)
        return b.fadd(b.fmul(re, re), b.fmul(im, im))

    def cabs1(self, z: ir.Value) -> ir.Value:
        """|re| + |im| (LAPACK's i?amax measure for complex pivots), |x| for reals."""
        if not self.cx:
            return self.fabs(z)
        re, im = ewc.parts(self.b, z)
        return self.b.fadd(self.fabs(re), self.fabs(im))

    def sqrt(self, x: ir.Value) -> ir.Value:
        return intrinsic(self.b, f"llvm.sqrt.{_sfx(self.r)}", self.r, [x])

    def fabs(self, x: ir.Value) -> ir.Value:
        return intrinsic(self.b, f"llvm.fabs.{_sfx(self.r)}", self.r, [x])

    def copysign(self, mag: ir.Value, sign: ir.Value) -> ir.Value:
        return intrinsic(self.b, f"llvm.copysign.{_sfx(self.r)}", self.r, [mag, sign])

    def is_zero(self, z: ir.Value) -> ir.Value:
        b = self.b
        if not self.cx:
            return b.fcmp_ordered("==", z, self.rc(0.0))
        re, im = ewc.parts(b, z)
        return b.and_(b.fcmp_ordered("==", re, self.rc(0.0)),
                      b.fcmp_ordered("==", im, self.rc(0.0)))

    # ---- variables and control ----
    def var(self, init: ir.Value, name: str = "v") -> Var:
        b = self.b
        with b.goto_entry_block():
            b.position_at_start(self.fn.entry_basic_block)
            slot = b.alloca(init.type, name=name)
        b.store(init, slot)
        return Var(b, slot)

    def loop(self, lo: ir.Value | int, hi: ir.Value | int, name: str = "i"
             ) -> contextlib.AbstractContextManager[ir.Value]:
        return for_range(self.b, _v(lo), _v(hi), name=name)

    @contextlib.contextmanager
    def down(self, lo: ir.Value | int, hi: ir.Value | int, name: str = "d"
             ) -> Iterator[ir.Value]:
        """i from hi - 1 down to lo."""
        lo, hi = _v(lo), _v(hi)
        with for_range(self.b, lo, hi, name=name) as k:
            yield self.b.sub(self.b.add(lo, self.b.sub(hi, k)), i64(1))

    def when(self, cond: ir.Value) -> contextlib.AbstractContextManager[Any]:
        return self.b.if_then(cond)

    def branches(self, cond: ir.Value) -> contextlib.AbstractContextManager[Any]:
        return self.b.if_else(cond)

    def idx(self, *terms: ir.Value | int) -> ir.Value:
        """The sum of i64 terms (ints are constants)."""
        out: ir.Value = _v(terms[0])
        for t in terms[1:]:
            out = self.b.add(out, _v(t))
        return out

    def at(self, base: ir.Value | int, i: ir.Value | int, ld: int, j: ir.Value | int
           ) -> ir.Value:
        """base + i * ld + j."""
        return self.idx(base, self.b.mul(_v(i), i64(ld)), j)

    def done(self) -> ir.Function:
        self.b.ret_void()
        return self.fn


class Var:
    """A mutable scalar: `.get()`, `.set(v)`."""

    def __init__(self, b: ir.IRBuilder, slot: ir.Value) -> None:
        self.b, self.slot = b, slot

    def get(self) -> ir.Value:
        return self.b.load(self.slot)

    def set(self, v: ir.Value) -> None:
        self.b.store(v, self.slot)


def _v(x: ir.Value | int) -> ir.Value:
    return i64(x) if isinstance(x, int) else x


def _sfx(t: ir.Type) -> str:
    return "f32" if t == ir.FloatType() else "f64"


def i32(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


__all__ = ["Kit", "Var", "LAPACK_TYPE", "i32", "I32", "I64"]
