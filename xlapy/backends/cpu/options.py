"""`CpuOptions`: what one cpu compile is decided by, frozen and made once per compile from the
`options` mapping that `Client.compile(options)` / `xlapy.compile(..., options=)` pass down.

The environment only supplies defaults, read here and nowhere deeper: $XLAPY_CPU_TARGET (the
target, target.py), $XLAPY_NUM_THREADS (the threads, parallel.py), $XLAPY_CPU_LANES (explicit
vector lanes, lanes.py); so does the denormal mode in force (xlapy.denormal.use). The
planner, the fusion pass and the executable read the fields; nested executables (control
flow) get the same options with `nested` set.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from xlapy import denormal
from xlapy.backends.cpu import parallel, recycle, target
from xlapy.backends.cpu.fusion_plan import FusionLimits
from xlapy.errors import XlapyError
from xlapy.types import Shape

#: The smallest entry result stored non-temporally (CpuOptions.streams).
STREAM_MIN = 1 << 20


@functools.cache
def stream_default(sysfs: str = "/sys/devices/system/cpu/cpu0/cache") -> int:
    """The largest cache's size (Linux sysfs), else 8 MiB. A result that fits in it stays
    there for its consumer, and ordinary stores keep it there. Measured on Zen 4 (32 MB
    L3), non-temporal against ordinary stores, interleaved runs: x * 2 + 1 of 16 / 24 / 32
    / 64 MB 1.44 / 1.14 / 0.90 / 0.77 the time; a 9.6 MB uint8 -> f32 image conversion
    had taken 2.6x XLA's time; softmax of 16 / 64 MB 1.22 / 1.04."""
    best = 0
    for index in glob.glob(os.path.join(sysfs, "index*")):
        try:
            with open(os.path.join(index, "size")) as f:
                text = f.read().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return max(best, 8 << 20)


@dataclass(frozen=True)
class CpuOptions:
    """One compile's settings. `lanes`: explicit SIMD lanes per kernel vector (None: the
    target's width; 0: scalar kernels and LLVM's own vectorizer, for A/B comparisons)."""

    target: target.CpuTarget
    num_threads: int
    lanes: int | None = None
    fusion: FusionLimits = field(default_factory=FusionLimits)
    #: Element-ops below which a kernel is not worth splitting across threads.
    split_cost: int = 1 << 18
    #: The same inside control flow (a loop body runs it once per step): a split waits for a
    #: worker every step, which a loaded machine makes a scheduler tick now and then.
    nested_split_cost: int = 1 << 23
    #: Entry results of at least this many bytes are stored non-temporally (kernels.py):
    #: the last-level cache's size (`stream_default`).
    stream_bytes: int = field(default_factory=stream_default)
    #: Rows per chunk at least of a reduce over dimension 0 split into partials.
    partial_min_rows: int = 16
    #: Elements below which no kernel of a module is worth LLVM's loop vectorizer.
    small_kernel: int = 64
    #: A computation control flow runs (its parameters are its caller's to check).
    nested: bool = False
    #: A while loop's condition or body (its tiny kernels get a sequence function:
    #: kernel_sequence.py).
    loop_part: bool = False
    #: Kernels may call routines this process links once (transpose_lib.py); xlapy.aot's
    #: objects, linked into programs of their own, may not.
    routines: bool = True
    #: The denormal mode kernels and fallbacks run in (xlapy.denormal: `ftz` or `ieee`).
    denormal: str = denormal.FTZ
    #: A small entry computation may run as one native loop trip (branch_loop.entry_trip);
    #: off: its thunks one by one (what tests of the thunks' own paths compile).
    entry_trip: bool = True
    #: A tiny while loop runs as one function of its own (loop_fused.py); off: the generic
    #: driver walks its kernels (A/B comparisons, tests of the driver itself).
    fused_loops: bool = True

    @classmethod
    def make(cls, options: Mapping[str, Any] | CpuOptions | None = None) -> CpuOptions:
        """From a compile's options mapping (keys: the field names, `target` also by name,
        and the FusionLimits fields); what it leaves out comes from the environment, else
        the defaults. An unknown key is an error."""
        if isinstance(options, CpuOptions):
            return options
        opts = dict(options or {})
        limits = {f.name for f in dataclasses.fields(FusionLimits)}
        known = {f.name for f in dataclasses.fields(cls)} - {"fusion"} | limits
        unknown = sorted(set(opts) - known)
        if unknown:
            raise XlapyError(f"unknown cpu compile option(s) {', '.join(unknown)}; known: "
                             f"{', '.join(sorted(known))}")
        tgt = target.from_options(opts)
        lanes = opts.pop("lanes", None)
        if lanes is None:
            env = os.environ.get("XLAPY_CPU_LANES", "").strip()
            lanes = int(env) if env else None
        fusion = FusionLimits(**{k: opts.pop(k) for k in list(opts) if k in limits})
        return cls(**{**opts, "target": tgt, "lanes": lanes, "fusion": fusion,
                      "num_threads": parallel.num_threads(opts, parallel.usable_cpus()),
                      "denormal": denormal.from_options(opts)})

    def streams(self, result: Shape, reads: Sequence[Shape]) -> bool:
        """Whether a kernel's entry result is stored non-temporally: it is at least
        `stream_bytes`, or a quarter of that while the kernel reads a buffer of that size or
        more, whose lines come from memory anyway and evict the result's (an embedding
        lookup of 8192 rows of a 100 MB table into 16 MB: 1.75 -> 1.43-1.60 ms on Zen 3, 32
        MB L3, XLA 1.7-1.8). Never below STREAM_MIN (a result that small stays in cache;
        and from recycle.MIN_BYTES on it is a recycled, 64-byte aligned buffer)."""
        if not result.is_array:
            return False
        size = result.num_elements * result.dtype.itemsize
        big = any(r.is_array and r.num_elements * r.dtype.itemsize >= self.stream_bytes
                  for r in reads)
        least = self.stream_bytes // 4 if big else self.stream_bytes
        return size >= max(least, STREAM_MIN, recycle.MIN_BYTES)

    def nested_copy(self, loop_part: bool = False) -> CpuOptions:
        return dataclasses.replace(self, nested=True, loop_part=loop_part)
