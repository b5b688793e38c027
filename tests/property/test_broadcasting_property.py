"""Seed 001 broadcasting agrees with NumPy's when the lower-rank operand maps to trailing dims."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import xlapy
from xlapy.builder import XlaBuilder, ops
from xlapy.types import ElementType, Shape


@st.composite
def numpy_compatible_shapes(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    big = tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=4)))
    rank = draw(st.integers(0, len(big)))
    small = []
    for d in big[len(big) - rank:]:
        small.append(draw(st.sampled_from([d, 1])))
    # degenerate dims on the big side too
    big = tuple(draw(st.sampled_from([d, 1])) if draw(st.booleans()) else d for d in big)
    return big, tuple(small)


@given(numpy_compatible_shapes(), st.booleans())
def test_builder_broadcasting_matches_numpy(shapes: tuple, swap: bool) -> None:
    big, small = shapes
    a = np.arange(int(np.prod(big)), dtype=np.int32).reshape(big)
    b = (np.arange(int(np.prod(small)), dtype=np.int32) * 100).reshape(small)
    lhs, rhs = (b, a) if swap else (a, b)
    builder = XlaBuilder("prop")
    x = ops.Parameter(builder, 0, Shape.array(ElementType.S32, lhs.shape))
    y = ops.Parameter(builder, 1, Shape.array(ElementType.S32, rhs.shape))
    dims = () if len(small) in (0, len(big)) else tuple(range(len(big) - len(small), len(big)))
    ops.Add(x, y, dims)
    out = xlapy.Client().execute_and_transfer(builder.build(), [lhs, rhs]).to_numpy()
    np.testing.assert_array_equal(out, lhs + rhs)
