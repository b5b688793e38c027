"""stablehlo.convolution: spec constraints C1-C28 and an im2col evaluation.

Evaluation dilates and pads the input once, gathers one strided view per kernel window
position (a loop over the small window, never over output elements), and contracts all of
them with the kernel in a single batched matmul per feature/batch group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.ops.attrs import Precision
from xlapy.ops.base import EvalContext, OpDef, Region, check, register
from xlapy.ops.linalg import _common_acc, dot_result_type, finish, precision_ok
from xlapy.types import ElementType, Shape


@dataclass(frozen=True)
class ConvDimensionNumbers:
    """Which operand/result dimensions are batch, feature and spatial (spec I8-I16)."""

    input_batch_dimension: int
    input_feature_dimension: int
    input_spatial_dimensions: tuple[int, ...]
    kernel_input_feature_dimension: int
    kernel_output_feature_dimension: int
    kernel_spatial_dimensions: tuple[int, ...]
    output_batch_dimension: int
    output_feature_dimension: int
    output_spatial_dimensions: tuple[int, ...]

    @staticmethod
    def default(num_spatial: int) -> ConvDimensionNumbers:
        """XLA's default layout: input [b, f, spatial...], kernel [o, i, spatial...]."""
        sp = tuple(range(2, 2 + num_spatial))
        return ConvDimensionNumbers(0, 1, sp, 1, 0, sp, 0, 1, sp)


@dataclass(frozen=True)
class ConvolutionAttrs:
    """Spec attributes; empty sequences mean the defaults (strides 1, no padding/dilation)."""

    dimension_numbers: ConvDimensionNumbers
    window_strides: tuple[int, ...] = ()
    padding: tuple[tuple[int, int], ...] = ()
    lhs_dilation: tuple[int, ...] = ()
    rhs_dilation: tuple[int, ...] = ()
    window_reversal: tuple[bool, ...] = ()
    feature_group_count: int = 1
    batch_group_count: int = 1
    precision_config: tuple[Precision, ...] = ()
    result_element_type: ElementType | None = None


def _filled(values: tuple[Any, ...], n: int, default: Any) -> tuple[Any, ...]:
    return values if values else (default,) * n


def _unique_in_range(dims: Sequence[int], n: int, label: str, what: str) -> None:
    check(len(set(dims)) == len(dims), label, f"{what} {list(dims)} are not unique")
    for d in dims:
        check(0 <= d < n, label, f"{what} {list(dims)}: {d} is out of range for rank {n}")


def num_windows(size: int, window: int, stride: int, low: int, high: int, lhs_dil: int,
                rhs_dil: int) -> int:
    """C26: output size of one spatial dimension."""
    dilated = 0 if size == 0 else (size - 1) * lhs_dil + 1
    padded = low + dilated + high
    dwin = 0 if window == 0 else (window - 1) * rhs_dil + 1
    if padded <= 0 or dwin > padded:
        return 0
    return (padded - dwin) // stride + 1


@register
class Convolution(OpDef):
    """stablehlo.convolution: spec §convolution; XLA Conv, ConvWithGeneralPadding,
    ConvGeneralDilated (HLO convolution)."""

    name = "convolution"
    arity = 2
    attrs = ConvolutionAttrs
    family = "linalg"

    def infer(self, operands: Sequence[Shape], attrs: ConvolutionAttrs,
              regions: Sequence[Region]) -> Shape:
        lhs, rhs = operands
        check(lhs.is_array and rhs.is_array, "convolution_c1", "operands must be tensors")
        n = lhs.rank
        check(n == rhs.rank, "convolution_c1",
              f"lhs rank {lhs.rank} differs from rhs rank {rhs.rank}")
        check(n >= 2, "convolution_c1", f"operand rank {n} is less than 2")
        et = dot_result_type("convolution", lhs.element_type, rhs.element_type,
                             attrs.result_element_type)
        check(attrs.result_element_type is not None or lhs.element_type == rhs.element_type,
              "convolution_c2",
              f"lhs element type {lhs.element_type} differs from rhs {rhs.element_type}")
        s = n - 2
        dn = attrs.dimension_numbers
        strides = _filled(attrs.window_strides, s, 1)
        padding = _filled(attrs.padding, s, (0, 0))
        lhs_dil = _filled(attrs.lhs_dilation, s, 1)
        rhs_dil = _filled(attrs.rhs_dilation, s, 1)
        reversal = _filled(attrs.window_reversal, s, False)
        check(len(strides) == s, "convolution_c3",
              f"window_strides {list(strides)} has {len(strides)} entries; expected {s}")
        check(all(x > 0 for x in strides), "convolution_c4",
              f"window_strides {list(strides)} must be positive")
        check(len(padding) == s and all(len(p) == 2 for p in padding), "convolution_c5",
              f"padding {[list(p) for p in padding]} must be {s} (low, high) pairs")
        check(len(lhs_dil) == s, "convolution_c6",
              f"lhs_dilation {list(lhs_dil)} has {len(lhs_dil)} entries; expected {s}")
        check(all(x > 0 for x in lhs_dil), "convolution_c7",
              f"lhs_dilation {list(lhs_dil)} must be positive")
        check(len(rhs_dil) == s, "convolution_c8",
              f"rhs_dilation {list(rhs_dil)} has {len(rhs_dil)} entries; expected {s}")
        check(all(x > 0 for x in rhs_dil), "convolution_c9",
              f"rhs_dilation {list(rhs_dil)} must be positive")
        check(len(reversal) == s, "convolution_c10",
              f"window_reversal {list(reversal)} has {len(reversal)} entries; expected {s}")
        fgc, bgc = attrs.feature_group_count, attrs.batch_group_count
        check(fgc > 0, "convolution_c22", f"feature_group_count {fgc} must be positive")
        check(bgc > 0, "convolution_c23", f"batch_group_count {bgc} must be positive")
        check(fgc == 1 or bgc == 1, "convolution_c24",
              f"feature_group_count {fgc} and batch_group_count {bgc} are both > 1")
        check(len(dn.input_spatial_dimensions) == s, "convolution_c13",
              f"input_spatial_dimensions {list(dn.input_spatial_dimensions)} has "
              f"{len(dn.input_spatial_dimensions)} entries; expected {s}")
        _unique_in_range([dn.input_batch_dimension, *dn.input_spatial_dimensions,
                          dn.input_feature_dimension], n, "convolution_c14", "input dimensions")
        check(len(dn.kernel_spatial_dimensions) == s, "convolution_c18",
              f"kernel_spatial_dimensions {list(dn.kernel_spatial_dimensions)} has "
              f"{len(dn.kernel_spatial_dimensions)} entries; expected {s}")
        _unique_in_range([*dn.kernel_spatial_dimensions, dn.kernel_input_feature_dimension,
                          dn.kernel_output_feature_dimension], n, "convolution_c19",
                         "kernel dimensions")
        check(len(dn.output_spatial_dimensions) == s, "convolution_c20",
              f"output_spatial_dimensions {list(dn.output_spatial_dimensions)} has "
              f"{len(dn.output_spatial_dimensions)} entries; expected {s}")
        _unique_in_range([dn.output_batch_dimension, *dn.output_spatial_dimensions,
                          dn.output_feature_dimension], n, "convolution_c21",
                         "output dimensions")
        batch = lhs.dimensions[dn.input_batch_dimension]
        feat = lhs.dimensions[dn.input_feature_dimension]
        kin = rhs.dimensions[dn.kernel_input_feature_dimension]
        kout = rhs.dimensions[dn.kernel_output_feature_dimension]
        check(batch % bgc == 0, "convolution_c11",
              f"input batch size {batch} is not a multiple of batch_group_count {bgc}")
        check(feat % fgc == 0, "convolution_c12",
              f"input feature size {feat} is not a multiple of feature_group_count {fgc}")
        check(kin * fgc == feat, "convolution_c15",
              f"kernel input feature size {kin} must be input feature size {feat} / "
              f"feature_group_count {fgc}")
        check(kout % bgc == 0, "convolution_c16",
              f"kernel output feature size {kout} is not a multiple of batch_group_count {bgc}")
        check(kout % fgc == 0, "convolution_c17", f"kernel output feature size {kout} is not "
              f"a multiple of feature_group_count {fgc}")
        precision_ok("convolution_c25", attrs.precision_config)
        dims = [0] * n
        dims[dn.output_batch_dimension] = batch // bgc
        dims[dn.output_feature_dimension] = kout
        for i in range(s):
            dims[dn.output_spatial_dimensions[i]] = num_windows(
                lhs.dimensions[dn.input_spatial_dimensions[i]],
                rhs.dimensions[dn.kernel_spatial_dimensions[i]], strides[i], padding[i][0],
                padding[i][1], lhs_dil[i], rhs_dil[i])
        return Shape.array(et, dims)

    def evaluate(self, operands: Sequence[Any], attrs: ConvolutionAttrs, result: Shape,
                 ctx: EvalContext) -> Any:
        lhs, rhs = operands
        dn = attrs.dimension_numbers
        s = lhs.ndim - 2
        strides = _filled(attrs.window_strides, s, 1)
        padding = _filled(attrs.padding, s, (0, 0))
        lhs_dil = _filled(attrs.lhs_dilation, s, 1)
        rhs_dil = _filled(attrs.rhs_dilation, s, 1)
        reversal = _filled(attrs.window_reversal, s, False)
        acc = _common_acc(lhs, rhs, result.element_type)
        # Canonical layouts: x [N, C, spatial...], k [O, I, spatial...].
        x = np.transpose(lhs, (dn.input_batch_dimension, dn.input_feature_dimension,
                               *dn.input_spatial_dimensions)).astype(acc, copy=False)
        k = np.transpose(rhs, (dn.kernel_output_feature_dimension,
                               dn.kernel_input_feature_dimension,
                               *dn.kernel_spatial_dimensions)).astype(acc, copy=False)
        flip = tuple(2 + i for i in range(s) if reversal[i])
        if flip:
            k = np.flip(k, flip)
        out_sp = [result.dimensions[d] for d in dn.output_spatial_dimensions]
        nb, c = x.shape[:2]
        o = k.shape[0]
        fgc, bgc = attrs.feature_group_count, attrs.batch_group_count
        canon = (nb // bgc, o, *out_sp)
        if 0 in canon or 0 in k.shape[1:] or 0 in x.shape:
            out = np.zeros(canon, acc)
        else:
            x = _dilate_pad(x, lhs_dil, padding)
            patches = _patches(x, k.shape[2:], strides, rhs_dil, out_sp)  # N, C, K, S
            kk = int(np.prod(k.shape[2:]))
            ss = int(np.prod(out_sp))
            with np.errstate(all="ignore"):
                if bgc == 1:
                    g, ci, og = fgc, c // fgc, o // fgc
                    p = patches.reshape(nb, g, ci * kk, ss)
                    w = k.reshape(g, og, ci * kk)
                    out = np.matmul(w, p).reshape(canon)
                else:
                    nbg, ob = nb // bgc, o // bgc
                    p = patches.reshape(bgc, nbg, c * kk, ss).transpose(0, 2, 1, 3)
                    w = k.reshape(bgc, ob, c * kk)
                    out = np.matmul(w, p.reshape(bgc, c * kk, nbg * ss))  # bgc, ob, nbg*ss
                    out = out.reshape(bgc, ob, nbg, ss).transpose(2, 0, 1, 3).reshape(canon)
        perm = [0] * (s + 2)
        for src, dst in enumerate((dn.output_batch_dimension, dn.output_feature_dimension,
                                   *dn.output_spatial_dimensions)):
            perm[dst] = src
        return finish(np.transpose(out, perm), result.element_type)


def _dilate_pad(x: np.ndarray, lhs_dil: Sequence[int], padding: Sequence[tuple[int, int]]
                ) -> np.ndarray:
    """Interior-dilate the spatial dims, then pad (negative padding crops)."""
    s = x.ndim - 2
    if any(d != 1 for d in lhs_dil):
        shape = [*x.shape[:2], *((n - 1) * d + 1 for n, d in zip(x.shape[2:], lhs_dil))]
        dil = np.zeros(shape, x.dtype)
        dil[(slice(None), slice(None), *(slice(None, None, d) for d in lhs_dil))] = x
        x = dil
    pos = [(0, 0), (0, 0), *((max(lo, 0), max(hi, 0)) for lo, hi in padding)]
    if any(p != (0, 0) for p in pos):
        x = np.pad(x, pos)
    crop = [slice(None), slice(None)]
    for i in range(s):
        lo, hi = padding[i]
        n = x.shape[2 + i]
        crop.append(slice(-lo if lo < 0 else 0, n + hi if hi < 0 else n))
    return x[tuple(crop)]


def _patches(x: np.ndarray, window: Sequence[int], strides: Sequence[int],
             rhs_dil: Sequence[int], out_sp: Sequence[int]) -> np.ndarray:
    """[N, C, K, S]: for each window position (K of them), the strided input view."""
    nb, c = x.shape[:2]
    positions = list(np.ndindex(*window))
    out = np.empty((nb, c, len(positions), *out_sp), x.dtype)
    for j, pos in enumerate(positions):
        idx = tuple(slice(p * d, p * d + (n - 1) * st + 1, st)
                    for p, d, n, st in zip(pos, rhs_dil, out_sp, strides))
        out[:, :, j] = x[(slice(None), slice(None), *idx)]
    return out.reshape(nb, c, len(positions), -1)
