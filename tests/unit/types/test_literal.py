import ml_dtypes
import numpy as np
import pytest

from xlapy.errors import XlapyError
from xlapy.types import ElementType, Layout, Literal, Shape

F32 = ElementType.F32


def _abc() -> Literal:
    # a b c / d e f as the numbers 1..6 (seed 001's [2 x 3] example)
    return Literal.from_numpy(np.array([[1, 2, 3], [4, 5, 6]], np.int32))


def test_seed001_column_major_layout_is_a_d_b_e_c_f() -> None:
    lit = _abc().relayout([0, 1])
    assert lit.to_physical().tolist() == [1, 4, 2, 5, 3, 6]  # a d b e c f


def test_seed001_row_major_layout_is_a_b_c_d_e_f() -> None:
    assert _abc().relayout([1, 0]).to_physical().tolist() == [1, 2, 3, 4, 5, 6]


def test_seed001_padded_layout() -> None:
    lit = _abc().relayout(Layout((0, 1), padded_dimensions=(3, 5), padding_value=0))
    # a d 0 b e 0 c f 0 0 0 0 0 0 0
    assert lit.to_physical().tolist() == [1, 4, 0, 2, 5, 0, 3, 6, 0, 0, 0, 0, 0, 0, 0]


@pytest.mark.parametrize("m2m", [(0, 1, 2), (2, 1, 0), (1, 0, 2), (2, 0, 1)])
@pytest.mark.parametrize("padded", [None, (3, 4, 5)])
def test_physical_roundtrip(m2m: tuple[int, ...], padded: tuple[int, ...] | None) -> None:
    arr = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    layout = Layout(m2m, padded_dimensions=padded, padding_value=-1)
    lit = Literal.from_numpy(arr).relayout(layout)
    phys = lit.to_physical()
    assert phys.size == (60 if padded else 24)
    back = Literal.from_physical(phys, lit.shape)
    assert np.array_equal(back.to_numpy(), arr)
    # the most-minor dimension varies fastest in memory
    if padded is None:
        assert phys[1] == arr[tuple(1 if d == m2m[0] else 0 for d in range(3))]


def test_padding_smaller_than_logical_is_an_error() -> None:
    with pytest.raises(XlapyError, match="padded dimension"):
        _abc().relayout(Layout((1, 0), padded_dimensions=(1, 3))).to_physical()


def test_printing() -> None:
    assert str(_abc().relayout([1, 0])) == "s32[2,3]{1,0} {{1, 2, 3}, {4, 5, 6}}"
    assert str(Literal.from_numpy(np.array([[1, 2, 3], [4, 5, 6]], np.float32))) == \
        "f32[2,3] {{1, 2, 3}, {4, 5, 6}}"
    assert str(Literal.scalar(1.5, F32)) == "f32[] 1.5"
    assert str(Literal.from_numpy(np.array([True, False]))) == "pred[2] {true, false}"
    assert str(Literal.from_numpy(np.array([np.nan, -np.inf], np.float32))) == "f32[2] {nan, -inf}"
    assert str(Literal.from_numpy(np.array([1 + 2j], np.complex64))) == "c64[1] {(1, 2)}"
    assert str(Literal.from_numpy(np.array([-3], ml_dtypes.int4))) == "s4[1] {-3}"
    assert str(Literal.from_numpy(np.array([1.5], ml_dtypes.bfloat16))) == "bf16[1] {1.5}"


def test_tuple_literals() -> None:
    t = Literal.tuple([_abc(), Literal.scalar(2, F32), Literal.token()])
    assert t.shape == Shape.tuple([Shape.array(ElementType.S32, [2, 3]), Shape.scalar(F32),
                                   Shape.token()])
    assert t[1].to_numpy() == np.float32(2)
    assert t.to_py()[0] == [[1, 2, 3], [4, 5, 6]]
    assert str(t).startswith("(\ns32[2,3] {{1, 2, 3}, {4, 5, 6}},\nf32[] 2,\ntoken")


def test_equality_is_bitwise() -> None:
    a = Literal.from_numpy(np.array([np.nan, 0.0], np.float32))
    assert a == Literal.from_numpy(np.array([np.nan, 0.0], np.float32))
    assert a != Literal.from_numpy(np.array([np.nan, -0.0], np.float32))
    assert a != Literal.from_numpy(np.array([np.nan, 0.0], np.float64))


def test_from_numpy_with_type_and_bad_data() -> None:
    lit = Literal.from_numpy([1, 2], ElementType.BF16)
    assert lit.shape == Shape.array(ElementType.BF16, [2])
    with pytest.raises(XlapyError, match="does not match shape"):
        Literal(Shape.array(F32, [3]), np.zeros(2, np.float32))
    with pytest.raises(XlapyError, match="no XLA element type"):
        Literal.from_numpy(np.array(["a"]))
