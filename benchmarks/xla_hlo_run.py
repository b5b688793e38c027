"""XLA's own optimized HLO on xlapy's cpu backend vs the same program from StableHLO (issue 20),
and both vs XLA, interleaved in one process.

    python benchmarks/xla_hlo_run.py [--reps 10] [--only mlp,transformer] [--small]

Each workload of benchmarks/jax_workloads.py, plus training steps (an MLP with an Adam
update, a small ResNet with SGD), is lowered with `jax.jit(f).lower(*args)`; xlapy compiles
its StableHLO (`as_text()`) and XLA's optimized HLO (`lowered.compile().as_text()`: XLA's
fusions, layouts and schedule) with the cpu backend. Both results are checked against XLA's,
the interpreter fallbacks of each are counted, then the three run round-robin. Printed per
workload: min ms of each, optimized HLO / StableHLO (target <= 1.1) and optimized HLO / XLA.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import env  # noqa: E402
from benchmarks.timing import round_robin  # noqa: E402

env.prepare()  # first, before OpenBLAS loads (benchmarks/env.py)
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # see run.py: idle BLAS threads spin

import numpy as np  # noqa: E402

from benchmarks.jax_run import cpu_flags, run_workloads, workload_args  # noqa: E402
from benchmarks.jax_workloads import JAX_WORKLOADS, Case, _normal, _rng, rel_error  # noqa: E402


def adam_step(small: bool) -> Case:
    """One Adam step of a 3-layer MLP classifier (batch 256, 1024 wide): value_and_grad of a
    softmax cross-entropy, then the moment and parameter updates."""
    import jax
    import jax.numpy as jnp

    b, d, c = (8, 16, 4) if small else (256, 1024, 10)
    rng = _rng()
    shapes = [(d, d), (d,), (d, d), (d,), (d, c), (c,)]
    params = [_normal(rng, s, 1 / math.sqrt(s[0])) for s in shapes]
    moments = [np.zeros(s, np.float32) for s in shapes] * 2
    x = _normal(rng, (b, d))
    y = rng.integers(0, c, b).astype(np.int32)
    n = len(shapes)

    def loss(ps: Any, x: Any, y: Any) -> Any:
        h = x
        for i in range(0, n - 2, 2):
            h = jax.nn.relu(h @ ps[i] + ps[i + 1])
        logits = h @ ps[-2] + ps[-1]
        return -jnp.mean(jnp.sum(jax.nn.one_hot(y, c) * jax.nn.log_softmax(logits), -1))

    def f(*a: Any) -> Any:
        ps, ms, vs, x, y = a[:n], a[n:2 * n], a[2 * n:3 * n], a[-2], a[-1]
        val, gs = jax.value_and_grad(loss)(ps, x, y)
        ms = [0.9 * m + 0.1 * g for m, g in zip(ms, gs)]
        vs = [0.999 * v + 0.001 * g * g for v, g in zip(vs, gs)]
        new = [p - 1e-3 * m / (jnp.sqrt(v) + 1e-8) for p, m, v in zip(ps, ms, vs)]
        return (val, *new, *ms, *vs)

    flops = 3 * 2.0 * b * (2 * d * d + d * c)
    return Case(f, (*params, *moments, x, y), flops=flops, tol=1e-4)


def resnet_step(small: bool) -> Case:
    """One SGD step of a small ResNet (NHWC 32x32, 16 channels, batch 16): a stem conv, two
    residual blocks of two 3x3 convs with a per-channel scale and bias, global average
    pooling, a dense softmax classifier; value_and_grad, then the parameter update."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    b, hw, ch, c = (2, 8, 4, 3) if small else (16, 32, 16, 10)
    rng = _rng()
    convs = [(3, 3, 3, ch)] + [(3, 3, ch, ch)] * 4
    params = [_normal(rng, s, 1 / math.sqrt(9 * s[2])) for s in convs]
    params += [np.ones(ch, np.float32), np.zeros(ch, np.float32)] * 4
    params += [_normal(rng, (ch, c), 1 / math.sqrt(ch)), np.zeros(c, np.float32)]
    x = _normal(rng, (b, hw, hw, 3))
    y = rng.integers(0, c, b).astype(np.int32)
    n = len(params)

    def conv(h: Any, w: Any) -> Any:
        return lax.conv_general_dilated(h, w, (1, 1), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def loss(ps: Any, x: Any, y: Any) -> Any:
        h = jax.nn.relu(conv(x, ps[0]))
        for blk in range(2):
            w1, w2 = ps[1 + 2 * blk], ps[2 + 2 * blk]
            s1, b1, s2, b2 = ps[5 + 4 * blk: 9 + 4 * blk]
            r = jax.nn.relu(conv(h, w1) * s1 + b1)
            h = jax.nn.relu(h + conv(r, w2) * s2 + b2)
        logits = jnp.mean(h, (1, 2)) @ ps[-2] + ps[-1]
        return -jnp.mean(jnp.sum(jax.nn.one_hot(y, c) * jax.nn.log_softmax(logits), -1))

    def f(*a: Any) -> Any:
        val, gs = jax.value_and_grad(loss)(list(a[:n]), a[n], a[n + 1])
        return (val, *[p - 0.05 * g for p, g in zip(a[:n], gs)])

    flops = 3 * 2.0 * b * hw * hw * 9 * (3 * ch + 4 * ch * ch)
    return Case(f, (*params, x, y), flops=flops, tol=1e-4)


WORKLOADS = {**JAX_WORKLOADS, "adam_step": adam_step, "resnet_step": resnet_step}


def bench_one(name: str, reps: int, small: bool, burst: int = 1) -> dict[str, Any]:
    import jax

    import xlapy
    from xlapy.backends.cpu import cache

    case = WORKLOADS[name](small)
    row: dict[str, Any] = {"name": name, "times": None, "error": None}
    lowered = jax.jit(case.fn).lower(*case.args)
    jc = lowered.compile()
    texts = {"stablehlo": lowered.as_text(), "optimized": jc.as_text()}
    jargs = [jax.device_put(a) for a in case.args]

    def run_xla() -> Any:
        return jax.block_until_ready(jc(*jargs))

    expected = run_xla()
    runners: dict[str, Any] = {}
    row["fallbacks"], row["rel"] = {}, {}
    for way, text in texts.items():
        cache.clear_memory()
        try:
            prog = xlapy.compile(text, backend="cpu")
            got = prog(*case.args)
        except Exception as e:  # reported; the other workloads still run
            row["error"] = f"{way}: {type(e).__name__}: {str(e)[:200]}"
            return row
        row["fallbacks"][way] = list(prog._exe.fallbacks())
        row["rel"][way] = rel_error(got, expected)
        runners[way] = (lambda p: lambda: p(*case.args))(prog)
    row["ok"] = all(r <= case.tol for r in row["rel"].values())
    runners["xla"] = run_xla
    row["times"] = round_robin(runners, reps, burst)
    return row


def fmt_table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'workload':15s} | {'StableHLO ms':>12s} | {'opt. HLO ms':>11s} | {'XLA ms':>9s} | "
            f"{'opt/StableHLO':>13s} | {'opt/XLA':>7s} | {'max rel err':>11s} | ok | "
            "fallbacks StableHLO/opt")
    lines = [head, "-" * len(head)]
    for r in rows:
        if r["times"] is None:
            lines.append(f"{r['name']:15s} | FAILED {r['error']}")
            continue
        t = {k: min(v) for k, v in r["times"].items()}
        fb = "/".join(str(len(r["fallbacks"][w])) for w in ("stablehlo", "optimized"))
        lines.append(
            f"{r['name']:15s} | {t['stablehlo'] * 1e3:12.3f} | {t['optimized'] * 1e3:11.3f} | "
            f"{t['xla'] * 1e3:9.3f} | {t['optimized'] / t['stablehlo']:13.3f} | "
            f"{t['optimized'] / t['xla']:7.3f} | {max(r['rel'].values()):11.2e} | "
            f"{'yes' if r['ok'] else 'NO '} | {fb}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    a, names = workload_args(__doc__ or "", WORKLOADS, argv)
    print(env.header(), flush=True)
    print(f"cpu flags: {cpu_flags()}", flush=True)
    print(f"load average: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    import jax

    jax.config.update("jax_platforms", "cpu")
    rows = run_workloads(bench_one, names, a)
    print(fmt_table(rows))
    for r in rows:
        for way, fbs in (r.get("fallbacks") or {}).items():
            for instr, opcode in fbs:
                print(f"  FALLBACK {r['name']} ({way}): {opcode} ({instr})")
    return 0 if all(r["times"] is not None and r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
