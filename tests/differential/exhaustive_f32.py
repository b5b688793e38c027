"""The cpu backend's f32 unary functions over all 2^32 f32 inputs (issue 15): max ulp error
against the float64 reference rounded once to f32.

    nice -n 19 python -m tests.differential.exhaustive_f32 [--only sine,tan] [--stride K]
        [--chunk-bits B] [--denormal ieee|ftz]

Functions and references are test_ulp_table.py's (numpy / scipy in float64, then rounded:
float64 carries 29 more bits, so the rounding is correct save for rare ties). Every bit
pattern runs, in chunks of 2^B values (one compiled executable per function, shape 2^B):
every sign, binade, subnormal, inf and NaN. `--stride K` runs every K-th chunk only (a quick
sample). The `ieee` denormal mode (default) measures IEEE accuracy; `ftz` flushes subnormal
inputs (DAZ) and results in the reference as XLA CPU does. Not a CI test: minutes per
function. Printed per function: max ulp, an input where it is reached, how many results are
more than 1 ulp off, and non-finite mismatches (an inf or NaN where the reference has
another value), with an example.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from tests.unit.backends.cpu.test_ulp_table import BINARY, FUNCTIONS
from tests.unit.backends.cpu.util import module, op
from xlapy import denormal
from xlapy.backends.cpu import CpuBackend
from xlapy.types import ElementType as ET
from xlapy.types import Shape

_TINY = np.float32(np.finfo(np.float32).tiny)
#: Functions whose reference is NaN outside [lo, hi] (and slow there: scipy's erfinv takes
#: 3 us per out-of-domain value): evaluated inside only.
_DOMAIN = {"chlo.erf_inv": (-1.0, 1.0)}


def _ordinal(x: np.ndarray) -> np.ndarray:
    """f32 values as int64 in float order (-0 and +0 both 0)."""
    i = x.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def _flush(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < _TINY, np.copysign(np.float32(0), x), x)


def measure(name: str, chunk_bits: int = 24, stride: int = 1, mode: str = denormal.IEEE
            ) -> dict[str, object]:
    """Max ulp and mismatch counts of the cpu backend's `name` over every stride-th chunk."""
    ref_fn = FUNCTIONS[name][0]
    n = 1 << chunk_bits
    mod = module([Shape.array(ET.F32, (n,))], lambda c, p: op(c, name, p))
    exe = CpuBackend().compile(mod, {"denormal": mode})
    worst, worst_x, over1, nonfinite, nonfinite_x = 0, None, 0, 0, None
    base = np.arange(n, dtype=np.uint32)
    for k in range(0, 1 << (32 - chunk_bits), stride):
        x = (base + np.uint32(k << chunk_bits)).view(np.float32)
        with np.errstate(all="ignore"):
            got = np.asarray(exe.run([x]))
            xin = (_flush(x) if mode == denormal.FTZ else x).astype(np.float64)
            if name in _DOMAIN:
                lo, hi = _DOMAIN[name]
                inside = (xin >= lo) & (xin <= hi)
                ref = np.full(n, np.nan, np.float32)
                ref[inside] = np.asarray(ref_fn(xin[inside])).astype(np.float32)
            else:
                ref = np.asarray(ref_fn(xin)).astype(np.float32)
        if mode == denormal.FTZ:
            ref = _flush(ref)
        ne = np.flatnonzero(got.view(np.int32) != ref.view(np.int32))  # the rest: 0 ulp
        g, r, xs = got[ne], ref[ne], x[ne]
        nan_g, nan_r = np.isnan(g), np.isnan(r)
        special = nan_g | nan_r | np.isinf(g) | np.isinf(r)
        bad = special & ~(nan_g & nan_r)
        if bad.any():
            nonfinite += int(bad.sum())
            nonfinite_x = nonfinite_x or (float(xs[bad][0]), float(g[bad][0]),
                                          float(r[bad][0]))
        d = np.where(special, 0, np.abs(_ordinal(g) - _ordinal(r)))
        over1 += int((d > 1).sum())
        i = int(np.argmax(d)) if d.size else 0
        if d.size and d[i] > worst:
            worst, worst_x = int(d[i]), (float(xs[i]), float(g[i]), float(r[i]))
    return {"max": worst, "at": worst_x, "over1": over1, "nonfinite": nonfinite,
            "nonfinite_at": nonfinite_x}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="", help="comma-separated opcodes (default: all unary)")
    p.add_argument("--stride", type=int, default=1)
    p.add_argument("--chunk-bits", type=int, default=24)
    p.add_argument("--denormal", default=denormal.IEEE, choices=denormal.MODES)
    a = p.parse_args(argv)
    names = a.only.split(",") if a.only else [f for f in FUNCTIONS if f not in BINARY]
    share = "all 2^32 inputs" if a.stride == 1 else f"1/{a.stride} of the inputs"
    print(f"cpu f32 vs float64 rounded, {share}, denormal {a.denormal}")
    print("| function | max ulp | at x (got, ref) | > 1 ulp | non-finite mismatches | s |")
    print("|---|---|---|---|---|---|")
    for name in names:
        t0 = time.time()
        r = measure(name, a.chunk_bits, a.stride, a.denormal)
        nf = f"{r['nonfinite']}" + (f" e.g. {r['nonfinite_at']}" if r["nonfinite"] else "")
        print(f"| {name} | {r['max']} | {r['at']} | {r['over1']} | {nf} | "
              f"{time.time() - t0:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
