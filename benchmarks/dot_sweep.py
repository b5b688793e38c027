"""xlapy-cpu vs XLA on plain dots of many shapes (JAX-lowered `x @ w`), interleaved in one
process, to find the shapes where a route (BLAS, gemm_f32, gemm_small, gemm_skinny, gemv)
falls off a cliff:

    python benchmarks/dot_sweep.py [--shapes 2x1024x4096,100x1000x1000] [--dtype f32|f64]
                                   [--reps N] [--burst B]

A shape is m x k x n ([m, k] @ [k, n]; n = 1 is a matrix-vector product, m = 1 a
vector-matrix one). Each row: xlapy and XLA min ms over `reps` rounds of `burst` calls each
(benchmarks/timing.round_robin; at least ~2 GFLOP of calls per side), the ratio of minima, the
route xlapy took (`library ...` in the executable's plan), fallbacks, and the max error
relative to XLA's largest value. Ratios over 1.1 are marked: re-run those (this machine's
noise moves a single ratio by 10-20%).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import env  # noqa: E402
from benchmarks.timing import round_robin  # noqa: E402

env.prepare()  # first, before OpenBLAS loads (benchmarks/env.py)

import numpy as np  # noqa: E402

#: Skinny and batch-1 (m <= 8), small batches (17-80 rows), tall and narrow, square, short
#: sums, big products (more rows than one chunk), matrix-vector.
SHAPES = ("1x1024x1024,1x4096x4096,2x1024x4096,3x1000x1000,4x4096x1024,7x777x999,8x1024x1024,"
          "16x1024x4096,17x513x257,24x4096x4096,31x4096x1024,32x1024x4096,48x4096x1024,"
          "64x4096x4096,80x1024x4096,64x64x64,64x1024x1024,100x1000x1000,128x128x128,"
          "200x300x400,256x256x256,257x1000x999,384x768x768,512x512x512,512x2048x512,"
          "768x3072x768,1000x100x1000,1024x1024x1024,1024x4096x1024,1024x64x1024,"
          "2048x2048x2048,4096x1024x64,1000x1000x1,4096x4096x1")


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """'m x k x n' triples, comma-separated; a clear error for anything else."""
    out = []
    for item in text.split(","):
        parts = item.strip().lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise SystemExit(f"dot_sweep: bad shape {item!r}: want m x k x n, e.g. 64x1024x1024")
        m, k, n = (int(p) for p in parts)
        out.append((m, k, n))
    return out


def route(prog: Any) -> str:
    """The library route of the program's dot (`library blas`, `library jit gemm`, ...)."""
    for line in prog._exe.explain().splitlines():
        if "library " in line:
            return line.split("library ", 1)[1].strip()
    return "fused"


def sweep_one(m: int, k: int, n: int, dtype: Any, reps: int, burst: int) -> dict[str, Any]:
    import jax

    import xlapy

    rng = np.random.default_rng(m * 31 + k * 7 + n)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    lowered = jax.jit(lambda x, y: x @ y).lower(a, b)
    jc = lowered.compile()
    prog = xlapy.compile(lowered.as_text(), backend="cpu")
    ja, jb = jax.device_put(a), jax.device_put(b)
    got, want = np.asarray(prog(a, b)), np.asarray(jc(ja, jb))
    err = float(np.abs(got - want).max() / (np.abs(want).max() + 1e-30))
    rounds = reps or max(10, min(40, int(2e9 / (2 * m * k * n))))
    t = round_robin({"xlapy": lambda: prog(a, b),
                     "xla": lambda: jax.block_until_ready(jc(ja, jb))}, rounds, burst)
    return {"xlapy": min(t["xlapy"]), "xla": min(t["xla"]), "route": route(prog),
            "fallbacks": len(prog._exe.fallbacks()), "err": err}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=SHAPES, help="m x k x n, comma-separated")
    ap.add_argument("--dtype", choices=("f32", "f64"), default="f32")
    ap.add_argument("--reps", type=int, default=0, help="rounds (default: by size, 10-40)")
    ap.add_argument("--burst", type=int, default=3, help="calls per side per round")
    args = ap.parse_args(argv)
    shapes = parse_shapes(args.shapes)
    if args.dtype == "f64":
        import jax

        jax.config.update("jax_enable_x64", True)
    dtype = np.float64 if args.dtype == "f64" else np.float32
    print(env.header())
    print(f"{'m x k x n':>18} | {'xlapy ms':>9} | {'XLA ms':>9} | ratio | {'route':<18} | "
          f"fallbacks | max err")
    for m, k, n in shapes:
        r = sweep_one(m, k, n, dtype, args.reps, args.burst)
        ratio = r["xlapy"] / r["xla"]
        mark = " <" if ratio > 1.1 else ""
        print(f"{m:>5}x{k:>5}x{n:>5} | {1e3 * r['xlapy']:9.3f} | {1e3 * r['xla']:9.3f} | "
              f"{ratio:5.2f} | {r['route']:<18} | {r['fallbacks']:9d} | {r['err']:.1e}{mark}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
