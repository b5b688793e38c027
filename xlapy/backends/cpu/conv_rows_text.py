"""The rows function of conv_kernel.py's cold module, written as IR text (ir_text.py).

`name(x, w, out, begin, end, scratch, extra)` computes output rows [begin, end) (pooled
rows with a Pool) of a nest: per output row it finds the input row each tap row reads
(the ring's copies in the `rows` form: a tag per slot, memset / memcpy or the chained
nest's rows function), then for each group, block of V vectors and run of pixel blocks
calls the hot block function through the table of pointers (conv_kernel._Blocks) and
its epilogue (conv_kernel._finish_fn, in this module). Integer bookkeeping, generated at
LLVM's -O0 (conv_compile.py); through llvmlite's IR objects its building and printing
cost ~2.9 ms of the CNN's cold compile.
"""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

from llvmlite import ir

from xlapy.backends.cpu.ir_text import FunctionText, Value
from xlapy.backends.cpu.llvm_util import F32, F64

if TYPE_CHECKING:
    from xlapy.backends.cpu.conv_kernel import Nest, Pool

#: Bytes of register-block sums one call of the hot code leaves for its epilogue at most.
SPILL_BYTES = 16 << 10
MEMSET = "llvm.memset.p0i8.i64"
MEMCPY = "llvm.memcpy.p0i8.p0i8.i64"


def nbytes(t: ir.Type) -> int:
    return 8 if t == F64 else 4 if t == F32 else t.width // 8


def signature(name: str, t: ir.Type) -> str:
    """The `define` line of a rows function (conv_kernel._signature's type)."""
    tp = f"{t}*"
    return (f'define internal void @"{name}"({tp} noalias %x, {tp} noalias %w, '
            f"{tp} noalias %out, i64 %begin, i64 %end, i8* %scratch, i8** %extra)")


def block_type(t: ir.Type, lanes: int) -> str:
    """The hot block functions' type: `block(base, w, xb, xv, wb, rowoff, spill, n)`
    (conv_block_text.py)."""
    return f"void ({t}*, {t}*, i64, i64, i64, i64*, <{lanes} x {t}>*, i64)"


def rows_text(name: str, t: ir.Type, nest: Nest, pool: Pool | None,
              source: tuple[str, int, Nest] | None, table: tuple[str, int],
              block_slot: int, finish: str) -> str:
    """The definition of the rows function `name`. `source`: (its rows
    function, its pointers' first index in extra, its nest) when a chained nest computes
    this one's input rows; `table`: the hot functions' table (name, entries);
    block_slot: the table index of the nest's block (nest.p pixels); finish: this function's
    epilogue function (conv_kernel._finish_fn, in the same module)."""
    f = FunctionText(signature(name, t))
    ts = f"{t}"
    tp = f"{ts}*"
    lanes, v, p = nest.lanes, nest.v, nest.p
    vt = f"<{lanes} x {ts}>"
    s = len(nest.sp_out)
    cx, apad = nest.cx, nest.apad
    taps, kw = nest.taps, nest.ks[-1]
    wo = nest.sp_out[-1]
    st_last = nest.strides[-1] * cx
    opix = nest.g * apad
    size = nbytes(t)

    def tap_pos(k: Value, d: int) -> Value:
        """Tap row k's window position in spatial dimension d (row-major over ks[:-1]):
        arithmetic, not a table (a global's address keeps LLVM's -O0 instruction selector
        off its fast path for the rest of the block)."""
        inner = prod(nest.ks[d + 1:-1])
        pos = f.binop("udiv", k, inner) if inner != 1 else k
        return f.binop("urem", pos, nest.ks[d]) if d > 0 else pos

    def hot(slot: int, ty: str) -> str:
        """The hot function in table slot `slot`, as a `ty*`."""
        tname, n = table
        at = f.op(f'getelementptr [{n} x i64], [{n} x i64]* @"{tname}", i64 0, i64 {slot}')
        fp = f.cast(at, "i64*", f"{ty}**")
        return f.load(f"{ty}*", fp)

    # Blocks per hot call: the most that divide the row's whole blocks and whose sums fit
    # SPILL_BYTES (the spill stays in L1).
    full = wo // p
    seg = max([d for d in range(1, full + 1) if full % d == 0
               and d * p * v * lanes * size <= SPILL_BYTES] or [1])
    nspill = seg * p * v
    spill = f.op(f"alloca [{nspill} x {vt}]", "spill")
    spill0 = f.op(f"getelementptr [{nspill} x {vt}], [{nspill} x {vt}]* {spill}, i64 0, i64 0")
    # rowoff[t]: tap row t's input row; before it, the window the block reads (its kw and
    # taps * kw: conv_block_text.py)
    rowhead = f.op(f"alloca i64, i64 {taps + 2}", "rowhead")
    f.store("i64", kw, rowhead)
    f.store("i64", taps * kw, f.gep("i64", rowhead, 1))
    rowoff = f.gep("i64", rowhead, 2)
    if nest.rows:
        tags = f.cast("%scratch", "i8*", "i64*")
        base = f.cast(f.gep("i8", "%scratch", nest.tag_bytes()), "i8*", tp)
        ring = nest.ring()
    else:
        base = "%x"
        xstr = [0] * s
        acc = cx
        for d in range(s - 1, -1, -1):
            xstr[d] = acc
            acc *= nest.padded[d]
        xbatch = acc
    # The hot functions' pointers, loaded once here (the entry block; see tap_pos).
    bt = block_type(t, lanes)
    hot_fn = hot(block_slot, bt)  # one shape: p <= wo (conv_general._blocking)

    def fill(dst: Value, lo: int, hi: int, src: Value | None) -> None:
        """dst[lo:hi] = src[0:hi - lo] (zeros when src is None): the C library's memcpy /
        memset (this code is generated at -O0: its own copy loop cost the CNN 2-3%)."""
        n = (hi - lo) * size
        if n <= 0:
            return
        to = f.cast(f.gep(ts, dst, lo), tp, "i8*")
        if src is None:
            f.do(f'call void @"{MEMSET}"(i8* {to}, i8 0, i64 {n}, i1 0)')
        else:
            fr = f.cast(src, tp, "i8*")
            f.do(f'call void @"{MEMCPY}"(i8* {to}, i8* {fr}, i64 {n}, i1 0)')

    def copy_row(src_row: Value, slot: Value) -> None:
        """Input row `src_row` (a row index of x viewed as [rows, W * C]) zero-padded into
        ring slot `slot`."""
        lo = nest.pad[-1][0]
        width, plen = nest.sp_in[-1], nest.padded[-1]
        x0, x1 = min(max(lo, 0), plen), min(max(lo + width, 0), plen)
        dst = f.gep(ts, base, f.mul(f.add(slot, 1), nest.row_len))
        fill(dst, 0, x0 * cx, None)
        if source is None:
            src = f.gep(ts, "%x", f.add(f.mul(src_row, width * cx), (x0 - lo) * cx))
            fill(dst, x0 * cx, x1 * cx, src)
        else:  # the chained nest's output row src_row, written where this row's starts
            sfn, at, _ = source
            ptr = [f.load("i8*", f.gep("i8*", "%extra", at + k)) for k in range(3)]
            row0 = f.gep(ts, dst, lo * cx)  # (lo >= 0, the whole row: the plan checks)
            dst_row = f.gep(ts, row0, f.mul(src_row, -width * cx))
            sx = f.cast(ptr[0], "i8*", tp)
            sw = f.cast(ptr[1], "i8*", tp)
            sextra = f.cast(ptr[2], "i8*", "i8**")
            sscratch = f.gep("i8", "%scratch", nest.scratch_bytes(size))
            f.do(f'call void @"{sfn}"({tp} {sx}, {tp} {sw}, {tp} {dst_row}, i64 {src_row}, '
                 f"i64 {f.add(src_row, 1)}, i8* {sscratch}, i8** {sextra})")
        fill(dst, x1 * cx, plen * cx, None)

    def tap_rows(bi: Value, outer: list[Value]) -> None:
        """rowoff[t] for output row (bi, outer...): the element offset from `base` of the
        (padded) input row tap row t reads."""
        if not nest.rows:
            xrow = f.mul(bi, xbatch)
            for d in range(s - 1):
                xrow = f.add(xrow, f.mul(outer[d], nest.strides[d] * xstr[d]))
            with f.loop(0, taps, "tr") as k:
                koff: Value = 0
                for d in range(s - 1):
                    koff = f.add(koff, f.mul(tap_pos(k, d), nest.rhs_dil[d] * xstr[d]))
                f.store("i64", f.add(xrow, koff), f.gep("i64", rowoff, k))
            return
        with f.loop(0, taps, "tr") as k:
            ok = "true"
            lin: Value = bi
            slot: Value = 0
            for d in range(s - 1):
                # the input index: output index * stride + k * dilation - low padding
                kd = f.add(f.mul(tap_pos(k, d), nest.rhs_dil[d]), -nest.pad[d][0])
                i = f.add(f.mul(outer[d], nest.strides[d]), kd)
                inside = f.op(f"and i1 {f.icmp('sge', i, 0)}, "
                              f"{f.icmp('slt', i, nest.sp_in[d])}")
                ok = f.op(f"and i1 {ok}, {inside}")
                lin = f.add(f.mul(lin, nest.sp_in[d]), i)
                if ring:
                    at = f.op(f"select i1 {ok}, i64 {i}, i64 0")
                    slot = f.add(f.mul(slot, nest.ks[d]), f.binop("urem", at, nest.ks[d]))
            if not ring:
                slot = k
            yes, no, end = f.if_else(ok)
            f.label(yes)
            tag = f.gep("i64", tags, slot)
            stale = f.icmp("ne", f.load("i64", tag), lin)
            with f.if_then(stale):
                copy_row(lin, slot)
                f.store("i64", lin, tag)
            f.store("i64", f.mul(f.add(slot, 1), nest.row_len), f.gep("i64", rowoff, k))
            f.do(f"br label %{end}")
            f.label(no)
            f.store("i64", 0, f.gep("i64", rowoff, k))
            f.do(f"br label %{end}")
            f.label(end)

    prow: list[Value] = [0, 0]    # (pooled row, dy) of the row being computed

    def block(xg: Value, wg: Value, og: Value, fg: Value, vb: Value, pix0: Value, n: int,
              skip: int = 0) -> None:
        """n hot blocks' sums into the spill, then the epilogue and stores; `skip`: the
        first pixels of the blocks are ones already finished (the row's last block)."""
        xb = f.add(xg, f.mul(f.add(pix0, -skip), st_last))
        vl = f.mul(vb, lanes)
        # the block's weights: its V vectors' features, packed together (Nest.wstride)
        wb = f.add(wg, vl if nest.xvec else f.mul(vb, taps * kw * nest.ci * lanes))
        f.do(f"call void {hot_fn}({tp} {base}, {tp} %w, i64 {xb}, i64 {vl}, i64 {wb}, "
             f"i64* {rowoff}, {vt}* {spill0}, i64 {n})")
        ob = f.add(f.add(og, f.mul(pix0, opix)), vl)
        sums = f.gep(vt, spill0, skip * v)
        f.do(f'call void @"{finish}"({tp} %out, {vt}* {sums}, i8** %extra, i64 {ob}, '
             f"i64 {f.add(fg, vl)}, i64 {pix0}, i64 {prow[0]}, i64 {prow[1]}, "
             f"i64 {n * p - skip})")

    def row_blocks(row: Value, g: Value, vbi: Value) -> None:
        """Output row `row`'s blocks of group g and vector block vbi."""
        xg = f.mul(g, nest.gx)
        wg = f.mul(g, taps * kw * nest.ci * apad)
        fg = f.mul(g, apad)
        og = f.add(f.mul(row, wo * opix), fg)
        vb = f.mul(vbi, v)
        with f.loop(0, full // seg, "pb") as pb:
            block(xg, wg, og, fg, vb, f.mul(pb, seg * p), seg)
        if wo % p:  # the row's last p pixels, of which the first were computed
            # already (the same sums again, to the same bits): one block shape
            block(xg, wg, og, fg, vb, full * p, 1, p - wo % p)

    def one_row(row: Value, bi: Value, outer: list[Value]) -> None:
        tap_rows(bi, outer)
        with f.loop(0, nest.g, "g") as g:
            with f.loop(0, apad // lanes // v, "vb") as vbi:
                row_blocks(row, g, vbi)

    def coords(row: Value) -> tuple[Value, list[Value]]:
        """(batch, outer spatial indices) of output row `row`."""
        bi = f.binop("sdiv", row, rows_inner)
        rem: Value = f.binop("srem", row, rows_inner)
        outer: list[Value] = [0] * (s - 1)
        for d in range(s - 2, -1, -1):
            outer[d] = f.binop("srem", rem, nest.sp_out[d])
            rem = f.binop("sdiv", rem, nest.sp_out[d])
        return bi, outer

    rows_inner = prod(nest.sp_out[:-1])
    if pool is None and source is None and nest.vb_outer:
        # each vector block's weights stay in L2 across the rows (the ring's rows are
        # copied again per vector block: far fewer bytes than the weights)
        with f.loop(0, nest.g, "g") as g:
            with f.loop(0, apad // lanes // v, "vb") as vbi:
                with f.loop("%begin", "%end", "row") as row:
                    tap_rows(*coords(row))
                    row_blocks(row, g, vbi)
    elif pool is None:
        with f.loop("%begin", "%end", "row") as row:
            one_row(row, *coords(row))
    else:  # [begin, end) are pooled rows of b * hp; 2-D only
        with f.loop("%begin", "%end", "prow") as pr:
            bi = f.binop("sdiv", pr, pool.hp)
            hq = f.binop("srem", pr, pool.hp)
            with f.loop(0, pool.kh, "dy") as dy:
                h = f.add(f.mul(hq, pool.kh), dy)
                prow[:] = [pr, dy]
                one_row(f.add(f.mul(bi, nest.sp_out[0]), h), bi, [h])
    f.do("ret void")
    return f.text()


__all__ = ["MEMCPY", "MEMSET", "SPILL_BYTES", "block_type", "nbytes", "rows_text",
           "signature"]
