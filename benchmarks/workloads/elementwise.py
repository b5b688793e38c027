"""Element-wise workloads: the tanh-GELU chain, 200 tiny ops, x + x.T, and a big sum."""

from __future__ import annotations

import math

from benchmarks.workloads.common import param, reducer, scalar, splat
from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp

#: Arithmetic ops in one tanh-GELU: x*x, *x, 0.044715*, x+, sqrt(2/pi)*, tanh, 1+, 0.5*x, *.
GELU_OPS = 9


def gelu(b: XlaBuilder, x: XlaOp, dims: tuple[int, ...]) -> XlaOp:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): 9 arithmetic ops."""
    cube = ops.Mul(ops.Mul(x, x), x)
    inner = ops.Add(x, ops.Mul(splat(b, 0.044715, dims), cube))
    t = ops.Tanh(ops.Mul(splat(b, math.sqrt(2 / math.pi), dims), inner))
    return ops.Mul(ops.Mul(splat(b, 0.5, dims), x), ops.Add(splat(b, 1.0, dims), t))


def gelu_chain(n: int = 8 * 1024 * 1024, layers: int = 7) -> XlaComputation:
    """7 stacked tanh-GELUs = 63 element-wise ops on n f32 (8M by default)."""
    b = XlaBuilder("gelu_chain")
    x = param(b, 0, (n,), "x")
    for _ in range(layers):
        x = gelu(b, x, (n,))
    return b.build(x)


def tiny_ops(count: int = 200, n: int = 4) -> XlaComputation:
    """200 element-wise ops on tiny f32[4] values (per-op overhead dominates)."""
    b = XlaBuilder("tiny_ops")
    x = param(b, 0, (n,), "x")
    y = param(b, 1, (n,), "y")
    acc = x
    kinds = [ops.Add, ops.Mul, ops.Sub, ops.Max]
    for i in range(count):
        acc = kinds[i % 4](acc, y if i % 3 else x)
    return b.build(acc)


def x_plus_xt(n: int = 4096) -> XlaComputation:
    """x + transpose(x) on an n x n f32 matrix."""
    b = XlaBuilder("x_plus_xt")
    x = param(b, 0, (n, n), "x")
    return b.build(ops.Add(x, ops.Transpose(x, [1, 0])))


def big_sum(n: int = 64 * 1024 * 1024) -> XlaComputation:
    """sum of n f32 (64M by default)."""
    b = XlaBuilder("big_sum")
    x = param(b, 0, (n,), "x")
    return b.build(ops.Reduce(b, [x], [scalar(b, 0.0)], reducer("add"), [0]))
