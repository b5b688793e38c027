"""Names for JIT-compiled kernels in `perf report`: with XLAPY_PERF_MAP set, each linked
kernel's address range is appended to /tmp/perf-<pid>.map (the file Linux perf reads for
code it cannot find in a binary), so a profile shows `main.k3` instead of a bare address.
Kernels run as code with no symbols otherwise; finding the slow one of an exported
program's nine (np.polyfit's) took dumping objects and matching addresses by hand."""

from __future__ import annotations

import os
import threading

from xlapy.backends.cpu import objfile

_LOCK = threading.Lock()


def path() -> str:
    return f"/tmp/perf-{os.getpid()}.map"


def record(obj: bytes, addresses: dict[str, int]) -> None:
    """Append `START SIZE NAME` (hex) for each exported function of object `obj` linked at
    `addresses` (a function the object does not size, or at address 0, is left out)."""
    sizes = {s.name: s.size for s in objfile.symbols(obj) if s.defined}
    lines = [f"{a:x} {sizes[n]:x} xlapy:{n}\n" for n, a in addresses.items()
             if a and sizes.get(n)]
    if lines:
        with _LOCK, open(path(), "a") as f:
            f.writelines(lines)


__all__ = ["path", "record"]
