"""Native code built once per process and arguments, whichever thread asks first; and
built ahead, on a background thread started as a compile returns, for what the compile
already knows its program's first run will ask for (`ahead`, `collecting`, `start`)."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

#: The builds a compile in progress asked for ahead (None: no compile collects).
_AHEAD: contextvars.ContextVar[list[tuple[Any, tuple[Any, ...]]] | None] = \
    contextvars.ContextVar("xlapy_once_ahead", default=None)
#: Build lists for the build thread, which starts with the first.
_QUEUE: queue.Queue[list[tuple[Any, tuple[Any, ...]]]] = queue.Queue()
_WORKER: threading.Thread | None = None
_WORKER_LOCK = threading.Lock()
#: The longest a fork waits for the queued builds (seconds).
FORK_WAIT_S = 60.0


def once(fn: Callable[..., T]) -> Callable[..., T]:
    """functools.cache for builders of native code (an Engine, or a value holding one) that
    may first be asked for by several threads at once (a program's first run on a thread
    grid): the value is built once per arguments, under a lock. With functools.cache two
    threads both built it and one Engine was dropped, its code unloaded while the thread
    that built it still called into it (a segfault). `wrapper.prebuild(*args)` builds it
    ahead (a background thread): a failure there is kept and raised by the next call, so
    it reaches the caller that needs the value instead of being lost."""
    done: dict[Any, T] = {}
    failed: dict[Any, BaseException] = {}
    lock = threading.RLock()

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        key = (args, tuple(sorted(kwargs.items()))) if kwargs else args
        try:
            return done[key]
        except KeyError:
            pass
        with lock:
            if key not in done:
                err = failed.pop(key, None)
                if err is not None:  # the ahead build failed: this caller sees why
                    raise err
                done[key] = fn(*args, **kwargs)
            return done[key]

    def prebuild(*args: Any) -> None:
        with lock:
            if args in done or args in failed:
                return
            try:
                done[args] = fn(*args)
            except BaseException as e:  # noqa: BLE001 - kept for the first real call
                failed[args] = e

    def clear() -> None:
        done.clear()
        failed.clear()

    wrapper.cache_clear = clear  # type: ignore[attr-defined]
    wrapper.prebuild = prebuild  # type: ignore[attr-defined]
    return wrapper


def started(fn: Callable[..., T]) -> Callable[..., T]:
    """`once` for a function that starts a library module compiling on a compile thread
    (cache.library_job) and returns the call that waits for it: forgotten in a forked
    child, which has none of the compile threads (its waiter would never return)."""
    wrapper = once(fn)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=wrapper.cache_clear)  # type: ignore[attr-defined]
    return wrapper


def ahead(builder: Callable[..., Any], *args: Any) -> None:
    """Ask for `builder(*args)` (a function decorated with `once`) to be built in the
    background when the compile in progress returns; nothing outside `collecting`."""
    builds = _AHEAD.get()
    # A builder without `prebuild` (a test's stand-in for one) is left to the first run.
    if builds is not None and hasattr(builder, "prebuild") and (builder, args) not in builds:
        builds.append((builder, args))


@contextlib.contextmanager
def collecting() -> Iterator[list[tuple[Any, tuple[Any, ...]]]]:
    """The builds `ahead` asks for inside the block (a compile's planning)."""
    builds: list[tuple[Any, tuple[Any, ...]]] = []
    token = _AHEAD.set(builds)
    try:
        yield builds
    finally:
        _AHEAD.reset(token)


def start(builds: list[tuple[Any, tuple[Any, ...]]]) -> None:
    """Queue `builds` for the process's build thread (a daemon, started once: a compile
    returning only appends to a queue, never waits for a thread's start): its first run
    then finds them built, or waits under `once`'s lock for the rest."""
    global _WORKER
    if not builds:
        return
    with _WORKER_LOCK:
        _QUEUE.put(list(builds))
        if _WORKER is None:
            _WORKER = threading.Thread(target=_work, name="xlapy-build-ahead", daemon=True)
            _WORKER.start()


def _work() -> None:
    # Yield the GIL first: a new thread holds it for the switch interval (5 ms), which
    # the compile that started it would otherwise wait out before returning.
    time.sleep(0)
    while True:
        builds = _QUEUE.get()
        try:
            for builder, args in builds:
                try:
                    builder.prebuild(*args)
                except Exception:  # noqa: BLE001 - prebuild keeps its builder's errors;
                    pass  # this thread must live on for later compiles
        finally:
            _QUEUE.task_done()


def wait(timeout: float | None = None) -> bool:
    """Wait until the queued builds are done, or `timeout` seconds; whether they are
    (before a fork: a child must not inherit a lock the build thread, absent there, holds)."""
    if _WORKER is None or threading.current_thread() is _WORKER:
        return True
    with _QUEUE.all_tasks_done:
        return _QUEUE.all_tasks_done.wait_for(lambda: not _QUEUE.unfinished_tasks, timeout)


def _before_fork() -> None:
    # Bounded: a fork from code holding a lock the build thread waits for (a builder that
    # forks) must not hang; the child then only lacks what was still being built.
    wait(FORK_WAIT_S)


def _after_fork_in_child() -> None:
    """The child has no build thread: a later compile starts its own."""
    global _QUEUE, _WORKER, _WORKER_LOCK
    _QUEUE = queue.Queue()
    _WORKER = None
    _WORKER_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
