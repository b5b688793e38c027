"""Running a compiled cpu computation: the per-call path of `CpuExecutable` (argument binding
with its same-array fast path, the pointer table and arena reused under a lock or private to a
concurrent caller, the thunks, result ownership). Planning is executable.py's."""

from __future__ import annotations

import contextlib
import ctypes
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from xlapy import denormal
from xlapy.backends.cpu import lanes, realign, recycle, target, thunks
from xlapy.backends.cpu.fp_env import mxcsr_once
from xlapy.backends.cpu.llvm_util import collect_objects
from xlapy.backends.ownership import own
from xlapy.errors import InterpreterError, XlapyError
from xlapy.interpreter import RuntimeState
from xlapy.interpreter.evaluator import check_value
from xlapy.types import Shape

#: Held while a deferred compile finishes (`Calls.finish`; re-entered by its reads).
_FINISHING = threading.RLock()


def _finished(name: str, bound: bool = False) -> property:
    """An attribute a deferred compile completes: reading it finishes the compile first
    (`bound`: the kernels' compile and the thunks' binding too, `Calls.bind`)."""
    key = "_" + name

    def get(self: Any) -> Any:
        if self._pending is not None or bound and self._binding is not None:
            self.bind() if bound else self.finish()
        return self.__dict__[key]

    def put(self: Any, value: Any) -> None:
        self.__dict__[key] = value

    return property(get, put)


class Calls:
    """Mixed into CpuExecutable: runs what its planning built."""

    #: The thunks and the kernels they run (read: compiled and bound first, if deferred).
    thunks = _finished("thunks", bound=True)
    kernel_addrs = _finished("kernel_addrs", bound=True)
    engines = _finished("engines", bound=True)
    engine = _finished("engine", bound=True)
    sequence_addr = _finished("sequence_addr", bound=True)
    window_addrs = _finished("window_addrs", bound=True)
    #: What planning completes (read: finished first, if deferred); no kernel compiled.
    kernel_ir = _finished("kernel_ir")
    sequence = _finished("sequence")
    windows = _finished("windows")
    temp_slots = _finished("temp_slots")
    _arena_plan = _finished("arena_plan")
    #: (instruction, executable) of its control flow (a deferred case/if's: built first).
    subexecs = _finished("subexecs")
    #: What a deferred compile left to do (`finish`): the kernels' modules, the arena;
    #: None once done.
    _pending: Callable[[], None] | None = None
    #: What `bind` left to do: the kernels' LLVM compile and the thunks' binding (a loop's
    #: condition and body: their loop binds them, or no one when it is fused).
    _binding: Callable[[], None] | None = None

    comp: Any
    runnable: bool
    target: Any
    denormal: str
    _params: list[tuple[Any, ...]]
    _lock: threading.Lock
    _table: Any
    _vals0: list[Any]
    _last: list[tuple[Any, ...]]
    #: Parameters copied to alignment when misaligned (realign.py), their buffers by index.
    _realign: frozenset[int]
    _scratch: dict[int, Any]
    _arena: list[Any] | None
    _own: Any
    _root_slot: int
    num_slots: int
    static: dict[int, Any]
    shapes: list[Shape]
    options: Any
    objects: list[tuple[str, bytes]]
    #: The computation as one native loop trip (branch_loop.entry_trip; its results are
    #: fresh arrays), run instead of the thunks; None: the thunks.
    trip: Any = None

    @contextlib.contextmanager
    def compiling(self) -> Iterator[None]:
        """The target, denormal mode and lanes its kernels are emitted and compiled for, a
        top-level executable's setting MXCSR once per call (fp_env.mxcsr_once); the
        objects compiled inside join `objects`."""
        with target.use(self.target), denormal.use(self.denormal), \
                lanes.use(self.options.lanes), collect_objects() as objs, \
                mxcsr_once(not self.options.nested):
            yield
        self.objects.extend(objs)

    def finish(self) -> None:
        """Plan what a deferred compile left (branch_loop.defer_thunks: an entry that runs
        as one native loop trip needs its thunks only for a runtime with custom-call
        targets, or a look at them), and compile and bind it unless it is a loop part."""
        self._complete("_pending")

    def bind(self) -> None:
        """`finish`, and the kernels compiled and the thunks bound."""
        self.finish()
        self._complete("_binding")

    def _complete(self, stage: str) -> None:
        with _FINISHING:
            todo = getattr(self, stage)
            if todo is None:
                return
            setattr(self, stage, None)
            try:
                with self.compiling():
                    todo()
            except BaseException:
                setattr(self, stage, todo)
                raise

    def _arena_views(self) -> list[Any]:
        """[(slot, array)] temporaries in one reused allocation (64-byte aligned; those never
        live at once share memory)."""
        where, total = self._arena_plan
        raw, base = recycle.aligned_bytes(total)
        views = []
        for s in self.temp_slots:
            sh = self.shapes[s]
            off = base + where[s]
            n = math.prod(sh.dimensions) * sh.dtype.itemsize
            views.append((s, raw[off: off + n].view(sh.dtype).reshape(sh.dimensions)))
        return [raw, views]

    def run_computation(self, args: Sequence[Any], runtime: RuntimeState | None = None,
                        process: Any = None) -> Any:
        comp = self.comp
        if not self.runnable:
            raise XlapyError(f"computation {comp.name} was compiled for cpu target "
                             f"{self.target}, which cannot run on this machine "
                             f"({target.host_target().cpu}); its objects are in .all_objects()")
        if len(args) != len(self._params):
            raise InterpreterError(f"computation {comp.name} takes {len(comp.parameters)} "
                                   f"argument(s), got {len(args)}")
        rt = runtime or RuntimeState()
        if self.trip is not None and self.trip.takes(rt):  # no thunks needed: no table
            vals: list[Any] = [None] * self.num_slots
            self._bind_args(args, None, vals, None)
            return self._execute(None, vals, rt, process)
        if self._pending is not None or self._binding is not None:
            self.bind()
        if not self._lock.acquire(blocking=False):  # another thread runs it: private state
            table, vals = self._fresh_state(shared=False)
            self._bind_args(args, table, vals, None)
            return self._execute(table, vals, rt, process)
        try:
            if self._table is None:
                self._table, self._vals0 = self._fresh_state(shared=True)
            table, vals = self._table, self._vals0.copy()
            self._bind_args(args, table, vals, self._last)
            return self._execute(table, vals, rt, process)
        finally:
            self._lock.release()

    def _fresh_state(self, shared: bool) -> tuple[Any, list[Any]]:
        """A pointer table and values list with constants and the arena bound (the shared
        one, used under the lock, or a private one)."""
        table = (ctypes.c_void_p * max(self.num_slots, 1))()
        vals: list[Any] = [None] * self.num_slots
        for s, arr in self.static.items():
            vals[s] = arr
            table[s] = arr.ctypes.data
        if shared:
            if self._arena is None:
                self._arena = self._arena_views()
            arena = self._arena
        else:
            arena = self._arena_views()
        for s, view in arena[1]:
            vals[s] = view
            table[s] = view.ctypes.data
        vals.append(arena)  # keeps a private arena alive with the values (ownership: [-1][0])
        return table, vals

    def _bind_args(self, args: Sequence[Any], table: Any, vals: list[Any],
                   last: list[tuple[Any, ...]] | None) -> None:
        """Arguments into their slots; the same array object as last call reuses its pointer
        (held in `last`, so it stays alive and its buffer cannot move). No `table`: values
        only (a trip binds its own: 160 pointers of an Adam step's ~0.5 ms)."""
        for k, (s, dims, dt, shape, what) in enumerate(self._params):
            a = args[k]
            prev = last[k] if last is not None else (None, 0, None, None)
            # the same object, its dtype, shape and strides unchanged in place since
            if a is prev[0] is not None and a.dtype is prev[2] and a.shape == dims \
                    and a.strides == prev[3]:
                table[s] = prev[1]
                vals[s] = a
                continue
            if not (type(a) is np.ndarray and a.dtype == dt and a.shape == dims
                    and a.flags.c_contiguous):
                a = check_value(a, shape, what)
                if isinstance(a, np.ndarray) and not a.flags.c_contiguous:
                    a = np.array(a, order="C")
            if isinstance(a, np.ndarray):
                if k in self._realign and a.ctypes.data % realign.ALIGN:
                    # (copied every call: the caller may change it in place in between)
                    shared = last is not None  # (else a private state: a buffer of its own)
                    a, buf = realign.aligned(a, self._scratch.get(k) if shared else None)
                    if shared:
                        self._scratch[k] = buf
                        last[k] = (None, 0, None, None)
                    if table is not None:
                        table[s] = thunks.ptr(a)
                    vals[s] = a
                    continue
                if table is not None:
                    p = thunks.ptr(a)
                    table[s] = p
                    if last is not None:
                        last[k] = (a, p, a.dtype, a.strides)
            vals[s] = a

    def _execute(self, table: Any, vals: list[Any], rt: RuntimeState, process: Any) -> Any:
        trip = self.trip
        if trip is not None and trip.takes(rt):  # the whole computation, one native call
            args = [vals[p[0]] for p in self._params]
            if denormal.current() == self.denormal:
                return trip.call(args, rt, process)
            with denormal.use(self.denormal):
                return trip.call(args, rt, process)
        if denormal.current() == self.denormal:
            for th in self.thunks:
                th(table, vals, rt, process)
        else:  # interpreter fallbacks and numpy thunks read the mode (xlapy.denormal)
            with denormal.use(self.denormal):
                for th in self.thunks:
                    th(table, vals, rt, process)
        if self._own is None:
            return vals[self._root_slot]
        return own(vals[self._root_slot], self._own, lambda: self._protected(vals))

    def _protected(self, vals: list[Any]) -> list[Any]:
        """Memory a result must not share: arguments, constants, the arena."""
        return [*(vals[p[0]] for p in self._params), *self.static.values(), vals[-1][0]]

    def run(self, args: Sequence[Any], runtime: RuntimeState | None = None,
            process: Any = None) -> Any:
        return self.run_computation(args, runtime, process)


__all__ = ["Calls"]
