"""The register block of conv_kernel.py written straight as LLVM IR text.

The block is the one function of a convolution's nest whose shape is fixed by few numbers
(lanes, V vectors, P pixels, the window's last dimension, the channels) and whose body is
P x V multiply-adds: regular enough for a string template. Built through llvmlite's IR
objects it cost the CNN's cold compile ~0.7 ms of building and ~1.1 ms of printing (every
instruction, type and vector constant formatted on its own), and its text held the undef
vectors lane by lane; here it is ~0.1 ms. The sums are SSA values carried by phis (what
SROA made of the allocas before), so the light pipeline has nothing to do with them.

`block(base, w, xb, xv, wb, rowoff, spill, n)`: the sums of n consecutive register blocks
of `pp` pixels times V vectors, pixel q's vector j into spill[q * V + j]: input element
offsets from `base` xb (the first block's first pixel, the group's channels) plus
rowoff[tap row] + kx * (window dilation * channels) + c (plus xv, the vector's lanes, for
depthwise), weights from w + wb (the group's, the block's first vector) + ((tap row * kw
+ kx) * ci + c) * apad. The sums run over the tap rows, the window's last dimension and
the input channels in that order (conv_kernel.py: the same order whichever input form).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from xlapy.backends.cpu.llvm_util import F32, F64

if TYPE_CHECKING:
    from xlapy.backends.cpu.conv_kernel import Nest


def fmuladd(t: ir.Type, lanes: int) -> str:
    """The multiply-add intrinsic a float block calls."""
    return f"llvm.fmuladd.v{lanes}{'f64' if t == F64 else 'f32'}"


def block_text(name: str, t: ir.Type, nest: Nest, pp: int) -> str:
    """The definition of the block function `name` (module docstring) for `pp` pixels; a
    float block calls `fmuladd(t, lanes)`, which the module must declare."""
    lanes, v = nest.lanes, nest.v
    ts = str(t)
    vt = f"<{lanes} x {ts}>"
    is_float = t in (F32, F64)
    align = 8 if t == F64 else 4 if t == F32 else t.width // 8
    kw, ci, apad = nest.ks[-1], nest.ci, nest.apad
    st_last = nest.strides[-1] * nest.cx
    dx_step = nest.rhs_dil[-1] * nest.cx
    accs = [(q, j) for q in range(pp) for j in range(v)]
    zero = "zeroinitializer"
    out = [f"define void @\"{name}\"({ts}* noalias %base, {ts}* noalias %w, i64 %xb0, "
           f"i64 %xv, i64 %wb, i64* %rowoff, {vt}* noalias %spill0, i64 %n)", "{",
           "entry:",
           "  %any = icmp sgt i64 %n, 0",
           "  br i1 %any, label %block, label %done",
           # one block of pp pixels: its sums start at zero
           "block:",
           "  %b = phi i64 [0, %entry], [%b.next, %tap.end]",
           f"  %b.x = mul i64 %b, {pp * st_last}",
           "  %xb = add i64 %xb0, %b.x",
           f"  %b.s = mul i64 %b, {pp * v}",
           f"  %spill = getelementptr {vt}, {vt}* %spill0, i64 %b.s",
           "  br label %tap",
           # window position k = tap row * kw + kx
           "tap:",
           "  %k = phi i64 [0, %block], [%k.next, %chan.end]"]
    out += [f"  %a{q}_{j}.k = phi {vt} [{zero}, %block], [%a{q}_{j}.c, %chan.end]"
            for q, j in accs]
    out += [f"  %tr = udiv i64 %k, {kw}",
            f"  %kx = urem i64 %k, {kw}",
            "  %ro.p = getelementptr i64, i64* %rowoff, i64 %tr",
            "  %ro = load i64, i64* %ro.p",
            "  %xt = add i64 %xb, %ro",
            f"  %kx.x = mul i64 %kx, {dx_step}",
            "  %xk = add i64 %xt, %kx.x",
            f"  %k.w = mul i64 %k, {ci * apad}",
            "  %wk = add i64 %wb, %k.w",
            "  br label %chan",
            # input channel c: pp * V multiply-adds
            "chan:",
            "  %c = phi i64 [0, %tap], [%c.next, %chan]"]
    out += [f"  %a{q}_{j} = phi {vt} [%a{q}_{j}.k, %tap], [%a{q}_{j}.c, %chan]" for q, j in accs]
    out += [f"  %c.w = mul i64 %c, {apad}",
            "  %wc = add i64 %wk, %c.w"]
    for j in range(v):
        out += [f"  %wo{j} = add i64 %wc, {j * lanes}",
                f"  %wp{j} = getelementptr {ts}, {ts}* %w, i64 %wo{j}",
                f"  %wvp{j} = bitcast {ts}* %wp{j} to {vt}*",
                f"  %wv{j} = load {vt}, {vt}* %wvp{j}, align {align}"]
    out.append("  %xc = add i64 %xk, %c")
    for q in range(pp):
        out.append(f"  %xq{q} = add i64 %xc, {q * st_last}")
        if nest.xvec:  # depthwise: the input's lanes are the vector's channels
            out.append(f"  %xqv{q} = add i64 %xq{q}, %xv")
            for j in range(v):
                out += [f"  %xo{q}_{j} = add i64 %xqv{q}, {j * lanes}",
                        f"  %xp{q}_{j} = getelementptr {ts}, {ts}* %base, i64 %xo{q}_{j}",
                        f"  %xvp{q}_{j} = bitcast {ts}* %xp{q}_{j} to {vt}*",
                        f"  %x{q}_{j} = load {vt}, {vt}* %xvp{q}_{j}, align {align}"]
        else:
            out += [f"  %xp{q} = getelementptr {ts}, {ts}* %base, i64 %xq{q}",
                    f"  %xs{q} = load {ts}, {ts}* %xp{q}",
                    f"  %xi{q} = insertelement {vt} undef, {ts} %xs{q}, i32 0",
                    f"  %x{q} = shufflevector {vt} %xi{q}, {vt} undef, "
                    f"<{lanes} x i32> zeroinitializer"]
        for j in range(v):
            x = f"%x{q}_{j}" if nest.xvec else f"%x{q}"
            if is_float:
                out.append(f"  %a{q}_{j}.c = call {vt} @\"{fmuladd(t, lanes)}\"({vt} {x}, "
                           f"{vt} %wv{j}, {vt} %a{q}_{j})")
            else:
                out += [f"  %m{q}_{j} = mul {vt} {x}, %wv{j}",
                        f"  %a{q}_{j}.c = add {vt} %a{q}_{j}, %m{q}_{j}"]
    out += ["  %c.next = add nsw i64 %c, 1",
            f"  %c.more = icmp slt i64 %c.next, {ci}",
            "  br i1 %c.more, label %chan, label %chan.end",
            "chan.end:",
            "  %k.next = add nsw i64 %k, 1",
            f"  %k.more = icmp slt i64 %k.next, {nest.taps * kw}",
            "  br i1 %k.more, label %tap, label %tap.end",
            # the block's sums into the spill
            "tap.end:"]
    for q, j in accs:
        out += [f"  %sp{q}_{j} = getelementptr {vt}, {vt}* %spill, i64 {q * v + j}",
                f"  store {vt} %a{q}_{j}.c, {vt}* %sp{q}_{j}"]
    out += ["  %b.next = add nsw i64 %b, 1",
            "  %b.more = icmp slt i64 %b.next, %n",
            "  br i1 %b.more, label %block, label %done",
            "done:",
            "  ret void",
            "}", ""]
    return "\n".join(out)


__all__ = ["block_text", "fmuladd"]
