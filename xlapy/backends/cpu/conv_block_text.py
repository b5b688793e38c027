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
depthwise), weights from w + wb (the group's, the block's features) + ((tap row * kw
+ kx) * ci + c) * nest.wstride. The sums run over the tap rows, the window's last dimension and
the input channels in that order (conv_kernel.py: the same order whichever input form).

The window's size is read at run time, not written into the text: rowoff[-2] is kw and
rowoff[-1] the window positions (tap rows * kw; conv_rows_text.py stores both). So nests
that differ only in their window share one block text, which a compile builds once
(conv_compile.py): the four phases of a stride-2 3x3 transposed convolution
(conv_polyphase.py: windows 2x2, 2x1, 1x2, 1x1) compiled four hot modules that differed
in two constants, ~12 ms of -O3 code generation each.
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


def unroll(ci: int) -> int:
    """Input channels per iteration of the channel loop: two where they pair up. The loop's
    own instructions share the ports with the multiply-adds: the CNN (blocks of 13 pixels)
    ran 14.6 -> 13.8 ms with two, 13.6 with four, whose longer body cost its cold compile
    ~1.8 ms more of -O3 code generation (two: ~0.7). The sums' order is the same."""
    return 2 if ci % 2 == 0 else 1


def block_text(name: str, t: ir.Type, nest: Nest, pp: int) -> str:
    """The definition of the block function `name` (module docstring) for `pp` pixels; a
    float block calls `fmuladd(t, lanes)`, which the module must declare."""
    lanes, v = nest.lanes, nest.v
    ts = str(t)
    vt = f"<{lanes} x {ts}>"
    is_float = t in (F32, F64)
    align = 8 if t == F64 else 4 if t == F32 else t.width // 8
    ci, ws = nest.ci, nest.wstride
    st_last = nest.strides[-1] * nest.cx
    dx_step = nest.rhs_dil[-1] * nest.cx
    accs = [(q, j) for q in range(pp) for j in range(v)]
    u = unroll(ci)
    zero = "zeroinitializer"
    out = [f"define void @\"{name}\"({ts}* noalias %base, {ts}* noalias %w, i64 %xb0, "
           f"i64 %xv, i64 %wb, i64* %rowoff, {vt}* noalias %spill0, i64 %n)", "{",
           "entry:",
           "  %kw.p = getelementptr i64, i64* %rowoff, i64 -2",
           "  %kw = load i64, i64* %kw.p",
           "  %nk.p = getelementptr i64, i64* %rowoff, i64 -1",
           "  %nk = load i64, i64* %nk.p",
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
           # window position k = tap row tr * kw + kx
           "tap:",
           "  %k = phi i64 [0, %block], [%k.next, %chan.end]",
           "  %tr = phi i64 [0, %block], [%tr.next, %chan.end]",
           "  %kx = phi i64 [0, %block], [%kx.next, %chan.end]"]
    out += [f"  %a{q}_{j}.k = phi {vt} [{zero}, %block], [%a{q}_{j}.c, %chan.end]"
            for q, j in accs]
    out += ["  %ro.p = getelementptr i64, i64* %rowoff, i64 %tr",
            "  %ro = load i64, i64* %ro.p",
            "  %xt = add i64 %xb, %ro",
            f"  %kx.x = mul i64 %kx, {dx_step}",
            "  %xk = add i64 %xt, %kx.x",
            f"  %k.w = mul i64 %k, {ci * ws}",
            "  %wk = add i64 %wb, %k.w",
            "  br label %chan",
            # input channel c: pp * V multiply-adds
            "chan:",
            "  %c = phi i64 [0, %tap], [%c.next, %chan]"]
    out += [f"  %a{q}_{j} = phi {vt} [%a{q}_{j}.k, %tap], [%a{q}_{j}.c, %chan]" for q, j in accs]
    acc = {qj: f"%a{qj[0]}_{qj[1]}" for qj in accs}  # each sum's latest value
    # the channel's weights and input as pointers, each load a constant offset from them
    out += [f"  %c.w = mul i64 %c, {ws}",
            "  %wc = add i64 %wk, %c.w",
            f"  %wcp = getelementptr {ts}, {ts}* %w, i64 %wc",
            "  %xc = add i64 %xk, %c",
            f"  %xcp = getelementptr {ts}, {ts}* %base, i64 %xc"]
    if nest.xvec:
        out.append(f"  %xcv = getelementptr {ts}, {ts}* %xcp, i64 %xv")
    for uu in range(u):  # input channel c + uu: pp * V multiply-adds
        sx = f"_{uu}"
        for j in range(v):
            out += [f"  %wp{j}{sx} = getelementptr {ts}, {ts}* %wcp, i64 {j * lanes + uu * ws}",
                    f"  %wvp{j}{sx} = bitcast {ts}* %wp{j}{sx} to {vt}*",
                    f"  %wv{j}{sx} = load {vt}, {vt}* %wvp{j}{sx}, align {align}"]
        for q in range(pp):
            if nest.xvec:  # depthwise: the input's lanes are the vector's channels
                for j in range(v):
                    out += [f"  %xp{q}_{j}{sx} = getelementptr {ts}, {ts}* %xcv, "
                            f"i64 {q * st_last + uu + j * lanes}",
                            f"  %xvp{q}_{j}{sx} = bitcast {ts}* %xp{q}_{j}{sx} to {vt}*",
                            f"  %x{q}_{j}{sx} = load {vt}, {vt}* %xvp{q}_{j}{sx}, "
                            f"align {align}"]
            else:
                out += [f"  %xp{q}{sx} = getelementptr {ts}, {ts}* %xcp, i64 {q * st_last + uu}",
                        f"  %xs{q}{sx} = load {ts}, {ts}* %xp{q}{sx}",
                        f"  %xi{q}{sx} = insertelement {vt} undef, {ts} %xs{q}{sx}, i32 0",
                        f"  %x{q}{sx} = shufflevector {vt} %xi{q}{sx}, {vt} undef, "
                        f"<{lanes} x i32> zeroinitializer"]
            for j in range(v):
                x = f"%x{q}_{j}{sx}" if nest.xvec else f"%x{q}{sx}"
                res = f"%a{q}_{j}.c" if uu == u - 1 else f"%a{q}_{j}.u{uu}"
                if is_float:
                    out.append(f"  {res} = call {vt} @\"{fmuladd(t, lanes)}\"({vt} {x}, "
                               f"{vt} %wv{j}{sx}, {vt} {acc[q, j]})")
                else:
                    out += [f"  %m{q}_{j}{sx} = mul {vt} {x}, %wv{j}{sx}",
                            f"  {res} = add {vt} {acc[q, j]}, %m{q}_{j}{sx}"]
                acc[q, j] = res
    out += [f"  %c.next = add nsw i64 %c, {u}",
            f"  %c.more = icmp slt i64 %c.next, {ci}",
            "  br i1 %c.more, label %chan, label %chan.end",
            "chan.end:",
            "  %k.next = add nsw i64 %k, 1",
            "  %kx.inc = add nsw i64 %kx, 1",
            "  %kx.wrap = icmp eq i64 %kx.inc, %kw",
            "  %kx.next = select i1 %kx.wrap, i64 0, i64 %kx.inc",
            "  %tr.inc = add nsw i64 %tr, 1",
            "  %tr.next = select i1 %kx.wrap, i64 %tr.inc, i64 %tr",
            "  %k.more = icmp slt i64 %k.next, %nk",
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
