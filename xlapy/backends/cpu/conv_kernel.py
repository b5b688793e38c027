"""The LLVM loop nest of conv_general.py: one function per convolution shape.

`void name(T* x, T* w, T* out, i64 begin, i64 end, i8* scratch, i8** extra)` computes the
output rows [begin, end) of b * prod(sp_out[:-1]) (layouts: conv_general's docstring).

Per output row, each window row ("tap row": a window position in every spatial dimension
but the last) reads one input row through an offset table:

* `padded` input: x is conv_general's padded channels-last copy; the offsets are fixed.
* `rows` input (in-kernel padding): x is the operand itself, channels-last, unpadded. A tap
  row's input row is copied, zero-padded, into a per-thread ring of rows in `scratch` (a
  row outside the input reads a shared zero row); consecutive output rows find most rows
  already there (a tag per ring slot names the row it holds), so the input is read about
  once instead of the whole padded copy conv_general made per call (16 MB, ~1.2 ms of a
  32x64x64x32 layer's ~6).

The block of V vectors of output features times P pixels stays in registers over the tap
rows, the last window dimension and the input channels (that order: the same sums, in the
same order, whichever input form). Its store can apply an element-wise `epilogue` (the
bias + relu after a layer, conv_epilogue.py) to the registers first: the convolution's own
result never goes to memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import gcd, prod

from llvmlite import ir

from xlapy.backends.cpu.llvm_util import (
    F32,
    F64,
    I64,
    VOID,
    for_range,
    i64,
    intrinsic,
    new_module,
    restore_mxcsr,
    set_ftz_daz,
    splat,
)

I8P = ir.IntType(8).as_pointer()
#: (builder, value vector, feature offset in [G * apad], out element offset, extra pointers)
#: -> the vector to store.
EpilogueEmit = Callable[[ir.IRBuilder, ir.Value, ir.Value, ir.Value, ir.Value], ir.Value]


@dataclass(frozen=True)
class Pool:
    """A non-overlapping 2-D pooling of the (epilogue's) result, folded in as rows are
    stored: pooled[b, i, j, f] = fold(init, x[b, kh i + dy, kw j + dx, f] for (dy, dx) in
    row-major order), then `post` (reduce_window's own order; conv_epilogue.py). Output
    rows are taken kh at a time, each group by one thread; the rows and columns past the
    last whole window are not computed."""

    kh: int
    kw: int
    hp: int                       # pooled rows
    wp: int                       # pooled columns
    init: Callable[[ir.Type], ir.Value]                            # the init vector
    fold: Callable[[ir.IRBuilder, ir.Value, ir.Value], ir.Value]   # (acc, value) -> acc
    post: EpilogueEmit | None = None


@dataclass(frozen=True)
class Nest:
    """What the loop nest needs of a convolution (conv_general.Geometry, canonical)."""

    b: int                        # output batch
    g: int                        # groups walked (1 for depthwise: groups in the lanes)
    ci: int                       # input channels per group walked
    cx: int                       # channels per input pixel
    gx: int                       # input offset between groups
    apad: int                     # output features per group, padded to whole vectors
    lanes: int
    v: int                        # vectors per register block
    p: int                        # pixels per register block
    xvec: bool                    # depthwise: input channels are vector lanes
    sp_out: tuple[int, ...]
    ks: tuple[int, ...]
    strides: tuple[int, ...]
    rhs_dil: tuple[int, ...]
    padded: tuple[int, ...]       # padded input sizes (the rows form pads the last only)
    sp_in: tuple[int, ...]        # unpadded input sizes (rows form)
    pad: tuple[tuple[int, int], ...]
    rows: bool                    # in-kernel padding (see the module docstring)

    @property
    def taps(self) -> int:
        """Tap rows: window positions over every spatial dimension but the last."""
        return prod(self.ks[:-1])

    @property
    def row_len(self) -> int:
        """Elements of one padded input row."""
        return self.padded[-1] * self.cx

    def ring(self) -> bool:
        """Whether input row i can live in ring slot (i mod k) per dimension: the rows one
        output row reads are then in distinct slots (a window dilation prime to the window)."""
        return all(gcd(d, k) == 1 for d, k in zip(self.rhs_dil[:-1], self.ks[:-1]))

    def scratch_bytes(self, itemsize: int) -> int:
        """Bytes of one thread's scratch: the ring's tags, the zero row, the ring's rows
        (a multiple of 64: a chained nest's scratch follows)."""
        return -(-(self.tag_bytes() + (self.taps + 1) * self.row_len * itemsize) // 64) * 64

    def tag_bytes(self) -> int:
        return -(-8 * self.taps // 64) * 64


@dataclass(frozen=True)
class Source:
    """The input rows of a `rows` nest computed by another nest (a convolution chained into
    this one, conv_epilogue.py) as the ring needs them, instead of read from memory: its
    operand, packed weights and epilogue pointer table are extra[at], extra[at + 1],
    extra[at + 2]; its scratch follows this nest's."""

    nest: Nest
    epilogue: EpilogueEmit | None
    at: int


def _signature(t: ir.Type) -> ir.FunctionType:
    tp = t.as_pointer()
    return ir.FunctionType(VOID, [tp, tp, tp, I64, I64, I8P, I8P.as_pointer()])


def emit(name: str, t: ir.Type, nest: Nest, epilogue: EpilogueEmit | None = None,
         pool: Pool | None = None, source: Source | None = None) -> ir.Module:
    """The module of the function `name` (see the module docstring)."""
    mod = new_module(name)
    src = None
    if source is not None:
        src = (_rows_fn(mod, f"{name}.src", t, source.nest, source.epilogue, None, None),
               source)
    rows = _rows_fn(mod, f"{name}.rows", t, nest, epilogue, pool, src)
    fn = ir.Function(mod, _signature(t), name=name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    scratch = fn.args[5]
    # The epilogue's ops assume what a kernel's do: denormal results flush (xlapy.denormal).
    flush = epilogue is not None or pool is not None or source is not None
    mxcsr = set_ftz_daz(b) if flush else None
    if nest.rows:
        _init_ring(b, scratch, t, nest)
    if source is not None and source.nest.rows:
        _init_ring(b, b.gep(scratch, [i64(nest.scratch_bytes(_bytes(t)))]), t, source.nest)
    b.call(rows, list(fn.args))
    if mxcsr is not None:
        restore_mxcsr(b, mxcsr)
    b.ret_void()
    return mod


def _bytes(t: ir.Type) -> int:
    return 8 if t == F64 else 4 if t == F32 else t.width // 8


def _init_ring(b: ir.IRBuilder, scratch: ir.Value, t: ir.Type, nest: Nest) -> None:
    """No ring slot holds a row; the zero row is zeros."""
    tags = b.bitcast(scratch, I64.as_pointer())
    base = b.bitcast(b.gep(scratch, [i64(nest.tag_bytes())]), t.as_pointer())
    with for_range(b, i64(0), i64(nest.taps), "tag") as k:
        b.store(i64(-1), b.gep(tags, [k]))
    zero = ir.Constant(t, 0.0 if t in (F32, F64) else 0)
    with for_range(b, i64(0), i64(nest.row_len), "z") as k:
        b.store(zero, b.gep(base, [k]))


def _rows_fn(mod: ir.Module, name: str, t: ir.Type, nest: Nest,
             epilogue: EpilogueEmit | None, pool: Pool | None,
             source: tuple[ir.Function, Source] | None) -> ir.Function:
    """`name(x, w, out, begin, end, scratch, extra)`: output rows [begin, end), the ring
    (if any) as the last call left it."""
    tp = t.as_pointer()
    fn = ir.Function(mod, _signature(t), name=name)
    fn.linkage = "internal"
    x, w, out, begin, end, scratch, extra = fn.args
    for arg in (x, w, out):
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    lanes, v, p = nest.lanes, nest.v, nest.p
    vt = ir.VectorType(t, lanes)
    vp = vt.as_pointer()
    is_float = t in (F32, F64)
    zero = splat(vt, 0.0 if is_float else 0)
    align = 8 if t == F64 else 4 if t == F32 else t.width // 8
    s = len(nest.sp_out)
    cx, apad = nest.cx, nest.apad
    taps, kw = nest.taps, nest.ks[-1]
    wo = nest.sp_out[-1]
    st_last = nest.strides[-1] * cx
    dx_step = nest.rhs_dil[-1] * cx
    opix = nest.g * apad
    fmuladd = f"llvm.fmuladd.v{lanes}{'f64' if t == F64 else 'f32'}"

    def table(tname: str, values: list[int]) -> ir.GlobalVariable:
        ty = ir.ArrayType(I64, len(values))
        gv = ir.GlobalVariable(mod, ty, name=f"{name}.{tname}")
        gv.global_constant = True
        gv.linkage = "internal"
        gv.initializer = ir.Constant(ty, values)
        return gv

    def load(ptr: ir.Value, off: ir.Value) -> ir.Value:
        ld = b.load(b.bitcast(b.gep(ptr, [off]), vp))
        ld.align = align
        return ld

    def store(val: ir.Value, ptr: ir.Value, off: ir.Value) -> None:
        st = b.store(val, b.bitcast(b.gep(ptr, [off]), vp))
        st.align = align

    slots = [[b.alloca(vt) for _ in range(v)] for _ in range(p)]  # entry block: SROA'd
    spill = b.alloca(ir.ArrayType(vt, p * v), name="spill")
    prow: list[ir.Value] = []     # (pooled row, dy) of the row being computed
    rowoff = b.alloca(I64, taps, name="rowoff")
    tap_pos = [list(pos) for pos in _ndindex(nest.ks[:-1])]
    if nest.rows:
        tags = b.bitcast(scratch, I64.as_pointer())
        base = b.bitcast(b.gep(scratch, [i64(nest.tag_bytes())]), tp)
        # Per tap row and dimension: the input index offset k * dilation - low padding.
        ktabs = [table(f"k{d}", [pos[d] * nest.rhs_dil[d] - nest.pad[d][0] for pos in tap_pos])
                 for d in range(s - 1)]
        ring = nest.ring()
    else:
        base = x
        xstr = [0] * s
        acc_ = cx
        for d in range(s - 1, -1, -1):
            xstr[d] = acc_
            acc_ *= nest.padded[d]
        xbatch = acc_
        otab = table("koff", [sum(pos[d] * nest.rhs_dil[d] * xstr[d] for d in range(s - 1))
                              for pos in tap_pos] or [0])

    def copy_row(src_row: ir.Value, slot: ir.Value) -> None:
        """Input row `src_row` (a row index of x viewed as [rows, W * C]) zero-padded into
        ring slot `slot`."""
        lo = nest.pad[-1][0]
        width, plen = nest.sp_in[-1], nest.padded[-1]
        x0, x1 = min(max(lo, 0), plen), min(max(lo + width, 0), plen)
        dst = b.gep(base, [b.mul(b.add(slot, i64(1)), i64(nest.row_len))])
        fill(dst, 0, x0 * cx, None)
        if source is None:
            src = b.gep(x, [b.add(b.mul(src_row, i64(width * cx)), i64((x0 - lo) * cx))])
            fill(dst, x0 * cx, x1 * cx, src)
        else:  # the chained nest's output row src_row, written where this row's starts
            sfn, spec = source
            ptr = [b.load(b.gep(extra, [i64(spec.at + k)])) for k in range(3)]
            row0 = b.gep(dst, [i64(lo * cx)])  # (lo >= 0, the whole row: the plan checks)
            at = b.gep(row0, [b.mul(src_row, i64(-width * cx))])
            b.call(sfn, [b.bitcast(ptr[0], tp), b.bitcast(ptr[1], tp), at, src_row,
                         b.add(src_row, i64(1)),
                         b.gep(scratch, [i64(nest.scratch_bytes(_bytes(t)))]),
                         b.bitcast(ptr[2], I8P.as_pointer())])
        fill(dst, x1 * cx, plen * cx, None)

    def fill(dst: ir.Value, lo: int, hi: int, src: ir.Value | None) -> None:
        """dst[lo:hi] = src[0:hi - lo] (zeros when src is None): vectors, then elements."""
        n = hi - lo
        if n <= 0:
            return
        nv = n // lanes
        if nv:
            with for_range(b, i64(0), i64(nv), "cv") as k:
                off = b.mul(k, i64(lanes))
                val = zero if src is None else load(src, off)
                store(val, dst, b.add(off, i64(lo)))
        for e in range(nv * lanes, n):
            val = ir.Constant(t, 0.0 if is_float else 0) if src is None else \
                b.load(b.gep(src, [i64(e)]))
            b.store(val, b.gep(dst, [i64(lo + e)]))

    def tap_rows(bi: ir.Value, outer: list[ir.Value]) -> None:
        """rowoff[t] for output row (bi, outer...): the element offset from `base` of the
        (padded) input row tap row t reads."""
        if not nest.rows:
            xrow = b.mul(bi, i64(xbatch))
            for d in range(s - 1):
                xrow = b.add(xrow, b.mul(outer[d], i64(nest.strides[d] * xstr[d])))
            with for_range(b, i64(0), i64(taps), "tr") as k:
                b.store(b.add(xrow, b.load(b.gep(otab, [i64(0), k]))), b.gep(rowoff, [k]))
            return
        with for_range(b, i64(0), i64(taps), "tr") as k:
            ok: ir.Value = ir.Constant(ir.IntType(1), 1)
            lin = bi
            slot = i64(0)
            for d in range(s - 1):
                i = b.add(b.mul(outer[d], i64(nest.strides[d])),
                          b.load(b.gep(ktabs[d], [i64(0), k])))
                ok = b.and_(ok, b.and_(b.icmp_signed(">=", i, i64(0)),
                                       b.icmp_signed("<", i, i64(nest.sp_in[d]))))
                lin = b.add(b.mul(lin, i64(nest.sp_in[d])), i)
                if ring:
                    slot = b.add(b.mul(slot, i64(nest.ks[d])),
                                 b.urem(b.select(ok, i, i64(0)), i64(nest.ks[d])))
            if not ring:
                slot = k
            with b.if_else(ok) as (yes, no):
                with yes:
                    tag = b.gep(tags, [slot])
                    with b.if_then(b.icmp_signed("!=", b.load(tag), lin)):
                        copy_row(lin, slot)
                        b.store(lin, tag)
                    b.store(b.mul(b.add(slot, i64(1)), i64(nest.row_len)), b.gep(rowoff, [k]))
                with no:
                    b.store(i64(0), b.gep(rowoff, [k]))

    def block(xg: ir.Value, wg: ir.Value, og_: ir.Value, fg: ir.Value, vb: ir.Value,
              pix0: ir.Value, pp: int) -> None:
        accs = slots[:pp]
        for row in accs:
            for slot in row:
                b.store(zero, slot)
        xb = b.add(xg, b.mul(pix0, i64(st_last)))
        wb = b.add(wg, b.mul(vb, i64(lanes)))
        with for_range(b, i64(0), i64(taps), "t") as tr:
            xt = b.add(xb, b.load(b.gep(rowoff, [tr])))
            wt = b.add(wb, b.mul(tr, i64(kw * nest.ci * apad)))
            with for_range(b, i64(0), i64(kw), "kx") as kx:
                xk = b.add(xt, b.mul(kx, i64(dx_step)))
                wk = b.add(wt, b.mul(kx, i64(nest.ci * apad)))
                with for_range(b, i64(0), i64(nest.ci), "c") as c:
                    cur = [[b.load(slot) for slot in row] for row in accs]
                    wc = b.add(wk, b.mul(c, i64(apad)))
                    wv = [load(w, b.add(wc, i64(j * lanes))) for j in range(v)]
                    xc = b.add(xk, c)
                    for q in range(pp):
                        xq = b.add(xc, i64(q * st_last))
                        if nest.xvec:
                            xb_ = b.add(xq, b.mul(vb, i64(lanes)))
                            xs = [load(base, b.add(xb_, i64(j * lanes))) for j in range(v)]
                        else:
                            sc = b.load(b.gep(base, [xq]))
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
        fo = b.add(fg, b.mul(vb, i64(lanes)))
        if epilogue is None and pool is None:
            for q in range(pp):
                for j in range(v):
                    store(b.load(accs[q][j]), out, b.add(ob, i64(q * opix + j * lanes)))
            return
        # The epilogue's code once, in a loop over the block's vectors (not P * V copies:
        # the CNN's compile took twice as long), from a spill of the registers.
        for q in range(pp):
            for j in range(v):
                b.store(b.load(accs[q][j]), b.gep(spill, [i64(0), i64(q * v + j)]))
        with for_range(b, i64(0), i64(pp), "eq") as q:
            for j in range(v):
                val = b.load(b.gep(spill, [i64(0), b.add(b.mul(q, i64(v)), i64(j))]))
                at = b.add(ob, b.add(b.mul(q, i64(opix)), i64(j * lanes)))
                fj = b.add(fo, i64(j * lanes))
                if epilogue is not None:
                    val = epilogue(b, val, fj, at, extra)
                if pool is None:
                    store(val, out, at)
                else:
                    pooled(val, b.add(pix0, q), fj)

    def pooled(val: ir.Value, px: ir.Value, fj: ir.Value) -> None:
        """Fold pixel px's vector into its pooled element (see Pool)."""
        assert pool is not None
        pr, dy = prow
        with b.if_then(b.icmp_signed("<", px, i64(pool.wp * pool.kw))):
            col = b.udiv(px, i64(pool.kw))
            dx = b.urem(px, i64(pool.kw))
            at = b.add(b.mul(b.add(b.mul(pr, i64(pool.wp)), col), i64(opix)), fj)
            first = b.and_(b.icmp_signed("==", dy, i64(0)), b.icmp_signed("==", dx, i64(0)))
            prev = b.select(first, pool.init(vt), load(out, at))
            acc = pool.fold(b, prev, val)
            if pool.post is not None:
                last = b.and_(b.icmp_signed("==", dy, i64(pool.kh - 1)),
                              b.icmp_signed("==", dx, i64(pool.kw - 1)))
                acc = b.select(last, pool.post(b, acc, fj, at, extra), acc)
            store(acc, out, at)

    rows_inner = prod(nest.sp_out[:-1])

    def one_row(row: ir.Value, bi: ir.Value, outer: list[ir.Value]) -> None:
        tap_rows(bi, outer)
        orow = b.mul(row, i64(wo * opix))
        with for_range(b, i64(0), i64(nest.g), "g") as g:
            xg = b.mul(g, i64(nest.gx))
            wg = b.mul(g, i64(taps * kw * nest.ci * apad))
            fg = b.mul(g, i64(apad))
            og_ = b.add(orow, fg)
            with for_range(b, i64(0), i64(apad // lanes // v), "vb") as vbi:
                vb = b.mul(vbi, i64(v))
                full = wo // p
                if full:
                    with for_range(b, i64(0), i64(full), "pb") as pb:
                        block(xg, wg, og_, fg, vb, b.mul(pb, i64(p)), p)
                if wo % p:
                    block(xg, wg, og_, fg, vb, i64(full * p), wo % p)

    if pool is None:
        with for_range(b, begin, end, "row") as row:
            bi = b.sdiv(row, i64(rows_inner))
            rem = b.srem(row, i64(rows_inner))
            outer: list[ir.Value] = [i64(0)] * (s - 1)
            for d in range(s - 2, -1, -1):
                outer[d] = b.srem(rem, i64(nest.sp_out[d]))
                rem = b.sdiv(rem, i64(nest.sp_out[d]))
            one_row(row, bi, outer)
    else:  # [begin, end) are pooled rows of b * hp; 2-D only
        with for_range(b, begin, end, "prow") as pr:
            bi = b.sdiv(pr, i64(pool.hp))
            hq = b.srem(pr, i64(pool.hp))
            with for_range(b, i64(0), i64(pool.kh), "dy") as dy:
                h = b.add(b.mul(hq, i64(pool.kh)), dy)
                prow[:] = [pr, dy]
                one_row(b.add(b.mul(bi, i64(nest.sp_out[0])), h), bi, [h])
    b.ret_void()
    return fn


def _ndindex(dims: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every index of `dims` in row-major order ([()] for no dimension)."""
    out: list[tuple[int, ...]] = [()]
    for n in dims:
        out = [pos + (k,) for pos in out for k in range(n)]
    return out


__all__ = ["Nest", "Pool", "Source", "emit", "EpilogueEmit"]
