"""Where a compile's wall time goes: a per-phase breakdown (issue 14: cold compile time).

`recording()` opens a breakdown for one compile (api.compile, the cpu backend, `xlapy
compile`); code along the compile path marks its stretches with `phase("llvm.codegen")`.
Time is charged exclusively: entering a phase pauses the one around it, so the phases of
a breakdown add up to the wall time of the recording (what no phase claims is `other`).
Outside a recording `phase` costs one context-variable read, so the marks stay in.

Only the thread that opened the recording is charged: work handed to other threads is
charged to the phase the opening thread waits in.
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import time
from collections.abc import Iterator

#: Phase names in compile order (`Phases.table` prints in this order, others after).
ORDER = ("parse", "import", "verify", "passes", "fusion plan", "emit", "ir text",
         "llvm parse", "llvm optimize", "llvm codegen", "llvm threads", "link", "other")


class Phases:
    """Seconds per phase of one compile, in the order first entered."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stack: list[str] = ["other"]
        self._since = time.perf_counter()
        self._start = self._since
        self.total = 0.0

    def _charge(self) -> None:
        now = time.perf_counter()
        name = self._stack[-1]
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self._since
        self._since = now

    def table(self) -> str:
        """One line: `total 12.3 ms: parse 1.0, import 0.8, ...` (ms, phases over 0.05 ms)."""
        rank = {n: i for i, n in enumerate(ORDER)}
        items = sorted(self.seconds.items(), key=lambda kv: rank.get(kv[0], len(ORDER)))
        parts = ", ".join(f"{n} {s * 1e3:.1f}" for n, s in items if s >= 5e-5)
        return f"compile {self.total * 1e3:.1f} ms: {parts}"


_CURRENT: contextvars.ContextVar[Phases | None] = contextvars.ContextVar("xlapy_phases",
                                                                         default=None)


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Charge the time inside to `name` (nothing outside a recording)."""
    rec = _CURRENT.get()
    if rec is None:
        yield
        return
    rec._charge()
    rec._stack.append(name)
    try:
        yield
    finally:
        rec._charge()
        rec._stack.pop()


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """No cyclic garbage collection inside (a compile: parsing and building IR allocate
    thousands of small objects, which trigger full collections that scan everything else
    the process holds: 40-70 ms in a process holding jax, landing in a 21 ms compile).
    Nothing made here is cyclic garbage for long; the collector runs again after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextlib.contextmanager
def recording() -> Iterator[Phases]:
    """A breakdown of the compile inside; nested recordings share the outermost one."""
    rec = _CURRENT.get()
    if rec is not None:
        yield rec
        return
    rec = Phases()
    token = _CURRENT.set(rec)
    try:
        yield rec
    finally:
        rec._charge()
        rec.total = time.perf_counter() - rec._start
        _CURRENT.reset(token)


__all__ = ["ORDER", "Phases", "phase", "recording"]
