"""sort with any element-wise comparator as one JIT-compiled function: a stable merge sort of
each row's index permutation, the comparator region emitted inline (region_emit.py: the
kernels' per-op IR, hence the interpreter's semantics) and called per pair of indices.

The operands arrive as contiguous [rows, n] arrays (the sort dimension last, numpy moves it
there); the function writes each row's permutation, and numpy gathers every operand with it.
Rows are independent, so big sorts split by rows over the native workers.

Per row: insertion sort of runs of RUN elements, then bottom-up merges between the
permutation row and a scratch row, taking the right run's element only when it is strictly
less (stable). For a comparator that is a strict weak order (what sort requires, and what
JAX emits) the stable order is unique, so this equals the interpreter's merge sort
(reduction_sort._merge_sort) bit for bit.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import region_emit
from xlapy.backends.cpu.fp_env import restore_mxcsr, set_ftz_daz
from xlapy.backends.cpu.llvm_util import (
    I1,
    I8P,
    I64,
    VOID,
    Engine,
    for_range,
    new_module,
    smin,
)
from xlapy.backends.cpu.loop_library import Native
from xlapy.backends.cpu.thunks import ptr
from xlapy.backends.cpu.transpose_lib import c_order
from xlapy.ir import Instruction

#: Elements per insertion-sorted run.
RUN = 16
#: Comparisons (n log2 n per row) below which a sort is not split over threads.
SPLIT_COMPARES = 1 << 16
_SIG = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                        ctypes.c_void_p, ctypes.c_void_p)


def supported(instr: Instruction) -> bool:
    comp = instr.called[0]
    return (instr.operands[0].shape.rank > 0 and region_emit.supported(comp)
            and len(region_emit.results(comp)) == 1
            and region_emit.types_ok(*(o.shape.element_type for o in instr.operands)))


def _less(mod: ir.Module, instr: Instruction) -> ir.Function:
    """i1 less(i8** operands, i64 row_base, i64 i, i64 j): the comparator on elements i
    and j of the row."""
    fn = ir.Function(mod, ir.FunctionType(I1, [I8P.as_pointer(), I64, I64, I64]), name="less")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")  # inlined by the light pipeline too (top_k's)
    ops, base, i, j = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    args = []
    for k in range(2 * len(instr.operands)):
        et = instr.operands[k // 2].shape.element_type
        ptr = b.bitcast(b.load(b.gep(ops, [ir.Constant(I64, k // 2)])),
                        ew.storage_type(et).as_pointer())
        v = b.load(b.gep(ptr, [b.add(base, i if k % 2 == 0 else j)]))
        args.append(ew.from_storage(b, v, et))
    (res,) = region_emit.emit(b, instr.called[0], args)
    if res.type != I1:
        res = b.icmp_unsigned("!=", res, ir.Constant(res.type, 0))
    b.ret(res)
    return fn


def _emit(instr: Instruction) -> ir.Module:
    """void sort_rows(i8** operands, i64 row0, i64 row1, i64 n, i64* perm, i64* scratch)."""
    mod = new_module("xlapy_sort")
    less = _less(mod, instr)
    fn = ir.Function(mod, ir.FunctionType(VOID, [I8P.as_pointer(), I64, I64, I64,
                                                 I64.as_pointer(), I64.as_pointer()]),
                     name="sort_rows")
    ops, row0, row1, n, perm_all, tmp_all = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    saved = set_ftz_daz(b)
    c = lambda v: ir.Constant(I64, v)  # noqa: E731
    var = {name: b.alloca(I64, name=name) for name in ("j", "x", "w", "lo", "p", "q", "o")}
    src_v = b.alloca(I64.as_pointer(), name="src")
    dst_v = b.alloca(I64.as_pointer(), name="dst")

    def while_(cond: Callable[[], ir.Value], body: Callable[[], None], name: str) -> None:
        head = fn.append_basic_block(f"{name}.head")
        loop = fn.append_basic_block(f"{name}.body")
        done = fn.append_basic_block(f"{name}.end")
        b.branch(head)
        b.position_at_end(head)
        b.cbranch(cond(), loop, done)
        b.position_at_end(loop)
        body()
        b.branch(head)
        b.position_at_end(done)

    with for_range(b, row0, row1, "r") as r:
        base = b.mul(r, n)
        perm = b.gep(perm_all, [base])
        tmp = b.gep(tmp_all, [base])
        with for_range(b, c(0), n, "init") as i:
            b.store(i, b.gep(perm, [i]))
        # insertion sort of each run [s, min(s + RUN, n))
        with for_range(b, c(0), n, "run", step=RUN) as s:
            end = smin(b, b.add(s, c(RUN)), n)
            with for_range(b, b.add(s, c(1)), end, "ins") as i:
                x = b.load(b.gep(perm, [i]))
                b.store(x, var["x"])
                b.store(i, var["j"])

                def shift_cond() -> ir.Value:
                    j = b.load(var["j"])
                    more = b.icmp_signed(">", j, s)
                    prev_ok = fn.append_basic_block("ins.cmp")
                    join = fn.append_basic_block("ins.join")
                    start = b.block
                    b.cbranch(more, prev_ok, join)
                    b.position_at_end(prev_ok)
                    prev = b.load(b.gep(perm, [b.sub(j, c(1))]))
                    lt = b.call(less, [ops, base, b.load(var["x"]), prev])
                    cmp_end = b.block
                    b.branch(join)
                    b.position_at_end(join)
                    phi = b.phi(I1)
                    phi.add_incoming(ir.Constant(I1, 0), start)
                    phi.add_incoming(lt, cmp_end)
                    return phi

                def shift() -> None:
                    j = b.load(var["j"])
                    b.store(b.load(b.gep(perm, [b.sub(j, c(1))])), b.gep(perm, [j]))
                    b.store(b.sub(j, c(1)), var["j"])

                while_(shift_cond, shift, "shift")
                b.store(b.load(var["x"]), b.gep(perm, [b.load(var["j"])]))
        # bottom-up merges, perm <-> tmp
        b.store(perm, src_v)
        b.store(tmp, dst_v)
        b.store(c(RUN), var["w"])

        def merge_all(src: ir.Value, dst: ir.Value, w: ir.Value) -> None:
            b.store(c(0), var["lo"])

            def blocks_cond() -> ir.Value:
                return b.icmp_signed("<", b.load(var["lo"]), n)

            def one_block() -> None:
                lo = b.load(var["lo"])
                mid = smin(b, b.add(lo, w), n)
                hi = smin(b, b.add(lo, b.mul(w, c(2))), n)
                b.store(lo, var["p"])
                b.store(mid, var["q"])
                b.store(lo, var["o"])

                def out_cond() -> ir.Value:
                    return b.icmp_signed("<", b.load(var["o"]), hi)

                def take() -> None:
                    p, q, o = b.load(var["p"]), b.load(var["q"]), b.load(var["o"])
                    left_done = b.icmp_signed(">=", p, mid)
                    right_done = b.icmp_signed(">=", q, hi)
                    both = fn.append_basic_block("m.both")
                    pick_r = fn.append_basic_block("m.right")
                    pick_l = fn.append_basic_block("m.left")
                    nxt = fn.append_basic_block("m.next")
                    chk = fn.append_basic_block("m.chk")
                    b.cbranch(left_done, pick_r, chk)
                    b.position_at_end(chk)
                    b.cbranch(right_done, pick_l, both)
                    b.position_at_end(both)
                    lv = b.load(b.gep(src, [p]))
                    rv = b.load(b.gep(src, [q]))
                    b.cbranch(b.call(less, [ops, base, rv, lv]), pick_r, pick_l)
                    b.position_at_end(pick_r)
                    b.store(b.load(b.gep(src, [q])), b.gep(dst, [o]))
                    b.store(b.add(q, c(1)), var["q"])
                    b.branch(nxt)
                    b.position_at_end(pick_l)
                    b.store(b.load(b.gep(src, [p])), b.gep(dst, [o]))
                    b.store(b.add(p, c(1)), var["p"])
                    b.branch(nxt)
                    b.position_at_end(nxt)
                    b.store(b.add(o, c(1)), var["o"])

                while_(out_cond, take, "merge")
                b.store(hi, var["lo"])

            while_(blocks_cond, one_block, "blocks")

        def pass_cond() -> ir.Value:
            return b.icmp_signed("<", b.load(var["w"]), n)

        def one_pass() -> None:
            w = b.load(var["w"])
            src, dst = b.load(src_v), b.load(dst_v)
            merge_all(src, dst, w)
            b.store(dst, src_v)
            b.store(src, dst_v)
            b.store(b.mul(w, c(2)), var["w"])

        while_(pass_cond, one_pass, "passes")
        # the sorted row is in src: copy it to perm when that is the scratch row
        src = b.load(src_v)
        with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(src, I64), b.ptrtoint(perm, I64))):
            with for_range(b, c(0), n, "copy") as i:
                b.store(b.load(b.gep(src, [i])), b.gep(perm, [i]))
    restore_mxcsr(b, saved)
    b.ret_void()
    return mod


def plan(instr: Instruction, threads: int = 1) -> Callable[..., Any] | None:
    """run(*operands) -> the sorted operands (one bare, several as a tuple), or None when
    the comparator or a type is outside what region_emit compiles."""
    if not supported(instr):
        return None
    from xlapy.ops.reduction import collate

    # The light pipeline (the comparator inlined, SROA, CFG cleanup): jnp.sort of 1M f32
    # compiled in ~15 ms instead of O3's ~35 (XLA: ~25), its run ~10% slower (~200 ms, XLA
    # ~240); instcombine or GVN on top changed neither.
    eng = Engine(_emit(instr), light=True, exports=["sort_rows"])
    fn = _SIG(eng.address("sort_rows"))
    rank = instr.operands[0].shape.rank
    axis = instr.attrs.dimension % rank
    dims = list(instr.operands[0].shape.dimensions)
    n = dims.pop(axis)
    rows = math.prod(dims)
    big = rows > 1 and rows * n * max(1, n.bit_length()) >= SPLIT_COMPARES
    parts = min(threads, rows) if big else 1

    last = axis == rank - 1
    shape = (*dims, n)
    starts = np.arange(rows, dtype=np.int64)[:, None] * n  # (each row's first flat index)
    table_t = ctypes.c_void_p * len(instr.operands)

    def run(*xs: np.ndarray) -> Any:
        # (numpy's moveaxis and take_along_axis were ~15 of a 16-element sort's ~30 us)
        moved = [c_order(x if last else np.moveaxis(x, axis, -1)).reshape(rows, n)
                 for x in xs]
        perm = np.empty((rows, n), np.int64)
        if rows and n:
            tmp = np.empty((rows, n), np.int64)
            table = table_t(*(ptr(m) for m in moved))
            run_rows(fn, eng, rows, parts, threads, ctypes.addressof(table),
                     (n, ptr(perm), ptr(tmp)), (moved, table, perm, tmp))
            perm += starts
        out = []
        for m in moved:
            got = m.reshape(-1).take(perm.reshape(-1)).reshape(shape)
            out.append(got if last else c_order(np.moveaxis(got, -1, axis)))
        return collate(out)

    run.engine = eng  # type: ignore[attr-defined]  (keeps the code loaded)
    if axis == rank - 1 and parts == 1 and rows and n and (at := eng.address("sort_rows")):
        run.native = Native(0, at, eng, rows, n, n, n)  # type: ignore  (loop_library.py)
    return run


def run_rows(fn: Any, eng: Engine, rows: int, parts: int, threads: int, table: int,
             tail: tuple[Any, ...], keep: tuple[Any, ...]) -> None:
    """fn(table, row0, row1, *tail) over rows [0, rows), cut into `parts` ranges of which the
    native workers run all but the first (this thread's); `keep` stays alive until done."""
    if parts < 2:
        fn(table, 0, rows, *tail)
        return
    from xlapy.backends.cpu import parallel

    cuts = [rows * k // parts for k in range(parts + 1)]
    pool = parallel.pool(threads)
    addr = ctypes.cast(fn, ctypes.c_void_p).value or 0
    futs = [pool.submit(addr, table, cuts[k], cuts[k + 1], *tail, keep=(eng, *keep))
            for k in range(1, parts)]
    fn(table, cuts[0], cuts[1], *tail)
    for f in futs:
        f.result()


__all__ = ["plan", "supported", "run_rows", "RUN", "SPLIT_COMPARES"]
