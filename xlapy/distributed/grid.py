"""The threaded process grid: `num_replicas x num_partitions` processes, one thread each.

Every process runs an interpreter whose `ctx.process` is a `GridProcess` (the
`collectives.ProcessGroupHandle` protocol). Collectives meet at a rendezvous keyed by
(op, process group, n-th call of that op on that group); channels are FIFO queues keyed by
channel id; each process has its own infeed/outfeed queue the host can feed and drain while
programs run.

Failure is loud, never a hang: a rendezvous that a member never reaches fails after `timeout`
seconds (at once when that member already finished), naming the op, the group and who is
missing; a process that raises stops every other process at its next grid interaction (or
while-loop poll, ops/loop_guard.py) with that error; members posting different shapes to one
collective is an error on all of them; a process still running `timeout` seconds after the
last other one ended is abandoned with an error saying what it was doing (and stops at its
next poll). `timeout` defaults to `$XLAPY_GRID_TIMEOUT`, else 30 s.
"""

from __future__ import annotations

import contextvars
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from xlapy.distributed.programs import program_runners
from xlapy.errors import CollectiveError
from xlapy.interpreter import RuntimeState
from xlapy.ir import Computation, Module
from xlapy.ops import loop_guard
from xlapy.types.limits import env_number

ProcessId = tuple[int, int]

#: Seconds a process waits for its peers (rendezvous, recv, infeed, end of run) before
#: failing, unless `$XLAPY_GRID_TIMEOUT` or the grid's `timeout=` says otherwise.
DEFAULT_TIMEOUT = 30.0
ENV_TIMEOUT = "XLAPY_GRID_TIMEOUT"


def default_timeout() -> float:
    """`$XLAPY_GRID_TIMEOUT` seconds, else DEFAULT_TIMEOUT."""
    return env_number(ENV_TIMEOUT, DEFAULT_TIMEOUT, float, CollectiveError)


class ProcessGridError(CollectiveError):
    """A grid run failed; `errors` maps each failed process to its own error."""

    def __init__(self, errors: Mapping[ProcessId, BaseException]) -> None:
        self.errors = dict(errors)
        lines = [f"  process {pid}: {type(e).__name__}: {e}" for pid, e in sorted(errors.items())]
        super().__init__(f"{len(errors)} process(es) failed:\n" + "\n".join(lines))


def describe(value: Any) -> Any:
    """The shape signature of a collective's value (arrays -> dtype[dims], nested tuples)."""
    if isinstance(value, (tuple, list)):
        return tuple(describe(v) for v in value)
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{list(value.shape)}"
    return type(value).__name__


class _Rendezvous:
    __slots__ = ("values", "error", "done")

    def __init__(self) -> None:
        self.values: dict[ProcessId, Any] = {}
        self.error: BaseException | None = None
        self.done = 0


class FeedQueue(list):  # type: ignore[type-arg]
    """A process's infeed or outfeed: a list the ops pop/append, safe across threads.

    The infeed op tests `not queue` before popping: that test waits (up to the grid timeout)
    for the host to `put` a value, so a program can block on its infeed while it runs.
    """

    def __init__(self, grid: ProcessGrid, what: str, shared: FeedQueue | None = None) -> None:
        super().__init__()
        self._grid = grid
        self._what = what
        self._shared = shared

    # host side
    def put(self, *values: Any) -> None:
        """Append values for the program to read (infeed) in order."""
        with self._grid._cv:
            self.extend(values)
            self._grid._cv.notify_all()

    def get(self, timeout: float | None = None) -> Any:
        """Pop the oldest value (outfeed), waiting up to `timeout` (default: grid timeout)."""
        limit = self._grid.timeout if timeout is None else timeout
        with self._grid._cv:
            if not self._grid._cv.wait_for(lambda: len(self) > 0, timeout=limit):
                raise CollectiveError(f"{self._what}: no value within {limit:g}s")
            return super().pop(0)

    def drain(self) -> list[Any]:
        with self._grid._cv:
            out = list(self)
            self.clear()
            return out

    # op side
    def append(self, value: Any) -> None:
        with self._grid._cv:
            super().append(value)
            self._grid._cv.notify_all()

    def _available(self) -> bool:
        return len(self) > 0 or (self._shared is not None and len(self._shared) > 0)

    def __bool__(self) -> bool:
        grid = self._grid
        with grid._cv:
            ok = grid._cv.wait_for(lambda: self._available() or grid._failure is not None,
                                   timeout=grid.timeout)
            grid._raise_if_failed(self._what)
            if not ok:
                raise CollectiveError(f"{self._what}: empty after waiting {grid.timeout:g}s; "
                                      "feed it with grid.infeed(pid).put(value)")
            return True

    def pop(self, index: Any = -1) -> Any:  # type: ignore[override]
        with self._grid._cv:
            if len(self) == 0 and self._shared is not None:
                return self._shared.pop(index)
            return super().pop(index)


class _Channel:
    """A channel seen as a host queue (`RuntimeState.host_sends/host_recvs[channel]`)."""

    def __init__(self, process: GridProcess, channel: int) -> None:
        self._process, self._channel = process, channel

    def append(self, value: Any) -> None:
        self._process.send(self._channel, value)

    def __bool__(self) -> bool:
        return True  # pop waits for the value (or fails loudly)

    def pop(self, index: int = 0) -> Any:
        return self._process.recv(self._channel)


class _HostChannels(dict):  # type: ignore[type-arg]
    """Host transfers of a grid process go through the grid's channels (as in the reference
    interpreter), so the host API and other processes see them."""

    def __init__(self, process: GridProcess) -> None:
        super().__init__()
        self._process = process

    def setdefault(self, key: Any, default: Any = None) -> Any:
        return _Channel(self._process, int(key))


class GridProcess:
    """One process of a `ProcessGrid`: what its interpreter sees as `ctx.process`."""

    def __init__(self, grid: ProcessGrid, replica_id: int, partition_id: int) -> None:
        self.grid = grid
        self.replica_id = replica_id
        self.partition_id = partition_id
        self.num_replicas = grid.num_replicas
        self.num_partitions = grid.num_partitions
        self._calls: dict[tuple[str, tuple[ProcessId, ...]], int] = {}
        #: What the process is doing, as far as the grid saw (error messages).
        self.doing = "computing (no grid interaction yet)"
        #: Set when the run gave up on this process: its grid interactions and polls raise.
        self.abandoned: str | None = None

    @property
    def pid(self) -> ProcessId:
        return (self.replica_id, self.partition_id)

    def exchange(self, key: str, group: Sequence[ProcessId], value: Any) -> list[Any]:
        group = tuple((int(r), int(p)) for r, p in group)
        k0 = (key, group)
        self._calls[k0] = n = self._calls.get(k0, 0) + 1
        where = f"{key} (call {n}) over process group {list(group)}"
        self._enter(f"waiting in {where}")
        out = self.grid._rendezvous(self.pid, key, group, n, value)
        self.doing = f"computing after {where}"
        return out

    def send(self, channel_id: int, value: Any) -> None:
        self._enter(f"sending on channel {channel_id}")
        self.grid._send(self.pid, int(channel_id), value)
        self.doing = f"computing after a send on channel {channel_id}"

    def recv(self, channel_id: int) -> Any:
        self._enter(f"waiting in a recv on channel {channel_id}")
        out = self.grid._recv(self.pid, int(channel_id))
        self.doing = f"computing after a recv on channel {channel_id}"
        return out

    def poll(self, what: str) -> None:
        """Called by running while loops (loop_guard): stop if the run failed or gave up."""
        self.doing = f"running {what}"
        if self.abandoned is not None:
            raise CollectiveError(f"{what}: {self.abandoned}")
        if self.grid._failure is not None:
            with self.grid._cv:
                self.grid._raise_if_failed(what)

    def _enter(self, doing: str) -> None:
        if self.abandoned is not None:
            raise CollectiveError(f"{doing}: {self.abandoned}")
        self.doing = doing

    def calls(self) -> dict[tuple[str, tuple[ProcessId, ...]], int]:
        return dict(self._calls)

    def __repr__(self) -> str:
        return f"GridProcess{self.pid} of {self.num_replicas}x{self.num_partitions}"


class ProcessGrid:
    """`num_replicas x num_partitions` processes in threads of this Python process.

    `run(fns)` runs `fns[pid](process)` for each process; `run_computation` runs one program
    on every process (SPMD) and `run_programs` one program per process (MPMD). Results come
    back row-major (replica-major, as flattened ids). `infeed(pid)`, `outfeed(pid)`,
    `host_send`, `host_recv` are the host's side while a run is in progress.
    """

    def __init__(self, num_replicas: int, num_partitions: int = 1,
                 timeout: float | None = None) -> None:
        if num_replicas < 1 or num_partitions < 1:
            raise CollectiveError(f"process grid {num_replicas}x{num_partitions} is empty")
        self.num_replicas, self.num_partitions = int(num_replicas), int(num_partitions)
        self.timeout = default_timeout() if timeout is None else float(timeout)
        self._cv = threading.Condition()
        self._shared_infeed = FeedQueue(self, "infeed (shared)")
        self._infeeds = {pid: FeedQueue(self, f"infeed of process {pid}", self._shared_infeed)
                         for pid in self.pids}
        self._outfeeds = {pid: FeedQueue(self, f"outfeed of process {pid}") for pid in self.pids}
        self._reset()

    def _reset(self) -> None:
        self._slots: dict[tuple[Any, ...], _Rendezvous] = {}
        self._channels: dict[int, deque[Any]] = {}
        self._failure: tuple[ProcessId, BaseException] | None = None
        self._finished: dict[ProcessId, dict[tuple[str, tuple[ProcessId, ...]], int]] = {}
        self._processes = {pid: GridProcess(self, *pid) for pid in self.pids}

    # ---- layout ---------------------------------------------------------------------------------
    @property
    def pids(self) -> list[ProcessId]:
        return [(r, p) for r in range(self.num_replicas) for p in range(self.num_partitions)]

    @property
    def size(self) -> int:
        return self.num_replicas * self.num_partitions

    def process(self, replica_id: int, partition_id: int = 0) -> GridProcess:
        return self._processes[(replica_id, partition_id)]

    # ---- host API -------------------------------------------------------------------------------
    def infeed(self, pid: ProcessId | int) -> FeedQueue:
        """Process `pid`'s infeed queue (`pid` a (replica, partition) or a flattened id)."""
        return self._infeeds[self._pid(pid)]

    def outfeed(self, pid: ProcessId | int) -> FeedQueue:
        return self._outfeeds[self._pid(pid)]

    def shared_infeed(self) -> FeedQueue:
        """A queue every process reads once its own infeed is empty (run_parallel's infeed)."""
        return self._shared_infeed

    def host_send(self, channel_id: int, value: Any) -> None:
        """The host sends on a channel (a program's `recv` with is_host_transfer reads it)."""
        self._send(None, int(channel_id), value)

    def host_recv(self, channel_id: int, timeout: float | None = None) -> Any:
        return self._recv(None, int(channel_id), timeout)

    def _pid(self, pid: ProcessId | int) -> ProcessId:
        if isinstance(pid, (int, np.integer)):
            return (int(pid) // self.num_partitions, int(pid) % self.num_partitions)
        return (int(pid[0]), int(pid[1]))

    # ---- rendezvous -----------------------------------------------------------------------------
    def _raise_if_failed(self, what: str) -> None:
        if self._failure is not None:
            pid, err = self._failure
            raise CollectiveError(f"{what}: stopped because process {pid} failed: "
                                  f"{type(err).__name__}: {err}")

    def _rendezvous(self, me: ProcessId, op: str, group: tuple[ProcessId, ...], n: int,
                    value: Any) -> list[Any]:
        if me not in group:
            raise CollectiveError(f"{op}: process {me} is not in its process group {list(group)}")
        for pid in group:
            if pid not in self._processes:
                raise CollectiveError(f"{op}: process group {list(group)} names {pid}, outside "
                                      f"the {self.num_replicas}x{self.num_partitions} grid")
        key = (op, group, n)
        where = f"{op} (call {n}) over process group {list(group)}"
        deadline = time.monotonic() + self.timeout
        with self._cv:
            self._raise_if_failed(where)
            slot = self._slots.setdefault(key, _Rendezvous())
            if slot.error is not None:
                raise slot.error
            slot.values[me] = value
            if len(slot.values) == len(group):
                slot.error = _mismatch(where, group, slot.values)
                self._cv.notify_all()
            while len(slot.values) < len(group) and slot.error is None:
                self._raise_if_failed(where)
                gone = [p for p in group if p not in slot.values and self._never_reaches(p, key)]
                left = deadline - time.monotonic()
                if gone or left <= 0:
                    missing = [p for p in group if p not in slot.values]
                    why = (f"process(es) {gone} finished without reaching it" if gone else
                           f"timed out after {self.timeout:g}s")
                    slot.error = CollectiveError(
                        f"{where}: {why}; missing {missing}, arrived {sorted(slot.values)}")
                    self._cv.notify_all()
                    break
                self._cv.wait(min(left, 0.5))
            slot.done += 1
            if slot.done == len(slot.values) and len(slot.values) == len(group):
                del self._slots[key]
            if slot.error is not None:
                raise slot.error
            return [slot.values[p] for p in group]

    def _never_reaches(self, pid: ProcessId, key: tuple[Any, ...]) -> bool:
        calls = self._finished.get(pid)
        return calls is not None and calls.get((key[0], key[1]), 0) < key[2]

    # ---- channels -------------------------------------------------------------------------------
    def _send(self, me: ProcessId | None, channel: int, value: Any) -> None:
        with self._cv:
            self._raise_if_failed(f"send on channel {channel}")
            self._channels.setdefault(channel, deque()).append(value)
            self._cv.notify_all()

    def _recv(self, me: ProcessId | None, channel: int, timeout: float | None = None) -> Any:
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        who = "host" if me is None else f"process {me}"
        with self._cv:
            while True:
                self._raise_if_failed(f"recv on channel {channel} ({who})")
                queue = self._channels.get(channel)
                if queue:
                    return queue.popleft()
                left = deadline - time.monotonic()
                others = [p for p in self.pids if p != me and p not in self._finished]
                if left <= 0 or (me is not None and not others):
                    why = "every other process finished" if left > 0 else \
                        f"timed out after {limit:g}s"
                    raise CollectiveError(f"recv on channel {channel} ({who}): no value was "
                                          f"sent ({why})")
                self._cv.wait(min(left, 0.5))

    # ---- running --------------------------------------------------------------------------------
    def run(self, fns: Mapping[ProcessId, Callable[[GridProcess], Any]]) -> dict[ProcessId, Any]:
        """Run `fns[pid](process)` in one thread per process; raise `ProcessGridError` naming
        every failed process, else return each process's result. A process still running
        `timeout` seconds after the last other one ended is abandoned (an error naming what
        it was doing); its thread stops at its next grid interaction or while-loop poll."""
        self._reset()
        results: dict[ProcessId, Any] = {}
        errors: dict[ProcessId, BaseException] = {}
        finished = self._finished
        processes = self._processes

        def work(pid: ProcessId) -> None:
            proc = processes[pid]
            previous = loop_guard.set_poll(proc.poll)
            try:
                results[pid] = fns[pid](proc)
            except BaseException as e:  # noqa: BLE001 - every failure is reported
                with self._cv:
                    errors.setdefault(pid, e)
                    if self._failure is None and proc.abandoned is None:
                        self._failure = (pid, e)
                    self._cv.notify_all()
            finally:
                loop_guard.set_poll(previous)
                with self._cv:
                    finished[pid] = proc.calls()
                    self._cv.notify_all()

        # Each process thread runs in a copy of the caller's context: the denormal mode and
        # cpu target the caller set (xlapy.denormal, target.use) hold on every process.
        threads = {pid: threading.Thread(target=contextvars.copy_context().run,
                                         args=(work, pid), daemon=True,
                                         name=f"xlapy-process-{pid}") for pid in fns}
        for t in threads.values():
            t.start()
        try:
            self._join(threads, finished, errors)
        except BaseException:  # Ctrl-C while waiting: the processes stop at their next poll
            self._abandon([p for p in threads if p not in finished], "the run was interrupted")
            raise
        if errors:
            raise ProcessGridError(errors)
        return results

    def _join(self, threads: Mapping[ProcessId, threading.Thread],
              finished: Mapping[ProcessId, Any], errors: dict[ProcessId, BaseException]) -> None:
        """Wait for every process; give up on those still running `timeout` seconds after the
        last other process ended."""
        seen, last_end = 0, 0.0
        with self._cv:
            while len(finished) < len(threads):
                if len(finished) != seen:
                    seen, last_end = len(finished), time.monotonic()
                if seen and time.monotonic() - last_end >= self.timeout:
                    late = [p for p in threads if p not in finished]
                    ended = sorted(p for p in finished)
                    for pid in late:
                        errors[pid] = CollectiveError(
                            f"process {pid} did not finish within {self.timeout:g}s after the "
                            f"others {ended} ended; it was {self._processes[pid].doing}"
                            f"{_where(threads[pid])}")
                    self._abandon(late, f"abandoned: still running {self.timeout:g}s after "
                                        f"the others {ended} ended")
                    return
                self._cv.wait(0.5 if not seen else
                              max(0.0, min(0.5, last_end + self.timeout - time.monotonic())))

    def _abandon(self, pids: Sequence[ProcessId], why: str) -> None:
        with self._cv:
            for pid in pids:
                self._processes[pid].abandoned = why
            self._cv.notify_all()

    def runtime_for(self, pid: ProcessId, parent: Any = None) -> RuntimeState:
        """A process's RuntimeState: its feeds, channels through the grid, the parent's hooks
        and custom calls."""
        rt = RuntimeState(infeed=self._infeeds[pid], outfeed=self._outfeeds[pid])
        if parent is not None:
            rt.hooks = parent.hooks
            rt.custom_calls = parent.custom_calls
            rt.rng_seed = parent.rng_seed
        rt.host_sends = _HostChannels(self._processes[pid])
        rt.host_recvs = rt.host_sends
        return rt

    def run_programs(self, programs: Sequence[Computation], args: Sequence[Sequence[Any]],
                     runtime: Any = None, infeed: Sequence[Any] = (),
                     backend: str = "interpreter") -> list[Any]:
        """MPMD: program `i` (row-major) runs on process `i` with `args[i]`; returns the
        programs' values in the same order. `infeed` values go to the shared infeed.
        `backend` "cpu" compiles each distinct program once (programs.py)."""
        if len(programs) != self.size or len(args) != self.size:
            raise CollectiveError(f"{len(programs)} program(s) and {len(args)} argument "
                                  f"list(s) for a {self.num_replicas}x{self.num_partitions} grid")
        runners = program_runners(programs, backend)
        self._shared_infeed.put(*infeed)
        index = {pid: i for i, pid in enumerate(self.pids)}

        def make(pid: ProcessId) -> Callable[[GridProcess], Any]:
            i = index[pid]
            return lambda proc: runners[i](self.runtime_for(pid, runtime), proc, list(args[i]))

        out = self.run({pid: make(pid) for pid in self.pids})
        return [out[pid] for pid in self.pids]

    def run_computation(self, program: Computation | Module | Any,
                        args: Sequence[Sequence[Any]], runtime: Any = None,
                        backend: str = "interpreter") -> list[Any]:
        """SPMD: the same program on every process, `args[i]` for process `i` (row-major)."""
        comp = _entry(program)
        return self.run_programs([comp] * self.size, args, runtime, backend=backend)

    def __repr__(self) -> str:
        return f"ProcessGrid({self.num_replicas}x{self.num_partitions}, timeout={self.timeout})"


def _entry(program: Any) -> Computation:
    if isinstance(program, Computation):
        return program
    module = program if isinstance(program, Module) else getattr(program, "module", None)
    if isinstance(module, Module):
        return module.entry_computation()
    raise CollectiveError(f"cannot run a {type(program).__name__}: expected a Computation, "
                          "Module or XlaComputation")


def _mismatch(where: str, group: Sequence[ProcessId], values: Mapping[ProcessId, Any]
              ) -> CollectiveError | None:
    sigs = {p: describe(values[p]) for p in group}
    if len(set(map(repr, sigs.values()))) <= 1:
        return None
    shown = ", ".join(f"{p}: {_fmt(s)}" for p, s in sigs.items())
    return CollectiveError(f"{where}: mismatched shapes across the group: {shown}")


def _where(thread: threading.Thread) -> str:
    """Where a thread is in Python code, innermost frame (for errors about a stuck process)."""
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None:
        return ""
    code = frame.f_code
    return f" (its thread is at {code.co_filename}:{frame.f_lineno} in {code.co_name})"


def _fmt(sig: Any) -> str:
    if isinstance(sig, tuple):
        return "(" + ", ".join(_fmt(s) for s in sig) + ")"
    return str(sig)
