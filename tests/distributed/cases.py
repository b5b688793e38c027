"""Programs run on both the threaded and the MPI grid (every collective, every strategy)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation, XlaOp
from xlapy.types import ElementType, Shape

F32 = Shape.scalar(ElementType.F32)
X = Shape.array(ElementType.F32, (8, 8))


def _add() -> XlaComputation:
    b = XlaBuilder("add")
    ops.Add(b.parameter(0, F32), b.parameter(1, F32))
    return b.build()


def _max() -> XlaComputation:
    b = XlaBuilder("max")
    ops.Max(b.parameter(0, F32), b.parameter(1, F32))
    return b.build()


def _groups(n: int) -> list[list[int]]:
    return [[0]] if n == 1 else [[1, 0]] if n == 2 else [list(range(n - 1, -1, -2)),
                                                         list(range(0, n, 2))]


def _build(fn: Callable[[XlaOp], XlaOp]) -> XlaComputation:
    b = XlaBuilder("case")
    fn(b.parameter(0, X))
    return b.build()


def cases(nr: int, np_: int) -> dict[str, tuple[XlaComputation, list[list[Any]]]]:
    rng = np.random.default_rng(nr * 10 + np_)
    args = [[rng.standard_normal((8, 8)).astype(np.float32)] for _ in range(nr * np_)]
    out: dict[str, Callable[[XlaOp], XlaOp]] = {}
    for name, channel, glob, size in [("cross_replica", None, None, nr),
                                      ("cross_replica_and_partition", 1, None, nr),
                                      ("flattened_ids", 1, True, nr * np_)]:
        ids = _groups(size)
        n = len(ids[0]) * (np_ if name == "cross_replica_and_partition" else 1)
        kw = {"channel_id": channel, "use_global_device_ids": glob}
        out[f"all_gather/{name}"] = lambda x, ids=ids, n=n, kw=kw: ops.AllGather(x, 1, n, ids,
                                                                                 **kw)
        out[f"all_reduce/{name}"] = lambda x, ids=ids, kw=kw: ops.AllReduce(x, _add(), ids, **kw)
        out[f"all_reduce_max/{name}"] = lambda x, ids=ids, kw=kw: ops.AllReduce(x, _max(), ids,
                                                                                **kw)
        out[f"reduce_scatter/{name}"] = lambda x, ids=ids, n=n, kw=kw: ops.ReduceScatter(
            x, _add(), 0, n, ids, **kw)
    for name, channel, size in [("cross_replica", None, nr), ("cross_partition", 1, np_)]:
        ids = _groups(size)
        pairs = [(i, (i + 1) % size) for i in range(size)]
        out[f"all_to_all/{name}"] = lambda x, ids=ids, c=channel: ops.AllToAll(
            x, 1, 0, len(ids[0]), ids, channel_id=c)
        out[f"collective_permute/{name}"] = lambda x, p=pairs, c=channel: ops.CollectivePermute(
            x, p, c)
        out[f"collective_broadcast/{name}"] = lambda x, ids=ids, c=channel: \
            ops.CollectiveBroadcast(x, ids[:1], c)
    return {k: (_build(fn), args) for k, fn in out.items()}
