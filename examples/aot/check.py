"""Check the AOT example: write seeded inputs, run the C program (`demo`, built by
`make aot-example`), compare its outputs with the interpreter's, and time the JIT (cpu
backend, one thread and the default threads) on the same programs.

    python examples/aot/check.py BUILD_DIR [REPS]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import xlapy

HERE = Path(__file__).parent
PROGRAMS = ("mlp", "cnn")


def inputs(name: str) -> list[np.ndarray]:
    rng = np.random.default_rng(18)
    prog = xlapy.compile(HERE / f"{name}.mlir", backend="interpreter")
    comp = prog.module.entry_computation()
    out = []
    for p in comp.parameters:
        fan_in = int(np.prod(p.shape.dimensions[:-1])) or 1
        a = rng.standard_normal(p.shape.dimensions).astype(np.float32)
        out.append(a if p.parameter_number == 0 else (a / np.sqrt(fan_in)).astype(np.float32))
    return out


def jit_ms(name: str, args: list[np.ndarray], reps: int, threads: int | None) -> float:
    opts = {"num_threads": threads} if threads else None
    prog = xlapy.compile(HERE / f"{name}.mlir", backend="cpu", options=opts)
    prog(*args)
    best = float("inf")  # the fastest call, as the C program reports
    for _ in range(reps):
        t0 = time.perf_counter()
        prog(*args)
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def main(build: Path, reps: int) -> int:
    args = {n: inputs(n) for n in PROGRAMS}
    for n, xs in args.items():
        for k, a in enumerate(xs):
            (build / f"{n}.arg{k}").write_bytes(a.tobytes())
    res = subprocess.run([str(build / "demo"), str(build), str(reps)], check=True,
                         capture_output=True, text=True)
    print(res.stdout, end="")
    bad = 0
    for n, xs in args.items():
        ref = np.asarray(xlapy.compile(HERE / f"{n}.mlir", backend="interpreter")(*xs))
        got = np.frombuffer((build / f"{n}.out").read_bytes(), np.float32).reshape(ref.shape)
        err = float(np.max(np.abs(got - ref)))
        ok = np.allclose(got, ref, rtol=1e-4, atol=1e-5)
        bad += not ok
        size = (build / f"{n}.o").stat().st_size
        print(f"{n}: object {size} bytes; max |C - interpreter| = {err:.2e} "
              f"({'ok' if ok else 'MISMATCH'}); JIT {jit_ms(n, xs, reps, 1):.3f} ms per call "
              f"on 1 thread, {jit_ms(n, xs, reps, None):.3f} ms on the default threads")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 20))
