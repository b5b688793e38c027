"""Batch chains: a batched dot_general, a row kernel over its result and a batched dot_general
of the kernel's result (attention: q k^T, softmax, p v) run batch by batch on each thread,
the intermediates of one batch (or block of rows) at a time per thread.

Run as three thunks, the attention of the `attention` workload (4 x 8 heads of 256 x 64) wrote
8 MB of scores, read them back for the softmax and again for the second product: 10 MB of
peak memory against XLA's 2, the scores leaving L2 between the steps. Here a thread computes
one head's 256 x 256 scores (256 KB, in L2), its softmax rows and its 256 x 64 output before
the next head. The scores lie in the chain's own output where it is not written yet, and the
last heads run in blocks of rows (chain_schedule.py): a row of f32 scores per thread, 32 rows
of bf16 ones, are left, in a buffer on the thread's stack (peak on two threads 2.5 -> 2.0 MB,
f32; bf16 1.25 -> 1.0: the output alone, as XLA's).
Where bf16 dots are widened f32 products (no AMX-BF16), the chain widens their bf16 operands
block by block instead of reading whole f32 copies (chain_widen.py). Where all of a thread's
scratch (whole batches' scores, widening buffers, blocks) fits
chain_schedule.THREAD_STACK_BYTES, it is on the thread's stack and the chain takes no arena
(`Chain.on_stack`; attention_bf16 on AVX2: 320 KB of scores and 192 KB of widened operands a
thread, peak 2.0 -> 1.0 MB, the output alone as XLA's, the same speed).

Bits: whole batches are the same single-threaded BLAS call as `blas.batched_gemm` makes and
the same kernel code over the same rows; the last batches are cut in blocks of rows the same
way on any thread count. So the results never depend on the thread count; they are the three
thunks' except where OpenBLAS sums a block's rows in another order than the whole batch's
(it picks kernels by the row count; the AMX steps never do). Only chains whose dots take that
path (`blas.by_batch`) are formed.

Native runtime (compiled once per process, like regions.py's): `chain_run(desc, lo, hi)` runs
batches [lo, hi) whole, then the thread's own blocks, with a private copy of the pointer
table in which each intermediate's slot points `scratch - first_row * row_bytes` while a
block runs, so the kernel's own indexing and the GEMM steps' `table[slot] + j *
batch_stride + r0 * row_stride` land in the scratch.
"""

from __future__ import annotations

import ctypes
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xlapy.backends.cpu import (
    blas,
    chain_runtime,
    chain_schedule,
    chain_widen,
    dot_views,
    gemm_bf16,
    target,
)
from xlapy.backends.cpu.kernels import Kernel
from xlapy.backends.cpu.threads import NativePool
from xlapy.ir import Instruction
from xlapy.types import ElementType as ET

#: Chains are formed (tests turn it off to compare with the three thunks).
ENABLED = True
#: Chains take a tail kernel (Chain.tail; tests turn it off to compare).
TAILS = True
#: Rows of the smallest f32/f64 block: one (the blocks are the same on any thread count
#: whatever their rows, chain_schedule.py), so the arena holds one row of intermediates per
#: thread. An AMX step's blocks are whole 32-row blocks (gemm_bf16.BM).
ROW_GRANULE = 1


@dataclass
class BatchGemm:
    """out[j] = lhs[j] @ rhs[j] for batch j: each operand a row-major array whose leading
    dimensions are the batch, then one free and one contracting dimension in either order."""

    lhs: int
    rhs: int
    out: int
    nbatch: int
    m: int
    n: int
    k: int
    lhs_t: bool  # lhs stored [k, m] per batch
    rhs_t: bool  # rhs stored [n, k] per batch
    f64: bool
    #: bf16 operands and result on the AMX tiles (gemm_bf16.blas_address), not BLAS.
    bf16: bool = False
    #: An operand read where a view kernel's leaf lies (dot_views.py): (operand slot,
    #: leaf slot, element offset, batch stride, BLAS flag, leading dimension); lhs, rhs.
    lhs_at: tuple[int, int, int, int, str, int] | None = None
    rhs_at: tuple[int, int, int, int, str, int] | None = None

    @property
    def itemsize(self) -> int:
        return 2 if self.bf16 else 8 if self.f64 else 4


@dataclass
class Chain:
    """A batch chain: its three instructions, the GEMMs, the kernel, the intermediates."""

    name: str
    instrs: list[Instruction]
    first: BatchGemm
    kernel: Kernel
    second: BatchGemm
    #: (slot, bytes of one batch) of the first GEMM's and the kernel's results; the kernel's
    #: shares the first's scratch when it is written in place (`in_place`).
    scores: int
    probs: int
    in_place: bool
    #: (view kernel slot, leaf slot) of operands read in place of a view kernel's copy (or
    #: widened from it: `widen`).
    views: list[tuple[int, int]] = field(default_factory=list)
    #: bf16 operands widened block by block (chain_widen.py), their convert kernels dropped.
    widen: list[chain_widen.Widen] = field(default_factory=list)
    #: The element-wise kernel that alone reads the second GEMM's result (a widened bf16
    #: product's rounding), run over each block's rows after it, that result then an
    #: intermediate (`_take_tail`), else None.
    tail: Kernel | None = None
    #: Its schedules (`schedule`): a compile asks ~10 times (the arena bytes, each thread's
    #: stack layout, the thunk), each ~0.15 ms of Python for attention's 32 batches.
    _schedules: dict[tuple[Any, ...], chain_schedule.Schedule] = field(
        default_factory=dict, repr=False, compare=False)

    @property
    def batch_bytes(self) -> int:
        return self.first.m * self.first.n * self.first.itemsize

    @property
    def out(self) -> int:
        """The chain's output slot: its tail's, else the second GEMM's."""
        return self.tail.output if self.tail is not None else self.second.out

    def inside(self) -> tuple[int, ...]:
        """Slots the chain holds in its scratch or reads in place of (its intermediates, the
        view kernels it reads from their leaves): no buffer, no thunk of their own."""
        return (*(s for s, _, _ in self.remaps()), *(x for x, _ in self.views))

    def remaps(self) -> list[tuple[int, int, int]]:
        """(slot, bytes before its row in a block's scratch per block row, bytes per row)
        of each intermediate: the kernel's result over the scores in place, else after
        them; a tail's input after those."""
        row = self.first.n * self.first.itemsize
        out = [(self.scores, 0, row), (self.probs, 0 if self.in_place else row, row)]
        if self.tail is not None:
            out.append((self.second.out, row * (1 if self.in_place else 2),
                        self.second.n * self.second.itemsize))
        return out

    def schedule(self, parts: int) -> chain_schedule.Schedule:
        """Where the intermediates live on `parts` threads (chain_schedule.py): mostly in
        the output not yet written."""
        f, s = self.first, self.second
        need = max(at + r for _, at, r in self.remaps())
        out_row = s.n * (self.tail.root.shape.dtype.itemsize if self.tail is not None
                         else s.itemsize)
        key = (parts, need, out_row, chain_schedule.STACK_BYTES,
               chain_schedule.MAX_BLOCKED_SHARE, chain_schedule.MAX_RATIO)
        got = self._schedules.get(key)
        if got is None:
            got = self._schedules[key] = chain_schedule.plan(
                f.nbatch, f.m, need, out_row, parts, gemm_bf16.BM if f.bf16 else ROW_GRANULE,
                stack=chain_schedule.STACK_BYTES)
        return got

    def scratch_bytes(self, parts: int) -> int:
        """Arena bytes for `parts` threads (`schedule`), then each thread's widening
        buffers (`widen_at`); none when each thread's scratch is on its stack (`on_stack`)."""
        return 0 if self.on_stack(parts) else self.widen_at(parts, parts)

    def stack_layout(self, parts: int, p: int) -> tuple[int, int, int]:
        """Thread p's scratch on its stack (`on_stack`): the byte offsets of its widening
        buffers and of its block scratch, and the bytes in all (its arena share first)."""
        sched = self.schedule(parts)
        nxt = sched.arena_at[p + 1] if p + 1 < len(sched.arena_at) else sched.arena_bytes
        wide = _aligned(nxt - sched.arena_at[p])
        blocks = _aligned(wide + self.widen_bytes())
        return wide, blocks, blocks + sched.stack_bytes

    def on_stack(self, parts: int) -> bool:
        """Whether every thread's scratch fits chain_schedule.THREAD_STACK_BYTES: then it
        is on the thread's stack (chain_run's buffer) and the chain takes no arena."""
        n = len(self.schedule(parts).arena_at)
        return max(self.stack_layout(parts, p)[2] for p in range(n)) <= \
            chain_schedule.THREAD_STACK_BYTES

    def widen_bytes(self) -> int:
        """Bytes of one thread's widening buffers (chain_widen.py)."""
        return sum(w.buffer_bytes(self.first.m) for w in self.widen)

    def widen_at(self, parts: int, p: int) -> int:
        """Byte offset of thread p's widening buffers in the chain's arena bytes."""
        at = -(-self.schedule(parts).arena_bytes // chain_widen.ALIGN) * chain_widen.ALIGN
        return at + min(p, max(1, min(parts, self.first.nbatch))) * self.widen_bytes()


def _aligned(n: int) -> int:
    return -(-n // chain_widen.ALIGN) * chain_widen.ALIGN


def _strided(view: dot_views.View, dims: tuple[int, ...], nb: int, rows: int, cols: int
             ) -> tuple[int, int, int, str, int] | None:
    """(leaf, offset, batch stride, flag, ld) of an operand that is `view`, its matrix
    dimensions `rows`, `cols` (indices), or None: batch dimensions one uniform stride, one
    matrix dimension of unit stride (as blas._op takes views)."""
    st = view.strides
    batch = [(dims[i], st[i]) for i in range(nb) if dims[i] > 1]
    if any(o[1] != i[1] * i[0] for o, i in zip(batch, batch[1:])):
        return None
    sr, sc = st[rows], st[cols]
    if sc == 1 and sr >= dims[cols]:
        flag, ld = "N", sr
    elif sr == 1 and sc >= dims[rows]:
        flag, ld = "T", sc
    else:
        return None
    if view.offset < 0 or min(s for _, s in batch or [(1, 0)]) < 0:
        return None
    return view.leaf, view.offset, batch[-1][1] if batch else 0, flag, ld


def batch_gemm(instr: Instruction, slot: Mapping[int, int],
               views: Mapping[int, dot_views.View] | None = None) -> BatchGemm | None:
    """The BatchGemm of an f32/f64 dot_general whose batch dimensions lead both operands
    (in order) with one free and one contracting dimension each, taking `blas.by_batch`'s
    path (one BLAS call per batch), or None."""
    if instr.opcode != "dot_general":
        return None
    a = instr.attrs
    lhs, rhs = (o.shape for o in instr.operands)
    et = instr.shape.element_type
    bf16 = et == ET.BF16 and gemm_bf16.takes(instr)
    if not bf16 and not (lhs.element_type == rhs.element_type == et and
                         et in (ET.F32, ET.F64)):
        return None
    lb, rb = list(a.lhs_batching_dimensions), list(a.rhs_batching_dimensions)
    nb = len(lb)
    if not nb or lb != list(range(nb)) or rb != list(range(nb)) \
            or lhs.rank != nb + 2 or rhs.rank != nb + 2:
        return None
    lc, rc = list(a.lhs_contracting_dimensions), list(a.rhs_contracting_dimensions)
    if len(lc) != 1 or len(rc) != 1:
        return None
    ld, rd = lhs.dimensions, rhs.dimensions
    nbatch = math.prod(ld[:nb])
    lhs_t, rhs_t = lc[0] == nb, rc[0] == nb + 1  # stored [k, m] / [n, k] per batch
    m, k = (ld[nb + 1] if lhs_t else ld[nb]), ld[lc[0]]
    n = rd[nb] if rhs_t else rd[nb + 1]
    # extents of 1 take other BLAS flags in blas._op: left to the batched thunk
    if nbatch < 1 or min(m, n, k) < 2 or max(m, n, k) > (1 << 31) - 1:
        return None
    if bf16:  # the library thunk's AMX kernel, one product per step: the same bits
        if lhs_t or nbatch < 2 or not gemm_bf16.chainable(m, n, k):
            return None
        return BatchGemm(slot[id(instr.operands[0])], slot[id(instr.operands[1])],
                         slot[id(instr)], nbatch, m, n, k, lhs_t, rhs_t, False, bf16=True)
    if not blas.by_batch(nbatch, m, n, k) or (nbatch > 16 and m * n * k < 1 << 14):
        return None  # the per-batch row split, or NumPy's loop for tiny products
    x, y = slot[id(instr.operands[0])], slot[id(instr.operands[1])]
    at: list[tuple[int, int, int, int, str, int] | None] = [None, None]
    for k_, (s, dims, rows, cols) in enumerate((
            (x, tuple(ld), nb + 1 if lhs_t else nb, lc[0]),
            (y, tuple(rd), rc[0], nb if rhs_t else nb + 1))):
        v = (views or {}).get(s)
        got = _strided(v, dims, nb, rows, cols) if v is not None else None
        if got is not None:
            at[k_] = (s, *got)
    return BatchGemm(x, y, slot[id(instr)], nbatch, m, n, k, lhs_t, rhs_t, et == ET.F64,
                     lhs_at=at[0], rhs_at=at[1])


def plan(instrs: Sequence[Instruction], slot: Mapping[int, int],
         kernels: Mapping[int, Kernel], in_place_leaves: Callable[[Kernel], set[int]],
         readers: Mapping[int, list[int]], results: AbstractSet[int],
         taken: AbstractSet[int], views: Mapping[int, dot_views.View] | None = None
         ) -> list[Chain]:
    """Chains among the thunk instructions `instrs` (none in `taken`, e.g. regions): a dot
    whose result only a row kernel reads (`in_place_leaves`: at the written element or
    along its row), whose result only a second dot reads as its lhs, neither a result;
    `readers`: slot -> positions of the instructions reading it; `kernels`: root id -> its
    kernel. Other thunks may lie between the three: the chain runs in the second dot's
    place (every value is written once, so the first two may run that late; the executable
    orders its arena's live ranges so)."""
    chains: list[Chain] = []
    if not ENABLED:
        return chains
    for pa, a in enumerate(instrs):
        if a.opcode != "dot_general" or id(a) in taken or id(a) not in slot:
            continue
        rk = readers.get(slot[id(a)], [])
        if len(rk) != 1 or rk[0] <= pa:
            continue
        kin = instrs[rk[0]]
        if id(kin) not in slot:
            continue
        rc = readers.get(slot[id(kin)], [])
        if len(rc) != 1 or rc[0] <= rk[0]:
            continue
        found = _match(a, kin, instrs[rc[0]], rk[0], rc[0], slot, kernels, in_place_leaves,
                       readers, results, taken)
        if found is not None:
            ch = Chain(f"chain{len(chains)}", [a, kin, instrs[rc[0]]], *found)
            _take_views(ch, (pa, rc[0]), views or {}, readers, results, slot)
            ch.widen = chain_widen.find([a, instrs[rc[0]]], (ch.first, ch.second),
                                        (pa, rc[0]), slot, kernels, readers, results,
                                        {x for x, _ in ch.views} | {ch.scores, ch.probs})
            ch.views.extend((w.slot, w.leaf) for w in ch.widen)
            _take_tail(ch, instrs, rc[0], kernels, readers, results, taken)
            chains.append(ch)
    return chains


def _take_tail(ch: Chain, instrs: Sequence[Instruction], pc: int,
               kernels: Mapping[int, Kernel], readers: Mapping[int, list[int]],
               results: AbstractSet[int], taken: AbstractSet[int]) -> None:
    """The chain's tail (Chain.tail): the kernel that alone reads the second GEMM's
    result and nothing else, of its shape (a widened bf16 product's rounding:
    attention_bf16's 2 MB f32 P @ V was written whole, then rounded). The executable
    emits it again flat, over rows (memory_plan `_tail_rows`: element-wise at its index,
    or no tail)."""
    s = ch.second
    rt = readers.get(s.out, [])
    if not TAILS or s.out in results or len(rt) != 1 or rt[0] <= pc:
        return
    t = instrs[rt[0]]
    spec = kernels.get(id(t))
    c = ch.instrs[2]
    if spec is None or id(t) in taken or spec.partial or spec.extra or not spec.splittable \
            or spec.inputs != [s.out] or s.bf16 \
            or tuple(t.shape.dimensions) != tuple(c.shape.dimensions):
        return
    ch.tail = spec
    ch.instrs.append(t)


def _take_views(ch: Chain, pos: tuple[int, int], views: Mapping[int, dot_views.View],
                readers: Mapping[int, list[int]], results: AbstractSet[int],
                slot: Mapping[int, int]) -> None:
    """Operands of the chain's GEMMs that are view kernels read by that GEMM alone, not
    results, read where their leaf lies (the view kernel's copy dropped); else as copied."""
    for g, p, instr in ((ch.first, pos[0], ch.instrs[0]), (ch.second, pos[1], ch.instrs[2])):
        fresh = batch_gemm(instr, slot, views)
        for name in ("lhs_at", "rhs_at"):
            at = getattr(fresh, name) if fresh is not None and not g.bf16 else None
            if at is None or readers.get(at[0], []) != [p] or at[0] in results \
                    or at[0] in (ch.scores, ch.probs):
                continue
            setattr(g, name, at)
            ch.views.append((at[0], at[1]))


def _match(a: Instruction, kin: Instruction, c: Instruction, pk: int, pc: int,
           slot: Mapping[int, int], kernels: Mapping[int, Kernel],
           in_place_leaves: Callable[[Kernel], set[int]], readers: Mapping[int, list[int]],
           results: AbstractSet[int], taken: AbstractSet[int]
           ) -> tuple[BatchGemm, Kernel, BatchGemm, int, int, bool] | None:
    if any(id(x) in taken for x in (a, kin, c)):
        return None
    first, second = batch_gemm(a, slot), batch_gemm(c, slot)
    spec = kernels.get(id(kin))
    if first is None or second is None or spec is None:
        return None
    s, p = first.out, spec.output
    dims = tuple(kin.shape.dimensions)
    if tuple(a.shape.dimensions) != dims or kin.shape.element_type != a.shape.element_type \
            or spec.partial or not spec.splittable or spec.outer != first.nbatch * first.m:
        return None
    if s in results or p in results or s not in spec.inputs or s not in in_place_leaves(spec):
        return None
    if readers.get(s, []) != [pk] or readers.get(p, []) != [pc]:
        return None
    if second.lhs != p or second.lhs_t or second.rhs == p or second.nbatch != first.nbatch \
            or second.m != first.m or second.k != first.n or second.f64 != first.f64 \
            or second.bf16 != first.bf16:
        return None
    in_place = s in in_place_leaves(spec)
    return first, spec, second, s, p, in_place



def chain_thunk(chain: Chain, kernel_address: int, parts: int, pool: Callable[[], NativePool],
                scratch_offset: Callable[[], int], fresh: list[tuple[int, tuple[int, ...], Any]],
                keep: dict[int, Any], tail_address: int = 0) -> Callable[..., None]:
    """run(table, values, runtime, process): the chain's batches shared by `parts` threads
    as `chain.schedule(parts)` lays them out, each thread with its own copy of the table and
    its own arena scratch (`scratch_offset()`: its byte offset in the arena, values[-1][0]).
    `tail_address`: the tail's rows variant (Chain.tail)."""
    from xlapy.backends.cpu import recycle, thunks

    nb = chain.first.nbatch
    parts = max(1, min(parts, nb))
    sched = chain.schedule(parts)
    tgt = target.current()
    built: list[tuple[np.ndarray, list[int]]] = []  # made on the first run (`_steps`)

    def _steps() -> tuple[np.ndarray, list[int]]:
        """The records, on the first run: a bf16 step's AMX kernel is built then (once per
        process, gemm_bf16._compiled), not in the compile."""
        if not built:
            with target.use(tgt):
                recs = chain_runtime.records(chain, kernel_address, tail_address)
            built.append(recs)  # (a concurrent first run makes equal records: either wins)
        return built[0]

    # each widen step's buffer: its offset in the thread's widening buffers
    buf_at = list(np.cumsum([0] + [w.buffer_bytes(chain.first.m) for w in chain.widen]))

    remaps = chain.remaps()
    # per thread: its blocks (batch, row, rows, byte offset) and whether each is in the arena
    plans = [(np.array([(x.batch, x.row, x.rows, x.at) for x in bs], np.int64).reshape(-1, 4),
              np.array([x.arena for x in bs], bool)) for bs in sched.blocks]

    widen_at = [chain.widen_at(parts, p) for p in range(parts)]
    stacked = chain.on_stack(parts)
    layouts = [chain.stack_layout(parts, p) for p in range(parts)]

    def _descs(t: Any, raw_base: int, out: int) -> tuple[list[Any], list[np.ndarray], Any]:
        """(per-thread table copies, descriptors, the shared counter) for table `t`, the
        chain's arena scratch at `raw_base` and its output at `out`."""
        tables, descs = [], []
        counter = np.zeros(1, np.int64)
        steps, widen = _steps()
        for p in range(parts):
            tp = type(t).from_buffer_copy(t)
            # (on the stack, chain_run's buffer: byte x of it is the address -1 - x)
            wide, blocks, stack = layouts[p] if stacked else (0, 0, sched.stack_bytes)
            mine = -1 if stacked else raw_base + sched.arena_at[p]
            at = sched.reserve[p]
            whole = mine if at is None else out + at
            words = [ctypes.addressof(tp), counter.ctypes.data, chain.first.m, whole,
                     stack, len(remaps)]
            for r in remaps:
                words += r
            blk, arena = plans[p]
            blk = blk.copy()
            blk[:, 3] = np.where(arena, mine - blk[:, 3] if stacked else mine + blk[:, 3],
                                 out + blk[:, 3])
            if sched.stack_bytes:  # the block scratch on the thread's stack
                blk[arena, 3] = -1 - blocks
            desc = np.concatenate([np.array(words, np.int64), steps, [len(blk)],
                                   blk.reshape(-1)])
            bufs = -1 - wide if stacked else raw_base + widen_at[p]
            for k, r in enumerate(widen):  # this thread's buffers (record words BUF)
                word = len(words) + 1 + r * chain_runtime.STEP + chain_widen.BUF
                desc[word] = bufs - int(buf_at[k]) if stacked else bufs + int(buf_at[k])
            tables.append(tp)
            descs.append(desc)
        return tables, descs, counter

    # the last call's descriptors, reused while the scratch and output stay where they were
    # (the Python above took ~22 us of a 0.7 ms chain): (key, tables, descs, their pristine
    # copies, counter); only a caller holding `reuse` touches them (a concurrent call of the
    # executable, on its private table and arena, builds its own)
    reuse = threading.Lock()
    last: list[Any] = []

    def launch(tables: list[Any], descs: list[np.ndarray], counter: Any) -> None:
        blas.ready(pool())
        addr = chain_runtime.runtime(bool(chain.widen))[1]  # built on the first run
        if parts == 1:
            chain_runtime.RUN_T(addr)(descs[0].ctypes.data, 0, sched.shared)
            return
        pool().share([(addr, (descs[p].ctypes.data, 0, sched.shared)) for p in range(parts)],
                     parts, (tables, descs, counter))

    def run(t: Any, v: list[Any], rt: Any, pr: Any) -> None:
        for s, dims, dtype in fresh:
            arr = recycle.output(keep, s, dims, dtype)
            v[s] = arr
            t[s] = thunks.ptr(arr)
        raw = v[-1][0]
        raw_base = raw.ctypes.data
        raw_base += (-raw_base) % recycle.ALIGN + scratch_offset()
        out = int(t[chain.out])
        if not reuse.acquire(blocking=False):
            launch(*_descs(t, raw_base, out))
            return
        try:
            key = (raw_base, out, ctypes.sizeof(t))
            if last and last[0] == key:
                _, tables, descs, pristine, counter = last
                size = ctypes.sizeof(t)
                for tp in tables:  # the call's pointers (arguments, outputs)
                    ctypes.memmove(tp, t, size)
                for d, d0 in zip(descs, pristine):  # M cells, widen steps' last batch
                    np.copyto(d, d0)
                counter[0] = 0
            else:
                tables, descs, counter = _descs(t, raw_base, out)
                last[:] = [key, tables, descs, [d.copy() for d in descs], counter]
            launch(tables, descs, counter)
        finally:
            reuse.release()

    return run


def dropped(chains: Sequence[Chain], regions: Sequence[Any]) -> set[int]:
    """Outputs of kernels no thunk runs: view and convert kernels whose result a batch chain
    reads (or widens) from their leaf instead (the chain drops their thunks), outside
    `regions`. Not compiled: x86-64-v3's attention_bf16 compiled three bf16 -> f32 converts
    for nothing (~5 ms of its ~35 ms cold compile)."""
    inside = {m.slot for r in regions for m in r.members}
    return {x for ch in chains for x, _ in ch.views} - inside


__all__ = ["BatchGemm", "Chain", "batch_gemm", "chain_thunk", "dropped", "plan"]
