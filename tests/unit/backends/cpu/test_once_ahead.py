"""once.py's ahead builds (issue 14): what a compile knows its program's first run will build
(the worker pool's code, region/chain runners, the while driver, library GEMM modules) is
built on a background thread as the compile returns. The first call then uses that very
build (no second one), a failure there reaches the first call (neither lost nor a hang), and
a fork after a compile still works."""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import once as once_mod
from xlapy.backends.cpu import threads, while_driver
from xlapy.backends.cpu.once import ahead, collecting, once, start, wait

WHILE_LOOP = """
func.func @main(%x: tensor<8xf32>, %n: tensor<i32>) -> (tensor<i32>, tensor<8xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<8xf32>
    cond {
      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i2 = stablehlo.add %i, %one : tensor<i32>
      %h = stablehlo.constant dense<0.5> : tensor<8xf32>
      %v2 = stablehlo.multiply %v, %h : tensor<8xf32>
      stablehlo.return %i2, %v2 : tensor<i32>, tensor<8xf32>
    }
  return %r#0, %r#1 : tensor<i32>, tensor<8xf32>
}
"""

MATMUL = """
func.func @main(%x: tensor<64x256xf32>, %w: tensor<256x256xf32>) -> tensor<64x256xf32> {
  %d = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
      : (tensor<64x256xf32>, tensor<256x256xf32>) -> tensor<64x256xf32>
  %t = stablehlo.tanh %d : tensor<64x256xf32>
  return %t : tensor<64x256xf32>
}
"""


def _call(fn: Any, timeout: float = 30.0) -> Any:
    """fn() on another thread, failing (not hanging) the test past `timeout`."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "the call hung"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_the_build_started_ahead_is_the_one_the_first_call_uses() -> None:
    built: list[int] = []
    began = threading.Event()

    @once
    def build(k: int) -> object:
        began.set()
        built.append(k)
        time.sleep(0.05)  # the first call asks while the build runs: it waits for it
        return object()

    with collecting() as builds:
        ahead(build, 1)
        ahead(build, 1)  # asked twice in one compile: queued once
    assert builds == [(build, (1,))]
    start(builds)
    assert began.wait(10)
    first = _call(lambda: build(1))
    assert built == [1] and build(1) is first
    wait()
    assert built == [1]


def test_ahead_outside_a_compile_builds_nothing() -> None:
    @once
    def build() -> object:
        raise AssertionError("built")

    ahead(build)  # no `collecting` block: nothing queued
    wait()


def test_plain_functions_are_left_to_the_first_run_and_the_thread_survives() -> None:
    """A stand-in without `prebuild` (a test's recording builder) is not queued; one queued
    anyway does not end the build thread, which later compiles still use."""
    def plain() -> object:
        raise AssertionError("built ahead")

    with collecting() as builds:
        ahead(plain)
    assert builds == []
    start([(plain, ())])  # queued directly: no prebuild, skipped
    built: list[int] = []

    @once
    def build() -> object:
        built.append(1)
        return object()

    start([(build, ())])
    wait()
    assert built == [1]


def test_a_failed_ahead_build_is_raised_by_the_first_call_then_retried() -> None:
    calls: list[int] = []

    @once
    def build() -> object:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("no code for you")
        return "built"

    start([(build, ())])
    wait()
    assert calls == [1]
    with pytest.raises(RuntimeError, match="no code for you"):
        _call(build)
    assert calls == [1]  # the kept error, not a second build
    assert _call(build) == "built" and calls == [1, 1]


def test_compile_queues_what_its_first_run_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    queued: list[list[tuple[Any, tuple[Any, ...]]]] = []
    monkeypatch.setattr(once_mod, "start", lambda builds: queued.append(list(builds)))
    xlapy.compile(WHILE_LOOP, backend="cpu")
    assert (while_driver.driver_for, ("ftz",)) in queued[-1]
    xlapy.compile(MATMUL, backend="cpu", options={"num_threads": 2})
    assert (threads._native, ()) in queued[-1]


def test_programs_run_right_after_compile_match_the_interpreter() -> None:
    x = np.arange(8, dtype=np.float32)
    got = xlapy.compile(WHILE_LOOP, backend="cpu")(x, np.int32(3))
    want = xlapy.compile(WHILE_LOOP, backend="interpreter")(x, np.int32(3))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 256), dtype=np.float32)
    w = rng.standard_normal((256, 256), dtype=np.float32) / 16
    got = xlapy.compile(MATMUL, backend="cpu", options={"num_threads": 2})(a, w)
    np.testing.assert_allclose(got, np.tanh(a @ w), rtol=1e-5, atol=1e-5)


def _child_run(x: np.ndarray) -> list[np.ndarray]:
    prog = xlapy.compile(WHILE_LOOP, backend="cpu")
    return [np.asarray(v) for v in prog(x, np.int32(4))]


def test_wait_is_bounded() -> None:
    release = threading.Event()

    @once
    def stuck() -> object:
        release.wait(10)
        return object()

    start([(stuck, ())])
    assert wait(0.05) is False  # still building: the bounded wait returns
    release.set()
    assert wait(10) is True


def test_fork_right_after_a_compile_with_a_build_in_flight() -> None:
    """The fork waits for the build thread (a child would inherit a lock it holds, and no
    thread to release it); the child, with no build thread, starts its own."""
    gate = threading.Event()

    @once
    def slow() -> object:
        gate.wait(0.3)
        return object()

    start([(slow, ())])
    xlapy.compile(WHILE_LOOP, backend="cpu")  # queues the while driver behind it
    x = np.arange(8, dtype=np.float32)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply_async(_child_run, (x,)).get(timeout=120)
    want = _child_run(x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
