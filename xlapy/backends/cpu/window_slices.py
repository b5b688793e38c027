"""Pooling windows over a narrow last dimension as a fold of strided slices.

reduce_window over NHWC images of a few channels (a 2 x 2 / 2 max pool of f32[32, 224, 224,
3]) ran the native kernel (window_emit.py), whose innermost loop is the 3 channels: scalar,
the region inlined, 7.2 ms against XLA's 3.9 (a 3 x 3 / 2 SAME pool 13.8 ms, XLA 4.8).
Written as the interpreter computes it (ops/reduction_window.py: the init, then each window
position in row-major order, a strided slice of the operand padded with the init, folded in
by the reducer) it is one element-wise kernel over the output, vectorized across pixels and
channels, with the same bits for any reducer (the same ops in the same order): 1.8 ms.
Wider channels keep the native kernel (64 channels: 0.9x XLA), as do windows along the
last dimension (NCHW pooling: its columns fold as vectors there, 0.2x XLA).
"""

from __future__ import annotations

import itertools
import math

from xlapy.backends.cpu.reduce_emit import reducer_op
from xlapy.backends.cpu.window_emit import window_pads, window_vec
from xlapy.ir import Computation, Instruction
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass, replace_each

#: A last dimension of fewer bytes than this (one AVX-512 vector) is narrow.
NARROW_BYTES = 64
#: Most window positions folded (3 x 3): each is a slice the kernel reads.
MAX_POSITIONS = 9


def sliceable(instr: Instruction) -> bool:
    """A single-operand reduce_window of a binary reducer over a narrow last dimension it
    does not window (window, stride 1, no padding there), no base dilation, non-negative
    padding, 2..MAX_POSITIONS window positions, a non-empty result."""
    if instr.opcode != "reduce_window" or len(instr.operands) != 2 or \
            not instr.shape.is_array or reducer_op(instr) is None:
        return False
    x = instr.operands[0]
    a = instr.attrs
    r = x.shape.rank
    if r < 2 or not instr.shape.num_elements:
        return False
    pad = window_pads(a.padding, r)
    st = window_vec(a.window_strides, r)
    return (all(d == 1 for d in window_vec(a.base_dilations, r))
            and all(lo >= 0 and hi >= 0 for lo, hi in pad)
            and a.window_dimensions[-1] == 1 and st[-1] == 1 and pad[-1] == (0, 0)
            and x.shape.dimensions[-1] * max(x.shape.element_type.bits // 8, 1) < NARROW_BYTES
            and 2 <= math.prod(a.window_dimensions) <= MAX_POSITIONS)


def fold(comp: Computation, instr: Instruction) -> Instruction:
    """`instr` (sliceable) as init op slice_0 op slice_1 ... over the window positions in
    row-major order."""
    e = Emitter(comp)
    x, init = instr.operands
    op = reducer_op(instr)
    assert op is not None
    a = instr.attrs
    r = x.shape.rank
    st, wd, pad = window_vec(a.window_strides, r), window_vec(a.window_dilations, r), \
        window_pads(a.padding, r)
    if any(lo or hi for lo, hi in pad):
        x = e.op("pad", x, init, edge_padding_low=tuple(p[0] for p in pad),
                 edge_padding_high=tuple(p[1] for p in pad), interior_padding=(0,) * r)
    out = tuple(instr.shape.dimensions)
    acc = e.bcast(init, out, [])
    for offset in itertools.product(*(range(w) for w in a.window_dimensions)):
        start = tuple(o * d for o, d in zip(offset, wd))
        limit = tuple(s + (n - 1) * t + 1 for s, n, t in zip(start, out, st))
        acc = e.op(op, acc, e.slice(x, start_indices=start, limit_indices=limit,
                                    strides=tuple(st)))
    return acc


class WindowSlices(ComputationPass):
    """reduce_window over a narrow last dimension as a fold of strided slices (module
    docstring)."""

    name = "window-slices"

    def run_on_computation(self, comp: Computation) -> bool:
        return replace_each(comp, [i for i in comp.instructions if sliceable(i)],
                            lambda i: fold(comp, i))


__all__ = ["WindowSlices", "fold", "sliceable"]
