"""Row softmax and layernorm: reductions feeding element-wise epilogues."""

from __future__ import annotations

from benchmarks.workloads.common import bcast_rows, param, row_reduce, splat
from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp


def softmax_rows(b: XlaBuilder, x: XlaOp, rows: int, cols: int) -> XlaOp:
    dims = (rows, cols)
    m = row_reduce(x, "max", rows)
    e = ops.Exp(ops.Sub(x, bcast_rows(m, dims)))
    s = row_reduce(e, "add", rows)
    return ops.Div(e, bcast_rows(s, dims))


def softmax(rows: int = 4096, cols: int = 4096) -> XlaComputation:
    """Row softmax of a rows x cols f32 matrix (max, exp, sum, divide)."""
    b = XlaBuilder("softmax")
    x = param(b, 0, (rows, cols), "x")
    return b.build(softmax_rows(b, x, rows, cols))


def layernorm(rows: int = 8192, cols: int = 1024, eps: float = 1e-5) -> XlaComputation:
    """(x - mean) / sqrt(var + eps) * scale + bias over the last dimension."""
    b = XlaBuilder("layernorm")
    dims = (rows, cols)
    x = param(b, 0, dims, "x")
    scale = param(b, 1, (cols,), "scale")
    bias = param(b, 2, (cols,), "bias")
    inv_n = 1.0 / cols
    mean = ops.Mul(row_reduce(x, "add", rows), splat(b, inv_n, (rows,)))
    xc = ops.Sub(x, bcast_rows(mean, dims))
    var = ops.Mul(row_reduce(ops.Mul(xc, xc), "add", rows), splat(b, inv_n, (rows,)))
    rs = ops.Rsqrt(ops.Add(var, splat(b, eps, (rows,))))
    y = ops.Mul(xc, bcast_rows(rs, dims))
    y = ops.Mul(y, ops.BroadcastInDim(scale, list(dims), [1]))
    y = ops.Add(y, ops.BroadcastInDim(bias, list(dims), [1]))
    return b.build(y)
