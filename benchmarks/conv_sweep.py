"""xlapy-cpu vs XLA on 2-D convolution layers of many shapes (JAX-lowered
`lax.conv_general_dilated`), interleaved in one process, to find the layers where the direct
convolution falls off a cliff:

    python benchmarks/conv_sweep.py [--only 0,5,6] [--reps N] [--burst B]

The layers (`LAYERS`): a ResNet stem, CIFAR's first layer, 1x1 layers, ResNet 3x3 layers from
56x56x64 down to 7x7x512, a 5x5, batch 1, depthwise, NCHW. Each row: xlapy and XLA min ms
(benchmarks/timing.round_robin), the ratio, both GFLOP/s, the route (`conv-direct`,
`conv-nchw-direct`), fallbacks and the max error relative to XLA's largest value. Ratios
over 1.1 are marked.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import env  # noqa: E402
from benchmarks.dot_sweep import route  # noqa: E402
from benchmarks.timing import round_robin  # noqa: E402

env.prepare()  # first, before OpenBLAS loads (benchmarks/env.py)

import numpy as np  # noqa: E402


@dataclass(frozen=True)
class Layer:
    """A square k x k convolution of n images h x w x c -> o features."""

    n: int
    hw: int
    c: int
    o: int
    k: int
    stride: int = 1
    padding: str = "SAME"
    groups: int = 1
    layout: str = "NHWC"

    def label(self) -> str:
        g = f" g{self.groups}" if self.groups > 1 else ""
        return (f"{self.n}x{self.hw}x{self.hw}x{self.c}->{self.o} {self.k}x{self.k}"
                f" s{self.stride} {self.padding}{g} {self.layout}")


LAYERS = (
    Layer(8, 224, 3, 64, 7, 2),                      # ResNet stem
    Layer(32, 32, 3, 32, 3),                         # CIFAR first layer
    Layer(32, 56, 64, 64, 1, padding="VALID"),       # 1x1
    Layer(32, 28, 128, 256, 1, 2, "VALID"),          # 1x1, stride 2
    Layer(16, 56, 64, 64, 3),                        # ResNet 3x3, stage 1
    Layer(16, 14, 256, 256, 3),                      # stage 3: small rows, 2.4 MB weights
    Layer(8, 7, 512, 512, 3),                        # stage 4: 7-pixel rows, 9.4 MB weights
    Layer(32, 32, 32, 32, 5),                        # 5x5
    Layer(1, 128, 32, 32, 3),                        # batch 1
    Layer(16, 56, 128, 128, 3, groups=128),          # depthwise
    Layer(16, 32, 3, 64, 3, layout="NCHW"),          # NCHW first layer
    Layer(16, 28, 64, 128, 3, 2, layout="NCHW"),     # NCHW, stride 2
)


def operands(layer: Layer) -> tuple[Any, np.ndarray, np.ndarray, float]:
    """(function, input, weights, flops) of a layer."""
    from jax import lax

    rng = np.random.default_rng(0)
    ci = layer.c // layer.groups
    if layer.layout == "NHWC":
        x = rng.standard_normal((layer.n, layer.hw, layer.hw, layer.c)).astype(np.float32)
        w = rng.standard_normal((layer.k, layer.k, ci, layer.o)).astype(np.float32)
        dn = ("NHWC", "HWIO", "NHWC")
    else:
        x = rng.standard_normal((layer.n, layer.c, layer.hw, layer.hw)).astype(np.float32)
        w = rng.standard_normal((layer.o, ci, layer.k, layer.k)).astype(np.float32)
        dn = ("NCHW", "OIHW", "NCHW")

    def f(a: Any, b: Any) -> Any:
        return lax.conv_general_dilated(a, b, (layer.stride,) * 2, layer.padding,
                                        dimension_numbers=dn,
                                        feature_group_count=layer.groups)

    out = -(-layer.hw // layer.stride) if layer.padding == "SAME" else \
        (layer.hw - layer.k) // layer.stride + 1
    flops = 2.0 * layer.n * out * out * layer.o * ci * layer.k * layer.k
    return f, x, w, flops


def sweep_one(layer: Layer, reps: int, burst: int) -> dict[str, Any]:
    import jax

    import xlapy

    f, x, w, flops = operands(layer)
    lowered = jax.jit(f).lower(x, w)
    jc = lowered.compile()
    prog = xlapy.compile(lowered.as_text(), backend="cpu")
    jx, jw = jax.device_put(x), jax.device_put(w)
    got, want = np.asarray(prog(x, w)), np.asarray(jc(jx, jw))
    err = float(np.abs(got - want).max() / (np.abs(want).max() + 1e-30))
    rounds = reps or max(5, min(30, int(3e9 / flops)))
    t = round_robin({"xlapy": lambda: prog(x, w),
                     "xla": lambda: jax.block_until_ready(jc(jx, jw))}, rounds, burst)
    return {"xlapy": min(t["xlapy"]), "xla": min(t["xla"]), "flops": flops,
            "route": route(prog), "fallbacks": len(prog._exe.fallbacks()), "err": err}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="layer indices, comma-separated")
    ap.add_argument("--reps", type=int, default=0, help="rounds (default: by size, 5-30)")
    ap.add_argument("--burst", type=int, default=3, help="calls per side per round")
    args = ap.parse_args(argv)
    try:
        only = {int(i) for i in args.only.split(",") if i.strip()}
    except ValueError:
        raise SystemExit(f"conv_sweep: --only wants layer indices, got {args.only!r}") from None
    if bad := sorted(i for i in only if not 0 <= i < len(LAYERS)):
        raise SystemExit(f"conv_sweep: no layer {bad[0]} (0-{len(LAYERS) - 1})")
    print(env.header())
    print(f"{'#':>2} {'layer':<38} | {'xlapy ms':>8} | {'XLA ms':>8} | ratio | "
          f"GFLOP/s xlapy/XLA | {'route':<16} | fallbacks | max err")
    for i, layer in enumerate(LAYERS):
        if only and i not in only:
            continue
        r = sweep_one(layer, args.reps, args.burst)
        ratio = r["xlapy"] / r["xla"]
        mark = " <" if ratio > 1.1 else ""
        rates = f"{r['flops'] / r['xlapy'] / 1e9:7.0f}/{r['flops'] / r['xla'] / 1e9:<7.0f}"
        print(f"{i:>2} {layer.label():<38} | {1e3 * r['xlapy']:8.3f} | {1e3 * r['xla']:8.3f} | "
              f"{ratio:5.2f} | {rates}   | {r['route']:<16} | {r['fallbacks']:9d} | "
              f"{r['err']:.1e}{mark}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
