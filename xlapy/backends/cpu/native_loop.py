"""Native while loops: a `while` whose condition and body are all compiled kernels (plus
get_tuple_element of the state, constants and the root tuple) runs entirely in native code,
so an iteration costs a few kernel calls and copies, not a trip through Python.

One generic driver function (while_driver.py: compiled once per process, cached like any
kernel) walks a descriptor the executable prepares once per call:

    d[0] n_cond   d[1] -> [(fn, table, outer)] * n_cond   d[2] -> pred byte
    d[3] n_body   d[4] -> [(fn, table, outer)] * n_body
    d[5] n_copy   d[6] -> [(dst, src, nbytes)] * n_copy
    d[7] n_swap   d[8] -> [(result entry, -> [cell, state entries...], 1 + n_entries)] * n_swap
    d[9] max iterations of this call   d[10] set to 1 when the condition was false
    d[11] set to 1 by a nested loop that ran out of its budget (nested_loop.py)
    d[12] the loop's own function (loop_fused.py), run instead of the driver; else 0
    d[13], d[14] the cond's and body's tables   d[15] -> [state buffer] per element

    set MXCSR FTZ once (kernels then skip their own ldmxcsr); iterations = 0
    loop: run the cond kernels; if *pred == 0: d[10] = 1, restore MXCSR, return iterations
          if iterations == d[9]: restore MXCSR, return iterations (the state is consistent)
          run the body kernels; if d[11]: restore MXCSR, return iterations
          copy or swap each body result into its state; iterations++

Python calls the driver again until d[10] is set, each call sized to take about
`SLICE_SECONDS`: between calls CPython raises KeyboardInterrupt on Ctrl-C, the iteration
limit (`XLAPY_MAX_WHILE_ITERATIONS`) is checked and the process grid is polled
(ops/loop_guard.py), at a cost of one ctypes call per slice.

2-D f32/f64 dot_generals in the body (an RNN cell's h @ W) are steps too: gemm_small's loop
nest (it clears MXCSR FTZ/DAZ itself), or regions.py's gemm_rows (BLAS) through
`xlapy_gemm_call`, which clears them around the call as the Python path runs it (the same
bits); a loop of small GEMMs no longer pays ~28 us of Python per iteration. So are the
body's row-parallel regions (regions.py). A step worth splitting (NATIVE_SPLIT_COST: a
region, a gemm_small product, an element-wise kernel) is shared with the worker pool from
native code at the Python path's chunks (loop_split.py): the RNN cell keeps both cores.

The state buffers are the tables' entries for the get_tuple_element slots of both
computations; the body's results live in their own buffers, so the copies never overlap.
A result that is another state element as it was (a rotation: jax.random's threefry loop)
is a move: copied through a buffer of its own, before the other copies (`NativeWhile.moves`).
A result a body kernel writes every iteration is not copied: its buffer and the state buffer
swap roles (the table entries of the state and of the result exchange pointers; `cell`
tracks the current state buffer), which saves a pass over the state per iteration; or
writes over the state buffer itself, where the body allows it (loop_inplace.py).
The tables (constants, arena, kernel entries) are prepared once per loop; a call only writes
its fresh state and result buffers into them.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.backends.cpu import (
    dus_window,
    guarded_dots,
    loop_bind,
    loop_fused,
    loop_gemv,
    loop_inplace,
    loop_library,
    loop_split,
    loop_tuples,
    nested_loop,
    parallel,
    regions,
    row_loop,
)
from xlapy.backends.cpu.fp_env import driven
from xlapy.backends.cpu.kernel_sequence import KernelSequence
from xlapy.backends.cpu.loop_steps import (
    GEMM_KINDS,
    NATIVE_WHILE,
    blas_words,
    gemm_outputs,
    region_steps,
    split_cost,
    steps,
)
from xlapy.backends.cpu.op_emit import TupleKernel
from xlapy.backends.cpu.threads import NativePool, fn_address
from xlapy.backends.cpu.thunks import bounds, ptr
from xlapy.backends.cpu.while_driver import driver
from xlapy.ops.loop_guard import WhileGuard, iteration_limit, too_many, while_name
from xlapy.passes.pass_base import packed_state

if TYPE_CHECKING:
    from xlapy.backends.cpu.executable import CpuExecutable
    from xlapy.backends.cpu.regions import Gemm, Region
    from xlapy.ir import Instruction

#: Body reductions into partials (elements x ops) from this cost, two chunks of them, keep
#: the Python loop: it reduces them in chunks combined by numpy (thunks.partial_thunk).
MAX_NATIVE_COST = 2 * parallel.PARTIAL_CHUNK_COST
#: Work (a kernel's or region's cost, a GEMM's multiply-adds) from which a step is split over
#: the worker pool (loop_split.py): a native hand-off costs about a microsecond.
NATIVE_SPLIT_COST = 1 << 18
#: Target seconds of one driver call: the longest a Ctrl-C or a grid stop waits.
SLICE_SECONDS = 0.01
_MAX_SLICE = 1 << 40


def _state_slots(exe: CpuExecutable, tupled: bool) -> list[tuple[int, int]]:
    """(slot, state element) of the values that are state buffers in a cond/body."""
    params = exe.comp.parameters
    if not tupled:
        return [(exe.slot[id(p)], k) for k, p in enumerate(params)]
    return [(exe.slot[id(i)], i.attrs.index) for i in exe.comp.instructions
            if i.opcode == "get_tuple_element" and i.operands[0] is params[0]]


def _is_state(instr: Instruction, k: int, params: list[Instruction], tupled: bool) -> bool:
    return dus_window.state_index(instr, params, tupled) == k


class NativeWhile:
    """A planned native loop over a flat state of arrays (one tuple operand, XLA style, or
    one operand per element, StableHLO style)."""

    def __init__(self, cond: CpuExecutable, body: CpuExecutable, tupled: bool,
                 results: list[Instruction], instruction: Instruction | None = None) -> None:
        self.cond, self.body, self.tupled = cond, body, tupled
        self.instruction = instruction
        #: Iterations per driver call, adapted so a call takes about SLICE_SECONDS.
        self.slice = 256
        self.counted = True  #: under XLAPY_MAX_WHILE_ITERATIONS (not branch_loop's trips)
        params = body.comp.parameters
        #: (k, j): body result k is state element j as it was (module docstring), copied
        #: through a buffer of its own after the body (every j read before any is written).
        self.moves: list[tuple[int, int]] = [
            (k, j) for k, o in enumerate(results)
            if not _is_state(o, k, params, tupled)
            and (j := dus_window.state_index(o, params, tupled)) is not None]
        moved = {k for k, _ in self.moves}
        # Body result k: the slot to copy into state buffer k, or None (passed through, moved).
        self.results: list[int | None] = [
            None if _is_state(o, k, params, tupled) or k in moved else body.slot[id(o)]
            for k, o in enumerate(results)]
        #: State elements the body updates in place (dus_window.py): their window kernels
        #: replace the body's whole-array kernels and they are passed through.
        self.windows = dus_window.plan(body, results)  # (none where a result moves)
        # (a window updates its state during the body)
        for k in self.windows.elements if self.windows is not None else ():
            self.results[k] = None
        assert cond.comp.root is not None
        self.pred_slot = cond.slot[id(cond.comp.root)]
        self.state_slots = [_state_slots(cond, tupled), _state_slots(body, tupled)]

        body_out = {s for k in body.kernel_specs for s in k.outputs}
        res = [r for r in self.results if r is not None]
        #: (state element, result slot) pairs that swap buffers instead of copying: results
        #: some body kernel writes every iteration, each the result of one element only.
        sources = {j for _, j in self.moves}  # (their buffers stay put: moves copy them)
        self.swapped = [(k, r) for k, r in enumerate(self.results)
                        if r is not None and r in body_out and res.count(r) == 1
                        and k not in sources]
        self.cond_steps, self.body_steps = len(steps(cond)), len(steps(body))
        self.split_cost = split_cost(cond, body, NATIVE_SPLIT_COST)  # (kernel steps)
        #: State elements the loop never writes and nobody reads after it: bound in place,
        #: not copied (scan_rnn's xs, 8 MB a call); not a move's source (a nested step's move
        #: copies read the buffer bound at prepare time, not the operand: nested_loop.entry).
        self.unread = loop_bind.unread_after(instruction, self.results) - \
            (self.windows.elements if self.windows is not None else set()) - moved - sources
        #: Row-split (row_loop.py): the plan and the threads a call uses (1: not split).
        self.row_plan = row_loop.plan(self) if self.windows is None and not self.moves \
            else None
        self.row_threads = row_loop.threads_for(self, self.row_plan) \
            if self.row_plan is not None else 1
        self.in_place = loop_inplace.apply(self)  #: result slots bound to their state buffer
        #: State elements inner loops update in place (nested_loop.in_place): by inner loop,
        #: {inner element: its result slot, bound to the outer state buffer}.
        self.nested_in_place = nested_loop.in_place(self)
        self._row_preps: list[_Prepared] | None = None
        #: Initial state elements the executable made for this loop alone, each call a fresh
        #: array (owned_init): they become its state buffers, no copy.
        self.owned: frozenset[int] = frozenset()
        self._lock = threading.Lock()
        self._prep: _Prepared | None = None
        #: The loop as one function (loop_fused.fuse), or None: the driver runs it.
        self.fused: loop_fused.Fused | None = None

    @property
    def label(self) -> str:
        """What `explain` adds to "native while loop": the row split, if any, or the state
        elements updated in place (by window kernels, or carried: loop_inplace.py)."""
        n = len(self.in_place)
        return self._label() + (f" ({n} state element{'s' if n > 1 else ''} carried in place)"
                                if n else "")

    def _label(self) -> str:
        fused = "fused into one function" if self.fused is not None else ""
        if self.windows is not None:
            n = len(self.windows.elements)
            return f" ({fused + ', ' if fused else ''}{n} state element" \
                f"{'s' if n > 1 else ''} updated in place)"
        if fused:
            return f" ({fused})"
        inner = sum(isinstance(s, nested_loop.Nested) for exe in (self.cond, self.body)
                    for s in steps(exe))
        if inner:
            n = sum(len(v) for v in self.nested_in_place.values())
            return f" ({inner} native loop{'s' if inner > 1 else ''} inside)" + \
                (f" ({n} state element{'s' if n > 1 else ''} updated in place by them)"
                 if n else "")
        rp = self.row_plan
        if rp is None or self.row_threads < 2:
            seq = self.body.sequence
            return "" if seq is None else f" (body: {len(seq.kernels)} kernels as one function)"
        n = len(row_loop.shares(rp.rows, self.row_threads, rp.align)) - 1
        return f" (row-split: {n} row shares on {self.row_threads} threads)"

    def _prepare(self, rows: tuple[int, int] | None = None) -> _Prepared:
        """Tables with constants, arena and kernel entries; per-call slots filled by run().
        `rows`: this thread's rows of a row-split loop (row_loop.py): its region runs them
        only, and no step splits."""
        p = _Prepared()
        p.rows = rows
        p.statep = (ctypes.c_int64 * max(len(self.results), 1))()
        p.desc = (ctypes.c_int64 * 16)()
        swapped_res = {r for _, r in self.swapped} | self.in_place
        for exe in (self.cond, self.body):
            table = (ctypes.c_void_p * max(exe.num_slots, 1))()
            for s, arr in exe.static.items():
                table[s] = arr.ctypes.data
            arena = exe._arena_views()
            p.keep.append(arena)
            for s, view in arena[1]:
                table[s] = view.ctypes.data
            # fresh results, and temporaries a region writes into its result's buffer on
            # the Python path (executable.out_alias: a swapped result's buffer changes
            # every iteration here, so they get their own)
            for s in [*exe.fresh_slots, *getattr(exe, "out_alias", {})]:
                if exe is self.body and s in swapped_res:
                    continue  # a fresh buffer per call (it may hold the final state)
                sh = exe.shapes[s]
                arr = np.empty(sh.dimensions, sh.dtype)
                p.keep.append(arr)
                table[s] = arr.ctypes.data
            for o in (o for g in steps(exe) for o in gemm_outputs(g)):  # products whose
                if not table[o]:  # results leave the body (alone or in a region)
                    sh = exe.shapes[o]
                    p.keep.append(arr := np.empty(sh.dimensions, sh.dtype))
                    table[o] = arr.ctypes.data
            p.tables.append(table)

        def entries(exe: CpuExecutable, table: Any) -> Any:
            todo = steps(exe)
            arr = (ctypes.c_int64 * max(3 * len(todo), 1))()
            for j, step in enumerate(todo):
                words = self._entry(p, exe, step, at := ctypes.addressof(table))
                arr[3 * j: 3 * j + 3] = guarded_dots.wrap(exe, step.out, words, at, p.keep) \
                    if isinstance(step, regions.Gemm) else words
            return arr

        # (a fused loop runs no step: its condition's and body's kernels never compile)
        p.entries = [(ctypes.c_int64 * 1)()] * 2 if self.fused is not None else \
            [entries(self.cond, p.tables[0]), entries(self.body, p.tables[1])]
        nswap = len(self.swapped)
        p.cells = (ctypes.c_int64 * max(nswap, 1))()
        p.lists = []
        sw = (ctypes.c_int64 * max(3 * nswap, 1))()
        for j, (k, r) in enumerate(self.swapped):
            addrs = [ctypes.addressof(p.cells) + 8 * j]
            for table, sslots in zip(p.tables, self.state_slots):
                addrs += [ctypes.addressof(table) + 8 * s for s, kk in sslots if kk == k]
            lst = (ctypes.c_int64 * len(addrs))(*addrs)
            p.lists.append(lst)
            sw[3 * j: 3 * j + 3] = [ctypes.addressof(p.tables[1]) + 8 * r,
                                    ctypes.addressof(lst), len(addrs)]
        p.swaps = sw
        copied = [(k, r) for k, r in enumerate(self.results)
                  if r is not None and (k, r) not in self.swapped]
        p.moved = []
        for k, j in self.moves:
            ps = self.body.comp.parameters
            sh = (ps[0].shape.tuple_shapes if self.tupled else [q.shape for q in ps])[j]
            p.keep.append(tmp := np.empty(sh.dimensions, sh.dtype))
            p.moved.append((k, j, ptr(tmp)))
        p.copies = (ctypes.c_int64 * max(3 * (len(copied) + 2 * len(self.moves)), 1))()
        p.copied = copied
        p.desc[:] = [self.cond_steps, ctypes.addressof(p.entries[0]),
                     p.tables[0][self.pred_slot], self.body_steps,
                     ctypes.addressof(p.entries[1]), 0, ctypes.addressof(p.copies), nswap,
                     ctypes.addressof(sw), 0, 1, 0,
                     self.fused.address if self.fused is not None else 0,
                     ctypes.addressof(p.tables[0]), ctypes.addressof(p.tables[1]),
                     ctypes.addressof(p.statep)]
        return p

    def _entry(self, p: _Prepared, exe: CpuExecutable,
               step: int | Gemm | Region | nested_loop.Nested | KernelSequence
               | loop_library.LibStep | None,
               table: int) -> list[int]:
        """The driver's (function, argument, outer) words of one step; big ones split over
        the worker pool (loop_split.py) at the Python path's chunks."""
        threads = exe.num_threads
        if p.rows is not None:  # one thread's share of a row-split loop
            threads = 1
        if isinstance(step, KernelSequence):
            return [exe.sequence_addr, table, 0]
        if isinstance(step, int):
            spec, addr = exe.kernel_specs[step], exe.kernel_addrs[step]
            if exe is self.body and self.windows is not None and step in self.windows.kernels:
                spec, addr = self.windows.kernels[step], exe.window_addrs[step]
            arg = table if not isinstance(spec, TupleKernel) else \
                loop_tuples.cells(exe, step, table, p.keep)
            if p.rows is not None and self.row_plan and step in self.row_plan.kernels:
                return self._split(p, addr, arg, list(p.rows), 1)  # (this share's rows)
            if threads > 1 and spec.splittable and not spec.partial and spec.outer >= 2 and \
                    spec.cost >= self.split_cost:
                return self._split(p, addr, arg, bounds(spec.outer, min(threads, spec.outer),
                                                        spec.align), threads)
            return [addr, arg, driven(spec.outer, spec.env_arg)]  # (this thread: FTZ set)
        if isinstance(step, loop_library.LibStep):
            return loop_library.entry(p.keep, exe, step, table, p.failed,
                                      ctypes.addressof(p.desc) + 8 * 11)
        if isinstance(step, nested_loop.Nested):
            return nested_loop.entry(p, exe, step, table, ctypes.addressof(p.desc) + 8 * 11,
                                     self.nested_in_place.get(step.instr.name)
                                     if exe is self.body else None)
        if isinstance(step, regions.Region):
            words = region_steps(p.keep, exe, step, table)
            cost = sum(m.cost for m in step.members)
            cuts = list(p.rows) if p.rows is not None else step.cuts()
            return self._split(p, fn_address(regions.run_function()), words, cuts,
                               threads if cost >= NATIVE_SPLIT_COST else 1)
        assert step is not None
        if loop_gemv.takes(step):
            return loop_gemv.entry(p.keep, p.splits, step, table, threads)
        d = regions.gemm_descriptor(step, table)
        p.keep.append(d)
        if step.small is not None:  # clears MXCSR FTZ/DAZ itself; bits ignore the split
            # (rows, or a batch's products one at a time: gemm_small's batch)
            fn, n = (step.small.batch_address, step.batch) if step.batch > 1 else \
                (step.small.rows_address, step.m)
            if threads > 1 and step.batch * step.m * step.n * step.k >= NATIVE_SPLIT_COST \
                    and n >= 2:
                return self._split(p, fn, d.ctypes.data, bounds(n, min(threads, n)), threads)
            return [fn, d.ctypes.data, n]
        return [*blas_words(p.keep, d), step.m]

    @staticmethod
    def _split(p: _Prepared, fn: int, arg: int, cuts: list[int], most: int) -> list[int]:
        sp = loop_split.Split(fn, arg, cuts, most)
        p.splits.append(sp)
        return [driver()[0].address(loop_split.SPLIT_NAME), sp.address, 0]

    def run(self, state: tuple[Any, ...], rt: Any = None, pr: Any = None) -> tuple[Any, ...]:
        """The final state from `state` (`rt`, `pr`: the caller's runtime state and process,
        for the Python path an inner loop's long run hands over to)."""
        locked = self._lock.acquire(blocking=False)
        try:
            if self.row_plan is not None and self.row_threads > 1:
                rp = self.row_plan
                if locked and self._row_preps is None:
                    self._row_preps = row_loop.prepare(self, rp, self.row_threads)
                preps = self._row_preps if locked else \
                    row_loop.prepare(self, rp, self.row_threads)
                assert preps is not None
                return row_loop.run(self, rp, preps, self.row_threads, state)
            if locked:
                if self._prep is None:
                    self._prep = self._prepare()
                p = self._prep
            else:  # another thread runs this loop: private tables
                p = self._prepare()
            return self._run(p, state, rt, pr)
        finally:
            if locked:
                self._lock.release()

    def _run(self, p: _Prepared, state: tuple[Any, ...], rt: Any, pr: Any
             ) -> tuple[Any, ...]:
        kept = loop_bind.kept(self, p, state)  # a small state: buffers of its own
        if kept is not None:
            out, guard = kept.run(state, lambda: self._reserved_drive(p))
        else:
            bufs = [np.asarray(v, order="C") if k in self.unread or k in self.owned
                    else np.array(v, order="C", copy=True) for k, v in enumerate(state)]
            others = {k: np.empty_like(bufs[k]) for k, _ in self.swapped}
            self._bind(p, bufs, others)
            guard = self._reserved_drive(p)
            out = self._results(p, bufs, others)
        return out if guard is None else self._python(out, guard, rt, pr)

    def _reserved_drive(self, p: _Prepared) -> WhileGuard | None:
        pool, ks = self._reserve(p)
        if pool is None:
            return self._drive(p)
        try:
            with pool.lending(ks):
                return self._drive(p)
        finally:
            pool.release(ks)

    def _python(self, state: tuple[Any, ...], guard: WhileGuard, rt: Any, pr: Any
                ) -> tuple[Any, ...]:
        """The rest of the loop from `state` through Python (an inner loop ran past its
        budget: nested_loop.py), its cond and body run as executables, `guard` counting on."""
        from xlapy.backends.cpu.thunks import FallbackContext
        from xlapy.ops.control_flow import call_results

        ctx = FallbackContext(self.instruction, [self.cond, self.body], rt, pr)
        st = [state] if self.tupled else list(state)
        while bool(np.asarray(call_results(ctx, 0, st, 1)[0])):
            guard.step()
            st = call_results(ctx, 1, st, len(st))
        return st[0] if self.tupled else tuple(st)

    _bind = loop_bind.bind  #: (p, bufs, others): p's tables at bufs (loop_bind.py)

    def _results(self, p: _Prepared, bufs: list[np.ndarray], others: dict[int, np.ndarray]
                 ) -> tuple[Any, ...]:
        """The final state: a swapped element ends in whichever buffer its cell names."""
        out = list(bufs)
        for j, (k, _) in enumerate(self.swapped):
            if p.cells[j] != p.bound[k]:  # (bufs' addresses, as _bind took them)
                out[k] = others[k]
        return tuple(out)

    def _reserve(self, p: _Prepared) -> tuple[NativePool | None, list[int]]:
        """Workers for this call's split steps (NativePool.reserve; none free: the caller
        runs every chunk), bound into their descriptors."""
        if not p.splits:  # (most loops: ~2 us of a small loop's call)
            return None, []
        most = max(sp.most for sp in p.splits)
        pool = parallel.pool(self.body.num_threads) if most > 1 else None
        ks = pool.reserve(most - 1) if pool is not None else []
        addrs = [pool.addrs[k] for k in ks] if pool is not None else []
        for sp in p.splits:
            sp.bind(addrs)
        return pool, ks

    def _drive(self, p: _Prepared, step: Callable[[int], int] | None = None
               ) -> WhileGuard | None:
        """Call the driver slice by slice until the condition is false (module docstring).
        A loop that ends within its first slice costs one call: no guard, no timing.
        `step(n)` runs one slice of at most n iterations and returns how many ran (default:
        the driver on p; row_loop.py runs every thread's share). Returns the guard when an
        inner loop ran past its budget: the rest runs through Python (_python)."""
        desc = p.desc
        if step is None:
            fn = driver()[1] if self.fused is None else self.fused.call
            address = ctypes.addressof(desc)

            def step(n: int) -> int:
                desc[9] = n
                got = int(fn(address))
                if p.failed:  # a callback step's error (loop_callback.py)
                    raise p.failed.pop()
                return got

        desc[10] = desc[11] = 0
        env = iteration_limit()  # (an uncounted trip's inner loops still count)
        limit = env if self.counted else None
        budget = nested_loop.BUDGET if env is None else min(env, nested_loop.BUDGET)
        if p.nested:
            nested_loop.set_budgets(p, budget)
        n = self.slice if limit is None else min(self.slice, limit)
        start = time.perf_counter()
        done = step(n)
        if desc[10] and limit is None:
            return None
        guard = WhileGuard(self.instruction, limit)
        while True:
            elapsed = time.perf_counter() - start
            guard.advance(done)
            if desc[10]:
                return None
            if desc[11]:  # an inner loop ran out of its budget
                if env is not None and env <= budget:
                    raise too_many(while_name(nested_loop.exhausted(p)), env)
                return guard
            if guard.limit is not None and guard.count >= guard.limit:
                raise too_many(guard.what, guard.limit)
            if done == self.slice:
                if elapsed < SLICE_SECONDS / 4:
                    self.slice = min(self.slice * 4, _MAX_SLICE)
                elif elapsed > SLICE_SECONDS * 2:
                    self.slice = max(self.slice // 2, 1)
            n = self.slice
            if guard.limit is not None:
                n = min(n, guard.limit - guard.count)
            start = time.perf_counter()
            done = step(n)


class _Prepared:
    """One loop's prepared native state (see NativeWhile._prepare)."""

    def __init__(self) -> None:
        self.tables: list[Any] = []
        self.keep: list[Any] = []
        self.entries: list[Any] = []
        self.lists: list[Any] = []
        self.cells: Any = None
        self.swaps: Any = None
        self.copies: Any = None
        self.copied: list[tuple[int, int]] = []
        #: NativeWhile.moves as (k, j, address of the buffer k's value passes through).
        self.moved: list[tuple[int, int, int]] = []
        self.desc: Any = None
        #: Each state element's buffer as last bound (loop_bind.Binder; d[15]).
        self.statep: Any = None
        self.splits: list[loop_split.Split] = []
        #: This thread's rows of a row-split loop (row_loop.py), else None.
        self.rows: tuple[int, int] | None = None
        #: Its inner loops' steps (nested_loop.py).
        self.nested: list[nested_loop.Step] = []
        #: Errors of its callback steps (loop_callback.py), raised when the driver returns.
        self.failed: list[BaseException] = []
        #: loop_bind.py's per-call binding, the addresses it last bound, its Kept buffers.
        self.binder: Any = None
        self.bound: Any = None
        self.kept: Any = None  # (False: a state too big for them; None: not decided)


def _of_step(exe: CpuExecutable, gte: Instruction) -> bool:
    """Whether `gte` reads a result of a step with several: an inner loop that runs as one
    (nested_loop.py), an op with several results (loop_tuples.py) or a sort (loop_library.py)."""
    w = gte.operands[0]
    return (w.opcode == "while" and exe.nested.get(w.name) is not None) or \
        loop_tuples.reads_one(exe, gte) or loop_library.reads_one(exe, gte)


def owned_init(instr: Instruction) -> bool:
    """Whether `instr` is read only as one initial state element of a while in operand form
    (lax.scan's zeros for its stacked outputs): the executable gives it a fresh buffer per
    call instead of an arena one, and the native loop runs on that buffer instead of
    copying it (scan_ys: an 8 MB arena temporary less, peak 16 -> 8 MB as XLA's)."""
    users = instr.users
    if len(users) != 1 or users[0].opcode != "while":
        return False
    w = users[0]
    return not packed_state(w) and sum(o is instr for o in w.operands) == 1


def plan_native_while(instr: Instruction, cond: CpuExecutable, body: CpuExecutable
                      ) -> NativeWhile | None:
    """A NativeWhile when cond and body are only kernels over a flat array state, else None."""
    ops = instr.operands
    tupled = len(ops) == 1 and ops[0].shape.is_tuple
    elems = list(ops[0].shape.tuple_shapes) if tupled else [o.shape for o in ops]
    if not elems or not all(s.is_array for s in elems):
        return None
    for exe in (cond, body):
        comp = exe.comp
        params = comp.parameters
        if any(exe.nested.get(n) is None for n, _ in exe.subexecs) or \
                len(params) != (1 if tupled else len(elems)):
            return None
        for name, op, how in exe.report:
            if not (how.startswith(("kernel ", "in kernel ")) or how == "buffer"
                    or how in GEMM_KINDS or loop_library.takes(how)
                    or how.startswith(NATIVE_WHILE)
                    or op in ("get_tuple_element", "tuple", "region")
                    or loop_tuples.index(exe, name, how) is not None):
                return None
        if any(step is None for step in steps(exe)):
            return None
        for i in comp.instructions:
            if i.opcode == "get_tuple_element" and (not tupled or i.operands[0] is not params[0]
                                                    ) and not _of_step(exe, i):
                return None
            if i.opcode == "tuple" and i is not comp.root and not all(
                    u.opcode == "while" and exe.nested.get(u.name) is not None for u in i.users):
                return None  # (an inner loop's XLA-style state: nested_loop.py)
        if any(s.cost >= MAX_NATIVE_COST and s.partial for s in exe.kernel_specs):
            return None  # reduced in chunks combined by numpy on the Python path
    croot = cond.comp.root
    if croot is None or croot.opcode in ("get_tuple_element", "parameter", "tuple"):
        return None
    broot = body.comp.root
    if broot is None:
        return None
    results = list(broot.operands) if broot.opcode == "tuple" else [broot]
    if len(results) != len(elems):
        return None
    bparams = body.comp.parameters
    for k, o in enumerate(results):
        if o.opcode == "parameter" or (o.opcode == "get_tuple_element"
                                       and not _of_step(body, o)):
            j = dus_window.state_index(o, bparams, tupled)
            if j is None or elems[j] != elems[k]:
                return None  # (another element of the same shape: a move)
        elif id(o) not in body.slot:
            return None
    return NativeWhile(cond, body, tupled, results, instr)


__all__ = ["NativeWhile", "plan_native_while", "driver"]
