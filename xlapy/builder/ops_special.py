"""Builder ops: xla_client's math-library functions (xla/hlo/builder/lib/math.h) that the
IR has no single HLO op for: Square, Reciprocal, the trigonometric/hyperbolic inverses, the
special functions (Erfc, ErfInv, Lgamma, Digamma, BesselI0e, BesselI1e, Zeta, NextAfter)
and the incomplete gamma/beta family.

Most are the `chlo.*` ops JAX emits for the same functions (the IR runs them; the cpu
backend lowers them, xlapy/passes/chlo_lowering.py). Square and Reciprocal are x * x and
1 / x as XLA's builder writes them; BesselI0e is Cephes' Chebyshev expansion, as XLA's
math.cc and JAX (f32 sets for f32 and narrower, computed in f32; the f64 sets for f64).
The incomplete gamma and beta functions (while loops) are in ops_special_igamma.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from xlapy.builder.broadcasting import binary
from xlapy.builder.xla_builder import XlaOp
from xlapy.ops.elementwise_convert import ConvertAttrs
from xlapy.ops.shape import BroadcastInDimAttrs
from xlapy.types import ElementType, Literal

__all__ = [
    "Square", "Reciprocal", "Erfc", "ErfInv", "Lgamma", "Digamma", "BesselI0e", "BesselI1e",
    "Acos", "Asin", "Atan", "Acosh", "Asinh", "Atanh", "Cosh", "Sinh", "NextAfter", "Zeta",
]


def _chlo_unary(api_name: str, opcode: str) -> Callable[[XlaOp], XlaOp]:
    def op(operand: XlaOp) -> XlaOp:
        return operand.builder.add_op(opcode, [operand], api_name=api_name)

    op.__name__ = op.__qualname__ = api_name
    op.__doc__ = f"Element-wise `{opcode}` (XLA's {api_name})."
    return op


Erfc = _chlo_unary("Erfc", "chlo.erfc")
ErfInv = _chlo_unary("ErfInv", "chlo.erf_inv")
Lgamma = _chlo_unary("Lgamma", "chlo.lgamma")
Digamma = _chlo_unary("Digamma", "chlo.digamma")
BesselI1e = _chlo_unary("BesselI1e", "chlo.bessel_i1e")
Acos = _chlo_unary("Acos", "chlo.acos")
Asin = _chlo_unary("Asin", "chlo.asin")
Atan = _chlo_unary("Atan", "chlo.atan")
Acosh = _chlo_unary("Acosh", "chlo.acosh")
Asinh = _chlo_unary("Asinh", "chlo.asinh")
Atanh = _chlo_unary("Atanh", "chlo.atanh")
Cosh = _chlo_unary("Cosh", "chlo.cosh")
Sinh = _chlo_unary("Sinh", "chlo.sinh")


def NextAfter(from_: XlaOp, /, to: XlaOp) -> XlaOp:
    """The next representable value after `from_` towards `to` (xla_client's `from` is a
    Python keyword, so it is positional-only there too)."""
    return binary("NextAfter", "chlo.next_after", from_, to)


def Zeta(x: XlaOp, q: XlaOp) -> XlaOp:
    """The Hurwitz zeta function sum_k (k + q)^-x."""
    return binary("Zeta", "chlo.zeta", x, q)


def Square(operand: XlaOp) -> XlaOp:
    """operand * operand (XLA's Square; wraps for integers)."""
    return operand.builder.add_op("multiply", [operand, operand], api_name="Square")


def _full_like(x: XlaOp, value: float, api: str) -> XlaOp:
    """`value` in x's element type, broadcast to x's shape."""
    s = x.shape()
    lit = Literal.from_numpy(np.asarray(value).astype(s.element_type.dtype), s.element_type)
    c = x.builder.constant(lit, api_name=api)
    return x.builder.add_op("broadcast_in_dim", [c], BroadcastInDimAttrs(s.dimensions, ()),
                            api_name=api)


def Reciprocal(operand: XlaOp) -> XlaOp:
    """1 / operand (XLA's Reciprocal: ScalarLike(operand, 1) / operand)."""
    if not operand.ok:
        return operand
    s = operand.shape()
    if not (s.is_array and (s.element_type.is_float or s.element_type.is_complex
                            or s.element_type.is_integer)):
        return operand.builder.report_error("Reciprocal", f"operand {s} is not a numeric array")
    one = _full_like(operand, 1, "Reciprocal")
    return operand.builder.add_op("divide", [one, operand], api_name="Reciprocal")


# ---- BesselI0e: Cephes' Chebyshev coefficients (i0.c), as XLA's math.cc and JAX -------------
_I0E_A64 = (
    -4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
    1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
    -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
    9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
    1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
    -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
    1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
    -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
    1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1)
_I0E_B64 = (
    -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
    3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
    1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
    -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
    7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
    -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
    3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
    2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
    8.04490411014108831608E-1)
#: Cephes' single-precision sets are the tails of the double ones.
_I0E_A32 = _I0E_A64[-18:]
_I0E_B32 = _I0E_B64[-7:]


def _chebyshev(x: XlaOp, coefficients: Sequence[float], api: str) -> XlaOp:
    """Cephes chbevl: the Clenshaw recurrence b0 = x b1 - b2 + c, then (b0 - b2) / 2."""
    b = x.builder
    b0 = _full_like(x, 0.0, api)
    b1 = b2 = b0
    for c in coefficients:
        b2, b1 = b1, b0
        t = b.add_op("subtract", [b.add_op("multiply", [x, b1], api_name=api), b2],
                     api_name=api)
        b0 = b.add_op("add", [t, _full_like(x, c, api)], api_name=api)
    d = b.add_op("subtract", [b0, b2], api_name=api)
    return b.add_op("multiply", [_full_like(x, 0.5, api), d], api_name=api)


def BesselI0e(operand: XlaOp) -> XlaOp:
    """exp(-|x|) I0(x): Chebyshev series on [0, 8] and in 32/x beyond (Cephes i0e)."""
    api = "BesselI0e"
    if not operand.ok:
        return operand
    b = operand.builder
    s = operand.shape()
    et = s.element_type if s.is_array else None
    if et is None or not et.is_float:
        return b.report_error(api, f"operand {s} is not a floating-point array")
    x = operand
    narrow = et.bits < 32
    if narrow:  # Cephes' coefficients need f32 at least, as XLA
        x = b.add_op("convert", [x], ConvertAttrs(ElementType.F32), api_name=api)
    wide = et is ElementType.F64
    coeff_a, coeff_b = (_I0E_A64, _I0E_B64) if wide else (_I0E_A32, _I0E_B32)
    x = b.add_op("abs", [x], api_name=api)

    def lin(scale: XlaOp, v: XlaOp) -> XlaOp:  # scale * v - 2
        return b.add_op("subtract", [b.add_op("multiply", [scale, v], api_name=api),
                                     _full_like(x, 2.0, api)], api_name=api)

    small = _chebyshev(lin(_full_like(x, 0.5, api), x), coeff_a, api)
    inv = b.add_op("divide", [_full_like(x, 32.0, api), x], api_name=api)
    large = b.add_op("divide", [_chebyshev(
        b.add_op("subtract", [inv, _full_like(x, 2.0, api)], api_name=api), coeff_b, api),
        b.add_op("sqrt", [x], api_name=api)], api_name=api)
    from xlapy.ops.attrs import ComparisonDirection
    from xlapy.ops.elementwise import CompareAttrs

    le8 = b.add_op("compare", [x, _full_like(x, 8.0, api)],
                   CompareAttrs(ComparisonDirection.LE, None), api_name=api)
    out = b.add_op("select", [le8, small, large], api_name=api)
    if narrow:
        out = b.add_op("convert", [out], ConvertAttrs(et), api_name=api)
    return out
