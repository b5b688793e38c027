"""A sort of which only the first k positions are read (top_k) as a JIT partial selection.

JAX's `lax.top_k` (chlo.top_k, lowered by passes/chlo_lowering.py) and XLA's `TopK` custom
call arrive as a stable sort of (x, iota) whose results are only ever sliced to their first k
positions along the sort dimension. Sorting every row to keep k of n elements costs
n log n compares per row; this keeps, per row, the k first elements of the stable order in a
sorted buffer while scanning the row once: an element enters only when it is strictly less
than the buffer's last (an equal one that comes later stays behind it: stable), and is
inserted after the elements it is not less than. For a strict weak order comparator (what
sort requires) the k first elements of the stable order are unique, so this equals the full
sort's prefix bit for bit. A random row costs about n compares plus k log(n/k) insertions;
an adversarial one (every element entering) n k / 2 moves, hence the bound on k.

The comparator is the sort's own region, emitted inline (sort_emit._less). Positions past k
along the sort dimension of the result are left unwritten: `prefix` checks that every use of
the sort is a slice that never reads them, and that no result of the sort leaves the
computation. So the full-size results are recycled across calls (recycle.py): a fresh one
would cost a page fault per row of a 4 KB row for the k values written in it.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy import denormal
from xlapy.backends.cpu import cache, recycle, sort_emit, target
from xlapy.backends.cpu.fp_env import restore_mxcsr, set_ftz_daz
from xlapy.backends.cpu.llvm_util import I8P, I64, VOID, Engine, for_range, new_module
from xlapy.backends.cpu.loop_library import Native
from xlapy.backends.cpu.once import once
from xlapy.backends.cpu.transpose_lib import c_order
from xlapy.ir import Computation, Instruction
from xlapy.ir.computation import make_instruction
from xlapy.ops.attrs import ComparisonType
from xlapy.ops.core import ParameterAttrs
from xlapy.types import ElementType as ET
from xlapy.types import Shape

#: The largest k selected this way (above it a full sort is cheaper on adversarial rows).
#: An element enters after a binary search of the kept ones and one memmove (from
#: LINEAR_K on): k = 100 of 32768 per row was a full sort, 162 ms against XLA's 5.4; a row
#: of ascending values (every element entering) costs what XLA's does up to k = 512.
MAX_K = 512
#: k up to which an entering element walks the kept ones from the end instead (k = 5 of an
#: ascending 4096: 0.8-1.2 ms walking, 2.8 searching; k = 64: 9.1-9.6 against 5.3).
LINEAR_K = 16
_SIG = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                        ctypes.c_int64, ctypes.c_void_p)


def prefix(instr: Instruction) -> int | None:
    """How many leading positions along the sort dimension any use reads, when every use of
    `instr` (through get_tuple_element for several operands) is a slice; else None."""
    rank = instr.operands[0].shape.rank
    if rank == 0 or instr.parent is None:
        return None
    axis = instr.attrs.dimension % rank
    root = instr.parent.root
    values = [instr]
    if instr.shape.is_tuple:
        if instr is root or any(u.opcode != "get_tuple_element" for u in instr.users):
            return None
        values = list(instr.users)
    limits = []
    for v in values:
        if v is root or not v.users or any(u.opcode != "slice" for u in v.users):
            return None
        limits += [u.attrs.limit_indices[axis] for u in v.users]
    return max(limits) if limits else None


def _strict_weak(instr: Instruction) -> bool:
    """The comparator is one LT/GT compare of operand 0 that orders every value: integers,
    or floats under TOTALORDER (a FLOAT compare with NaN is no strict weak order, and the
    interpreter's merge sort result then depends on its merge pattern)."""
    from xlapy.ops.reduction_sort import simple_order

    order = simple_order(instr.called[0])
    if order is None:
        return False
    et = instr.operands[0].shape.element_type
    return not et.is_float or order[1] is ComparisonType.TOTALORDER


def _emit(instr: Instruction) -> ir.Module:
    """void topk_rows(i8** operands, i64 row0, i64 row1, i64 n, i64 k, i64* perm): perm
    [rows, k] gets, per row, the indices of the k first elements of the stable order."""
    mod = new_module("xlapy_topk")
    less = sort_emit._less(mod, instr)
    fn = ir.Function(mod, ir.FunctionType(VOID, [I8P.as_pointer(), I64, I64, I64, I64,
                                                 I64.as_pointer()]), name="topk_rows")
    ops, row0, row1, n, k, perm_all = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    saved = set_ftz_daz(b)
    c = lambda v: ir.Constant(I64, v)  # noqa: E731
    cnt_v = b.alloca(I64, name="cnt")
    pos_v = b.alloca(I64, name="pos")
    lo_v = b.alloca(I64, name="lo")
    end_v = b.alloca(I64, name="end")  # the slot j takes before the search
    memmove = mod.declare_intrinsic("llvm.memmove", [I8P, I8P, I64])
    with for_range(b, row0, row1, "r") as r:
        base = b.mul(r, n)
        out = b.gep(perm_all, [b.mul(r, k)])
        b.store(c(0), cnt_v)
        with for_range(b, c(0), n, "j") as j:
            cnt = b.load(cnt_v)
            on_full = fn.append_basic_block("full")
            on_fill = fn.append_basic_block("fill")
            enter = fn.append_basic_block("enter")
            skip = fn.append_basic_block("skip")
            b.cbranch(b.icmp_signed(">=", cnt, k), on_full, on_fill)
            b.position_at_end(on_full)  # j enters only when less than the last (dropped)
            b.store(b.sub(k, c(1)), pos_v)
            last = b.load(b.gep(out, [b.sub(k, c(1))]))
            b.cbranch(b.call(less, [ops, base, j, last]), enter, skip)
            b.position_at_end(on_fill)
            b.store(cnt, pos_v)
            b.store(b.add(cnt, c(1)), cnt_v)
            b.branch(enter)
            b.position_at_end(enter)
            place = fn.append_basic_block("place")
            linear = fn.append_basic_block("linear")
            search = fn.append_basic_block("search")
            b.cbranch(b.icmp_signed("<=", k, c(LINEAR_K)), linear, search)
            # a short buffer: shifted up one by one from the end, while j is less
            b.position_at_end(linear)
            head = fn.append_basic_block("shift.head")
            body = fn.append_basic_block("shift.body")
            more = fn.append_basic_block("shift.cmp")
            b.branch(head)
            b.position_at_end(head)
            pos = b.load(pos_v)
            b.cbranch(b.icmp_signed(">", pos, c(0)), more, place)
            b.position_at_end(more)
            prev = b.load(b.gep(out, [b.sub(pos, c(1))]))
            b.cbranch(b.call(less, [ops, base, j, prev]), body, place)
            b.position_at_end(body)
            b.store(prev, b.gep(out, [pos]))
            b.store(b.sub(pos, c(1)), pos_v)
            b.branch(head)
            # a long one: the insertion point found by a binary search (the kept elements
            # are in the stable order: after every one j is not less than), one memmove
            b.position_at_end(search)
            b.store(b.load(pos_v), end_v)
            b.store(c(0), lo_v)
            head = fn.append_basic_block("search.head")
            body = fn.append_basic_block("search.body")
            done = fn.append_basic_block("search.end")
            b.branch(head)
            b.position_at_end(head)
            b.cbranch(b.icmp_signed("<", b.load(lo_v), b.load(pos_v)), body, done)
            b.position_at_end(body)
            lo, hi = b.load(lo_v), b.load(pos_v)
            mid = b.lshr(b.add(lo, hi), c(1))
            before = b.call(less, [ops, base, j, b.load(b.gep(out, [mid]))])
            b.store(b.select(before, lo, b.add(mid, c(1))), lo_v)
            b.store(b.select(before, mid, hi), pos_v)
            b.branch(head)
            b.position_at_end(done)
            at = b.load(lo_v)
            b.call(memmove, [b.bitcast(b.gep(out, [b.add(at, c(1))]), I8P),
                             b.bitcast(b.gep(out, [at]), I8P),
                             b.mul(b.sub(b.load(end_v), at), c(8)),
                             ir.Constant(ir.IntType(1), 0)])
            b.store(at, pos_v)
            b.branch(place)
            b.position_at_end(place)
            b.store(j, b.gep(out, [b.load(pos_v)]))
            b.branch(skip)
            b.position_at_end(skip)
    restore_mxcsr(b, saved)
    b.ret_void()
    return mod


def selects(x: Instruction, k: int) -> bool:
    """Whether chlo.top_k of x (along its last dimension) runs as this selection: 0 < k <=
    MAX_K, at most a quarter of the row, an element type the comparator compiles for."""
    from xlapy.backends.cpu import region_emit

    dims = x.shape.dimensions
    return bool(dims) and 0 < k <= MAX_K and 4 * k <= dims[-1] and \
        region_emit.types_ok(x.shape.element_type) and not x.shape.element_type.is_complex


@dataclass(frozen=True)
class _Selection:
    """What `_emit` reads of a sort (its operands' types, its comparator): chlo.top_k's."""

    operands: tuple[Instruction, ...]
    called: tuple[Computation, ...]


def _top_k_order(et: ET, largest: bool) -> Computation:
    """chlo.top_k's comparator: a GT (largest) / LT compare of two elements, floats in
    total order (NaN largest, -0 below +0), integers in their own order."""
    from xlapy.ops.attrs import ComparisonDirection
    from xlapy.ops.elementwise_compare import CompareAttrs

    comp = Computation(f"top_k_order_{et.hlo_name}")
    s = Shape.scalar(et)
    a, b = (comp.add(Instruction("parameter", [], s, ParameterAttrs(n, s), name=f"p{n}"))
            for n in range(2))
    ctype = ComparisonType.TOTALORDER if et.is_float else \
        ComparisonType.SIGNED if et.is_signed else ComparisonType.UNSIGNED
    comp.root = comp.add(make_instruction("compare", [a, b], CompareAttrs(
        ComparisonDirection.GT if largest else ComparisonDirection.LT, ctype)))
    return comp


@once
def _library(tgt: target.CpuTarget, flushing: bool, et: ET, largest: bool) -> Engine:
    """chlo.top_k's selection for one element type and direction, built once per process
    (and cached on disk) like XLA:CPU's TopK runtime function: the rows, n and k are its
    arguments. It was compiled for each program (top_k's 12-17 ms compile, ~8 ms of them
    LLVM's code generation of this module)."""
    with target.use(tgt), denormal.use(denormal.FTZ if flushing else denormal.IEEE):
        s = Shape.scalar(et)
        sel = _Selection((Instruction("parameter", [], s, ParameterAttrs(0, s)),),
                         (_top_k_order(et, largest),))
        return cache.library_engine(("top_k", et.hlo_name, largest),
                                    lambda: _emit(sel),  # type: ignore[arg-type]
                                    "top_k-light", light=True, exports=["topk_rows"])


def plan_top_k(instr: Instruction, threads: int = 1) -> Callable[..., Any] | None:
    """run(x) -> (values, s32 indices) of chlo.top_k (topk_select.py makes it from a sorted
    iota): the selection over x alone, an element's index its column; fresh [.., k]
    results, no full-size buffer. None when `selects` says no."""
    (x,) = instr.operands
    k = instr.attrs.k
    if not selects(x, k):
        return None
    dims = list(x.shape.dimensions)
    n = dims.pop()
    rows = math.prod(dims)
    eng = _library(target.current(), denormal.flushing(), x.shape.element_type,
                   instr.attrs.largest)
    fn = _SIG(eng.address("topk_rows"))
    parts = min(threads, rows) if rows > 1 and rows * n >= sort_emit.SPLIT_COMPARES else 1

    def run(xv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = c_order(xv).reshape(rows, n)
        perm = np.empty((rows, k), np.int64)
        if rows:
            table = (ctypes.c_void_p * 1)(m.ctypes.data)
            sort_emit.run_rows(fn, eng, rows, parts, threads, ctypes.addressof(table),
                               (n, k, perm.ctypes.data), (m, table, perm))
        values = np.take_along_axis(m, perm, axis=-1).reshape(*dims, k)
        return values, perm.astype(np.int32).reshape(*dims, k)

    run.engine = eng  # type: ignore[attr-defined]  (keeps the code loaded)
    if parts == 1 and rows and n and (at := eng.address("topk_rows")):  # (loop_library.py)
        run.native = Native(1, at, eng, rows, n, k, k, indices=True)  # type: ignore
    return run


def plan(instr: Instruction, threads: int = 1) -> Callable[..., Any] | None:
    """run(*operands) -> the sort's results with only the first k positions along the sort
    dimension written, or None when the sort is not such a top-k (`prefix`, a comparator that
    is not a strict weak order of operand 0, k above MAX_K or above a quarter of the row)."""
    k = prefix(instr)
    if k is None or k == 0 or not _strict_weak(instr) or not sort_emit.supported(instr):
        return None
    from xlapy.ops.reduction import collate

    rank = instr.operands[0].shape.rank
    axis = instr.attrs.dimension % rank
    dims = list(instr.operands[0].shape.dimensions)
    n = dims.pop(axis)
    if k > MAX_K or 4 * k > n:
        return None
    rows = math.prod(dims)
    # The light pipeline (SROA, CFG cleanup, the comparator inlined): O3 took 25 ms of
    # top_k's compile (4096x1024, k=16) for a run time within 1% of the light one's.
    eng = Engine(_emit(instr), light=True, exports=["topk_rows"])
    fn = _SIG(eng.address("topk_rows"))
    parts = min(threads, rows) if rows > 1 and rows * n >= sort_emit.SPLIT_COMPARES else 1
    keep: dict[int, Any] = {}  # the full-size results, reused once nothing holds them

    last = axis == rank - 1  # (lax.top_k's: no moved views, numpy's moveaxis ~5 us each)
    row_of = np.arange(rows)[:, None]

    def run(*xs: np.ndarray) -> Any:
        moved = [c_order(x if last else np.moveaxis(x, axis, -1)).reshape(rows, n)
                 for x in xs]
        perm = np.empty((rows, k), np.int64)
        if rows:
            table = (ctypes.c_void_p * len(moved))(*(m.ctypes.data for m in moved))
            sort_emit.run_rows(fn, eng, rows, parts, threads, ctypes.addressof(table),
                               (n, k, perm.ctypes.data), (moved, table, perm))
        out = []
        for o, (x, m) in enumerate(zip(xs, moved)):
            res = recycle.output(keep, o, x.shape, x.dtype)
            dst = res.reshape(rows, n) if last else np.moveaxis(res, axis, -1)
            picked = m[row_of, perm]
            dst[..., :k] = picked if last else picked.reshape(*dims, k)
            out.append(res)
        return collate(out)

    run.engine = eng  # type: ignore[attr-defined]  (keeps the code loaded)
    if last and parts == 1 and rows and n and (at := eng.address("topk_rows")):
        run.native = Native(1, at, eng, rows, n, k, n)  # type: ignore  (loop_library.py)
    return run


__all__ = ["plan", "plan_top_k", "prefix", "selects", "MAX_K"]
