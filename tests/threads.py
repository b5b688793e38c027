"""Work run on several threads at once, the first error re-raised on the calling thread:
the executables' private-table paths (another thread holds the shared tables) in tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable


def on_threads(work: Callable[[int], None], seeds: Iterable[int]) -> None:
    """work(seed) for each seed, each on a thread of its own, all started before any is
    joined; the first error any raised is raised here."""
    errors: list[BaseException] = []

    def guarded(seed: int) -> None:
        try:
            work(seed)
        except BaseException as e:  # noqa: BLE001  (re-raised below)
            errors.append(e)

    ts = [threading.Thread(target=guarded, args=(s,)) for s in seeds]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
