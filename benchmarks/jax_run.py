"""xlapy-cpu vs XLA on JAX-lowered programs (issue 14), interleaved in one process.

    python benchmarks/jax_run.py [--reps 10] [--burst 3] [--only mlp,sort] [--small]

Each workload of benchmarks/jax_workloads.py is lowered with `jax.jit(f).lower(*args)` and the
StableHLO text goes to `xlapy.compile(text, backend="cpu")` as a user would hand it over (cold:
no compile cache). Both compiles are timed after a collection with the cyclic GC paused
(`timing.gc_paused`, as `timeit` does), COMPILE_ROUNDS times each, alternating, each cold (XLA:
jax's caches cleared, its lowering counted; xlapy: its memory cache cleared): the minimum of
each side is reported. The result is checked against XLA's (max normwise
relative error, against the workload's tolerance) and the instructions that run on the
interpreter inside the cpu backend (`fallbacks()`) are printed: a fallback is a bug to report,
not a number to hide.
Then xlapy and XLA run round-robin, so machine noise hits both alike: each round calls each side
`--burst` times in a row (default 3), every call timed. Strictly alternating calls (`--burst 1`)
time each call right after the other side's, whose buffers have evicted its own from the caches:
the batch-1 MLP's 96 MB of weights fit this machine's L3, and then both sides stream them from
DRAM. A burst's later calls see each side's own steady state, as a server calling one model does;
the minimum is over all calls, the first of each burst included. Printed: min/median ms,
xlapy/XLA (by min), GFLOP/s (dots, convolutions) or GB/s (bytes a memory-bound workload must
move), each side's compile time, and each side's peak memory: the
temporaries plus the outputs (xlapy: its arena; XLA: its compiled memory analysis), arguments not
counted.

The header gives the CPU, its vector flags and measured references: f32 matmul GFLOP/s through
XLA on one core (every thread of the process pinned to one cpu) and on all cores, the f32 FMA
peak (a register-only loop of vector FMAs, fma_peak.py: what no GEMM can beat), and the
STREAM-like copy bandwidth of NumPy (256 MB, read + write counted). Under the table, each
memory-bound workload (one with bytes and no flops) has its copy floor: an xlapy `x * 2.0`
moving the same bytes (read + write), timed in the same rounds: how far the workload is from
what its bytes cost on this machine, and the xlapy/XLA ratio that floor allows.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import pkgutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import env  # noqa: E402
from benchmarks.fma_peak import fma_peak  # noqa: E402
from benchmarks.timing import gc_paused, round_robin  # noqa: E402

env.prepare()  # first, before OpenBLAS loads (benchmarks/env.py)
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # see run.py: idle BLAS threads spin
os.environ.setdefault("XLAPY_CACHE_DIR", "")  # cold compiles: time the real thing
#: Cold compiles of each workload on each side, alternating (XLA's lowering and compile
#: after jax.clear_caches(), xlapy's after its memory cache is cleared); the fastest of
#: each side is reported: one compile is 10-30 ms, and on a shared machine a single one
#: moved by 2-3 ms between runs, more than the differences the table is read for.
COMPILE_ROUNDS = 3

import numpy as np  # noqa: E402

from benchmarks.jax_workloads import JAX_WORKLOADS, Case, leaves, rel_error  # noqa: E402


# ---- machine references ----------------------------------------------------------------------
def cpu_flags() -> str:
    """Which of the vector extensions that matter here /proc/cpuinfo lists."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        flags = []
    want = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512_bf16", "avx_vnni")
    return " ".join(f"{w}={'yes' if w in flags else 'no'}" for w in want)


def _pin_all_threads(cpus: set[int]) -> dict[int, set[int]]:
    """Set the affinity of every thread of this process; returns what each had before."""
    before: dict[int, set[int]] = {}
    for tid in (int(t) for t in os.listdir("/proc/self/task")):
        try:
            before[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass
    return before


def _restore(before: dict[int, set[int]]) -> None:
    for tid, cpus in before.items():
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass


def matmul_peak(n: int = 2048, reps: int = 3) -> tuple[float, float]:
    """f32 GFLOP/s of a jitted n^3 matmul through XLA: (one core, all cores)."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    a = jax.device_put(rng.standard_normal((n, n), dtype=np.float32))
    b = jax.device_put(rng.standard_normal((n, n), dtype=np.float32))
    f = jax.jit(jnp.matmul)
    f(a, b).block_until_ready()

    def best() -> float:
        t = math.inf
        for _ in range(reps):
            t0 = time.perf_counter()
            f(a, b).block_until_ready()
            t = min(t, time.perf_counter() - t0)
        return 2.0 * n ** 3 / t / 1e9

    allcore = best()
    before = _pin_all_threads({min(os.sched_getaffinity(0))})
    try:
        single = best()
    finally:
        _restore(before)
    return single, allcore


def copy_bandwidth(mb: int = 256, reps: int = 5) -> float:
    """GB/s of np.copyto over `mb` MB (read + write counted, as STREAM copy does)."""
    src = np.ones(mb * (1 << 20) // 4, np.float32)
    dst = np.empty_like(src)
    t = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        t = min(t, time.perf_counter() - t0)
    return 2.0 * src.nbytes / t / 1e9


# ---- one workload ----------------------------------------------------------------------------
def bench_one(name: str, reps: int, small: bool, burst: int = 1) -> dict[str, Any]:
    import jax

    import xlapy
    from xlapy.backends.cpu import cache

    case: Case = JAX_WORKLOADS[name](small)
    row: dict[str, Any] = {"name": name, "case": case, "times": None, "fallbacks": [],
                           "error": None, "rel": math.nan,
                           "compile_xla": math.inf, "compile_xlapy": math.inf}
    for _ in range(COMPILE_ROUNDS):  # each side cold every round, the rounds interleaved
        jax.clear_caches()
        with gc_paused():
            t0 = time.perf_counter()
            lowered = jax.jit(case.fn).lower(*case.args)
            text = lowered.as_text()
            t_lower = time.perf_counter() - t0
            t0 = time.perf_counter()
            jc = lowered.compile()
            row["compile_xla"] = min(row["compile_xla"], t_lower + time.perf_counter() - t0)
        cache.clear_memory()
        try:
            with gc_paused():
                t0 = time.perf_counter()
                prog = xlapy.compile(text, backend="cpu")
                row["compile_xlapy"] = min(row["compile_xlapy"], time.perf_counter() - t0)
        except Exception as e:  # a workload that does not compile is reported, the rest run
            row["error"] = f"compile: {type(e).__name__}: {e}"
            return row
    row["fallbacks"] = list(prog._exe.fallbacks())
    # device_put copies asynchronously: wait, so the copies (the MLP's ~90 MB of weights)
    # do not run beside xlapy's first call (it measured ~20 ms slower for it)
    jargs = jax.block_until_ready([jax.device_put(a) for a in case.args])
    args = case.args

    def run_xla() -> Any:
        return jax.block_until_ready(jc(*jargs))

    try:
        t0 = time.perf_counter()
        got = prog(*args)  # the first call pays what is built on first use (library kernels)
        first = time.perf_counter() - t0
    except Exception as e:
        row["error"] = f"run: {type(e).__name__}: {e}"
        return row
    t0 = time.perf_counter()
    want = run_xla()
    row["first"] = (first, time.perf_counter() - t0)
    row["rel"] = rel_error(got, want)
    row["peak"] = (xlapy_peak_bytes(prog._exe, got), xla_peak_bytes(jc))
    row["ok"] = row["rel"] <= case.tol
    runners = {"xlapy": lambda: prog(*args), "xla": run_xla}
    if case.bytes and not case.flops:
        runners["floor"] = copy_floor(case.bytes)
    times = round_robin(runners, reps, burst)
    row["times"] = times
    return row


def copy_floor(nbytes: float) -> Any:
    """A call of an xlapy-compiled `x * 2.0` over f32 that reads and writes `nbytes` in all
    (the cheapest kernel moving a memory-bound workload's bytes)."""
    import jax

    import xlapy

    x = np.ones(max(int(nbytes) // 8, 1), np.float32)
    prog = xlapy.compile(jax.jit(lambda v: v * 2.0).lower(x).as_text(), backend="cpu")
    prog(x)
    return lambda: prog(x)


def _arena_bytes(exe: Any) -> int:
    """The cpu executable's arena and those of the computations it calls (while bodies,
    branches: counted as if all were live at once, an upper bound)."""
    plan = getattr(exe, "_arena_plan", None)
    own = plan[1] if plan else 0
    return int(own) + sum(_arena_bytes(sub) for _, sub in getattr(exe, "subexecs", []))


def xlapy_peak_bytes(exe: Any, outputs: Any) -> int:
    """Peak memory as the issue counts it: the arena of temporaries plus the outputs
    (scratch a library call allocates for itself, e.g. BLAS packing, is not counted)."""
    return _arena_bytes(exe) + sum(a.nbytes for a in leaves(outputs))


def xla_peak_bytes(compiled: Any) -> int:
    """XLA's buffers counted as xlapy's are: its temporaries plus its outputs (its
    peak_memory_in_bytes also counts the arguments, which neither side allocates)."""
    m = compiled.memory_analysis()
    return int(m.temp_size_in_bytes + m.output_size_in_bytes)


def warm_up() -> None:
    """One small compile on each side, so no workload's compile time carries start-up."""
    import jax
    import jax.numpy as jnp

    import xlapy

    lowered = jax.jit(lambda x: jnp.tanh(x) + 1).lower(np.zeros(4, np.float32))
    lowered.compile()
    xlapy.compile(lowered.as_text(), backend="cpu")
    # The backend imports its op modules when an op first needs one: import them all here,
    # so the first workload with a library op (a sort, a dot) is not charged for start-up.
    import xlapy.backends.cpu as cpu

    for m in pkgutil.iter_modules(cpu.__path__):
        importlib.import_module(f"{cpu.__name__}.{m.name}")


def _rate(case: Case, seconds: float) -> str:
    if case.flops:
        return f"{case.flops / seconds / 1e9:7.1f} GFLOP/s"
    if case.bytes:
        return f"{case.bytes / seconds / 1e9:7.2f} GB/s   "
    return f"{'-':>15s}"


def fmt_table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'workload':15s} | {'xlapy min/med ms':>19s} | {'XLA min/med ms':>19s} | "
            f"{'xlapy/XLA':>9s} | {'xlapy rate':>15s} | {'XLA rate':>15s} | "
            f"{'compile xlapy/XLA ms':>20s} | {'1st call xlapy/XLA ms':>21s} | "
            f"{'peak MB xlapy/XLA':>17s} | {'max rel err':>11s} | "
            f"ok | fallbacks")
    lines = [head, "-" * len(head)]
    for r in rows:
        if r["times"] is None:
            lines.append(f"{r['name']:15s} | FAILED {r['error']}")
            continue
        mm = {k: (min(v), statistics.median(v)) for k, v in r["times"].items()}
        cells = " | ".join(f"{mm[k][0] * 1e3:9.3f}/{mm[k][1] * 1e3:9.3f}" for k in ("xlapy", "xla"))
        ratio = mm["xlapy"][0] / mm["xla"][0]
        rates = f"{_rate(r['case'], mm['xlapy'][0])} | {_rate(r['case'], mm['xla'][0])}"
        comp = f"{r['compile_xlapy'] * 1e3:8.1f}/{r['compile_xla'] * 1e3:8.1f}"
        ok = "yes" if r["ok"] else "NO "
        fb = len(r["fallbacks"])
        first = f"{r['first'][0] * 1e3:9.1f}/{r['first'][1] * 1e3:9.1f}"
        peak = f"{r['peak'][0] / 2 ** 20:8.2f}/{r['peak'][1] / 2 ** 20:8.2f}"
        lines.append(f"{r['name']:15s} | {cells} | {ratio:9.3f} | {rates} | {comp:>20s} | "
                     f"{first:>21s} | {peak:>17s} | {r['rel']:11.2e} | {ok} | {fb}")
    return "\n".join(lines)


def fmt_floors(rows: list[dict[str, Any]]) -> str:
    """The copy floor of each memory-bound workload (min over the same rounds)."""
    lines = []
    for r in rows:
        t = r["times"] or {}
        if "floor" in t:
            f, x, q = min(t["floor"]), min(t["xlapy"]), min(t["xla"])
            lines.append(f"  copy floor {r['name']}: x*2.0 over the same bytes {f * 1e3:.3f} ms;"
                         f" xlapy/floor {x / f:.2f}, floor/XLA {f / q:.3f}")
    return "\n".join(lines)


def fmt_fallbacks(rows: list[dict[str, Any]]) -> str:
    """Every fallback, by workload (instruction name and opcode), or a line saying none."""
    lines = []
    for r in rows:
        for instr, opcode in r["fallbacks"]:
            lines.append(f"  FALLBACK {r['name']}: {opcode} ({instr})")
    return "\n".join(lines) if lines else "  fallbacks: none"


def workload_args(doc: str, workloads: dict[str, Any], argv: list[str] | None
                  ) -> tuple[argparse.Namespace, list[str]]:
    """--reps/--only/--small of the JAX benchmark runners: (options, workload names)."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--only", default="", help="comma-separated workload names")
    p.add_argument("--small", action="store_true", help="small shapes (a quick run)")
    p.add_argument("--burst", type=int, default=3,
                   help="calls of each side in a row per round (1: strictly alternating)")
    a = p.parse_args(argv)
    names = [n for n in a.only.split(",") if n] or list(workloads)
    unknown = [n for n in names if n not in workloads]
    if unknown:
        p.error(f"unknown workloads {unknown}; known: {', '.join(workloads)}")
    return a, names


def run_workloads(bench: Any, names: list[str], a: argparse.Namespace
                  ) -> list[dict[str, Any]]:
    """Warm both sides up, then `bench(name, reps, small)` per workload (progress on stderr)."""
    warm_up()
    rows = []
    for n in names:
        rows.append(bench(n, a.reps, a.small, a.burst))
        print(f"  done {n}", file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    a, names = workload_args(__doc__, JAX_WORKLOADS, argv)
    print(env.header(), flush=True)
    print(f"cpu flags: {cpu_flags()}", flush=True)
    # The machine may be shared: the load says how far to trust the numbers below.
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"load average: {load}; OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}", flush=True)
    import jax

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_enable_compilation_cache", False)  # XLA cold too, as xlapy
    single, allcore = matmul_peak(512 if a.small else 2048)
    fma1, fma_all = fma_peak(0.02 if a.small else 0.2)
    print(f"peak (XLA f32 matmul): {single:.1f} GFLOP/s one core, {allcore:.1f} GFLOP/s "
          f"all {len(os.sched_getaffinity(0))} cores; f32 FMA loop (registers only): "
          f"{fma1:.1f} one core, {fma_all:.1f} all; copy (NumPy, 256 MB): "
          f"{copy_bandwidth(16 if a.small else 256):.1f} GB/s", flush=True)
    rows = run_workloads(bench_one, names, a)
    print(fmt_table(rows))
    floors = fmt_floors(rows)
    if floors:
        print(floors)
    print(fmt_fallbacks(rows))
    return 0 if all(r["times"] is not None and r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
