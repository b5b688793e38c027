"""Linear-algebra ops: dot_general, cholesky, triangular_solve, fft (convolution: linalg_conv).

Evaluation is whole-array numpy. Sub-32-bit floats compute in f32 and round once (XLA's CPU
backend upcasts them); integer products accumulate in 64 bits and wrap to the result type,
which equals XLA's modular arithmetic in the narrower type.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.attrs import Precision
from xlapy.ops.base import EvalContext, OpDef, Region, check, fail, register
from xlapy.ops.dot_algorithm import DotAlgorithm, check_algorithm
from xlapy.ops.lapack_threads import serial
from xlapy.types import ElementType, Shape


# ---- shared helpers -----------------------------------------------------------------------------
def accumulate_dtype(t: ElementType) -> np.dtype:
    """The dtype a dot/conv accumulates in for operand type `t`."""
    if t.is_pred or t.is_signed:
        return np.dtype(np.int64)
    if t.is_unsigned:
        return np.dtype(np.uint64)
    if t.is_float:
        return np.dtype(np.float32) if t.bits < 32 else t.dtype
    return t.dtype


def dot_result_type(label: str, lhs: ElementType, rhs: ElementType,
                    preferred: ElementType | None) -> ElementType:
    """XLA's result element type: `preferred` if given, else the more precise operand type.

    Operands of different kinds (bf16 x c128, s32 x c64: StableHLO's mixed-precision dots)
    compute in the result type, which must be of the higher kind (pred < integer < float <
    complex); the operands are converted to it (XLA's operand upcasting)."""
    def kind(t: ElementType) -> int:
        return 0 if t.is_pred else 1 if t.is_integer else 2 if t.is_float else 3

    if kind(lhs) == kind(rhs):
        if lhs.is_integer:
            if lhs.is_signed != rhs.is_signed:
                fail(f"{label}_c1",
                     f"lhs element type {lhs} and rhs element type {rhs} differ in signedness")
        base = lhs if lhs.bits >= rhs.bits else rhs
    else:
        base = lhs if kind(lhs) > kind(rhs) else rhs
        if not (preferred is None or kind(preferred) >= kind(base)):
            fail(f"{label}_c1",
                 f"lhs element type {lhs} and rhs element type {rhs} are of different kinds "
                 f"and the result type {preferred} holds neither")
    if preferred is None:
        return base
    if not (preferred.is_array and not preferred.is_pred or base.is_pred):
        fail(f"{label}_c13", f"preferred element type {preferred} is not numeric")
    if preferred.is_integer:
        if not (base.is_integer and base.is_signed == preferred.is_signed or base.is_pred):
            fail(f"{label}_c13",
                 f"preferred element type {preferred} does not fit operand type "
                 f"{base}: integer results need integer operands of the same signedness")
    elif preferred.is_float:
        if base.is_complex:
            fail(f"{label}_c13",
                 f"preferred element type {preferred} cannot hold complex operand type {base}")
    return preferred


def precision_ok(label: str, precision_config: tuple[Precision, ...]) -> None:
    """XLA allows an empty precision_config; the spec's size 2 otherwise (C12 / C25)."""
    if len(precision_config) not in (0, 2):
        fail(label, f"precision_config has {len(precision_config)} entries; expected 0 or 2")
    for p in precision_config:
        if not isinstance(p, Precision):
            fail(label, f"precision_config entry {p!r} is not a Precision")


def finish(acc: np.ndarray, result: ElementType) -> np.ndarray:
    """Accumulator values to the result type (wrapping integers, rounding floats once)."""
    if result.is_pred:
        return np.asarray(acc != 0)
    return np.asarray(acc).astype(result.dtype, copy=False)


# ---- dot_general --------------------------------------------------------------------------------
@dataclass(frozen=True)
class DotGeneralAttrs:
    """`dot_dimension_numbers` flattened, `precision_config`, and XLA's preferred result type."""

    lhs_batching_dimensions: tuple[int, ...] = ()
    rhs_batching_dimensions: tuple[int, ...] = ()
    lhs_contracting_dimensions: tuple[int, ...] = ()
    rhs_contracting_dimensions: tuple[int, ...] = ()
    precision_config: tuple[Precision, ...] = ()
    result_element_type: ElementType | None = None
    #: `#stablehlo.dot_algorithm<...>` (xlapy.ops.dot_algorithm); None: none given.
    algorithm: DotAlgorithm | None = None


def _dims(shape: Shape, dims: Sequence[int]) -> list[int]:
    return [shape.dimensions[d] for d in dims]


@register
class DotGeneral(OpDef):
    """stablehlo.dot_general: spec §dot_general; XLA Dot, DotGeneral (HLO dot)."""

    name = "dot_general"
    hlo_name = "dot"
    arity = 2
    attrs = DotGeneralAttrs
    family = "linalg"

    def infer(self, operands: Sequence[Shape], attrs: DotGeneralAttrs,
              regions: Sequence[Region]) -> Shape:
        lhs, rhs = operands
        check(lhs.is_array and rhs.is_array, "dot_general_c1", "operands must be tensors")
        et = dot_result_type("dot_general", lhs.element_type, rhs.element_type,
                             attrs.result_element_type)
        lb, rb = attrs.lhs_batching_dimensions, attrs.rhs_batching_dimensions
        lc, rc = attrs.lhs_contracting_dimensions, attrs.rhs_contracting_dimensions
        if len(lb) != len(rb):
            fail("dot_general_c2",
                 f"lhs_batching_dimensions {list(lb)} and rhs_batching_dimensions {list(rb)} "
                 "differ in size")
        if len(lc) != len(rc):
            fail("dot_general_c3",
                 f"lhs_contracting_dimensions {list(lc)} and rhs_contracting_dimensions {list(rc)} "
                 "differ in size")
        if len(set(lb + lc)) != len(lb + lc):
            fail("dot_general_c4",
                 f"lhs batching {list(lb)} and contracting {list(lc)} dimensions are not unique")
        if len(set(rb + rc)) != len(rb + rc):
            fail("dot_general_c5",
                 f"rhs batching {list(rb)} and contracting {list(rc)} dimensions are not unique")
        for label, dims, side, shape in (("c6", lb, "lhs batching", lhs),
                                         ("c7", lc, "lhs contracting", lhs),
                                         ("c8", rb, "rhs batching", rhs),
                                         ("c9", rc, "rhs contracting", rhs)):
            for d in dims:
                if not 0 <= d < shape.rank:
                    fail(f"dot_general_{label}",
                         f"{side} dimension {d} is out of range for rank {shape.rank}")
        for l, r in zip(lb, rb):
            if lhs.dimensions[l] != rhs.dimensions[r]:
                fail("dot_general_c10",
                     f"lhs batching dimension {l} has size {lhs.dimensions[l]} but rhs batching "
                     f"dimension {r} has size {rhs.dimensions[r]}")
        for l, r in zip(lc, rc):
            if lhs.dimensions[l] != rhs.dimensions[r]:
                fail("dot_general_c11",
                     f"lhs contracting dimension {l} has size {lhs.dimensions[l]} but rhs "
                     f"contracting dimension {r} has size {rhs.dimensions[r]}")
        precision_ok("dot_general_c12", attrs.precision_config)
        if attrs.algorithm is not None:
            check_algorithm(attrs.algorithm, attrs.precision_config)
        lfree = [d for d in range(lhs.rank) if d not in lb and d not in lc]
        rfree = [d for d in range(rhs.rank) if d not in rb and d not in rc]
        dims = _dims(lhs, lb) + _dims(lhs, lfree) + _dims(rhs, rfree)
        return Shape.array(et, dims)

    def evaluate(self, operands: Sequence[Any], attrs: DotGeneralAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        lhs, rhs = operands
        lb, rb = attrs.lhs_batching_dimensions, attrs.rhs_batching_dimensions
        lc, rc = attrs.lhs_contracting_dimensions, attrs.rhs_contracting_dimensions
        lfree = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
        rfree = [d for d in range(rhs.ndim) if d not in rb and d not in rc]
        bsize = int(np.prod([lhs.shape[d] for d in lb], dtype=np.int64))
        m = int(np.prod([lhs.shape[d] for d in lfree], dtype=np.int64))
        n = int(np.prod([rhs.shape[d] for d in rfree], dtype=np.int64))
        k = int(np.prod([lhs.shape[d] for d in lc], dtype=np.int64))
        acc_t = _common_acc(lhs, rhs, result.element_type)
        if not lc and acc_t.kind in "fc" and attrs.algorithm is None:
            return _outer(np.transpose(lhs, (*lb, *lfree)).reshape(bsize, m, 1),
                          np.transpose(rhs, (*rb, *rfree)).reshape(bsize, 1, n), acc_t,
                          result, ctx)
        a = np.transpose(lhs, (*lb, *lfree, *lc)).astype(acc_t, copy=False).reshape(bsize, m, k)
        b = np.transpose(rhs, (*rb, *rc, *rfree)).astype(acc_t, copy=False).reshape(bsize, k, n)
        with np.errstate(all="ignore"):
            if not k:
                out = np.zeros((bsize, m, n), acc_t)
            elif bsize == 1:  # plain 2-D BLAS call
                out = np.matmul(a[0], b[0])
            else:
                out = np.matmul(a, b)
        return finish(out.reshape(result.dimensions), result.element_type)


def _outer(a: np.ndarray, b: np.ndarray, acc_t: np.dtype, result: Shape,
           ctx: EvalContext) -> np.ndarray:
    """A float dot with no contracting dimension: each element is the reduce of one product,
    0 + l * r in the accumulation type, computed as those element-wise ops (convert, multiply,
    add) with their denormal mode and complex arithmetic, as XLA:CPU's simplifier rewrites it
    (and the cpu backend's, algebraic_rules.dot_outer: so its fused kernel is exact)."""
    from xlapy.ops.base import get_op
    from xlapy.ops.elementwise_convert import convert_array
    from xlapy.types import from_dtype

    acc = from_dtype(acc_t)
    shape = Shape.array(acc, result.dimensions)
    full = (a.shape[0], a.shape[1], b.shape[2])
    with np.errstate(all="ignore"):
        x, y = (np.broadcast_to(convert_array(v, acc), full) for v in (a, b))
        p = get_op("multiply").evaluate([x, y], None, shape, ctx)
        zero = np.broadcast_to(np.zeros((), acc_t), full)
        p = get_op("add").evaluate([zero, p], None, shape, ctx)
        p = np.asarray(p).reshape(result.dimensions)
        return p if acc == result.element_type else convert_array(p, result.element_type)


def _common_acc(lhs: np.ndarray, rhs: np.ndarray, result: ElementType) -> np.dtype:
    """Accumulation dtype covering both operands and the result type."""
    from xlapy.types import from_dtype

    ts = [from_dtype(lhs.dtype), from_dtype(rhs.dtype)]
    if result.is_float or result.is_complex:
        ts.append(result)
    return np.result_type(*(accumulate_dtype(t) for t in ts))


# ---- cholesky -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class CholeskyAttrs:
    lower: bool = True


def _float_or_complex(t: ElementType) -> bool:
    return t.is_float or t.is_complex


@register
class Cholesky(OpDef):
    """stablehlo.cholesky: spec §cholesky; XLA Cholesky.

    The other triangle is zero; a matrix that is not Hermitian positive-definite yields NaN in
    its triangle (what XLA's CPU backend, via LAPACK potrf and jax's masking, returns).
    """

    name = "cholesky"
    arity = 1
    attrs = CholeskyAttrs
    family = "linalg"

    def infer(self, operands: Sequence[Shape], attrs: CholeskyAttrs,
              regions: Sequence[Region]) -> Shape:
        (a,) = operands
        check(a.is_array and _float_or_complex(a.element_type), "cholesky_c1",
              f"operand {a} is not a tensor of floating-point or complex type")
        check(a.rank >= 2, "cholesky_c2", f"operand rank {a.rank} is less than 2")
        check(a.dimensions[-2] == a.dimensions[-1], "cholesky_c3",
              f"operand matrices are {a.dimensions[-2]}x{a.dimensions[-1]}, not square")
        return a

    def evaluate(self, operands: Sequence[Any], attrs: CholeskyAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        (a,) = operands
        t = result.element_type
        x = a.astype(accumulate_dtype(t), copy=False)
        if not attrs.lower:
            x = np.conj(np.swapaxes(x, -1, -2))
        # Only the chosen triangle is read: rebuild the Hermitian matrix from it.
        low = np.tril(x)
        herm = low + np.conj(np.swapaxes(np.tril(x, -1), -1, -2))
        n = x.shape[-1]
        flat = herm.reshape(-1, n, n)
        out = np.zeros_like(flat)
        try:
            out = serial(np.linalg.cholesky, n * n)(flat) if flat.size else out
        except np.linalg.LinAlgError:
            for i in range(flat.shape[0]):  # only on failure: find which matrices fail
                try:
                    out[i] = serial(np.linalg.cholesky, n * n)(flat[i])
                except np.linalg.LinAlgError:
                    out[i] = np.tril(np.full((n, n), np.nan, flat.dtype))
        out = out.reshape(x.shape)
        if not attrs.lower:
            out = np.conj(np.swapaxes(out, -1, -2))
        return finish(out, t)


# ---- triangular_solve ---------------------------------------------------------------------------
class Transpose(enum.Enum):
    """triangular_solve `transpose_a` (XLA TriangularSolveOptions::Transpose)."""

    NO_TRANSPOSE = "NO_TRANSPOSE"
    TRANSPOSE = "TRANSPOSE"
    ADJOINT = "ADJOINT"


@dataclass(frozen=True)
class TriangularSolveAttrs:
    left_side: bool = True
    lower: bool = True
    unit_diagonal: bool = False
    transpose_a: Transpose = Transpose.NO_TRANSPOSE


@register
class TriangularSolve(OpDef):
    """stablehlo.triangular_solve: spec §triangular_solve; XLA TriangularSolve.

    Evaluated by substitution vectorized over the batch and right-hand sides (a loop over
    the matrix dimension), so singular matrices give inf/NaN as in XLA rather than raising.
    """

    name = "triangular_solve"
    arity = 2
    attrs = TriangularSolveAttrs
    family = "linalg"

    def infer(self, operands: Sequence[Shape], attrs: TriangularSolveAttrs,
              regions: Sequence[Region]) -> Shape:
        a, b = operands
        check(a.is_array and b.is_array, "triangular_solve_c1", "operands must be tensors")
        check(_float_or_complex(a.element_type), "triangular_solve_c1",
              f"a has element type {a.element_type}; expected floating-point or complex")
        check(a.element_type == b.element_type, "triangular_solve_c1",
              f"a has element type {a.element_type} but b has {b.element_type}")
        check(a.rank == b.rank and a.rank >= 2, "triangular_solve_c2",
              f"a and b must have the same rank >= 2, got ranks {a.rank} and {b.rank}")
        check(isinstance(attrs.transpose_a, Transpose), "triangular_solve_c3",
              f"transpose_a {attrs.transpose_a!r} is not a Transpose")
        check(a.dimensions[:-2] == b.dimensions[:-2], "triangular_solve_c3",
              f"batch dimensions {list(a.dimensions[:-2])} and {list(b.dimensions[:-2])} differ")
        k = b.dimensions[-2] if attrs.left_side else b.dimensions[-1]
        check(a.dimensions[-2] == a.dimensions[-1] == k, "triangular_solve_c3",
              f"a must be square of size {k} (dimension {'-2' if attrs.left_side else '-1'} "
              f"of b), got {a.dimensions[-2]}x{a.dimensions[-1]}")
        return b

    def evaluate(self, operands: Sequence[Any], attrs: TriangularSolveAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        a, b = operands
        acc = accumulate_dtype(result.element_type)
        m = np.tril(a) if attrs.lower else np.triu(a)
        m = m.astype(acc, copy=False)
        n = m.shape[-1]
        if attrs.unit_diagonal:
            idx = np.arange(n)
            m[..., idx, idx] = 1
        lower = attrs.lower
        if attrs.transpose_a is not Transpose.NO_TRANSPOSE:
            m = np.swapaxes(m, -1, -2)
            if attrs.transpose_a is Transpose.ADJOINT:
                m = np.conj(m)
            lower = not lower
        rhs = b.astype(acc, copy=False)
        if not attrs.left_side:  # x M = b  <=>  M^T x^T = b^T
            m, rhs, lower = np.swapaxes(m, -1, -2), np.swapaxes(rhs, -1, -2), not lower
        x = np.zeros_like(rhs)
        order = range(n) if lower else range(n - 1, -1, -1)
        with np.errstate(all="ignore"):
            for i in order:
                s = slice(0, i) if lower else slice(i + 1, n)
                r = rhs[..., i, :] - np.einsum("...k,...kj->...j", m[..., i, s], x[..., s, :])
                x[..., i, :] = r / m[..., i, i][..., None]
        if not attrs.left_side:
            x = np.swapaxes(x, -1, -2)
        return finish(x, result.element_type)


# ---- fft ----------------------------------------------------------------------------------------
class FftType(enum.Enum):
    """fft `fft_type`."""

    FFT = "FFT"
    IFFT = "IFFT"
    RFFT = "RFFT"
    IRFFT = "IRFFT"


@dataclass(frozen=True)
class FftAttrs:
    fft_type: FftType
    fft_length: tuple[int, ...]


_COMPLEX_OF = {ElementType.F32: ElementType.C64, ElementType.F64: ElementType.C128}
_REAL_OF = {v: k for k, v in _COMPLEX_OF.items()}


@register
class Fft(OpDef):
    """stablehlo.fft: spec §fft; XLA Fft (f32/f64 and c64/c128, as XLA supports).

    Computed in double precision with numpy's pocketfft and rounded once, which is within
    a few ulps of XLA's single-precision DUCC FFT.
    """

    name = "fft"
    arity = 1
    attrs = FftAttrs
    family = "linalg"

    def infer(self, operands: Sequence[Shape], attrs: FftAttrs,
              regions: Sequence[Region]) -> Shape:
        (x,) = operands
        lengths = attrs.fft_length
        check(x.is_array, "fft_c1", f"operand {x} is not a tensor")
        check(1 <= len(lengths) <= 3, "fft_c3",
              f"fft_length {list(lengths)} must have 1 to 3 entries")
        check(x.rank >= len(lengths), "fft_c1",
              f"operand rank {x.rank} is less than size(fft_length) = {len(lengths)}")
        check(all(n >= 0 for n in lengths), "fft_c4", f"fft_length {list(lengths)} is negative")
        et, ft, L = x.element_type, attrs.fft_type, len(lengths)
        tail = list(x.dimensions[-L:])
        if ft in (FftType.FFT, FftType.IFFT):
            check(et in _REAL_OF, "fft_c2", f"{ft.value} needs a complex operand, got {et}")
            check(tail == list(lengths), "fft_c4",
                  f"operand trailing dimensions {tail} differ from fft_length {list(lengths)}")
            return x
        if ft is FftType.RFFT:
            check(et in _COMPLEX_OF, "fft_c2", f"RFFT needs an f32 or f64 operand, got {et}")
            check(tail == list(lengths), "fft_c4",
                  f"operand trailing dimensions {tail} differ from fft_length {list(lengths)}")
            last = 0 if lengths[-1] == 0 else lengths[-1] // 2 + 1
            return Shape.array(_COMPLEX_OF[et], (*x.dimensions[:-1], last))
        check(et in _REAL_OF, "fft_c2", f"IRFFT needs a complex operand, got {et}")
        want = [*lengths[:-1], 0 if lengths[-1] == 0 else lengths[-1] // 2 + 1]
        check(tail == want, "fft_c5",
              f"operand trailing dimensions {tail} must be {want} for fft_length "
              f"{list(lengths)}")
        return Shape.array(_REAL_OF[et], (*x.dimensions[:-L], *lengths))

    def evaluate(self, operands: Sequence[Any], attrs: FftAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        (x,) = operands
        if any(d == 0 for d in result.dimensions) or x.size == 0:
            return np.zeros(result.dimensions, result.dtype)
        L = len(attrs.fft_length)
        axes = tuple(range(x.ndim - L, x.ndim))
        wide = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
        ft = attrs.fft_type
        if ft is FftType.FFT:
            out = np.fft.fftn(wide, axes=axes)
        elif ft is FftType.IFFT:
            out = np.fft.ifftn(wide, axes=axes)
        elif ft is FftType.RFFT:
            out = np.fft.rfftn(wide, axes=axes)
        else:
            out = np.fft.irfftn(wide, s=attrs.fft_length, axes=axes)
        return out.astype(result.dtype)


from xlapy.ops import linalg_conv  # noqa: E402,F401  (registers convolution)
