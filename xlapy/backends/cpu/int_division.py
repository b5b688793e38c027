"""Integer division and remainder of vectors in kernels, through floating point where that is
exact: x86 has no vector integer division, so LLVM splits a vector sdiv / udiv / srem / urem
into one scalar idiv a lane (a 1M-element s32 `x // y + x % y` took 2.6-5.2 ms, XLA's own
3.9-6.9).

For integers of n <= 32 bits, x / y rounded once in a float type of p >= n + 1 significand
bits (f32 for 8 and 16 bits, f64 for 32) and truncated is the exact truncated quotient: the
rounding error is below |x / y| 2^-p <= 2^n 2^-p / |y| < 1 / |y|, the least distance from
x / y to an integer it is not, so rounding never reaches or crosses one (and reaches one
only where x / y is it). The remainder is then x - q y in the integer type. A divisor the
caller made safe (never 0, never -1 under the smallest signed value) keeps the instruction
semantics; constant divisors keep LLVM's multiply-and-shift, scalars its idiv.
"""

from __future__ import annotations

from llvmlite import ir

F32, F64 = ir.FloatType(), ir.DoubleType()


def _float_type(x: ir.Value) -> ir.Type | None:
    """The float element type the quotient of vector `x` goes through, or None (scalars,
    64-bit lanes)."""
    if not isinstance(x.type, ir.VectorType) or not isinstance(x.type.element, ir.IntType):
        return None
    width = x.type.element.width
    return F32 if width <= 16 else F64 if width <= 32 else None


def quotient(b: ir.IRBuilder, x: ir.Value, y: ir.Value, signed: bool, given: ir.Value
             ) -> ir.Value:
    """x / y truncated toward zero (y never 0, nor -1 with x the smallest signed value: the
    divisor `given` made safe)."""
    ft = _float_type(x)
    if ft is None or isinstance(given, ir.Constant):
        return b.sdiv(x, y) if signed else b.udiv(x, y)
    vt = ir.VectorType(ft, x.type.count)
    to_float = b.sitofp if signed else b.uitofp
    q = b.fdiv(to_float(x, vt), to_float(y, vt))
    return b.fptosi(q, x.type) if signed else b.fptoui(q, x.type)


def remainder(b: ir.IRBuilder, x: ir.Value, y: ir.Value, signed: bool, given: ir.Value
              ) -> ir.Value:
    """x - (x / y truncated) y, the sign of x (y as for `quotient`)."""
    if _float_type(x) is None or isinstance(given, ir.Constant):
        return b.srem(x, y) if signed else b.urem(x, y)
    return b.sub(x, b.mul(quotient(b, x, y, signed, given), y))


__all__ = ["quotient", "remainder"]
