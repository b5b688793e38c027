"""Native code built once per process and arguments, whichever thread asks first."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def once(fn: Callable[..., T]) -> Callable[..., T]:
    """functools.cache for builders of native code (an Engine, or a value holding one) that
    may first be asked for by several threads at once (a program's first run on a thread
    grid): the value is built once per arguments, under a lock. With functools.cache two
    threads both built it and one Engine was dropped, its code unloaded while the thread
    that built it still called into it (a segfault)."""
    done: dict[Any, T] = {}
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
                done[key] = fn(*args, **kwargs)
            return done[key]

    wrapper.cache_clear = done.clear  # type: ignore[attr-defined]
    return wrapper
