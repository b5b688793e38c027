"""Fusion and memory results of the cpu pipeline on every reference workload.

    python -m benchmarks.workloads.report

One row per workload: kernels before/after the pipeline, passes over memory (kernels touching
an array at least half the size of the largest input), peak memory before buffer assignment
(one buffer per value) and after (the arena), and loop trip counts found.
"""

from __future__ import annotations

if __name__ == "__main__":  # run as a script, not imported: drop forced OpenBLAS kernels
    from benchmarks import env

    env.prepare()  # re-exec: `-m` imported benchmarks.workloads (numpy) before this line

from dataclasses import dataclass  # noqa: E402

from benchmarks.workloads import WORKLOADS  # noqa: E402
from xlapy.passes import cpu_pipeline  # noqa: E402
from xlapy.passes.buffer_assignment import assign_buffers, fmt_bytes  # noqa: E402
from xlapy.passes.fusion import count_kernels, memory_passes  # noqa: E402


@dataclass
class Row:
    name: str
    kernels_before: int
    kernels_after: int
    memory_passes: int
    bytes_before: int
    arena_bytes: int
    peak_live_bytes: int
    trip_counts: list[int]


def analyze(name: str) -> Row:
    build, _ = WORKLOADS[name]
    module = build().module
    entry = module.entry_computation()
    before = count_kernels(entry)
    unshared = assign_buffers(entry, in_place=False).unshared_bytes
    biggest = max((p.shape.num_elements for p in entry.parameters), default=1)
    cpu_pipeline().run(module)
    entry = module.entry_computation()
    ba = module.meta["buffer_assignment"]
    trips = [i.meta["trip_count"] for c in module.computations for i in c.instructions
             if "trip_count" in i.meta]
    return Row(name, before, count_kernels(entry), memory_passes(entry, max(biggest // 2, 1)),
               unshared, ba.arena_bytes, ba.peak_live_bytes, trips)


def table() -> str:
    head = (f"{'workload':12s} {'kernels':>9s} {'passes':>6s} {'before BA':>26s} "
            f"{'after BA (arena)':>26s}  trip counts")
    lines = [head]
    for name in WORKLOADS:
        r = analyze(name)
        lines.append(f"{r.name:12s} {r.kernels_before:>4d}->{r.kernels_after:<4d} "
                     f"{r.memory_passes:>6d} {fmt_bytes(r.bytes_before):>26s} "
                     f"{fmt_bytes(r.arena_bytes):>26s}  {r.trip_counts or ''}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(env.header())
    print(table())
