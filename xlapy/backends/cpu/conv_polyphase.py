"""Transposed convolutions as s^d ordinary ones (polyphase): no multiplications by holes.

A convolution with lhs dilation s (a stride-s conv_transpose, the input gradient of a
stride-s convolution) reads an input with s - 1 zeros between neighbours: a direct loop over
the dilated input multiplies (1 - 1/s^d) zeros (3/4 for 2-D stride 2). Output position
o = s t + p (phase p) only ever meets input values through the taps k = k0 + s m with
k0 = (lo - p) mod s, at input t + c + m (c = (p + k0 - lo) / s): an ordinary stride-1
convolution of the undilated input with the kernel slice w[k0::s], padded by -c. Each phase
is one such convolution over T = ceil(O / s) outputs; the phases interleave back into the
result (concatenate and reshape, one copy kernel) and the edge cut to O.

Values: the taps a phase skips met only zeros (holes and padding), whose products are +-0
for finite weights and add nothing to a sum that starts at +0 (the kernels' accumulators),
so the used taps are summed in the same order as before where one loop nest computes both
(conv_general's: bit for bit the direct convolution's values; a 1x1 NCHW phase goes to
conv.py, which sums channels first, rounding differently). A non-finite weight times a zero is
NaN: each phase adds the sum of `0 * w` over the taps it skips (+0, or NaN exactly where the
direct convolution had one), so infinities and NaNs in the kernel give what the interpreter
gives; two small boolean reduces find those NaNs for every phase. The phases' nests share
one register block (conv_block_text.py reads the window at run time), so their cold compile
is one hot module and a small one per phase: JAX's stride-2 3x3 conv_transpose compiled
85-93 ms, then 56-69 (Zen 4); 74-87 -> 58-63 on Zen 3 with the boolean reduces. Kept as
they are: window strides, rhs dilation, window reversal or batch groups (not what
transposed convolutions lower to), complex types, more than MAX_PHASES phases.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from math import prod

import numpy as np

from xlapy.ir import Computation, Instruction, Module
from xlapy.ops.linalg_conv import ConvDimensionNumbers
from xlapy.passes.hlo_builder import Emitter, scalar_reducer
from xlapy.passes.pass_base import ComputationPass, replace_each
from xlapy.types import ElementType, Shape

#: Most phases (prod of the lhs dilations) rewritten.
MAX_PHASES = 16


def eligible(c: Instruction) -> bool:
    if c.opcode != "convolution":
        return False
    a = c.attrs
    n = len(a.dimension_numbers.input_spatial_dimensions)
    ld = a.lhs_dilation or (1,) * n
    x, w = c.operands
    if all(s == 1 for s in ld) or prod(ld) > MAX_PHASES or a.batch_group_count != 1:
        return False
    if any(s != 1 for s in (*a.window_strides, *a.rhs_dilation)) or any(a.window_reversal):
        return False
    types = (x.shape.element_type, w.shape.element_type, c.shape.element_type)
    if any(t.is_complex for t in types):
        return False
    return all(d > 0 for sh in (x.shape, w.shape, c.shape) for d in sh.dimensions)


def rewrite(module: Module, comp: Computation, c: Instruction) -> Instruction:
    """The phases of convolution `c` (eligible) interleaved: its value."""
    e = Emitter(comp)
    a = c.attrs
    dn = a.dimension_numbers
    x, w = c.operands
    n = len(dn.input_spatial_dimensions)
    ld = a.lhs_dilation
    pads = a.padding or ((0, 0),) * n
    H = [x.shape.dimensions[d] for d in dn.input_spatial_dimensions]
    K = [w.shape.dimensions[d] for d in dn.kernel_spatial_dimensions]
    O = [c.shape.dimensions[d] for d in dn.output_spatial_dimensions]
    T = [-(-o // s) for o, s in zip(O, ld)]
    out_dims = list(c.shape.dimensions)
    for d, t in zip(dn.output_spatial_dimensions, T):
        out_dims[d] = t
    et = c.shape.element_type
    every = list(itertools.product(*(range(s) for s in ld)))
    starts = [[(lo - q) % s for (lo, _), q, s in zip(pads, p, ld)] for p in every]
    skipped = _skipped(module, e, w, dn, starts, ld, et, out_dims) \
        if et.is_float and w.shape.element_type.is_float else None  # (else 0 * w is 0)
    phases: dict[tuple[int, ...], Instruction] = {}
    for j, (p, k0) in enumerate(zip(every, starts)):
        m = [len(range(k, kk, s)) for k, kk, s in zip(k0, K, ld)]
        if all(m):
            start, limit, stride = [0] * w.shape.rank, list(w.shape.dimensions), \
                [1] * w.shape.rank
            for d, k, s in zip(dn.kernel_spatial_dimensions, k0, ld):
                start[d], stride[d] = k, s
            sub = e.slice(w, start_indices=tuple(start), limit_indices=tuple(limit),
                          strides=tuple(stride))
            lows = [-((q + k - lo) // s) for (lo, _), q, k, s in zip(pads, p, k0, ld)]
            padding = tuple((lo, t - 1 + mm - h - lo) for lo, t, mm, h in zip(lows, T, m, H))
            out = comp.add(Instruction(
                "convolution", [x, sub], Shape.array(et, out_dims),
                dataclasses.replace(a, padding=padding, lhs_dilation=()), (), c.name))
        else:  # no tap meets an input value
            out = e.splat(0, Shape.array(et, out_dims))
        if skipped is not None:
            out = e.add(out, skipped(j))
        phases[p] = out
    return _interleave(e, phases, list(dn.output_spatial_dimensions), list(ld), O)


def _skipped(module: Module, e: Emitter, w: Instruction, dn: ConvDimensionNumbers,
             starts: list[list[int]], ld: tuple[int, ...], et: ElementType,
             out_dims: list[int]) -> Callable[[int], Instruction]:
    """Phase j's sum of 0 * w over the taps it skips (starts[j]: its first taps), per output
    feature (+0, or NaN where a skipped weight is not finite), broadcast to the phase's
    output, for every phase at once (a reduce per phase was two kernels to compile each,
    ~3 ms of LLVM apiece)."""
    ksp = dn.kernel_spatial_dimensions
    shape = w.shape.dimensions
    K = [shape[d] for d in ksp]
    skips = np.ones([len(starts), *K], bool)
    for j, k0 in enumerate(starts):
        used = np.ones(K, bool)
        for i, (k, s) in enumerate(zip(k0, ld)):
            keep = np.zeros(K[i], bool)
            keep[k::s] = True
            used &= keep.reshape([-1 if d == i else 1 for d in range(len(K))])
        skips[j] = ~used
    # A tap's 0 * w summed over the input features is NaN where one of its weights is not
    # finite, else +0: each tap's `or` of non-finite weights, then each phase's over the
    # taps it skips, as booleans (one add-reduce of [phases, taps..., in, out] under a mask
    # was a 611-line kernel, ~23 ms of LLVM, for JAX's stride-2 3x3 conv_transpose).
    pred = ElementType.PRED
    any_ = scalar_reducer(module, "or", pred, "polyphase_or")
    inf = dn.kernel_input_feature_dimension
    rest = [d for d in range(len(shape)) if d != inf]
    bad = e.reduce(e.op("not", e.is_finite(w)), e.const(False, pred), [inf], any_)
    every = (len(starts), *(shape[d] for d in rest))
    taps = [1 + rest.index(d) for d in ksp]
    mask = e.bcast(e.const(skips, pred), every, [0, *taps])
    hit = e.reduce(e.op("and", mask, e.bcast(bad, every, range(1, len(every)))),
                   e.const(False, pred), taps, any_)
    flat = Shape.array(et, hit.shape.dimensions)
    total = e.select(hit, e.splat(float("nan"), flat), e.splat(0, flat))
    of = dn.kernel_output_feature_dimension
    feats = shape[of]

    def phase(j: int) -> Instruction:
        row = e.slice(total, start_indices=(j, 0), limit_indices=(j + 1, feats),
                      strides=(1, 1))
        return e.bcast(e.reshape(row, shape=(feats,)), out_dims, [dn.output_feature_dimension])

    return phase


def _interleave(e: Emitter, phases: dict[tuple[int, ...], Instruction], dims: list[int],
                ld: list[int], O: list[int]) -> Instruction:
    """out[.., t s + p, ..] = phases[p][.., t, ..], one spatial dimension at a time (the
    first of `dims` outermost), cut to O."""
    if not dims:
        return phases[()]
    d, s = dims[0], ld[0]
    parts = []
    for q in range(s):
        inner = {p[1:]: v for p, v in phases.items() if p[0] == q}
        v = _interleave(e, inner, dims[1:], ld[1:], O[1:])
        sh = list(v.shape.dimensions)
        parts.append(e.reshape(v, shape=tuple(sh[:d + 1] + [1] + sh[d + 1:])))
    cat = e.concatenate(*parts, dimension=d + 1) if s > 1 else parts[0]
    sh = list(cat.shape.dimensions)
    merged = e.reshape(cat, shape=tuple(sh[:d] + [sh[d] * s] + sh[d + 2:]))
    if merged.shape.dimensions[d] == O[0]:
        return merged
    limit = list(merged.shape.dimensions)
    limit[d] = O[0]
    return e.slice(merged, start_indices=(0,) * len(limit), limit_indices=tuple(limit),
                   strides=(1,) * len(limit))


class PolyphaseConvolution(ComputationPass):
    """Rewrites lhs-dilated convolutions as their phases (module docstring)."""

    name = "polyphase-convolution"

    def run_on_computation(self, comp: Computation) -> bool:
        module = self.module
        assert module is not None
        return replace_each(comp, [i for i in comp.instructions if eligible(i)],
                            lambda c: rewrite(module, comp, c))


__all__ = ["PolyphaseConvolution", "eligible", "rewrite", "MAX_PHASES"]
