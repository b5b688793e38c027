"""interpret(cpu_pipeline(m)) == interpret(m) on hypothesis-generated programs.

The generator (`programs`) builds typed programs over f32, bf16, f16, f64, s32, s8, u8 and u32:
element-wise unary/binary ops (also with splatted constants on either side, and an operand
with itself, so x - x, x / x, x * 0 ... appear), compare/select/clamp, convert, broadcasts,
reshapes, transposes, reverses, slices, pads, concatenates, iotas, dynamic slices and updates
with constant (possibly out-of-range) indices, reduces, dot_general with batch and contracting
dimensions, and while loops with a counter, a carried value and a loop-invariant operand.
Arguments are random over each type's whole range (integers wrap, floats include NaN/inf).

With `exact_only` (no float-inexact simplifier rows, no expanders) results must match bit for
bit (any NaN matches any NaN: payloads are not part of the contract); the default pipeline may
differ only where its declared-inexact rewrites allow (signed zeros and flushed denormals:
compared with -0 == +0, NaN == NaN; the logistic expander within 1e-6 relative).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.support import random_array
from xlapy.interpreter import Interpreter
from xlapy.ir import Instruction, Module
from xlapy.passes import cpu_pipeline
from xlapy.passes.hlo_builder import Emitter, HloBuilder
from xlapy.types import ElementType, Shape

E = ElementType
TYPES = [E.F32, E.BF16, E.F16, E.F64, E.S32, E.S8, E.U8, E.U32]
FLOAT_UNARY = ["negate", "abs", "exponential", "tanh", "floor", "ceil", "sign", "sqrt", "log",
               "round_nearest_even", "sine", "rsqrt"]
INT_UNARY = ["negate", "abs", "not", "sign", "popcnt", "count_leading_zeros"]
COMMON_BINARY = ["add", "subtract", "multiply", "maximum", "minimum", "divide", "remainder"]
FLOAT_BINARY = COMMON_BINARY + ["power", "atan2"]
INT_BINARY = COMMON_BINARY + ["and", "or", "xor", "shift_left", "shift_right_logical",
                              "shift_right_arithmetic"]
DIRECTIONS = ["EQ", "NE", "LT", "LE", "GT", "GE"]
MAX_ELEMENTS = 64
MAX_STEPS = 12


def _consts(et: ElementType) -> list[Any]:
    if et.is_float:
        return [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, float("inf"), float("nan")]
    info = np.iinfo(et.dtype)
    return [0, 1, 2, -1 if et.is_signed else 3, int(info.max), int(info.min)]


def _unary(et: ElementType) -> list[str]:
    if et.is_float:
        return FLOAT_UNARY
    return INT_UNARY if et.is_signed else ["not", "popcnt", "count_leading_zeros"]


def _n(dims: tuple[int, ...]) -> int:
    return int(np.prod(dims)) if dims else 1


class _Gen:
    """Program state: the builder and the values made so far (arrays only)."""

    def __init__(self, draw: st.DrawFn, types: list[ElementType]) -> None:
        self.draw = draw
        self.types = types
        self.g = HloBuilder()
        self.vals: list[Instruction] = []
        self.params: list[Instruction] = []

    def pick(self, pred: Any = None) -> Instruction:
        pool = [v for v in self.vals if pred is None or pred(v)]
        return self.draw(st.sampled_from(pool))

    def partner(self, a: Instruction, et: ElementType | None = None) -> Instruction:
        """A value of a's shape (and `et`, default a's type): often a itself."""
        want = et or a.shape.element_type
        return self.pick(lambda v: v.shape.dimensions == a.shape.dimensions
                         and v.shape.element_type == want) if want != a.shape.element_type \
            or self.draw(st.booleans()) else a

    def sub_dims(self, rank: int) -> tuple[int, ...]:
        return tuple(self.draw(st.permutations(range(rank)))[:self.draw(st.integers(1, rank))])


def _dims(a: Instruction) -> tuple[int, ...]:
    return tuple(a.shape.dimensions)


def _et(a: Instruction) -> ElementType:
    return a.shape.element_type


def _step(s: _Gen) -> Instruction | None:
    """One random op over the values so far; None when the draw does not fit (too large)."""
    g, draw = s.g, s.draw
    kind = draw(st.sampled_from([
        "unary", "binary", "const", "select", "clamp", "convert", "broadcast", "reshape",
        "transpose", "reverse", "slice", "pad", "concat", "iota", "dynamic_slice",
        "dynamic_update_slice", "reduce", "dot", "while", "while"]))
    a = s.pick(lambda v: _et(v) != E.PRED)
    et, dims = _et(a), _dims(a)
    rank = len(dims)
    if kind == "unary":
        return g.op(draw(st.sampled_from(_unary(et))), a)
    if kind == "binary":
        op = draw(st.sampled_from(FLOAT_BINARY if et.is_float else INT_BINARY))
        return g.op(op, a, s.partner(a))
    if kind == "const":
        op = draw(st.sampled_from(FLOAT_BINARY if et.is_float else INT_BINARY))
        c = g.splat(draw(st.sampled_from(_consts(et))), a.shape)
        return g.op(op, a, c) if draw(st.booleans()) else g.op(op, c, a)
    if kind == "select":
        p = g.cmp(a, s.partner(a), draw(st.sampled_from(DIRECTIONS)))
        if draw(st.booleans()):
            p = g.op(draw(st.sampled_from(["and", "or", "xor"])), p,
                     g.cmp(a, s.partner(a), draw(st.sampled_from(DIRECTIONS))))
        return g.select(p, a, s.partner(a)) if draw(st.booleans()) else p
    if kind == "clamp":
        lo = g.splat(draw(st.sampled_from(_consts(et))), Shape.scalar(et)) \
            if draw(st.booleans()) else s.partner(a)
        return g.clamp(lo, a, s.partner(a))
    if kind == "convert":
        to = draw(st.sampled_from(s.types))
        v = g.convert(a, new_element_type=to)
        return g.convert(v, new_element_type=et) if draw(st.booleans()) else v
    if kind == "broadcast":
        size = draw(st.integers(1, 3))
        if _n(dims) * size > MAX_ELEMENTS:
            return None
        pos = draw(st.integers(0, rank))
        out = dims[:pos] + (size,) + dims[pos:]
        keep = tuple(k if k < pos else k + 1 for k in range(rank))
        return g.bcast(a, out, keep)
    if kind == "reshape":
        n, out = _n(dims), []
        while n > 1 and len(out) < 3:
            f = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
            out.append(f)
            n //= f
        if n > 1 or draw(st.booleans()):
            out.append(n)
        if _n(dims) == 0:
            out = [0]
        return g.reshape(a, shape=tuple(out))
    if kind == "transpose":
        return g.transpose(a, permutation=tuple(draw(st.permutations(range(rank)))))
    if kind == "reverse":
        return g.reverse(a, dimensions=tuple(sorted(s.sub_dims(rank)))) if rank else None
    if kind == "slice":
        starts = [draw(st.integers(0, d)) for d in dims]
        limits = [draw(st.integers(b, d)) for b, d in zip(starts, dims)]
        strides = [draw(st.integers(1, 3)) for _ in dims]
        return g.slice(a, start_indices=tuple(starts), limit_indices=tuple(limits),
                       strides=tuple(strides))
    if kind == "pad":
        lo = [draw(st.integers(-1, 2)) for _ in dims]
        hi = [draw(st.integers(-1, 2)) for _ in dims]
        interior = [draw(st.integers(0, 1)) for _ in dims]
        out = [d + max(d - 1, 0) * i + low + high
               for d, i, low, high in zip(dims, interior, lo, hi)]
        if any(d < 0 for d in out) or _n(tuple(out)) > MAX_ELEMENTS:
            return None
        value = g.const(draw(st.sampled_from(_consts(et))), et)
        return g.pad(a, value, edge_padding_low=tuple(lo), edge_padding_high=tuple(hi),
                     interior_padding=tuple(interior))
    if kind == "concat":
        if not rank or 2 * _n(dims) > MAX_ELEMENTS:
            return None
        return g.concatenate(a, s.partner(a), dimension=draw(st.integers(0, rank - 1)))
    if kind == "iota":
        if not rank:
            return None
        return g.iota(shape=a.shape, iota_dimension=draw(st.integers(0, rank - 1)))
    if kind in ("dynamic_slice", "dynamic_update_slice"):
        if not rank:
            return None
        idx = [g.const(draw(st.integers(-2, d + 1)), E.S32) for d in dims]
        sizes = tuple(draw(st.integers(0, d)) for d in dims)
        if kind == "dynamic_slice":
            return g.dynamic_slice(a, *idx, slice_sizes=sizes)
        upd = g.slice(s.partner(a), start_indices=(0,) * rank, limit_indices=sizes,
                      strides=(1,) * rank)
        return g.dynamic_update_slice(a, upd, *idx)
    if kind == "reduce":
        if not rank:
            return None
        red = draw(st.sampled_from(["add", "maximum", "minimum", "multiply"] +
                                   ([] if et.is_float else ["and", "or", "xor"])))
        init = g.const(draw(st.sampled_from(_consts(et))), et)
        return g.reduce(a, init, tuple(sorted(s.sub_dims(rank))), g.scalar_fn(red, et))
    if kind == "dot":
        if not rank:
            return None
        order = draw(st.permutations(range(rank)))
        nb = draw(st.integers(0, rank - 1))
        nc = draw(st.integers(0, rank - nb))
        batch, contract = tuple(order[:nb]), tuple(order[nb:nb + nc])
        free = [dims[d] for d in order[nb + nc:]]
        out = tuple(dims[d] for d in batch) + tuple(free) + tuple(free)
        if _n(out) > MAX_ELEMENTS:
            return None
        b = s.partner(a)
        return g.dot_general(a, b, lhs_batching_dimensions=batch, rhs_batching_dimensions=batch,
                             lhs_contracting_dimensions=contract,
                             rhs_contracting_dimensions=contract)
    return _while(s, a)


_CMP = {"LT": lambda a, b: a < b, "LE": lambda a, b: a <= b, "NE": lambda a, b: a != b,
        "GT": lambda a, b: a > b, "GE": lambda a, b: a >= b}


def _while(s: _Gen, x: Instruction) -> Instruction | None:
    """while i <dir> bound: (i + step, f(y, inv, i), inv) over (i, y, inv); returns y or i.

    The counter starts, steps and compares in several ways (trip-count analysis must get all
    of them right); the body may read the counter and may compute something from the
    invariant only (which invariant code motion can hoist)."""
    g, draw = s.g, s.draw
    et = _et(x)
    inv = s.partner(x)
    ct = draw(st.sampled_from([E.S32, E.S32, E.F32]))  # the counter's type
    frac = [0.5, -0.5] if ct.is_float else []
    start = draw(st.sampled_from([0, 1, -1, 3] + frac))
    step = draw(st.sampled_from([1, 2, -1] + frac))
    direction = draw(st.sampled_from(list(_CMP)))
    bound = draw(st.sampled_from(list(range(-2, 5)) + frac))
    trips, i = 0, start
    while _CMP[direction](i, bound) and trips <= 4:
        trips, i = trips + 1, i + step
    if trips > 4:
        return None  # runs (nearly) forever
    op = draw(st.sampled_from(FLOAT_BINARY if et.is_float else INT_BINARY))
    unary = draw(st.sampled_from(_unary(et)))
    hoistable = draw(st.booleans())
    use_counter = draw(st.booleans())
    shapes = [Shape.scalar(ct), x.shape, x.shape]

    def cond(e: Emitter, i: Instruction, y: Instruction, v: Instruction) -> Instruction:
        return e.cmp(i, e.const(bound, ct), direction)

    def body(e: Emitter, i: Instruction, y: Instruction, v: Instruction) -> Instruction:
        # `unary(inv)` does not depend on the iteration: invariant code motion may hoist it.
        t = e.op(unary, v) if hoistable else y
        if use_counter:
            c = e.convert(i, new_element_type=et)
            t = e.add(t, e.bcast(c, x.shape.dimensions, ()) if x.shape.rank else c)
        return e.tuple(e.add(i, e.const(step, ct)), e.op(op, y, t), v)

    c = g.sub("cond", shapes, cond)
    b = g.sub("body", shapes, body)
    b.multi_result = True
    w = g.op("while", g.const(start, ct), x, inv, called=[c, b])
    return g.get_tuple_element(w, index=0 if draw(st.integers(0, 5)) == 0 else 1)


@st.composite
def programs(draw: st.DrawFn, types: tuple[ElementType, ...] = tuple(TYPES)
             ) -> tuple[Module, list[np.ndarray]]:
    """A random program and arguments for it. Each source is a parameter or (sometimes) a
    constant holding the same kind of random value, so constant folding has work too."""
    s = _Gen(draw, list(types))
    et = draw(st.sampled_from(s.types))
    rank = draw(st.integers(0, 3))
    dims = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    seed = draw(st.integers(0, 2 ** 16))
    args = []
    for k in range(draw(st.integers(1, 3))):
        value = random_array(et, dims, seed + k)
        if k and draw(st.integers(0, 3)) == 0:
            s.vals.append(s.g.const(value, et))
        else:
            s.params.append(s.g.param(Shape.array(et, dims)))
            s.vals.append(s.params[-1])
            args.append(value)
    sources = len(s.vals)
    for _ in range(draw(st.integers(1, MAX_STEPS))):
        v = _step(s)
        if v is not None:
            s.vals.append(v)
    made = s.vals[sources:] or s.vals
    outs = draw(st.lists(st.sampled_from(made), min_size=1, max_size=3))
    return s.g.build(s.g.tuple(*outs) if len(outs) > 1 else outs[0]), args


def _leaves(v: object) -> list[np.ndarray]:
    return [x for e in v for x in _leaves(e)] if isinstance(v, tuple) else [np.asarray(v)]


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    """Bit-identical, except that any NaN matches any NaN (payloads are not compared)."""
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    if x.tobytes() == y.tobytes():
        return True
    if x.dtype.kind in "biu":
        return False
    nx, ny = np.isnan(x.astype(np.float64)), np.isnan(y.astype(np.float64))
    ints = np.dtype(f"u{x.dtype.itemsize}")
    return bool((nx == ny).all() and np.array_equal(x.view(ints)[~nx], y.view(ints)[~ny]))


def _run(module: Module, args: list[np.ndarray]) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        return _leaves(Interpreter().run_module(module, args))


@settings(max_examples=150, deadline=None)
@given(programs())
def test_exact_pipeline_is_bit_exact(program: tuple[Module, list[np.ndarray]]) -> None:
    module, args = program
    before_text = module.to_text()
    before = _run(module, args)
    cpu_pipeline(verify=True, exact_only=True, expand=False).run(module)
    after = _run(module, args)
    assert len(before) == len(after)
    for k, (x, y) in enumerate(zip(before, after)):
        assert same_bits(x, y), (f"output {k} differs:\n{x!r}\nvs\n{y!r}\nprogram:\n"
                                 f"{before_text}\nafter:\n{module.to_text()}")


@settings(max_examples=60, deadline=None)
@given(programs(types=(E.S32, E.S8, E.U8, E.U32)))
def test_default_pipeline_is_bit_exact_on_integer_programs(
        program: tuple[Module, list[np.ndarray]]) -> None:
    """Every rewrite is exact on integers (wrapping arithmetic), inexact rows included."""
    module, args = program
    before = _run(module, args)
    cpu_pipeline(verify=True).run(module)
    after = _run(module, args)
    for x, y in zip(before, after):
        assert x.tobytes() == y.tobytes() and x.dtype == y.dtype, (x, y, module.to_text())


# ---- the default pipeline (declared-inexact rewrites on) on f32 element-wise programs ----------
UNARY = ["negate", "abs", "exponential", "tanh", "floor", "sign", "sqrt"]
BINARY = ["add", "subtract", "multiply", "maximum", "minimum", "divide"]
SHAPE = (3, 4)


@st.composite
def f32_programs(draw: st.DrawFn, allow_logistic: bool = False) -> Module:
    g = HloBuilder()
    vals = [g.param("f32[3,4]"), g.param("f32[3,4]")]
    n = draw(st.integers(1, 14))
    unary = UNARY + (["logistic"] if allow_logistic else [])
    for _ in range(n):
        kind = draw(st.sampled_from(["u", "b", "c", "t", "r", "s"]))
        a = draw(st.sampled_from(vals))
        if kind == "u":
            v = g.op(draw(st.sampled_from(unary)), a)
        elif kind == "b":
            v = g.op(draw(st.sampled_from(BINARY)), a, draw(st.sampled_from(vals)))
        elif kind == "c":
            c = draw(st.sampled_from([0.0, 1.0, -1.0, 2.0, 0.5]))
            v = g.op(draw(st.sampled_from(BINARY)), a, g.splat(c, a))
        elif kind == "t":
            v = g.transpose(g.transpose(a, permutation=(1, 0)), permutation=(1, 0))
        elif kind == "r":
            r = g.reduce(a, g.const(0.0), (1,), g.scalar_fn("add"))
            v = g.add(a, g.bcast(r, SHAPE, (0,)))
        else:
            v = g.select(g.cmp(a, draw(st.sampled_from(vals)), "LT"), a,
                         draw(st.sampled_from(vals)))
        vals.append(v)
    outs = draw(st.lists(st.sampled_from(vals[2:]), min_size=1, max_size=3))
    return g.build(g.tuple(*outs) if len(outs) > 1 else outs[0])


def _args(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(SHAPE) * 2).astype(np.float32) for _ in range(2)]


@settings(max_examples=30, deadline=None)
@given(f32_programs(allow_logistic=True), st.integers(0, 1000))
def test_default_pipeline_within_declared_tolerance(module: Module, seed: int) -> None:
    args = _args(seed)
    before = _run(module, args)
    cpu_pipeline(verify=True).run(module)
    after = _run(module, args)
    for x, y in zip(before, after):
        np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-30, equal_nan=True)
