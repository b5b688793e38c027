"""Round-robin timing shared by the benchmark runners: one call of each implementation per
round, so machine noise hits them alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def round_robin(runners: dict[str, Callable[[], Any]], reps: int) -> dict[str, list[float]]:
    """Seconds per call of each runner, `reps` rounds of one call each, in turn."""
    times: dict[str, list[float]] = {k: [] for k in runners}
    for _ in range(reps):
        for k, fn in runners.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return times
