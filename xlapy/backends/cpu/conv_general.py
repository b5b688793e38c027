"""Every stablehlo.convolution as one JIT loop nest over a channels-last canonical form.

Any convolution - window strides, lhs dilation (conv-transpose, input gradients), rhs
dilation, window reversal, negative padding, feature groups (depthwise), batch groups
(weight gradients), any number of spatial dimensions, integer / pred / half / complex /
mixed element types and preferred result types - is rewritten once per call into:

* xp  [N, P_0 .. P_{s-1}, Cx]: the input in the compute type, lhs-dilated and padded (a
  negative pad crops), channels innermost (what JAX emits: NHWC needs no transpose). An
  operand already channels-last in the compute type is read as it is: unpadded, or padded
  row by row inside the kernel (conv_kernel.py), never copied whole;
* w   [G, K, Ci, A] (or [K, A] depthwise): the kernel, reversal applied, output features of
  a group innermost, padded to whole vectors;
* out [B, S_0 .. S_{s-1}, G, A]: output features innermost (written in place when that is
  the result's layout and type).

The kernel keeps a block of V vectors of output features times P output pixels of the last
spatial dimension in registers (V * P + V + 1 <= the target's vector registers: 16 ymm on
AVX2, 32 zmm on AVX-512) and sums the window positions and input channels into it: each
weight vector is loaded once per P pixels, each input value broadcast once per V vectors.
Depthwise convolutions (one input and one output channel per group) put the groups in the
vector lanes instead. Floats compute in f32 (bf16/f16, rounded once at the end, as XLA's
CPU backend) or f64 with fmuladd; integers compute in the result's width, wrapping (the
same bits as the interpreter's 64-bit sums truncated once); complex ones are real
convolutions of twice the channels (general_plan). Output rows split over the
thread pool; each output element is summed by one thread in one fixed order, so the bits do
not depend on the thread count.
"""

from __future__ import annotations

import ctypes
import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import parallel, target
from xlapy.backends.cpu.conv import SPLIT_MACS
from xlapy.backends.cpu.conv_compile import Engines, build
from xlapy.backends.cpu.conv_kernel import Nest, emit
from xlapy.backends.cpu.llvm_util import F32, F64
from xlapy.backends.cpu.threads import JOB_WORDS, fn_address, strided_table
from xlapy.ir import Instruction
from xlapy.ops.linalg import accumulate_dtype
from xlapy.types import ElementType as ET

#: A padded input buffer up to this size stays with its plan for the next call (its zero
#: border written once, no page faults: 2.5 ms of the reference layer's ~45).
KEEP_BYTES = 64 << 20
_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)


def compute_dtype(instr: Instruction) -> np.dtype:
    """The dtype the loop nest sums in: the interpreter's accumulator for floats (f32 for
    bf16/f16), the result's own width for integer results (wrapping sums give the bits of
    the interpreter's 64-bit sums truncated), 64-bit for pred results (a sum's != 0)."""
    lhs, rhs = (o.shape.element_type for o in instr.operands)
    et = instr.shape.element_type
    ts = [lhs, rhs] + ([et] if et.is_float or et.is_complex else [])
    acc = np.result_type(*(accumulate_dtype(t) for t in ts))
    if acc.kind in "fc":
        return acc
    if et.is_pred:
        return np.dtype(np.int64)
    return np.dtype(f"i{et.dtype.itemsize}")


@dataclass(frozen=True)
class Geometry:
    """A convolution in canonical terms (see the module docstring)."""

    n: int                      # input batch
    b: int                      # output batch (n // batch_group_count)
    c: int                      # input channels
    g: int                      # groups (feature or batch)
    ci: int                     # input channels per group
    og: int                     # output features per group
    by_batch: bool              # groups split the batch (batch_group_count > 1)
    sp_in: tuple[int, ...]      # input spatial sizes
    ks: tuple[int, ...]         # window sizes
    sp_out: tuple[int, ...]     # output spatial sizes
    padded: tuple[int, ...]     # dilated + padded input sizes
    pad: tuple[tuple[int, int], ...]
    lhs_dil: tuple[int, ...]
    rhs_dil: tuple[int, ...]
    strides: tuple[int, ...]
    reversal: tuple[bool, ...]


def geometry(instr: Instruction) -> Geometry:
    a = instr.attrs
    dn = a.dimension_numbers
    lhs, rhs = (o.shape for o in instr.operands)
    s = lhs.rank - 2

    def filled(v: tuple[Any, ...], d: Any) -> tuple[Any, ...]:
        return tuple(v) if v else (d,) * s

    pad = filled(a.padding, (0, 0))
    ld, rd = filled(a.lhs_dilation, 1), filled(a.rhs_dilation, 1)
    sp_in = tuple(lhs.dimensions[d] for d in dn.input_spatial_dimensions)
    padded = tuple(0 if x == 0 else (x - 1) * d + 1 + lo + hi
                   for x, d, (lo, hi) in zip(sp_in, ld, pad))
    n = lhs.dimensions[dn.input_batch_dimension]
    o = rhs.dimensions[dn.kernel_output_feature_dimension]
    fgc, bgc = a.feature_group_count, a.batch_group_count
    g = max(fgc, bgc)
    return Geometry(
        n=n, b=n // bgc, c=lhs.dimensions[dn.input_feature_dimension], g=g,
        ci=rhs.dimensions[dn.kernel_input_feature_dimension], og=o // g, by_batch=bgc > 1,
        sp_in=sp_in, ks=tuple(rhs.dimensions[d] for d in dn.kernel_spatial_dimensions),
        sp_out=tuple(instr.shape.dimensions[d] for d in dn.output_spatial_dimensions),
        padded=padded, pad=pad, lhs_dil=ld, rhs_dil=rd, strides=filled(a.window_strides, 1),
        reversal=filled(a.window_reversal, False))


def _lanes(dtype: np.dtype, axis: int) -> int:
    """Vector lanes for an axis of `axis` elements: the target's full width, or the
    smallest power of two holding a shorter axis (less padding)."""
    full = max(1, target.current().vector_bits // (8 * dtype.itemsize))
    if axis >= full:
        return full
    lanes = 1
    while lanes < axis:
        lanes *= 2
    return lanes


#: Weight bytes (one group's) above which a thread's rows run inside the loop over vector
#: blocks, not outside it (Nest.vb_outer): a block's weights, 1/(features / V) of them, are
#: then read from L2 by every row instead of from L3 by each.
VB_OUTER_WEIGHTS = 1 << 20
#: Chunks per thread at most of such a nest (not CHUNKS_PER_THREAD: the reuse is per chunk).
VB_OUTER_CHUNKS = 2
#: Weight bytes (one group's: taps x input x output features) above which the register
#: blocks keep 2 vectors of output features, not 4 (see _blocking).
WIDE_BLOCK_WEIGHTS = 64 << 10


def _blocking(nvec: int, wout: int, regs: int, weights: int = 0) -> tuple[int, int]:
    """(V vectors, P pixels) per register block: V * P accumulators, V weight vectors and
    a broadcast in `regs` registers; P balanced over the row (64 pixels: 5 blocks of 13, the
    last one over pixels 51-63, whose first pixel is computed twice: conv_rows_text.py).
    V as wide as possible (up to 4 with 32 registers, 2 with 16): each extra pass over the
    output features re-reads the input rows (the reference 3x3 32->32 layer: V=4, P=2 took
    42-50 ms of CPU on Zen 3 where V=2, P=6 took 49-56; stride 2: 8 ms against 16), but with
    16 registers V=4 leaves P=2, 8 accumulators, too few to hide the FMA latency: V=2, P=6
    ran 8% faster on the Sapphire-Rapids machine's AVX2 (110 GFLOP/s a core against 101,
    its peak ~118). More pixels a block load each weight vector for more multiply-adds:
    the CNN's layers ran 14.1 ms with P=8 (which divides 64), 13.3 with P=13 (host).
    But a block streams all its output features' weights once per P pixels, and once the
    weights are past L1 (`weights` over WIDE_BLOCK_WEIGHTS bytes) that stream, not the
    input rows, sets the pace: V=2 lets P be 14, a 7- or 14-pixel row one block instead of
    2-3 (2 threads against XLA: 8x7x7 3x3 512->512 4.96 -> 2.37, 16x14x14 256->256 2.51
    -> 1.54, 16x56x56 64->64 0.50 -> 0.46, 1x1 128->256 stride 2 0.61 -> 0.45; with
    16-37 KB of weights V=4 stayed ahead: 1x1 64->64 0.20 vs 0.23, the 7x7 3->64 stem 0.53
    vs 0.58)."""
    vmax = 4 if regs >= 32 and weights <= WIDE_BLOCK_WEIGHTS else 2
    v = max(d for d in range(1, min(nvec, vmax) + 1) if nvec % d == 0)
    pmax = max(1, min((regs - 1 - v) // v, wout, 14))
    blocks = -(-wout // pmax)
    return v, -(-wout // blocks)


def _llvm_type(dtype: np.dtype) -> ir.Type:
    if dtype == np.float32:
        return F32
    if dtype == np.float64:
        return F64
    return ir.IntType(8 * dtype.itemsize)


def conv_route(instr: Instruction) -> str:
    """How the cpu backend computes a convolution (its explain() label "library conv-..."):
    "nchw-direct" - conv.py's channels-first kernel, for an f32/f64 2-D unit-stride
    ungrouped window up to 7x7 with input and output features ahead of the spatial
    dimensions (no transposes to channels-last: on Zen 3 a 32x32x64x64 NCHW 3x3 layer took
    57 ms of CPU there, 72 here; 1x1: 37 against 44); "direct" - this module's loop nest, for
    every other form (complex ones as real convolutions of twice the channels); 1-D ones of
    features ahead of the samples go to the direct kernel too, in segments (conv_1d.py)."""
    from xlapy.backends.cpu import conv_1d

    if conv_1d.takes(instr):
        return "nchw-direct"
    a = instr.attrs
    dn = a.dimension_numbers
    lhs, rhs = (o.shape for o in instr.operands)
    et = instr.shape.element_type
    if (lhs.rank == 4 and lhs.element_type == rhs.element_type == et
            and et in (ET.F32, ET.F64)
            and prod(rhs.dimensions[d] for d in dn.kernel_spatial_dimensions) <= 49
            and dn.input_feature_dimension < min(dn.input_spatial_dimensions)
            and dn.output_feature_dimension < min(dn.output_spatial_dimensions)
            and a.feature_group_count == a.batch_group_count == 1
            and all(v == 1 for v in (*a.window_strides, *a.lhs_dilation, *a.rhs_dilation))
            and not any(a.window_reversal)
            and all(lo >= 0 and hi >= 0 for lo, hi in a.padding)):
        return "nchw-direct"
    return "direct"


def epilogue_ok(instr: Instruction) -> bool:
    """Whether general_plan can apply an element-wise epilogue (conv_epilogue.py) to this
    convolution's registers: a float result in its own compute type, written in place
    (channels-last, the output features whole vectors)."""
    comp = compute_dtype(instr)
    if comp != instr.shape.dtype or comp not in (np.float32, np.float64):
        return False
    dn = instr.attrs.dimension_numbers
    s = instr.shape.rank - 2
    order = [dn.output_batch_dimension, *dn.output_spatial_dimensions,
             dn.output_feature_dimension]
    if order != list(range(s + 2)) or instr.shape.num_elements == 0:
        return False
    geo = geometry(instr)
    if geo.ci == 0 or 0 in geo.ks or 0 in geo.sp_in or geo.n == 0:
        return False
    xvec = not geo.by_batch and geo.g > 1 and geo.ci == 1 and geo.og == 1
    axis = geo.g if xvec else geo.og
    return axis % _lanes(comp, axis) == 0


@dataclass(frozen=True)
class Planned:
    """A real channels-last convolution's loop nest and weight packing (conv_chain.py)."""

    nest: Nest
    dtype: np.dtype
    pack: Callable[[np.ndarray], np.ndarray]


def channels_last(instr: Instruction, rows: bool) -> Planned | None:
    """The nest of a real convolution whose operand is channels-last in its compute type,
    read in place (`rows`: always through the ring of padded rows), written in place; None
    for any other."""
    if not epilogue_ok(instr):
        return None
    kd = compute_dtype(instr)
    dn = instr.attrs.dimension_numbers
    geo = geometry(instr)
    s = len(geo.sp_out)
    xperm = [dn.input_batch_dimension, *dn.input_spatial_dimensions, dn.input_feature_dimension]
    if s == 0 or geo.by_batch or xperm != list(range(s + 2)) or \
            instr.operands[0].shape.dtype != kd or any(d != 1 for d in geo.lhs_dil):
        return None
    xvec = geo.g > 1 and geo.ci == 1 and geo.og == 1
    axis = geo.g if xvec else geo.og
    lanes = _lanes(kd, axis)
    apad = axis
    if xvec and apad != geo.c:
        return None
    regs = 32 if target.current().vector_bits == 512 else 16
    v, p = _blocking(apad // lanes, geo.sp_out[-1], regs,
                     prod(geo.ks) * geo.ci * apad * kd.itemsize)
    as_is = all(pd == (0, 0) for pd in geo.pad)
    nest = Nest(b=geo.b, g=1 if xvec else geo.g, ci=1 if xvec else geo.ci, cx=geo.c,
                gx=geo.ci, apad=apad, lanes=lanes, v=v, p=p, xvec=xvec, sp_out=geo.sp_out,
                ks=geo.ks, strides=geo.strides, rhs_dil=geo.rhs_dil, padded=geo.padded,
                sp_in=geo.sp_in, pad=geo.pad, rows=rows or not as_is)
    wperm = [*dn.kernel_spatial_dimensions, dn.kernel_input_feature_dimension,
             dn.kernel_output_feature_dimension]
    flip = tuple(d for d in range(s) if geo.reversal[d])
    kk = prod(geo.ks)

    def pack(wt: np.ndarray) -> np.ndarray:
        kw = wt.transpose(wperm)
        if flip:
            kw = np.flip(kw, flip)
        kw = kw.reshape(kk, geo.ci, geo.g, geo.og)
        if xvec:
            return np.ascontiguousarray(kw[:, 0, :, 0], kd)
        return pack_blocks(kw.transpose(2, 0, 1, 3).astype(kd, copy=False), nest)

    return Planned(nest, kd, pack)


def pack_blocks(wk: np.ndarray, nest: Nest) -> np.ndarray:
    """[group][tap][channel][apad] weights as the register blocks read them: [group][block
    of V vectors][tap][channel][V * lanes] (Nest.wstride), so a block streams its weights in
    address order. Strided by the padded features (2 KB at 512) the stream ran at L3's pace
    without the prefetchers following it: 2 threads against XLA, 16x14x14 3x3 256->256
    1.55 -> 1.00, 8x7x7 512->512 2.93 -> 1.71."""
    g, kk, ci, apad = wk.shape
    vw = nest.v * nest.lanes
    return np.ascontiguousarray(wk.reshape(g, kk, ci, apad // vw, vw).transpose(0, 3, 1, 2, 4))


def general_plan(instr: Instruction, threads: int = 1, epilogue: Any = None
                 ) -> Callable[..., None]:
    """A function (lhs, rhs, out) computing any convolution natively on `threads` threads.
    A complex one is a real convolution of twice the channels: channel 2c + part of the
    input and output is the real (part 0) or imaginary part of channel c - the complex
    arrays' own memory - and the kernel maps (re, im) to (re, im) through
    [[wr, wi], [-wi, wr]]."""
    if epilogue is not None and epilogue.chain is not None:
        from xlapy.backends.cpu.conv_chain import chain_plan

        return chain_plan(epilogue, threads)
    comp = compute_dtype(instr)
    a = instr.attrs
    dn = a.dimension_numbers
    geo = geometry(instr)
    s = len(geo.sp_out)
    result_dtype = instr.shape.dtype
    is_pred = instr.shape.element_type.is_pred
    operm = [0] * (s + 2)
    for src, dst in enumerate((dn.output_batch_dimension, *dn.output_spatial_dimensions,
                               dn.output_feature_dimension)):
        operm[dst] = src
    empty_sum = geo.ci == 0 or 0 in geo.ks or 0 in geo.sp_in or geo.n == 0
    if instr.shape.num_elements == 0 or empty_sum:
        def zeros(x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
            out[...] = np.zeros((), result_dtype)
        return zeros
    if s == 0:  # no spatial dimension: one of size 1
        geo = Geometry(geo.n, geo.b, geo.c, geo.g, geo.ci, geo.og, geo.by_batch, (1,), (1,),
                       (1,), (1,), ((0, 0),), (1,), (1,), (1,), (False,))
    cplx = comp.kind == "c"
    kd = np.dtype(np.finfo(comp).dtype) if cplx else comp  # what the kernel sums in
    c0, ci0, og0 = geo.c, geo.ci, geo.og
    if cplx:
        geo = dataclasses.replace(geo, c=2 * c0, ci=2 * ci0, og=2 * og0)
    xvec = not geo.by_batch and geo.g > 1 and geo.ci == 1 and geo.og == 1
    axis = geo.g if xvec else geo.og
    lanes = _lanes(kd, axis)
    nvec = -(-axis // lanes)
    apad = nvec * lanes
    cx = apad if xvec else geo.c
    regs = 32 if target.current().vector_bits == 512 else 16
    weights = prod(geo.ks) * geo.ci * apad * kd.itemsize  # one group's, as the blocks read
    v, p = _blocking(nvec, geo.sp_out[-1], regs, weights)
    xperm = [dn.input_batch_dimension, *dn.input_spatial_dimensions, dn.input_feature_dimension]
    in_dtype = instr.operands[0].shape.dtype
    channels_last = (xperm == list(range(s + 2)) and cx == geo.c and comp == in_dtype
                     and all(d == 1 for d in geo.lhs_dil))
    # Already channels-last in the compute type with nothing to pad or dilate (a VALID or
    # 1x1 NHWC convolution): the kernel reads the operand itself; with padding (but no
    # batch groups) it pads rows itself (conv_kernel.py); else a padded copy per call.
    as_is = channels_last and all(p == (0, 0) for p in geo.pad)
    in_rows = channels_last and not as_is and not geo.by_batch
    nest = Nest(b=geo.b, g=1 if xvec else geo.g, ci=1 if xvec else geo.ci, cx=cx,
                gx=(geo.b * prod(geo.padded) * cx) if geo.by_batch else geo.ci, apad=apad,
                lanes=lanes, v=v, p=p, xvec=xvec, sp_out=geo.sp_out, ks=geo.ks,
                strides=geo.strides, rhs_dil=geo.rhs_dil, padded=geo.padded, sp_in=geo.sp_in,
                pad=geo.pad, rows=in_rows,
                vb_outer=not xvec and nvec > v and (epilogue is None or epilogue.pool is None)
                and weights > VB_OUTER_WEIGHTS)
    in_place = (apad == axis and comp == result_dtype and not is_pred
                and operm == list(range(s + 2)))
    if epilogue is not None and (not in_place or cplx):
        raise ValueError("conv_general: an epilogue needs a result written in place")
    t = _llvm_type(kd)
    name = "conv_general"
    pool = epilogue.pool if epilogue is not None else None
    # Explicit vectors, constant trip counts: SROA and CFG cleanup are all it needs (O3
    # compiled the reference layer in 105 ms instead of 44, and its code ran 20% slower);
    # the code around the register blocks at -O0 (conv_compile.py).
    addr, eng = build(name, emit(name, t, nest, epilogue.emit if epilogue is not None
                                 else None, pool.spec() if pool is not None else None),
                      threads)
    fn = _FN(addr)

    # Input: [N, spatial..., C] in the compute type, into the interior of xp.
    src: list[slice] = [slice(None)]
    dst: list[slice] = [slice(None)]
    for d in range(len(geo.sp_in)):
        lo = geo.pad[d][0]
        step = geo.lhs_dil[d]
        j0 = -(lo // step) if lo < 0 else 0   # the first input index a negative pad keeps
        j1 = geo.sp_in[d]
        while j1 > j0 and lo + (j1 - 1) * step >= geo.padded[d]:
            j1 -= 1
        src.append(slice(j0, j1))
        start = lo + j0 * step
        dst.append(slice(start, start + max(0, j1 - j0 - 1) * step + 1, step) if j1 > j0
                   else slice(0, 0))
    src.append(slice(None))
    dst.append(slice(0, c0))
    xshape = (geo.n, *geo.padded, cx)
    wperm = [*dn.kernel_spatial_dimensions, dn.kernel_input_feature_dimension,
             dn.kernel_output_feature_dimension]
    flip = tuple(d for d in range(s) if geo.reversal[d])
    kk = int(np.prod(geo.ks))
    oshape = (geo.b, *geo.sp_out, apad) if xvec else (geo.b, *geo.sp_out, geo.g, apad)
    rows = geo.b * (pool.rw.shape.dimensions[1] if pool is not None else
                    int(np.prod(geo.sp_out[:-1], dtype=np.int64)))
    macs = geo.b * int(np.prod(geo.sp_out)) * geo.g * apad * geo.ci * kk
    parts = chunks(rows, macs, threads)
    if nest.vb_outer:  # rows a chunk, for its vector blocks' weights to be reused across
        parts = min(parts, threads * VB_OUTER_CHUNKS)
    scratch_bytes = nest.scratch_bytes(kd.itemsize) if in_rows else 0
    spare = threading.Lock()
    buf: list[np.ndarray] = []

    def run(x: np.ndarray, wt: np.ndarray, out: np.ndarray, *extra: np.ndarray,
            eng: Engines = eng) -> None:
        eng.ready()
        mine = spare.acquire(blocking=False)  # a concurrent call gets a buffer of its own
        try:
            if as_is or in_rows:
                xp = np.ascontiguousarray(x)
            elif mine and buf:
                xp = buf[0]
            else:
                xp = np.zeros(xshape, kd)  # zero once: the same positions are written
                if mine and xp.nbytes <= KEEP_BYTES:
                    buf.append(xp)
            if not (as_is or in_rows):
                xv = x.transpose(xperm)
                if s == 0:
                    xv = xv[:, None, :]
                (xp.view(comp) if cplx else xp)[tuple(dst)] = xv[tuple(src)]
            kw = wt.transpose(wperm)
            if flip:
                kw = np.flip(kw, flip)
            kw = kw.reshape(kk, ci0, geo.g, og0)
            if cplx:
                kr = np.empty((kk, geo.ci, geo.g, geo.og), kd)
                kr[:, 0::2, :, 0::2] = kr[:, 1::2, :, 1::2] = kw.real
                kr[:, 0::2, :, 1::2] = kw.imag
                kr[:, 1::2, :, 0::2] = -kw.imag
                kw = kr
            if xvec:
                wk = np.zeros((kk, apad), kd)
                wk[:, :geo.g] = kw[:, 0, :, 0]
            else:
                wk = np.zeros((geo.g, kk, geo.ci, apad), kd)
                wk[..., :geo.og] = kw.transpose(2, 0, 1, 3)
                wk = pack_blocks(wk, nest)
            if epilogue is not None:  # (its result's layout: only in place)
                res = out if out.flags.c_contiguous else np.empty(out.shape, kd)
            else:
                res = out if in_place and out.flags.c_contiguous else np.empty(oshape, kd)
            keep: list[Any] = []
            eptr = epilogue.pointers(extra, keep) if epilogue is not None \
                else 0
            scratch = scratch_for(mine, parts) if in_rows else None
            split_parts(fn, (xp.ctypes.data, wk.ctypes.data, res.ctypes.data), rows, parts,
                        scratch, eptr, geo.b, threads)
            if res is not out and epilogue is not None:
                out[...] = res
            elif res is not out:
                r = res[..., :geo.g] if xvec else res[..., :geo.og].reshape(
                    geo.b, *geo.sp_out, geo.g * geo.og)
                if cplx:
                    r = np.ascontiguousarray(r).view(comp)
                if s == 0:
                    r = r[:, 0]
                r = r.transpose(operm)
                out[...] = (r != 0) if is_pred else r
        finally:
            if mine:
                spare.release()

    scratches: list[np.ndarray] = []

    def scratch_for(mine: bool, n: int) -> np.ndarray:
        """[n, scratch_bytes] bytes: kept with the plan (its zero row and tags are
        rewritten by every call), a fresh one for a concurrent call."""
        if mine and scratches:
            return scratches[0]
        arr = np.empty((n, scratch_bytes + 64), np.uint8)
        if mine:
            scratches.append(arr)
        return arr

    run.kept = (buf, scratches)  # type: ignore[attr-defined]  # what a call keeps (tests)

    return run


#: Chunks per thread of a split convolution: threads take the next chunk left, so a core
#: another process holds delays its share, not the whole call (2 halves waited for it).
#: The CNN benchmark (32 images, 2 threads): one image per chunk.
CHUNKS_PER_THREAD = 16


def chunks(rows: int, macs: int, threads: int) -> int:
    """How many chunks [0, rows) splits into (1: run on the calling thread alone)."""
    if threads < 2 or macs < SPLIT_MACS or rows < 2:
        return 1
    return min(rows, threads * CHUNKS_PER_THREAD, 64)


def split_parts(fn: Any, args: tuple[int, int, int], rows: int, parts: int,
                scratch: np.ndarray | None, eptr: int, batch: int = 1,
                threads: int = 1) -> None:
    """fn(*args, begin, end, scratch row k, eptr) over [0, rows) in `parts` contiguous
    chunks, at image boundaries when there are as many images (`batch`: no ring row is
    then computed twice), chunk k with scratch row k, `threads` threads taking the next
    chunk left. Each output row is summed whole by one chunk: the split changes no bits."""
    ks = np.arange(parts, dtype=np.int64)
    if scratch is None:
        scr = np.zeros(parts, np.int64)
    else:  # (row k of scratch, 64-byte aligned)
        scr = int(scratch.ctypes.data) + ks * scratch.strides[0]
        scr += -scr % 64
    if parts < 2:
        fn(*args, 0, rows, int(scr[0]), eptr)
        return
    if batch >= parts and rows % batch == 0:
        cuts = np.append(batch * ks // parts * (rows // batch), rows)
    else:
        cuts = rows * np.arange(parts + 1, dtype=np.int64) // parts
    # The job table built whole (a Python tuple a chunk, and the ctypes address of each
    # scratch row, cost ~3 us a chunk: a 32-chunk layer of ~200 us ran 100 us longer)
    table = strided_table(fn_address(fn), [*args, 0, 0, 0, eptr], [0] * 7, parts)
    jobs = table[2:].reshape(parts, JOB_WORDS)
    jobs[:, 4], jobs[:, 5], jobs[:, 6] = cuts[:-1], cuts[1:], scr
    parallel.pool(threads).share_table(table, threads)


__all__ = ["conv_route", "general_plan", "compute_dtype", "geometry", "Geometry"]
