"""Bounds on `while` loops, shared by every way a loop runs (the interpreter's `while`, the
cpu backend's fallback while and its native driver): an optional iteration limit and a poll
the process grid installs per thread, so a loop whose peers failed or gave up on it stops.

`XLAPY_MAX_WHILE_ITERATIONS=N` (unset: unlimited) makes a loop that would start iteration
N + 1 raise `InterpreterError` naming the while op. Nothing here imports the grid: it
installs its check with `set_poll` (layer 2 cannot import layer 10).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from xlapy.errors import InterpreterError
from xlapy.types.limits import env_number

ENV_MAX_ITERATIONS = "XLAPY_MAX_WHILE_ITERATIONS"
#: Seconds between two polls of the grid from a running loop.
POLL_INTERVAL = 0.01

_local = threading.local()


def _raw_environ() -> tuple[Any, Any]:
    """os.environ's own dict of encoded names and the limit's name in it, where CPython
    keeps one (`in os.environ` encodes the name and looks it up through the Mapping
    machinery: ~0.7 us of a small native loop's ~9 us call; the dict lookup ~20 ns), else
    os.environ and the name."""
    try:
        return os.environ._data, os.environ.encodekey(ENV_MAX_ITERATIONS)  # type: ignore
    except AttributeError:
        return os.environ, ENV_MAX_ITERATIONS


_ENVIRON, _KEY = _raw_environ()


def iteration_limit() -> int | None:
    """`XLAPY_MAX_WHILE_ITERATIONS` as an int, or None (unlimited). Read at every while run
    (a native loop pays it per call: the unset case returns at once)."""
    if _KEY not in _ENVIRON:
        return None
    return env_number(ENV_MAX_ITERATIONS, None, error=InterpreterError,  # type: ignore[arg-type]
                      allow_zero=True)


def too_many(what: str, limit: int) -> InterpreterError:
    return InterpreterError(f"{what}: still running after {limit} iteration(s), the limit "
                            f"{ENV_MAX_ITERATIONS}={limit}")


def set_poll(fn: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """Install `fn(what)` as this thread's poll (None removes it); returns the previous one.
    The poll raises to stop the loop (the grid: a peer failed, or the run was abandoned)."""
    previous = getattr(_local, "poll", None)
    _local.poll = fn
    return previous


def poll(what: str) -> None:
    fn = getattr(_local, "poll", None)
    if fn is not None:
        fn(what)


def while_name(instruction: Any) -> str:
    name = getattr(instruction, "name", None)
    return "while" if name is None else f"while %{name}"


class WhileGuard:
    """One run of one while loop: `step()` before each body iteration (raises at the limit,
    polls the grid at most every POLL_INTERVAL seconds); `advance(n)` after n native ones."""

    __slots__ = ("what", "limit", "count", "_next_poll")

    def __init__(self, instruction: Any, limit: int | None | str = "env") -> None:
        """`limit`: the iteration limit, None for none; "env": XLAPY_MAX_WHILE_ITERATIONS's."""
        self.what = while_name(instruction)
        self.limit = iteration_limit() if limit == "env" else limit
        self.count = 0
        self._next_poll = time.monotonic() + POLL_INTERVAL

    def step(self) -> None:
        if self.limit is not None and self.count >= self.limit:
            raise too_many(self.what, self.limit)
        self.count += 1
        if time.monotonic() >= self._next_poll:
            self.poll()

    def advance(self, n: int) -> None:
        self.count += n
        if time.monotonic() >= self._next_poll:
            self.poll()

    def poll(self) -> None:
        poll(f"{self.what} (iteration {self.count})")
        self._next_poll = time.monotonic() + POLL_INTERVAL


__all__ = ["ENV_MAX_ITERATIONS", "WhileGuard", "iteration_limit", "poll", "set_poll",
           "too_many"]
