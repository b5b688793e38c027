"""How many threads an executable uses, and work split at boundaries that never depend on it.

The thread count comes from the compile option `num_threads`, else `$XLAPY_NUM_THREADS`, else
`os.cpu_count()`. Determinism: whatever can change bits when split differently (float sums
split into partials, BLAS calls: OpenBLAS's microkernels round differently for different row
counts) is cut into chunks whose boundaries depend only on the extent (`fixed_cuts`); the
thread count only decides which thread runs which chunks, so 1, 2 or 64 threads give the same
bits. Element-wise work and row reductions are exact per element, so they split by thread.
"""

from __future__ import annotations

import os
from typing import Any

from xlapy.backends.cpu.threads import NativePool, native_pool
from xlapy.errors import XlapyError

#: Most threads an executable may ask for.
MAX_THREADS = 1024
#: Most chunks of one split: the most threads such work keeps busy.
MAX_CHUNKS = 16


def num_threads(options: dict[str, Any] | None, default: int | None = None) -> int:
    """The `num_threads` compile option, else $XLAPY_NUM_THREADS, else `default`
    (os.cpu_count())."""
    value = (options or {}).get("num_threads")
    if value is not None:
        what = f"compile option num_threads={value!r}"
    else:
        text = os.environ.get("XLAPY_NUM_THREADS", "").strip()
        if not text:
            return max(1, min(default or os.cpu_count() or 1, MAX_THREADS))
        what = f"XLAPY_NUM_THREADS={text!r}"
        try:
            value = int(text)
        except ValueError:
            raise XlapyError(f"{what} is not an integer") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise XlapyError(f"{what} must be an integer, got {type(value).__name__}")
    if not 1 <= value <= MAX_THREADS:
        raise XlapyError(f"{what} must be between 1 and {MAX_THREADS}")
    return value


def pool(threads: int) -> NativePool:
    """The native worker pool with at least threads - 1 workers (the caller is the last)."""
    return native_pool(max(1, threads - 1))


def fixed_cuts(extent: int, min_size: int, align: int = 1, pow2: bool = False) -> list[int]:
    """Chunk boundaries of [0, extent): chunks of at least `min_size`, at most MAX_CHUNKS,
    inner boundaries at multiples of `align`; a function of the extent alone. `pow2`: a
    power of two of them (rounded down), so 2 or 4 threads share them evenly (3 chunks on 2
    threads are one thread's 2 while the other waits)."""
    chunks = max(1, min(MAX_CHUNKS, extent // max(min_size, 1)))
    if pow2:
        chunks = 1 << (chunks.bit_length() - 1)
    cuts = [extent * k // chunks // align * align for k in range(chunks)] + [extent]
    return sorted(set(cuts))


def groups(chunks: int, threads: int) -> list[int]:
    """Boundaries of contiguous groups of chunks, one group per thread used."""
    used = max(1, min(chunks, threads))
    return [chunks * j // used for j in range(used + 1)]


__all__ = ["num_threads", "pool", "fixed_cuts", "groups", "MAX_THREADS", "MAX_CHUNKS"]
