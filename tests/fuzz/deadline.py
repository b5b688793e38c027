"""`with deadline(seconds):` raises `Hang` when the block runs longer (SIGALRM, main thread).

Regex matching and Python code both check for signals, so a hang fails the test instead of
blocking the suite. Outside the main thread (or without SIGALRM) the block runs unbounded.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Hang(Exception):  # noqa: N818  (the kind of failure the fuzzers report)
    """The block ran past its deadline."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    main = threading.current_thread() is threading.main_thread()
    if not hasattr(signal, "setitimer") or not main:
        yield
        return

    def _raise(signum: int, frame: object) -> None:
        raise Hang(f"ran longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
