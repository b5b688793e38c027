"""Result buffers that MPI collectives write into, recycled once nobody uses the result.

A fresh 64 MB numpy array costs its page faults on first touch (a large part of a 2-rank
Allreduce's time); reusing a buffer that is already mapped avoids them. The buffer must never
be reused while anything still sees the previous result, including views derived from it.

`BufferPool.take` hands out an array built with `np.frombuffer` over a memoryview of a pooled
buffer. Such an array's `.base` is the memoryview, not an ndarray, so numpy's base collapsing
stops at it: every view derived from the result (slices, reshapes, views of views) keeps that
array alive. A `weakref.finalize` on it gives the buffer back only when the last one is gone.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np


class BufferPool:
    """Free buffers by (dtype, shape); at most `per_key` kept per key."""

    def __init__(self, per_key: int = 2) -> None:
        self.per_key = per_key
        self.enabled = True
        self._free: dict[tuple[str, tuple[int, ...]], list[np.ndarray]] = {}
        self._lock = threading.Lock()
        self.allocated = 0  # buffers created (not reused), for tests and benchmarks

    def take(self, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
        """A writable C-contiguous array of `dtype`/`shape` with undefined contents."""
        dtype = np.dtype(dtype)
        shape = tuple(int(d) for d in shape)
        if not self.enabled or dtype.hasobject or 0 in shape:
            return np.empty(shape, dtype)
        key = (dtype.str, shape)
        with self._lock:
            free = self._free.get(key)
            base = free.pop() if free else None
        if base is None:
            base = np.empty(max(1, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize),
                            np.uint8)
            self.allocated += 1
        n = int(np.prod(shape, dtype=np.int64))
        flat = np.frombuffer(memoryview(base), dtype=dtype, count=n)
        weakref.finalize(flat, self._give_back, key, base)
        return flat.reshape(shape)

    def _give_back(self, key: tuple[str, tuple[int, ...]], base: np.ndarray) -> None:
        with self._lock:
            free = self._free.setdefault(key, [])
            if len(free) < self.per_key:
                free.append(base)

    def clear(self) -> None:
        with self._lock:
            self._free.clear()


__all__ = ["BufferPool"]
