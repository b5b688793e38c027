"""Round-robin timing shared by the benchmark runners: each implementation in turn per round
(one call, or a burst of calls), so machine noise hits them alike."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def gc_paused() -> Iterator[None]:
    """Collect, then time with the cyclic GC off (as `timeit` does): a full collection walks
    every object of the process (jax's included) and takes 40-60 ms here, landing in
    whichever timed compile crossed the allocation threshold (a 21 ms sort compile measured
    80). Each side's own garbage is still allocated in the timed region."""
    from xlapy.phases import no_gc

    gc.collect()
    with no_gc():
        yield


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
