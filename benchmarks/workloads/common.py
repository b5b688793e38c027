"""Helpers the reference workloads share: parameters, scalar constants, reducers."""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp
from xlapy.types import ElementType, Shape

F32 = ElementType.F32


def param(b: XlaBuilder, n: int, dims: Sequence[int], name: str = "") -> XlaOp:
    return ops.Parameter(b, n, Shape.array(F32, dims), name or f"p{n}")


def scalar(b: XlaBuilder, value: float) -> XlaOp:
    return ops.ConstantR0(b, value, F32)


def splat(b: XlaBuilder, value: float, dims: Sequence[int]) -> XlaOp:
    return ops.BroadcastInDim(scalar(b, value), list(dims), [])


def reducer(kind: str) -> XlaComputation:
    """f32 (a, b) -> a + b or max(a, b)."""
    r = XlaBuilder(f"{kind}_f32")
    x = ops.Parameter(r, 0, Shape.scalar(F32), "a")
    y = ops.Parameter(r, 1, Shape.scalar(F32), "b")
    (ops.Add if kind == "add" else ops.Max)(x, y)
    return r.build()


def row_reduce(x: XlaOp, kind: str, rows: int) -> XlaOp:
    """Reduce the last dimension of a [rows, cols] array; result [rows]."""
    init = scalar(x.builder, 0.0 if kind == "add" else float("-inf"))
    return ops.Reduce(x.builder, [x], [init], reducer(kind), [1])


def bcast_rows(v: XlaOp, dims: Sequence[int]) -> XlaOp:
    """[rows] -> [rows, cols] (each row gets its value)."""
    return ops.BroadcastInDim(v, list(dims), [0])
