"""Arguments a loop reads every iteration, copied to cache-line alignment when misaligned.

NumPy allocates through malloc, 16-byte aligned: three arrays in four start inside a cache
line, and every vector load of their rows then spans two lines. A loop body that reads a
cached array each iteration pays that every step: power iteration's `a @ v` over a 256 x
256 f32 matrix ran 3.5 us a step from a misaligned matrix and 2.2 from an aligned one, XLA
2.7-3.4 (jax copies an argument into an aligned buffer of its own); 512: 13.5 -> 8.1 (one
thread), 128: 1.17 -> 0.82. The copy (np.copyto, ~10 GB/s) pays back over MIN_TRIPS
steps or more of a known trip count reading an array the caches hold (BYTES): measured
same-process, a 512 x 512 matrix's 200 steps 1.50 -> 1.14 ms, but a 1024 x 1024 one's 20
steps 0.83 -> 1.19 and a 50-step batched matrix-vector loop over 1 MB 0.65 -> 0.69. A
streaming read (larger arrays) loses little to split lines (layernorm's 16 MB: 2%).
"""

from __future__ import annotations

import numpy as np

from xlapy.ir import Computation
from xlapy.passes.pass_base import array_bytes, packed_state
from xlapy.passes.while_loop_simplifier import passes_through, read_by, trip_count

#: The alignment copies get (a cache line).
ALIGN = 64
#: Fewest iterations (a known trip count) for the copy to pay back.
MIN_TRIPS = 100
#: Argument sizes copied: from a few lines' worth up to what two cores' L2 caches hold.
BYTES = (4 << 10, 4 << 20)


def loop_read(comp: Computation) -> frozenset[int]:
    """Parameter numbers of `comp` that a while loop of it carries through unchanged (read,
    never replaced: a matrix a jax.lax.fori_loop body closes over) and reads other than by
    slices, sized BYTES, the loop running a known MIN_TRIPS iterations or more."""
    out: set[int] = set()
    for w in comp.instructions:
        if w.opcode != "while":
            continue
        n = trip_count(w)
        if n is None or n < MIN_TRIPS:
            continue
        packed = packed_state(w)
        elems = (w.operands[0].operands if w.operands[0].opcode == "tuple" else []) \
            if packed else w.operands
        for k, x in enumerate(elems):
            if x.opcode == "parameter" and x.shape.is_array and \
                    BYTES[0] <= array_bytes(x.shape) <= BYTES[1] and \
                    passes_through(w.called[1], k, packed) and \
                    _read_whole(w.called[1], k, packed):
                out.add(x.parameter_number)
    return frozenset(out)


#: Ops that read part of their operand: a scan's xs, one step's slice of it a step (read
#: once a call in all: its copy would cost more than the split lines).
_PARTIAL = frozenset({"dynamic_slice", "slice", "gather"})


def _read_whole(body: Computation, k: int, packed: bool) -> bool:
    """Whether the body reads state element k other than by slices of it."""
    return any(u.opcode not in _PARTIAL and u.opcode != "tuple"
               for u in read_by(body, k, packed, body))


def aligned(a: np.ndarray, scratch: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """A copy of C-contiguous `a` starting on an ALIGN boundary (in `scratch`, a buffer an
    earlier call made, when it fits), and the buffer it lives in."""
    if scratch is None or scratch.nbytes < a.nbytes + ALIGN:
        scratch = np.empty(a.nbytes + ALIGN, np.uint8)
    off = -scratch.ctypes.data % ALIGN
    out = scratch[off: off + a.nbytes].view(a.dtype).reshape(a.shape)
    np.copyto(out, a)
    return out, scratch


__all__ = ["ALIGN", "BYTES", "MIN_TRIPS", "aligned", "loop_read"]
