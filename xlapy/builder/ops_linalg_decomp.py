"""Builder ops: xla_client's matrix decompositions (LU, QR, QrDecomposition,
ProductOfElementaryHouseholderReflectors, Eigh, SVD), built on jaxlib's LAPACK custom-call
targets (`lapack_<t>getrf_ffi`, geqrf, orgqr/ungqr, syevd/heevd, gesdd), which the
interpreter (xlapy/ops/custom_call_targets.py) and the cpu backend (backends/cpu/lapack.py)
run. These are the calls JAX lowers the same decompositions to on the CPU, so results match
jax's; XLA's own builder uses Jacobi (Eigh, SVD) and blocked Householder loops instead, whose
results agree to rounding (and up to each eigen/singular vector's sign).

Leading dimensions are batch dimensions. Element types: f32, f64, c64, c128. Eigh's and
SVD's `max_iter`/`epsilon` tune XLA's Jacobi iteration; LAPACK converges on its own, so they
are checked and otherwise unused; eigenvalues always come sorted ascending (a valid result
for sort_eigenvalues=False, whose order XLA leaves unspecified).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp, get_tuple_element
from xlapy.ops.attrs import ComparisonDirection
from xlapy.ops.elementwise import CompareAttrs
from xlapy.ops.misc import CustomCallAttrs
from xlapy.ops.reduction import ReduceAttrs
from xlapy.ops.shape import (
    BroadcastInDimAttrs,
    DynamicSliceAttrs,
    IotaAttrs,
    PadAttrs,
    SliceAttrs,
    TransposeAttrs,
)
from xlapy.types import ElementType, Literal, Shape

__all__ = ["LU", "QR", "QrDecomposition", "ProductOfElementaryHouseholderReflectors", "Eigh",
           "SVD"]

_PREFIX = {ElementType.F32: "s", ElementType.F64: "d", ElementType.C64: "c",
           ElementType.C128: "z"}
_S32 = ElementType.S32


def _failed(b: XlaBuilder, n: int) -> tuple[XlaOp, ...]:
    return tuple(XlaOp(b, None) for _ in range(n))


def _matrix(api: str, a: XlaOp, n_results: int) -> tuple[Shape, str] | tuple[XlaOp, ...]:
    """(shape, LAPACK type letter) of a batch of matrices, or failed results after the error."""
    b = a.builder
    if not a.ok:
        return _failed(b, n_results)
    s = a.shape()
    if not s.is_array or s.rank < 2 or s.element_type not in _PREFIX:
        b.report_error(api, f"operand {s} must be a (batch of) f32/f64/c64/c128 matrices, "
                       "rank >= 2")
        return _failed(b, n_results)
    return s, _PREFIX[s.element_type]


def _call(b: XlaBuilder, api: str, target: str, operands: list[XlaOp], results: list[Shape],
          config: tuple[tuple[str, Any], ...] = ()) -> list[XlaOp]:
    """A typed-FFI custom call to `target` with `results` (one result is not a tuple, as
    JAX lowers it); its results as separate ops."""
    shape = results[0] if len(results) == 1 else Shape.tuple(results)
    attrs = CustomCallAttrs(target, shape, False, "", 4, mhlo_backend_config=config)
    op = b.add_op("custom_call", operands, attrs, api_name=api)
    if len(results) == 1:
        return [op]
    return [b.add_op("get_tuple_element", [op], _gte(i), api_name=api)
            for i in range(len(results))]


def _gte(i: int) -> Any:
    from xlapy.ops.core import GetTupleElementAttrs

    return GetTupleElementAttrs(i)


def _with_dims(s: Shape, dims: tuple[int, ...], et: ElementType | None = None) -> Shape:
    return Shape.array(et or s.element_type, dims)


def _real(et: ElementType) -> ElementType:
    return {ElementType.C64: ElementType.F32, ElementType.C128: ElementType.F64}.get(et, et)


def _scalar(b: XlaBuilder, value: Any, et: ElementType, api: str) -> XlaOp:
    return b.constant(Literal.from_numpy(np.asarray(value).astype(et.dtype), et), api_name=api)


def _splat(b: XlaBuilder, value: Any, shape: Shape, api: str) -> XlaOp:
    return b.add_op("broadcast_in_dim", [_scalar(b, value, shape.element_type, api)],
                    BroadcastInDimAttrs(shape.dimensions, ()), api_name=api)


def _slice_last2(b: XlaBuilder, x: XlaOp, rows: int, cols: int, api: str) -> XlaOp:
    s = x.shape()
    if s.dimensions[-2:] == (rows, cols):
        return x
    start = (0,) * s.rank
    limit = s.dimensions[:-2] + (rows, cols)
    return b.add_op("slice", [x], SliceAttrs(start, limit, (1,) * s.rank), api_name=api)


def _upper_triangle(b: XlaBuilder, x: XlaOp, api: str) -> XlaOp:
    """x with the elements below the diagonal zeroed (the R of a geqrf result)."""
    s = x.shape()
    rows = b.add_op("iota", [], IotaAttrs(_with_dims(s, s.dimensions, _S32), s.rank - 2),
                    api_name=api)
    cols = b.add_op("iota", [], IotaAttrs(_with_dims(s, s.dimensions, _S32), s.rank - 1),
                    api_name=api)
    keep = b.add_op("compare", [rows, cols], CompareAttrs(ComparisonDirection.LE, None),
                    api_name=api)
    return b.add_op("select", [keep, x, _splat(b, 0, s, api)], api_name=api)


def _adjoint(b: XlaBuilder, x: XlaOp, api: str) -> XlaOp:
    """The conjugate transpose of the last two dimensions."""
    s = x.shape()
    perm = tuple(range(s.rank - 2)) + (s.rank - 1, s.rank - 2)
    t = b.add_op("transpose", [x], TransposeAttrs(perm), api_name=api)
    if not s.element_type.is_complex:
        return t
    re = b.add_op("real", [t], api_name=api)
    im = b.add_op("negate", [b.add_op("imag", [t], api_name=api)], api_name=api)
    return b.add_op("complex", [re, im], api_name=api)


# ---- LU --------------------------------------------------------------------------------------
def LU(operand: XlaOp) -> tuple[XlaOp, XlaOp, XlaOp]:
    """(lu, pivots, permutation): packed L\\U factors of P a = L U (getrf), the s32 0-based
    row swapped with row i at step i, and the s32 permutation those swaps make."""
    got = _matrix("LU", operand, 3)
    if isinstance(got[0], XlaOp):
        return got  # type: ignore[return-value]
    (s, t), b = got, operand.builder
    m, n = s.dimensions[-2:]
    batch = s.dimensions[:-2]
    k = min(m, n)
    lu, ipiv, _ = _call(b, "LU", f"lapack_{t}getrf_ffi", [operand],
                        [s, Shape.array(_S32, batch + (k,)), Shape.array(_S32, batch)])
    pivots = b.add_op("subtract", [ipiv, _splat(b, 1, ipiv.shape(), "LU")], api_name="LU")
    return lu, pivots, _pivots_to_permutation(b, pivots, m)


def _computation(name: str, params: list[Shape], body: Any) -> XlaComputation:
    sub = XlaBuilder(name)
    args = [sub.parameter(i, p) for i, p in enumerate(params)]
    return sub.build(body(sub, *args))


def _pivots_to_permutation(b: XlaBuilder, pivots: XlaOp, m: int) -> XlaOp:
    """Apply the swaps (i, pivots[..., i]) in order to the identity permutation 0..m-1: a
    while loop over i whose body swaps two entries by masks (works for any batch)."""
    api = "LU"
    ps = pivots.shape()
    batch, k = ps.dimensions[:-1], ps.dimensions[-1]
    r = len(batch)
    perm_shape = Shape.array(_S32, batch + (m,))
    scalar = Shape.scalar(_S32)
    if k == 0:  # no swaps (an empty matrix): the body's one-column slices would not fit
        return b.add_op("iota", [], IotaAttrs(perm_shape, r), api_name=api)
    state = Shape.tuple([scalar, ps, perm_shape])
    adder = _computation("lu_add", [scalar, scalar],
                         lambda sb, x, y: sb.add_op("add", [x, y], api_name=api))

    def cond(sb: XlaBuilder, st: XlaOp) -> XlaOp:
        i = get_tuple_element(st, 0)
        return sb.add_op("compare", [i, _scalar(sb, k, _S32, api)],
                         CompareAttrs(ComparisonDirection.LT, None), api_name=api)

    def body(sb: XlaBuilder, st: XlaOp) -> XlaOp:
        i, piv, perm = (get_tuple_element(st, j) for j in range(3))
        zeros = [_scalar(sb, 0, _S32, api) for _ in range(r)]
        one_col = batch + (1,)

        def column(x: XlaOp) -> XlaOp:  # x[..., i] broadcast back over the last dimension
            c = sb.add_op("dynamic_slice", [x, *zeros, i], DynamicSliceAttrs(one_col),
                          api_name=api)
            return sb.add_op("broadcast_in_dim", [c], BroadcastInDimAttrs(
                batch + (m,), tuple(range(r + 1))), api_name=api)

        iota = sb.add_op("iota", [], IotaAttrs(perm_shape, r), api_name=api)
        j = column(piv)
        at_i = sb.add_op("compare", [iota, sb.add_op("broadcast_in_dim", [i],
                         BroadcastInDimAttrs(batch + (m,), ()), api_name=api)],
                         CompareAttrs(ComparisonDirection.EQ, None), api_name=api)
        at_j = sb.add_op("compare", [iota, j], CompareAttrs(ComparisonDirection.EQ, None),
                         api_name=api)
        perm_i = column(perm)
        picked = sb.add_op("select", [at_j, perm, _splat(sb, 0, perm_shape, api)],
                           api_name=api)
        perm_j = sb.add_op("reduce", [picked, _scalar(sb, 0, _S32, api)],
                           ReduceAttrs((r,)), [adder], api_name=api)
        perm_j = sb.add_op("broadcast_in_dim", [perm_j], BroadcastInDimAttrs(
            batch + (m,), tuple(range(r))), api_name=api)
        new = sb.add_op("select", [at_i, perm_j, sb.add_op(
            "select", [at_j, perm_i, perm], api_name=api)], api_name=api)
        nxt = sb.add_op("add", [i, _scalar(sb, 1, _S32, api)], api_name=api)
        return sb.add_op("tuple", [nxt, piv, new], api_name=api)

    init = b.add_op("tuple", [_scalar(b, 0, _S32, api), pivots,
                              b.add_op("iota", [], IotaAttrs(perm_shape, r), api_name=api)],
                    api_name=api)
    loop = b.add_op("while", [init], computations=[_computation("lu_cond", [state], cond),
                                                   _computation("lu_body", [state], body)],
                    api_name=api)
    return get_tuple_element(loop, 2)


# ---- QR --------------------------------------------------------------------------------------
def _geqrf(api: str, a: XlaOp, s: Shape, t: str) -> tuple[XlaOp, XlaOp]:
    k = min(s.dimensions[-2:])
    qr, taus = _call(a.builder, api, f"lapack_{t}geqrf_ffi", [a],
                     [s, _with_dims(s, s.dimensions[:-2] + (k,))])
    return qr, taus


def _orgqr(api: str, a: XlaOp, taus: XlaOp, t: str) -> XlaOp:
    name = "orgqr" if t in "sd" else "ungqr"
    (q,) = _call(a.builder, api, f"lapack_{t}{name}_ffi", [a, taus], [a.shape()])
    return q


def QrDecomposition(operand: XlaOp) -> tuple[XlaOp, XlaOp]:
    """(q_and_r, taus): R on and above the diagonal, the Householder vectors below it, and
    their scales (LAPACK geqrf's packed form, as XLA's QrDecomposition)."""
    got = _matrix("QrDecomposition", operand, 2)
    if isinstance(got[0], XlaOp):
        return got  # type: ignore[return-value]
    s, t = got
    return _geqrf("QrDecomposition", operand, s, t)  # type: ignore[arg-type]


def ProductOfElementaryHouseholderReflectors(a: XlaOp, taus: XlaOp) -> XlaOp:
    """Q = H(0) H(1) ... H(k-1) from the Householder vectors below a's diagonal and `taus`
    (orgqr/ungqr); a is [..., m, n] with m >= n >= k, taus [..., k]."""
    api = "ProductOfElementaryHouseholderReflectors"
    got = _matrix(api, a, 1)
    if isinstance(got[0], XlaOp):
        return got[0]
    (s, t), b = got, a.builder
    if not taus.ok:
        return XlaOp(b, None)
    ts = taus.shape()
    m, n = s.dimensions[-2:]
    if m < n:
        return b.report_error(api, f"a {s} needs at least as many rows as columns")
    if not (ts.is_array and ts.element_type is s.element_type and ts.rank == s.rank - 1
            and ts.dimensions[:-1] == s.dimensions[:-2] and ts.dimensions[-1] <= n):
        return b.report_error(api, f"taus {ts} must be [batch..., k] with k <= {n} and the "
                              f"element type and batch of a {s}")
    return _orgqr(api, a, taus, t)  # type: ignore[arg-type]


def QR(operand: XlaOp, full_matrices: bool) -> tuple[XlaOp, XlaOp]:
    """(q, r) with a = q r: q [..., m, m] and r [..., m, n] when `full_matrices`, else
    q [..., m, k] and r [..., k, n] (k = min(m, n))."""
    api = "QR"
    got = _matrix(api, operand, 2)
    if isinstance(got[0], XlaOp):
        return got  # type: ignore[return-value]
    (s, t), b = got, operand.builder
    m, n = s.dimensions[-2:]
    k = min(m, n)
    packed, taus = _geqrf(api, operand, s, t)  # type: ignore[arg-type]
    cols = m if full_matrices else k
    if cols > n:  # the full q of a tall matrix: zero columns after the vectors
        pad = PadAttrs((0,) * s.rank, (0,) * (s.rank - 1) + (cols - n,), (0,) * s.rank)
        q_in = b.add_op("pad", [packed, _scalar(b, 0, s.element_type, api)], pad,
                        api_name=api)
    else:
        q_in = _slice_last2(b, packed, m, cols, api)
    q = _orgqr(api, q_in, taus, t)  # type: ignore[arg-type]
    r = _upper_triangle(b, _slice_last2(b, packed, m if full_matrices else k, n, api), api)
    return q, r


# ---- Eigh, SVD -------------------------------------------------------------------------------
def Eigh(a: XlaOp, lower: bool = True, max_iter: int = 15, epsilon: float = 1e-5,
         sort_eigenvalues: bool = True) -> tuple[XlaOp, XlaOp]:
    """(v, w): eigenvectors (columns) and ascending real eigenvalues of each Hermitian
    matrix, reading its `lower` (else upper) triangle (syevd/heevd)."""
    api = "Eigh"
    got = _matrix(api, a, 2)
    if isinstance(got[0], XlaOp):
        return got  # type: ignore[return-value]
    (s, t), b = got, a.builder
    if int(max_iter) < 0 or not float(epsilon) >= 0:
        b.report_error(api, f"max_iter {max_iter} and epsilon {epsilon} must be >= 0")
        return _failed(b, 2)  # type: ignore[return-value]
    del sort_eigenvalues  # LAPACK's order (ascending) is valid either way
    m, n = s.dimensions[-2:]
    if m != n:
        b.report_error(api, f"operand {s} is not square")
        return _failed(b, 2)  # type: ignore[return-value]
    name = "syevd" if t in "sd" else "heevd"
    config = (("mode", ord("V")), ("uplo", ord("L" if lower else "U")))
    v, w, _ = _call(b, api, f"lapack_{t}{name}_ffi", [a],
                    [s, _with_dims(s, s.dimensions[:-1], _real(s.element_type)),
                     Shape.array(_S32, s.dimensions[:-2])], config)
    return v, w


def SVD(a: XlaOp, max_iter: int = 100, epsilon: float = 1e-6) -> tuple[XlaOp, XlaOp, XlaOp]:
    """(u, d, v) with a = u diag(d) v^H: u [..., m, m], d [..., min(m, n)] descending and
    non-negative (real), v [..., n, n] (gesdd, full matrices)."""
    api = "SVD"
    got = _matrix(api, a, 3)
    if isinstance(got[0], XlaOp):
        return got  # type: ignore[return-value]
    (s, t), b = got, a.builder
    if int(max_iter) < 0 or not float(epsilon) >= 0:
        b.report_error(api, f"max_iter {max_iter} and epsilon {epsilon} must be >= 0")
        return _failed(b, 3)  # type: ignore[return-value]
    batch = s.dimensions[:-2]
    m, n = s.dimensions[-2:]
    config = (("mode", ord("A")),)
    _, d, u, vt, _ = _call(b, api, f"lapack_{t}gesdd_ffi", [a],
                           [s, Shape.array(_real(s.element_type), batch + (min(m, n),)),
                            _with_dims(s, batch + (m, m)), _with_dims(s, batch + (n, n)),
                            Shape.array(_S32, batch)], config)
    return u, d, _adjoint(b, vt, api)
