"""Every stablehlo.convolution as one JIT loop nest over a channels-last canonical form.

Any convolution - window strides, lhs dilation (conv-transpose, input gradients), rhs
dilation, window reversal, negative padding, feature groups (depthwise), batch groups
(weight gradients), any number of spatial dimensions, integer / pred / half / complex /
mixed element types and preferred result types - is rewritten once per call into:

* xp  [N, P_0 .. P_{s-1}, Cx]: the input in the compute type, lhs-dilated and padded (a
  negative pad crops), channels innermost (what JAX emits: NHWC needs no transpose);
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

from xlapy.backends.cpu import cache, target
from xlapy.backends.cpu.conv import split_rows
from xlapy.backends.cpu.llvm_util import (
    F32,
    F64,
    I64,
    VOID,
    Engine,
    for_range,
    i64,
    intrinsic,
    module_text,
    new_module,
    splat,
)
from xlapy.ir import Instruction
from xlapy.ops.linalg import accumulate_dtype
from xlapy.types import ElementType as ET

#: A padded input buffer up to this size stays with its plan for the next call (its zero
#: border written once, no page faults: 2.5 ms of the reference layer's ~45).
KEEP_BYTES = 64 << 20
_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_int64, ctypes.c_int64)


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


def _blocking(nvec: int, wout: int, regs: int) -> tuple[int, int]:
    """(V vectors, P pixels) per register block: V * P accumulators, V weight vectors and
    a broadcast in `regs` registers. V as wide as possible (up to 4): each extra pass over
    the output features re-reads the input rows (the reference 3x3 32->32 layer: V=4, P=2
    took 42-50 ms of CPU on Zen 3 where V=2, P=6 took 49-56; stride 2: 8 ms against 16)."""
    v = max(d for d in range(1, min(nvec, 4) + 1) if nvec % d == 0)
    return v, max(1, min((regs - 1 - v) // v, wout, 14))


def _llvm_type(dtype: np.dtype) -> ir.Type:
    if dtype == np.float32:
        return F32
    if dtype == np.float64:
        return F64
    return ir.IntType(8 * dtype.itemsize)


def _emit(name: str, t: ir.Type, lanes: int, geo: Geometry, xvec: bool, cx: int, apad: int,
          v: int, p: int, koffs: list[int]) -> ir.Module:
    """`void name(T* xp, T* w, T* out, i64 begin, i64 end)` over output rows [begin, end)
    of b * prod(sp_out[:-1]); see the module docstring for the layouts."""
    mod = new_module(name)
    tp = t.as_pointer()
    fn = ir.Function(mod, ir.FunctionType(VOID, [tp, tp, tp, I64, I64]), name=name)
    xp, w, out, begin, end = fn.args
    for arg in (xp, w, out):
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    vt = ir.VectorType(t, lanes)
    vp = vt.as_pointer()
    is_float = t in (F32, F64)
    zero = splat(vt, 0.0 if is_float else 0)
    align = 8 if t == F64 else 4 if t == F32 else t.width // 8
    ktab = ir.GlobalVariable(mod, ir.ArrayType(I64, len(koffs)), name=f"{name}.koff")
    ktab.global_constant = True
    ktab.linkage = "internal"
    ktab.initializer = ir.Constant(ir.ArrayType(I64, len(koffs)), koffs)

    s = len(geo.sp_out)
    # Element strides of xp.
    xstr = [0] * s
    acc_ = cx
    for d in range(s - 1, -1, -1):
        xstr[d] = acc_
        acc_ *= geo.padded[d]
    xbatch = acc_
    groups = 1 if xvec else geo.g
    ci = 1 if xvec else geo.ci
    kk = len(koffs)
    wo = geo.sp_out[-1]
    st_last = geo.strides[-1] * xstr[-1]
    opix = groups * apad          # out elements per pixel
    nvec = apad // lanes
    gx = (geo.b * xbatch) if geo.by_batch else ci   # xp offset between groups
    fmuladd = f"llvm.fmuladd.v{lanes}{'f64' if t == F64 else 'f32'}"

    def load(ptr: ir.Value, off: ir.Value) -> ir.Value:
        ld = b.load(b.bitcast(b.gep(ptr, [off]), vp))
        ld.align = align
        return ld

    slots = [[b.alloca(vt) for _ in range(v)] for _ in range(p)]  # entry block: SROA'd

    def block(xg: ir.Value, wg: ir.Value, og_: ir.Value, vb: ir.Value, pix0: ir.Value,
              pp: int) -> None:
        accs = slots[:pp]
        for row in accs:
            for slot in row:
                b.store(zero, slot)
        xb = b.add(xg, b.mul(pix0, i64(geo.strides[-1] * cx)))
        wb = b.add(wg, b.mul(vb, i64(lanes)))
        with for_range(b, i64(0), i64(kk), "k") as k:
            koff = b.load(b.gep(ktab, [i64(0), k]))
            xk = b.add(xb, koff)
            wk = b.add(wb, b.mul(k, i64(ci * apad)))
            with for_range(b, i64(0), i64(ci), "c") as c:
                cur = [[b.load(slot) for slot in row] for row in accs]
                wc = b.add(wk, b.mul(c, i64(apad)))
                wv = [load(w, b.add(wc, i64(j * lanes))) for j in range(v)]
                xc = b.add(xk, c)
                for q in range(pp):
                    xq = b.add(xc, i64(q * st_last))
                    if xvec:
                        xb_ = b.add(xq, b.mul(vb, i64(lanes)))
                        xs = [load(xp, b.add(xb_, i64(j * lanes))) for j in range(v)]
                    else:
                        sc = b.load(b.gep(xp, [xq]))
                        bc = b.shuffle_vector(
                            b.insert_element(ir.Constant(vt, ir.Undefined), sc,
                                             ir.Constant(ir.IntType(32), 0)),
                            ir.Constant(vt, ir.Undefined),
                            ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))
                        xs = [bc] * v
                    for j in range(v):
                        if is_float:
                            cur[q][j] = intrinsic(b, fmuladd, vt, [xs[j], wv[j], cur[q][j]])
                        else:
                            cur[q][j] = b.add(cur[q][j], b.mul(xs[j], wv[j]))
                for q in range(pp):
                    for j in range(v):
                        b.store(cur[q][j], accs[q][j])
        ob = b.add(b.add(og_, b.mul(pix0, i64(opix))), b.mul(vb, i64(lanes)))
        for q in range(pp):
            for j in range(v):
                st = b.store(b.load(accs[q][j]),
                             b.bitcast(b.gep(out, [b.add(ob, i64(q * opix + j * lanes))]), vp))
                st.align = align

    rows_inner = int(np.prod(geo.sp_out[:-1], dtype=np.int64))
    with for_range(b, begin, end, "row") as row:
        bi = b.sdiv(row, i64(rows_inner))
        rem = b.srem(row, i64(rows_inner))
        xrow = b.mul(bi, i64(xbatch))
        for d in range(s - 2, -1, -1):
            sd = b.srem(rem, i64(geo.sp_out[d]))
            rem = b.sdiv(rem, i64(geo.sp_out[d]))
            xrow = b.add(xrow, b.mul(sd, i64(geo.strides[d] * xstr[d])))
        orow = b.mul(row, i64(wo * opix))
        with for_range(b, i64(0), i64(groups), "g") as g:
            xg = b.add(xrow, b.mul(g, i64(gx)))
            wg = b.mul(g, i64(kk * ci * apad))
            og_ = b.add(orow, b.mul(g, i64(apad)))
            with for_range(b, i64(0), i64(nvec // v), "vb") as vbi:
                vb = b.mul(vbi, i64(v))
                full = wo // p
                if full:
                    with for_range(b, i64(0), i64(full), "pb") as pb:
                        block(xg, wg, og_, vb, b.mul(pb, i64(p)), p)
                if wo % p:
                    with for_range(b, i64(full * p), i64(wo), "pt") as pt:
                        block(xg, wg, og_, vb, pt, 1)
    b.ret_void()
    return mod


def conv_route(instr: Instruction) -> str:
    """How the cpu backend computes a convolution (its explain() label "library conv-..."):
    "nchw-direct" - conv.py's channels-first kernel, for an f32/f64 2-D unit-stride
    ungrouped window up to 7x7 with input and output features ahead of the spatial
    dimensions (no transposes to channels-last: on Zen 3 a 32x32x64x64 NCHW 3x3 layer took
    57 ms of CPU there, 72 here; 1x1: 37 against 44); "direct" - this module's loop nest, for
    every other form (complex ones as real convolutions of twice the channels)."""
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


def general_plan(instr: Instruction, threads: int = 1
                 ) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    """A function (lhs, rhs, out) computing any convolution natively on `threads` threads.
    A complex one is a real convolution of twice the channels: channel 2c + part of the
    input and output is the real (part 0) or imaginary part of channel c - the complex
    arrays' own memory - and the kernel maps (re, im) to (re, im) through
    [[wr, wi], [-wi, wr]]."""
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
    sg = len(geo.sp_out)
    xvec = not geo.by_batch and geo.g > 1 and geo.ci == 1 and geo.og == 1
    axis = geo.g if xvec else geo.og
    lanes = _lanes(kd, axis)
    nvec = -(-axis // lanes)
    apad = nvec * lanes
    cx = apad if xvec else geo.c
    regs = 32 if target.current().vector_bits == 512 else 16
    v, p = _blocking(nvec, geo.sp_out[-1], regs)
    xstr = [0] * sg
    acc_ = cx
    for d in range(sg - 1, -1, -1):
        xstr[d] = acc_
        acc_ *= geo.padded[d]
    koffs = [sum(k * geo.rhs_dil[d] * xstr[d] for d, k in enumerate(pos))
             for pos in np.ndindex(*geo.ks)]
    t = _llvm_type(kd)
    name = "conv_general"
    text = module_text(_emit(name, t, lanes, geo, xvec, cx, apad, v, p, koffs))
    key = cache.key(text, "light")
    obj = cache.get(key)
    # Explicit vectors, constant trip counts: SROA and CFG cleanup are all it needs (O3
    # compiled the reference layer in 105 ms instead of 44, and its code ran 20% slower).
    eng = Engine(text, obj=obj, light=True, exports=[name])
    if obj is None:
        cache.put(key, eng.object)
    fn = _FN(eng.address(name))

    # Input: [N, spatial..., C] in the compute type, into the interior of xp.
    xperm = [dn.input_batch_dimension, *dn.input_spatial_dimensions, dn.input_feature_dimension]
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
    in_place = (apad == axis and comp == result_dtype and not is_pred
                and operm == list(range(s + 2)))
    rows = geo.b * int(np.prod(geo.sp_out[:-1], dtype=np.int64))
    macs = geo.b * int(np.prod(geo.sp_out)) * geo.g * apad * geo.ci * kk
    # Already channels-last in the compute type with nothing to pad or dilate (a VALID or
    # 1x1 NHWC convolution): the kernel reads the operand itself.
    as_is = (xperm == list(range(s + 2)) and cx == geo.c and comp == instr.operands[0].shape.dtype
             and all(p == (0, 0) for p in geo.pad) and all(d == 1 for d in geo.lhs_dil))
    spare = threading.Lock()
    buf: list[np.ndarray] = []

    def run(x: np.ndarray, wt: np.ndarray, out: np.ndarray, eng: Any = eng) -> None:
        mine = spare.acquire(blocking=False)  # a concurrent call gets a buffer of its own
        try:
            if as_is and x.flags.c_contiguous:
                xp = x
            elif mine and buf:
                xp = buf[0]
            else:
                xp = np.zeros(xshape, kd)  # zero once: the same positions are written
                if mine and xp.nbytes <= KEEP_BYTES:
                    buf.append(xp)
            if xp is not x:
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
            res = out if in_place and out.flags.c_contiguous else np.empty(oshape, kd)
            split_rows(fn, (xp.ctypes.data, wk.ctypes.data, res.ctypes.data), rows, macs,
                       threads)
            if res is not out:
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

    return run


__all__ = ["conv_route", "general_plan", "compute_dtype", "geometry", "Geometry"]
