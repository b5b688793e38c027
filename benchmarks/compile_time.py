"""Cold compile time, xlapy-cpu vs XLA, on the JAX-lowered workloads (issue 14).

    python benchmarks/compile_time.py [--reps 5] [--only cnn,sort] [--small] [--probe]

Each workload of benchmarks/jax_workloads.py is lowered once; then, `--reps` rounds, each
side compiles it cold, one after the other (so machine noise hits both alike): xlapy with
no compile cache (memory cache cleared, `XLAPY_CACHE_DIR=""`), XLA after
`jax.clear_caches()` (jax's lowering timed apart: `jax_run.py` counts it in XLA's compile).
Printed per workload: min wall ms of each side (and xlapy's CPU ms: the machine may be
shared), xlapy / XLA and xlapy / (XLA + lowering), and where xlapy's fastest compile spent
its time (xlapy.phases).

`--probe` takes jax_probe.py's ~220 small programs instead (`--only` names them) and ends
with the 20 whose compile is slowest against XLA's (+ lowering): the compile-time cliffs
(a reversed cummax 0.75 s against 0.13, jnp.correlate with 255 taps 0.54 s against 0.03,
before session 74).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import env  # noqa: E402

env.prepare()
os.environ["XLAPY_CACHE_DIR"] = ""  # cold compiles

import numpy as np  # noqa: E402

from benchmarks.jax_workloads import JAX_WORKLOADS  # noqa: E402


def measure(name: str, reps: int, small: bool) -> dict[str, Any]:
    """Min over `reps` interleaved cold compiles of each side."""
    import jax

    jax.config.update("jax_enable_compilation_cache", False)  # XLA cold too, as xlapy

    fn, fargs = _program(name, small)
    wide = any(np.asarray(a).dtype in (np.float64, np.complex128) for a in fargs)
    with jax.enable_x64(wide):  # (double-precision programs: the x64 mode, as jax_probe)
        return _measure(fn, fargs, reps)


#: The programs measured: jax_run's workloads, or jax_probe's (`--probe`).
_PROGRAMS: dict[str, Any] = {}


def _program(name: str, small: bool) -> tuple[Any, list[Any]]:
    got = _PROGRAMS.get(name)
    if got is not None:
        return got
    case = JAX_WORKLOADS[name](small)
    return case.fn, list(case.args)


def _measure(fn: Any, fargs: list[Any], reps: int) -> dict[str, Any]:
    import jax

    import xlapy
    from xlapy.backends.cpu import cache

    text = jax.jit(fn).lower(*fargs).as_text()
    best: dict[str, Any] = {"xlapy": float("inf"), "cpu": float("inf"), "xla": float("inf"),
                            "lower": float("inf"), "phases": ""}
    for _ in range(reps):
        cache.clear_memory()
        t0, c0 = time.perf_counter(), time.thread_time()
        prog = xlapy.compile(text, backend="cpu")
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
        if wall < best["xlapy"]:
            best["xlapy"], best["phases"] = wall, prog.phases.table()
        best["cpu"] = min(best["cpu"], cpu)
        del prog
        jax.clear_caches()
        t0 = time.perf_counter()
        lowered = jax.jit(fn).lower(*fargs)
        t1 = time.perf_counter()
        lowered.compile()
        best["lower"] = min(best["lower"], t1 - t0)
        best["xla"] = min(best["xla"], time.perf_counter() - t1)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--small", action="store_true", help="tiny shapes (a smoke test)")
    ap.add_argument("--probe", action="store_true", help="jax_probe.py's programs")
    args = ap.parse_args(argv)
    if args.probe:
        from benchmarks.jax_probe import programs

        _PROGRAMS.update(programs(args.small))
    pool = _PROGRAMS or JAX_WORKLOADS
    names = [n for n in pool if not args.only or n in args.only.split(",")]
    measure(names[0], 1, True)  # start-up (imports, the runtime library) off the table
    print(f"{'workload':16s} | {'xlapy ms':>8s} | {'cpu ms':>7s} | {'XLA ms':>7s} | "
          f"{'+lower':>7s} | {'/XLA':>5s} | {'/+lower':>7s} | xlapy phases (ms)")
    rows = []
    for name in names:
        r = measure(name, args.reps, args.small)
        rows.append((r['xlapy'] / (r['xla'] + r['lower']), name, r))
        print(_row(name, r), flush=True)
    if args.probe:
        print("\nslowest against XLA (+ lowering):")
        for _, name, r in sorted(rows, key=lambda x: x[0], reverse=True)[:20]:
            print(_row(name, r))
    return 0


def _row(name: str, r: dict[str, Any]) -> str:
    return (f"{name:16s} | {r['xlapy'] * 1e3:8.1f} | {r['cpu'] * 1e3:7.1f} | "
            f"{r['xla'] * 1e3:7.1f} | {r['lower'] * 1e3:7.1f} | {r['xlapy'] / r['xla']:5.2f} | "
            f"{r['xlapy'] / (r['xla'] + r['lower']):7.2f} | {r['phases']}")


if __name__ == "__main__":
    raise SystemExit(main())
