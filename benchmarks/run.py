"""xlapy-cpu vs NumPy vs XLA (via jax) on the reference workloads, interleaved in one process.

    python benchmarks/run.py [--reps 15] [--only gelu_chain,softmax] [--small]

For each workload (benchmarks/workloads, issue 6 sizes) the three implementations run in
round-robin order, one call each per round, so machine noise hits them alike. Printed per
workload: min and median ms of each, the ratios xlapy/XLA and NumPy/XLA (by min), and the
compile time of xlapy's cpu backend (cold: no compile cache) and of XLA (jit lower+compile),
each the best of three cold compiles.
Results are checked against XLA once before timing (rtol 1e-3: polynomial math differs).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import env  # noqa: E402
from benchmarks.timing import round_robin  # noqa: E402

env.prepare()  # first, before OpenBLAS loads: drops forced kernels (re-exec), benchmarks/env.py

# NumPy's OpenBLAS threads busy-wait ~0.1 s (2^28 cycles) after every call, stealing a core
# from whichever runner comes next in the round-robin (measured: xlapy's MLP 1.5 -> 3.8 ms,
# attention's median 3.3 -> 6.3 ms). Let them sleep right away (set before numpy loads it).
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

os.environ.setdefault("XLAPY_CACHE_DIR", "")  # cold compiles: time the real thing

from benchmarks.workloads import WORKLOADS  # noqa: E402

SQ2PI = math.sqrt(2 / math.pi)
#: Cold compiles per side per workload (the best is reported).
COMPILES = 3


# ---- NumPy and jax versions of each workload ------------------------------------------------
def np_gelu(x: np.ndarray) -> np.ndarray:
    return np.float32(0.5) * x * (np.float32(1) + np.tanh(
        np.float32(SQ2PI) * (x + np.float32(0.044715) * (x * x * x))))


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_layernorm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> np.ndarray:
    xc = x - x.mean(axis=1, keepdims=True)
    var = (xc * xc).mean(axis=1, keepdims=True)
    return xc / np.sqrt(var + np.float32(1e-5)) * scale + bias


def np_conv_same(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """3x3 SAME convolution NCHW/OIHW as im2col + GEMM."""
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # n c h w 3 3
    return np.einsum("nchwij,ocij->nohw", cols, w, optimize=True)


def numpy_fn(name: str, iters: int = 1000) -> Callable[..., Any]:
    if name == "gelu_chain":
        def f(x: np.ndarray) -> np.ndarray:
            for _ in range(7):
                x = np_gelu(x)
            return x
        return f
    if name == "softmax":
        return np_softmax
    if name == "layernorm":
        return np_layernorm
    if name == "mlp":
        def mlp(x: np.ndarray, *wb: np.ndarray) -> np.ndarray:
            for i in range(0, len(wb), 2):
                x = x @ wb[i] + wb[i + 1]
                if i + 2 < len(wb):
                    x = np.maximum(x, np.float32(0))
            return x
        return mlp
    if name == "cnn":
        def cnn(x: np.ndarray, *wb: np.ndarray) -> np.ndarray:
            for i in range(0, len(wb), 2):
                x = np.maximum(np_conv_same(x, wb[i]) + wb[i + 1][None, :, None, None],
                               np.float32(0))
            return x
        return cnn
    if name == "attention":
        def att(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
            s = (q @ k.T) * np.float32(1 / math.sqrt(q.shape[1]))
            return np_softmax(s) @ v
        return att
    if name == "fori_loop":
        def loop(x: np.ndarray) -> np.ndarray:
            a, c = np.float32(0.999), np.float32(1)
            for _ in range(iters):
                x = x * a + c
            return x
        return loop
    if name == "big_sum":
        return lambda x: np.add.reduce(x, dtype=np.float32)
    if name == "tiny_ops":
        def tiny(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            acc = x
            fs = [np.add, np.multiply, np.subtract, np.maximum]
            for i in range(200):
                acc = fs[i % 4](acc, y if i % 3 else x)
            return acc
        return tiny
    if name == "x_plus_xt":
        return lambda x: x + x.T
    raise KeyError(name)


def jax_fn(name: str, iters: int = 1000) -> Callable[..., Any]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    def gelu(x: Any) -> Any:
        return 0.5 * x * (1 + jnp.tanh(SQ2PI * (x + 0.044715 * (x * x * x))))

    def softmax(x: Any) -> Any:
        e = jnp.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    if name == "gelu_chain":
        def f(x: Any) -> Any:
            for _ in range(7):
                x = gelu(x)
            return x
    elif name == "softmax":
        f = softmax
    elif name == "layernorm":
        def f(x: Any, scale: Any, bias: Any) -> Any:
            xc = x - x.mean(axis=1, keepdims=True)
            var = (xc * xc).mean(axis=1, keepdims=True)
            return xc * lax.rsqrt(var + 1e-5) * scale + bias
    elif name == "mlp":
        def f(x: Any, *wb: Any) -> Any:
            for i in range(0, len(wb), 2):
                x = x @ wb[i] + wb[i + 1]
                if i + 2 < len(wb):
                    x = jnp.maximum(x, 0.0)
            return x
    elif name == "cnn":
        def f(x: Any, *wb: Any) -> Any:
            for i in range(0, len(wb), 2):
                y = lax.conv_general_dilated(x, wb[i], (1, 1), ((1, 1), (1, 1)))
                x = jnp.maximum(y + wb[i + 1][None, :, None, None], 0.0)
            return x
    elif name == "attention":
        def f(q: Any, k: Any, v: Any) -> Any:
            return softmax((q @ k.T) * (1 / math.sqrt(q.shape[1]))) @ v
    elif name == "fori_loop":
        def f(x: Any) -> Any:
            return lax.fori_loop(0, iters, lambda i, x: x * 0.999 + 1.0, x)
    elif name == "big_sum":
        def f(x: Any) -> Any:
            return jnp.sum(x)
    elif name == "tiny_ops":
        def f(x: Any, y: Any) -> Any:
            acc = x
            fs = [jnp.add, jnp.multiply, jnp.subtract, jnp.maximum]
            for i in range(200):
                acc = fs[i % 4](acc, y if i % 3 else x)
            return acc
    elif name == "x_plus_xt":
        def f(x: Any) -> Any:
            return x + x.T
    else:
        raise KeyError(name)
    return jax.jit(f)


# ---- inputs ----------------------------------------------------------------------------------
def make_inputs(comp: Any, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for p in comp.module.entry_computation().parameters:
        dims = p.shape.dimensions
        scale = 1.0 if len(dims) != 2 or "w" not in p.name else 1 / math.sqrt(dims[0])
        out.append((rng.standard_normal(dims) * scale).astype(np.float32))
    return out


# ---- timing ----------------------------------------------------------------------------------
def block(v: Any) -> Any:
    if hasattr(v, "block_until_ready"):
        v.block_until_ready()
    return v


def bench_one(name: str, reps: int, small: bool) -> dict[str, Any]:
    import jax

    import xlapy
    from xlapy.backends.cpu import cache

    build, small_sizes = WORKLOADS[name]
    comp = build(**small_sizes) if small else build()
    args = make_inputs(comp)
    iters = small_sizes.get("iterations", 1000) if small else 1000
    jargs = [jax.device_put(a) for a in args]
    # Compile times: the best of COMPILES cold compiles on each side, alternating (one cold
    # compile is noisy on a shared machine). xlapy's in-memory cache is cleared before each;
    # jax caches by function, so each XLA compile gets a fresh jitted function.
    t_xla_py = t_jax = math.inf
    for _ in range(COMPILES):
        cache.clear_memory()
        t0 = time.perf_counter()
        prog = xlapy.compile(comp, backend="cpu")
        t_xla_py = min(t_xla_py, time.perf_counter() - t0)
        jf = jax_fn(name, iters)
        t0 = time.perf_counter()
        jc = jf.lower(*jargs).compile()
        t_jax = min(t_jax, time.perf_counter() - t0)
    npf = numpy_fn(name, iters)
    # Correctness once (also warms everything up).
    ref = np.asarray(block(jc(*jargs)))
    got = np.asarray(prog(*args))
    ok = bool(np.allclose(got, ref, rtol=1e-3, atol=1e-3 * (1 + float(np.abs(ref).max()))))
    npr = np.asarray(npf(*args))
    ok_np = bool(np.allclose(npr, ref, rtol=1e-3, atol=1e-3 * (1 + float(np.abs(ref).max()))))
    runners: dict[str, Callable[[], Any]] = {
        "xlapy": lambda: prog(*args),
        "numpy": lambda: npf(*args),
        "xla": lambda: block(jc(*jargs)),
    }
    times = round_robin(runners, reps)
    return {"name": name, "times": times, "compile_xlapy": t_xla_py, "compile_xla": t_jax,
            "ok": ok, "ok_np": ok_np}


def warm_up() -> None:
    """One small compile on each side first, so no workload's compile time carries the
    one-time start-up of either compiler (LLVM and jax initialization, imports)."""
    import jax
    import jax.numpy as jnp

    import xlapy

    build, small_sizes = WORKLOADS["tiny_ops"]
    xlapy.compile(build(**small_sizes), backend="cpu")
    jax.jit(lambda x: jnp.tanh(x) + 1).lower(np.zeros(4, np.float32)).compile()


def fmt_table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'workload':11s} | {'xlapy min/med ms':>17s} | {'numpy min/med ms':>17s} | "
            f"{'XLA min/med ms':>17s} | {'xlapy/XLA':>9s} | {'numpy/XLA':>9s} | "
            f"{'compile xlapy/XLA ms':>20s} | ok")
    lines = [head, "-" * len(head)]
    for r in rows:
        t = r["times"]
        mm = {k: (min(v) * 1e3, statistics.median(v) * 1e3) for k, v in t.items()}
        cells = " | ".join(f"{mm[k][0]:8.3f}/{mm[k][1]:8.3f}" for k in ("xlapy", "numpy", "xla"))
        rx = mm["xlapy"][0] / mm["xla"][0]
        rn = mm["numpy"][0] / mm["xla"][0]
        comp = f"{r['compile_xlapy'] * 1e3:8.1f}/{r['compile_xla'] * 1e3:8.1f}"
        ok = ("yes" if r["ok"] else "NO") + ("" if r["ok_np"] else " (numpy differs)")
        lines.append(f"{r['name']:11s} | {cells} | {rx:9.3f} | {rn:9.3f} | {comp:>20s} | {ok}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--only", default="", help="comma-separated workload names")
    p.add_argument("--small", action="store_true", help="the workloads' small sizes")
    a = p.parse_args(argv)
    print(env.header(), flush=True)
    import jax

    jax.config.update("jax_platforms", "cpu")
    names = [n for n in a.only.split(",") if n] or list(WORKLOADS)
    warm_up()
    rows = []
    for n in names:
        rows.append(bench_one(n, a.reps, a.small))
        print(f"  done {n}", file=sys.stderr, flush=True)
    print(fmt_table(rows))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
