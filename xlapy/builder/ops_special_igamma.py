"""Builder ops: the regularized incomplete gamma functions Igamma P(a, x), Igammac
Q(a, x), IgammaGradA dP/da and RandomGammaGrad (the implicit gradient of gamma samples), and
the regularized incomplete beta I_x(a, b) (Lentz's continued fraction), as XLA's math.cc
builds them (and JAX ports them, jax/_src/lax/special.py): a power series for
x < max(1, a) and a continued fraction beyond, each a while loop that runs until every
enabled element converged (to the type's eps; the fraction at most 2000 steps); domain
errors give NaN. f16/bf16 compute in f32 and round once, as XLA's DoWithUpcastToF32.

`_E` wraps an XlaOp with arithmetic operators so the recurrences read as in math.cc.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp, get_tuple_element
from xlapy.ops.attrs import ComparisonDirection as _D
from xlapy.ops.elementwise import CompareAttrs
from xlapy.ops.elementwise_convert import ConvertAttrs
from xlapy.ops.reduction import ReduceAttrs
from xlapy.ops.shape import BroadcastInDimAttrs
from xlapy.types import ElementType, Literal, Shape

__all__ = ["Igamma", "Igammac", "IgammaGradA", "RandomGammaGrad", "RegularizedIncompleteBeta"]


class _Mode(enum.Enum):
    VALUE = 1
    DERIVATIVE = 2
    SAMPLE_DERIVATIVE = 3


class _E:
    """An XlaOp with operators; every op is recorded under `api`."""

    __slots__ = ("op", "api")

    def __init__(self, op: XlaOp, api: str) -> None:
        self.op, self.api = op, api

    @property
    def b(self) -> XlaBuilder:
        return self.op.builder

    def _new(self, opcode: str, *others: _E, attrs: Any = None) -> _E:
        ops = [self.op, *(o.op for o in others)]
        if attrs is None:
            return _E(self.b.add_op(opcode, ops, api_name=self.api), self.api)
        return _E(self.b.add_op(opcode, ops, attrs, api_name=self.api), self.api)

    def like(self, value: float) -> _E:
        """`value` in this op's element type and shape (scalar for a scalar)."""
        s = self.op.shape()
        lit = Literal.from_numpy(np.asarray(value).astype(s.element_type.dtype), s.element_type)
        c = self.b.constant(lit, api_name=self.api)
        if s.rank:
            c = self.b.add_op("broadcast_in_dim", [c], BroadcastInDimAttrs(s.dimensions, ()),
                              api_name=self.api)
        return _E(c, self.api)

    def _lift(self, other: _E | float) -> _E:
        return other if isinstance(other, _E) else self.like(other)

    def __add__(self, o: _E | float) -> _E:
        return self._new("add", self._lift(o))

    def __sub__(self, o: _E | float) -> _E:
        return self._new("subtract", self._lift(o))

    def __rsub__(self, o: float) -> _E:
        return self.like(o)._new("subtract", self)

    def __mul__(self, o: _E | float) -> _E:
        return self._new("multiply", self._lift(o))

    def __truediv__(self, o: _E | float) -> _E:
        return self._new("divide", self._lift(o))

    def __neg__(self) -> _E:
        return self._new("negate")

    def __and__(self, o: _E) -> _E:
        return self._new("and", o)

    def __or__(self, o: _E) -> _E:
        return self._new("or", o)

    def __invert__(self) -> _E:
        return self._new("not")

    def cmp(self, direction: _D, o: _E | float) -> _E:
        return self._new("compare", self._lift(o), attrs=CompareAttrs(direction, None))

    def fn(self, opcode: str) -> _E:
        return self._new(opcode)

    def isnan(self) -> _E:
        return self.cmp(_D.NE, self)


def _select(p: _E, t: _E, f: _E) -> _E:
    return p._new("select", t, f)


def _any(p: _E) -> _E:
    """A pred scalar: some element of `p` is true."""
    sb = XlaBuilder("igamma_or")
    s = Shape.scalar(ElementType.PRED)
    orc = sb.build(sb.add_op("or", [sb.parameter(0, s), sb.parameter(1, s)]))
    false = p.b.constant(Literal.from_numpy(np.bool_(False)), api_name=p.api)
    rank = p.op.shape().rank
    return _E(p.b.add_op("reduce", [p.op, false], ReduceAttrs(tuple(range(rank))), [orc],
                         api_name=p.api), p.api)


def _while(api: str, init: Sequence[_E], cond: Callable[[list[_E]], _E],
           body: Callable[[list[_E]], list[_E]]) -> list[_E]:
    """A while loop over the tuple of `init`; cond/body see the elements as _E."""
    b = init[0].b
    state = Shape.tuple([e.op.shape() for e in init])

    def comp(name: str, fn: Callable[[list[_E]], Any]) -> XlaComputation:
        sb = XlaBuilder(name)
        p = sb.parameter(0, state)
        vals = [_E(get_tuple_element(p, i), api) for i in range(len(init))]
        out = fn(vals)
        root = out.op if isinstance(out, _E) else sb.add_op("tuple", [e.op for e in out],
                                                              api_name=api)
        return sb.build(root)

    t = b.add_op("tuple", [e.op for e in init], api_name=api)
    loop = b.add_op("while", [t], computations=[comp(f"{api}_cond", cond),
                                                comp(f"{api}_body", body)], api_name=api)
    return [_E(get_tuple_element(loop, i), api) for i in range(len(init))]


def _series(ax: _E, x: _E, a: _E, enabled: _E, eps: float, mode: _Mode) -> _E:
    """XLA IgammaSeries: sum_n x^n / ((a+1)...(a+n)), and its derivative in a."""
    api = ax.api

    def body(v: list[_E]) -> list[_E]:
        en, r, c, ans, xx, dc_da, dans_da = v
        r = r + 1.0
        dc_da = dc_da * (xx / r) - (c * xx) / (r * r)
        dans_da = dans_da + dc_da
        c = c * (xx / r)
        ans = ans + c
        if mode is _Mode.VALUE:
            go = en & (c / ans).cmp(_D.GT, eps)
        else:
            go = en & (dc_da / dans_da).fn("abs").cmp(_D.GT, eps)
        return [go] + [_select(en, new, old) for new, old in
                       zip((r, c, ans, xx, dc_da, dans_da), v[1:])]

    zero, one = a.like(0.0), a.like(1.0)
    out = _while(api, [enabled, a, one, one, x, zero, zero], lambda v: _any(v[0]), body)
    ans, dans_da = out[3], out[6]
    if mode is _Mode.VALUE:
        return (ans * ax) / a
    dlogax_da = x.fn("log") - (a + 1.0).fn("chlo.digamma")
    if mode is _Mode.DERIVATIVE:
        return ax * (ans * dlogax_da + dans_da) / a
    return -(dans_da + ans * dlogax_da) * x / a


def _continued_fraction(ax: _E, x: _E, a: _E, enabled: _E, eps: float, mode: _Mode) -> _E:
    """XLA IgammacContinuedFraction (Cephes igamc's fraction) and its derivative in a."""
    api = ax.api

    def cond(v: list[_E]) -> _E:
        return v[5].cmp(_D.LT, 2000.0) & _any(v[0])

    def body(v: list[_E]) -> list[_E]:
        (en, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2,
         dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da) = v
        c = c + 1.0
        y = y + 1.0
        z = z + 2.0
        c_arr = _E(en.b.add_op("broadcast_in_dim", [c.op], BroadcastInDimAttrs(
            y.op.shape().dimensions, ()), api_name=api), api)
        yc = y * c_arr
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        nonzero = qk.cmp(_D.NE, 0.0)
        r = pk / qk
        t = _select(nonzero, ((ans - r) / r).fn("abs"), r.like(1.0))
        ans = _select(nonzero, r, ans)
        dpk_da = dpkm1_da * z - pkm1 - dpkm2_da * yc + pkm2 * c_arr
        dqk_da = dqkm1_da * z - qkm1 - dqkm2_da * yc + qkm2 * c_arr
        dans_da_new = _select(nonzero, (dpk_da - ans * dqk_da) / qk, dans_da)
        grad_cond = _select(nonzero, (dans_da_new - dans_da).fn("abs"), dans_da.like(1.0))
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = dpkm1_da, dqkm1_da, dpk_da, dqk_da
        rescale = pk.fn("abs").cmp(_D.GT, 1.0 / eps)

        def scaled(e: _E) -> _E:
            return _select(rescale, e * eps, e)

        pkm2, pkm1, qkm2, qkm1 = (scaled(e) for e in (pkm2, pkm1, qkm2, qkm1))
        dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = (
            scaled(e) for e in (dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da))
        if mode is _Mode.VALUE:
            go = en & t.cmp(_D.GT, eps)
        else:
            go = en & grad_cond.cmp(_D.GT, eps)
        kept = [_select(en, new, old) for new, old in zip((ans, t, y, z), v[1:5])]
        rest = [_select(en, new, old) for new, old in zip(
            (pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da_new),
            v[6:])]
        return [go, *kept, c, *rest]

    y = 1.0 - a
    z = x + y + 1.0
    c = _E(x.b.constant(Literal.from_numpy(np.asarray(0).astype(
        x.op.shape().element_type.dtype), x.op.shape().element_type), api_name=api), api)
    pkm2, qkm2 = x.like(1.0), x
    pkm1 = x + 1.0
    qkm1 = z * x
    ans = pkm1 / qkm1
    zero = x.like(0.0)
    dqkm1_da = -x
    dans_da = (zero - ans * dqkm1_da) / qkm1
    out = _while(api, [enabled, ans, x.like(1.0), y, z, c, pkm1, qkm1, pkm2, qkm2,
                       zero, zero, zero, dqkm1_da, dans_da], cond, body)
    ans = out[1]
    if mode is _Mode.VALUE:
        return ans * ax
    dans_da = out[14]
    dlogax_da = x.fn("log") - a.fn("chlo.digamma")
    if mode is _Mode.DERIVATIVE:
        return ax * (ans * dlogax_da + dans_da)
    return -(dans_da + ans * dlogax_da) * x


def _operands(api: str, a: XlaOp, x: XlaOp) -> tuple[_E, _E, ElementType] | XlaOp:
    b = a.builder
    if not (a.ok and x.ok):
        return XlaOp(b, None)
    sa, sx = a.shape(), x.shape()
    if not (sa.is_array and sa == sx and sa.element_type.is_float):
        return b.report_error(api, f"a {sa} and x {sx} must be floating-point arrays of one "
                              "shape")
    et = sa.element_type
    if et.bits < 32:
        a = b.add_op("convert", [a], ConvertAttrs(ElementType.F32), api_name=api)
        x = b.add_op("convert", [x], ConvertAttrs(ElementType.F32), api_name=api)
    return _E(a, api), _E(x, api), et


def _finish(out: _E, et: ElementType) -> XlaOp:
    if et.bits < 32:
        return out.b.add_op("convert", [out.op], ConvertAttrs(et), api_name=out.api)
    return out.op


def _limits(e: _E) -> tuple[float, float]:
    info = np.finfo(e.op.shape().element_type.dtype)
    return float(info.eps), float(np.log(info.max))


def _common(a: _E, x: _E) -> tuple[_E, _E, _E, _E, _E]:
    """(ax, underflow, is_nan, x == 0, x == inf) as math.cc computes them."""
    is_nan = a.isnan() | x.isnan()
    ax = a * x.fn("log") - x - a.fn("chlo.lgamma")
    underflow = ax.cmp(_D.LT, -_limits(a)[1])
    return ax.fn("exponential"), underflow, is_nan, x.cmp(_D.EQ, 0.0), \
        x.cmp(_D.EQ, float("inf"))


def Igamma(a: XlaOp, x: XlaOp) -> XlaOp:
    """The regularized lower incomplete gamma function P(a, x)."""
    got = _operands("Igamma", a, x)
    if isinstance(got, XlaOp):
        return got
    ea, ex, et = got
    eps = _limits(ea)[0]
    ax, underflow, is_nan, x_zero, x_inf = _common(ea, ex)
    domain = ex.cmp(_D.LT, 0.0) | ea.cmp(_D.LT, 0.0) | (ea.cmp(_D.EQ, 0.0) & x_zero) | is_nan
    use_c = ex.cmp(_D.GE, 1.0) & ex.cmp(_D.GT, ea)
    enabled = ~(x_zero | domain | underflow | x_inf)
    out = _select(use_c, 1.0 - _continued_fraction(ax, ex, ea, enabled & use_c, eps,
                                                   _Mode.VALUE),
                  _series(ax, ex, ea, enabled & ~use_c, eps, _Mode.VALUE))
    out = _select(x_zero, ea.like(0.0), out)
    out = _select(x_inf, ea.like(1.0), out)
    return _finish(_select(domain, ea.like(float("nan")), out), et)


def Igammac(a: XlaOp, x: XlaOp) -> XlaOp:
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    got = _operands("Igammac", a, x)
    if isinstance(got, XlaOp):
        return got
    ea, ex, et = got
    eps = _limits(ea)[0]
    ax, underflow, is_nan, x_zero, x_inf = _common(ea, ex)
    a_zero = ea.cmp(_D.EQ, 0.0)
    domain = ex.cmp(_D.LT, 0.0) | ea.cmp(_D.LT, 0.0) | (a_zero & x_zero) | is_nan
    use_p = ex.cmp(_D.LT, 1.0) | ex.cmp(_D.LT, ea)
    enabled = ~(domain | underflow | x_inf | a_zero)
    series = _series(ax, ex, ea, enabled & use_p, eps, _Mode.VALUE)
    fraction = _continued_fraction(ax, ex, ea, enabled & ~use_p, eps, _Mode.VALUE)
    out = _select(use_p, 1.0 - series, fraction)
    out = _select(x_inf | a_zero, ea.like(0.0), out)
    return _finish(_select(domain, ea.like(float("nan")), out), et)


def _gradient(api: str, a: XlaOp, x: XlaOp, mode: _Mode) -> XlaOp:
    got = _operands(api, a, x)
    if isinstance(got, XlaOp):
        return got
    ea, ex, et = got
    eps = _limits(ea)[0]
    ax, underflow, is_nan, x_zero, _ = _common(ea, ex)
    domain = ex.cmp(_D.LT, 0.0) | ea.cmp(_D.LE, 0.0)
    use_c = ex.cmp(_D.GT, 1.0) & ex.cmp(_D.GT, ea)
    enabled = ~(x_zero | domain | underflow | is_nan)
    out = _select(use_c, -_continued_fraction(ax, ex, ea, enabled & use_c, eps, mode),
                  _series(ax, ex, ea, enabled & ~use_c, eps, mode))
    out = _select(x_zero, ea.like(0.0), out)
    return _finish(_select(domain | is_nan, ea.like(float("nan")), out), et)


def IgammaGradA(a: XlaOp, x: XlaOp) -> XlaOp:
    """d/da of the regularized lower incomplete gamma function P(a, x)."""
    return _gradient("IgammaGradA", a, x, _Mode.DERIVATIVE)


def RandomGammaGrad(a: XlaOp, x: XlaOp) -> XlaOp:
    """The derivative of a gamma(a) sample x with respect to a (implicit
    reparameterization: -dP/da / dP/dx)."""
    return _gradient("RandomGammaGrad", a, x, _Mode.SAMPLE_DERIVATIVE)


# ---- regularized incomplete beta ---------------------------------------------------------------
def _lentz(api: str, a: _E, b: _E, x: _E, num_iterations: int, small: float) -> _E:
    """XLA's LentzThompsonBarnettAlgorithm for I_x(a, b)'s continued fraction (DLMF
    8.17.22): partial numerators d_1 = 1, d_2m = -(a+m)(a+b+m)x / ((a+2m)(a+2m+1)),
    d_2m+1 = m(b-m)x / ((a+2m-1)(a+2m)); partial denominators 0 then 1; until every
    |delta - 1| < eps/2 or `num_iterations`."""
    one_i = _E(a.b.constant(Literal.from_numpy(np.int32(1)), api_name=api), api)
    true = _E(a.b.constant(Literal.from_numpy(np.bool_(True)), api_name=api), api)
    h = a.like(small)  # the first partial denominator is 0, below `small`

    def cond(v: list[_E]) -> _E:
        return v[0].cmp(_D.LT, float(num_iterations)) & v[1]

    def body(v: list[_E]) -> list[_E]:
        it, _, c_prev, d_prev, h_prev, aa, bb, xx = v
        shape = aa.op.shape()
        itb = _E(it.b.add_op("broadcast_in_dim", [it.op], BroadcastInDimAttrs(
            shape.dimensions, ()), api_name=api), api)
        even = (itb - (itb / 2.0) * 2.0).cmp(_D.EQ, 0.0)
        is_one = itb.cmp(_D.EQ, 1.0)
        m_int = (itb - 1.0) / 2.0
        m = _E(it.b.add_op("convert", [m_int.op], ConvertAttrs(shape.element_type),
                           api_name=api), api)
        m_zero = m_int.cmp(_D.EQ, 0.0)
        zero_num = -(aa + bb) * xx / (aa + 1.0)
        even_num = _select(m_zero, zero_num, -(aa + m) * (aa + bb + m) * xx /
                           ((aa + m * 2.0) * (aa + m * 2.0 + 1.0)))
        odd_num = m * (bb - m) * xx / ((aa + m * 2.0 - 1.0) * (aa + m * 2.0))
        num = _select(is_one, xx.like(1.0), _select(even, even_num, odd_num))
        den = aa.like(1.0)  # iterations >= 1
        c = den + num / c_prev
        c = _select(c.fn("abs").cmp(_D.LT, small), c.like(small), c)
        d = den + num * d_prev
        d = _select(d.fn("abs").cmp(_D.LT, small), d.like(small), d)
        d = d.like(1.0) / d
        delta = c * d
        unconverged = _any((delta - 1.0).fn("abs").cmp(_D.GE, small))
        return [it + 1.0, unconverged, c, d, h_prev * delta, aa, bb, xx]

    out = _while(api, [one_i, true, h, a.like(0.0), h, a, b, x], cond, body)
    return out[4]


def RegularizedIncompleteBeta(a: XlaOp, b: XlaOp, x: XlaOp) -> XlaOp:
    """I_x(a, b), the regularized incomplete beta function (XLA math.cc: the continued
    fraction where it converges fast, x < (a+1)/(a+b+2), else 1 - I_{1-x}(b, a))."""
    api = "RegularizedIncompleteBeta"
    got = _operands(api, a, x)
    if isinstance(got, XlaOp):
        return got
    got_b = _operands(api, b, x)
    if isinstance(got_b, XlaOp):
        return got_b
    ea, ex, et = got
    eb = got_b[0]
    eps = _limits(ea)[0]
    inf = float("inf")
    a_zero = ea.cmp(_D.EQ, 0.0) | eb.cmp(_D.EQ, inf)
    b_zero = eb.cmp(_D.EQ, 0.0) | ea.cmp(_D.EQ, inf)
    x_zero, x_one = ex.cmp(_D.EQ, 0.0), ex.cmp(_D.EQ, 1.0)
    is_nan = ea.isnan() | eb.isnan() | ex.isnan()
    result_zero = (b_zero & ~x_one) | (a_zero & x_zero)
    result_one = (a_zero & ~x_zero) | (b_zero & x_one)
    result_nan = ea.cmp(_D.LT, 0.0) | eb.cmp(_D.LT, 0.0) | ex.cmp(_D.LT, 0.0) | \
        ex.cmp(_D.GT, 1.0) | (a_zero & b_zero) | is_nan
    fast = ex.cmp(_D.LT, (ea + 1.0) / (ea + eb + 2.0))
    a2, b2 = _select(fast, ea, eb), _select(fast, eb, ea)
    x2 = _select(fast, ex, 1.0 - ex)
    wide = ea.op.shape().element_type is ElementType.F64
    fraction = _lentz(api, a2, b2, x2, 600 if wide else 200, eps / 2)
    tiny = float(np.finfo(ea.op.shape().element_type.dtype).tiny) * 2
    lbeta_small_a = b2.fn("chlo.lgamma") - (a2 + b2).fn("chlo.lgamma")
    lbeta = a2.fn("chlo.lgamma") + lbeta_small_a
    log1m_x = (-x2).fn("log_plus_one")
    factor = _select(a2.cmp(_D.LT, tiny),
                     (log1m_x * b2 - lbeta_small_a).fn("exponential"),
                     (x2.fn("log") * a2 + log1m_x * b2 - lbeta)
                     .fn("exponential") / a2)
    out = fraction * factor
    out = _select(fast, out, 1.0 - out)
    out = _select(result_zero, ea.like(0.0), out)
    out = _select(result_one, ea.like(1.0), out)
    return _finish(_select(result_nan, ea.like(float("nan")), out), et)
