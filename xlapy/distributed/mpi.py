"""The process grid across OS processes (and hosts) with MPI: one rank per grid process.

Rank `r * num_partitions + p` is process `(r, p)` (the flattened id). `MpiProcess` is the
`ProcessGroupHandle` for this rank; `MpiGrid.run_programs` has the threaded grid's interface
(every rank gets every process's result), so `interpreter.run_parallel` and
`execute_replicated` run unchanged under `mpiexec`.

A collective runs in two phases: (1) each member posts a small arrival message (op, call
number, shapes) to the other members, so a member that never comes is named after `timeout`
seconds (at once if it already finished) and shape mismatches fail on every member; (2) once
all have arrived, the data moves with buffer-based collectives on a communicator of the group
(`Allgather` of the raw bytes; `Allreduce` for sum/product/max/min where the result is
exactly the threaded grid's). While waiting, a rank watches control messages: a rank that
raises tells every other rank, which stops with that error. Running while loops poll them too
(ops/loop_guard.py). A rank with no word from a peer `timeout` seconds after its own end tells
that peer it gave up (the peer stops at its next poll) and reports it.

Several hosts: install mpich and mpi4py on each, then e.g.
`mpiexec -n 8 -hosts h1,h2 python -m xlapy run --distributed mpi FILE` (hydra's `-f hostfile`
works too); nothing here assumes shared memory. See docs/distributed.md.
"""

from __future__ import annotations

import pickle
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlapy.distributed.buffers import BufferPool
from xlapy.distributed.grid import ProcessGridError, _HostChannels, default_timeout, describe
from xlapy.distributed.programs import program_runners
from xlapy.errors import CollectiveError
from xlapy.interpreter import RuntimeState
from xlapy.ir import Computation
from xlapy.ops import loop_guard

try:  # mpi4py is an optional dependency (pip install mpi4py mpich)
    from mpi4py import MPI
except ImportError:  # pragma: no cover - reported when used
    MPI = None

ProcessId = tuple[int, int]
ARRIVE, CTL, DATA_BASE = 11, 12, 1000
_MPI_OPS = {"add": "SUM", "multiply": "PROD", "maximum": "MAX", "minimum": "MIN"}
_NATIVE = {np.dtype(t) for t in ("f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8")}


def _require_mpi() -> Any:
    if MPI is None:
        raise CollectiveError("the MPI grid needs mpi4py: pip install mpi4py mpich")
    return MPI


def _flatten(value: Any) -> tuple[Any, list[np.ndarray]]:
    """(structure, arrays): nested tuples of arrays, so the bytes can move as one buffer."""
    if isinstance(value, (tuple, list)):
        parts = [_flatten(v) for v in value]
        return (tuple(p[0] for p in parts), [a for p in parts for a in p[1]])
    arr = np.asarray(value)
    return ((arr.dtype, arr.shape), [arr])


def _unflatten(struct: Any, buf: np.ndarray, pos: int = 0) -> tuple[Any, int]:
    if isinstance(struct, tuple) and (not struct or not isinstance(struct[0], np.dtype)):
        out = []
        for s in struct:
            v, pos = _unflatten(s, buf, pos)
            out.append(v)
        return tuple(out), pos
    dtype, shape = struct
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    arr = buf[pos:pos + n].view(dtype).reshape(shape)
    return arr, pos + n


def _pickled_error(error: BaseException | None) -> bytes | None:
    """The error itself when it pickles, so other ranks report it as the threaded grid does."""
    if error is None:
        return None
    try:
        data = pickle.dumps(error)
        pickle.loads(data)
        return data
    except Exception:  # noqa: BLE001 - not every exception pickles; the text is sent too
        return None


def _remote_error(msg: dict[str, Any]) -> BaseException:
    if msg.get("exc") is not None:
        try:
            err = pickle.loads(msg["exc"])
            if isinstance(err, BaseException):
                return err
        except Exception:  # noqa: BLE001 - fall back to the text
            pass
    return CollectiveError(msg["error"])


class GivenUp(CollectiveError):
    """A peer stopped waiting for this rank at the end of a run."""


class MpiProcess:
    """This rank's process: collectives, channels and failure notices over MPI."""

    def __init__(self, num_replicas: int, num_partitions: int = 1, comm: Any = None,
                 timeout: float | None = None) -> None:
        mpi = _require_mpi()
        world = comm or mpi.COMM_WORLD
        if world.size != num_replicas * num_partitions:
            raise CollectiveError(f"a {num_replicas}x{num_partitions} grid needs "
                                  f"{num_replicas * num_partitions} MPI ranks, got {world.size}")
        self.num_replicas, self.num_partitions = num_replicas, num_partitions
        self.timeout = default_timeout() if timeout is None else float(timeout)
        self.rank = world.rank
        self.replica_id, self.partition_id = divmod(self.rank, num_partitions)
        self.world = world
        self.coll = world.Dup()  # arrival messages
        self.ctl = world.Dup()  # failure / done / channel-interest notices
        self.chan = world.Dup()  # channel payloads, tag = channel id
        self._subs: dict[tuple[ProcessId, ...], Any] = {}
        self._arrivals: dict[int, deque[Any]] = {}
        self._wants: dict[int, deque[int]] = {}
        self._done: dict[int, dict[str, Any]] = {}
        self._pending: list[Any] = []
        self._later: list[tuple[int, str, Any]] = []
        self._given_up: tuple[int, str] | None = None  # (rank, why) a peer gave up on this one
        self.run_id = 0
        self._calls: dict[tuple[str, tuple[ProcessId, ...]], int] = {}
        self.printed: list[str] = []
        #: all_reduce results MPI writes into, reused once the previous result is dropped.
        self.buffers = BufferPool()

    @property
    def pid(self) -> ProcessId:
        return (self.replica_id, self.partition_id)

    def _rank(self, pid: ProcessId) -> int:
        return pid[0] * self.num_partitions + pid[1]

    def _pid(self, rank: int) -> ProcessId:
        return divmod(rank, self.num_partitions)  # type: ignore[return-value]

    # ---- control messages -------------------------------------------------------------------
    def _post(self, comm: Any, msg: Any, dest: int, tag: int) -> None:
        self._pending.append(comm.isend(msg, dest=dest, tag=tag))

    def _broadcast_ctl(self, msg: Any) -> None:
        for r in range(self.world.size):
            if r != self.rank:
                self._post(self.ctl, msg, r, CTL)

    def _poll(self, where: str) -> None:
        """Drain arrival and control messages; raise if another process failed."""
        st = MPI.Status()
        while self.coll.Iprobe(source=MPI.ANY_SOURCE, tag=ARRIVE, status=st):
            src = st.Get_source()
            self._later.append((src, "arrive", self.coll.recv(source=src, tag=ARRIVE)))
        while self.ctl.Iprobe(source=MPI.ANY_SOURCE, tag=CTL, status=st):
            src = st.Get_source()
            self._later.append((src, "ctl", self.ctl.recv(source=src, tag=CTL)))
        keep = []
        for src, kind, msg in self._later:  # messages of later runs wait for their run
            run = msg[0] if kind == "arrive" else msg["run"]
            if run > self.run_id:
                keep.append((src, kind, msg))
            elif run < self.run_id:
                continue
            elif kind == "arrive":
                self._arrivals.setdefault(src, deque()).append(msg[1:])
            elif msg["kind"] == "want":
                self._wants.setdefault(msg["channel"], deque()).append(src)
            elif msg["kind"] == "give-up":
                self._given_up = (src, msg["error"])
            else:
                self._done[src] = msg
        self._later = keep
        if self._given_up is not None:  # reported once: this rank then ends its run
            src, why = self._given_up
            self._given_up = None
            raise GivenUp(f"{where}: stopped because process {self._pid(src)} gave up "
                          f"waiting for it: {why}")
        for src, msg in self._done.items():
            if msg.get("error"):
                raise CollectiveError(f"{where}: stopped because process {self._pid(src)} "
                                      f"failed: {msg['error']}")

    def _wait(self, test: Any, where: str, members: Sequence[int] = (),
              key: tuple[Any, ...] | None = None,
              missing: Callable[[], list[Any]] | None = None) -> None:
        """Polls until test(); a timeout names what is missing: `missing()` when given, else
        the members that have not arrived."""
        deadline = time.monotonic() + self.timeout
        spins = 0
        while not test():
            self._poll(where)
            if key is not None:
                gone = [self._pid(r) for r in members if r in self._done
                        and self._done[r]["calls"].get(key[:2], 0) < key[2]]
                if gone:
                    raise CollectiveError(f"{where}: process(es) {gone} finished without "
                                          f"reaching it; missing {gone}")
            if time.monotonic() > deadline:
                absent = missing() if missing is not None else \
                    [self._pid(r) for r in members if not self._arrivals.get(r)]
                raise CollectiveError(f"{where}: timed out after {self.timeout:g}s; missing "
                                      f"{absent}")
            spins += 1
            if spins > 200:
                time.sleep(min(1e-3, 1e-5 * (spins - 200)))

    def poll(self, what: str) -> None:
        """Called by running while loops (loop_guard): stop if a peer failed or gave up."""
        self._poll(what)

    # ---- collectives ------------------------------------------------------------------------
    def _arrive(self, op: str, group: Sequence[ProcessId], value: Any
                ) -> tuple[tuple[ProcessId, ...], str, Any, list[np.ndarray]]:
        group = tuple((int(r), int(p)) for r, p in group)
        k0 = (op, group)
        self._calls[k0] = n = self._calls.get(k0, 0) + 1
        where = f"{op} (call {n}) over process group {list(group)}"
        struct, arrays = _flatten(value)
        sig = describe(value)
        ranks = [self._rank(p) for p in group]
        if self.rank not in ranks:
            raise CollectiveError(f"{where}: process {self.pid} is not in the group")
        others = [r for r in ranks if r != self.rank]
        for r in others:
            self._post(self.coll, (self.run_id, op, group, n, sig), r, ARRIVE)
        self._wait(lambda: all(self._arrivals.get(r) for r in others), where, others,
                   (op, group, n))
        sigs = {self.pid: sig}
        for r in others:
            got = self._arrivals[r].popleft()
            if got[:3] != (op, group, n):
                raise CollectiveError(f"{where}: process {self._pid(r)} reached {got[0]} (call "
                                      f"{got[2]}) over {list(got[1])} instead")
            sigs[self._pid(r)] = got[3]
        if len({repr(s) for s in sigs.values()}) > 1:
            shown = ", ".join(f"{p}: {sigs[p]}" for p in group)
            raise CollectiveError(f"{where}: mismatched shapes across the group: {shown}")
        return group, where, struct, arrays

    def _sub(self, group: tuple[ProcessId, ...]) -> Any:
        sub = self._subs.get(group)
        if sub is None:
            ranks = [self._rank(p) for p in group]
            sub = self.world.Create_group(self.world.Get_group().Incl(ranks))
            self._subs[group] = sub
        return sub

    def exchange(self, key: str, group: Sequence[ProcessId], value: Any) -> list[Any]:
        group, where, struct, arrays = self._arrive(key, group, value)
        if len(group) == 1:
            return [value]
        flat = [np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in arrays]
        send = flat[0] if len(flat) == 1 else np.concatenate(flat) if flat else \
            np.zeros(0, np.uint8)
        recv = np.empty((len(group), send.size), np.uint8)
        # Every member has arrived (phase 1), so the blocking collective cannot wait on an
        # absent one; blocking Allgather/Allreduce pick MPI's fastest algorithms.
        self._sub(group).Allgather(send, recv)
        return [_unflatten(struct, recv[i])[0] for i in range(len(group))]

    def all_reduce(self, key: str, group: Sequence[ProcessId], values: Sequence[Any],
                   reducer: str) -> list[np.ndarray] | None:
        """MPI's own reduction when it gives exactly the threaded grid's result: integer
        sum/product/max/min, and float sum/product over two processes; else None."""
        arrays = [np.asarray(v) for v in values]
        floats = any(a.dtype.kind == "f" for a in arrays)
        if (reducer not in _MPI_OPS or any(a.dtype not in _NATIVE for a in arrays)
                or (floats and (reducer in ("maximum", "minimum") or len(group) > 2))):
            return None
        group, where, _, _ = self._arrive(key, group, tuple(arrays))
        if len(group) == 1:
            return [a.copy() for a in arrays]
        op = getattr(MPI, _MPI_OPS[reducer])
        outs = [self.buffers.take(a.dtype, a.shape) for a in arrays]
        sub = self._sub(group)
        for a, o in zip(arrays, outs):
            sub.Allreduce(np.ascontiguousarray(a), o, op=op)
        return outs

    # ---- channels ---------------------------------------------------------------------------
    def send(self, channel_id: int, value: Any) -> None:
        """Waits for a process to ask for the channel (its recv), then sends to it."""
        where = f"send on channel {channel_id} (process {self.pid})"
        self._wait(lambda: bool(self._wants.get(channel_id)), where,
                   missing=lambda: ["a recv on this channel"])
        dest = self._wants[channel_id].popleft()
        self._post(self.chan, (channel_id, value), dest, self._tag(channel_id))

    def recv(self, channel_id: int) -> Any:
        self._broadcast_ctl({"run": self.run_id, "kind": "want", "channel": channel_id})
        st = MPI.Status()
        tag = self._tag(channel_id)
        where = f"recv on channel {channel_id} (process {self.pid})"
        self._wait(lambda: self.chan.Iprobe(source=MPI.ANY_SOURCE, tag=tag, status=st),
                   where, missing=lambda: ["a send on this channel"])
        got, value = self.chan.recv(source=st.Get_source(), tag=tag)
        if got != channel_id:  # two channel ids on one tag: refuse, never mix them up
            raise CollectiveError(f"{where}: a send on channel {got} arrived with the same "
                                  "MPI tag; use channel ids that differ below the tag limit")
        return value

    def _tag(self, channel_id: int) -> int:
        """Any 64-bit channel id (negative ones too) as an MPI tag in [DATA_BASE, TAG_UB]."""
        ub = int(self.chan.Get_attr(MPI.TAG_UB) or 32767)
        return DATA_BASE + channel_id % (ub - DATA_BASE + 1)

    # ---- a run ------------------------------------------------------------------------------
    def finish(self, result: Any, error: BaseException | None,
               printed: Sequence[str] = ()) -> list[Any]:
        """Tell every rank how this one ended; wait for theirs; every rank's results in rank
        order, or `ProcessGridError` naming every failed process. `printed` (this rank's
        `interpreter.print` lines) ends up in `self.printed`, every rank's lines in rank order."""
        err = None if error is None else f"{type(error).__name__}: {error}"
        self._broadcast_ctl({"run": self.run_id, "kind": "done", "error": err,
                             "exc": _pickled_error(error),
                             "calls": dict(self._calls), "printed": list(printed),
                             "result": pickle.dumps(result) if error is None else None})
        others = [r for r in range(self.world.size) if r != self.rank]
        errors: dict[ProcessId, BaseException] = {}
        if error is not None:
            errors[self.pid] = error
        try:
            self._wait(lambda: all(r in self._done for r in others), "end of run",
                       missing=lambda: [self._pid(r) for r in others if r not in self._done])
        except GivenUp as e:  # this rank came back too late: its run failed
            errors.setdefault(self.pid, e)
            self._drain_done(others)
        except CollectiveError as e:
            if "stopped because" not in str(e):
                late = [r for r in others if r not in self._done]
                why = (f"process {self.pid} had no word from it {self.timeout:g}s after its "
                       "own end")
                for r in late:  # it stops at its next poll and reports what it was doing
                    self._post(self.ctl, {"run": self.run_id, "kind": "give-up", "error": why},
                               r, CTL)
                errors.setdefault(self.pid, CollectiveError(
                    f"{e}; no word from {[self._pid(r) for r in late]} (still running: told "
                    "to stop)"))
            self._drain_done(others)
        self.printed = [line for r in range(self.world.size) for line in
                        (printed if r == self.rank else self._done.get(r, {}).get("printed", []))]
        for r in others:
            msg = self._done.get(r)
            if msg is not None and msg["error"]:
                errors[self._pid(r)] = _remote_error(msg)
        if errors:
            self._reset()
            raise ProcessGridError(errors)
        results = [result if r == self.rank else pickle.loads(self._done[r]["result"])
                   for r in range(self.world.size)]
        self._reset()
        return results

    def _drain_done(self, others: list[int]) -> None:
        deadline = time.monotonic() + self.timeout
        while not all(r in self._done for r in others) and time.monotonic() < deadline:
            try:
                self._poll("end of run")
            except CollectiveError:
                pass
            time.sleep(1e-3)

    def _reset(self) -> None:
        self.run_id += 1
        self._arrivals.clear()
        self._wants.clear()
        self._done.clear()
        self._calls.clear()
        self._given_up = None
        self._pending = [r for r in self._pending if not r.Test()]


class MpiGrid:
    """The threaded grid's `run_programs` interface over MPI: this rank runs its program;
    every rank returns every process's result."""

    def __init__(self, num_replicas: int, num_partitions: int = 1, comm: Any = None,
                 timeout: float | None = None) -> None:
        self.num_replicas, self.num_partitions = num_replicas, num_partitions
        self.process = MpiProcess(num_replicas, num_partitions, comm, timeout)

    def run_programs(self, programs: Sequence[Computation], args: Sequence[Sequence[Any]],
                     runtime: Any = None, infeed: Sequence[Any] = (),
                     backend: str = "interpreter") -> list[Any]:
        proc = self.process
        run = program_runners([programs[proc.rank]], backend)[0]
        rt = RuntimeState(infeed=list(infeed))
        if runtime is not None:
            rt.hooks, rt.custom_calls, rt.rng_seed = (dict(runtime.hooks), runtime.custom_calls,
                                                      runtime.rng_seed)
        # Every process's prints reach every rank's print hook (rank order), as the threaded
        # grid's all reach the one hook.
        show = rt.hooks.get("print")
        printed: list[str] = []
        if show is not None:
            rt.hooks["print"] = printed.append
        rt.host_sends = _HostChannels(proc)  # type: ignore[arg-type]
        rt.host_recvs = rt.host_sends
        result, error = None, None
        previous = loop_guard.set_poll(proc.poll)
        try:
            result = run(rt, proc, list(args[proc.rank]))
        except Exception as e:  # noqa: BLE001 - reported to every rank
            error = e
        finally:
            loop_guard.set_poll(previous)
        proc.printed = []
        try:
            return proc.finish(result, error, printed)
        finally:
            if show is not None:
                for line in proc.printed:
                    show(line)

    def run_computation(self, program: Any, args: Sequence[Sequence[Any]],
                        backend: str = "interpreter") -> list[Any]:
        from xlapy.distributed.grid import _entry

        comp = _entry(program)
        return self.run_programs([comp] * self.process.world.size, args, backend=backend)


_GRIDS: dict[tuple[int, int], MpiGrid] = {}


def mpi_grid(num_replicas: int, num_partitions: int = 1, **options: Any) -> Any:
    """The grid factory `use_mpi` registers: an MpiGrid (one per shape, reused) when the grid
    has as many processes as there are ranks, else the threaded grid inside each rank."""
    key = (num_replicas, num_partitions)
    if num_replicas * num_partitions != _require_mpi().COMM_WORLD.size:
        from xlapy.distributed.grid import ProcessGrid

        return ProcessGrid(num_replicas, num_partitions, **options)
    if key not in _GRIDS:
        _GRIDS[key] = MpiGrid(num_replicas, num_partitions, **options)
    return _GRIDS[key]


def use_mpi() -> None:
    """Make multi-process runs (run_parallel, execute_replicated) use the MPI ranks."""
    from xlapy.ops.collectives import register_grid_factory

    _require_mpi()
    register_grid_factory(mpi_grid)
