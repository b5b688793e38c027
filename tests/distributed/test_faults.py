"""Grid failures are loud and bounded: missing participants, raising processes, mismatched
shapes; plus channels and infeed/outfeed driven by the host while programs run."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from xlapy.builder import ops
from xlapy.builder.xla_builder import XlaBuilder, XlaComputation
from xlapy.distributed import ProcessGrid, ProcessGridError, ReplicatedExecutable
from xlapy.errors import CollectiveError
from xlapy.ops.misc import register_custom_call
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


def send_prog(channel: int) -> XlaComputation:
    """Sends x * x on `channel`; returns x."""
    b = XlaBuilder("send")
    x = b.parameter(0, V4)
    ops.Send(ops.Mul(x, x), channel)
    return b.build()


def recv_prog(channel: int) -> XlaComputation:
    """Receives a V4 on `channel` and adds its argument."""
    b = XlaBuilder("recv")
    y = b.parameter(0, V4)
    ops.Add(ops.Recv(b, V4, channel), y)
    return b.build()


@pytest.mark.parametrize("channel", [3, -5, 1 << 40])
def test_device_channels_send_recv_any_64_bit_id(channel: int) -> None:
    grid = ProcessGrid(1, 2)
    out = grid.run_programs(entries(send_prog(channel), recv_prog(channel)),
                            [[np.arange(4, dtype=np.float32)], [np.ones(4, np.float32)]])
    np.testing.assert_array_equal(out[1], np.arange(4) ** 2 + 1)


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


# ---- processes that never finish --------------------------------------------------------------
def forever_prog() -> XlaComputation:
    """A while loop whose condition is always true."""
    cb = XlaBuilder("always")
    cb.parameter(0, V4)
    ops.ConstantR0(cb, True)
    bb = XlaBuilder("step")
    ops.Neg(bb.parameter(0, V4))
    b = XlaBuilder("forever")
    ops.While(cb.build(), bb.build(), b.parameter(0, V4))
    return b.build()


BLOCK_SECONDS = 3.0


def _block(operands: list, shape: object, attrs: object) -> object:
    time.sleep(BLOCK_SECONDS)  # stands for a host call that never returns
    return operands[0]


register_custom_call("xlapy_test_block", _block)


def blocking_prog() -> XlaComputation:
    """Blocks in a custom call (no grid interaction, no loop to poll)."""
    b = XlaBuilder("block")
    ops.CustomCall(b, "xlapy_test_block", [b.parameter(0, V4)], V4)
    return b.build()


def mismatched_op_prog() -> XlaComputation:
    b = XlaBuilder("ag")
    ops.AllGather(b.parameter(0, V4), 0, 2)
    return b.build()


def _no_grid_threads_left(timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not [t for t in threading.enumerate() if t.name.startswith("xlapy-process-")]:
            return True
        time.sleep(0.05)
    return False


def test_process_looping_forever_is_abandoned_with_what_it_was_doing() -> None:
    grid = ProcessGrid(2, 1, timeout=0.5)
    start = time.monotonic()
    with pytest.raises(ProcessGridError) as info:
        grid.run_programs(entries(identity_prog(), forever_prog()), ARGS)
    assert time.monotonic() - start < 5
    err = info.value.errors
    assert list(err) == [(1, 0)]
    msg = str(err[(1, 0)])
    assert "process (1, 0) did not finish within 0.5s after the others [(0, 0)] ended" in msg
    assert "running while %" in msg and "iteration" in msg
    assert _no_grid_threads_left()  # the loop stopped at its next poll


def test_process_looping_forever_is_stopped_by_a_peer_timing_out_on_it() -> None:
    grid = ProcessGrid(2, 1, timeout=0.5)
    start = time.monotonic()
    with pytest.raises(ProcessGridError) as info:
        grid.run_programs(entries(all_reduce_prog(), forever_prog()), ARGS)
    assert time.monotonic() - start < 5
    err = info.value.errors
    assert "all_reduce" in str(err[(0, 0)]) and "missing [(1, 0)]" in str(err[(0, 0)])
    assert "while %" in str(err[(1, 0)])
    assert "stopped because process (0, 0) failed" in str(err[(1, 0)])
    assert _no_grid_threads_left()


def test_process_blocked_outside_the_grid_is_abandoned() -> None:
    grid = ProcessGrid(2, 1, timeout=0.5)
    start = time.monotonic()
    with pytest.raises(ProcessGridError) as info:
        grid.run_programs(entries(identity_prog(), blocking_prog()), ARGS)
    assert time.monotonic() - start < BLOCK_SECONDS - 1
    msg = str(info.value.errors[(1, 0)])
    assert "process (1, 0) did not finish within 0.5s" in msg
    assert "computing (no grid interaction yet)" in msg and "in _block" in msg
    assert _no_grid_threads_left(BLOCK_SECONDS + 2)
    # the grid still works after abandoning a process
    out = grid.run_programs(entries(all_reduce_prog(), all_reduce_prog()), ARGS)
    np.testing.assert_array_equal(out[1], np.full(4, 2))


def test_mismatched_collective_ops_time_out_naming_both() -> None:
    grid = ProcessGrid(2, 1, timeout=0.5)
    with pytest.raises(ProcessGridError) as info:
        grid.run_programs(entries(all_reduce_prog(), mismatched_op_prog()), ARGS)
    err = info.value.errors
    assert set(err) == {(0, 0), (1, 0)}
    text = str(info.value)
    assert "all_reduce" in text and "all_gather" in text
    # Whichever process's 0.5 s runs out first times out naming the other as missing; the
    # other is then stopped naming that failure (either order: both wait from their arrival).
    assert ("missing [(1, 0)]" in text or "missing [(0, 0)]" in text) and "timed out" in text


def test_grid_timeout_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAPY_GRID_TIMEOUT", "0.25")
    assert ProcessGrid(2).timeout == 0.25
    assert ProcessGrid(2, timeout=3).timeout == 3
    monkeypatch.setenv("XLAPY_GRID_TIMEOUT", "soon")
    with pytest.raises(CollectiveError, match="XLAPY_GRID_TIMEOUT='soon'"):
        ProcessGrid(2)
