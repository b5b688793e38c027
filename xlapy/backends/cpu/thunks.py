"""Per-call callables of compiled code: a kernel (split over the worker pool along its outer
loop), a reduce over dimension 0 split into partial outputs, a row-parallel region.

Each is `run(table, values, runtime, process)` over the executable's pointer table; native
code is called with the table address (ctypes releases the GIL). Split out of `executable`.
"""

from __future__ import annotations

import ctypes
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlapy.backends.cpu import blas, parallel, recycle, regions
from xlapy.backends.cpu.threads import NativePool, fn_address
from xlapy.interpreter import Interpreter, RuntimeState
from xlapy.ir import Instruction
from xlapy.ops.base import OPS

Thunk = Callable[[Any, list[Any], Any, Any], None]
#: (slot, dims, dtype) of a result allocated per call (recycle.output) before native code.
Fresh = tuple[int, tuple[int, ...], Any]


#: Ops whose work is the process grid's or the host's (their kernel hands values to
#: `ctx.process` / `ctx.runtime`): run as thunks calling into the grid, not fallbacks.
GRID_OPS = frozenset({"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                      "collective_permute", "collective_broadcast", "send", "recv", "infeed",
                      "outfeed", "replica_id", "partition_id", "interpreter.run_parallel"})


class FallbackContext:
    """The EvalContext of an op run through its interpreter kernel: its regions run as cpu
    executables (control flow), else on the interpreter."""

    __slots__ = ("instr", "subs", "runtime", "process")

    def __init__(self, instr: Instruction, subs: list[Any], runtime: RuntimeState,
                 process: Any) -> None:
        self.instr, self.subs, self.runtime, self.process = instr, subs, runtime, process

    def call(self, index: int, *args: Any) -> Any:
        sub = self.subs[index] if self.subs else None
        if sub is not None:
            return sub.run_computation(list(args), self.runtime, self.process)
        return Interpreter(self.runtime, self.process).run(self.instr.called[index], list(args))

    @property
    def num_regions(self) -> int:
        return len(self.instr.called)

    @property
    def backend(self) -> str:
        """What programs an op starts (interpreter.run_parallel's grid) are compiled for."""
        return "cpu"

    @property
    def instruction(self) -> Instruction:
        return self.instr


def host_facing(instr: Instruction, subs: Sequence[Any] = ()) -> bool:
    """Whether an op, or one in the computations it calls, is side-effecting (hands values to
    host code or other processes, which may keep them). A called computation whose
    executable in `subs` hands its operands to none (`host_safe`: branch_loop.Trip) is not
    looked into."""
    if OPS[instr.opcode].side_effecting:
        return True
    safe = [getattr(s, "host_safe", False) for s in subs] or [False] * len(instr.called)
    return any(host_facing(i) for c, ok in zip(instr.called, safe) if not ok
               for i in c.instructions)


def off_arena(value: Any, raw: np.ndarray) -> Any:
    """`value` with every array that may share memory with the arena `raw` copied: what host
    code receives or an interpreter kernel returns must survive the arena's reuse (by later
    thunks of this call and by every later call)."""
    if isinstance(value, tuple):
        return tuple(off_arena(v, raw) for v in value)
    if isinstance(value, np.ndarray) and np.may_share_memory(value, raw):
        return value.copy()
    return value


def ptr(a: np.ndarray) -> int:
    """The data address of a C-contiguous array (a writable one without numpy's slow
    `.ctypes`: 0.25 us instead of 0.9)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError, BufferError):
        return int(a.ctypes.data)


def bounds(extent: int, parts: int, align: int = 1) -> list[int]:
    """Split points of [0, extent) into `parts` ranges, inner ones at multiples of align."""
    return [extent * k // parts // align * align for k in range(parts)] + [extent]


def spread(fn: Any, fa: int, args: list[int], cuts: list[int], threads: int,
           pool: Callable[[], NativePool]) -> None:
    """fn(args[k], cuts[k], cuts[k + 1]) for every chunk k: one chunk per thread, or, with
    more chunks than threads, each thread taking the next chunk left (NativePool.share)."""
    chunks = len(cuts) - 1
    g = parallel.groups(chunks, threads)
    if len(g) == chunks + 1:  # a chunk per thread
        p = pool() if chunks > 1 else None
        futs = [p.submit(fa, args[k], cuts[k], cuts[k + 1]) for k in range(1, chunks)] \
            if p is not None else []
        fn(args[0], cuts[0], cuts[1])
        for f in futs:
            f.result()
        return
    if threads < 2:
        for k in range(chunks):
            fn(args[k], cuts[k], cuts[k + 1])
        return
    pool().share([(fa, (args[k], cuts[k], cuts[k + 1])) for k in range(chunks)], threads)


def split_thunk(fn: Any, extent: int, parts: int, align: int, keep: dict[int, Any],
                fresh: list[Fresh], pool: Callable[[], NativePool],
                before: Callable[[], None] | None = None,
                arg: Callable[[Any], int] = ctypes.addressof,
                cuts: list[int] | None = None,
                alias: list[tuple[int, int]] | None = None) -> Thunk:
    """fn(arg(table), begin, end) over [0, extent), split into `parts` ranges (1: no split)
    run on the caller and the native workers, or into the fixed chunks `cuts` shared by
    `parts` threads; `fresh` results are allocated first, then each (slot, result slot) of
    `alias` points at its result's buffer (inplace.into_outputs)."""
    fa = fn_address(fn)
    if cuts is None:
        cuts = bounds(extent, max(1, min(parts, extent)), align)
    whole = len(cuts) <= 2

    def run(t: Any, v: list[Any], rt: Any, pr: Any) -> None:
        for s, dims, dtype in fresh:
            arr = recycle.output(keep, s, dims, dtype)
            v[s] = arr
            t[s] = ptr(arr)
        for s, o in alias or ():
            t[s] = t[o]
        addr = arg(t)
        if whole:
            fn(addr, 0, extent)
            return
        if before is not None:
            before()
        spread(fn, fa, [addr] * (len(cuts) - 1), cuts, parts, pool)

    if whole and before is None and not alias and arg is ctypes.addressof:
        run.native = (fa, extent, fresh)  # type: ignore[attr-defined]  # (kernel_batch.py)
    return run


def region_thunk(region: regions.Region, kernel_address: dict[str, int], parts: int,
                 keep: dict[int, Any], fresh: list[Fresh], pool: Callable[[], NativePool],
                 shared_table: Callable[[], Any],
                 alias: list[tuple[int, int]] | None = None) -> Thunk:
    """A row-parallel region (regions.py) split by rows. Its steps array names the pointer
    table: built once for the executable's shared table (only used under its lock), per
    call for a private one (kept alive in a thread-local until that thread's next call).
    The native region runner (compiled for the host: ~70 ms the first time in a process
    compiling for another target, its runtime library too) is fetched on the first run."""
    shared: list[Any] = [None, 0, None]  # the shared table, its steps, the arrays to keep
    local = threading.local()

    def steps(t: Any) -> int:
        if t is shared[0]:
            return int(shared[1])
        addr, arrays = regions.steps(region, ctypes.addressof(t), kernel_address)
        if t is shared_table():
            shared[:] = [t, addr, arrays]
        else:
            local.keep = arrays
        return addr

    built: list[Thunk] = []

    def run(t: Any, v: list[Any], rt: Any, pr: Any) -> None:
        if not built:  # the process's native runner, built on a first run, not in a compile
            built.append(split_thunk(regions.run_function(), region.rows, parts, region.align,
                                     keep, fresh, pool, before=lambda: blas.ready(pool()),
                                     arg=steps, cuts=region.cuts(),
                                     alias=alias))
        built[0](t, v, rt, pr)

    return run


#: Bytes of a cache line (x86-64, aarch64's common cores).
CACHE_LINE = 64


def _partial_rows(chunks: int, dims: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A stack of `chunks` partial outputs of `dims`, each row on cache lines of its own
    (rows a line apart and one line between): threads adding into rows that shared a line
    took turns owning it (a c64[1M, 4] column sum: 13 ms on two threads, 4 on one)."""
    row = math.prod(dims) * np.dtype(dtype).itemsize
    pitch = -(-row // CACHE_LINE) * CACHE_LINE + CACHE_LINE
    raw = np.empty((chunks, pitch), np.uint8)
    return raw[:, :row].view(dtype).reshape((chunks, *dims))


def ordered_combine(rows: np.ndarray, is_max: bool) -> np.ndarray:
    """The float max (min) of partial rows as the kernels fold them (llvm.maximum /
    minimum): a NaN wins (the first row's), and -0 < +0, which np.max leaves to the order.
    Whole-stack numpy calls (a combine per row cost ~9 us a chunk)."""
    with np.errstate(invalid="ignore"):
        out = rows.max(0) if is_max else rows.min(0)
    zero = out == 0
    if zero.any():  # a max is +0 if any row's is, a min -0 if any row's is
        signed = ((rows == 0) & (np.signbit(rows) != is_max)).any(0)
        out[zero] = np.where(signed[zero], 0.0 if is_max else -0.0, -0.0 if is_max else 0.0)
    nan = np.isnan(out)
    if nan.any():
        cols = rows[:, nan]
        out[nan] = cols[np.isnan(cols).argmax(0), np.arange(cols.shape[1])]
    return out


def partial_thunk(fn: Any, cuts: list[int], parts: int, reducer: str, keep: dict[int, Any],
                  out: int, dims: tuple[int, ...], dtype: Any, is_fresh: bool,
                  pool: Callable[[], NativePool]) -> Thunk:
    """A reduce over dimension 0 in the fixed chunks `cuts` (parallel.partial_cuts), shared
    by `parts` threads: chunk k reduces into row k of a stack of partial outputs (a copy of
    the table pointing there), then the rows are combined into the real output with the
    reducer's numpy accumulate, in chunk order, so the bits never depend on the thread
    count. The stack and the table copies of the executable's shared table are made once
    (16 chunks' allocations, copies and combines cost ~40 us a call)."""
    half = np.dtype(dtype).name == "bfloat16"  # (ordered in f32: exact)
    floats = (np.dtype(dtype).kind == "f" or half) and reducer in ("maximum", "minimum")
    combine = {"add": np.add, "maximum": np.maximum, "minimum": np.minimum,
               "and": np.bitwise_and, "or": np.bitwise_or}[reducer]
    fa = fn_address(fn)
    chunks = len(cuts) - 1
    kept: list[Any] = []  # [the table they copy, stack, accumulated, tables, addresses]

    def state(t: Any) -> list[Any]:
        if kept and kept[0] is t:
            for tk, row in zip(kept[3], kept[4]):
                ctypes.memmove(tk, t, ctypes.sizeof(t))
                tk[out] = row
            return kept
        stack, acc = _partial_rows(chunks, dims, dtype), np.empty((chunks, *dims), dtype)
        tables = [type(t).from_buffer_copy(t) for _ in range(chunks)]
        rows = [ptr(stack) + k * stack.strides[0] for k in range(chunks)]
        for tk, row in zip(tables, rows):
            tk[out] = row
        got = [t, stack, acc, tables, rows]
        if not kept:  # (the first call's table: the shared one; a concurrent call's is not)
            kept[:] = got
        return got

    def run(t: Any, v: list[Any], rt: Any, pr: Any) -> None:
        if is_fresh:
            arr = recycle.output(keep, out, dims, dtype)
            v[out] = arr
            t[out] = ptr(arr)
        _, stack, acc, tables, _ = state(t)
        spread(fn, fa, [ctypes.addressof(tk) for tk in tables], cuts, parts, pool)
        if floats:
            got = ordered_combine(stack.astype(np.float32) if half else stack,
                                  reducer == "maximum")
            np.copyto(v[out], got.astype(dtype) if half else got)
            return
        with np.errstate(all="ignore"):
            combine.accumulate(stack, axis=0, out=acc)
        np.copyto(v[out], acc[-1])

    return run


__all__ = ["GRID_OPS", "FallbackContext", "host_facing", "off_arena", "split_thunk",
           "partial_thunk", "region_thunk", "ptr",
           "spread", "bounds", "Fresh", "Thunk"]
