"""Round-robin timing shared by the benchmark runners: each implementation in turn per round
(one call, or a burst of calls), so machine noise hits them alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def round_robin(runners: dict[str, Callable[[], Any]], reps: int, burst: int = 1
                ) -> dict[str, list[float]]:
    """Seconds per call of each runner: `reps` rounds, each calling every runner `burst`
    times in a row (each call timed). With burst 1 each call follows the other side's, whose
    data has evicted its own from the caches (a 96 MB batch-1 MLP then streams its weights
    from DRAM on both sides); later calls of a burst see the runner's own steady state, as a
    server calling one model does."""
    times: dict[str, list[float]] = {k: [] for k in runners}
    for _ in range(reps):
        for k, fn in runners.items():
            for _ in range(max(1, burst)):
                t0 = time.perf_counter()
                fn()
                times[k].append(time.perf_counter() - t0)
    return times
