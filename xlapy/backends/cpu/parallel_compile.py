"""Several LLVM modules compiled at once on threads (issue 14: cold compile time).

llvmlite runs every call into LLVM under one process-wide lock (`ffi._LLVMLock`) and parses
into one global LLVMContext, so threads that call it compile one module at a time. A job
here parses into an LLVMContext of its own, on its thread's own TargetMachine, and makes the
two long calls (the optimization pipeline and code generation) through llvmlite's raw
ctypes functions, which release the GIL and take no lock, so independent modules compile
side by side. Same IR, same pipeline (llvm_util.pass_pipeline), same target-machine
settings: the objects are the serial path's, whichever thread compiled them. A
TargetMachine is used by one thread at a time (`_machine`); `prewarm` makes the first ones
(and starts a compile thread) in the background when the backend first compiles.

Threads pay on a busy machine too (`threads`): the threads no longer take turns at
llvmlite's lock (compile_o0), and a compile on two threads gets a larger share of busy
CPUs than one.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import llvmlite.binding as llvm
from llvmlite.binding import ffi
from llvmlite.binding.module import ModuleRef

from xlapy.backends.cpu import parallel, sched_mode, target
from xlapy.backends.cpu.llvm_util import (
    OPT_LEVEL,
    _init,
    module_text,
    pass_pipeline,
    target_machine,
)
from xlapy.backends.cpu.target import CpuTarget
from xlapy.phases import phase

T = TypeVar("T")

#: Compile threads at most.
MAX_THREADS = 4
#: LLVM instructions a module should have at least to be worth a thread: a module costs
#: about 1 ms of code generation however small, an instruction about 25 us.
MIN_INSTRUCTIONS = 100
#: Compile time per byte of IR text through O3 relative to the light pipeline (measured on
#: the transformer's modules: 30 ms for 17 KB of O3 IR, 36 ms for 66 KB light).
O3_WEIGHT = 3

#: TargetMachines no thread is using, by (target, code generation level).
_FREE: dict[tuple[CpuTarget, int], list[llvm.TargetMachine]] = {}
_FREE_LOCK = threading.Lock()
_POOL: tuple[int, ThreadPoolExecutor] | None = None  # (pid, pool)
_POOL_LOCK = threading.Lock()


def _after_fork() -> None:
    """A forked child's own lock: a parent thread may have held it at the fork."""
    global _FREE_LOCK
    _FREE_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork)


def threads(limit: int) -> int:
    """Threads to compile on: the CPUs this process may use, at most `limit` and
    MAX_THREADS, whatever else runs. Under CFS a compile split over two threads gets a
    larger share of a busy machine, not a smaller one: measured on the shared 2-CPU
    machine (cnn cold compiles, median, 1 vs 2 threads): idle 14.4 vs 10.2 ms, one busy
    process 16.1 vs 16.1, two 38.0 vs 24.6, four and more 100 vs 87 (the transformer's
    three modules: 420 vs 343). Asking the load first (the 1-minute average, then the
    running count) only ever sent compiles to the serial path there."""
    return max(1, min(limit, MAX_THREADS, parallel.usable_cpus()))


def chunks(sizes: Sequence[int], n: int) -> list[range]:
    """Contiguous ranges of `sizes` (instructions per function), at most `n` of them and
    each of about MIN_INSTRUCTIONS or more, balanced by size."""
    total = sum(sizes)
    k = max(1, min(n, len(sizes), total // MIN_INSTRUCTIONS))
    out: list[range] = []
    start, acc = 0, 0
    for i, s in enumerate(sizes):
        acc += s
        if len(out) < k - 1 and acc * k >= total * (len(out) + 1) and i + 1 < len(sizes):
            out.append(range(start, i + 1))
            start = i + 1
    out.append(range(start, len(sizes)))
    return out


def compile_all(jobs: Sequence[tuple[str, bool, bool]], n: int
                ) -> list[tuple[bytes, llvm.ModuleRef]]:
    """(object, optimized module) per job (IR text, vectorize, light) for the current
    target, on up to `n` threads, each compiling a share of the jobs balanced by their
    estimated cost (text size, O3 text O3_WEIGHT times the light pipeline's)."""
    t = target.current()
    _init()
    cost = [len(text) * (1 if light else O3_WEIGHT) for text, _, light in jobs]
    bins: list[list[int]] = [[] for _ in range(max(1, min(n, len(jobs))))]
    load = [0] * len(bins)
    for i in sorted(range(len(jobs)), key=lambda i: -cost[i]):
        b = load.index(min(load))
        bins[b].append(i)
        load[b] += cost[i]
    pool = _pool()
    futures: list[Future[list[tuple[bytes, llvm.ModuleRef]]]] = [
        pool.submit(lambda ids=ids: [_compile(*jobs[i], t) for i in ids]) for ids in bins]
    out: dict[int, tuple[bytes, llvm.ModuleRef]] = {}
    for ids, f in zip(bins, futures):
        out.update(zip(ids, f.result()))
    return [out[i] for i in range(len(jobs))]


def submit(text: str, vectorize: bool, light: bool, passes: bool = True,
           opt: int = OPT_LEVEL, emitting: threading.Event | None = None
           ) -> Future[tuple[bytes, llvm.ModuleRef]]:
    """(object, optimized module) of one module for the current target, compiled on a
    compile thread while the caller does other work (conv_compile.py: a convolution's -O3
    module beside its -O0 one). `passes` False: code generation alone (codegen); `opt`:
    the code generation level (0: compile_here's -O0 object). `emitting` is set when the
    thread starts code generation (or fails before): one long LLVM call without the GIL,
    where the parse and the pipeline before it take the GIL back after each of their ~15
    short calls, each a wait for a caller running Python (early_compile.py waits)."""
    t = target.current()
    _init()
    return _pool().submit(_compile, text, vectorize, light, t, passes, opt, emitting)


def run_on_pool(fn: Callable[[], T]) -> Future[T]:
    """fn() on a compile thread (loop_fused.py: a module's text built and compiled there)."""
    _init()
    return _pool().submit(fn)


def _pool() -> ThreadPoolExecutor:
    """The process's compile threads; a forked child makes its own (the parent's threads do
    not exist there, and its pool would queue work that nobody runs)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid():
            _POOL = (os.getpid(), ThreadPoolExecutor(MAX_THREADS, thread_name_prefix="xlapy-llvm"))
        return _POOL[1]


@contextlib.contextmanager
def _machine(t: CpuTarget, opt: int = OPT_LEVEL) -> Iterator[llvm.TargetMachine]:
    """A TargetMachine for `t` at code generation level `opt`, this thread's alone inside:
    taken from the free ones (prewarm's, or one an earlier compile gave back), else made."""
    with _FREE_LOCK:
        free = _FREE.setdefault((t, opt), [])
        tm = free.pop() if free else None
    if tm is None:
        tm = target_machine(t, opt=opt)
    try:
        yield tm
    finally:
        with _FREE_LOCK:
            _FREE[t, opt].append(tm)


#: The trivial function prewarm compiles (module_text adds the kernels' attributes).
_WARM_TEXT = 'define void @"xlapy.warm"()\n{\nentry:\n  ret void\n}\n'


def prewarm(t: CpuTarget) -> Future[None] | None:
    """Start-up work of the compile threads for `t`, once per process (and target), in the
    background when the backend first compiles: the compile thread started, and a -O3 and
    a -O0 TargetMachine made and run once on an empty function with the kernels'
    attributes, which builds their subtargets. A convolution's first compile in a process
    paid all of it on its critical path: the thread's start (0.5 ms), a machine on each
    side (0.3-0.5 ms each) and the first module through a fresh machine (1.1-1.3 ms more
    CPU than the next one). Machines are used one thread at a time (`_machine`), so
    nothing is compiled differently. Returns the background job (None if done before)."""
    with _FREE_LOCK:
        if (os.getpid(), t) in _WARMED:
            return None
        _WARMED.add((os.getpid(), t))
    _init()
    text = module_text(_WARM_TEXT)

    def warm() -> None:
        for opt in (OPT_LEVEL, 0):
            with _machine(t, opt) as tm:
                ref = _parse_own_context(text)
                ref.triple = t.triple
                ref.data_layout = str(tm.target_data)
                _emit(tm, ref)

    return _pool().submit(warm)


_WARMED: set[tuple[int, CpuTarget]] = set()


def _unlocked(name: str) -> Any:
    """llvmlite's ctypes function without its process-wide lock."""
    return getattr(ffi.lib, name)._cfn


class _ModuleOwningContext(ModuleRef):
    """A module parsed into an LLVMContext of its own, which it disposes after itself.

    llvmlite gives the module and its context a finalizer each; when both are cyclic
    garbage (an Engine in a reference cycle holds the module) the collector may finalize
    the context first, which frees the module, and then the module's own dispose frees it
    again: a segfault in the next collection after a convolution's compile."""

    _own_context: Any = None

    def _dispose(self) -> None:
        super()._dispose()
        ffi.lib.LLVMPY_ContextDispose(self._own_context)


def _parse_own_context(text: str) -> llvm.ModuleRef:
    """`text` parsed into a fresh LLVMContext that the module owns (_ModuleOwningContext)
    and verified, without llvmlite's lock (nothing else touches that context): a -O0
    module's parse on the calling thread does not wait for, nor hold up, a compile thread."""
    ctx = llvm.create_context()
    with ffi.OutputString() as err:
        ptr = _unlocked("LLVMPY_ParseAssembly")(ctx, ctypes.c_char_p(text.encode()), err)
        if err:
            raise RuntimeError(f"LLVM IR parsing error\n{err}")
    ref = ModuleRef(ptr, ctx)
    ctx._owned = True  # its finalizer no longer disposes it: the module's does
    ref.__class__ = _ModuleOwningContext
    ref._own_context = ctx._ptr
    with ffi.OutputString() as err:
        if _unlocked("LLVMPY_VerifyModule")(ref, err):
            raise RuntimeError(str(err))
    return ref


def compile_here(text: str, vectorize: bool, light: bool | str, opt: int = OPT_LEVEL
                 ) -> tuple[bytes, llvm.ModuleRef]:
    """(object, optimized module) of `text` (module_text'ed) for the current target, on
    the calling thread: its own context, a lent machine at code generation level `opt`,
    the pipeline and code generation outside llvmlite's lock. The library modules a first
    run builds (cache.engine: on the build-ahead thread, once.py, or the run's own) then
    hold up no other thread's LLVM calls for their 5-30 ms; the object is the one
    llvm_util.Engine compiles (o0_machine's for `opt` 0)."""
    _init()
    with phase("llvm codegen"):
        return _compile(text, vectorize, light, target.current(), opt=opt)


def _compile(text: str, vectorize: bool, light: bool | str, t: CpuTarget, passes: bool = True,
             opt: int = OPT_LEVEL, emitting: threading.Event | None = None
             ) -> tuple[bytes, llvm.ModuleRef]:
    try:
        with _machine(t, opt) as tm:
            ref = _parse_own_context(text)
            ref.triple = t.triple
            ref.data_layout = str(tm.target_data)
            if passes:
                mpm, pb = pass_pipeline(tm, vectorize, light)
                _unlocked("LLVMPY_RunNewModulePassManager")(mpm, ref, pb)
            if emitting is not None:
                emitting.set()
            with sched_mode.use(sched_mode.tracks_pressure(text)):
                return _emit(tm, ref), ref
    finally:
        if emitting is not None:
            emitting.set()


def codegen(text: str) -> tuple[bytes, llvm.ModuleRef]:
    """(object, parsed module) of `text` (module_text'ed) through the -O3 code generator
    alone, no optimization pass, on the calling thread (a lent machine, its own context, no
    llvmlite lock). For text that is already what the light pipeline would make of it: a
    convolution's register blocks (conv_block_text.py: SSA sums, no alloca, one loop
    nest), whose object is the light pipeline's byte for byte while the pipeline (built
    and run) cost ~0.15-0.2 ms of a ~3.8 ms compile on the cold compile's critical path."""
    _init()
    return _compile(text, True, True, target.current(), passes=False)


def compile_o0(text: str) -> tuple[bytes, llvm.ModuleRef]:
    """(object, parsed module) of `text` (module_text'ed) through no pass and LLVM's -O0
    code generator for the current target, on the calling thread with a -O0 TargetMachine
    of its own while it runs and without llvmlite's lock: a convolution's cold module
    (conv_compile.py) builds here while its hot one compiles on a compile thread. Under the
    lock the two took turns (the hot thread waited 4-5 ms for the lock to read its object
    back). The object is llvm_util.o0_machine's."""
    t = target.current()
    _init()
    with _machine(t, 0) as tm:
        with phase("llvm parse"):
            ref = _parse_own_context(text)
            ref.triple = t.triple
            ref.data_layout = str(tm.target_data)
        with phase("llvm codegen"):
            return _emit(tm, ref), ref


def _emit(tm: llvm.TargetMachine, ref: llvm.ModuleRef) -> bytes:
    """`ref`'s object code from `tm`, without llvmlite's lock."""
    with ffi.OutputString() as err:
        buf = _unlocked("LLVMPY_TargetMachineEmitToMemory")(tm, ref, 1, err)
        if not buf:
            raise RuntimeError(str(err))
    try:
        return ctypes.string_at(_unlocked("LLVMPY_GetBufferStart")(buf),
                                _unlocked("LLVMPY_GetBufferSize")(buf))
    finally:
        _unlocked("LLVMPY_DisposeMemoryBuffer")(buf)


__all__ = ["MAX_THREADS", "MIN_INSTRUCTIONS", "chunks", "codegen", "compile_all", "compile_here",
           "compile_o0", "prewarm", "submit", "threads"]
