"""1-D channels-first convolutions (NCW: jnp.convolve, jnp.correlate, a filter bank) through
conv.py's direct kernel, as 2-D ones of a window 1 x K.

The general loop nest (conv_general.py) vectorizes along the output features: a filter of
one input and one output feature ran in scalar code, one multiply-add at a time
(jnp.correlate of 256K samples with 255 taps: 14 ms, XLA 13.5; jnp.convolve with 31 taps over
1M samples 9.8 ms). Here the output row is cut into R segments of S outputs, each
segment's input window (S + K - 1 samples, zero padding included) a row of an [N, C, R,
S + K - 1] copy, so the direct kernel's vectors run along the samples and its rows (the
segments) split over the threads. Each output is the same sum, in (c, k) order, as the
kernel computes for any row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from xlapy.backends.cpu import conv
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: The longest window taken (its taps run in blocks of conv.TAP_BLOCK, unrolled).
MAX_TAPS = 256
#: From this many output features the loop nest's vectors along them win over short
#: windows: NCW 16 x 64 x 4096 -> 64 features, 3 taps: 15.7 ms there, 18.2 here (XLA 11.2);
#: 5 taps and more were faster here (4 x 128 x 2048 -> 128, 5 taps: 6.6 -> 6.1; 8 x 32 x
#: 8192 -> 32, 9 taps: 7.7 -> 7.0; 32 x 8 x 1024 -> 16, 15 taps: 1.04 -> 0.83).
WIDE = 8
#: ... and the shortest window taken for them.
WIDE_MIN_TAPS = 5
#: Segments a thread takes at least (they may cost differently at the row's ends).
SEGMENTS_PER_THREAD = 8
#: The longest segment (the copy of a segment's window stays in L1 while its outputs run).
MAX_SEGMENT = 2048


def takes(instr: Instruction) -> bool:
    """An f32/f64 convolution over one spatial dimension, input and output features ahead of
    it, of unit strides and dilations, one group, no reversal, padding >= 0, at most
    MAX_TAPS taps (at least WIDE_MIN_TAPS into WIDE or more output features)."""
    a = instr.attrs
    lhs, rhs = (o.shape for o in instr.operands)
    et = instr.shape.element_type
    dn = a.dimension_numbers
    if lhs.rank != 3:
        return False
    taps = rhs.dimensions[dn.kernel_spatial_dimensions[0]]
    wide = rhs.dimensions[dn.kernel_output_feature_dimension] >= WIDE
    return (lhs.element_type == rhs.element_type == et and et in (ET.F32, ET.F64)
            and (WIDE_MIN_TAPS if wide else 1) <= taps <= MAX_TAPS
            and dn.input_feature_dimension < dn.input_spatial_dimensions[0]
            and dn.output_feature_dimension < dn.output_spatial_dimensions[0]
            and a.feature_group_count == a.batch_group_count == 1
            and all(v == 1 for v in (*a.window_strides, *a.lhs_dilation, *a.rhs_dilation))
            and not any(a.window_reversal)
            and all(lo >= 0 and hi >= 0 for lo, hi in a.padding))


def segment(wout: int, lanes: int, threads: int) -> int:
    """S: whole register blocks (4 vectors; one vector's multiple for a short row), about
    SEGMENTS_PER_THREAD a thread, at most MAX_SEGMENT."""
    block = 4 * lanes
    want = -(-wout // (SEGMENTS_PER_THREAD * max(1, threads)))
    if want <= block:
        return block if wout > 3 * lanes else -(-wout // lanes) * lanes
    return min(MAX_SEGMENT, -(-want // block) * block)


def plan(instr: Instruction, threads: int = 1
         ) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None:
    """A function (lhs, rhs, out) computing the 1-D convolution, or None (`takes`)."""
    if not takes(instr):
        return None
    a = instr.attrs
    dn = a.dimension_numbers
    lhs, rhs = (o.shape for o in instr.operands)
    n, c = lhs.dimensions[dn.input_batch_dimension], lhs.dimensions[dn.input_feature_dimension]
    win = lhs.dimensions[dn.input_spatial_dimensions[0]]
    o = rhs.dimensions[dn.kernel_output_feature_dimension]
    k = rhs.dimensions[dn.kernel_spatial_dimensions[0]]
    plo, phi = a.padding[0] if a.padding else (0, 0)
    wout = win + plo + phi - k + 1
    if min(n, c, o, k, wout) <= 0:
        return None
    lanes, accs = conv.lanes_accs(instr.shape.element_type)
    s = segment(wout, lanes, threads)
    rows = -(-wout // s)
    j, v, chunks = conv.blocking(o, s, lanes, accs)
    assert chunks * v * lanes == s
    fn, eng = conv.kernel(instr.shape.element_type, lanes, c, o, rows, rows, s + k - 1, s, 1, k,
                          j, v, chunks)
    dtype = instr.shape.dtype
    xperm, wperm, operm = conv.layout_perms(dn)
    macs = n * rows * s * o * c * k
    size = np.dtype(dtype).itemsize

    def run(x: np.ndarray, w: np.ndarray, out: np.ndarray, eng: Any = eng) -> None:
        flat = np.zeros((n, c, rows * s + k - 1), dtype)
        flat[:, :, plo:plo + win] = x.transpose(xperm)
        xp = np.ascontiguousarray(np.lib.stride_tricks.as_strided(
            flat, (n, c, rows, s + k - 1), (*flat.strides[:2], s * size, size)))
        wt = np.ascontiguousarray(w.transpose(wperm))
        res = np.empty((n, o, rows, s), dtype)
        conv.split_rows(fn, (xp.ctypes.data, wt.ctypes.data, res.ctypes.data), n * rows, macs,
                        threads)
        out[...] = res.reshape(n, o, rows * s)[..., :wout].transpose(operm)

    return run


__all__ = ["MAX_TAPS", "WIDE", "WIDE_MIN_TAPS", "plan", "segment", "takes"]
