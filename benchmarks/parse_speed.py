"""Parse speed of the StableHLO front door: a ~1 MB module with 10k varied ops.

A benchmark, not a test: `python benchmarks/parse_speed.py [--ops N] [--profile]`. Prints the
module size, parse-only time (text -> nodes, target < 1 s) and parse+import time (-> HLO IR).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import env  # noqa: E402

env.prepare()  # first, before OpenBLAS loads: drops forced kernels (re-exec), benchmarks/env.py

from xlapy.stablehlo.importer import import_module  # noqa: E402
from xlapy.stablehlo.parser import Parser  # noqa: E402

T = "tensor<8x16xf32>"
#: Op templates cycled through; `{p}` / `{q}` are earlier values of type T, `{i}` the index.
TEMPLATES = [
    "%v{i} = stablehlo.add {p}, {q} : " + T,
    "%v{i} = stablehlo.multiply {p}, {q} : " + T,
    '%v{i} = "stablehlo.subtract"({p}, {q}) : (' + T + ", " + T + ") -> " + T,
    "%v{i} = stablehlo.maximum {p}, {q} : " + T + ' loc("model/layer{i}/max"(#loc3))',
    "%c{i} = stablehlo.compare  GT, {p}, {q},  FLOAT : (" + T + ", " + T +
    ") -> tensor<8x16xi1>\n    %v{i} = stablehlo.select %c{i}, {p}, {q} : tensor<8x16xi1>, " + T,
    "%k{i} = stablehlo.constant dense<[[1.000000e+00, 2.500000e+00, -3.000000e+00, 4.000000e+00,"
    " 5.000000e+00, 6.000000e+00, 7.000000e+00, 8.000000e+00, 9.000000e+00, 1.000000e+01,"
    " 1.100000e+01, 1.200000e+01, 1.300000e+01, 1.400000e+01, 1.500000e+01, 1.600000e+01]]> :"
    " tensor<1x16xf32>\n    %b{i} = stablehlo.broadcast_in_dim %k{i}, dims = [0, 1] :"
    " (tensor<1x16xf32>) -> " + T + "\n    %v{i} = stablehlo.add {p}, %b{i} : " + T,
    "%s{i} = stablehlo.reduce({p} init: %zero) applies stablehlo.add across dimensions = [1] :"
    " (" + T + ", tensor<f32>) -> tensor<8xf32>\n    %v{i} = stablehlo.broadcast_in_dim %s{i},"
    " dims = [0] : (tensor<8xf32>) -> " + T,
    "%t{i} = stablehlo.transpose {p}, dims = [1, 0] : (" + T + ") -> tensor<16x8xf32>\n"
    "    %v{i} = stablehlo.dot_general %t{i}, {q}, contracting_dims = [1] x [0], precision ="
    " [DEFAULT, DEFAULT] : (tensor<16x8xf32>, " + T + ") -> tensor<16x16xf32>\n"
    "    %w{i} = stablehlo.slice %v{i} [0:8, 0:16] : (tensor<16x16xf32>) -> " + T,
    "%v{i} = stablehlo.tanh {p} : " + T,
    "%e{i} = stablehlo.exponential {p} : " + T + "\n    %v{i} = stablehlo.divide %e{i}, {q} : "
    + T,
]


def make_module(n_ops: int) -> str:
    """A module of about `n_ops` ops; every value is used, the result depends on all."""
    lines = ["#loc3 = loc(\"bench.py\":1:1)",
             "module @bench attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 :"
             " i32} {",
             f"  func.func public @main(%arg0: {T} {{mhlo.sharding = \"{{replicated}}\"}}, "
             f"%arg1: {T}) -> ({T} {{jax.result_info = \"result\"}}) {{",
             "    %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>"]
    vals = ["%arg0", "%arg1"]
    count, i = 0, 0
    while count < n_ops:
        tpl = TEMPLATES[i % len(TEMPLATES)]
        text = tpl.format(i=i, p=vals[-1], q=vals[-2])
        lines.append("    " + text)
        count += text.count("\n") + 1
        last = text.split("\n")[-1].strip().split(" ")[0]
        vals.append(last)
        i += 1
    lines.append(f"    return {vals[-1]} : {T}")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ops", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    print(env.header())
    text = make_module(args.ops)
    n_ops = sum(line.count(" = stablehlo.") + line.count(' = "stablehlo.')
                for line in text.splitlines())
    print(f"module: {len(text) / 1e6:.2f} MB, {n_ops} ops, {text.count(chr(10))} lines")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        Parser(text, "bench.mlir").parse_module()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)
    parse_t, total_t = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        p = Parser(text, "bench.mlir")
        node = p.parse_module()
        t1 = time.perf_counter()
        import_module(node, p.lex)
        t2 = time.perf_counter()
        parse_t.append(t1 - t0)
        total_t.append(t2 - t0)
    print(f"parse only:     best {min(parse_t):.3f} s  (target < 1 s)")
    print(f"parse + import: best {min(total_t):.3f} s")


if __name__ == "__main__":
    main()
