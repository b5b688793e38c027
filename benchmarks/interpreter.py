"""Interpreter speed vs numpy doing the same work, in the same run.

Cases: exp(A @ B) with 1024x1024 f32 matrices, and a 3x3 SAME convolution of a 1x8x256x256
f32 input with 8 -> 8 features. The interpreter is timed end to end through the client
(argument transfer, evaluation, result transfer) on an executable compiled once.

    python benchmarks/interpreter.py [--repeat N]

Prints min/median milliseconds for both and the ratios of the minima and of the medians
(target: <= 1.5).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import env  # noqa: E402

env.prepare()  # first, before OpenBLAS loads: drops forced kernels (re-exec), benchmarks/env.py

import numpy as np  # noqa: E402

import xlapy  # noqa: E402
from xlapy.builder import ops  # noqa: E402
from xlapy.builder.xla_builder import XlaBuilder  # noqa: E402
from xlapy.types import ElementType, Shape  # noqa: E402


def timings(fns: list[Callable[[], Any]], repeat: int) -> list[list[float]]:
    """Milliseconds per call of each fn, interleaved so that all see the same machine load."""
    for fn in fns:
        fn()  # warm up (page faults, BLAS thread start)
    out: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, times in zip(fns, out):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return out


def matmul_exp(n: int) -> tuple[Callable[..., Any], Callable[..., Any], list[np.ndarray]]:
    b = XlaBuilder("matmul_exp")
    x = ops.Parameter(b, 0, Shape.array(ElementType.F32, (n, n)))
    y = ops.Parameter(b, 1, Shape.array(ElementType.F32, (n, n)))
    ops.Exp(ops.Dot(x, y))
    rng = np.random.default_rng(0)
    args = [(rng.standard_normal((n, n)) / n).astype(np.float32) for _ in range(2)]
    return b.build(), lambda a, c: np.exp(a @ c), args


def conv(size: int, feat: int) -> tuple[Callable[..., Any], Callable[..., Any], list[np.ndarray]]:
    b = XlaBuilder("conv")
    x = ops.Parameter(b, 0, Shape.array(ElementType.F32, (1, feat, size, size)))
    w = ops.Parameter(b, 1, Shape.array(ElementType.F32, (feat, feat, 3, 3)))
    ops.Conv(x, w, (1, 1), "SAME")

    def numpy_conv(a: np.ndarray, k: np.ndarray) -> np.ndarray:
        # The fastest plain-numpy formulation we know: gather the 9 shifted windows of the
        # padded input (im2col) and contract them with the kernel in one matmul.
        p = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
        cols = np.empty((a.shape[0], feat, 9, size, size), np.float32)
        for j, (dy, dx) in enumerate(np.ndindex(3, 3)):
            cols[:, :, j] = p[:, :, dy:dy + size, dx:dx + size]
        out = k.reshape(feat, feat * 9) @ cols.reshape(a.shape[0], feat * 9, size * size)
        return out.reshape(a.shape[0], feat, size, size)

    rng = np.random.default_rng(1)
    args = [rng.standard_normal((1, feat, size, size)).astype(np.float32),
            rng.standard_normal((feat, feat, 3, 3)).astype(np.float32)]
    return b.build(), numpy_conv, args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    opts = parser.parse_args()
    print(env.header())
    client = xlapy.Client("interpreter")
    print(f"{'case':<28}{'ours min':>10}{'ours med':>10}{'numpy min':>11}{'numpy med':>11}"
          f"{'ratio':>8}{'med ratio':>10}")
    for name, (comp, ref, args) in [("matmul+exp 1024x1024 f32", matmul_exp(1024)),
                                    ("conv 1x8x256x256 3x3 8->8", conv(256, 8))]:
        exe = client.compile(comp)
        got = exe.execute_and_transfer(args).to_numpy()
        np.testing.assert_allclose(got, ref(*args), rtol=1e-4, atol=1e-4)
        ours, theirs = timings(
            [lambda exe=exe, args=args: exe.execute_and_transfer(args).to_numpy(),
             lambda ref=ref, args=args: ref(*args)], opts.repeat)
        ratio = min(ours) / min(theirs)
        print(f"{name:<28}{min(ours):>10.2f}{statistics.median(ours):>10.2f}"
              f"{min(theirs):>11.2f}{statistics.median(theirs):>11.2f}{ratio:>8.2f}"
              f"{statistics.median(ours) / statistics.median(theirs):>10.2f}")


if __name__ == "__main__":
    main()
