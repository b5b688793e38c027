"""Compile cache: object code in memory and on disk, keyed by the optimized-input IR text,
the compile options and the target (triple, CPU name and features: target.py), so another
CPU or target never loads code built for this one. Disk writes go to a temporary file and
are renamed into place, which is atomic, so concurrent processes never read a half-written
entry.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path

import llvmlite

from xlapy.backends.cpu import target
from xlapy.backends.cpu.llvm_util import OPT_LEVEL

_MEMORY: dict[str, bytes] = {}
_LOCK = threading.Lock()
#: Bump when code generation changes in a way the IR text would not show.
FORMAT = "5"


def cache_dir() -> Path | None:
    """`$XLAPY_CACHE_DIR`, else ~/.cache/xlapy/cpu; `XLAPY_CACHE_DIR=""` turns the disk off."""
    env = os.environ.get("XLAPY_CACHE_DIR")
    if env == "":
        return None
    return Path(env) if env else Path.home() / ".cache" / "xlapy" / "cpu"


def key(ir_text: str, options: str = "") -> str:
    h = hashlib.sha256()
    for part in (FORMAT, llvmlite.__version__, str(OPT_LEVEL), target.current().key, options,
                 ir_text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def get(k: str) -> bytes | None:
    with _LOCK:
        hit = _MEMORY.get(k)
    if hit is not None:
        return hit
    d = cache_dir()
    if d is None:
        return None
    try:
        data = (d / f"{k}.o").read_bytes()
    except OSError:
        return None
    with _LOCK:
        _MEMORY[k] = data
    return data


def put(k: str, obj: bytes) -> None:
    with _LOCK:
        _MEMORY[k] = obj
    d = cache_dir()
    if d is None:
        return
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(obj)
        os.replace(tmp, d / f"{k}.o")
    except OSError:
        pass  # a read-only or full disk only costs recompiles


def clear_memory() -> None:
    with _LOCK:
        _MEMORY.clear()
