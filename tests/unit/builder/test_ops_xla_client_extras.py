"""Builder ops added for xla_client parity (issue 16) beyond the differential tests: the IR
each builds, custom calls with aliasing, DynamicReshape, and the errors they report."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.backends import get_backend
from xlapy.builder import XlaBuilder, ops
from xlapy.errors import BuilderError
from xlapy.ops.misc import register_custom_call
from xlapy.types import ElementType, Shape

F32 = ElementType.F32
M = Shape.array(F32, (3, 3))
V = Shape.array(F32, (4,))


def run(b: XlaBuilder, root: object, *args: np.ndarray) -> object:
    return get_backend("interpreter").compile(b.build(root).module).run(list(args))


def test_decompositions_build_lapack_calls() -> None:
    b = XlaBuilder("d")
    a = ops.Parameter(b, 0, Shape.array(F32, (2, 3, 3)))
    lu, piv, perm = ops.LU(a)
    assert piv.shape() == perm.shape() == Shape.array(ElementType.S32, (2, 3))
    v, w = ops.Eigh(a, lower=False)
    call = v.instr.operands[0]
    assert call.attrs.call_target_name == "lapack_ssyevd_ffi"
    assert dict(call.attrs.mhlo_backend_config) == {"mode": ord("V"), "uplo": ord("U")}
    u, d, vv = ops.SVD(a)
    assert u.shape() == vv.shape() == a.shape() and d.shape() == Shape.array(F32, (2, 3))
    q, r = ops.QR(ops.Parameter(b, 1, Shape.array(F32, (5, 2))), False)
    assert q.shape().dimensions == (5, 2) and r.shape().dimensions == (2, 2)


@pytest.mark.parametrize("call", [lambda a: ops.LU(a), lambda a: ops.QR(a, True),
                                  lambda a: ops.Eigh(a), lambda a: ops.SVD(a),
                                  lambda a: ops.QrDecomposition(a)])
def test_decomposition_operand_errors(call: object) -> None:
    b = XlaBuilder("e")
    results = call(ops.Parameter(b, 0, V))  # type: ignore[operator]
    assert all(not r.ok for r in results)
    with pytest.raises(BuilderError, match="must be a .batch of. f32/f64/c64/c128 matrices"):
        b.build()
    b = XlaBuilder("s")
    ops.Parameter(b, 0, Shape.array(ElementType.S32, (3, 3)))
    call(b.parameter(1, Shape.array(ElementType.S32, (3, 3))))  # type: ignore[operator]
    with pytest.raises(BuilderError, match="f32/f64/c64/c128"):
        b.build()


def test_eigh_needs_square_and_householder_checks_taus() -> None:
    b = XlaBuilder("e")
    ops.Eigh(ops.Parameter(b, 0, Shape.array(F32, (3, 4))))
    with pytest.raises(BuilderError, match="Eigh: operand f32.3,4. is not square"):
        b.build()
    b = XlaBuilder("h")
    a = ops.Parameter(b, 0, Shape.array(F32, (4, 3)))
    ops.ProductOfElementaryHouseholderReflectors(a, ops.Parameter(b, 1, Shape.array(F32, (4,))))
    with pytest.raises(BuilderError, match="taus f32.4. must be"):
        b.build()
    b = XlaBuilder("w")
    wide = ops.Parameter(b, 0, Shape.array(F32, (2, 3)))
    ops.ProductOfElementaryHouseholderReflectors(wide, ops.Parameter(b, 1, Shape.array(F32, (2,))))
    with pytest.raises(BuilderError, match="at least as many rows"):
        b.build()


def test_lu_permutation_follows_the_pivots() -> None:
    """A matrix whose partial pivoting swaps rows at every step."""
    a = np.array([[0, 0, 1], [0, 2, 0], [3, 0, 0]], np.float32)
    b = XlaBuilder("lu")
    _, piv, perm = ops.LU(ops.Parameter(b, 0, M))
    got = run(b, ops.Tuple(b, [piv, perm]), a)
    assert list(got[0]) == [2, 1, 2] and list(got[1]) == [2, 1, 0]
    assert np.array_equal(a[got[1]], np.triu(a[got[1]]))  # P a is upper triangular here


def test_top_k_and_approx_top_k_errors() -> None:
    b = XlaBuilder("t")
    x = ops.Parameter(b, 0, Shape.array(F32, (2, 200)))
    assert ops.TopK(x, 3).shape().tuple_shapes[1] == Shape.array(ElementType.S32, (2, 3))
    sb = XlaBuilder("gt")
    s = Shape.scalar(F32)
    cmp = sb.build(ops.Gt(sb.parameter(0, s), sb.parameter(1, s)))
    init = [ops.Constant(b, np.float32(0))]
    r = ops.ApproxTopK(b, [x], init, 3, 1, cmp)
    assert r.shape().tuple_shapes[0].dimensions == (2, 3)
    r = ops.ApproxTopK(b, [x], init, 3, 1, cmp, 0.9, False)  # 200 > one 128 tile: no cut
    assert r.shape().tuple_shapes[0].dimensions == (2, 200)
    ops.ApproxTopK(b, [x], init, 3, 1, cmp, 0.9, False, 100)
    with pytest.raises(BuilderError, match="ApproxTopK: reduction_input_size_override 100"):
        b.build()
    for message in ("2 operands and 1 init_values", "top_k 300", "recall_target 2.0"):
        b2 = XlaBuilder("e")
        y = ops.Parameter(b2, 0, Shape.array(F32, (2, 200)))
        z = [ops.Constant(b2, np.float32(0))]
        if message.startswith("2 operands"):
            ops.ApproxTopK(b2, [y, y], z, 3, 1, cmp)
        elif message.startswith("top_k"):
            ops.ApproxTopK(b2, [y], z, 300, 1, cmp)
        else:
            ops.ApproxTopK(b2, [y], z, 3, 1, cmp, 2.0)
        with pytest.raises(BuilderError, match=message):
            b2.build()


def test_special_function_errors() -> None:
    b = XlaBuilder("s")
    ops.BesselI0e(ops.Parameter(b, 0, Shape.array(ElementType.S32, (2,))))
    with pytest.raises(BuilderError, match="BesselI0e: operand s32.2. is not a floating"):
        b.build()
    b = XlaBuilder("r")
    y = ops.Reciprocal(ops.Parameter(b, 0, Shape.array(ElementType.S32, (3,))))
    assert list(run(b, y, np.array([1, 2, -1], np.int32))) == [1, 0, -1]  # integer divide
    b = XlaBuilder("z")
    ops.Erfc(ops.Parameter(b, 0, Shape.array(ElementType.S32, (3,))))
    with pytest.raises(BuilderError, match="Erfc"):
        b.build()


# ---- custom calls ------------------------------------------------------------------------------
def _double(operands: list, result: Shape, attrs: object) -> object:
    return (operands[0] * 2, operands[1])


register_custom_call("xlapy_test_double_first", _double)


def test_custom_call_with_aliasing() -> None:
    b = XlaBuilder("cc")
    x, y = ops.Parameter(b, 0, V), ops.Parameter(b, 1, M)
    out = Shape.tuple([V, M])
    r = ops.CustomCallWithAliasing(b, b"xlapy_test_double_first", [x, y], out, [V, M],
                                   output_operand_aliasing=[((0,), (0, ())), ((1,), (1, ()))],
                                   schedule=ops.CustomCallSchedule.SCHEDULE_LATEST,
                                   api_version=ops.CustomCallApiVersion.API_VERSION_ORIGINAL)
    got = run(b, r, np.arange(4, dtype=np.float32), np.eye(3, dtype=np.float32))
    assert list(got[0]) == [0, 2, 4, 6]
    assert r.instr.attrs.operand_layouts == ((0,), (1, 0))


@pytest.mark.parametrize("aliasing,message", [
    ([((0,), (2, ()))], "operand 2 is out of range"),
    ([((1,), (0, ()))], "are not the same shape"),
    ([((5,), (0, ()))], "are not the same shape"),
])
def test_custom_call_with_aliasing_errors(aliasing: list, message: str) -> None:
    b = XlaBuilder("cc")
    x, y = ops.Parameter(b, 0, V), ops.Parameter(b, 1, M)
    ops.CustomCallWithAliasing(b, "t", [x, y], Shape.tuple([V, M]), [V, M],
                               output_operand_aliasing=aliasing)
    with pytest.raises(BuilderError, match=f"CustomCallWithAliasing: .*{message}"):
        b.build()


def test_custom_call_with_aliasing_literal_and_schedule_errors() -> None:
    from xlapy.types import Literal

    b = XlaBuilder("cc")
    x = ops.Parameter(b, 0, V)
    ops.CustomCallWithAliasing(b, "t", [x], V, [V], literal=Literal.from_numpy(np.float32(1)))
    with pytest.raises(BuilderError, match="CustomCallWithAliasing: not implemented in xlapy: "
                       "a literal"):
        b.build()
    b = XlaBuilder("cs")
    ops.CustomCall(b, "t", [ops.Parameter(b, 0, V)], V, schedule=7)
    with pytest.raises(BuilderError, match="schedule 7 is not a CustomCallSchedule"):
        b.build()


# ---- DynamicReshape ----------------------------------------------------------------------------
def test_dynamic_reshape_static_sizes() -> None:
    b = XlaBuilder("dr")
    x = ops.Parameter(b, 0, Shape.array(F32, (2, 3)))
    sizes = [ops.Constant(b, np.int32(3)), ops.Constant(b, np.int32(2))]
    r = ops.DynamicReshape(x, sizes, [3, 2], [False, False])
    assert r.instr.opcode == "dynamic_reshape" and r.shape() == Shape.array(F32, (3, 2))
    got = run(b, r, np.arange(6, dtype=np.float32).reshape(2, 3))
    assert np.array_equal(got, np.arange(6, dtype=np.float32).reshape(3, 2))


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_dynamic_reshape_dynamic_sizes(backend: str) -> None:
    """The logical operand (f32[2,4] with dimension 1 set to 3) fills the logical result
    [3, n] row-major (n = 2 at run time) inside bounds [3, 4]; the size travels with it."""
    b = XlaBuilder("dr")
    x = ops.Parameter(b, 0, Shape.array(F32, (2, 4)))
    xd = ops.SetDimensionSize(x, ops.Constant(b, np.int32(3)), 1)
    n = ops.Parameter(b, 1, Shape.scalar(ElementType.S32))
    r = ops.DynamicReshape(xd, [ops.Constant(b, np.int32(3)), n], [3, 4], [False, True])
    assert r.shape() == Shape.array(F32, (3, 4))
    comp = b.build(ops.Tuple(b, [r, ops.GetDimensionSize(r, 1)]))
    xv = np.arange(8, dtype=np.float32).reshape(2, 4)
    got = get_backend(backend).compile(comp.module).run([xv, np.int32(2)])
    assert np.array_equal(got[0][:, :2], xv[:, :3].reshape(3, 2)) and int(got[1]) == 2


def test_dynamic_reshape_errors() -> None:
    b = XlaBuilder("dr2")
    x = ops.Parameter(b, 0, Shape.array(F32, (2, 3)))
    ops.DynamicReshape(x, [], [6], [False])
    with pytest.raises(BuilderError, match="0 dim_sizes, 1 new_size_bounds"):
        b.build()
    b = XlaBuilder("dr3")
    x = ops.Parameter(b, 0, Shape.array(F32, (2, 3)))
    ops.DynamicReshape(x, [ops.Constant(b, np.int64(6))], [6], [False])
    with pytest.raises(BuilderError, match=r"dim_sizes\[0\] is s64\[\], not an s32 scalar"):
        b.build()


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("dims", [(0, 3), (3, 0), (2, 0, 0)])
def test_decompositions_of_empty_matrices(backend: str, dims: tuple[int, ...],
                                          capfd: pytest.CaptureFixture[str]) -> None:
    """LAPACK refuses a leading dimension of 0 (it printed "SGESDD parameter number 10 had an
    illegal value" and the call failed): empty matrices never reach it. SVD gives identity
    u and v as jnp.linalg.svd does; LU and QR give empty factors."""
    b = XlaBuilder("empty")
    a = ops.Parameter(b, 0, Shape.array(F32, dims))
    u, d, v = ops.SVD(a)
    lu, piv, _ = ops.LU(a)
    q, r = ops.QR(a, True)
    comp = b.build(ops.Tuple(b, [u, d, v, lu, piv, q, r]))
    got = get_backend(backend).compile(comp.module).run([np.zeros(dims, np.float32)])
    m, n = dims[-2:]
    batch = dims[:-2]
    assert np.array_equal(got[0], np.broadcast_to(np.eye(m, dtype=np.float32), batch + (m, m)))
    assert got[1].shape == batch + (0,)
    assert np.array_equal(got[2], np.broadcast_to(np.eye(n, dtype=np.float32), batch + (n, n)))
    assert got[3].shape == dims and got[4].shape == batch + (0,)
    assert np.array_equal(got[5], np.broadcast_to(np.eye(m, dtype=np.float32), batch + (m, m)))
    assert got[6].shape == dims
    assert "illegal value" not in capfd.readouterr().err
