"""LLVM's machine scheduler without register-pressure tracking for fused kernels' modules.

Why: on 16 vector registers (AVX2) the scheduler, tracking register pressure, keeps a fused
kernel's long per-element chains (a polynomial's multiply-adds, erfc's branches, a
transcendental's range reduction) one after another to save registers, so the out-of-order
window holds one or two chains and the loop is latency-bound. With the tracking off, on Zen 3:
jnp.polyval of degree 19 0.84 -> 0.69 ms, exact GELU 1.60 -> 1.34, erfinv 3.92 -> 3.41,
attention_bf16 6.27 -> 5.74. The library modules' register blocks keep it on (convolutions
ran 1.3-1.5x slower without it: their accumulators spilled). AVX-512 targets (32 vector
registers, not measured here) keep it too.

The setting is one global LLVM option (`-misched-regpressure`, read per scheduling region),
so code generation with it off and on must not overlap: threads generating code with the same
setting run side by side, a thread wanting the other waits until they are done (`use`). A
module's text says which it takes (MARK on its first line): the disk cache keys on the text,
so objects of the two settings never mix. Scheduling moves instructions, never changes one:
the bits of the results are the same either way.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import llvmlite.binding as llvm

from xlapy.backends.cpu import target

#: Fused kernels' modules are marked (benchmarks turn it off to compare).
ENABLED = True
#: First line of a module whose code generation runs without register-pressure tracking.
MARK = "; xlapy: misched-regpressure=false\n"

_CV = threading.Condition()
_STATE = {"pressure": True, "inside": 0}


def marked(text: str) -> str:
    """`text` (a kernel module's) to be scheduled without register-pressure tracking, on
    x86 targets with 16 vector registers (measured there; AVX-512's 32 as before)."""
    t = target.current()
    if not ENABLED or text.startswith(MARK) or not t.is_x86 or t.has("avx512f"):
        return text
    return MARK + text


def tracks_pressure(text: str | None) -> bool:
    return not (text or "").startswith(MARK)


@contextlib.contextmanager
def use(pressure: bool) -> Iterator[None]:
    """Code generation inside runs with register-pressure tracking `pressure`: it waits while
    threads with the other setting are inside, then sets LLVM's option if it differs. Hold
    no other lock a waiting thread could need while inside (only code generation runs)."""
    with _CV:
        while _STATE["inside"] and _STATE["pressure"] != pressure:
            _CV.wait()
        if _STATE["pressure"] != pressure:
            llvm.set_option("", f"-misched-regpressure={'true' if pressure else 'false'}")
            _STATE["pressure"] = pressure
        _STATE["inside"] += 1
    try:
        yield
    finally:
        with _CV:
            _STATE["inside"] -= 1
            if not _STATE["inside"]:
                _CV.notify_all()


__all__ = ["MARK", "marked", "tracks_pressure", "use"]
