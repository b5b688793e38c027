"""Direct 2-D channels-first convolution: one JIT-compiled LLVM function per shape.

A shift-GEMM streamed a [O, N * padded plane] accumulator through memory once per kernel
position: 9 passes for a 3x3 window, memory-bound on small channel counts. Here the output
is computed in registers: for each output row (batch n, output row h), a block of J output
features times V vectors of the row (J * V <= 24 zmm accumulators on AVX-512, 10 on AVX2 and
SSE's 16 registers) sums C * KH * KW terms, each an unaligned vector load of the zero-padded
input row (shared by the J features) times a broadcast weight (shared by the V vectors), so
the loop is FMA-bound rather than load-bound. The window positions are unrolled (a row longer
than UNROLLED_TAPS in blocks of TAP_BLOCK), the input features are a loop. Rows split over
the thread pool. library.conv_plan uses it for 1x1 windows in NCHW layouts (no transposes);
conv_general.py computes every other convolution.

Supported: f32/f64, two spatial dimensions, unit strides and dilations, no window reversal,
one feature group, non-negative padding, windows up to 7x7. Accumulation is in the element
type, in (c, kh, kw) order per output.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import cache, parallel, target
from xlapy.backends.cpu.llvm_util import (
    F32,
    F64,
    I64,
    VOID,
    for_range,
    i64,
    intrinsic,
    module_text,
    new_module,
)
from xlapy.backends.cpu.threads import fn_address
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: Multiply-adds below which a convolution is not split over threads.
SPLIT_MACS = 1 << 20
#: Window rows up to this long are unrolled whole; longer ones (conv_1d.py's filters of up
#: to 256 taps) run a loop over blocks of TAP_BLOCK positions, in the same order: the 255
#: taps of jnp.correlate unrolled were 6,700 IR lines, 0.7 s of code generation.
UNROLLED_TAPS = 16
TAP_BLOCK = 8
_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_int64, ctypes.c_int64)


def blocking(o: int, wout: int, lanes: int, accs: int = 24) -> tuple[int, int, int]:
    """(J output features, V vectors per row chunk, row chunks) for the register block of
    at most `accs` accumulators."""
    v = min(4, -(-wout // lanes))
    chunks = -(-wout // (v * lanes))
    jmax = max(1, accs // v)
    j = max(d for d in range(1, min(o, jmax) + 1) if o % d == 0)
    return j, v, chunks


def _emit(name: str, t: ir.Type, lanes: int, c: int, o: int, hout: int, hp: int, wp: int,
          wvec: int, kh: int, kw: int, j: int, v: int, chunks: int) -> ir.Module:
    """`void name(T* xp, T* w, T* out, i64 begin, i64 end)` over rows [begin, end) of
    n * hout: xp is [N, C, hp, wp] zero-padded, w is [O, C, kh, kw], out is [N, O, hout, wvec]."""
    mod = new_module(name)
    tp = t.as_pointer()
    fn = ir.Function(mod, ir.FunctionType(VOID, [tp, tp, tp, I64, I64]), name=name)
    xp, w, out, begin, end = fn.args
    for a in (xp, w, out):
        a.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    vt = ir.VectorType(t, lanes)
    vp = vt.as_pointer()
    zero = ir.Constant(vt, [ir.Constant(t, 0.0)] * lanes)
    undef = ir.Constant(vt, ir.Undefined)
    splat_mask = ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes)
    acc = [[b.alloca(vt, name=f"acc{jj}_{vv}") for vv in range(v)] for jj in range(j)]
    ckk = c * kh * kw
    # fmuladd: one FMA where the target has it, a multiply and an add where not (x86-64-v2;
    # llvm.fma there is a libm call per lane).
    fma = f"llvm.fmuladd.v{lanes}{'f64' if t == F64 else 'f32'}"
    with for_range(b, begin, end, "row") as row:
        n = b.sdiv(row, i64(hout))
        h = b.srem(row, i64(hout))
        with for_range(b, i64(0), i64(o // j), "ob") as ob:
            with for_range(b, i64(0), i64(chunks), "wc") as wc:
                w0 = b.mul(wc, i64(v * lanes))
                for slots in acc:
                    for slot in slots:
                        b.store(zero, slot)
                with for_range(b, i64(0), i64(c), "c") as ci:
                    # xp[n, ci, h, w0] and w[ob * j, ci, 0, 0]
                    xrow = b.add(b.mul(b.add(b.mul(n, i64(c)), ci), i64(hp)), h)
                    xbase = b.add(b.mul(xrow, i64(wp)), w0)
                    wbase = b.add(b.mul(b.mul(ob, i64(j)), i64(ckk)), b.mul(ci, i64(kh * kw)))
                    with for_range(b, i64(0), i64(kh), "dy") as dy:
                        xoff = b.add(xbase, b.mul(dy, i64(wp)))
                        woff = b.add(wbase, b.mul(dy, i64(kw)))

                        def taps(first: ir.Value | None, count: int) -> None:
                            """Window positions first .. first + count - 1 of row dy (None:
                            from 0)."""
                            cur = [[b.load(slot) for slot in slots] for slots in acc]
                            at = (xoff, woff) if first is None else \
                                (b.add(xoff, first), b.add(woff, first))
                            for u in range(count):
                                off = b.add(at[0], i64(u))
                                xs = []
                                for vv in range(v):
                                    p = b.gep(xp, [b.add(off, i64(vv * lanes))])
                                    ld = b.load(b.bitcast(p, vp))
                                    ld.align = 8 if t == F64 else 4
                                    xs.append(ld)
                                for jj in range(j):
                                    s = b.load(b.gep(w, [b.add(at[1], i64(jj * ckk + u))]))
                                    sv = b.shuffle_vector(b.insert_element(
                                        undef, s, ir.Constant(ir.IntType(32), 0)), undef,
                                        splat_mask)
                                    for vv in range(v):
                                        cur[jj][vv] = intrinsic(b, fma, vt,
                                                                [sv, xs[vv], cur[jj][vv]])
                            for jj in range(j):
                                for vv in range(v):
                                    b.store(cur[jj][vv], acc[jj][vv])

                        if kw <= UNROLLED_TAPS:
                            taps(None, kw)
                        else:  # a long row (conv_1d.py's filters): a loop of TAP_BLOCK
                            with for_range(b, i64(0), i64(kw // TAP_BLOCK), "dx") as q:
                                taps(b.mul(q, i64(TAP_BLOCK)), TAP_BLOCK)
                            if kw % TAP_BLOCK:
                                taps(i64(kw - kw % TAP_BLOCK), kw % TAP_BLOCK)
                for jj in range(j):
                    orow = b.add(b.mul(b.add(b.mul(n, i64(o)), b.add(b.mul(ob, i64(j)),
                                                                       i64(jj))), i64(hout)), h)
                    obase = b.add(b.mul(orow, i64(wvec)), w0)
                    for vv in range(v):
                        p = b.gep(out, [b.add(obase, i64(vv * lanes))])
                        st = b.store(b.load(acc[jj][vv]), b.bitcast(p, vp))
                        st.align = 8 if t == F64 else 4
    b.ret_void()
    return mod


def direct_plan(instr: Instruction, threads: int = 1
                ) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None:
    """A function (lhs, rhs, out) computing the convolution directly on `threads` threads
    (each output row is computed alone, so its bits do not depend on the split), or None."""
    a = instr.attrs
    lhs, rhs = (op.shape for op in instr.operands)
    et = instr.shape.element_type
    if not (lhs.element_type == rhs.element_type == et and et in (ET.F32, ET.F64)):
        return None
    if lhs.rank == 3:
        from xlapy.backends.cpu import conv_1d

        return conv_1d.plan(instr, threads)
    if lhs.rank != 4:
        return None
    dn = a.dimension_numbers
    if (a.feature_group_count != 1 or a.batch_group_count != 1
            or any(s != 1 for s in a.window_strides) or any(s != 1 for s in a.lhs_dilation)
            or any(s != 1 for s in a.rhs_dilation) or any(a.window_reversal)
            or any(lo < 0 or hi < 0 for lo, hi in a.padding)):
        return None
    pad = list(a.padding) or [(0, 0), (0, 0)]
    n = lhs.dimensions[dn.input_batch_dimension]
    c = lhs.dimensions[dn.input_feature_dimension]
    hin, win = (lhs.dimensions[d] for d in dn.input_spatial_dimensions)
    o = rhs.dimensions[dn.kernel_output_feature_dimension]
    kh, kw = (rhs.dimensions[d] for d in dn.kernel_spatial_dimensions)
    hout = hin + pad[0][0] + pad[0][1] - kh + 1
    wout = win + pad[1][0] + pad[1][1] - kw + 1
    if min(n, c, o, kh, kw, hout, wout) <= 0 or kh * kw > 49:
        return None
    lanes, accs = lanes_accs(et)
    j, v, chunks = blocking(o, wout, lanes, accs)
    wvec = chunks * v * lanes
    hp = hout + kh - 1
    wp = wvec + kw - 1
    fn, eng = kernel(et, lanes, c, o, hout, hp, wp, wvec, kh, kw, j, v, chunks)
    dtype = instr.shape.dtype
    xperm, wperm, operm = layout_perms(dn)
    direct_out = operm == [0, 1, 2, 3] and wvec == wout
    (hlo, _), (wlo, _) = pad
    rows = n * hout
    macs = n * hout * wvec * o * c * kh * kw

    def run(x: np.ndarray, w: np.ndarray, out: np.ndarray, eng: Any = eng) -> None:
        xp = np.zeros((n, c, hp, wp), dtype)
        xp[:, :, hlo:hlo + hin, wlo:wlo + win] = x.transpose(xperm)
        wt = np.ascontiguousarray(w.transpose(wperm))
        res = out if direct_out and out.flags.c_contiguous else np.empty(
            (n, o, hout, wvec), dtype)
        args = (xp.ctypes.data, wt.ctypes.data, res.ctypes.data)
        split_rows(fn, args, rows, macs, threads)
        if res is not out:
            out[...] = res[..., :wout].transpose(operm)

    return run


def lanes_accs(et: ET) -> tuple[int, int]:
    """(vector lanes, accumulator registers) of the target for element type et: 16 f32 lanes
    and 24 accumulators on AVX-512, 8 and 10 on AVX2, 4 and 10 on SSE."""
    bits = target.current().vector_bits
    return bits // (64 if et == ET.F64 else 32), 24 if bits == 512 else 10


def kernel(et: ET, lanes: int, c: int, o: int, hout: int, hp: int, wp: int, wvec: int,
           kh: int, kw: int, j: int, v: int, chunks: int) -> tuple[Any, Any]:
    """(the compiled `_emit` function, its engine: keep it alive)."""
    name = "conv_direct"
    text = module_text(_emit(name, F64 if et == ET.F64 else F32, lanes, c, o, hout, hp, wp,
                             wvec, kh, kw, j, v, chunks))
    eng = cache.engine(text, "light", light=True, exports=[name])
    return _FN(eng.address(name)), eng


def layout_perms(dn: Any) -> tuple[list[int], list[int], list[int]]:
    """Transposes of the operands to [N, C, spatial...] and [O, I, spatial...], and of the
    [N, O, spatial...] result to the convolution's output layout."""
    xperm = [dn.input_batch_dimension, dn.input_feature_dimension,
             *dn.input_spatial_dimensions]
    wperm = [dn.kernel_output_feature_dimension, dn.kernel_input_feature_dimension,
             *dn.kernel_spatial_dimensions]
    operm = [0] * len(xperm)
    for src, dst in enumerate((dn.output_batch_dimension, dn.output_feature_dimension,
                               *dn.output_spatial_dimensions)):
        operm[dst] = src
    return xperm, wperm, operm


def split_rows(fn: Any, args: tuple[int, int, int], rows: int, macs: int, threads: int
               ) -> None:
    """fn(*args, begin, end) over [0, rows) in `threads` parts (one if fewer than SPLIT_MACS
    multiply-adds); each row is computed whole by one part, so the split changes no bits."""
    parts = min(threads, rows)
    if parts < 2 or macs < SPLIT_MACS:
        fn(*args, 0, rows)
        return
    cuts = [rows * k // parts for k in range(parts + 1)]
    pool = parallel.pool(threads)
    fa = fn_address(fn)
    futs = [pool.submit(fa, *args, cuts[k], cuts[k + 1]) for k in range(1, parts)]
    fn(*args, cuts[0], cuts[1])
    for f in futs:
        f.result()


__all__ = ["blocking", "direct_plan", "kernel", "lanes_accs", "layout_perms", "split_rows",
           "SPLIT_MACS"]
