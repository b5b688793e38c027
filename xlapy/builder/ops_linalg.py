"""Builder ops: linalg family (seed 000 Dot/DotGeneral/Conv*/Fft/Cholesky/TriangularSolve).

Signatures follow jax's xla_client (`ops.DotGeneral(lhs, rhs, dimension_numbers,
precision_config, preferred_element_type)`); bad arguments are reported through
`builder.report_error`, everything else by shape inference in `add_op`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xlapy.builder.xla_builder import XlaOp, as_element_type
from xlapy.errors import XlapyError
from xlapy.ops.attrs import Precision
from xlapy.ops.linalg import (
    CholeskyAttrs,
    DotGeneralAttrs,
    FftAttrs,
    FftType,
    Transpose,
    TriangularSolveAttrs,
)
from xlapy.ops.linalg_conv import ConvDimensionNumbers, ConvolutionAttrs
from xlapy.types import ElementType

__all__ = [
    "Dot", "DotGeneral", "DotDimensionNumbers", "Conv", "ConvWithGeneralPadding",
    "ConvWithGeneralDimensions", "ConvGeneral", "ConvGeneralDilated", "ConvDimensionNumbers",
    "PaddingType", "Fft", "FftType", "Cholesky", "TriangularSolve",
    "make_conv_dimension_numbers", "make_padding",
]

class PaddingType(enum.Enum):
    """Shorthand window padding (XLA Padding::kSame / kValid; xla_client.PaddingType)."""

    SAME = "SAME"
    VALID = "VALID"


@dataclass(frozen=True)
class DotDimensionNumbers:
    """xla_client's DotDimensionNumbers message."""

    lhs_contracting_dimensions: tuple[int, ...] = ()
    rhs_contracting_dimensions: tuple[int, ...] = ()
    lhs_batch_dimensions: tuple[int, ...] = ()
    rhs_batch_dimensions: tuple[int, ...] = ()


class _BadArgument(XlapyError):
    """An argument the builder rejects before shape inference."""


def _ints(values: Any, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in values)
    except (TypeError, ValueError):
        raise _BadArgument(f"{what} must be a sequence of integers, got {values!r}") from None


def _precision(config: Any) -> tuple[Precision, ...]:
    """None, one Precision (both operands), a pair, or an object with `operand_precision`."""
    if config is None:
        return ()
    config = getattr(config, "operand_precision", config)
    if isinstance(config, (Precision, str)):
        config = (config, config)
    try:
        return tuple(p if isinstance(p, Precision) else Precision(getattr(p, "name", p))
                     for p in config)
    except (TypeError, ValueError):
        raise _BadArgument(f"bad precision_config {config!r}") from None


def _etype(t: Any) -> ElementType | None:
    if t is None:
        return None
    try:
        return as_element_type(t)
    except XlapyError as e:
        raise _BadArgument(f"bad preferred_element_type {t!r}: {e}") from None


def _attr(obj: Any, *names: str) -> Any:
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    raise _BadArgument(f"dimension_numbers {obj!r} has no field {names[0]}")


def _dot_numbers(dn: Any) -> tuple[tuple[int, ...], ...]:
    """(lhs_contract, rhs_contract, lhs_batch, rhs_batch) from a message or jax-style tuple."""
    if isinstance(dn, (tuple, list)):
        try:
            (lc, rc), (lb, rb) = dn
        except (TypeError, ValueError):
            raise _BadArgument(f"dimension_numbers {dn!r} is not ((lhs_contract, rhs_contract),"
                               " (lhs_batch, rhs_batch))") from None
    else:
        lc = _attr(dn, "lhs_contracting_dimensions")
        rc = _attr(dn, "rhs_contracting_dimensions")
        lb = _attr(dn, "lhs_batch_dimensions", "lhs_batching_dimensions")
        rb = _attr(dn, "rhs_batch_dimensions", "rhs_batching_dimensions")
    return (_ints(lc, "lhs contracting dimensions"), _ints(rc, "rhs contracting dimensions"),
            _ints(lb, "lhs batch dimensions"), _ints(rb, "rhs batch dimensions"))


def DotGeneral(lhs: XlaOp, rhs: XlaOp, dimension_numbers: Any, precision_config: Any = None,
               preferred_element_type: Any = None) -> XlaOp:
    """General dot: `dimension_numbers` a DotDimensionNumbers or ((lc, rc), (lb, rb))."""
    b = lhs.builder
    try:
        lc, rc, lb, rb = _dot_numbers(dimension_numbers)
        attrs = DotGeneralAttrs(lb, rb, lc, rc, _precision(precision_config),
                                _etype(preferred_element_type))
    except _BadArgument as e:
        return b.report_error("DotGeneral", str(e))
    return b.add_op("dot_general", [lhs, rhs], attrs, api_name="DotGeneral")


def Dot(lhs: XlaOp, rhs: XlaOp, precision_config: Any = None,
        preferred_element_type: Any = None) -> XlaOp:
    """Vector/matrix dot: contracts lhs's last dimension with rhs's first (ranks 1 or 2)."""
    b = lhs.builder
    if not (lhs.ok and rhs.ok):
        return b.add_op("dot_general", [lhs, rhs], api_name="Dot")
    lr, rr = lhs.shape().rank, rhs.shape().rank
    if lr not in (1, 2) or rr not in (1, 2):
        return b.report_error("Dot", f"operands must have rank 1 or 2, got {lhs.shape()} and "
                              f"{rhs.shape()}")
    try:
        attrs = DotGeneralAttrs((), (), (lr - 1,), (0,), _precision(precision_config),
                                _etype(preferred_element_type))
    except _BadArgument as e:
        return b.report_error("Dot", str(e))
    return b.add_op("dot_general", [lhs, rhs], attrs, api_name="Dot")


# ---- convolution --------------------------------------------------------------------------------
def make_padding(padding: Any, input_sizes: Sequence[int], window: Sequence[int],
                 strides: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """(low, high) pairs from SAME/VALID (XLA MakePadding) or from explicit pairs."""
    if isinstance(padding, str):
        try:
            padding = PaddingType(padding.upper())
        except ValueError:
            raise _BadArgument(f"padding {padding!r} is not SAME or VALID") from None
    if isinstance(padding, PaddingType) or getattr(padding, "name", None) in ("SAME", "VALID"):
        if getattr(padding, "name", None) == "VALID":
            return tuple((0, 0) for _ in input_sizes)
        pairs = []
        for n, w, s in zip(input_sizes, window, strides):
            if s < 1:
                raise _BadArgument(f"SAME padding needs strides >= 1, got {list(strides)}")
            out = -(-n // s)
            need = max(0, (out - 1) * s + w - n)
            pairs.append((need // 2, need - need // 2))
        return tuple(pairs)
    try:
        return tuple((int(lo), int(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise _BadArgument(f"padding {padding!r} is not SAME, VALID or (low, high) pairs"
                           ) from None


def make_conv_dimension_numbers(dn: Any, num_spatial: int) -> ConvDimensionNumbers:
    """None (XLA default), a ConvDimensionNumbers, an xla_client-style message with the same
    fields, or jax-style layout strings ("NCHW", "OIHW", "NCHW")."""
    if dn is None:
        return ConvDimensionNumbers.default(num_spatial)
    if isinstance(dn, ConvDimensionNumbers):
        return dn
    if isinstance(dn, (tuple, list)) and len(dn) == 3 and all(isinstance(x, str) for x in dn):
        lhs_s, rhs_s, out_s = dn
        try:
            def spatial(spec: str, skip: str) -> tuple[int, ...]:
                return tuple(i for i, ch in enumerate(spec) if ch not in skip)

            # jax orders spatial dimensions by their order in the kernel spec.
            k_sp = spatial(rhs_s, "OI")
            order = [rhs_s[i] for i in k_sp]
            return ConvDimensionNumbers(
                lhs_s.index("N"), lhs_s.index("C"), tuple(lhs_s.index(c) for c in order),
                rhs_s.index("I"), rhs_s.index("O"), k_sp,
                out_s.index("N"), out_s.index("C"), tuple(out_s.index(c) for c in order))
        except ValueError:
            raise _BadArgument(f"bad dimension_numbers {dn!r}") from None
    if isinstance(dn, (tuple, list)) and len(dn) == 3:
        # jax's ConvDimensionNumbers(lhs_spec, rhs_spec, out_spec) of dimension indices.
        lhs_i, rhs_i, out_i = (_ints(x, "dimension_numbers") for x in dn)
        return ConvDimensionNumbers(lhs_i[0], lhs_i[1], lhs_i[2:], rhs_i[1], rhs_i[0],
                                    rhs_i[2:], out_i[0], out_i[1], out_i[2:])
    names = ("input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions",
             "kernel_input_feature_dimension", "kernel_output_feature_dimension",
             "kernel_spatial_dimensions", "output_batch_dimension", "output_feature_dimension",
             "output_spatial_dimensions")
    vals = [_attr(dn, n) for n in names]
    return ConvDimensionNumbers(
        int(vals[0]), int(vals[1]), _ints(vals[2], names[2]), int(vals[3]), int(vals[4]),
        _ints(vals[5], names[5]), int(vals[6]), int(vals[7]), _ints(vals[8], names[8]))


def ConvGeneralDilated(lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int], padding: Any,
                       lhs_dilation: Sequence[int] = (), rhs_dilation: Sequence[int] = (),
                       dimension_numbers: Any = None, feature_group_count: int = 1,
                       batch_group_count: int = 1, precision_config: Any = None,
                       preferred_element_type: Any = None, window_reversal: Any = None
                       ) -> XlaOp:
    """The general convolution (jax xla_client signature); padding may be SAME/VALID."""
    return _conv(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                 dimension_numbers, feature_group_count, batch_group_count, precision_config,
                 preferred_element_type, window_reversal, "ConvGeneralDilated")


def _conv(lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int], padding: Any,
          lhs_dilation: Sequence[int], rhs_dilation: Sequence[int], dimension_numbers: Any,
          feature_group_count: int, batch_group_count: int, precision_config: Any,
          preferred_element_type: Any, window_reversal: Any, api_name: str) -> XlaOp:
    b = lhs.builder
    if not (lhs.ok and rhs.ok):
        return b.add_op("convolution", [lhs, rhs], api_name=api_name)
    try:
        ls, rs = lhs.shape(), rhs.shape()
        if not (ls.is_array and rs.is_array) or ls.rank < 2:
            raise _BadArgument(f"operands must be tensors of rank >= 2, got {ls} and {rs}")
        s = ls.rank - 2
        dn = make_conv_dimension_numbers(dimension_numbers, s)
        strides = _ints(window_strides, "window_strides") or (1,) * s
        pads = make_padding(padding, [ls.dimensions[d] for d in dn.input_spatial_dimensions
                                      if 0 <= d < ls.rank],
                            [rs.dimensions[d] for d in dn.kernel_spatial_dimensions
                             if 0 <= d < rs.rank], strides)
        # Explicit defaults, so printed IR spells every window attribute out.
        attrs = ConvolutionAttrs(
            dn, strides, pads, _ints(lhs_dilation or (), "lhs_dilation") or (1,) * s,
            _ints(rhs_dilation or (), "rhs_dilation") or (1,) * s,
            tuple(bool(x) for x in window_reversal) if window_reversal is not None
            else (False,) * s,
            int(feature_group_count), int(batch_group_count), _precision(precision_config),
            _etype(preferred_element_type))
    except _BadArgument as e:
        return b.report_error(api_name, str(e))
    return b.add_op("convolution", [lhs, rhs], attrs, api_name=api_name)


def Conv(lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int], padding: Any,
         feature_group_count: int = 1, batch_group_count: int = 1, precision_config: Any = None,
         preferred_element_type: Any = None) -> XlaOp:
    """Convolution with SAME/VALID padding and XLA's default dimension order."""
    return _conv(lhs, rhs, window_strides, padding, (), (), None,
             feature_group_count, batch_group_count, precision_config,
             preferred_element_type, None, "Conv")


def ConvWithGeneralPadding(lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int],
                           padding: Sequence[tuple[int, int]], lhs_dilation: Sequence[int],
                           rhs_dilation: Sequence[int], feature_group_count: int = 1,
                           batch_group_count: int = 1, precision_config: Any = None,
                           preferred_element_type: Any = None) -> XlaOp:
    """Convolution with explicit (low, high) padding and dilations, default dimensions."""
    return _conv(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
             None, feature_group_count, batch_group_count, precision_config,
             preferred_element_type, None, "ConvWithGeneralPadding")


def ConvWithGeneralDimensions(lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int],
                              padding: Any, dimension_numbers: Any, feature_group_count: int = 1,
                              batch_group_count: int = 1, precision_config: Any = None,
                              preferred_element_type: Any = None) -> XlaOp:
    """Convolution with SAME/VALID padding and explicit dimension numbers."""
    return _conv(lhs, rhs, window_strides, padding, (), (), dimension_numbers,
             feature_group_count, batch_group_count, precision_config,
             preferred_element_type, None, "ConvWithGeneralDimensions")


def ConvGeneral(lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int],
                padding: Sequence[tuple[int, int]], dimension_numbers: Any,
                feature_group_count: int = 1, batch_group_count: int = 1,
                precision_config: Any = None, preferred_element_type: Any = None) -> XlaOp:
    """Convolution with explicit padding and dimension numbers, no dilation."""
    return _conv(lhs, rhs, window_strides, padding, (), (), dimension_numbers,
             feature_group_count, batch_group_count, precision_config,
             preferred_element_type, None, "ConvGeneral")


# ---- fft, cholesky, triangular_solve ------------------------------------------------------------
def Fft(operand: XlaOp, fft_type: FftType | str | Any, fft_length: Sequence[int]) -> XlaOp:
    """FFT/IFFT/RFFT/IRFFT over the trailing len(fft_length) dimensions."""
    b = operand.builder
    try:
        ft = fft_type if isinstance(fft_type, FftType) else FftType(
            getattr(fft_type, "name", fft_type))
        attrs = FftAttrs(ft, _ints(fft_length, "fft_length"))
    except ValueError:
        return b.report_error("Fft", f"fft_type {fft_type!r} is not FFT, IFFT, RFFT or IRFFT")
    except _BadArgument as e:
        return b.report_error("Fft", str(e))
    return b.add_op("fft", [operand], attrs, api_name="Fft")


def Cholesky(a: XlaOp, lower: bool = True) -> XlaOp:
    """Cholesky factor of each Hermitian positive-definite matrix in `a`."""
    return a.builder.add_op("cholesky", [a], CholeskyAttrs(bool(lower)), api_name="Cholesky")


def TriangularSolve(a: XlaOp, b: XlaOp, left_side: bool, lower: bool, unit_diagonal: bool,
                    transpose_a: Transpose | str | Any = Transpose.NO_TRANSPOSE) -> XlaOp:
    """Solves op(a) x = b (left_side) or x op(a) = b for triangular `a`."""
    builder = a.builder
    try:
        t = transpose_a if isinstance(transpose_a, Transpose) else Transpose(
            getattr(transpose_a, "name", transpose_a))
    except ValueError:
        return builder.report_error("TriangularSolve", f"transpose_a {transpose_a!r} is not "
                                    "NO_TRANSPOSE, TRANSPOSE or ADJOINT")
    attrs = TriangularSolveAttrs(bool(left_side), bool(lower), bool(unit_diagonal), t)
    return builder.add_op("triangular_solve", [a, b], attrs, api_name="TriangularSolve")
