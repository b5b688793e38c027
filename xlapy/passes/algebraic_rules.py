"""Algebraic simplifier rules, part 1: the `Rule` row type and arithmetic / logic rewrites.

Each row: name, the opcode it matches, a rewrite `fn(instr, emitter) -> replacement | None`,
and whether it is bit-exact on floating-point values. A row with `float_exact=False` can differ
from the original on signed zeros (-0 + 0 is +0), on denormals (XLA:CPU flushes them in
arithmetic, so A * 1 turns a denormal into 0 while A does not) or on NaN payloads; XLA applies
such rewrites anyway, and so does this pass unless `exact_only` is set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from xlapy.ir import Instruction
from xlapy.ops.attrs import ComparisonDirection
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import constant_value, is_splat, splat_value
from xlapy.types import Shape
from xlapy.types.element_type import iinfo

RuleFn = Callable[[Instruction, Emitter], Instruction | None]


@dataclass(frozen=True)
class Rule:
    """One rewrite: `before => after` is in the comment above its row."""

    name: str
    opcode: str
    fn: RuleFn
    float_exact: bool = True


def _ops(i: Instruction) -> list[Instruction]:
    return i.operands


def _is_int(i: Instruction) -> bool:
    t = i.shape.element_type
    return t.is_integer


def _is_pred(i: Instruction) -> bool:
    return i.shape.element_type.is_pred


def _square_exact(i: Instruction) -> bool:
    """pow(A, 2) is A * A bit for bit: integers, and real floats of at most 32 bits."""
    t = i.shape.element_type
    return not t.is_complex and (not t.is_float or t.bits <= 32)


def _half_root(i: Instruction) -> bool:
    """power(A, 0.5) of a real float A >= 0 that is never -0."""
    t = i.shape.element_type
    return t.is_float and not t.is_complex and is_splat(_ops(i)[1], 0.5) and \
        _non_negative(_ops(i)[0], 4)


#: Ops whose result is >= 0 and never -0 when their operands are (abs, exp: whatever).
_KEEPS_SIGN = frozenset({"add", "multiply", "divide", "maximum", "minimum"})


def _non_negative(x: Instruction, depth: int) -> bool:
    """x is +0, positive or NaN in every element, never -0 (within `depth` ops)."""
    op = x.opcode
    if op in ("abs", "exponential"):
        return True
    if op == "broadcast_in_dim":
        return depth > 0 and _non_negative(x.operands[0], depth - 1)
    if op == "constant":
        v = splat_value(x)
        return v is not None and v.dtype.kind == "f" and not np.signbit(v) and v >= 0
    if op == "multiply" and x.operands[0] is x.operands[1]:
        return True
    return op in _KEEPS_SIGN and depth > 0 and all(
        _non_negative(o, depth - 1) for o in x.operands)


def _lowest(i: Instruction, x: Instruction) -> bool:
    t = i.shape.element_type
    if t.is_float:
        return is_splat(x, -np.inf)
    return t.is_integer and is_splat(x, int(iinfo(t).min))


def _highest(i: Instruction, x: Instruction) -> bool:
    t = i.shape.element_type
    if t.is_float:
        return is_splat(x, np.inf)
    return t.is_integer and is_splat(x, int(iinfo(t).max))


def _neg(x: Instruction) -> Instruction | None:
    return x.operands[0] if x.opcode == "negate" else None


def _pow2_reciprocal(x: Instruction) -> float | None:
    """1/C when `x` is a float32/64 splat C = +-2^k whose reciprocal is a normal number."""
    if x.shape.element_type.hlo_name not in ("f32", "f64"):
        return None
    v = splat_value(x)
    if v is None:
        return None
    f = float(v)
    if f == 0 or not np.isfinite(f):
        return None
    mant, _ = np.frexp(abs(f))
    r = np.asarray(1.0 / f, x.shape.dtype)
    if mant != 0.5 or not np.isfinite(r) or abs(float(r)) < np.finfo(x.shape.dtype).tiny:
        return None
    return float(r)


def _self_compare(i: Instruction, direction: ComparisonDirection) -> bool:
    a, b = _ops(i)
    return (a is b and _is_int(a) and i.attrs.comparison_direction is direction)


#: Ops whose integer values are some of their (first) operand's.
_RANGE_KEEPING = frozenset({"broadcast_in_dim", "reshape", "transpose", "slice", "reverse",
                            "copy"})


def int_range(x: Instruction, depth: int = 8) -> tuple[int, int] | None:
    """(lowest, highest) bounds of an integer array's values where the ops that make it say
    so (an iota and what moves its elements, constants), else None."""
    if not x.shape.is_array or not x.shape.element_type.is_integer or depth < 0:
        return None
    if x.opcode == "iota":
        n = x.shape.dimensions[x.attrs.iota_dimension]
        hi = iinfo(x.shape.element_type).max
        return (0, n - 1) if 0 < n <= hi + 1 else None
    if x.opcode in _RANGE_KEEPING:
        return int_range(x.operands[0], depth - 1)
    if x.opcode == "constant":
        arr = constant_value(x)
        return (int(arr.min()), int(arr.max())) if arr is not None and arr.size else None
    return None


_DECIDE = {
    ComparisonDirection.LT: lambda a, b: (a[1] < b[0], a[0] >= b[1]),
    ComparisonDirection.LE: lambda a, b: (a[1] <= b[0], a[0] > b[1]),
    ComparisonDirection.GT: lambda a, b: (a[0] > b[1], a[1] <= b[0]),
    ComparisonDirection.GE: lambda a, b: (a[0] >= b[1], a[1] < b[0]),
    ComparisonDirection.EQ: lambda a, b: (a[0] == a[1] == b[0] == b[1],
                                          a[1] < b[0] or b[1] < a[0]),
    ComparisonDirection.NE: lambda a, b: (a[1] < b[0] or b[1] < a[0],
                                          a[0] == a[1] == b[0] == b[1]),
}


def _compare_range(i: Instruction, e: Emitter) -> Instruction | None:
    """An integer compare the operands' ranges decide (JAX's negative-index wrap of an iota,
    `where(iota < 0, iota + n, iota)`: jnp.diagonal, take, indexing): a splat."""
    a, b = _ops(i)
    ra = int_range(a)
    rb = int_range(b) if ra is not None else None
    if rb is None:
        return None
    true, false = _DECIDE[i.attrs.comparison_direction](ra, rb)
    return e.splat(True, i.shape) if true else e.splat(False, i.shape) if false else None


def splatted_scalar(x: Instruction) -> Instruction | None:
    """The scalar a broadcast_in_dim splats, or None."""
    if x.opcode == "broadcast_in_dim" and x.operands[0].shape.rank == 0:
        return x.operands[0]
    return None


def _op_of_splats(i: Instruction, e: Emitter) -> Instruction | None:
    """op(broadcast(a), broadcast(b)) => broadcast(op(a, b)) for a and b scalars (the same
    arithmetic, once; folding then sees op(a, b) when both are constants)."""
    a, b = (splatted_scalar(o) for o in _ops(i))
    if a is None or b is None:
        return None
    return e.broadcast_in_dim(e.op(i.opcode, a, b), shape=i.shape.dimensions,
                              broadcast_dimensions=())


def _sink_broadcast(i: Instruction, e: Emitter) -> Instruction | None:
    """op(broadcast(a), ...) => broadcast(op(a, ...)) for a costly element-wise op whose
    operands are broadcasts of the same shape into the same dimensions (or scalar splats),
    from at least half as many elements: the same arithmetic on each distinct value, once
    (XLA's TryToSinkBroadcastAfterOpWithUniqueNonScalarOperand). The sin(y) of a meshgrid's
    Y ran per element of [2048, 2048]: 0.71 ms, XLA 0.46."""
    wide = [o for o in i.operands if splatted_scalar(o) is None]
    if not wide or any(o.opcode != "broadcast_in_dim" for o in wide):
        return None
    dims = wide[0].attrs.broadcast_dimensions
    src = wide[0].operands[0].shape
    if any(o.attrs.broadcast_dimensions != dims or o.operands[0].shape != src for o in wide) \
            or 2 * src.num_elements > i.shape.num_elements:
        return None
    ops = [o.operands[0] if splatted_scalar(o) is None else
           e.bcast(splatted_scalar(o), src.dimensions, ()) for o in i.operands]
    inner = e.comp.add(Instruction(i.opcode, ops, Shape.array(i.shape.element_type,
                                                              src.dimensions),
                                   i.attrs, i.called, i.name))
    return e.bcast(inner, i.shape.dimensions, dims)


#: The costly element-wise ops whose broadcast operands `_sink_broadcast` moves after them.
_SINK_OPS = ("exponential", "exponential_minus_one", "log", "log_plus_one", "tanh", "logistic",
             "sqrt", "rsqrt", "cbrt", "sine", "cosine", "tan", "erf", "divide", "remainder",
             "power", "atan2")


#: Binary elementwise ops without attributes (their result type is their operands').
_SPLAT_BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
                 "remainder", "atan2", "and", "or", "xor")


def _select(i: Instruction, e: Emitter) -> tuple[Instruction, Instruction, Instruction]:
    p, a, b = _ops(i)
    return p, a, b


def _dot_outer(i: Instruction, e: Emitter) -> Instruction | None:
    """dot_general with no contracting dimension (an outer product, batched or not: JAX's
    per-example gradients): the spec's dot_product is then the reduce of one product with
    init 0, so each element is 0 + l * r in the dot's accumulation type (the interpreter's:
    ops.linalg), in the result type after. Element-wise, so it fuses with what reads it; as
    a dot it was a BLAS call per batch element of one rank-1 update each. A dot read only by
    a transpose is left to `_transpose_dot_outer`, which broadcasts straight into the
    transposed order (jnp.einsum("te,td->etd"), a mixture-of-experts dispatch: 1.1-4.3x
    XLA's time as a dot, a product then a transpose kernel, 0.9 as two kernels).
    0 + x is x but for -0 (the add keeps that). Exact: the interpreter evaluates such a dot
    as these very ops (ops.linalg._outer), denormals flushed as element-wise arithmetic
    flushes them, as on XLA:CPU, whose simplifier makes the same rewrite."""
    t = i.users[0] if len(i.users) == 1 else None
    if t is not None and t.opcode == "transpose" and \
            t.attrs.permutation != tuple(range(t.shape.rank)):
        return None
    return _outer(i, e, tuple(range(i.shape.rank)))


def _transpose_dot_outer(t: Instruction, e: Emitter) -> Instruction | None:
    """transpose(dot_general with no contracting dimension) as one broadcast product."""
    i = t.operands[0]
    if i.opcode != "dot_general" or len(i.users) != 1:
        return None
    return _outer(i, e, t.attrs.permutation)


def _transpose_dot_swap(t: Instruction, e: Emitter) -> Instruction | None:
    """transpose(dot_general(A, B)) as `swapped_dot`, where it is one."""
    return swapped_dot(e, t.operands[0], t.attrs.permutation)


def swapped_dot(e: Emitter, i: Instruction, perm: tuple[int, ...]) -> Instruction | None:
    """transpose(i, perm) as dot_general(B, A) when `i` is dot_general(A, B), read only
    there, and perm puts B's free dimensions before A's (each side's in order, batch
    dimensions first and in place): the dot writes the transposed order itself. JAX's
    einsum("bi,bj,ij->b") computes W^T X^T and reads it transposed in a batched dot (a
    product and a row sum here, small_dots.py): a transpose kernel between the GEMM and the
    sum, 1.28x XLA's time (XLA fuses the dot as X W). Not where the swapped dot has more
    operands a GEMM reads transposed (_gemm_transposes)."""
    from xlapy.ops.linalg import DotGeneralAttrs

    if i.opcode != "dot_general" or len(i.users) != 1 or not i.shape.is_array:
        return None
    a: DotGeneralAttrs = i.attrs
    if a.algorithm is not None or not a.lhs_contracting_dimensions:
        return None
    lhs, rhs = i.operands
    lb, lc = a.lhs_batching_dimensions, a.lhs_contracting_dimensions
    rb, rc = a.rhs_batching_dimensions, a.rhs_contracting_dimensions
    nb, nl, nr = len(lb), lhs.shape.rank - len(lb) - len(lc), rhs.shape.rank - len(rb) - len(rc)
    if not nl or not nr or tuple(perm) != (
            *range(nb), *range(nb + nl, nb + nl + nr), *range(nb, nb + nl)):
        return None
    if _gemm_transposes(lhs, rhs, lb, lc, rb, rc) < _gemm_transposes(rhs, lhs, rb, rc, lb, lc):
        return None  # ((x @ w).T as w^T x^T: the TT product was 1.4x the NN and a transpose)
    swapped = DotGeneralAttrs(rb, lb, rc, lc, tuple(reversed(a.precision_config)),
                              a.result_element_type)
    dims = tuple(i.shape.dimensions[d] for d in perm)
    shape = Shape.array(i.shape.element_type, dims)
    return e.comp.add(Instruction("dot_general", [rhs, lhs], shape, swapped, (), i.name))


def _gemm_transposes(lhs: Instruction, rhs: Instruction, lb: tuple[int, ...],
                     lc: tuple[int, ...], rb: tuple[int, ...], rc: tuple[int, ...]) -> int:
    """How many operands of dot(lhs, rhs) a row-major GEMM reads transposed: the lhs
    unless its batch dimensions lead and its contracting ones are last, the rhs unless its
    contracting dimensions follow its leading batch dimensions."""
    n = lhs.shape.rank
    lhs_n = tuple(lb) == tuple(range(len(lb))) and tuple(lc) == tuple(range(n - len(lc), n))
    rhs_n = tuple(rb) == tuple(range(len(rb))) and \
        tuple(rc) == tuple(range(len(rb), len(rb) + len(rc)))
    return int(not lhs_n) + int(not rhs_n)


def _outer(i: Instruction, e: Emitter, perm: tuple[int, ...]) -> Instruction | None:
    """The product of `_dot_outer` with the dot's dimensions in the order `perm` (the
    result's dimension j is the dot's perm[j])."""
    from xlapy.ops.linalg import accumulate_dtype
    from xlapy.types import from_dtype

    a = i.attrs
    if a.lhs_contracting_dimensions or a.rhs_contracting_dimensions or \
            a.algorithm is not None or not i.shape.is_array or i.shape.element_type.is_pred:
        return None
    lhs, rhs = i.operands
    et = i.shape.element_type
    ts = [lhs.shape.element_type, rhs.shape.element_type]
    if et.is_float or et.is_complex:
        ts.append(et)
    acc = from_dtype(np.result_type(*(accumulate_dtype(t) for t in ts)))
    if et.is_integer:
        acc = et  # (wraparound: the low bits of the wide product)
    nb = len(a.lhs_batching_dimensions)
    out = tuple(i.shape.dimensions[d] for d in perm)
    where = {d: j for j, d in enumerate(perm)}  # a dot dimension's place in the result

    def side(x: Instruction, batch: tuple[int, ...], at: list[int]) -> Instruction:
        # x's dimensions in dot order (batch, then free) land at `at` of the dot: put them
        # in the order they take in the result, so the broadcast's dimensions increase
        dot_order = [*batch, *[d for d in range(x.shape.rank) if d not in batch]]
        ranked = sorted(range(len(at)), key=lambda k: where[at[k]])
        order = tuple(dot_order[k] for k in ranked)
        if order != tuple(range(x.shape.rank)):
            x = e.transpose(x, permutation=order)
        if x.shape.element_type != acc:
            x = e.convert(x, new_element_type=acc)
        return e.broadcast_in_dim(x, shape=out,
                                  broadcast_dimensions=tuple(sorted(where[d] for d in at)))

    nl = lhs.shape.rank - nb
    nr = rhs.shape.rank - nb
    p = e.multiply(side(lhs, tuple(a.lhs_batching_dimensions), list(range(nb + nl))),
                   side(rhs, tuple(a.rhs_batching_dimensions),
                        [*range(nb), *range(nb + nl, nb + nl + nr)]))
    if acc.is_float or acc.is_complex:
        p = e.add(e.splat(0, p.shape), p)
    return p if acc == et else e.convert(p, new_element_type=et)


ARITH_RULES: list[Rule] = [
    # dot_general(A, B) with no contracting dimension => 0 + convert(A) * convert(B)
    Rule("dot_outer", "dot_general", _dot_outer),
    # transpose(dot_general(A, B) with no contracting dimension) => the same, transposed
    #   broadcasts
    Rule("transpose_dot_outer", "transpose", _transpose_dot_outer),
    # transpose(dot_general(A, B)) with B's free dimensions first => dot_general(B, A)
    Rule("transpose_dot_swap", "transpose", _transpose_dot_swap, float_exact=False),
    # A + 0 => A
    Rule("add_zero_rhs", "add", lambda i, e: _ops(i)[0] if is_splat(_ops(i)[1], 0) else None,
         float_exact=False),
    # 0 + A => A
    Rule("add_zero_lhs", "add", lambda i, e: _ops(i)[1] if is_splat(_ops(i)[0], 0) else None,
         float_exact=False),
    # A - 0 => A
    Rule("sub_zero", "subtract", lambda i, e: _ops(i)[0] if is_splat(_ops(i)[1], 0) else None,
         float_exact=False),
    # A - A => 0   (integers: for floats inf - inf is NaN)
    Rule("sub_self", "subtract",
         lambda i, e: e.splat(0, i.shape) if _ops(i)[0] is _ops(i)[1] and _is_int(i) else None),
    # 0 - A => -A
    Rule("zero_sub", "subtract",
         lambda i, e: e.negate(_ops(i)[1]) if is_splat(_ops(i)[0], 0) else None,
         float_exact=False),
    # A * 1 => A
    Rule("mul_one_rhs", "multiply",
         lambda i, e: _ops(i)[0] if is_splat(_ops(i)[1], 1) else None, float_exact=False),
    # 1 * A => A
    Rule("mul_one_lhs", "multiply",
         lambda i, e: _ops(i)[1] if is_splat(_ops(i)[0], 1) else None, float_exact=False),
    # A * 0 => 0   (integers: for floats inf * 0 is NaN)
    Rule("mul_zero", "multiply",
         lambda i, e: _ops(i)[1] if _is_int(i) and is_splat(_ops(i)[1], 0) else None),
    # A * -1 => -A
    Rule("mul_neg_one", "multiply",
         lambda i, e: e.negate(_ops(i)[0]) if is_splat(_ops(i)[1], -1)
         and not i.shape.element_type.is_unsigned else None, float_exact=False),
    # A / 1 => A
    Rule("div_one", "divide", lambda i, e: _ops(i)[0] if is_splat(_ops(i)[1], 1) else None,
         float_exact=False),
    # A / 2^k => A * 2^-k   (f32/f64: scaling by a power of two rounds the same way)
    Rule("div_pow2", "divide",
         lambda i, e: e.multiply(_ops(i)[0], e.splat(_pow2_reciprocal(_ops(i)[1]), i.shape))
         if _pow2_reciprocal(_ops(i)[1]) is not None else None),
    # -(-A) => A
    Rule("neg_neg", "negate", lambda i, e: _neg(_ops(i)[0])),
    # not(not(A)) => A
    Rule("not_not", "not",
         lambda i, e: _ops(i)[0].operands[0] if _ops(i)[0].opcode == "not" else None),
    # abs(abs(A)) => abs(A)
    Rule("abs_abs", "abs", lambda i, e: _ops(i)[0] if _ops(i)[0].opcode == "abs" else None),
    # abs(-A) => abs(A)
    Rule("abs_neg", "abs", lambda i, e: e.abs(_neg(_ops(i)[0])) if _neg(_ops(i)[0]) is not None
         and not i.shape.element_type.is_complex else None),
    # A - (-B) => A + B
    Rule("sub_neg", "subtract",
         lambda i, e: e.add(_ops(i)[0], _neg(_ops(i)[1])) if _neg(_ops(i)[1]) is not None
         else None),
    # A + (-B) => A - B
    Rule("add_neg_rhs", "add",
         lambda i, e: e.subtract(_ops(i)[0], _neg(_ops(i)[1])) if _neg(_ops(i)[1]) is not None
         else None),
    # (-A) + B => B - A
    Rule("add_neg_lhs", "add",
         lambda i, e: e.subtract(_ops(i)[1], _neg(_ops(i)[0])) if _neg(_ops(i)[0]) is not None
         else None),
    # (-A) * (-B) => A * B
    Rule("mul_neg_neg", "multiply",
         lambda i, e: e.multiply(_neg(_ops(i)[0]), _neg(_ops(i)[1]))
         if _neg(_ops(i)[0]) is not None and _neg(_ops(i)[1]) is not None else None),
    # -(A - B) => B - A
    Rule("neg_sub", "negate",
         lambda i, e: e.subtract(_ops(i)[0].operands[1], _ops(i)[0].operands[0])
         if _ops(i)[0].opcode == "subtract" else None, float_exact=False),
    # max(A, A) => A
    Rule("max_self", "maximum", lambda i, e: _ops(i)[0] if _ops(i)[0] is _ops(i)[1] else None,
         float_exact=False),
    # min(A, A) => A
    Rule("min_self", "minimum", lambda i, e: _ops(i)[0] if _ops(i)[0] is _ops(i)[1] else None,
         float_exact=False),
    # max(A, lowest) => A   (-inf for floats, the minimum integer otherwise)
    Rule("max_lowest", "maximum",
         lambda i, e: _ops(i)[0] if _lowest(i, _ops(i)[1]) else None, float_exact=False),
    # min(A, highest) => A   (+inf for floats, the maximum integer otherwise)
    Rule("min_highest", "minimum",
         lambda i, e: _ops(i)[0] if _highest(i, _ops(i)[1]) else None, float_exact=False),
    # and(A, A) => A
    Rule("and_self", "and", lambda i, e: _ops(i)[0] if _ops(i)[0] is _ops(i)[1] else None),
    # or(A, A) => A
    Rule("or_self", "or", lambda i, e: _ops(i)[0] if _ops(i)[0] is _ops(i)[1] else None),
    # xor(A, A) => 0
    Rule("xor_self", "xor",
         lambda i, e: e.splat(0, i.shape) if _ops(i)[0] is _ops(i)[1] else None),
    # and(A, true) => A   (pred)
    Rule("and_true", "and",
         lambda i, e: _ops(i)[0] if _is_pred(i) and is_splat(_ops(i)[1], 1) else None),
    # and(A, false) => false   (pred)
    Rule("and_false", "and",
         lambda i, e: _ops(i)[1] if _is_pred(i) and is_splat(_ops(i)[1], 0) else None),
    # or(A, false) => A   (pred)
    Rule("or_false", "or",
         lambda i, e: _ops(i)[0] if _is_pred(i) and is_splat(_ops(i)[1], 0) else None),
    # or(A, true) => true   (pred)
    Rule("or_true", "or",
         lambda i, e: _ops(i)[1] if _is_pred(i) and is_splat(_ops(i)[1], 1) else None),
    # pow(A, 1) => A
    Rule("pow_one", "power", lambda i, e: _ops(i)[0] if is_splat(_ops(i)[1], 1) else None,
         float_exact=False),
    # pow(A, 0) => 1
    Rule("pow_zero", "power",
         lambda i, e: e.splat(1, i.shape) if is_splat(_ops(i)[1], 0)
         and not i.shape.element_type.is_complex else None),
    # pow(A, 2) => A * A: exact for real types of 32 bits or fewer (f32 pow is the f64
    # function rounded once, ops/libm.py `wide`, and A^2 is exact in f64 then); f64 and
    # complex in the row after
    Rule("pow_two", "power",
         lambda i, e: e.multiply(_ops(i)[0], _ops(i)[0]) if is_splat(_ops(i)[1], 2)
         and _square_exact(i) else None),
    Rule("pow_two_wide", "power",
         lambda i, e: e.multiply(_ops(i)[0], _ops(i)[0]) if is_splat(_ops(i)[1], 2)
         and not _square_exact(i) else None, float_exact=False),
    # pow(A, 0.5) => sqrt(A) for A >= 0 that is never -0 (`_non_negative`; sqrt(-0) is -0,
    # pow(-0, 0.5) +0): f32 pow is the f64 function rounded once, and the f64 root of an f32
    # rounds to f32 as the correctly rounded sqrt does; other widths in the row after
    # (pow within an ulp of the root). jnp.abs(x) ** 0.5 ran pow's log and exp: 5.9x XLA's
    Rule("pow_half", "power",
         lambda i, e: e.sqrt(_ops(i)[0]) if _half_root(i)
         and i.shape.element_type.bits == 32 else None),
    Rule("pow_half_wide", "power",
         lambda i, e: e.sqrt(_ops(i)[0]) if _half_root(i)
         and i.shape.element_type.bits != 32 else None, float_exact=False),
    # sign(sign(A)) => sign(A)
    Rule("sign_sign", "sign", lambda i, e: _ops(i)[0] if _ops(i)[0].opcode == "sign" else None),
    # floor(floor(A)) => floor(A)
    Rule("floor_floor", "floor",
         lambda i, e: _ops(i)[0] if _ops(i)[0].opcode == "floor" else None),
    # ceil(ceil(A)) => ceil(A)
    Rule("ceil_ceil", "ceil", lambda i, e: _ops(i)[0] if _ops(i)[0].opcode == "ceil" else None),
    # select(true, A, B) => A
    Rule("select_true", "select",
         lambda i, e: _ops(i)[1] if is_splat(_ops(i)[0], 1) else None),
    # select(false, A, B) => B
    Rule("select_false", "select",
         lambda i, e: _ops(i)[2] if is_splat(_ops(i)[0], 0) else None),
    # select(P, A, A) => A
    Rule("select_same", "select",
         lambda i, e: _ops(i)[1] if _ops(i)[1] is _ops(i)[2] else None),
    # select(not(P), A, B) => select(P, B, A)
    Rule("select_not", "select",
         lambda i, e: e.select(_ops(i)[0].operands[0], _ops(i)[2], _ops(i)[1])
         if _ops(i)[0].opcode == "not" else None),
    # (A == A) => true   (integers: NaN != NaN)
    Rule("compare_self_eq", "compare",
         lambda i, e: e.splat(True, i.shape) if _self_compare(i, ComparisonDirection.EQ)
         else None),
    # (A < B) => true / false   (integers whose ranges decide it: iota < 0 is false)
    Rule("compare_range", "compare", _compare_range),
    # (A != A) => false   (integers)
    Rule("compare_self_ne", "compare",
         lambda i, e: e.splat(False, i.shape) if _self_compare(i, ComparisonDirection.NE)
         else None),
] + [
    # op(broadcast(a), broadcast(b)) => broadcast(op(a, b))   (a, b scalars)
    Rule("op_of_scalar_broadcasts", op, _op_of_splats) for op in _SPLAT_BINARY
] + [
    # op(broadcast(a), ...) => broadcast(op(a, ...))   (costly ops, the same broadcasts)
    Rule("sink_broadcast", op, _sink_broadcast) for op in _SINK_OPS
]
