"""Native worker threads for split kernels, convolutions and GEMMs: hand-offs in microseconds.

On this VM a sleeping thread takes ~50-90 us to wake, and so does a thread waiting for the
GIL: a no-op round trip through `ThreadPoolExecutor` cost 55-90 us, and a Python-level
spin-then-sleep pool still 30-50 us (the worker needs the GIL to start the job). That is
most of the gain of splitting a 1 ms GEMM or a 200 us kernel. Here a worker never touches
Python: it runs a JIT-compiled loop (started once from a daemon Python thread through ctypes,
GIL released for good) that waits for a job by spinning on a counter (`pause`, bounded to
SPIN_US), then sleeps on a futex; a job is a native function pointer and up to 13 integer or
pointer arguments (kernels take 3, the direct convolution 5, sgemm/dgemm 13: x86-64 passes
them all in the same registers/stack slots, extra ones are ignored). The caller posts with a
native call and waits the same way: spin, then futex. Under load the spin is short and
bounded (OpenBLAS's own threads spin far longer, which is why BLAS calls run single-threaded
and are split here).

A job nobody has started is taken back: whoever runs a job first claims it (a compare and
swap of the slot's claimed counter from seq - 1 to seq), the worker when it wakes, the caller
when it comes to wait. On a loaded machine (more runnable threads than cores) a worker may
not get a core for a scheduler tick or more; the caller then runs the job itself when done
with its own part, so a split costs at most the serial time instead of a tick per hand-off
(a lax.scan of a small dot + tanh: 2 ms a step with 9 runnable threads on 2 cores).

Work of many jobs is shared, not dealt out: `share` posts one `claim_run` per helping worker
and runs one itself, each taking the next unclaimed job of a list (an atomic counter) until
none is left. A worker that loses its core then holds up one job at most, never a fixed
share of them, and nobody waits between turns.

Sleeping is race-free: the sleeper stores its flag, then re-reads the counter; the poster
stores the counter, then reads the flag (both sequentially consistent), and FUTEX_WAIT
itself re-checks the counter, so a wake-up is never lost.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import target
from xlapy.backends.cpu.llvm_util import (
    I32,
    I64,
    VOID,
    Engine,
    for_range,
    new_module,
    on_host,
)
from xlapy.backends.cpu.once import ahead, once
from xlapy.errors import XlapyError

#: How long a waiting side spins before it sleeps on the futex.
SPIN_US = 200.0
MAX_ARGS = 13
_WAIT, _WAKE = 128, 129  # FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE
#: Linux's futex system call number per architecture.
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}
# Slot layout (i64 words): 0 posted (i32), 1 finished (i32), 2 worker sleeping, 3 caller
# sleeping, 4 spin rounds, 5 claimed (i32), 6 function, 7.. arguments.
_POSTED, _FINISHED, _WSLEEP, _CSLEEP, _ROUNDS, _CLAIMED, _FN, _ARGS = 0, 1, 2, 3, 4, 5, 6, 7
_SLOT_WORDS = _ARGS + MAX_ARGS
#: Words of one job of `share`: the function, then its arguments.
JOB_WORDS = 1 + MAX_ARGS
_VOIDP = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_WAITF = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32)
_CALL = ctypes.CFUNCTYPE(None, *([ctypes.c_int64] * MAX_ARGS))


def call(fn: int, *args: int) -> None:
    """Run the native job fn(*args) on this thread (what a worker would)."""
    f = _CALLS.get(fn)
    if f is None:  # (a ctypes function object per call cost ~1 us: a batch of small
        f = _CALLS[fn] = _CALL(fn)  # products made one per product)
    f(*args, *_ZEROS[len(args):])


#: ctypes functions of the job addresses `call` has run (native code lives while the
#: process does: library engines are kept once built).
_CALLS: dict[int, Any] = {}
_ZEROS = (0,) * MAX_ARGS


def _emit() -> ir.Module:
    mod = new_module("xlapy_threads")
    i32p = I32.as_pointer()
    i64p = I64.as_pointer()
    sysc = ir.Function(mod, ir.FunctionType(I64, [I64], var_arg=True), name="syscall")
    arch = target.current().arch
    if arch not in _SYS_FUTEX:
        raise XlapyError(f"cpu backend: no native worker pool for {arch}")
    if arch == "x86_64":
        pause_fn = ir.Function(mod, ir.FunctionType(VOID, []), name="llvm.x86.sse2.pause")
        pause_args: list[ir.Value] = []
    else:  # aarch64: `yield` (hint #1)
        pause_fn = ir.Function(mod, ir.FunctionType(VOID, [I32]), name="llvm.aarch64.hint")
        pause_args = [ir.Constant(I32, 1)]
    job_t = ir.FunctionType(VOID, [I64] * MAX_ARGS)

    def word(b: ir.IRBuilder, slot: ir.Value, k: int) -> ir.Value:
        return b.gep(slot, [ir.Constant(I64, k)])

    def i32_at(b: ir.IRBuilder, slot: ir.Value, k: int) -> ir.Value:
        return b.bitcast(word(b, slot, k), i32p)

    def futex(b: ir.IRBuilder, addr: ir.Value, op: int, val: ir.Value) -> None:
        b.call(sysc, [ir.Constant(I64, _SYS_FUTEX[arch]), b.ptrtoint(addr, I64),
                      ir.Constant(I64, op), b.sext(val, I64), ir.Constant(I64, 0)])

    def await_change(fn: ir.Function, b: ir.IRBuilder, slot: ir.Value, counter: int,
                     flag: int, old: ir.Value) -> None:
        """Spin (bounded) until slot[counter] != old, then sleep on its futex."""
        cptr, fptr = i32_at(b, slot, counter), i32_at(b, slot, flag)
        pre = b.block
        head, body, slow, sleep, done = (fn.append_basic_block(n) for n in
                                         ("spin", "pause", "slow", "sleep", "ready"))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64)
        i.add_incoming(ir.Constant(I64, 0), pre)
        v = b.load_atomic(cptr, "acquire", 4)
        b.cbranch(b.icmp_signed("!=", v, old), done, body)
        b.position_at_end(body)
        b.call(pause_fn, pause_args)
        nxt = b.add(i, ir.Constant(I64, 1))
        i.add_incoming(nxt, body)
        rounds = b.load_atomic(word(b, slot, _ROUNDS), "monotonic", 8)  # (0 while parked)
        b.cbranch(b.icmp_signed("<", nxt, rounds), head, slow)
        b.position_at_end(slow)
        b.store_atomic(ir.Constant(I32, 1), fptr, "seq_cst", 4)
        b.branch(sleep)
        b.position_at_end(sleep)
        v2 = b.load_atomic(cptr, "seq_cst", 4)
        again = b.icmp_signed("==", v2, old)
        wait_bb = fn.append_basic_block("futex_wait")
        woke = fn.append_basic_block("woke")
        b.cbranch(again, wait_bb, woke)
        b.position_at_end(wait_bb)
        futex(b, cptr, _WAIT, old)
        b.branch(sleep)
        b.position_at_end(woke)
        b.store_atomic(ir.Constant(I32, 0), fptr, "seq_cst", 4)
        b.branch(done)
        b.position_at_end(done)

    def bump_and_wake(b: ir.IRBuilder, slot: ir.Value, counter: int, flag: int,
                      value: ir.Value) -> None:
        cptr, fptr = i32_at(b, slot, counter), i32_at(b, slot, flag)
        b.store_atomic(value, cptr, "seq_cst", 4)
        sleeping = b.load_atomic(fptr, "seq_cst", 4)
        with b.if_then(b.icmp_signed("!=", sleeping, ir.Constant(I32, 0)), likely=False):
            futex(b, cptr, _WAKE, ir.Constant(I32, 1))

    def claim(b: ir.IRBuilder, slot: ir.Value, seq: ir.Value) -> ir.Value:
        """i1: this thread took job `seq` (nobody had)."""
        res = b.cmpxchg(i32_at(b, slot, _CLAIMED), b.sub(seq, ir.Constant(I32, 1)), seq,
                        "seq_cst", "seq_cst")
        return b.extract_value(res, 1)

    def run_job(b: ir.IRBuilder, slot: ir.Value) -> None:
        job = b.inttoptr(b.load(word(b, slot, _FN)), job_t.as_pointer())
        b.call(job, [b.load(word(b, slot, _ARGS + k)) for k in range(MAX_ARGS)])

    # void worker(i64* slot): forever { wait for a post; claim and run it; publish finished }
    fn = ir.Function(mod, ir.FunctionType(VOID, [i64p]), name="worker")
    slot = fn.args[0]
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    loop = fn.append_basic_block("loop")
    b.branch(loop)
    b.position_at_end(loop)
    seen = b.phi(I32)
    seen.add_incoming(ir.Constant(I32, 0), entry)
    await_change(fn, b, slot, _POSTED, _WSLEEP, seen)
    cur = b.load_atomic(i32_at(b, slot, _POSTED), "acquire", 4)
    with b.if_then(claim(b, slot, cur)):  # else the caller took it back and runs it
        run_job(b, slot)
        bump_and_wake(b, slot, _FINISHED, _CSLEEP, cur)
    seen.add_incoming(cur, b.block)
    b.branch(loop)

    # void post(i64* slot): the job words are written; publish posted + 1.
    fn = ir.Function(mod, ir.FunctionType(VOID, [i64p]), name="post")
    slot = fn.args[0]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    old = b.load_atomic(i32_at(b, slot, _POSTED), "monotonic", 4)
    bump_and_wake(b, slot, _POSTED, _WSLEEP, b.add(old, ir.Constant(I32, 1)))
    b.ret_void()

    # void pauses(i64 n): n rounds of pause (calibrates SPIN_US in rounds).
    fn = ir.Function(mod, ir.FunctionType(VOID, [I64]), name="pauses")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    with for_range(b, ir.Constant(I64, 0), fn.args[0]):
        b.call(pause_fn, pause_args)
    b.ret_void()

    # void claim_run(i64* jobs): jobs = [next, count, (fn, MAX_ARGS arguments) * count];
    # runs job `next` (taken atomically) until none is left.
    fn = ir.Function(mod, ir.FunctionType(VOID, [i64p]), name="claim_run")
    jobs = fn.args[0]
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    loop, body, done = (fn.append_basic_block(n) for n in ("claim", "job", "done"))
    b.branch(loop)
    b.position_at_end(loop)
    k = b.atomic_rmw("add", jobs, ir.Constant(I64, 1), "monotonic")
    b.cbranch(b.icmp_signed("<", k, b.load(word(b, jobs, 1))), body, done)
    b.position_at_end(body)
    rec = b.gep(jobs, [b.add(b.mul(k, ir.Constant(I64, JOB_WORDS)), ir.Constant(I64, 2))])
    job = b.inttoptr(b.load(rec), job_t.as_pointer())
    b.call(job, [b.load(word(b, rec, 1 + j)) for j in range(MAX_ARGS)])
    b.branch(loop)
    b.position_at_end(done)
    b.ret_void()

    # void wait(i64* slot, i32 seq, i32 steal): until finished == seq; with `steal`, a job
    # the worker has not claimed yet runs here.
    fn = ir.Function(mod, ir.FunctionType(VOID, [i64p, I32, I32]), name="wait")
    slot, seq, steal = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    with b.if_then(b.icmp_signed("!=", steal, ir.Constant(I32, 0))):
        with b.if_then(claim(b, slot, seq)):
            run_job(b, slot)
            b.store_atomic(seq, i32_at(b, slot, _FINISHED), "release", 4)
            b.ret_void()
    await_change(fn, b, slot, _FINISHED, _CSLEEP, b.sub(seq, ir.Constant(I32, 1)))
    b.ret_void()
    return mod


def build_ahead() -> None:
    """In a compile whose program runs on threads: the pool's native code is built while
    the compile returns (once.py; the pool's threads are still started on first use)."""
    ahead(_native)


@once
@on_host
def _native() -> tuple[Engine, Any, Any, int, int]:
    """(engine, post, wait, worker address, spin rounds per SPIN_US)."""
    from xlapy.backends.cpu import cache

    # From the disk cache when a process built it before (compiling it took ~25 ms of a
    # program's first run); the light pipeline (its loops are atomics, pauses and calls:
    # O3's code differed in 3 of ~190 instructions) halves the compile: 16 -> 8 ms.
    eng = cache.library_engine(("thread-pool",), _emit, "thread-pool-light", light=True,
                               exports=["pauses", "post", "wait", "worker", "claim_run"])
    pauses = ctypes.CFUNCTYPE(None, ctypes.c_int64)(eng.address("pauses"))
    n = 20000
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        pauses(n)
        best = min(best, time.perf_counter() - t0)
    rounds = max(64, int(SPIN_US * 1e-6 * n / max(best, 1e-9)))
    return (eng, _VOIDP(eng.address("post")), _WAITF(eng.address("wait")),
            eng.address("worker"), rounds)


def job_table(jobs: list[tuple[int, tuple[int, ...]]]) -> np.ndarray:
    """The table claim_run takes jobs from: [next, count, then per job its function and
    arguments (JOB_WORDS words)]."""
    table = np.zeros(2 + JOB_WORDS * len(jobs), np.int64)
    table[1] = len(jobs)
    for k, (fn, args) in enumerate(jobs):
        at = 2 + JOB_WORDS * k
        table[at] = fn
        table[at + 1:at + 1 + len(args)] = args
    return table


def strided_table(fn: int, first: Sequence[int], step: Sequence[int], count: int
                  ) -> np.ndarray:
    """The job table (job_table) of `count` calls of fn whose argument i is first[i] + j *
    step[i] in call j, built whole: a Python tuple per job cost ~1 us (a batch of 512 small
    products spent 0.5 ms of its 0.75 building its jobs)."""
    table = np.zeros(2 + JOB_WORDS * count, np.int64)
    table[1] = count
    jobs = table[2:].reshape(count, JOB_WORDS)
    jobs[:, 0] = fn
    j = np.arange(count, dtype=np.int64)[:, None]
    jobs[:, 1:1 + len(first)] = np.asarray(first, np.int64) + j * np.asarray(step, np.int64)
    return table


def run_table(table: np.ndarray) -> None:
    """Every job of a job table on this thread, in order (run_all's native call)."""
    claim_here()(table.ctypes.data)


def run_all(jobs: list[tuple[int, tuple[int, ...]]]) -> None:
    """Every (function, arguments) job on this thread, in order, in one native call
    (claim_run over a job table, no worker): a ctypes call per job cost ~2 us of argument
    conversion, most of a batch of small products' time (einsum of 4 8 x 16 x 5: 8 us)."""
    if len(jobs) == 1:
        call(jobs[0][0], *jobs[0][1])
        return
    if jobs:
        table = job_table(jobs)
        claim_here()(table.ctypes.data)


@once
def claim_here() -> Any:
    """claim_run as a ctypes function of a job table's address, for this thread: it runs
    every job left (the table's first word, the next job, 0 runs them all)."""
    return _VOIDP(_native()[0].address("claim_run"))


class Handle:
    """A posted job: `result()` waits for it (spin, then futex); `keep` holds the objects
    its arguments point into until then."""

    __slots__ = ("pool", "worker", "seq", "keep", "lent")

    def __init__(self, pool: NativePool | None, worker: int, seq: int, keep: Any,
                 lent: list[int] | None = None) -> None:
        self.pool, self.worker, self.seq, self.keep = pool, worker, seq, keep
        self.lent = lent

    def result(self) -> None:
        pool = self.pool
        if pool is None:
            return
        self.pool = None
        if self.lent is None:
            pool._wait(self.worker, self.seq, True)
        else:  # a reserved worker stays reserved: back to its lender's list
            pool._wait_fn(pool.addrs[self.worker], self.seq, 1)
            self.lent.append(self.worker)
        self.keep = None


class NativePool:
    """`submit(fn_address, *int_args, keep=...) -> Handle` over native worker threads."""

    def __init__(self, workers: int) -> None:
        eng, self._post, self._wait_fn, worker_addr, rounds = _native()
        self._claim = eng.address("claim_run")
        self._claim_run = _VOIDP(self._claim)
        self.slots = np.zeros((workers, _SLOT_WORDS), np.int64)
        self.slots[:, _ROUNDS] = self._rounds = rounds
        self._parked = 0
        self.addrs = [self.slots[k].ctypes.data for k in range(workers)]
        self.seqs = [0] * workers
        self.busy = [False] * workers
        self.idents: set[int] = set()
        self._mu = threading.Lock()
        self._lent = threading.local()
        run = _VOIDP(worker_addr)
        for k in range(workers):
            th = threading.Thread(target=run, args=(self.addrs[k],), daemon=True,
                                  name=f"xlapy-cpu-{k}")
            th.start()
            if th.ident is not None:
                self.idents.add(th.ident)
        self.workers = workers

    def submit(self, fn: int, *args: int, keep: Any = None) -> Handle:
        """Run fn(*args) on a free worker; inline when none is free."""
        with self._mu:
            k = next((j for j in range(self.workers) if not self.busy[j]), -1)
            if k >= 0:
                self.busy[k] = True
        lent = None
        if k < 0:
            lent = getattr(self._lent, "ks", None)
            if not lent:
                call(fn, *args)
                return Handle(None, 0, 0, None)
            k = lent.pop()  # (its counter moved on with the native caller's posts)
            self.seqs[k] = int(self.slots[k, _POSTED]) & 0xFFFFFFFF
        row = self.slots[k]
        row[_FN] = fn
        row[_ARGS:_ARGS + len(args)] = args
        self.seqs[k] += 1
        self._post(self.addrs[k])
        return Handle(self, k, self.seqs[k], keep, lent)

    def share(self, jobs: list[tuple[int, tuple[int, ...]]], threads: int,
              keep: Any = None) -> None:
        """Run every (function, arguments) job, this thread and up to threads - 1 workers
        each taking the next one left; returns when all have run."""
        if jobs:
            self.share_table(job_table(jobs), threads, keep)

    def share_table(self, table: np.ndarray, threads: int, keep: Any = None) -> None:
        """`share` of a job table made already (job_table; its counter at 0)."""
        addr = table.ctypes.data
        futs = [self.submit(self._claim, addr, keep=(table, keep))
                for _ in range(min(threads, int(table[1])) - 1)]
        self._claim_run(addr)
        for f in futs:
            f.result()

    def on_each(self, fn: int, *args: int) -> None:
        """Run fn(*args) once on every worker (per-thread library settings)."""
        for k in range(self.workers):
            with self._mu:
                while self.busy[k]:  # pragma: no cover - setup runs before any split
                    self._mu.release()
                    time.sleep(0.0001)
                    self._mu.acquire()
                self.busy[k] = True
            row = self.slots[k]
            row[_FN] = fn
            row[_ARGS:_ARGS + len(args)] = args
            self.seqs[k] += 1
            self._post(self.addrs[k])
            self._wait(k, self.seqs[k], False)  # it must run on that worker

    @contextlib.contextmanager
    def parked(self) -> Iterator[None]:
        """Workers spinning for a job sleep now, and later ones without spinning, until the
        block ends: for a library call that brings threads of its own (scipy's FFT workers),
        which a spinning worker left a core short for up to SPIN_US."""
        with self._mu:
            self._parked += 1
            self.slots[:, _ROUNDS] = 0
        try:
            yield
        finally:
            with self._mu:
                self._parked -= 1
                if not self._parked:
                    self.slots[:, _ROUNDS] = self._rounds

    def _wait(self, k: int, seq: int, steal: bool) -> None:
        self._wait_fn(self.addrs[k], seq, int(steal))
        self.busy[k] = False

    def reserve(self, n: int) -> list[int]:
        """Up to n free workers, marked busy for a native caller that posts to their slots
        itself (`slot_words`, `natives`) until `release`."""
        with self._mu:
            ks = [k for k in range(self.workers) if not self.busy[k]][:max(n, 0)]
            for k in ks:
                self.busy[k] = True
        return ks

    @contextlib.contextmanager
    def lending(self, ks: list[int]) -> Iterator[None]:
        """Workers `ks`, reserved by this thread (`reserve`), taken by its own `submit`s
        inside the block when no other worker is free: a native loop's callback steps
        (loop_callback.py: a batched dot's products) run while its reserved workers idle
        between split steps, where they had run on this thread alone (an attention
        gradient's four dots: 164 us each on two threads, as on one)."""
        prev = getattr(self._lent, "ks", None)
        self._lent.ks = list(ks)
        try:
            yield
        finally:
            self._lent.ks = prev

    def release(self, ks: list[int]) -> None:
        """Workers reserved by `reserve`, free again: their posted counters (bumped by the
        native caller) become the pool's sequence numbers."""
        for k in ks:
            self.seqs[k] = int(self.slots[k, _POSTED]) & 0xFFFFFFFF
            self.busy[k] = False


def natives() -> tuple[int, int]:
    """The addresses of post(slot) and wait(slot, seq, steal), for native callers of
    reserved workers: a job is the slot's words `slot_words()` (function, arguments) written
    before post; seq is the slot's posted counter after it."""
    eng = _native()[0]
    return eng.address("post"), eng.address("wait")


def slot_words() -> tuple[int, int, int]:
    """(posted counter (i32), function, first argument) word indices of a worker's slot."""
    return _POSTED, _FN, _ARGS


_POOL: NativePool | None = None
#: Pools replaced by bigger ones, kept for good: their worker threads never exit and read
#: their slots (freed slots were reused by other arrays, whose writes those threads took
#: for jobs: test_threads' private slot then waited forever).
_RETIRED: list[NativePool] = []
_POOL_LOCK = threading.Lock()


def native_pool(workers: int) -> NativePool:
    """The process's pool, with at least `workers` threads: created on first use, replaced
    by a bigger one when an executable asks for more threads (the old one's jobs in flight
    still finish; its idle threads sleep in the futex)."""
    global _POOL
    pool = _POOL
    if pool is not None and pool.workers >= workers:
        return pool
    with _POOL_LOCK:
        if _POOL is None or _POOL.workers < workers:
            if _POOL is not None:  # its threads live on, spinning or asleep on its slots
                _RETIRED.append(_POOL)
            _POOL = NativePool(workers)
        return _POOL


def parked() -> contextlib.AbstractContextManager[None]:
    """The process's pool parked (NativePool.parked) while the block runs, if it exists."""
    pool = _POOL
    return contextlib.nullcontext() if pool is None else pool.parked()


def fn_address(f: Any) -> int:
    """The address of a ctypes function object."""
    return int(ctypes.cast(f, ctypes.c_void_p).value or 0)


__all__ = ["call", "Handle", "NativePool", "native_pool", "fn_address", "natives", "slot_words",
           "SPIN_US", "MAX_ARGS", "JOB_WORDS"]
