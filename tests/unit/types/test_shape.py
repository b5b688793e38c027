import pytest

from xlapy.errors import XlapyError
from xlapy.types import ElementType, Layout, Shape

F32, S32 = ElementType.F32, ElementType.S32


def test_array_shape_printing() -> None:
    assert str(Shape.array(F32, [2, 3])) == "f32[2,3]"
    assert str(Shape.scalar(S32)) == "s32[]"
    assert str(Shape.array(F32, [2, 3], [0, 1])) == "f32[2,3]{0,1}"
    assert Shape.array(F32, [2, 3]).to_shlo() == "tensor<2x3xf32>"
    assert Shape.scalar(ElementType.C64).to_shlo() == "tensor<complex<f32>>"


def test_tuple_and_token() -> None:
    t = Shape.tuple([Shape.array(F32, [2]), Shape.token(), Shape.tuple([])])
    assert str(t) == "(f32[2], token[], ())"
    assert t.to_shlo() == "tuple<tensor<2xf32>, !stablehlo.token, tuple<>>"
    assert t.is_tuple and t.tuple_shapes[1].is_token
    assert [s.is_token for s in t.leaves()] == [False, True]


def test_equality_ignores_layout_but_equal_with_layout_does_not() -> None:
    a = Shape.array(F32, [2, 3], [1, 0])
    b = Shape.array(F32, [2, 3], [0, 1])
    assert a == b and hash(a) == hash(b)
    assert not a.equal_with_layout(b)
    assert a.equal_with_layout(Shape.array(F32, [2, 3]))  # row-major is the default


def test_bad_shapes_are_rejected() -> None:
    with pytest.raises(XlapyError, match="negative dimension"):
        Shape.array(F32, [2, -1])
    with pytest.raises(XlapyError, match="not a permutation"):
        Layout((0, 0))
    with pytest.raises(XlapyError, match="has rank 1 but shape has rank 2"):
        Shape.array(F32, [2, 3], [0])
    with pytest.raises(XlapyError, match="padded_dimensions"):
        Layout((1, 0), padded_dimensions=(3,))
