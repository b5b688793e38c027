"""Linalg ops: shape inference (valid cases and every constraint label) and evaluation on the
spec's examples plus numpy references."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.tolerance import assert_dot_close
from xlapy.errors import ShapeInferenceError
from xlapy.ops.attrs import Precision
from xlapy.ops.base import get_op, infer_shape
from xlapy.ops.linalg import (
    CholeskyAttrs,
    DotGeneralAttrs,
    FftAttrs,
    FftType,
    Transpose,
    TriangularSolveAttrs,
)
from xlapy.ops.linalg_conv import ConvDimensionNumbers, ConvolutionAttrs
from xlapy.types import ElementType, Shape

E = ElementType


def S(t: ElementType, *dims: int) -> Shape:
    return Shape.array(t, dims)


def run(name: str, attrs: Any, *args: np.ndarray) -> np.ndarray:
    """Infer then evaluate op `name` directly, checking the value against the shape."""
    from xlapy.types import from_dtype

    shape = infer_shape(name, [S(from_dtype(a.dtype), *a.shape) for a in args], attrs)
    out = get_op(name).evaluate(list(args), attrs, shape, None)
    assert out.dtype == shape.dtype and out.shape == shape.dimensions
    return out


def dot(lb: tuple[int, ...] = (), rb: tuple[int, ...] = (), lc: tuple[int, ...] = (1,),
        rc: tuple[int, ...] = (0,), **kw: Any) -> DotGeneralAttrs:
    return DotGeneralAttrs(lb, rb, lc, rc, **kw)


# ---- dot_general --------------------------------------------------------------------------------
def test_dot_general_infer_valid() -> None:
    assert infer_shape("dot_general", [S(E.F32, 2, 3), S(E.F32, 3, 5)], dot()) == S(E.F32, 2, 5)
    attrs = dot((0,), (2,), (1,), (0,))
    assert infer_shape("dot_general", [S(E.S8, 4, 3, 7), S(E.S8, 3, 6, 4)], attrs) == \
        S(E.S8, 4, 7, 6)
    assert infer_shape("dot_general", [S(E.BF16, 2, 3), S(E.BF16, 3)],
                       dot(result_element_type=E.F32)) == S(E.F32, 2)
    assert infer_shape("dot_general", [S(E.F32, 2), S(E.F32, 3)], dot((), (), (), ())) == \
        S(E.F32, 2, 3)
    assert infer_shape("dot_general", [S(E.F16, 2, 3), S(E.F32, 3, 1)], dot()) == S(E.F32, 2, 1)


def test_dot_general_issue_message() -> None:
    with pytest.raises(ShapeInferenceError) as e:
        infer_shape("dot_general", [S(E.F32, 2, 3), S(E.F32, 4, 5)], dot())
    assert str(e.value) == ("dot_general_c11: lhs contracting dimension 1 has size 3 but rhs "
                            "contracting dimension 0 has size 4; got f32[2,3], f32[4,5]")


@pytest.mark.parametrize("label, shapes, attrs", [
    ("c1", [S(E.F32, 2, 3), S(E.S32, 3, 5)], dot(result_element_type=E.S32)),
    ("c1", [S(E.S32, 2, 3), S(E.U32, 3, 5)], dot()),
    ("c2", [S(E.F32, 2, 3), S(E.F32, 2, 3)], dot((0,), (), (1,), (1,))),
    ("c3", [S(E.F32, 2, 3), S(E.F32, 3, 5)], dot(lc=(1,), rc=())),
    ("c4", [S(E.F32, 3, 3), S(E.F32, 3, 3)], dot((1,), (0,), (1,), (1,))),
    ("c5", [S(E.F32, 3, 3), S(E.F32, 3, 3)], dot((0,), (1,), (1,), (1,))),
    ("c6", [S(E.F32, 3, 3), S(E.F32, 3, 3)], dot((2,), (0,), (1,), (1,))),
    ("c7", [S(E.F32, 2, 3), S(E.F32, 3, 5)], dot(lc=(-1,))),
    ("c8", [S(E.F32, 3, 3), S(E.F32, 3, 3)], dot((0,), (5,), (1,), (1,))),
    ("c9", [S(E.F32, 2, 3), S(E.F32, 3, 5)], dot(rc=(2,))),
    ("c10", [S(E.F32, 2, 3), S(E.F32, 4, 3)], dot((0,), (0,), (1,), (1,))),
    ("c11", [S(E.F32, 2, 3), S(E.F32, 4, 5)], dot()),
    ("c12", [S(E.F32, 2, 3), S(E.F32, 3, 5)], dot(precision_config=(Precision.HIGH,))),
    ("c13", [S(E.F32, 2, 3), S(E.F32, 3, 5)], dot(result_element_type=E.S32)),
    ("c13", [S(E.S8, 2, 3), S(E.S8, 3, 5)], dot(result_element_type=E.U32)),
    ("c13", [S(E.C64, 2, 3), S(E.C64, 3, 5)], dot(result_element_type=E.F32)),
])
def test_dot_general_infer_errors(label: str, shapes: list[Shape], attrs: Any) -> None:
    with pytest.raises(ShapeInferenceError, match=f"dot_general_{label}:"):
        infer_shape("dot_general", shapes, attrs)


def test_dot_general_spec_example() -> None:
    lhs = np.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], np.int32)
    rhs = np.array([[[1, 0], [0, 1]], [[1, 0], [0, 1]]], np.int32)
    out = run("dot_general", dot((0,), (0,), (2,), (1,)), lhs, rhs)
    np.testing.assert_array_equal(out, lhs)


def test_dot_general_wraps_and_rounds() -> None:
    a = np.array([[100, 100]], np.int8)
    b = np.array([[100], [100]], np.int8)
    assert run("dot_general", dot(), a, b)[0, 0] == np.int8(np.int64(20000) % 256 - 256)
    u = np.array([[2**63, 2**63]], np.uint64)
    assert run("dot_general", dot(), u, np.ones((2, 1), np.uint64))[0, 0] == 0
    p = np.array([[True, False]])
    q = np.array([[False], [True]])
    assert run("dot_general", dot(), p, q).dtype == np.bool_
    import ml_dtypes

    x = np.ones((1, 300), ml_dtypes.bfloat16)
    out = run("dot_general", dot(), x, np.ones((300, 1), ml_dtypes.bfloat16))
    assert float(out[0, 0]) == 300.0  # f32 accumulation; bf16 partial sums would stop at 256


def test_dot_general_batched_matches_einsum() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4, 2, 5))
    b = rng.standard_normal((5, 3, 6, 4))
    out = run("dot_general", dot((0, 1), (1, 3), (3,), (0,)), a, b)
    # BLAS and einsum add the 5 products in their own orders: the dot's error bound.
    assert_dot_close(out, a, b, k=5, product=lambda p, q: np.einsum("bmnk,kbjm->bmnj", p, q))
    z = run("dot_general", dot(), np.zeros((2, 0)), np.zeros((0, 3)))
    np.testing.assert_array_equal(z, np.zeros((2, 3)))


# ---- convolution --------------------------------------------------------------------------------
NHWC = ConvDimensionNumbers(0, 3, (1, 2), 2, 3, (0, 1), 0, 3, (1, 2))
DEF2 = ConvDimensionNumbers.default(2)


def conv(dn: ConvDimensionNumbers = DEF2, **kw: Any) -> ConvolutionAttrs:
    return ConvolutionAttrs(dn, **kw)


def test_convolution_infer_valid() -> None:
    assert infer_shape("convolution", [S(E.F32, 1, 8, 32, 32), S(E.F32, 16, 8, 3, 3)],
                       conv()) == S(E.F32, 1, 16, 30, 30)
    attrs = conv(window_strides=(2, 1), padding=((1, 1), (2, 0)), lhs_dilation=(2, 1),
                 rhs_dilation=(1, 2))
    # dim 0: (10-1)*2+1 + 2 = 21, window 3, stride 2 -> 10; dim 1: 7+2=9, window (3-1)*2+1=5 -> 5
    assert infer_shape("convolution", [S(E.F32, 2, 4, 10, 7), S(E.F32, 6, 4, 3, 3)],
                       attrs) == S(E.F32, 2, 6, 10, 5)
    assert infer_shape("convolution", [S(E.F32, 4, 6, 5, 5), S(E.F32, 9, 2, 1, 1)],
                       conv(feature_group_count=3)) == S(E.F32, 4, 9, 5, 5)
    assert infer_shape("convolution", [S(E.F32, 4, 6, 5, 5), S(E.F32, 8, 6, 1, 1)],
                       conv(batch_group_count=2)) == S(E.F32, 2, 8, 5, 5)
    assert infer_shape("convolution", [S(E.F32, 1, 4, 2), S(E.F32, 1, 4, 5)],
                       conv(ConvDimensionNumbers.default(1))) == S(E.F32, 1, 1, 0)


C_LHS, C_RHS = S(E.F32, 2, 4, 6, 6), S(E.F32, 8, 4, 3, 3)


@pytest.mark.parametrize("label, shapes, attrs", [
    ("c1", [S(E.F32, 2, 4, 6), C_RHS], conv()),
    ("c2", [C_LHS, S(E.F64, 8, 4, 3, 3)], conv()),
    ("c3", [C_LHS, C_RHS], conv(window_strides=(1,))),
    ("c4", [C_LHS, C_RHS], conv(window_strides=(1, 0))),
    ("c5", [C_LHS, C_RHS], conv(padding=((0, 0),))),
    ("c6", [C_LHS, C_RHS], conv(lhs_dilation=(1, 1, 1))),
    ("c7", [C_LHS, C_RHS], conv(lhs_dilation=(1, -1))),
    ("c8", [C_LHS, C_RHS], conv(rhs_dilation=(2,))),
    ("c9", [C_LHS, C_RHS], conv(rhs_dilation=(0, 1))),
    ("c10", [C_LHS, C_RHS], conv(window_reversal=(True,))),
    ("c11", [S(E.F32, 3, 4, 6, 6), S(E.F32, 8, 4, 3, 3)], conv(batch_group_count=2)),
    ("c12", [C_LHS, S(E.F32, 9, 1, 3, 3)], conv(feature_group_count=3)),
    ("c13", [C_LHS, C_RHS], conv(ConvDimensionNumbers(0, 1, (2,), 1, 0, (2, 3), 0, 1, (2, 3)))),
    ("c14", [C_LHS, C_RHS], conv(ConvDimensionNumbers(0, 2, (2, 3), 1, 0, (2, 3), 0, 1, (2, 3)))),
    ("c14", [C_LHS, C_RHS], conv(ConvDimensionNumbers(0, 1, (2, 4), 1, 0, (2, 3), 0, 1, (2, 3)))),
    ("c15", [C_LHS, S(E.F32, 8, 3, 3, 3)], conv()),
    ("c16", [S(E.F32, 2, 4, 6, 6), S(E.F32, 3, 4, 3, 3)], conv(batch_group_count=2)),
    ("c17", [C_LHS, S(E.F32, 3, 2, 3, 3)], conv(feature_group_count=2)),
    ("c18", [C_LHS, C_RHS], conv(ConvDimensionNumbers(0, 1, (2, 3), 1, 0, (2,), 0, 1, (2, 3)))),
    ("c19", [C_LHS, C_RHS], conv(ConvDimensionNumbers(0, 1, (2, 3), 1, 1, (2, 3), 0, 1, (2, 3)))),
    ("c20", [C_LHS, C_RHS], conv(ConvDimensionNumbers(0, 1, (2, 3), 1, 0, (2, 3), 0, 1, (2,)))),
    ("c21", [C_LHS, C_RHS], conv(ConvDimensionNumbers(0, 1, (2, 3), 1, 0, (2, 3), 0, 0, (2, 3)))),
    ("c22", [C_LHS, C_RHS], conv(feature_group_count=0)),
    ("c23", [C_LHS, C_RHS], conv(batch_group_count=-1)),
    ("c24", [S(E.F32, 2, 4, 6, 6), S(E.F32, 8, 2, 3, 3)],
     conv(feature_group_count=2, batch_group_count=2)),
    ("c25", [C_LHS, C_RHS], conv(precision_config=(Precision.DEFAULT,) * 3)),
])
def test_convolution_infer_errors(label: str, shapes: list[Shape], attrs: Any) -> None:
    with pytest.raises(ShapeInferenceError, match=f"convolution_{label}:"):
        infer_shape("convolution", shapes, attrs)


def test_convolution_spec_example() -> None:
    lhs = np.array([[1, 2, 5, 6], [3, 4, 7, 8], [10, 11, 14, 15], [12, 13, 16, 17]],
                   np.int32).reshape(1, 4, 4, 1)
    rhs = np.ones((3, 3, 1, 1), np.int32)
    attrs = conv(NHWC, window_strides=(4, 4), padding=((0, 0), (0, 0)), lhs_dilation=(2, 2),
                 rhs_dilation=(1, 1), window_reversal=(False, False),
                 precision_config=(Precision.DEFAULT, Precision.DEFAULT))
    out = run("convolution", attrs, lhs, rhs)
    np.testing.assert_array_equal(out, np.array([[10, 26], [46, 62]]).reshape(1, 2, 2, 1))


def _direct_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Reference: NCHW x OIHW, stride 1, no padding, by definition (tiny sizes)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    out = np.zeros((n, o, h - kh + 1, wd - kw + 1))
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            out[:, :, i, j] = np.einsum("nchw,ochw->no", x[:, :, i:i + kh, j:j + kw], w)
    return out


def test_convolution_reversal_padding_groups() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 5, 6))
    w = rng.standard_normal((6, 2, 2, 3))
    # Each output sums (input features per group) x kh x kw products, in the GEMM's order
    # here and einsum's in the reference: within the dot's error bound (tests/tolerance.py).
    # feature groups: each half of the input features feeds its half of the outputs.
    out = run("convolution", conv(feature_group_count=2), x, w)
    assert_dot_close(out, x, w, k=2 * 2 * 3, product=lambda p, q: np.concatenate(
        [_direct_conv(p[:, :2], q[:3]), _direct_conv(p[:, 2:], q[3:])], 1))
    # window reversal flips the kernel; negative padding crops the input.
    w2 = rng.standard_normal((3, 4, 2, 3))
    out = run("convolution", conv(window_reversal=(True, True)), x, w2)
    assert_dot_close(out, x, w2, k=4 * 2 * 3,
                     product=lambda p, q: _direct_conv(p, q[:, :, ::-1, ::-1]))
    out = run("convolution", conv(padding=((-1, 0), (0, -1))), x, w2)
    assert_dot_close(out, x, w2, k=4 * 2 * 3,
                     product=lambda p, q: _direct_conv(p[:, :, 1:, :-1], q))
    # batch groups: batch half b uses output features of group b.
    xb = rng.standard_normal((4, 2, 4, 4))
    wb = rng.standard_normal((4, 2, 2, 2))
    out = run("convolution", conv(batch_group_count=2), xb, wb)
    assert_dot_close(out, xb, wb, k=2 * 2 * 2, product=lambda p, q: np.concatenate(
        [_direct_conv(p[:2], q[:2]), _direct_conv(p[2:], q[2:])], 1))


def test_convolution_empty_and_int_wrap() -> None:
    out = run("convolution", conv(), np.zeros((1, 2, 2, 2), np.float32),
              np.zeros((3, 2, 3, 3), np.float32))
    assert out.shape == (1, 3, 0, 0)
    x = np.full((1, 1, 2, 2), 100, np.int8)
    out = run("convolution", conv(), x, np.full((1, 1, 2, 2), 100, np.int8))
    assert out[0, 0, 0, 0] == np.int8(np.int64(40000) % 256 - 256)


# ---- fft ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("ft, shape, lengths, want", [
    (FftType.FFT, S(E.C64, 3, 8), (8,), S(E.C64, 3, 8)),
    (FftType.IFFT, S(E.C128, 4, 5, 6), (4, 5, 6), S(E.C128, 4, 5, 6)),
    (FftType.RFFT, S(E.F32, 2, 9), (9,), S(E.C64, 2, 5)),
    (FftType.RFFT, S(E.F64, 2, 4, 8), (4, 8), S(E.C128, 2, 4, 5)),
    (FftType.IRFFT, S(E.C64, 3, 6), (10,), S(E.F32, 3, 10)),
    (FftType.IRFFT, S(E.C64, 3, 6), (11,), S(E.F32, 3, 11)),
])
def test_fft_infer_valid(ft: FftType, shape: Shape, lengths: tuple[int, ...],
                         want: Shape) -> None:
    assert infer_shape("fft", [shape], FftAttrs(ft, lengths)) == want


@pytest.mark.parametrize("label, shape, ft, lengths", [
    ("c1", S(E.C64, 8), FftType.FFT, (1, 8)),
    ("c2", S(E.F32, 8), FftType.FFT, (8,)),
    ("c2", S(E.C64, 8), FftType.RFFT, (8,)),
    ("c2", S(E.F32, 5), FftType.IRFFT, (8,)),
    ("c2", S(E.F16, 8), FftType.RFFT, (8,)),
    ("c3", S(E.C64, 1, 2, 3, 4), FftType.FFT, (1, 2, 3, 4)),
    ("c3", S(E.C64, 8), FftType.FFT, ()),
    ("c4", S(E.F32, 8), FftType.RFFT, (6,)),
    ("c4", S(E.C64, 8), FftType.IFFT, (4,)),
    ("c5", S(E.C64, 8), FftType.IRFFT, (8,)),
])
def test_fft_infer_errors(label: str, shape: Shape, ft: FftType,
                          lengths: tuple[int, ...]) -> None:
    with pytest.raises(ShapeInferenceError, match=f"fft_{label}:"):
        infer_shape("fft", [shape], FftAttrs(ft, lengths))


def test_fft_spec_example_and_round_trip() -> None:
    x = np.array([1, 0, 0, 0], np.complex64)
    np.testing.assert_array_equal(run("fft", FftAttrs(FftType.FFT, (4,)), x), np.ones(4))
    rng = np.random.default_rng(2)
    r = rng.standard_normal((3, 4, 6))
    spec = run("fft", FftAttrs(FftType.RFFT, (4, 6)), r)
    back = run("fft", FftAttrs(FftType.IRFFT, (4, 6)), spec)
    np.testing.assert_allclose(back, r, rtol=1e-12, atol=1e-12)
    c = (rng.standard_normal((2, 3, 4, 5)) + 1j).astype(np.complex128)
    np.testing.assert_allclose(run("fft", FftAttrs(FftType.IFFT, (3, 4, 5)),
                                   run("fft", FftAttrs(FftType.FFT, (3, 4, 5)), c)), c,
                               rtol=1e-12, atol=1e-12)


# ---- cholesky -----------------------------------------------------------------------------------
def test_cholesky_infer() -> None:
    assert infer_shape("cholesky", [S(E.F32, 2, 3, 3)], CholeskyAttrs()) == S(E.F32, 2, 3, 3)
    for label, shape in [("c1", S(E.S32, 3, 3)), ("c2", S(E.F32, 3)), ("c3", S(E.F32, 3, 4))]:
        with pytest.raises(ShapeInferenceError, match=f"cholesky_{label}:"):
            infer_shape("cholesky", [shape], CholeskyAttrs())


def test_cholesky_spec_example_and_upper() -> None:
    a = np.array([[1, 2, 3], [2, 20, 26], [3, 26, 70]], np.float32)
    want = np.array([[1, 0, 0], [2, 4, 0], [3, 5, 6]], np.float32)
    np.testing.assert_allclose(run("cholesky", CholeskyAttrs(True), a), want, rtol=1e-6)
    np.testing.assert_allclose(run("cholesky", CholeskyAttrs(False), a), want.T, rtol=1e-6)
    garbage = np.tril(np.full((3, 3), 99, np.float32), -1)  # only the upper triangle is read
    np.testing.assert_allclose(run("cholesky", CholeskyAttrs(False), np.triu(a) + garbage),
                               want.T, rtol=1e-6)
    c = np.array([[4, 2 - 1j], [2 + 1j, 5]], np.complex128)
    u = run("cholesky", CholeskyAttrs(False), c)
    np.testing.assert_allclose(np.conj(u.T) @ u, c, rtol=1e-12)
    bad = np.stack([a, -a])
    out = run("cholesky", CholeskyAttrs(True), bad)
    np.testing.assert_allclose(out[0], want, rtol=1e-6)
    assert np.isnan(out[1][np.tril_indices(3)]).all() and (np.triu(out[1], 1) == 0).all()


# ---- triangular_solve ---------------------------------------------------------------------------
def test_triangular_solve_infer() -> None:
    attrs = TriangularSolveAttrs(left_side=False)
    assert infer_shape("triangular_solve", [S(E.F32, 2, 3, 3), S(E.F32, 2, 5, 3)], attrs) == \
        S(E.F32, 2, 5, 3)
    cases = [
        ("c1", [S(E.S32, 3, 3), S(E.S32, 3, 3)], TriangularSolveAttrs()),
        ("c1", [S(E.F32, 3, 3), S(E.F64, 3, 3)], TriangularSolveAttrs()),
        ("c2", [S(E.F32, 3), S(E.F32, 3)], TriangularSolveAttrs()),
        ("c2", [S(E.F32, 3, 3), S(E.F32, 1, 3, 3)], TriangularSolveAttrs()),
        ("c3", [S(E.F32, 2, 3, 3), S(E.F32, 4, 3, 3)], TriangularSolveAttrs()),
        ("c3", [S(E.F32, 3, 3), S(E.F32, 4, 3)], TriangularSolveAttrs()),
        ("c3", [S(E.F32, 3, 3), S(E.F32, 3, 4)], TriangularSolveAttrs(left_side=False)),
        ("c3", [S(E.F32, 3, 4), S(E.F32, 3, 4)], TriangularSolveAttrs()),
    ]
    for label, shapes, attrs in cases:
        with pytest.raises(ShapeInferenceError, match=f"triangular_solve_{label}:"):
            infer_shape("triangular_solve", shapes, attrs)


def test_triangular_solve_spec_example() -> None:
    a = np.array([[1, 0, 0], [2, 4, 0], [3, 5, 6]], np.float32)
    b = np.array([[2, 0, 0], [4, 8, 0], [6, 10, 12]], np.float32)
    out = run("triangular_solve", TriangularSolveAttrs(True, True, False), a, b)
    np.testing.assert_allclose(out, 2 * np.eye(3), rtol=1e-6)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("mode", list(Transpose))
def test_triangular_solve_flags(left: bool, lower: bool, mode: Transpose) -> None:
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 4, 4)) + 1j * rng.standard_normal((2, 4, 4)) + 4 * np.eye(4)
    b = rng.standard_normal((2, 4, 3) if left else (2, 3, 4)).astype(np.complex128)
    for unit in (False, True):
        x = run("triangular_solve", TriangularSolveAttrs(left, lower, unit, mode), a, b)
        m = np.tril(a) if lower else np.triu(a)
        if unit:
            m[:, range(4), range(4)] = 1
        op = {Transpose.NO_TRANSPOSE: m, Transpose.TRANSPOSE: np.swapaxes(m, 1, 2),
              Transpose.ADJOINT: np.conj(np.swapaxes(m, 1, 2))}[mode]
        np.testing.assert_allclose(op @ x if left else x @ op, b, rtol=1e-10, atol=1e-12)


def test_triangular_solve_singular_gives_inf() -> None:
    a = np.array([[0.0, 0.0], [1.0, 1.0]])
    out = run("triangular_solve", TriangularSolveAttrs(), a, np.ones((2, 1)))
    assert not np.isfinite(out).all()
