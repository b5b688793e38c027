"""A benchmark's process environment: OpenBLAS picks its own kernels; the header says which.

Some machines set OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE to force old BLAS kernels; users don't,
so timings taken under them mislead. OpenBLAS reads both when the library loads, so every
benchmark entry script calls `prepare()` first, before numpy, scipy, jax or xlapy are imported:
if either variable is set, the process re-executes itself (same interpreter, same arguments)
without them. Tests don't use this module: they keep the environment as it is.

`header()` returns lines for the top of a benchmark's output: the CPU model, which variables
were removed, and the core OpenBLAS chose (`*_get_corename`) for each OpenBLAS in the process,
numpy's (scipy-openblas64) and xlapy's own (the scipy-openblas32 wheel) included.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

#: Variables that force OpenBLAS's kernel choice or cache blocking.
FORCED = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
#: Set in the re-executed process: what was removed (NAME=value, space separated).
_MARK = "XLAPY_BENCH_UNSET"
#: Corename functions of the builds seen (scipy-openblas32/64 prefix and suffix their symbols).
_CORENAME = ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
             "openblas_get_corename64_", "openblas_get_corename")
_CONFIG = ("scipy_openblas_get_config64_", "scipy_openblas_get_config",
           "openblas_get_config64_", "openblas_get_config")


def prepare() -> None:
    """Re-execute this process without FORCED variables, if any is set (call it first)."""
    removed = [f"{k}={os.environ[k]}" for k in FORCED if k in os.environ]
    if not removed:
        return
    environ = {k: v for k, v in os.environ.items() if k not in FORCED}
    environ[_MARK] = " ".join(filter(None, [environ.get(_MARK, "")] + removed))
    sys.stdout.flush()
    sys.stderr.flush()
    # orig_argv keeps `-m module`, -X options and the script path as they were given.
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], environ)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (implementer/part on ARM), and the core count."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() not in fields:
                    fields[key.strip()] = value.strip()
    except OSError:
        pass
    name = fields.get("model name") or fields.get("Hardware") or ""
    if not name and "CPU implementer" in fields:
        name = f"implementer {fields['CPU implementer']} part {fields.get('CPU part', '?')}"
    from xlapy.backends.cpu.parallel import usable_cpus

    usable = usable_cpus()  # xlapy's default thread count: affinity and cgroup quota
    mine = "" if usable == os.cpu_count() else f", {usable} usable by this process"
    return f"{name or platform.processor() or 'unknown'} ({platform.machine()}, " \
           f"{os.cpu_count()} cpus{mine})"


def _call_str(lib: ctypes.CDLL, names: tuple[str, ...]) -> str | None:
    for name in names:
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype, fn.argtypes = ctypes.c_char_p, []
            out = fn()
            return out.decode(errors="replace").strip() if out else None
    return None


def _loaded_openblas() -> list[str]:
    """Paths of the OpenBLAS libraries mapped into this process."""
    paths: list[str] = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                path = parts[5].strip() if len(parts) == 6 else ""
                base = os.path.basename(path)
                if "openblas" in base.lower() and ".so" in base and path not in paths:
                    paths.append(path)
    except OSError:
        pass
    return paths


def _owner(path: str) -> str:
    """Which package an OpenBLAS belongs to, from where it lies."""
    parts = path.split(os.sep)
    for tag, owner in (("scipy_openblas32", "xlapy (scipy-openblas32)"),
                       ("scipy_openblas64", "scipy-openblas64"), ("numpy.libs", "numpy"),
                       ("numpy", "numpy"), ("scipy.libs", "scipy"), ("scipy", "scipy")):
        if tag in parts:
            return owner
    return os.path.basename(path)


def _load_xlapy_openblas() -> None:
    """Load xlapy's own OpenBLAS as its cpu backend does (the same file, so the same handle)."""
    try:
        import scipy_openblas32 as sob

        ctypes.CDLL(os.path.join(sob.get_lib_dir(), sob.get_library(fullname=True)))
    except (ImportError, OSError, AttributeError, IndexError):
        pass


def openblas_cores() -> list[tuple[str, str, str]]:
    """(owner, corename, config) of each OpenBLAS in the process, numpy's and xlapy's loaded."""
    import numpy  # noqa: F401  (loads numpy's OpenBLAS)

    _load_xlapy_openblas()
    out = []
    paths = _loaded_openblas()
    rank = {"numpy": 0, "xlapy (scipy-openblas32)": 1}
    paths.sort(key=lambda p: rank.get(_owner(p), 2))
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        core = _call_str(lib, _CORENAME) or "?"
        out.append((_owner(path), core, _call_str(lib, _CONFIG) or os.path.basename(path)))
    return out


def header() -> str:
    """Lines for the top of a benchmark's output: CPU, removed variables, OpenBLAS kernels."""
    lines = [f"cpu: {cpu_model()}"]
    removed = os.environ.get(_MARK, "")
    if removed:
        lines.append(f"env: removed {removed} (re-executed without them, before OpenBLAS loaded)")
    cores = openblas_cores()
    for owner, core, config in cores:
        lines.append(f"openblas: {owner}: core {core} [{config}]")
    if not cores:
        lines.append("openblas: none loaded")
    return "\n".join(lines)
