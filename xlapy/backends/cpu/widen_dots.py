"""bf16/f16 dots and convolutions as f32 ones between converts, so the conversions fuse
into kernels.

A dot_general with bf16 or f16 operands computes in f32 (library.dot_accumulator, the
interpreter's `accumulate_dtype`): its operands widen exactly to f32 and its result rounds
once to the result type. The library thunk did both conversions itself, with NumPy
(ml_dtypes) loops on one thread: for a bf16 attention they took longer than the softmax
between the dots. Written as `convert(dot_general(convert(a), convert(b)))` in f32 the
program computes the same bits on both backends (bf16/f16 <-> f32 converts never flush:
ops/elementwise_convert.py), and the converts become part of the kernels around the dot:
the producer of `a` stores f32 directly, the consumer of the result rounds as it reads.
XLA's CPU compiler does the same (its optimized HLO upcasts such dots to f32).

Dots with a `dot_algorithm` (which fixes the operand types) and dots whose accumulation type
is not f32 (an f64 or complex result) are left alone, and so are the bf16 x bf16 dots the
AMX-BF16 tiles or AVX512-BF16's vdpbf16ps compute where the target has them
(gemm_bf16.takes): those read their bf16 operands as they are and round their f32 sums once
into the bf16 result themselves, so no converts are needed around them.

A bf16/f16 convolution sums in f32 as well (conv_general.compute_dtype): its loop nest read
a padded f32 copy NumPy converted per call and wrote an f32 result NumPy rounded (f16
NHWC 8x32x32x32, 3x3: 2.5 ms on either thread count, the f32 layer 0.94). Widened, it runs
the f32 nest in place with its threads, and the same sums round once as before. One whose
widened form would take conv.py's channels-first kernel (`conv_route` "nchw-direct", which
sums in another order) keeps its narrow types.
"""

from __future__ import annotations

import contextlib
import dataclasses

from xlapy.backends.cpu import gemm_bf16
from xlapy.backends.cpu import target as cpu_target
from xlapy.backends.cpu.conv_general import conv_route
from xlapy.backends.cpu.elementwise import F8
from xlapy.backends.cpu.target import CpuTarget
from xlapy.ir import Computation, Instruction
from xlapy.ops.elementwise import SATURATING
from xlapy.ops.elementwise_convert import ConvertAttrs
from xlapy.passes.pass_base import ComputationPass
from xlapy.types import ElementType as ET
from xlapy.types import Shape

#: Operand/result types widened to f32 (their f32 conversions are exact / round once).
NARROW = frozenset({ET.BF16, ET.F16})
#: The 8-, 6- and 4-bit floats: operands widened too (exact in f32, normal or zero: not
#: f8e8m0fnu, whose 2^-127 is an f32 denormal), and results where the convert rounds as
#: the dot's own rounding does (not the saturating types, whose NaN the convert makes -0).
#: The library thunk widened them with ml_dtypes' casts, one element at a time: a 256 x 512
#: @ 512 x 512 product of f8e4m3fn took 3.4 ms (XLA 1.4). (The kernels' own set of them.)
TINY = F8
TINY_RESULTS = TINY - SATURATING


def widens(instr: Instruction) -> bool:
    """Whether `instr` is a dot_general or convolution this pass rewrites (on the current
    target)."""
    if instr.opcode == "convolution":
        if _narrow(instr):
            return conv_route(_wide(instr, None)) == "direct"
        return False
    if instr.opcode != "dot_general" or instr.attrs.algorithm is not None:
        return False
    if gemm_bf16.takes(instr):
        return False
    return _narrow(instr)


def _narrow(instr: Instruction) -> bool:
    """Operands of NARROW, TINY or f32 types, one of them narrower, and a result of NARROW,
    TINY_RESULTS or f32."""
    types = [o.shape.element_type for o in instr.operands]
    et = instr.shape.element_type
    if not any(t in NARROW or t in TINY for t in types):
        return False
    return all(t in NARROW or t in TINY or t == ET.F32 for t in types) and (
        et in NARROW or et in TINY_RESULTS or et == ET.F32)


def _convert(comp: Computation, x: Instruction, et: ET, like: Instruction) -> Instruction:
    new = comp.add(Instruction("convert", [x], Shape.array(et, x.shape.dimensions),
                               ConvertAttrs(et), (), f"{like.name}.f32"))
    new.meta.update(like.meta)
    return new


def _wide(instr: Instruction, comp: Computation | None) -> Instruction:
    """`instr` on f32 operands with an f32 result: added to `comp` with its operands'
    converts, or (no `comp`) detached, on stand-in operands (to ask its route)."""
    def wide(o: Instruction) -> Instruction:
        if o.shape.element_type == ET.F32:
            return o
        if comp is not None:
            return _convert(comp, o, ET.F32, instr)
        return Instruction("parameter", [], Shape.array(ET.F32, o.shape.dimensions))

    attrs = dataclasses.replace(instr.attrs, result_element_type=None)
    new = Instruction(instr.opcode, [wide(o) for o in instr.operands],
                      Shape.array(ET.F32, instr.shape.dimensions), attrs, (), instr.name)
    if comp is None:
        return new
    new = comp.add(new)
    new.meta.update(instr.meta)
    return new


class WidenNarrowDots(ComputationPass):
    """Rewrites every bf16/f16 dot_general and convolution (`widens`) into f32 between
    converts."""

    name = "widen-narrow-dots"

    def __init__(self, target: CpuTarget | None = None) -> None:
        super().__init__()
        #: The target compiled for (None: the current one): where AMX-BF16 takes a dot.
        self.target = target

    def run_on_computation(self, comp: Computation) -> bool:
        use = cpu_target.use(self.target) if self.target is not None else \
            contextlib.nullcontext()
        with use:
            wide = [i for i in comp.instructions if widens(i)]
        changed = False
        for instr in wide:
            out = dot = _wide(instr, comp)
            if instr.shape.element_type != ET.F32:
                out = comp.add(Instruction("convert", [dot], instr.shape,
                                           ConvertAttrs(instr.shape.element_type), (),
                                           f"{instr.name}.round"))
                out.meta.update(instr.meta)
            comp.replace_instruction(instr, out)
            changed = True
        return changed


__all__ = ["NARROW", "TINY", "TINY_RESULTS", "WidenNarrowDots", "widens"]
