"""Output buffers recycled across calls once the caller has dropped them.

A fresh 64 MiB output costs ~8 ms of page faults per call on this machine (the kernel maps
and zeroes 16K pages on first touch), more than half of a 4096 x 4096 softmax. So each
executable keeps the buffers it returned last (RING of them) for each output slot, and the
next call writes into one again if nothing else refers to it any more: no live result, no
view (a view holds the buffer), no tuple holding one. Anything still referenced is left
alone and a new array is allocated, so a caller can never see a result change under it.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

#: Outputs below this many bytes are allocated fresh (malloc reuses small blocks anyway;
#: glibc maps blocks from 128 KiB on, faulting their pages in on every call).
MIN_BYTES = 1 << 16
#: Buffers kept per output slot. Two: a loop that feeds a call's results back as the next
#: call's arguments (an optimizer's step: params, moments) holds the last results while the
#: call runs, so the one before them is the free buffer (an Adam update of 40 256 x 256
#: parameters, results fed back: 3.75 ms a step against XLA's 2.35, the difference page
#: faults of fresh 256 KiB results).
RING = 2
#: Alignment of recycled outputs and of the temporaries' arena (a zmm line).
ALIGN = 64


def output(keep: dict[int, Any], slot: int, dims: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An array for output `slot`, 64-byte aligned (kernels store big results with aligned
    non-temporal vector stores; malloc gives 16): a view of one of the slot's last RING
    buffers that only `keep` still holds. NumPy points every view at the owning buffer, so
    its reference count sees the result and all views of it."""
    n = math.prod(dims) * np.dtype(dtype).itemsize
    ring: list[np.ndarray] = keep.setdefault(slot, [])
    raw = None
    for k in range(len(ring)):
        # References to the buffer here: the ring's and getrefcount's argument. Any other
        # (the caller's result, a view of it, a tuple holding one) means it is in use.
        if sys.getrefcount(ring[k]) == 2:
            raw = ring.pop(k)
            break
    if raw is None:
        if n < MIN_BYTES:
            return np.empty(dims, dtype)
        raw = aligned_bytes(n)[0]
        del ring[:max(0, len(ring) - RING + 1)]  # (the oldest held ones: the caller's now)
    ring.append(raw)  # (the newest last)
    off = (-raw.ctypes.data) % ALIGN  # the same offset aligned_bytes found
    return raw[off:off + n].view(dtype).reshape(dims)


def aligned_bytes(n: int) -> tuple[np.ndarray, int]:
    """A raw byte buffer with room for n bytes from an ALIGN-byte boundary, and the offset
    of that boundary in it."""
    raw = np.empty(n + ALIGN, np.uint8)
    return raw, (-raw.ctypes.data) % ALIGN


__all__ = ["output", "aligned_bytes", "ALIGN", "MIN_BYTES", "RING"]
