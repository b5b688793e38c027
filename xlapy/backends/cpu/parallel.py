"""How many threads an executable uses, and work split at boundaries that never depend on it.

The thread count comes from the compile option `num_threads`, else `$XLAPY_NUM_THREADS`, else
the CPUs this process may use (`usable_cpus`). Determinism: whatever can change bits when
split differently (float sums split into partials, BLAS calls: OpenBLAS's microkernels round
differently for different row counts) is cut into chunks whose boundaries depend only on the
extent (`fixed_cuts`); the thread count only decides which thread runs which chunks, so 1, 2
or 64 threads give the same bits. Element-wise work and row reductions are exact per element,
so they split by thread.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path
from typing import Any

from xlapy.backends.cpu.threads import NativePool, native_pool, run_table
from xlapy.errors import XlapyError

#: Most threads an executable may ask for.
MAX_THREADS = 1024
#: Most chunks of one split: the most threads such work keeps busy.
MAX_CHUNKS = 16
#: Kernel cost (elements x ops) per chunk of a partial reduce at least.
PARTIAL_CHUNK_COST = 1 << 21


def usable_cpus(root: str = "/") -> int:
    """CPUs this process may run on: its affinity mask (taskset, cpusets, Slurm), capped by
    a cgroup CPU quota rounded up (docker --cpus, Kubernetes limits; cgroup v2 or v1).
    os.cpu_count() counts the machine's: under `taskset -c 0` here two threads on one CPU
    waited for each other's time slices (scatter-add 1.3x XLA's time, the transformer
    block 1.12x). `root` is the filesystem root the cgroup files are read under (tests)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = _cgroup_quota(root)
    return max(1, min(cpus, math.ceil(quota) if quota else cpus))


@functools.lru_cache(maxsize=4)
def l2_bytes(root: str = "/") -> int | None:
    """This machine's per-core L2 cache (bytes, from sysfs), or None where it is not told:
    some tuning thresholds were measured to flip with it (gemm_small.PACKED_L2)."""
    base = Path(root) / "sys/devices/system/cpu/cpu0/cache"
    try:
        for index in sorted(base.glob("index*")):
            if (index / "level").read_text().strip() == "2":
                text = (index / "size").read_text().strip().upper()
                scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
                return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        return None
    return None


@functools.lru_cache(maxsize=16)
def _cgroup_quota(root: str) -> float | None:
    """The tightest CPU quota (CPUs' worth) of this process's cgroup, or None; read once per
    process and root (the files cost ~60 us, and every compile asks several times)."""
    return _read_quota(Path(root))


def _read_quota(root: Path) -> float | None:
    found: list[float] = []
    try:
        lines = (root / "proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        rel = path.lstrip("/")
        if controllers == "":  # v2: "max 100000" or "200000 100000"
            files = [root / "sys/fs/cgroup" / rel / "cpu.max"]
            parse = _v2_quota
        elif "cpu" in controllers.split(","):  # v1: cfs_quota_us (-1: none), cfs_period_us
            files = [root / "sys/fs/cgroup" / c / rel for c in ("cpu", "cpu,cpuacct")]
            parse = _v1_quota
        else:
            continue
        for f in files:
            q = parse(f)
            if q is not None:
                found.append(q)
    return min(found) if found else None


def _v2_quota(path: Path) -> float | None:
    try:
        quota, period = path.read_text().split()[:2]
        return int(quota) / int(period) if quota != "max" and int(period) > 0 else None
    except (OSError, ValueError):
        return None


def _v1_quota(path: Path) -> float | None:
    try:
        quota = int((path / "cpu.cfs_quota_us").read_text())
        period = int((path / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def num_threads(options: dict[str, Any] | None, default: int | None = None) -> int:
    """The `num_threads` compile option, else $XLAPY_NUM_THREADS, else `default`
    (usable_cpus())."""
    value = (options or {}).get("num_threads")
    if value is not None:
        what = f"compile option num_threads={value!r}"
    else:
        text = os.environ.get("XLAPY_NUM_THREADS", "").strip()
        if not text:
            return max(1, min(default or usable_cpus(), MAX_THREADS))
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


def run_jobs(table: Any, threads: int, keep: Any = None) -> None:
    """Every job of a job table (threads.job_table, strided_table): in one native call on
    this thread when there is one thread or one job, else shared with the pool's workers,
    each taking the next job left (`keep`: what the jobs point into, held until done)."""
    if threads < 2 or int(table[1]) < 2:
        run_table(table)
    else:
        pool(threads).share_table(table, threads, keep)


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


def partial_cuts(extent: int, cost: int, min_rows: int, align: int = 1) -> list[int]:
    """fixed_cuts of a reduce split into partial outputs (thunks.partial_thunk): chunks of
    at least `min_rows` rows and PARTIAL_CHUNK_COST of the kernel's `cost` each, since every
    chunk is a call and a partial combined after it (a function of the shape alone, so the
    bits do not change with the thread count), a power of two of them (3 chunks of a sum of
    logs over 1M floats kept one of 2 threads on 2 of them: 375 us instead of 278)."""
    per_row = max(cost // max(extent, 1), 1)
    return fixed_cuts(extent, max(min_rows, -(-PARTIAL_CHUNK_COST // per_row)), align,
                      pow2=True)


def groups(chunks: int, threads: int) -> list[int]:
    """Boundaries of contiguous groups of chunks, one group per thread used."""
    used = max(1, min(chunks, threads))
    return [chunks * j // used for j in range(used + 1)]


__all__ = ["usable_cpus", "num_threads", "pool", "run_jobs", "fixed_cuts", "partial_cuts", "groups",
           "MAX_THREADS", "MAX_CHUNKS", "PARTIAL_CHUNK_COST"]
