"""Output buffers recycled across calls once the caller has dropped them.

A fresh 64 MiB output costs ~8 ms of page faults per call on this machine (the kernel maps
and zeroes 16K pages on first touch), more than half of a 4096 x 4096 softmax. So each
executable keeps the buffer it returned last for each output slot, and the next call writes
into it again if nothing else refers to it any more: no live result, no view (a view holds
the buffer), no tuple holding one. Anything still referenced is left alone and a new array is
allocated, so a caller can never see a result change under it.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

#: Outputs below this many bytes are allocated fresh (malloc reuses small blocks anyway).
MIN_BYTES = 1 << 20
#: Alignment of recycled outputs and of the temporaries' arena (a zmm line).
ALIGN = 64


def output(keep: dict[int, Any], slot: int, dims: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An array for output `slot`, 64-byte aligned (kernels store big results with aligned
    non-temporal vector stores; malloc gives 16): a view of last call's buffer when only
    `keep` still holds that buffer. NumPy points every view at the owning buffer, so its
    reference count sees the result and all views of it."""
    n = math.prod(dims) * np.dtype(dtype).itemsize
    prev = keep.pop(slot, None)
    # References to prev here: the local name and getrefcount's argument. Any other (the
    # caller's result, a view of it, a tuple holding one) means it is still in use.
    if prev is not None and sys.getrefcount(prev) == 2:
        raw = prev
    elif n < MIN_BYTES:
        return np.empty(dims, dtype)
    else:
        raw = aligned_bytes(n)[0]
    keep[slot] = raw
    off = (-raw.ctypes.data) % ALIGN  # the same offset aligned_bytes found
    return raw[off:off + n].view(dtype).reshape(dims)


def aligned_bytes(n: int) -> tuple[np.ndarray, int]:
    """A raw byte buffer with room for n bytes from an ALIGN-byte boundary, and the offset
    of that boundary in it."""
    raw = np.empty(n + ALIGN, np.uint8)
    return raw, (-raw.ctypes.data) % ALIGN


__all__ = ["output", "aligned_bytes", "ALIGN", "MIN_BYTES"]
