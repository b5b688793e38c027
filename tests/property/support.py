"""Shared pieces of the property tests: random values of any element type, one-op modules run
through the interpreter, scalar regions, and the "valid or ShapeInferenceError" check."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from xlapy.builder import XlaBuilder, ops
from xlapy.errors import ShapeInferenceError
from xlapy.interpreter import Interpreter
from xlapy.ir import Computation
from xlapy.ir.computation import make_instruction
from xlapy.ops import NO_ATTRS, infer_shape
from xlapy.ops.core import ParameterAttrs
from xlapy.types import ARRAY_TYPES, ElementType, Shape

#: Every array element type xlapy has, as a hypothesis strategy.
element_types = st.sampled_from(ARRAY_TYPES)

#: Small dimension sizes (zero included: empty arrays are an edge every op must handle).
small_dim = st.integers(0, 4)
positive_dim = st.integers(1, 4)


def dims(min_rank: int = 0, max_rank: int = 4, min_size: int = 0,
         max_size: int = 4) -> st.SearchStrategy[tuple[int, ...]]:
    """A tuple of dimension sizes."""
    return st.lists(st.integers(min_size, max_size), min_size=min_rank,
                    max_size=max_rank).map(tuple)


def random_array(et: ElementType, shape: Sequence[int], seed: int) -> np.ndarray:
    """A value of type `et` and `shape`: integers over the whole range, floats of mixed
    magnitude (with the odd NaN/inf where the type has them), complex from two such parts."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in shape)
    if et.is_pred:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if et.is_integer:
        info = ml_dtypes.iinfo(et.dtype)
        return rng.integers(int(info.min), int(info.max), shape, endpoint=True,
                            dtype=np.int64 if et.is_signed or et.bits < 64 else np.uint64
                            ).astype(et.dtype)
    if et.is_complex:
        part = et.component_type
        out = np.empty(shape, et.dtype)
        out.real = random_array(part, shape, seed + 1)
        out.imag = random_array(part, shape, seed + 2)
        return out
    values = rng.standard_normal(shape) * np.exp2(rng.integers(-4, 5, shape))
    specials = rng.integers(0, 40, shape)
    values = np.where(specials == 0, np.nan, values)
    values = np.where(specials == 1, np.inf, values)
    with np.errstate(all="ignore"):
        return np.asarray(values).astype(et.dtype)


def run_op(name: str, values: Sequence[Any], attrs: Any = None,
           regions: Sequence[Computation] = (),
           shapes: Sequence[Shape] | None = None) -> tuple[Shape, Any]:
    """Build a one-op computation over parameters holding `values` and run it.

    Returns the inferred result shape and the evaluated value; the interpreter itself checks
    the value against the inferred shape, and so does this function once more."""
    if shapes is None:
        shapes = [Shape.array(_et_of(v), v.shape) for v in values]
    comp = Computation(f"prop_{name}")
    params = [comp.add(make_instruction("parameter", [], ParameterAttrs(i, s), name=f"p{i}"))
              for i, s in enumerate(shapes)]
    root = comp.add(make_instruction(name, params, attrs, regions))
    comp.root = root
    value = Interpreter().run(comp, list(values))
    assert_value_has_shape(value, root.shape)
    return root.shape, value


def assert_value_has_shape(value: Any, shape: Shape) -> None:
    """The value's dtype and dimensions are exactly the shape's (recursively for tuples)."""
    if shape.is_tuple:
        assert isinstance(value, tuple) and len(value) == len(shape.tuple_shapes)
        for v, s in zip(value, shape.tuple_shapes):
            assert_value_has_shape(v, s)
        return
    assert isinstance(value, np.ndarray), type(value)
    assert value.dtype == shape.dtype, (value.dtype, shape)
    assert value.shape == tuple(shape.dimensions), (value.shape, shape)


_DTYPE_TO_ET = {t.dtype: t for t in ARRAY_TYPES}


def _et_of(v: np.ndarray) -> ElementType:
    return _DTYPE_TO_ET[v.dtype]


def infer_or_label(name: str, shapes: Sequence[Shape], attrs: Any,
                   regions: Sequence[Computation] = ()) -> Shape | None:
    """Shape inference for a possibly invalid draw: the result shape, or None after checking
    that the failure is a ShapeInferenceError whose label names the op (any other exception
    escapes and fails the test)."""
    try:
        return infer_shape(name, shapes, attrs, regions)
    except ShapeInferenceError as e:
        assert e.label.startswith(name + "_"), f"label {e.label!r} does not name {name}"
        assert str(e).startswith(e.label), str(e)
        _event(f"rejected {e.label}")
        return None


def check_valid_or_rejected(name: str, values: Sequence[np.ndarray], attrs: Any,
                            regions: Sequence[Computation] = ()) -> Shape | None:
    """The core property: a draw is rejected by a labelled ShapeInferenceError, or it runs
    and its value has exactly the inferred shape."""
    shapes = [Shape.array(_et_of(v), v.shape) for v in values]
    attrs = NO_ATTRS if attrs is None else attrs
    inferred = infer_or_label(name, shapes, attrs, regions)
    if inferred is None:
        return None
    got, _ = run_op(name, values, attrs, regions, shapes)
    assert got == inferred
    _event("accepted")
    return inferred


def _event(text: str) -> None:
    """Count outcomes in `--hypothesis-show-statistics` (no-op outside a given test)."""
    try:
        event(text)
    except InvalidArgument:
        pass


def scalar_region(et: ElementType, body: Callable[..., Any], num_params: int = 2,
                  name: str = "region") -> Computation:
    """A region over `num_params` scalars of `et` whose result is `body(*params)` (builder
    ops); returned as the IR computation the interpreter calls."""
    b = XlaBuilder(name)
    params = [ops.Parameter(b, i, Shape.array(et, ())) for i in range(num_params)]
    body(*params)
    return b.build().module.entry_computation()


def add_region(et: ElementType) -> Computation:
    """x + y over scalars of `et` (or for pred: or)."""
    return scalar_region(et, ops.Add, name="add")


def less_than_region(et: ElementType, count: int = 1) -> Computation:
    """A sort comparator over `count` operands ordering the first one by total order
    (float/complex) or the type's natural order."""
    from xlapy.ops.attrs import ComparisonType

    ct = ComparisonType.TOTALORDER if (et.is_float or et.is_complex) else None

    def body(*p: Any) -> Any:
        return ops.Compare(p[0], p[1], (), "LT", ct)

    b = XlaBuilder("lt")
    params = []
    for i in range(count):
        params += [ops.Parameter(b, 2 * i, Shape.array(et, ())),
                   ops.Parameter(b, 2 * i + 1, Shape.array(et, ()))]
    body(*params)
    return b.build().module.entry_computation()
