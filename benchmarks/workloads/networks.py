"""Small networks: a 3-layer MLP, a 2-layer 3x3 CNN, single-head attention, a fori_loop."""

from __future__ import annotations

import math

from benchmarks.workloads.common import F32, param, splat
from benchmarks.workloads.normalization import softmax_rows
from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp
from xlapy.types import ElementType, Shape


def _dense(b: XlaBuilder, x: XlaOp, w: XlaOp, bias: XlaOp, rows: int, cols: int,
           relu: bool) -> XlaOp:
    y = ops.Add(ops.Dot(x, w), ops.BroadcastInDim(bias, [rows, cols], [1]))
    return ops.Max(y, splat(b, 0.0, (rows, cols))) if relu else y


def mlp(batch: int = 256, sizes: tuple[int, ...] = (784, 512, 256, 10)) -> XlaComputation:
    """relu(x W1 + b1) -> relu(. W2 + b2) -> . W3 + b3."""
    b = XlaBuilder("mlp")
    x = param(b, 0, (batch, sizes[0]), "x")
    n = 1
    for i, (k, m) in enumerate(zip(sizes, sizes[1:])):
        w = param(b, n, (k, m), f"w{i}")
        bias = param(b, n + 1, (m,), f"b{i}")
        n += 2
        x = _dense(b, x, w, bias, batch, m, relu=i < len(sizes) - 2)
    return b.build(x)


def cnn(batch: int = 8, size: int = 64, channels: tuple[int, ...] = (3, 16, 16)
        ) -> XlaComputation:
    """Two 3x3 SAME convolutions (NCHW / OIHW) with bias and relu."""
    b = XlaBuilder("cnn")
    x = param(b, 0, (batch, channels[0], size, size), "x")
    n = 1
    for i, (cin, cout) in enumerate(zip(channels, channels[1:])):
        w = param(b, n, (cout, cin, 3, 3), f"w{i}")
        bias = param(b, n + 1, (cout,), f"b{i}")
        n += 2
        dims = [batch, cout, size, size]
        y = ops.ConvWithGeneralPadding(x, w, [1, 1], [(1, 1), (1, 1)], [1, 1], [1, 1])
        y = ops.Add(y, ops.BroadcastInDim(bias, dims, [1]))
        x = ops.Max(y, splat(b, 0.0, dims))
    return b.build(x)


def attention(seq: int = 1024, dim: int = 128) -> XlaComputation:
    """softmax(q k^T / sqrt(d)) v for one head."""
    b = XlaBuilder("attention")
    q = param(b, 0, (seq, dim), "q")
    k = param(b, 1, (seq, dim), "k")
    v = param(b, 2, (seq, dim), "v")
    s = ops.DotGeneral(q, k, (((1,), (1,)), ((), ())))
    s = ops.Mul(s, splat(b, 1.0 / math.sqrt(dim), (seq, seq)))
    return b.build(ops.Dot(softmax_rows(b, s, seq, seq), v))


def fori_loop(iterations: int = 1000, n: int = 1024) -> XlaComputation:
    """for i in range(1000): x = x * 0.999 + 1 (an s32 counter and an f32[n] carry)."""
    s32 = ElementType.S32
    state = Shape.tuple([Shape.scalar(s32), Shape.array(F32, (n,))])
    cb = XlaBuilder("cond")
    st = ops.Parameter(cb, 0, state, "state")
    ops.Lt(ops.GetTupleElement(st, 0), ops.ConstantR0(cb, iterations, s32))
    cond = cb.build()
    bb = XlaBuilder("body")
    st = ops.Parameter(bb, 0, state, "state")
    i = ops.GetTupleElement(st, 0)
    x = ops.GetTupleElement(st, 1)
    x = ops.Add(ops.Mul(x, splat(bb, 0.999, (n,))), splat(bb, 1.0, (n,)))
    ops.Tuple(bb, [ops.Add(i, ops.ConstantR0(bb, 1, s32)), x])
    body = bb.build()
    b = XlaBuilder("fori_loop")
    x0 = param(b, 0, (n,), "x")
    out = ops.While(cond, body, ops.Tuple(b, [ops.ConstantR0(b, 0, s32), x0]))
    return b.build(ops.GetTupleElement(out, 1))
