"""Native scatter (an op_emit.py function), exact to the interpreter
(xlapy/ops/indexing_scatter.py): the operand is copied into the result, then every update is
applied in place in the interpreter's (XLA CPU's) order - scatter positions row-major, then
each window row-major - through the update region compiled inline (region_emit.py: "replace",
one binary op, or any small element-wise region such as `.at[].apply(sin)`). A window with
any part out of bounds is skipped whole; a negative or huge (u64) start is out of bounds.
General dimension numbers: update_window_dims, inserted_window_dims,
scatter_dims_to_operand_dims, index_vector_dim and the batching dims. Variadic scatter
(several operands, a TupleKernel) updates all results per update element. A region that
returns its updates as they are (`.at[].set`, `replaces`) only moves stored elements, so it
runs for any element type, complex included; other regions need region_emit.py's types.

Threads: updates to one element must apply in order, so the *result* is partitioned, by
ranges [begin, end) of the operand's outermost dimension (the kernel's outer loop, split by
the pool like any kernel's): each thread copies its rows of the operand, scans every scatter
position in order and applies only the window elements whose row is its own (a one-row
window: one unsigned compare per position, the positions kept listed per block without a
branch, `compacted`; a window spanning rows: its outermost loop clipped to the range).
Every element still sees all its updates, in the same order, from one thread, so the bits
are the sequential ones for any split. Scatters with small windows (under MIN_SPLIT_WINDOW
elements: each thread would rescan the indices for little work) or one row stay on one
thread.

Vectors: an f32/f64 (or 32/64-bit integer) scatter with a binary or replacing region whose
window's last dimension is contiguous in the result and the updates applies each window row
in explicit vectors (`vector_lanes`: the widest power of two of lanes a row holds; the rest
one masked vector with AVX-512, else halving vectors and an odd last element scalar), the
operand flush one multiply under FTZ (flush_ftz.py) from 128 bits on. LLVM's vectorized
scalar loop had flushed with and/and/compare/blend per vector and checked the two pointers
for overlap per row (the result never overlaps the updates: a fresh buffer or arena bytes
of a value whose live range ends here, disjoint from the live updates).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import elementwise as ew
from xlapy.backends.cpu import flush_ftz, lanes, masked_emit, region_emit, target
from xlapy.backends.cpu.llvm_util import I1, I64, for_range, i64, prefetch
from xlapy.backends.cpu.op_emit import OpEmitter
from xlapy.ir import Computation, Instruction
from xlapy.types import ElementType as ET

#: Fewest window elements per scatter position for the split (every thread scans all the
#: positions; below this the scan outweighs the share of updates it saves). At 8,
#: jax.ops.segment_sum of 65536 rows of 16 floats into 128 segments (a row one AVX-512
#: vector) ran split, each thread listing every position for half of them: 155-241 us
#: where one thread applying them directly takes 98-124 (XLA 122); the jax_run
#: scatter_add's rows of 64 still split.
MIN_SPLIT_WINDOW = 32
#: Positions listed per block by a split one-row scatter before applying them (compacted).
SELECT_BLOCK = 256
#: The listed position whose updates are prefetched, and at most how many bytes of them.
PREFETCH_AHEAD = 8
PREFETCH_BYTES = 512
#: How far ahead a scatter on one thread prefetches its updates, in bytes (the hardware
#: prefetcher alone left jax.ops.segment_sum of 262144 rows of 16 floats reading ~16 GB/s:
#: 696 -> 616 us at 2 KB ahead, XLA 568; 512 B: 652).
STREAM_AHEAD = 2048
#: Update regions applied in explicit vectors along a contiguous window row: element-wise,
#: lane by lane the scalar ops (the operand flush one multiply under FTZ, flush_ftz.py,
#: instead of LLVM's vectorized and/and/compare/blend of the scalar flush).
VECTOR_KINDS = frozenset({"add", "multiply", "subtract", "maximum", "minimum"})
#: ...of these element types (integer rows ran a scalar a lane: x.at[i].add(u) of int32 rows
#: of 8 took 2.8x XLA's time).
VECTOR_TYPES = frozenset({ET.F32, ET.F64, ET.S32, ET.U32, ET.S64, ET.U64})


def vector_lanes(instr: Instruction) -> int:
    """Lanes of the vector update along the window's innermost dimension, 0 for scalar:
    one result of VECTOR_TYPES, a binary or replacing region, the window's last dimension the
    operand's and the updates' last (contiguous in both) and at least 2 elements long, the
    operand of rank >= 2 (its outermost dimension is the thread split's)."""
    m = (len(instr.operands) - 1) // 2
    x, upd = instr.operands[0], instr.operands[m + 1]
    comp = instr.called[0]
    dn = instr.attrs.scatter_dimension_numbers
    rank, urank = x.shape.rank, upd.shape.rank
    uwd = list(dn.update_window_dims)
    wdims = [d for d in range(rank) if d not in set(dn.inserted_window_dims)
             and d not in set(dn.input_batching_dims)]
    replace = comp.root is not None and comp.root is comp.parameters[-1]
    if m != 1 or x.shape.element_type not in VECTOR_TYPES or rank < 2 or not uwd or \
            wdims[-1] != rank - 1 or uwd[-1] != urank - 1 or \
            not (replace or region_emit.binary_kind(comp) in VECTOR_KINDS):
        return 0
    # The widest power of two of lanes that a window row holds, down to 2: rows of 8 floats
    # under AVX-512 (x.at[i].add(u) of [N, 8]) ran scalar, 4.4x XLA's time; rows of 3 1.8x.
    n = lanes.vector_width() // (1 if x.shape.element_type.bits == 32 else 2)
    while n > upd.shape.dimensions[-1]:
        n //= 2
    return n if n >= 2 else 0


def splat(instr: Instruction, k: int) -> Instruction | None:
    """The scalar (a constant or parameter) that scatter operand k broadcasts, which the
    native scatter fills its result with instead of copying a broadcast array (an embedding
    gradient scatter-adds into zeros: the zeros were a 30 MB kernel of their own, read back
    whole by the copy). None when operand k is anything else or the updates read it too."""
    o = instr.operands[k]
    m = (len(instr.operands) - 1) // 2
    if o.opcode != "broadcast_in_dim" or o.operands[0].shape.rank != 0 or \
            o.operands[0].opcode not in ("constant", "parameter") or \
            any(p is o for p in instr.operands[m:]):
        return None
    return o.operands[0]


def _flushed_result(instr: Instruction) -> bool:
    """Whether every element of the result holds no denormal while the updates apply, so
    the region reads it without a flush: a float add/multiply/max/min region (its results
    are flushed under FTZ, or one of flushed operands) on a result filled with a constant
    that is no denormal (jnp.bincount's and segment_sum's zeros: 262144 weights into 1024
    bins spent a third of each update on the bin's flush)."""
    m = (len(instr.operands) - 1) // 2
    if m != 1 or instr.shape.element_type not in (ET.F32, ET.F64) or region_emit.binary_kind(
                instr.called[0]) not in ("add", "multiply", "maximum", "minimum"):
        return False
    c = splat(instr, 0)
    if c is None or c.opcode != "constant":
        return False
    v = float(np.asarray(c.attrs.literal.to_numpy(), np.float64).reshape(()))
    return not 0 < abs(v) < float(np.finfo(c.shape.dtype).tiny)


def splat_reader(user: Instruction, value: Instruction) -> bool:
    """Whether `user` is a native scatter that reads `value` only as a splat (fusion_plan:
    then the broadcast needs no buffer)."""
    if user.opcode != "scatter" or emitter(user) is None:
        return False
    m = (len(user.operands) - 1) // 2
    at = [k for k, o in enumerate(user.operands) if o is value]
    return bool(at) and all(k < m and splat(user, k) is not None for k in at)


def in_place(spec: Any, root: Instruction) -> bool:
    """Whether kernel `spec` is a native scatter (one result) that may write its result over
    its operand: it reads the operand only to copy it, element for element, before any
    update applies (the copy is skipped then); not when the operand is also its indices or
    updates, or a splat it fills from. A loop's `c.at[idx].add(v)` copied all of c every
    step (loop_inplace.py binds the result to the state buffer): 4096 x 64, 100 steps of
    128 rows, 3.4 ms (XLA, in place, 1.1)."""
    return root.opcode == "scatter" and spec.root is root and len(root.operands) == 3 and \
        emitter(root) is not None and splat(root, 0) is None and \
        root.operands[0] not in root.operands[1:]


def emitter(instr: Instruction) -> type[OpEmitter] | None:
    if instr.opcode != "scatter" or len(instr.operands) < 3 or len(instr.operands) % 2 != 1:
        return None
    n = (len(instr.operands) - 1) // 2
    idx = instr.operands[n]
    arrays = instr.operands[:n] + instr.operands[n + 1:]
    if not (idx.shape.is_array and all(a.shape.is_array for a in arrays)):
        return None
    comp = instr.called[0] if len(instr.called) == 1 else None
    if comp is None or not region_emit.types_ok(idx.shape.element_type) or \
            not idx.shape.element_type.is_integer:
        return None
    if replaces(comp, n):  # stored bits moved: any element type (complex too)
        return ScatterEmitter
    if not region_emit.types_ok(*(a.shape.element_type for a in arrays)) or \
            not region_emit.supported(comp) or len(region_emit.results(comp)) != n:
        return None
    return ScatterEmitter


def replaces(comp: Computation, n: int) -> bool:
    """Whether the update region of an n-operand scatter returns its updates as they are
    (`.at[].set`): then applying it loads and stores stored elements, which the loop does
    for any element type, complex {re, im} structs included (sqrtm's c64 scatter)."""
    params, root = comp.parameters, comp.root
    if len(params) != 2 * n or root is None or \
            any(i.opcode not in ("parameter", "tuple") for i in comp.instructions):
        return False
    outs = list(root.operands) if root.opcode == "tuple" else [root]
    return len(outs) == n and all(o is p for o, p in zip(outs, params[n:]))


class ScatterEmitter(OpEmitter):
    label = "native scatter"

    @staticmethod
    def operands(instr: Instruction) -> list[Instruction]:
        """What each operand slot holds: a splat operand's scalar (`splat`)."""
        m = (len(instr.operands) - 1) // 2
        return [(splat(instr, k) if k < m else None) or o for k, o in enumerate(instr.operands)]

    def body(self, begin: ir.Value, end: ir.Value) -> tuple[int, bool, int]:
        b = self.b
        instr = self.instr
        m = (len(instr.operands) - 1) // 2
        x, ind, upd = instr.operands[0], instr.operands[m], instr.operands[m + 1]
        ets = [o.shape.element_type for o in instr.operands[:m]]
        it = ind.shape.element_type
        dims = list(x.shape.dimensions)
        idims = list(ind.shape.dimensions)
        udims = list(upd.shape.dimensions)
        rank, srank = len(dims), len(idims)
        dn = instr.attrs.scatter_dimension_numbers
        ivd = dn.index_vector_dim
        uwd = list(dn.update_window_dims)
        iwd, ibd = set(dn.inserted_window_dims), list(dn.input_batching_dims)
        sibd = list(dn.scatter_indices_batching_dims)
        sdod = list(dn.scatter_dims_to_operand_dims)
        si = self.ins[m]
        xs = [self.ptr(self.ins[k], t) for k, t in enumerate(ets)]
        us = [self.ptr(self.ins[m + 1 + k], t) for k, t in enumerate(ets)]
        outs = [self.result(k, t) if self.tupled else self.ptr(self.out, t)
                for k, t in enumerate(ets)]
        comp = instr.called[0]
        n = math.prod(dims)
        bdims = [d for d in range(srank) if d != ivd]  # index dims of scatter positions
        usd = [d for d in range(len(udims)) if d not in uwd]
        wdims = [d for d in range(rank) if d not in iwd and d not in ibd]
        sizes = [1] * rank
        for d, u in zip(wdims, uwd):
            sizes[d] = udims[u]
        outer = dims[0] if rank else 1
        split = outer >= 2 and n > 0 and 0 not in sizes and \
            math.prod(sizes) >= MIN_SPLIT_WINDOW
        if not split:  # the whole result on one thread: constant bounds, tests folded away
            begin, end = i64(0), i64(outer)
        inner = n // outer if outer else 0
        lo_e = b.mul(begin, i64(inner), flags=["nsw"]) if split else i64(0)
        hi_e = b.mul(end, i64(inner), flags=["nsw"]) if split else i64(n)
        fills = [b.load(src) if splat(instr, k) is not None else None
                 for k, src in enumerate(xs)]  # (loaded before the loop: stored bits)
        # a result written over its operand (memory_plan._in_place_operands: a loop's state
        # element, a dying temporary) is that operand already: no copy
        copy: ir.Value = ir.Constant(I1, 1)
        if all(fill is None for fill in fills):  # (a splat fills its result: always)
            apart = [b.icmp_unsigned("!=", b.ptrtoint(src, I64), b.ptrtoint(dst, I64))
                     for src, dst in zip(xs, outs)]
            copy = functools.reduce(b.or_, apart)
        with b.if_then(copy), for_range(b, lo_e, hi_e, name="copy") as e:  # stored bits
            for src, dst, fill in zip(xs, outs, fills):
                v = fill if fill is not None else b.load(b.gep(src, [e], inbounds=True))
                b.store(v, b.gep(dst, [e], inbounds=True))
        cost = max(math.prod(udims), 1)
        if n == 0 or 0 in sizes:
            return max(outer, 1), False, 1
        row_window = rank > 0 and 0 in wdims  # the window's outermost loop walks rows
        vec = vector_lanes(instr)
        length = udims[uwd[-1]] if uwd else 1
        ebytes = ets[0].bits // 8
        vt = ir.VectorType(ew.storage_type(ets[0]), max(vec, 1))
        kmasks = target.current().has("avx512f")
        widest = lanes.vector_width() // (1 if ets[0].bits == 32 else 2)

        def index(pos: list[ir.Value], k: int) -> ir.Value:
            full = list(pos)
            if ivd < srank:
                full.insert(ivd, i64(k))
            v = self.load(si, it, self.linear(full, idims))
            return b.sext(v, I64) if it.is_signed and it.bits < 64 else \
                b.zext(v, I64) if it.bits < 64 else v

        def ld(ps: list[ir.Value], at: ir.Value, flushed: bool = False) -> list[ir.Value]:
            vs = [ew.from_storage(b, b.load(b.gep(p, [at], inbounds=True)), t)
                  for p, t in zip(ps, ets)]
            return [ew.mark_flushed(v) for v in vs] if flushed else vs

        held = _flushed_result(instr)

        def locate(pos: list[ir.Value]
                   ) -> tuple[list[ir.Value], ir.Value, tuple[ir.Value, ir.Value] | None]:
            """The window's start, whether this thread applies any of it, its row range."""
            starts: list[ir.Value] = [i64(0)] * rank
            for k, d in enumerate(sdod):
                starts[d] = index(pos, k)
            for o, s in zip(ibd, sibd):
                starts[o] = pos[bdims.index(s)]
            ok: ir.Value = ir.Constant(I1, 1)
            for d in range(rank):
                ok = b.and_(ok, b.and_(b.icmp_signed(">=", starts[d], i64(0)),
                                       b.icmp_signed("<=", starts[d], i64(dims[d] - sizes[d]))))
            first: tuple[ir.Value, ir.Value] | None = None
            if split and row_window:  # this thread's rows of the window: [lo, hi)
                lo = b.sub(begin, starts[0])
                lo = b.select(b.icmp_signed(">", lo, i64(0)), lo, i64(0))
                hi = b.sub(end, starts[0])
                hi = b.select(b.icmp_signed("<", hi, i64(sizes[0])), hi, i64(sizes[0]))
                first = (lo, hi)
            elif split:  # one row per window: is it this thread's?
                ok = b.and_(ok, b.icmp_unsigned("<", b.sub(starts[0], begin),
                                                b.sub(end, begin)))
            return starts, ok, first

        def windows(pos: list[ir.Value], starts: list[ir.Value],
                    first: tuple[ir.Value, ir.Value] | None) -> None:
            """The update of every window element (of this thread's rows)."""

            def offsets(w: list[ir.Value]) -> tuple[ir.Value, ir.Value]:
                """The result's and the updates' element offsets of window index w."""
                target = [starts[d] for d in range(rank)]
                uidx: list[ir.Value] = [i64(0)] * len(udims)
                for k, d in enumerate(usd):
                    uidx[d] = pos[k]
                for k, (d, u) in enumerate(zip(wdims, uwd)):
                    target[d] = b.add(starts[d], w[k])
                    uidx[u] = w[k]
                return self.linear(target, dims), self.linear(uidx, udims)

            def apply(at: ir.Value, uat: ir.Value) -> None:
                if run is not None:
                    return run.apply(at, ld(us, uat))
                with flush_ftz.in_kernel(scalars=True):  # (under MXCSR.FTZ: one mulss)
                    new = region_emit.emit(b, comp, [*ld(outs, at, held), *ld(us, uat)])
                for p, t, v in zip(outs, ets, new):
                    b.store(ew.to_storage(b, v, t), b.gep(p, [at], inbounds=True))

            def per_window(w: list[ir.Value]) -> None:
                apply(*offsets(w))

            def vector(at: ir.Value, uat: ir.Value, j: ir.Value, n: int,
                       live: int = 0) -> None:
                """Elements [j, j + n) of the window row in one vector of n lanes (only
                the first `live` ones: a masked vector)."""
                t = ir.VectorType(vt.element, n)
                vptr = [b.bitcast(b.gep(p, [b.add(o, j)], inbounds=True), t.as_pointer())
                        for p, o in ((outs[0], at), (us[0], uat))]
                cur, upd_v = (masked_emit.access(b, q, ebytes, live) if live else
                              b.load(q, align=ebytes) for q in vptr)
                if held:  # (its flush was a multiply in each update's chain)
                    cur = ew.mark_flushed(cur)
                with flush_ftz.in_kernel():  # the kernel runs under MXCSR.FTZ
                    res = region_emit.emit(b, comp, [cur, upd_v])[0]
                if live:
                    masked_emit.access(b, vptr[0], ebytes, live, res)
                else:
                    b.store(res, vptr[0], align=ebytes)

            def per_row(w: list[ir.Value]) -> None:  # the innermost window dim in vectors
                at, uat = offsets([*w, i64(0)])
                if vrun is not None:
                    vrun.apply(at, uat)
                    return
                full = length // vec * vec
                if kmasks and full == vec < length and 2 * vec <= widest:
                    vector(at, uat, i64(0), 2 * vec, length)  # a row of 3: 4 lanes, 3 live
                    return
                with for_range(b, i64(0), i64(full), name="v", step=vec) as j:
                    vector(at, uat, j, vec)
                k, n = full, vec // 2
                if length - k >= 2 and kmasks:  # the rest one masked vector (AVX-512)
                    vector(at, uat, i64(k), 1 << (length - k - 1).bit_length(), length - k)
                    k = length
                # else in halving vectors (rows of 3 floats: 2 lanes, then a scalar)
                while k < length:
                    if n >= 2 and k + n <= length:
                        vector(at, uat, i64(k), n)
                        k += n
                    elif n >= 2:
                        n //= 2
                    else:
                        apply(b.add(at, i64(k)), b.add(uat, i64(k)))
                        k += 1

            wsizes = [udims[u] for u in uwd]
            if vec:
                self.loops(wsizes[:-1], per_row, first=first, name="w")
            else:
                self.loops(wsizes, per_window, first=first, name="w")

        # one thread walks the positions in order: their updates (rows of the updates'
        # array) are a sequential stream, prefetched STREAM_AHEAD bytes ahead
        stream = not split and len(bdims) == 1 and usd == [0] and \
            uwd == list(range(1, len(udims)))
        wbytes = math.prod(sizes) * max(t.bits for t in ets) // 8

        def per_position(pos: list[ir.Value]) -> None:
            if stream:
                uat = self.linear([pos[0]] + [i64(0)] * (len(udims) - 1), udims)
                for up in us:
                    base = b.bitcast(b.gep(up, [uat]), ir.IntType(8).as_pointer())
                    for off in range(0, min(wbytes, PREFETCH_BYTES), 64):
                        prefetch(b, b.gep(base, [i64(STREAM_AHEAD + off)]))
            starts, ok, first = locate(pos)
            with b.if_then(ok):
                windows(pos, starts, first)

        pdims = [idims[d] for d in bdims]
        run = _Run(b, self.fn, comp, outs[0], ets[0]) if (
            instr.attrs.indices_are_sorted and not split and m == 1 and
            math.prod(sizes) == 1) else None
        vrun = _VectorRun(b, self.fn, comp, outs[0], us[0], vt, length // vec, held) if (
            vec and not split and m == 1 and math.prod(sizes) == length and
            length % vec == 0 and length // vec <= VECTOR_RUN_MOST and
            region_emit.binary_kind(comp) in VECTOR_RUN_KINDS) else None
        if split and not row_window:
            contiguous = uwd == list(range(len(udims) - len(uwd), len(udims)))

            def prefetch_updates(pos: list[ir.Value]) -> None:
                """The window's updates (contiguous) asked for ahead of their use."""
                uidx: list[ir.Value] = [i64(0)] * len(udims)
                for k, d in enumerate(usd):
                    uidx[d] = pos[k]
                uat = self.linear(uidx, udims)
                for up in us:
                    base = b.bitcast(b.gep(up, [uat]), ir.IntType(8).as_pointer())
                    for off in range(0, min(wbytes, PREFETCH_BYTES), 64):
                        prefetch(b, b.gep(base, [i64(off)]))

            self.compacted(pdims, locate, windows, prefetch_updates if contiguous else None)
        else:
            self.loops(pdims, per_position, name="s")
        for r in (run, vrun):
            if r is not None:
                r.flush()
        return outer, split, cost

    def compacted(self, pdims: list[int], locate: Any, windows: Any,
                  prefetch: Any = None) -> None:
        """The positions in blocks of SELECT_BLOCK: first the ones this thread applies
        listed without a branch, then their windows applied in order. A split one-row
        scatter keeps about 1/threads of the positions at random: a branch per position
        would mispredict half the time (~17 cycles each, a third of the work on 2 threads).
        `prefetch(pos)` asks for the updates of the listed position PREFETCH_AHEAD on: a
        thread's rows of them are a random subset, which the hardware streams miss
        (scatter_add 2 threads: 0.90-0.93 -> 0.85-0.87 ms host, 0.95-0.97 -> 0.82-0.88
        x86-64-v3, same-run A/B)."""
        b = self.b
        total = math.prod(pdims)
        with b.goto_block(self.fn.entry_basic_block):
            buf = b.alloca(I64, size=i64(SELECT_BLOCK), name="mine")
            cnt = b.alloca(I64, name="count")

        def unflat(p: ir.Value) -> list[ir.Value]:
            """Position indices of the row-major flat position p (< total)."""
            out: list[ir.Value] = []
            stride = total
            for n in pdims:
                stride //= n
                q = b.udiv(p, i64(stride)) if stride > 1 else p
                out.append(b.urem(q, i64(n)) if out else q)  # the outermost: p < total
            return out

        with for_range(b, i64(0), i64(total), name="blk", step=SELECT_BLOCK) as blk:
            nxt = b.add(blk, i64(SELECT_BLOCK))
            hi = b.select(b.icmp_signed("<", nxt, i64(total)), nxt, i64(total))
            b.store(i64(0), cnt)
            with for_range(b, blk, hi, name="s") as p:
                _, ok, _ = locate(unflat(p))
                c = b.load(cnt)
                b.store(p, b.gep(buf, [c], inbounds=True))
                b.store(b.add(c, b.zext(ok, I64)), cnt)
            count = b.load(cnt)
            with for_range(b, i64(0), count, name="q") as q:
                if prefetch is not None:  # the updates of the position PREFETCH_AHEAD on
                    ahead = b.add(q, i64(PREFETCH_AHEAD))
                    last = b.sub(count, i64(1))
                    ahead = b.select(b.icmp_signed("<", ahead, last), ahead, last)
                    prefetch(unflat(b.load(b.gep(buf, [ahead], inbounds=True))))
                pos = unflat(b.load(b.gep(buf, [q], inbounds=True)))
                starts, _, first = locate(pos)
                windows(pos, starts, first)


#: Most vectors a window row held in registers by _VectorRun has.
VECTOR_RUN_MOST = 4
#: ... and the regions it holds: a float max/min's update chain is long (sign blends, a
#: NaN select); an add's is one op, and at random positions the held row cost more than it
#: saved (x.at[i].add(u) of 262144 rows of 8: 1.07 -> 1.18 ms; sorted segment_sum 0.82 ->
#: 0.74).
VECTOR_RUN_KINDS = ("maximum", "minimum")


class _HeldRun:
    """What _Run and _VectorRun share: the position held last (-1: none yet), its value
    stored when positions move on (`_store_run`) and at the end (`flush`)."""

    b: ir.IRBuilder

    def _hold(self, fn: ir.Function, name: str, *values: ir.Type) -> list[ir.Value]:
        """The position's slot (`name`) and one entry-block slot per held value (registers
        after mem2reg); the position starts at -1."""
        b = self.b
        with b.goto_block(fn.entry_basic_block):
            b.position_at_start(fn.entry_basic_block)
            self.prev = b.alloca(I64, name=name)
            slots = [b.alloca(t, name="run_value") for t in values]
        b.store(i64(-1), self.prev)
        return slots

    def _store_run(self, at: ir.Value) -> None:
        raise NotImplementedError

    def _moved(self, same: ir.Value, prev: ir.Value) -> None:
        """Store the held value where positions moved on from (not before the first)."""
        b = self.b
        with b.if_then(b.and_(b.not_(same), b.icmp_signed(">=", prev, i64(0)))):
            self._store_run(prev)

    def flush(self) -> None:
        b = self.b
        prev = b.load(self.prev)
        with b.if_then(b.icmp_signed(">=", prev, i64(0))):
            self._store_run(prev)


class _VectorRun(_HeldRun):
    """A window that is one row of whole vectors (jax.ops.segment_max of rows of 16 floats;
    VECTOR_RUN_KINDS): the row updated last stays in registers while positions repeat it,
    stored when they move on (and at the end). Its update chain waited on a store and a
    reload of the same row, ~14 cycles a row for a float max's sign blends: segment_max of
    2^18 rows of 16 into 1024 sorted segments 1.37 ms, XLA 0.91. The same updates in the
    same order: the same bits."""

    def __init__(self, b: ir.IRBuilder, fn: ir.Function, comp: Computation, out: ir.Value,
                 upd: ir.Value, vt: ir.VectorType, nvec: int, held: bool) -> None:
        self.b, self.comp, self.out, self.upd, self.vt = b, comp, out, upd, vt
        self.held = held
        self.acc = self._hold(fn, "vrun_at", *[vt] * nvec)

    def _ptr(self, base: ir.Value, at: ir.Value, j: int) -> ir.Value:
        b = self.b
        q = b.gep(base, [b.add(at, i64(j * self.vt.count))], inbounds=True)
        return b.bitcast(q, self.vt.as_pointer())

    def _store_run(self, at: ir.Value) -> None:
        for j, acc in enumerate(self.acc):
            self.b.store(self.b.load(acc), self._ptr(self.out, at, j), align=1)

    def apply(self, at: ir.Value, uat: ir.Value) -> None:
        b = self.b
        prev = b.load(self.prev)
        same = b.icmp_signed("==", at, prev)
        self._moved(same, prev)
        for j, acc in enumerate(self.acc):
            cur = b.select(same, b.load(acc), b.load(self._ptr(self.out, at, j), align=1))
            if self.held:  # (as the row's vector: a flushed operand either way)
                cur = ew.mark_flushed(cur)
            new = b.load(self._ptr(self.upd, uat, j), align=1)
            with flush_ftz.in_kernel(scalars=True):  # the kernel runs under MXCSR.FTZ
                b.store(region_emit.emit(b, self.comp, [cur, new])[0], acc)
        b.store(at, self.prev)


class _Run(_HeldRun):
    """One-element windows at sorted positions: the element updated last stays in a
    register while positions repeat it, stored when they move on (and at the end), so each
    update of a run waits on the region's op alone, not on a store and a reload of the same
    element (jax.ops.segment_max of 1M values into 1024 sorted segments: 9.6 ms, XLA 3.9).
    The same updates in the same order: the same bits (the register holds the stored form,
    rounded as a store would)."""

    def __init__(self, b: ir.IRBuilder, fn: ir.Function, comp: Computation, out: ir.Value,
                 t: ET) -> None:
        self.b, self.comp, self.out, self.t = b, comp, out, t
        #: A float add/multiply/max/min region's results are flushed (FTZ, or a choice
        #: between flushed operands): the register skips the flush a reload would need,
        #: which sat on the run's dependent chain.
        self.flushed = t.is_float and region_emit.binary_kind(comp) in (
            "add", "multiply", "maximum", "minimum")
        (self.acc,) = self._hold(fn, "run_at", out.type.pointee)

    def _store_run(self, at: ir.Value) -> None:
        self.b.store(self.b.load(self.acc), self.b.gep(self.out, [at], inbounds=True))

    def apply(self, at: ir.Value, upd: list[ir.Value]) -> None:
        b, t = self.b, self.t
        prev = b.load(self.prev)
        same = b.icmp_signed("==", at, prev)
        loaded = ew.from_storage(b, b.load(b.gep(self.out, [at], inbounds=True)), t)
        if self.flushed:  # the run's value is a result of the op: flushed already
            cur = ew.mark_flushed(b.select(same, ew.from_storage(b, b.load(self.acc), t),
                                           ew.flush(b, loaded)))
        else:
            cur = b.select(same, ew.from_storage(b, b.load(self.acc), t), loaded)
        with flush_ftz.in_kernel(scalars=True):  # the kernel runs under MXCSR.FTZ
            new = region_emit.emit(b, self.comp, [cur, *upd])[0]
        self._moved(same, prev)
        b.store(ew.to_storage(b, new, t), self.acc)
        b.store(at, self.prev)


__all__ = ["emitter", "replaces", "ScatterEmitter"]
