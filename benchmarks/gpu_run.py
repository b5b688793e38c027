"""xlapy's gpu backend vs XLA:GPU (jax with CUDA) on the reference workloads, in one process.

    python benchmarks/gpu_run.py [--reps 15] [--only gelu_chain,softmax] [--small]

Needs an NVIDIA GPU with its driver, cuBLAS (`pip install 'xlapy[gpu]'`) and jax with CUDA
(`pip install 'jax[cuda12]'`); without them it says which is missing and exits 2. Both sides
keep inputs and results on the device (xlapy: `run_on_device` with device arrays, which
synchronizes before returning; jax: `block_until_ready`), one call each per round (round
robin, as benchmarks/run.py). Printed per workload: min and median ms of each, xlapy/XLA by
min, cold compile times (xlapy: plan + PTX; the driver's PTX JIT is in the first call, not
timed), the ops xlapy runs on the host, and a check against XLA (rtol 1e-3).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.run import WORKLOADS, jax_fn, make_inputs  # noqa: E402
from benchmarks.timing import round_robin  # noqa: E402


def _gpu_or_why() -> tuple[Any, str]:
    from xlapy.backends.gpu import driver

    ok, why = driver.available()
    if not ok:
        return None, why
    try:
        import jax

        return jax.devices("gpu")[0], ""
    except Exception as e:  # noqa: BLE001  (jax raises RuntimeError without a CUDA plugin)
        return None, f"jax has no GPU backend ({e}): pip install 'jax[cuda12]'"


def bench_one(name: str, reps: int, small: bool, gpu: Any) -> dict[str, Any]:
    import jax
    import numpy as np

    import xlapy
    from xlapy.backends.gpu import driver, runtime

    build, small_sizes = WORKLOADS[name]
    comp = build(**small_sizes) if small else build()
    iters = small_sizes.get("iterations", 1000) if small else 1000
    args = make_inputs(comp)
    t0 = time.perf_counter()
    exe = xlapy.compile(comp, backend="gpu")._exe
    t_xlapy = time.perf_counter() - t0
    dev = driver.device()
    dargs = [runtime.DeviceArray.from_host(dev, a) for a in args]
    jargs = [jax.device_put(a, gpu) for a in args]
    jf = jax_fn(name, iters)
    t0 = time.perf_counter()
    jc = jf.lower(*jargs).compile()
    t_xla = time.perf_counter() - t0
    ref = np.asarray(jc(*jargs))
    got = runtime.to_host(exe.run_on_device(dargs))
    ok = bool(np.allclose(got, ref, rtol=1e-3, atol=1e-3 * (1 + float(np.abs(ref).max()))))
    times = round_robin({"xlapy": lambda: exe.run_on_device(dargs),
                         "xla": lambda: jc(*jargs).block_until_ready()}, reps)
    return {"name": name, "times": times, "compile_xlapy": t_xlapy, "compile_xla": t_xla,
            "ok": ok, "host": sorted({op for _, op in exe.host_ops()})}


def fmt(row: dict[str, Any]) -> str:
    t = {k: (min(v) * 1e3, statistics.median(v) * 1e3) for k, v in row["times"].items()}
    host = ",".join(row["host"]) or "-"
    return (f"{row['name']:16s} xlapy {t['xlapy'][0]:9.3f} / {t['xlapy'][1]:9.3f} ms   "
            f"xla {t['xla'][0]:9.3f} / {t['xla'][1]:9.3f} ms   "
            f"ratio {t['xlapy'][0] / t['xla'][0]:6.2f}   compile {row['compile_xlapy']:.2f} s"
            f" / {row['compile_xla']:.2f} s   {'ok' if row['ok'] else 'MISMATCH'}   "
            f"host: {host}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--only", default="", help="comma-separated workload names")
    p.add_argument("--small", action="store_true", help="the workloads' small sizes")
    args = p.parse_args(argv)
    gpu, why = _gpu_or_why()
    if gpu is None:
        print(f"benchmarks/gpu_run.py needs a GPU: {why}")
        return 2
    names = [n for n in args.only.split(",") if n] or list(WORKLOADS)
    print(f"device: {gpu}; min / median per call, xlapy gpu vs XLA:GPU")
    for name in names:
        print(fmt(bench_one(name, args.reps, args.small, gpu)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
