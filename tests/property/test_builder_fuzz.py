"""Builder fuzz: random sequences of builder ops with random (often invalid) arguments.

Each builder call must return an XlaOp without raising; then `build()` either succeeds (and
the computation runs on random arguments, its value having the program's result shape) or
raises BuilderError whose message starts with the builder name of the first op that failed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import event, given
from hypothesis import strategies as st

import xlapy
from tests.property.support import assert_value_has_shape, random_array
from xlapy.builder import XlaBuilder, XlaOp, ops
from xlapy.errors import BuilderError
from xlapy.types import ARRAY_TYPES, ElementType, Shape

#: A modest type set keeps the fuzz about structure, not numerics.
fuzz_types = st.sampled_from([ElementType.F32, ElementType.S32, ElementType.PRED,
                              ElementType.U8, ElementType.BF16, ElementType.C64,
                              ElementType.S4, ElementType.F64])
small = st.integers(-1, 4)
int_lists = st.lists(small, max_size=4).map(tuple)

# Each entry: builder name -> f(draw, pool, builder) -> result of the builder call.
Action = Callable[[st.DrawFn, list[XlaOp], XlaBuilder], Any]
ACTIONS: dict[str, Action] = {}


def action(name: str) -> Callable[[Action], Action]:
    def deco(fn: Action) -> Action:
        ACTIONS[name] = fn
        return fn

    return deco


def _pick(draw: st.DrawFn, pool: list[XlaOp]) -> XlaOp:
    return pool[draw(st.integers(0, len(pool) - 1))]


def _shape_of(op: XlaOp) -> Shape | None:
    return op.instr.shape if op.instr is not None else None


def _rank(op: XlaOp) -> int:
    s = _shape_of(op)
    return s.rank if s is not None and s.is_array else 0


def _near_valid_perm(draw: st.DrawFn, rank: int) -> tuple[int, ...]:
    perm = tuple(draw(st.permutations(range(rank))))
    return perm if draw(st.integers(0, 3)) else draw(int_lists)


for _name in ("Add", "Sub", "Mul", "Div", "Max", "Min", "And", "Or", "Xor", "Pow", "Rem",
              "Eq", "Lt", "ShiftLeft", "Atan2", "Complex"):
    def _binary(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder, _n: str = _name) -> Any:
        x, y = _pick(draw, pool), _pick(draw, pool)
        dims = () if draw(st.integers(0, 3)) else draw(int_lists)
        return getattr(ops, _n)(x, y, dims)

    ACTIONS[_name] = _binary

for _name in ("Neg", "Abs", "Exp", "Log", "Sqrt", "Not", "Floor", "Sign", "Tanh", "Real",
              "Imag", "IsFinite", "Clz", "PopulationCount", "Round", "Logistic"):
    def _unary(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder, _n: str = _name) -> Any:
        return getattr(ops, _n)(_pick(draw, pool))

    ACTIONS[_name] = _unary


@action("Reshape")
def _reshape(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    x = _pick(draw, pool)
    s = _shape_of(x)
    n = s.num_elements if s is not None and s.is_array else 1
    sizes = draw(st.sampled_from([(n,), (1, n), (n, 1)])) if draw(st.booleans()) else \
        draw(int_lists)
    return ops.Reshape(x, sizes)


@action("Transpose")
def _transpose(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    x = _pick(draw, pool)
    return ops.Transpose(x, _near_valid_perm(draw, _rank(x)))


@action("Rev")
def _rev(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    x = _pick(draw, pool)
    return ops.Rev(x, _near_valid_perm(draw, _rank(x))[:draw(st.integers(0, 2))])


@action("Slice")
def _slice(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    x = _pick(draw, pool)
    s = _shape_of(x)
    sizes = s.dimensions if s is not None and s.is_array else ()
    start = tuple(draw(st.integers(0, d)) for d in sizes)
    limit = tuple(draw(st.integers(a, d)) for a, d in zip(start, sizes))
    if not draw(st.integers(0, 3)):
        start = draw(int_lists)
    return ops.Slice(x, start, limit, draw(st.sampled_from([None, (1,) * len(sizes),
                                                             (2,) * len(sizes), (0,)])))


@action("BroadcastInDim")
def _bid(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    x = _pick(draw, pool)
    s = _shape_of(x)
    sizes = tuple(s.dimensions) if s is not None and s.is_array else ()
    extra = draw(st.integers(0, 2))
    shape = (2,) * extra + sizes
    dims = tuple(range(extra, extra + len(sizes)))
    if not draw(st.integers(0, 3)):
        dims = draw(int_lists)
    return ops.BroadcastInDim(x, shape, dims)


@action("Broadcast")
def _broadcast(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    return ops.Broadcast(_pick(draw, pool), draw(int_lists))


@action("ConcatInDim")
def _concat(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    x = _pick(draw, pool)
    others = [x] * draw(st.integers(0, 2)) + [_pick(draw, pool)] * draw(st.integers(0, 1))
    return ops.ConcatInDim(b, [x, *others], draw(small))


@action("Pad")
def _pad(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    x = _pick(draw, pool)
    s = _shape_of(x)
    et = s.element_type if s is not None and s.is_array else ElementType.F32
    value = ops.Constant(b, np.zeros((), et.dtype)) if draw(st.integers(0, 3)) else \
        _pick(draw, pool)
    config = [(draw(small), draw(small), draw(st.integers(0, 2))) for _ in range(_rank(x))]
    if not draw(st.integers(0, 5)):
        config = config[:-1]
    return ops.Pad(x, value, config)


@action("ConvertElementType")
def _convert(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    return ops.ConvertElementType(_pick(draw, pool), draw(st.sampled_from(ARRAY_TYPES)))


@action("BitcastConvertType")
def _bitcast(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    return ops.BitcastConvertType(_pick(draw, pool), draw(st.sampled_from(ARRAY_TYPES)))


@action("Select")
def _select(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    x = _pick(draw, pool)
    return ops.Select(_pick(draw, pool), x, x if draw(st.booleans()) else _pick(draw, pool))


@action("Dot")
def _dot(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    return ops.Dot(_pick(draw, pool), _pick(draw, pool))


@action("Reduce")
def _reduce(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    x = _pick(draw, pool)
    s = _shape_of(x)
    et = s.element_type if s is not None and s.is_array else ElementType.F32
    sub = XlaBuilder("sum")
    ops.Add(ops.Parameter(sub, 0, Shape.array(et, ())), ops.Parameter(sub, 1, Shape.array(et, ())))
    init = ops.Constant(b, np.zeros((), et.dtype))
    dims = tuple(range(_rank(x)))[:draw(st.integers(0, 2))] if draw(st.integers(0, 3)) else \
        draw(int_lists)
    return ops.Reduce(b, [x], [init], sub.build(), dims)


@action("Iota")
def _iota(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    et = draw(st.sampled_from(ARRAY_TYPES))
    shape = draw(st.lists(st.integers(0, 3), max_size=3).map(tuple))
    return ops.Iota(b, Shape.array(et, shape), draw(small))


@action("Tuple+GetTupleElement")
def _tuple(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    t = ops.Tuple(b, [_pick(draw, pool), _pick(draw, pool)])
    return ops.GetTupleElement(t, draw(small))


@action("DynamicSlice")
def _dynamic_slice(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    x = _pick(draw, pool)
    rank = _rank(x)
    starts = [ops.Constant(b, np.int32(draw(small))) for _ in range(rank)]
    if not draw(st.integers(0, 4)):
        starts = starts[:-1]
    return ops.DynamicSlice(x, starts, tuple(draw(st.integers(0, 2)) for _ in range(rank)))


@action("Sort")
def _sort(draw: st.DrawFn, pool: list[XlaOp], b: XlaBuilder) -> Any:
    x = _pick(draw, pool)
    s = _shape_of(x)
    et = s.element_type if s is not None and s.is_array else ElementType.F32
    cmp = XlaBuilder("cmp")
    ct = "TOTALORDER" if et.is_float or et.is_complex else None
    ops.Compare(ops.Parameter(cmp, 0, Shape.array(et, ())),
                ops.Parameter(cmp, 1, Shape.array(et, ())), (), "LT", ct)
    return ops.Sort(b, [x], cmp.build(), draw(small))


ACTION_NAMES = sorted(ACTIONS)


@given(st.data())
def test_builder_fuzz(data: st.DataObject) -> None:
    draw = data.draw
    b = XlaBuilder("fuzz")
    pool: list[XlaOp] = []
    args: list[np.ndarray] = []
    for i in range(draw(st.integers(1, 3))):
        et = draw(fuzz_types)
        shape = draw(st.lists(st.integers(0, 3), max_size=3).map(tuple))
        pool.append(ops.Parameter(b, i, Shape.array(et, shape)))
        args.append(random_array(et, shape, i))
    first_failure: str | None = None
    for _ in range(draw(st.integers(1, 6))):
        name = draw(st.sampled_from(ACTION_NAMES))
        result = ACTIONS[name](draw, pool, b)  # must not raise
        assert isinstance(result, XlaOp), (name, result)
        if first_failure is None and b.first_error is not None:
            first_failure = name
        if result.instr is not None:
            pool.append(result)
    try:
        comp = b.build()
    except BuilderError as e:
        assert first_failure is not None, f"build() failed with no op reporting: {e}"
        api = str(e).split(":", 1)[0]
        expected = first_failure.split("+")
        assert any(api.startswith(n) or n.startswith(api) for n in expected) or \
            api in _ALIASES.get(first_failure, ()), (first_failure, str(e))
        event("rejected")
        return
    assert first_failure is None
    event("built and ran")
    out = xlapy.Client().execute_and_transfer(comp, args)
    result_shape = comp.program_shape().result_shape()
    value = out.to_numpy() if not result_shape.is_tuple else None
    if value is not None:
        assert_value_has_shape(np.asarray(value), result_shape)


#: Builder functions that report under the name of the op they build on.
_ALIASES: dict[str, tuple[str, ...]] = {
    "Eq": ("Compare",), "Lt": ("Compare",), "Broadcast": ("BroadcastInDim",),
    "Dot": ("DotGeneral",), "Round": ("RoundNearestAfz",), "Clz": ("CountLeadingZeros",),
}
