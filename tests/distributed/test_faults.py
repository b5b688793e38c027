"""Grid failures are loud and bounded: missing participants, raising processes, mismatched
shapes; plus channels and infeed/outfeed driven by the host while programs run."""

from __future__ import annotations

import time

import numpy as np
import pytest

from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation
from xlapy.distributed import ProcessGrid, ProcessGridError, ReplicatedExecutable
from xlapy.types import ElementType, Shape

F32 = Shape.scalar(ElementType.F32)
V4 = Shape.array(ElementType.F32, (4,))


def add() -> XlaComputation:
    b = XlaBuilder("add")
    ops.Add(b.parameter(0, F32), b.parameter(1, F32))
    return b.build()


def all_reduce_prog(shape: Shape = V4) -> XlaComputation:
    b = XlaBuilder("ar")
    ops.AllReduce(b.parameter(0, shape), add())
    return b.build()


def identity_prog() -> XlaComputation:
    b = XlaBuilder("id")
    ops.Neg(b.parameter(0, V4))
    return b.build()


def host_wait_prog() -> XlaComputation:
    """Waits for a host value on channel 9 that never comes."""
    b = XlaBuilder("wait")
    b.parameter(0, V4)
    tok = ops.RecvFromHost(ops.CreateToken(b), V4, 9)
    ops.GetTupleElement(tok, 0)
    return b.build()


def entries(*comps: XlaComputation) -> list:
    return [c.module.entry_computation() for c in comps]


ARGS = [[np.ones(4, np.float32)], [np.ones(4, np.float32)]]


def test_missing_participant_that_finished_fails_at_once() -> None:
    grid = ProcessGrid(2, 1, timeout=20)
    start = time.monotonic()
    with pytest.raises(ProcessGridError) as info:
        grid.run_programs(entries(all_reduce_prog(), identity_prog()), ARGS)
    assert time.monotonic() - start < 5
    err = info.value.errors
    assert list(err) == [(0, 0)]
    msg = str(err[(0, 0)])
    assert "all_reduce" in msg and "[(0, 0), (1, 0)]" in msg and "missing [(1, 0)]" in msg
    assert "finished without reaching it" in msg


def test_missing_participant_times_out_on_every_process() -> None:
    grid = ProcessGrid(2, 1, timeout=0.5)
    start = time.monotonic()
    with pytest.raises(ProcessGridError) as info:
        grid.run_programs(entries(all_reduce_prog(), host_wait_prog()), ARGS)
    assert time.monotonic() - start < 5
    err = info.value.errors
    assert set(err) == {(0, 0), (1, 0)}
    assert "timed out after 0.5s" in str(err[(0, 0)]) or "stopped because" in str(err[(0, 0)])
    assert "all_reduce" in str(err[(0, 0)])
    assert "channel 9" in str(err[(1, 0)])


def test_raising_process_stops_the_others() -> None:
    grid = ProcessGrid(3, 1, timeout=20)
    bad = [np.ones(5, np.float32)]  # wrong shape: process (2, 0) raises at once
    start = time.monotonic()
    with pytest.raises(ProcessGridError) as info:
        grid.run_programs(entries(*[all_reduce_prog()] * 3), [ARGS[0], ARGS[1], bad])
    assert time.monotonic() - start < 5
    err = info.value.errors
    assert set(err) == {(0, 0), (1, 0), (2, 0)}
    assert "argument 0" in str(err[(2, 0)])
    for pid in ((0, 0), (1, 0)):
        assert "stopped because process (2, 0) failed" in str(err[pid])
        assert "all_reduce" in str(err[pid])


def test_mismatched_shapes_fail_on_every_member() -> None:
    grid = ProcessGrid(2, 1, timeout=20)
    v3 = Shape.array(ElementType.F32, (3,))
    with pytest.raises(ProcessGridError) as info:
        grid.run_programs(entries(all_reduce_prog(), all_reduce_prog(v3)),
                          [ARGS[0], [np.ones(3, np.float32)]])
    err = info.value.errors
    assert set(err) == {(0, 0), (1, 0)}
    for e in err.values():
        assert "mismatched shapes" in str(e) and "float32[4]" in str(e) and "float32[3]" in str(e)


def test_device_channels_send_recv() -> None:
    sb = XlaBuilder("send")
    x = sb.parameter(0, V4)
    ops.Send(ops.Mul(x, x), 3)
    ops.Tuple(sb, [])
    rb = XlaBuilder("recv")
    y = rb.parameter(0, V4)
    ops.Add(ops.Recv(rb, V4, 3), y)
    grid = ProcessGrid(1, 2)
    out = grid.run_programs(entries(sb.build(), rb.build()),
                            [[np.arange(4, dtype=np.float32)], [np.ones(4, np.float32)]])
    np.testing.assert_array_equal(out[1], np.arange(4) ** 2 + 1)


def test_host_transfers_and_feeds_while_running() -> None:
    b = XlaBuilder("feeds")
    x = b.parameter(0, V4)
    tok = ops.CreateToken(b)
    fed = ops.InfeedWithToken(tok, V4)
    tok = ops.GetTupleElement(fed, 1)
    tok = ops.OutfeedWithToken(ops.Add(ops.GetTupleElement(fed, 0), x), tok, V4)
    host = ops.RecvFromHost(tok, V4, 4)
    rid = ops.ConvertElementType(ops.ReplicaId(b), ElementType.F32)
    ops.SendToHost(ops.Mul(ops.GetTupleElement(host, 0), rid), ops.GetTupleElement(host, 1),
                   V4, 5)
    ops.Tuple(b, [x])
    exe = ReplicatedExecutable(b.build(), 2, 1, timeout=10)
    future = exe.execute_async([[np.ones(4, np.float32)], [np.full(4, 2, np.float32)]])
    for r in range(2):
        exe.grid.infeed((r, 0)).put(np.full(4, 10 * (r + 1), np.float32))
    outs = [exe.grid.outfeed(r).get() for r in range(2)]
    np.testing.assert_array_equal(outs[0], np.full(4, 11))
    np.testing.assert_array_equal(outs[1], np.full(4, 22))
    exe.grid.host_send(4, np.full(4, 3, np.float32))
    exe.grid.host_send(4, np.full(4, 3, np.float32))
    got = sorted(exe.grid.host_recv(5).tolist() for _ in range(2))
    assert got == [[0.0] * 4, [3.0] * 4]
    assert len(future.result(timeout=10)) == 2


def test_empty_infeed_times_out_with_a_clear_error() -> None:
    b = XlaBuilder("feed")
    ops.Infeed(b, V4)
    grid = ProcessGrid(1, 1, timeout=0.3)
    with pytest.raises(ProcessGridError, match="infeed of process \\(0, 0\\): empty"):
        grid.run_computation(b.build(), [[]])
