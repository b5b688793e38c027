"""convolution as one LLVM loop nest in the object: the JIT's convolution (conv_general.py)
prepares padded channels-last copies in numpy per call, which an object file cannot carry.

`void conv(i8* lhs, i8* rhs, i8* out, i8* acc)` for any stablehlo.convolution on real,
complex or integer types (window strides, padding, lhs / rhs dilation, window reversal,
feature and batch groups, any number of spatial dimensions, any dimension numbers). Per
row of output pixels (batch, spatial index but the last; R pixels along the last) the
output features accumulate in `acc` (R * O elements of the accumulation type, the caller's
scratch): for each window position and each C_STEPS input channels of a group, for each
pixel of the row whose input position is inside the (dilated, padded) input, the input
elements times the kernel's rows of that group's output features, added along the output
features (the innermost loop: LLVM vectorizes it when the kernel's output feature
dimension is contiguous, as in HWIO; the kernel rows are loaded once per output row). The
accumulation type is conv_general.compute_dtype (the interpreter's); see gemm.py for the
conversions.
"""

from __future__ import annotations

from math import prod

from llvmlite import ir

from xlapy.aot.gemm import loop_function, mac, narrow, strides, widen
from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu.llvm_util import I64, for_range, i64
from xlapy.ir import Instruction
from xlapy.types.element_type import from_dtype

#: Input channels per pass over a row's accumulators (a quarter of their loads and stores).
C_STEPS = 4


def emit_conv(mod: ir.Module, name: str, instr: Instruction) -> tuple[ir.Function, int]:
    """The convolution's function and the bytes of accumulator scratch it needs."""
    from xlapy.backends.cpu.conv_general import compute_dtype, geometry

    lhs, rhs = (o.shape for o in instr.operands)
    lt, rt, ot = lhs.element_type, rhs.element_type, instr.shape.element_type
    acc_dt = compute_dtype(instr)
    acc_t = from_dtype(acc_dt)
    geo = geometry(instr)
    dn = instr.attrs.dimension_numbers
    ls, rs, os_ = strides(lhs.dimensions), strides(rhs.dimensions), \
        strides(instr.shape.dimensions)
    o_total = geo.g * geo.og
    at = ew.compute_type(acc_t)
    fn, b, (pl, pr, po, pa) = loop_function(mod, name, lt, rt, ot, at)
    if prod(instr.shape.dimensions) == 0:
        b.ret_void()
        return fn, 0
    zero = ew.constant(0, acc_t)
    nsp = len(geo.sp_out)
    isp, ksp, osp = (list(dn.input_spatial_dimensions), list(dn.kernel_spatial_dimensions),
                     list(dn.output_spatial_dimensions))
    kin, kout = dn.kernel_input_feature_dimension, dn.kernel_output_feature_dimension
    empty_window = prod(geo.ks) == 0 or geo.ci == 0

    # One row of output pixels (the last spatial dimension, R of them; R = 1 without
    # spatial dimensions) accumulates at once: the kernel's row of output features for a
    # window position and input channel is loaded once for the whole row.
    r_len = geo.sp_out[-1] if nsp else 1
    last = nsp - 1

    def row(bi: ir.Value, outs: list[ir.Value]) -> None:
        with for_range(b, i64(0), i64(r_len * o_total), name="zero") as o:
            b.store(zero, b.gep(pa, [o]))
        if not empty_window:
            window(bi, outs, [], i64(0), [])
        base = b.mul(bi, i64(os_[dn.output_batch_dimension]))
        for d, v in zip(osp, outs):
            base = b.add(base, b.mul(v, i64(os_[d])))
        with for_range(b, i64(0), i64(r_len), name="sr") as r, \
                for_range(b, i64(0), i64(o_total), name="store") as o:
            v = narrow(b, b.load(b.gep(pa, [b.add(b.mul(r, i64(o_total)), o)])), acc_t, ot)
            at_ = b.add(base, b.mul(o, i64(os_[dn.output_feature_dimension])))
            if nsp:
                at_ = b.add(at_, b.mul(r, i64(os_[osp[last]])))
            b.store(v, b.gep(po, [at_]))

    def position(j: int, out: ir.Value, kk: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(input index, whether it is inside the input) of output index `out` and window
        index `kk` along spatial dimension j."""
        p = b.sub(b.add(b.mul(out, i64(geo.strides[j])), b.mul(kk, i64(geo.rhs_dil[j]))),
                  i64(geo.pad[j][0]))
        ld = geo.lhs_dil[j]
        extent = (geo.sp_in[j] - 1) * ld + 1 if geo.sp_in[j] else 0
        cond = b.and_(b.icmp_signed(">=", p, i64(0)), b.icmp_signed("<", p, i64(extent)))
        if ld > 1:
            cond = b.and_(cond, b.icmp_signed("==", b.srem(p, i64(ld)), i64(0)))
            p = b.sdiv(p, i64(ld))
        return p, cond

    def window(bi: ir.Value, outs: list[ir.Value], ins: list[ir.Value], koff: ir.Value,
               conds: list[ir.Value]) -> None:
        j = len(ins)
        if j >= last:  # the row's own dimension is walked inside `channels`
            ok = conds[0] if conds else None
            for c in conds[1:]:
                ok = b.and_(ok, c)
            if ok is None:
                channels(bi, ins, koff)
            else:
                with b.if_then(ok):
                    channels(bi, ins, koff)
            return
        with for_range(b, i64(0), i64(geo.ks[j]), name=f"w{j}") as kk:
            kidx = b.sub(i64(geo.ks[j] - 1), kk) if geo.reversal[j] else kk
            p, cond = position(j, outs[j], kk)
            window(bi, outs, ins + [p], b.add(koff, b.mul(kidx, i64(rs[ksp[j]]))),
                   conds + [cond])

    def channels(bi: ir.Value, ins: list[ir.Value], koff: ir.Value) -> None:
        sp = i64(0)
        for d, v in zip(isp, ins):
            sp = b.add(sp, b.mul(v, i64(ls[d])))
        if nsp:
            with for_range(b, i64(0), i64(geo.ks[last]), name="wl") as kk:
                kidx = b.sub(i64(geo.ks[last] - 1), kk) if geo.reversal[last] else kk
                features(bi, sp, b.add(koff, b.mul(kidx, i64(rs[ksp[last]]))), kk)
        else:
            features(bi, sp, koff, None)

    def features(bi: ir.Value, sp: ir.Value, koff: ir.Value, kk: ir.Value | None) -> None:
        with for_range(b, i64(0), i64(geo.g), name="g") as g:
            if geo.by_batch:
                batch = b.add(b.mul(g, i64(geo.b)), bi)
                feat0 = i64(0)
            else:
                batch = bi
                feat0 = b.mul(g, i64(geo.ci))
            xbase = b.add(sp, b.mul(batch, i64(ls[dn.input_batch_dimension])))
            o0 = b.mul(g, i64(geo.og))
            def block(c0: ir.Value, steps: int) -> None:
                """Input channels c0 .. c0 + steps in one pass over the row's accumulators."""
                cs = [b.add(c0, i64(j)) for j in range(steps)]
                xcs = [b.add(xbase, b.mul(b.add(feat0, c), i64(ls[dn.input_feature_dimension])))
                       for c in cs]
                kbs = [b.add(koff, b.mul(c, i64(rs[kin]))) for c in cs]
                with for_range(b, i64(0), i64(r_len), name="r") as r:
                    if kk is None:
                        pixel(xcs, kbs, o0, r)
                    else:
                        p, cond = position(last, r, kk)
                        with b.if_then(cond):
                            step = b.mul(p, i64(ls[isp[last]]))
                            pixel([b.add(xc, step) for xc in xcs], kbs, o0, r)

            full = geo.ci // C_STEPS * C_STEPS
            if full:
                with for_range(b, i64(0), i64(full), name="c", step=C_STEPS) as c:
                    block(c, C_STEPS)
            if geo.ci > full:
                with for_range(b, i64(full), i64(geo.ci), name="cr") as c:
                    block(c, 1)

    def pixel(xos: list[ir.Value], kbs: list[ir.Value], o0: ir.Value, r: ir.Value) -> None:
        xs = [widen(b, ew.from_storage(b, b.load(b.gep(pl, [xo])), lt), lt, acc_t)
              for xo in xos]
        arow = b.add(b.mul(r, i64(o_total)), o0)
        with for_range(b, i64(0), i64(geo.og), name="o") as o:
            oo = b.mul(b.add(o0, o), i64(rs[kout]))
            p = b.gep(pa, [b.add(arow, o)])
            v = b.load(p)
            for x, kb in zip(xs, kbs):
                y = widen(b, ew.from_storage(b, b.load(b.gep(pr, [b.add(kb, oo)])), rt), rt,
                          acc_t)
                v = mac(b, acc_t, v, x, y)
            b.store(v, p)

    def outer(bi: ir.Value, outs: list[ir.Value]) -> None:
        j = len(outs)
        if j >= last:
            row(bi, outs)
            return
        with for_range(b, i64(0), i64(geo.sp_out[j]), name=f"s{j}") as s:
            outer(bi, outs + [s])

    with for_range(b, i64(0), i64(geo.b), name="batch") as bi:
        outer(bi, [])
    b.ret_void()
    return fn, r_len * o_total * acc_dt.itemsize


__all__ = ["emit_conv", "I64"]
