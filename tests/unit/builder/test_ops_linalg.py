"""Builder ops of the linalg family: argument forms, shapes, errors naming the builder op."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.builder import ops
from xlapy.builder.ops_linalg import make_padding
from xlapy.builder.xla_builder import XlaBuilder, XlaOp
from xlapy.errors import BuilderError
from xlapy.ops.attrs import Precision
from xlapy.ops.linalg import Transpose
from xlapy.types import ElementType, Shape

E = ElementType


def params(*shapes: Shape) -> tuple[XlaBuilder, list[XlaOp]]:
    b = XlaBuilder("t")
    return b, [ops.Parameter(b, i, s) for i, s in enumerate(shapes)]


def S(t: ElementType, *dims: int) -> Shape:
    return Shape.array(t, dims)


def test_dot_forms() -> None:
    b, (v, m) = params(S(E.F32, 3), S(E.F32, 3, 4))
    assert ops.Dot(v, m).shape() == S(E.F32, 4)
    assert ops.Dot(v, v).shape() == S(E.F32)
    assert ops.Dot(m, ops.Dot(v, m), preferred_element_type=np.float64).shape() == S(E.F64, 3)
    assert b.first_error is None


def test_dot_errors_name_the_op() -> None:
    b, (x, y) = params(S(E.F32, 2, 3, 4), S(E.F32, 4))
    ops.Dot(x, y)
    assert b.first_error is not None and b.first_error.startswith("Dot: ")
    b, (x, y) = params(S(E.F32, 2, 3), S(E.F32, 4, 5))
    ops.Dot(x, y)
    assert b.first_error == ("Dot: dot_general_c11: lhs contracting dimension 1 has size 3 but "
                             "rhs contracting dimension 0 has size 4; got f32[2,3], f32[4,5]")
    with pytest.raises(BuilderError, match="dot_general_c11"):
        b.build()


def test_dot_general_dimension_number_forms() -> None:
    b, (x, y) = params(S(E.F32, 5, 2, 3), S(E.F32, 5, 3, 4))
    jax_style = ops.DotGeneral(x, y, (([2], [1]), ([0], [0])))
    message = ops.DotGeneral(x, y, ops.DotDimensionNumbers((2,), (1,), (0,), (0,)),
                             precision_config=Precision.HIGHEST)
    assert jax_style.shape() == message.shape() == S(E.F32, 5, 2, 4)
    assert message.instr.attrs.precision_config == (Precision.HIGHEST, Precision.HIGHEST)
    ops.DotGeneral(x, y, (([2], [1]), ([0], [0])), precision_config=("HIGH", "DEFAULT"))
    assert b.first_error is None
    ops.DotGeneral(x, y, "nonsense")
    assert b.first_error is not None and b.first_error.startswith("DotGeneral: ")


def test_dot_general_bad_precision_and_type() -> None:
    b, (x, y) = params(S(E.F32, 2, 3), S(E.F32, 3, 4))
    ops.DotGeneral(x, y, (([1], [0]), ([], [])), precision_config=("FASTEST", "DEFAULT"))
    assert b.first_error is not None and "precision" in b.first_error
    b, (x, y) = params(S(E.F32, 2, 3), S(E.F32, 3, 4))
    ops.DotGeneral(x, y, (([1], [0]), ([], [])), preferred_element_type="s32")
    assert b.first_error is not None and "dot_general_c13" in b.first_error


@pytest.mark.parametrize("padding, want", [
    ("VALID", ((0, 0), (0, 0))),
    ("SAME", ((1, 1), (0, 1))),
    (ops.PaddingType.SAME, ((1, 1), (0, 1))),
    (enum.Enum("Padding", "SAME VALID").SAME, ((1, 1), (0, 1))),
    ([(2, 0), (1, 3)], ((2, 0), (1, 3))),
])
def test_make_padding(padding: Any, want: tuple[tuple[int, int], ...]) -> None:
    # dim 0: in 7, window 3, stride 1 -> pad 2; dim 1: in 7, window 2, stride 2 -> 4 out, pad 1
    assert make_padding(padding, (7, 7), (3, 2), (1, 2)) == want


def test_conv_variants_shapes() -> None:
    b, (x, w) = params(S(E.F32, 2, 4, 9, 8), S(E.F32, 6, 4, 3, 3))
    assert ops.Conv(x, w, (1, 1), "SAME").shape() == S(E.F32, 2, 6, 9, 8)
    assert ops.Conv(x, w, (2, 2), ops.PaddingType.VALID).shape() == S(E.F32, 2, 6, 4, 3)
    assert ops.ConvWithGeneralPadding(x, w, (1, 1), [(1, 1), (0, 0)], (2, 1), (1, 2)).shape() \
        == S(E.F32, 2, 6, 17, 4)
    nhwc = ops.ConvDimensionNumbers(0, 3, (1, 2), 2, 3, (0, 1), 0, 3, (1, 2))
    b2, (xh, wh) = params(S(E.F32, 2, 9, 8, 4), S(E.F32, 3, 3, 4, 6))
    assert ops.ConvWithGeneralDimensions(xh, wh, (1, 1), "VALID", nhwc).shape() == \
        S(E.F32, 2, 7, 6, 6)
    assert ops.ConvGeneral(xh, wh, (1, 1), [(1, 1), (1, 1)], nhwc).shape() == \
        S(E.F32, 2, 9, 8, 6)
    strings = ops.ConvGeneralDilated(xh, wh, (1, 1), "SAME", (), (), ("NHWC", "HWIO", "NHWC"))
    assert strings.shape() == S(E.F32, 2, 9, 8, 6)
    assert strings.instr.attrs.dimension_numbers == nhwc
    assert b.first_error is None and b2.first_error is None


def test_conv_errors_name_the_op() -> None:
    b, (x, w) = params(S(E.F32, 2, 4, 9, 8), S(E.F32, 6, 3, 3, 3))
    ops.Conv(x, w, (1, 1), "VALID")
    assert b.first_error is not None and b.first_error.startswith("Conv: convolution_c15:")
    b, (x, w) = params(S(E.F32, 2, 4, 9, 8), S(E.F32, 6, 4, 3, 3))
    ops.Conv(x, w, (1, 1), "SIDEWAYS")
    assert b.first_error is not None and "SIDEWAYS" in b.first_error
    b, (x, w) = params(S(E.F32, 2, 4, 9, 8), S(E.F32, 6, 4, 3, 3))
    ops.ConvGeneralDilated(x, w, (1, 1), "VALID", (), (), ("NCHW", "OIHW", "NCXW"))
    assert b.first_error is not None and b.first_error.startswith("ConvGeneralDilated: ")


def test_fft_cholesky_triangular_solve() -> None:
    b, (c, r, a) = params(S(E.C64, 3, 8), S(E.F32, 3, 8), S(E.F64, 2, 4, 4))
    assert ops.Fft(c, ops.FftType.FFT, (8,)).shape() == S(E.C64, 3, 8)
    assert ops.Fft(r, "RFFT", [8]).shape() == S(E.C64, 3, 5)
    assert ops.Fft(c, ops.FftType.IRFFT, (3, 14)).shape() == S(E.F32, 3, 14)
    assert ops.Cholesky(a, lower=False).instr.attrs.lower is False
    x = ops.TriangularSolve(a, a, True, True, False, "ADJOINT")
    assert x.shape() == S(E.F64, 2, 4, 4)
    assert x.instr.attrs.transpose_a is Transpose.ADJOINT
    assert b.first_error is None
    ops.Fft(c, "DCT", (8,))
    assert b.first_error is not None and b.first_error.startswith("Fft: ")
    b, (a,) = params(S(E.F32, 3, 3))
    ops.TriangularSolve(a, a, True, True, False, "CONJUGATE")
    assert b.first_error is not None and b.first_error.startswith("TriangularSolve: ")


def test_end_to_end_through_client() -> None:
    b, (x, w) = params(S(E.F32, 1, 1, 4, 4), S(E.F32, 1, 1, 2, 2))
    ops.Conv(x, w, (2, 2), "VALID")
    xv = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    out = xlapy.Client().execute_and_transfer(b.build(), [xv, np.ones((1, 1, 2, 2),
                                                                      np.float32)])
    np.testing.assert_array_equal(out.to_numpy(), [[[[10, 18], [42, 50]]]])
