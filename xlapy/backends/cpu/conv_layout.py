"""Convolutions of the general loop nest (conv_general.py) made channels-last: a
channels-first input transposed to [N, spatial.., C] and the result computed as [N,
spatial.., O] then transposed back, in kernels of their own (XLA's ConvCanonicalization).

The loop nest reads a channels-last operand in place and writes a channels-last result in
place; any other layout it copied per call with numpy, `xp[...] = x.transpose(..)` and
`out[...] = r.transpose(..)`, strided copies that read a channel's plane a float at a time:
a stride-2 NCW convolution (16 x 64 x 2048, 5 taps) spent 4 of its 16 ms in them and ran
at 2x XLA's time. The transposes are now JIT kernels (8 x 8 register blocks,
block_permute.py) that also fuse with what produces the input or reads the result (a bias
and activation in NCHW). The values do not change: the nest sums each output in the same
order whatever the layout.

Kept as they are: convolutions of the channels-first direct kernel (conv_general.conv_route
"nchw-direct": unit-stride NCHW windows, 1-D NCW filters in segments), batch-grouped ones
(weight gradients: the nest copies their input whatever its layout) and ones without
spatial dimensions.
"""

from __future__ import annotations

import dataclasses

from xlapy.backends.cpu.conv_general import conv_route
from xlapy.ir import Computation, Instruction, make_instruction
from xlapy.ops.linalg_conv import ConvDimensionNumbers
from xlapy.passes.hlo_builder import Emitter
from xlapy.passes.pass_base import ComputationPass, replace_each


def _orders(i: Instruction) -> tuple[list[int], list[int]]:
    """The input's and the result's dimensions in [batch, spatial.., feature] order."""
    dn = i.attrs.dimension_numbers
    return ([dn.input_batch_dimension, *dn.input_spatial_dimensions,
             dn.input_feature_dimension],
            [dn.output_batch_dimension, *dn.output_spatial_dimensions,
             dn.output_feature_dimension])


def eligible(i: Instruction) -> bool:
    """A convolution of the general loop nest whose input or result is not channels-last."""
    if i.opcode != "convolution" or not i.shape.is_array:
        return False
    a = i.attrs
    s = len(a.dimension_numbers.input_spatial_dimensions)
    if s == 0 or a.batch_group_count != 1:
        return False
    xo, oo = _orders(i)
    canonical = list(range(s + 2))
    return (xo != canonical or oo != canonical) and conv_route(i) == "direct"


class ChannelsLastConvolutions(ComputationPass):
    """Transposes the general loop nest's convolutions to channels-last (module
    docstring)."""

    name = "channels-last-convolutions"

    def run_on_computation(self, comp: Computation) -> bool:
        e = Emitter(comp)
        inputs: dict[tuple[int, tuple[int, ...]], Instruction] = {}  # (one per operand)

        def rewrite(c: Instruction) -> Instruction:
            x, w = c.operands
            xo, oo = _orders(c)
            s = len(xo) - 2
            if xo != sorted(xo):
                key = (id(x), tuple(xo))
                if key not in inputs:
                    inputs[key] = e.transpose(x, permutation=tuple(xo))
                x = inputs[key]
            dn = c.attrs.dimension_numbers
            sp = tuple(range(1, s + 1))
            canonical = ConvDimensionNumbers(
                0, s + 1, sp, dn.kernel_input_feature_dimension,
                dn.kernel_output_feature_dimension, dn.kernel_spatial_dimensions, 0, s + 1, sp)
            new = comp.add(make_instruction(
                "convolution", [x, w],
                dataclasses.replace(c.attrs, dimension_numbers=canonical), (), c.name))
            if oo == sorted(oo):
                return new
            back = [0] * (s + 2)
            for k, d in enumerate(oo):
                back[d] = k
            return e.transpose(new, permutation=tuple(back))

        return replace_each(comp, [i for i in comp.instructions if eligible(i)], rewrite)


__all__ = ["ChannelsLastConvolutions", "eligible"]
