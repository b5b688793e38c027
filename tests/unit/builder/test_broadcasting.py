"""Every example of seed 001's "Broadcasting semantics", run through the builder."""

import numpy as np
import pytest

import xlapy
from xlapy.builder import XlaBuilder, ops
from xlapy.builder.broadcasting import BroadcastError, broadcast_shapes
from xlapy.errors import BuilderError
from xlapy.types import ElementType, Shape

F32 = ElementType.F32


def _add(lhs: np.ndarray, rhs: np.ndarray, dims: tuple[int, ...] = ()) -> np.ndarray:
    b = XlaBuilder("bcast")
    x = ops.Parameter(b, 0, Shape.array(F32, lhs.shape))
    y = ops.Parameter(b, 1, Shape.array(F32, rhs.shape))
    ops.Add(x, y, dims)
    lit = xlapy.Client().execute_and_transfer(b.build(), [lhs.astype(np.float32),
                                                         rhs.astype(np.float32)])
    return lit.to_numpy()


M = np.array([[1, 2, 3], [4, 5, 6]])


def test_matrix_plus_vector_dim1() -> None:
    assert _add(M, np.array([7, 8, 9]), (1,)).tolist() == [[8, 10, 12], [11, 13, 15]]


def test_matrix_plus_scalar_needs_no_dimensions() -> None:
    assert _add(M, np.array(7)).tolist() == [[8, 9, 10], [11, 12, 13]]


def test_square_matrix_plus_vector_dim0_and_dim1() -> None:
    sq = np.zeros((3, 3))
    v = np.array([7, 8, 9])
    assert _add(sq, v, (1,)).tolist() == [[7, 8, 9]] * 3
    assert _add(sq, v, (0,)).tolist() == [[7, 7, 7], [8, 8, 8], [9, 9, 9]]


def test_2x3_plus_3vector_with_dim0_is_invalid() -> None:
    with pytest.raises(BuilderError, match=r"Add: broadcasting: .*size 3.*size 2"):
        _add(M, np.array([7, 8, 9]), (0,))


def test_cuboid_plus_matrix_dims_1_2() -> None:
    cub = np.arange(24).reshape(2, 3, 4)
    mat = np.arange(12).reshape(3, 4) * 100
    assert np.array_equal(_add(cub, mat, (1, 2)), cub + mat[None])


@pytest.mark.parametrize("a,b,want", [
    ((2, 1), (2, 3), (2, 3)), ((1, 2, 5), (7, 2, 5), (7, 2, 5)), ((7, 2, 5), (7, 1, 5), (7, 2, 5)),
    ((2, 1), (1, 3), (2, 3)),
])
def test_degenerate_dimensions(a: tuple, b: tuple, want: tuple) -> None:
    x = np.arange(np.prod(a)).reshape(a)
    y = np.arange(np.prod(b)).reshape(b) * 10
    got = _add(x, y)
    assert got.shape == want and np.array_equal(got, x + y)


def test_incompatible_degenerate_7x2x5_and_7x2x6() -> None:
    with pytest.raises(BuilderError, match=r"Add: broadcasting: shapes f32\[7,2,5\] and "
                                           r"f32\[7,2,6\] are incompatible: dimension 2"):
        _add(np.zeros((7, 2, 5)), np.zeros((7, 2, 6)))


def test_composition_vector_4_plus_1x2_gives_4x2() -> None:
    got = _add(np.array([1, 2, 3, 4]), np.array([[5, 6]]), (0,))
    assert got.tolist() == [[6, 7], [7, 8], [8, 9], [9, 10]]


def test_composition_1x2_plus_4x3x1_dims_1_2_gives_4x3x2() -> None:
    small = np.array([[10, 20]])
    big = np.arange(12).reshape(4, 3, 1)
    got = _add(small, big, (1, 2))
    assert got.shape == (4, 3, 2)
    assert np.array_equal(got, big + small.reshape(1, 1, 2))


@pytest.mark.parametrize("a,b,dims,msg", [
    ((2, 3), (3,), (), "different ranks"),
    ((2, 3, 4), (3, 4), (2, 1), "strictly increasing"),
    ((2, 3, 4), (3, 4), (1,), "one entry per dimension"),
    ((2, 3), (3,), (5,), "out of range"),
    ((2, 3), (2, 3), (1, 0), "same rank"),
])
def test_bad_broadcast_dimensions(a: tuple, b: tuple, dims: tuple, msg: str) -> None:
    with pytest.raises(BroadcastError, match=msg):
        broadcast_shapes(Shape.array(F32, a), Shape.array(F32, b), dims)
